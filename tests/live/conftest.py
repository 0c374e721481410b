"""Fixtures for the websocket tests: session cookies, the real ASGI app, a live server.

The consumer tests drive ``twin.asgi.application`` — origin validation, the
session/auth middleware, the URL router and the consumer — with Channels'
``WebsocketCommunicator`` on the real Redis channel layer. The tests are plain
synchronous functions that run their async body with ``async_to_sync``: the
consumer's ``database_sync_to_async`` calls then come back to the test's own
thread and database connection. They use ``transactional_db`` because the
channel layer, the telemetry state and (for end-to-end tests) the worker and
server processes live outside the test's transaction.

The plain ``websockets`` client tests use the telemetry tests' uvicorn
(``tests.telemetry.conftest.telemetry_server``: its Celery messages go to the
session worker's queue) and log in through its real ``/login/`` form.
"""
from __future__ import annotations

import http.cookiejar
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from channels.layers import channel_layers
from channels.testing.websocket import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from tests.telemetry.conftest import PREFIX, flush_namespace

# Several sessions (other test runs, a demo) may share one Redis: this session's
# channel-layer groups get a prefix of their own, as its telemetry keys do
# (``tests.telemetry.conftest``). Set at import, before any worker or server
# subprocess starts, so they inherit it.
CHANNEL_PREFIX = os.environ.setdefault("TWIN_CHANNEL_PREFIX", f"twintest{uuid.uuid4().hex[:8]}")
settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"] = CHANNEL_PREFIX
channel_layers.backends.clear()

__all__ = [
    "CHANNEL_PREFIX",
    "ORIGIN",
    "PREFIX",
    "communicator",
    "login_over_http",
    "receive_type",
    "session_headers",
]

ORIGIN = b"http://testserver"


def session_headers(user: User | None) -> list[tuple[bytes, bytes]]:
    """Headers a logged-in browser sends: Origin, Host and the session cookie.

    The session is made by Django's test client (a real row in the session
    table), so the websocket goes through the same cookie → session → user path
    as a browser's.
    """
    headers = [(b"origin", ORIGIN), (b"host", b"testserver")]
    if user is not None:
        client = Client()
        client.force_login(user)
        cookie = client.cookies["sessionid"].value
        headers.append((b"cookie", f"sessionid={cookie}".encode()))
    return headers


def communicator(cluster_id: int, headers: list[tuple[bytes, bytes]]) -> WebsocketCommunicator:
    """A communicator on the full ASGI application (make ``headers`` outside the
    event loop: the session is written with the ORM)."""
    from twin.asgi import application

    return WebsocketCommunicator(application, f"/ws/clusters/{cluster_id}/", headers=headers)


async def receive_type(comm: WebsocketCommunicator, kind: str, timeout: float = 3.0,
                       skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The next message of type ``kind``, skipping the types in ``skip``."""
    deadline = time.monotonic() + timeout
    while True:
        left = max(deadline - time.monotonic(), 0.01)
        message = await comm.receive_json_from(timeout=left)
        if message["type"] == kind:
            return message
        assert message["type"] in skip, f"expected {kind!r}, got {message}"


@pytest.fixture(autouse=True)
def live_namespace(request: pytest.FixtureRequest, settings: Any) -> Iterator[None]:
    """Each test starts from empty telemetry state and empty per-process caches.
    Without the real worker no Celery message may leave the test process."""
    from twin.live import frames

    settings.TELEMETRY_AUTO_DRAIN = "celery_worker" in request.fixturenames
    flush_namespace()
    frames.frame_cache.clear()
    yield
    flush_namespace()
    frames.frame_cache.clear()


def login_over_http(base: str, username: str, password: str) -> str:
    """Log in through the real ``/login/`` form (GET for the CSRF token, then POST);
    return the ``sessionid`` cookie the server set."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with opener.open(f"{base}/login/", timeout=10) as response:
        html = response.read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    assert token, "the login form has no CSRF token"
    body = urllib.parse.urlencode({"username": username, "password": password,
                                   "csrfmiddlewaretoken": token.group(1), "next": "/"}).encode()
    request = urllib.request.Request(f"{base}/login/", data=body, headers={"Referer":
                                                                          f"{base}/login/"})
    try:
        opener.open(request, timeout=10).close()
    except urllib.error.HTTPError as exc:
        # The redirect target (the dashboard) may answer 503 without a frontend build;
        # the login itself has happened if the cookie is set.
        if exc.code != 503:
            raise
    cookies = {cookie.name: cookie.value for cookie in jar}
    assert "sessionid" in cookies, f"login as {username} failed: no session cookie"
    return cookies["sessionid"]
