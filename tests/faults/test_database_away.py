"""The database unreachable: the real ASGI server answers 503 JSON with
``Retry-After`` — for DRF endpoints and the plain ingest views alike — and keeps
running (issue 11, item 1)."""
from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request

from tests.conftest import asgi_server
from twin.core.localnet import free_port


def request(url: str, method: str = "GET", body: bytes | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """(status, headers with lower-case names, body)."""
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            return (response.status, {k.lower(): v for k, v in response.headers.items()},
                    response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()


def test_an_unreachable_database_is_503_not_a_crash():
    from django.conf import settings

    env = dict(os.environ)
    env.update(DJANGO_SETTINGS_MODULE="twin.settings_test", REDIS_URL=settings.REDIS_URL,
               # PostgreSQL on a port where nothing listens: every query fails to connect.
               DATABASE_URL=f"postgres://twin:secret@127.0.0.1:{free_port()}/twin")
    with asgi_server(env, "database-away-uvicorn.log", "/api/telemetry/whoami/") as base:
        calls = [
            ("GET", "/api/clusters/", None, {"Authorization": "Token " + "a" * 40}),
            ("POST", "/api/scenarios/", json.dumps({"kind": "topology"}).encode(),
             {"Authorization": "Token " + "a" * 40, "Content-Type": "application/json"}),
            ("POST", "/api/telemetry/clusters/1/batches/", b'{"seq": 1, "cards": []}',
             {"Authorization": "Bearer " + "b" * 40, "Content-Type": "application/json"}),
            ("GET", "/api/telemetry/whoami/", None, {"Authorization": "Bearer " + "c" * 40}),
        ]
        for _ in range(2):  # the server is still there for the second round
            for method, path, body, headers in calls:
                started = time.monotonic()
                status, got, raw = request(base + path, method, body, headers)
                assert status == 503, (path, status, raw[:300])
                assert time.monotonic() - started < 5.0, path
                assert got["content-type"] == "application/json", path
                assert int(got["retry-after"]) >= 1, path
                answer = json.loads(raw)
                assert answer["service"] == "database" and "database" in answer["detail"]
