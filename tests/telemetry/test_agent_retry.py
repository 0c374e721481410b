"""The telemetry agent against a server that is not ready yet (issue 22, item 5).

Started while the twin refuses connections, then answers 503 (Redis or the
database not up yet) and 429, the agent waits with a backoff and then streams;
it exits only on a 4xx that retrying cannot fix, with one readable line and a
non-zero status. The server in front is a small proxy that misbehaves on purpose
and then hands every request to the real uvicorn server and worker.
"""
from __future__ import annotations

import http.client
import io
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest
from django.core.management import call_command

from tests.conftest import ROOT, _worker_env
from twin.core.localnet import free_port
from twin.telemetry.models import TelemetryAgent

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


class FlakyFront:
    """Listens only after ``delay_s``, then answers the given statuses in turn, then
    forwards to ``target``. Records what it answered."""

    def __init__(self, target: str, failures: list[int], delay_s: float) -> None:
        self.target = urlsplit(target)
        self.failures = list(failures)
        self.answered: list[int] = []
        self.port = free_port()
        self.delay_s = delay_s
        self.server: ThreadingHTTPServer | None = None
        self.lock = threading.Lock()
        self.started = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        front = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with front.lock:
                    failure = front.failures.pop(0) if front.failures else None
                if failure is not None:
                    payload = b'{"detail": "not ready (test)"}'
                    self.send_response(failure)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Retry-After", "0")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    front.answered.append(failure)
                    return
                conn = http.client.HTTPConnection(front.target.hostname, front.target.port,
                                                  timeout=30)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("host", "connection")}
                conn.request(self.command, self.path, body=body or None, headers=headers)
                answer = conn.getresponse()
                payload = answer.read()
                conn.close()
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() in ("content-type", "retry-after", "www-authenticate"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                front.answered.append(answer.status)

            do_GET = do_POST = _handle  # noqa: N815 - http.server's naming

        def serve() -> None:
            if self.delay_s:
                threading.Event().wait(self.delay_s)  # refused connections meanwhile
            self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
            self.started.set()
            self.server.serve_forever(poll_interval=0.1)

        threading.Thread(target=serve, daemon=True).start()

    def stop(self) -> None:
        self.started.wait(10)
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


@pytest.fixture
def flaky_front(telemetry_server: str) -> Iterator[FlakyFront]:
    front = FlakyFront(telemetry_server, [503, 503, 503, 429, 502], delay_s=1.5)
    front.start()
    yield front
    front.stop()


def test_the_agent_started_before_the_server_waits_and_then_streams(
        celery_worker, flaky_front, tiny_cluster):
    out = io.StringIO()
    call_command("telemetry_agent", "--cluster", "tiny", "--url", flaky_front.url, "--hz", "2",
                 "--batches", "3", "--duration", "120", "--fault-rate", "0", "--backoff-max", "1",
                 stdout=out, stderr=out)
    output = out.getvalue()
    # It met every kind of passing failure, said so once, and streamed afterwards.
    assert {503, 429, 502} <= set(flaky_front.answered), flaky_front.answered
    assert "retrying with a backoff" in output, output
    assert 202 in flaky_front.answered
    agent = TelemetryAgent.objects.get(cluster=tiny_cluster["cluster"], name="sim-tiny")
    assert agent.batches == 3 and agent.samples == 8 * 3


def test_a_4xx_that_retrying_cannot_fix_ends_the_agent_in_one_line(
        celery_worker, telemetry_server, tiny_cluster):
    from django.db import connection

    env = _worker_env(dict(connection.settings_dict))
    result = subprocess.run(
        [sys.executable, "manage.py", "telemetry_agent", "--cluster", "tiny", "--url",
         telemetry_server, "--token", "twa_not-a-token-anyone-issued", "--duration", "30"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "(401)" in lines[0] and "invalid or deactivated agent token" in lines[0]
