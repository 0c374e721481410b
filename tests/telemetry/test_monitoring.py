"""The twin's own ``GET /metrics`` (``twin.web.metrics``; telemetry's figures are most
of it): what it exposes, read from the shared stores (so any process answers for
all), who may read it, and a scrape that survives Redis away."""
from __future__ import annotations

import datetime as dt
import json

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from tests.faults.away import redis_away
from tests.telemetry.conftest import batches_url, drain_now
from twin.live import clients
from twin.telemetry import keys, state

pytestmark = pytest.mark.django_db


def scrape(client: Client | None = None, **extra) -> dict[tuple[str, tuple], float]:
    response = (client or Client()).get("/metrics", **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    out = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_the_figures_come_from_the_database_and_redis(agent):
    from twin.scenarios.models import ScenarioRun
    from twin.telemetry.models import Alert

    cluster, cards, rack = agent["cluster"], agent["cards"], agent["rack"]
    doc = {"seq": 1, "cards": [{"card": c.pk, "power_w": 600.0, "gpu_util": 90} for c in cards]}
    response = agent["client"].post(batches_url(cluster.pk), json.dumps(doc),
                                    content_type="application/json")
    assert response.status_code == 202
    c = str(cluster.pk)
    before = scrape()
    assert before[("twin_ingest_stream_length", ())] == 1  # queued, not yet applied
    assert before[("twin_ingest_stream_oldest_age_seconds", ())] >= 0
    drain_now()
    Alert.objects.create(cluster=cluster, rule="util_drop", severity="warning", level="card",
                         subject=f"card:{cards[0].pk}", card=cards[0], message="x",
                         started=dt.datetime.now(dt.UTC))
    ScenarioRun.objects.create(kind="topology", status="running")
    ScenarioRun.objects.create(kind="topology", status="succeeded")
    m = scrape()
    assert m[("twin_ingest_card_samples_total", (("cluster", c),))] == 8
    assert m[("twin_ingest_batches_total", (("cluster", c),))] == 1
    assert m[("twin_ingest_stream_length", ())] == 0
    assert m[("twin_alerts_open", (("cluster", c), ("rule", "util_drop"),
                                   ("severity", "warning")))] == 1
    assert m[("twin_scenario_runs", (("kind", "topology"), ("status", "running")))] == 1
    assert m[("twin_scenario_runs", (("kind", "topology"), ("status", "queued")))] == 0
    assert m[("twin_telemetry_tick_seconds_count", (("cluster", c),))] >= 1
    assert m[("twin_telemetry_tick_seconds_sum", (("cluster", c),))] > 0
    assert m[("twin_cluster_cards_reporting", (("cluster", c),))] == 8
    rack_labels = (("cluster", c), ("rack", rack.name))
    draw = m[("twin_rack_power_draw_watts", rack_labels)]
    assert draw == pytest.approx(8 * 600 + state.rollup(cluster.pk, "rack", "power_w")
                                 ["static_w"][0])
    assert m[("twin_rack_power_budget_watts", rack_labels)] == 40_000
    assert m[("twin_racks_over_budget", (("cluster", c),))] == 0
    assert m[("twin_source_up", (("source", "telemetry_redis"),))] == 1


def test_ticks_of_other_processes_are_summed(agent):
    """A worker elsewhere wrote its ticks to Redis: this process reports them."""
    cid = agent["cluster"].pk
    r = state.redis_client()
    r.sadd(keys.clusters(), cid)
    r.hset(keys.tick_stats(cid), mapping={"count": 41, "sum": 2.5, "last": 0.07})
    m = scrape()
    assert m[("twin_telemetry_tick_seconds_count", (("cluster", str(cid)),))] == 41
    assert m[("twin_telemetry_tick_last_seconds", (("cluster", str(cid)),))] == 0.07


def test_websocket_clients_of_every_process_are_summed(db):
    r = state.redis_client()
    prefix = clients._prefix()
    r.set(f"{prefix}:hostA-1", 3, ex=60)
    r.set(f"{prefix}:hostB-2", 4, ex=60)
    try:
        assert scrape()[("twin_websocket_clients", ())] == 7
    finally:
        r.delete(f"{prefix}:hostA-1", f"{prefix}:hostB-2")


def test_only_the_allowed_networks_or_the_token_may_read(db, settings):
    far = {"REMOTE_ADDR": "10.1.2.3"}
    assert Client().get("/metrics", **far).status_code == 403
    settings.TWIN_METRICS_ALLOW = ["10.1.0.0/16"]
    scrape(**far)
    settings.TWIN_METRICS_ALLOW = []
    settings.TWIN_METRICS_TOKEN = "s3cret-metrics"
    response = Client().get("/metrics")  # not even loopback now
    assert response.status_code == 401 and "Bearer" in response["WWW-Authenticate"]
    wrong = Client(HTTP_AUTHORIZATION="Bearer nope").get("/metrics", **far)
    assert wrong.status_code == 401
    scrape(Client(HTTP_AUTHORIZATION="Bearer s3cret-metrics"), **far)


def test_a_scrape_answers_while_redis_is_away(db):
    with redis_away():
        m = scrape()
    assert m[("twin_source_up", (("source", "telemetry_redis"),))] == 0
    assert m[("twin_source_up", (("source", "telemetry_database"),))] == 1


def test_the_sample_grafana_dashboard_asks_only_for_what_metrics_exposes(agent):
    """docs/grafana/twin.json must not chart a series the twin never exposes."""
    import re
    from pathlib import Path

    doc = json.loads((Path(__file__).resolve().parents[2] / "docs/grafana/twin.json")
                     .read_text())
    asked = {name for panel in doc["panels"] for target in panel["targets"]
             for name in re.findall(r"\btwin_[a-z_]+", target["expr"])}
    agent["client"].post(batches_url(agent["cluster"].pk), json.dumps(
        {"seq": 1, "cards": [{"card": agent["cards"][0].pk, "power_w": 500}]}),
        content_type="application/json")
    drain_now()
    from twin.scenarios.models import ScenarioRun
    from twin.telemetry.models import Alert

    ScenarioRun.objects.create(kind="topology")
    Alert.objects.create(cluster=agent["cluster"], rule="xid", severity="critical",
                         level="card", subject="card:1", message="x",
                         started=dt.datetime.now(dt.UTC))
    exposed = {name for name, _ in scrape()}
    assert asked and asked <= exposed, asked - exposed
