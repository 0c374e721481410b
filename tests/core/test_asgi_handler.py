"""The ASGI handler of the web processes (twin.core.asgi_handler): the whole middleware
chain and the view on one request thread, threads kept between requests, and the
cached pages still right (a write then a read sees the write; another user never gets
a page computed for someone else), driven through the real ASGI application."""
from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import HttpCommunicator
from django.urls import reverse
from rest_framework.authtoken.models import Token

from twin.core import aggregates
from twin.core.asgi_handler import PooledASGIHandler

pytestmark = pytest.mark.django_db(transaction=True)


def get(app: Any, path: str, token: str | None = None, method: str = "GET",
        body: bytes = b"") -> tuple[int, Any]:
    headers = [(b"host", b"testserver")]
    if token:
        headers.append((b"authorization", f"Token {token}".encode()))
    if body:
        headers += [(b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())]
    answer = async_to_sync(HttpCommunicator(app, method, path, body=body,
                                            headers=headers).get_response)(timeout=30)
    return answer["status"], json.loads(answer["body"] or b"null")


@pytest.fixture
def handlers():
    """Handlers made by a test; their kept threads' database connections closed after
    it (they would hold the test database open), their threads stopped."""
    from django.db import connections

    made: list[PooledASGIHandler] = []

    def make() -> PooledASGIHandler:
        made.append(PooledASGIHandler())
        return made[-1]

    yield make
    for handler in made:
        for executor in handler._idle:
            executor.submit(connections.close_all).result()
            executor.shutdown()


def test_the_chain_runs_on_one_kept_thread(admin_user, handlers):
    """Every middleware hook and the view of a request run on one thread (no hop per
    hook), and the next request reuses it."""
    from django.contrib.auth.middleware import AuthenticationMiddleware
    from django.middleware.common import CommonMiddleware

    seen: list[tuple[str, int]] = []
    originals = (CommonMiddleware.process_request, AuthenticationMiddleware.process_request)

    def spy(name: str, original: Any) -> Any:
        def wrapped(self: Any, request: Any) -> Any:
            seen.append((name, threading.get_ident()))
            return original(self, request)
        return wrapped

    CommonMiddleware.process_request = spy("common", originals[0])  # type: ignore[method-assign]
    AuthenticationMiddleware.process_request = spy("auth", originals[1])  # type: ignore[method-assign]
    try:
        app = handlers()
        token = Token.objects.create(user=admin_user).key
        for _ in range(2):
            status, body = get(app, reverse("api:cluster-list"), token)
            assert status == 200, body
    finally:
        CommonMiddleware.process_request = originals[0]  # type: ignore[method-assign]
        AuthenticationMiddleware.process_request = originals[1]  # type: ignore[method-assign]
    assert [name for name, _ in seen] == ["common", "auth", "common", "auth"]
    assert len({ident for _, ident in seen}) == 1, "one thread, kept for the next request"
    assert len(app._idle) == 1


def test_a_write_then_a_read_through_the_server_sees_the_write(admin_user, reader,
                                                               tiny_cluster, handlers):
    app = handlers()
    admin = Token.objects.create(user=admin_user).key
    other = Token.objects.create(user=reader).key
    card = tiny_cluster["cards"][0]
    url = reverse("api:card-list") + f"?cluster={tiny_cluster['cluster'].pk}&limit=100"

    def statuses(token: str) -> dict[int, str]:
        status, body = get(app, url, token)
        assert status == 200, body
        return {row["id"]: row["status"] for row in body["results"]}

    assert statuses(admin)[card.pk] == "ok"
    assert statuses(admin)[card.pk] == "ok"  # (cached now)
    status, body = get(app, reverse("api:card-detail", args=[card.pk]), admin, "PATCH",
                       b'{"status": "degraded"}')
    assert status == 200, body
    assert statuses(admin)[card.pk] == "degraded"
    assert statuses(other)[card.pk] == "degraded"


def test_one_aggregates_cache_per_process_and_configuration(settings):
    first = aggregates._cache()
    assert aggregates._cache() is first, "every request shares one client (one pool)"
    settings.CACHES = {**settings.CACHES, "aggregates": {
        **settings.CACHES["aggregates"], "LOCATION": "redis://127.0.0.1:9/0"}}
    assert aggregates._cache() is not first, "a changed setting gets its own client"


def test_web_threads_limit_readers_but_never_the_agents_batches(admin_user, handlers,
                                                                settings, monkeypatch):
    """``TWIN_WEB_THREADS = 1``: while one read runs, a second read waits for the slot
    (it has not entered the chain) but an agent's batch POST goes through at once."""
    import asyncio

    from django.middleware.common import CommonMiddleware

    settings.TWIN_WEB_THREADS = 1
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "1")
    entered: list[str] = []
    release = threading.Event()
    original = CommonMiddleware.process_request

    def spy(self: Any, request: Any) -> Any:
        entered.append(request.path)
        if request.path.startswith("/api/clusters/"):
            release.wait(20)
        return original(self, request)

    monkeypatch.setattr(CommonMiddleware, "process_request", spy)
    app = handlers()
    assert app.threads == 1
    token = Token.objects.create(user=admin_user).key
    headers = [(b"host", b"testserver"), (b"authorization", f"Token {token}".encode())]

    def request(path: str, method: str = "GET") -> Any:
        return HttpCommunicator(app, method, path, headers=headers).get_response(timeout=30)

    async def run() -> tuple[Any, Any, Any]:
        first = asyncio.ensure_future(request("/api/clusters/"))
        while not entered:
            await asyncio.sleep(0.01)
        second = asyncio.ensure_future(request("/api/clusters/?limit=1"))
        batch = await request("/api/telemetry/clusters/999999/batches/", "POST")
        waiting = list(entered)
        release.set()
        return (await first), (await second), (batch, waiting)

    first, second, (batch, waiting) = asyncio.run(run())
    assert waiting == ["/api/clusters/", "/api/telemetry/clusters/999999/batches/"], (
        "the second read waited for the slot; the batch did not")
    assert batch["status"] in (401, 404)  # (no agent token: refused, but served)
    assert first["status"] == 200 and second["status"] == 200
