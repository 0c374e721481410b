"""Fixtures of the telemetry tests: an isolated Redis namespace, agents, a live server.

Several test sessions (and a demo) may share one Redis, so this session gets a
key prefix of its own, set before any worker or server subprocess starts (they
inherit ``TWIN_TELEMETRY_PREFIX``), and every test starts from an empty
namespace and empty per-process caches.

Tests without the real worker set ``TELEMETRY_AUTO_DRAIN`` off, so no Celery
message leaves them, and apply the stream themselves with ``drain_now()`` —
the same code the worker runs.
"""
from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.conf import settings
from django.test import Client

from tests.conftest import _worker_env, asgi_server, wait_for_other_sessions_to_close

PREFIX = os.environ.setdefault("TWIN_TELEMETRY_PREFIX", f"twtest{uuid.uuid4().hex[:8]}")
settings.TELEMETRY_REDIS_PREFIX = PREFIX


def flush_namespace() -> None:
    from twin.telemetry import state
    from twin.telemetry.api import ingest_views
    from twin.telemetry.processing import apply, shards, ticks
    from twin.telemetry.state import layouts

    r = state.redis_client()
    batch = list(r.scan_iter(match=f"{PREFIX}:*", count=1000))
    for i in range(0, len(batch), 500):
        r.unlink(*batch[i:i + 500])
    layouts._layouts.clear()
    apply._initialized.clear()
    apply._bucket_cache.clear()
    ticks._tick_cost.clear()
    shards.round_cost.clear()
    shards._initialized.clear()
    ingest_views._cache.clear()


@pytest.fixture(autouse=True)
def telemetry_namespace(request: pytest.FixtureRequest, settings: Any) -> Iterator[None]:
    settings.TELEMETRY_AUTO_DRAIN = "celery_worker" in request.fixturenames
    flush_namespace()
    yield
    flush_namespace()


def drain_now() -> dict[str, int]:
    """Apply everything queued, in this process (what ``tasks.drain`` does)."""
    from twin.telemetry import processing
    from twin.telemetry.enqueue import drainers

    total = {"entries": 0, "ticks": 0}
    for slot in range(drainers()):
        stats = processing.drain(slot)
        for k in total:
            total[k] += stats[k]
    return total


@pytest.fixture
def issue_agent(db) -> Callable[..., tuple[Any, str]]:
    from twin.telemetry.models import TelemetryAgent

    def issue(cluster: Any, name: str = "agent") -> tuple[Any, str]:
        return TelemetryAgent.issue(cluster, name)

    return issue


@pytest.fixture
def agent(tiny_cluster, issue_agent) -> dict[str, Any]:
    """An agent of the tiny cluster with its token and a client that sends it."""
    row, token = issue_agent(tiny_cluster["cluster"])
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    return {"agent": row, "token": token, "client": client, **tiny_cluster}


def batches_url(cluster_id: int) -> str:
    return f"/api/telemetry/clusters/{cluster_id}/batches/"


def metrics_url(cluster_id: int) -> str:
    return f"/api/telemetry/clusters/{cluster_id}/metrics/"


def wait_for(check: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
    """Poll ``check`` until it returns something other than None/False; return that."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value is not None and not (isinstance(value, (bool, np.bool_)) and not value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


@pytest.fixture(scope="session")
def telemetry_server(celery_worker: str, django_db_setup, django_db_blocker) -> Iterator[str]:
    """A real ``uvicorn twin.asgi:application`` on the test database whose Celery
    messages go to the session worker's queue (so its kicks are drained)."""
    from django.db import connection

    with django_db_blocker.unblock():
        db_settings = dict(connection.settings_dict)
    env = _worker_env(db_settings)
    env["TWIN_CELERY_QUEUE"] = celery_worker
    env["TWIN_TELEMETRY_PREFIX"] = PREFIX
    try:
        with asgi_server(env, "telemetry-uvicorn.log", "/api/telemetry/whoami/") as base:
            yield base
    finally:
        with django_db_blocker.unblock():
            wait_for_other_sessions_to_close(connection)


@pytest.fixture
def dcgm_exporter() -> Iterator[str]:
    """A DCGM exporter: a local HTTP server serving the captured exposition of node0's
    eight H100s at ``/metrics`` (404 elsewhere); yields its ``host:port``."""
    body = (Path(__file__).parent / "data" / "dcgm_node0.prom").read_bytes()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if self.path != "/metrics":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
