"""A frozen Redis (SIGSTOP: it accepts connections but never answers) is told within
a second (issue 22, item 6): ``/healthz/`` and the live read endpoints answer 503,
through the fast probe of ``twin.core.unavailable.check_redis``, while the clients
that do the work keep their longer timeout (large pipelines must not time out).

On a redis-server of this test's own (``RedisServer``), never the machine's.
"""
from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.test import override_settings

from tests.faults.redis_server import RedisServer

pytestmark = pytest.mark.django_db


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        with override_settings(REDIS_URL=server.url):
            yield server
    finally:
        if server.proc is not None:
            os.kill(server.proc.pid, signal.SIGCONT)
        server.close()


def timed(get) -> tuple[float, object]:
    started = time.monotonic()
    response = get()
    return time.monotonic() - started, response


def test_a_frozen_redis_turns_healthz_and_the_live_endpoints_503_within_a_second(
        private_redis, admin_client, tiny_cluster):
    from django.conf import settings

    cluster = tiny_cluster["cluster"]
    card = tiny_cluster["cards"][0]
    live = [f"/api/telemetry/clusters/{cluster.pk}/",
            f"/api/telemetry/clusters/{cluster.pk}/rollup/?level=rack&metric=power_w",
            f"/api/telemetry/cards/{card.pk}/"]
    assert admin_client.get("/healthz/").status_code == 200
    for url in live:
        assert admin_client.get(url).status_code == 200, url

    os.kill(private_redis.proc.pid, signal.SIGSTOP)
    elapsed, response = timed(lambda: admin_client.get("/healthz/"))
    assert response.status_code == 503, response.content
    assert "Timeout" in response.json()["redis"]
    assert elapsed <= 1.0, f"/healthz/ took {elapsed:.2f} s"
    for url in live:
        elapsed, response = timed(lambda url=url: admin_client.get(url))
        assert response.status_code == 503, (url, response.content)
        assert response.json()["service"] == "redis"
        assert elapsed <= 1.0, f"{url} took {elapsed:.2f} s"
    # The working clients keep the longer timeout: only the probe is short.
    assert settings.REDIS_SOCKET_TIMEOUT_S > 1.0

    os.kill(private_redis.proc.pid, signal.SIGCONT)
    assert admin_client.get("/healthz/").status_code == 200
    for url in live:
        assert admin_client.get(url).status_code == 200, url
