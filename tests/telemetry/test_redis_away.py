"""Redis away: ingestion and the live read endpoints answer 503 JSON with
``Retry-After`` at once, store nothing, and work again when it is back
(issue 11, item 1). The stop/restart of a real server under load is
``tests/faults/test_redis_outage.py``."""
from __future__ import annotations

import json
import time

import pytest

from tests.faults.away import redis_away
from tests.telemetry.conftest import batches_url, metrics_url
from twin.telemetry.models import TelemetryAgent

pytestmark = pytest.mark.django_db


def assert_unavailable(response, started: float) -> dict:
    assert time.monotonic() - started < 1.0, "a 503 must come at once, not after retries"
    assert response.status_code == 503, response.content
    assert response["Content-Type"] == "application/json"
    assert int(response["Retry-After"]) >= 1
    body = response.json()
    assert body["service"] == "redis" and "Redis" in body["detail"]
    return body


def test_ingestion_answers_503_with_retry_after_and_stores_nothing(agent):
    cluster, cards = agent["cluster"], agent["cards"]
    doc = {"seq": 7, "cards": [{"card": c.pk, "power_w": 500.0} for c in cards]}
    with redis_away():
        started = time.monotonic()
        response = agent["client"].post(batches_url(cluster.pk), json.dumps(doc),
                                        content_type="application/json")
        assert_unavailable(response, started)
        started = time.monotonic()
        response = agent["client"].post(
            metrics_url(cluster.pk), 'DCGM_FI_DEV_POWER_USAGE{gpu="0"} 300\n',
            content_type="text/plain")
        assert_unavailable(response, started)
    row = TelemetryAgent.objects.get(pk=agent["agent"].pk)
    assert row.batches == 0 and row.last_sequence is None  # nothing recorded
    # Redis back: the same batch (same seq) is accepted.
    response = agent["client"].post(batches_url(cluster.pk), json.dumps(doc),
                                    content_type="application/json")
    assert response.status_code == 202, response.content
    assert response.json()["accepted"] == len(cards)


def test_live_read_endpoints_answer_503(agent, admin_client_api):
    cluster, card = agent["cluster"], agent["cards"][0]
    # The layout is the agents' read (their token), the rest the dashboard's.
    reads = [(admin_client_api, f"/api/telemetry/clusters/{cluster.pk}/"),
             (admin_client_api,
              f"/api/telemetry/clusters/{cluster.pk}/rollup/?level=rack&metric=power_w"),
             (admin_client_api, f"/api/telemetry/cards/{card.pk}/"),
             (agent["client"], f"/api/telemetry/clusters/{cluster.pk}/layout/")]
    with redis_away():
        for client, url in reads:
            started = time.monotonic()
            assert_unavailable(client.get(url), started)
    for client, url in reads:
        assert client.get(url).status_code == 200, url
