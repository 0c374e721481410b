"""Health rules, damping against flapping, derived card health, the alerts API."""
from __future__ import annotations

import numpy as np
import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone

from tests.telemetry.test_state import put
from twin.telemetry import keys, processing, state
from twin.telemetry.alerts import EvalInput, commit, decide, rules, settle
from twin.telemetry.metrics import METRIC_INDEX, N_METRICS
from twin.telemetry.models import Alert, CardHealth


class Harness:
    """Drives the rules for one card with chosen readings and clock, as a tick does:
    :func:`decide`, then :func:`commit` and :func:`settle` at once (a tick splits them
    around its event)."""

    def __init__(self, cluster_id: int, card_id: int) -> None:
        self.cluster_id, self.card_id = cluster_id, card_id
        self.state: bytes | None = None
        self.events: list[tuple[str, str]] = []

    def step(self, now: float, **readings: float) -> None:
        values = np.full((N_METRICS, 1), np.nan, np.float32)
        for key, value in readings.items():
            values[METRIC_INDEX[key], 0] = value
        inp = EvalInput(now=now, values=values, fresh=np.ones(1, bool),
                        stale=np.zeros(1, bool), age_s=np.zeros(1), tdp_w=np.full(1, 700.0),
                        util_ewma=np.full(1, np.nan), rack_draw_w=np.zeros(0),
                        rack_budget_w=np.zeros(0))
        d = decide(
            inp, self.state or b"\x80", cluster_id=self.cluster_id,
            subject_of=lambda rule, pos: {"subject": f"card:{self.card_id}",
                                          "card_id": self.card_id,
                                          "label": f"card {self.card_id}"},
            load_open=lambda: [], position_of=lambda level, subject: None)
        [(transitions, opened)] = commit([d.ops])
        self.state = settle(d.packed(), d.ops, opened)
        self.events += [(t.event, t.rule.key) for t in transitions]


def test_an_alert_opens_only_after_its_minimum_duration_and_closes_past_hysteresis(
        tiny_cluster):
    card = tiny_cluster["cards"][0]
    h = Harness(tiny_cluster["cluster"].pk, card.pk)
    rule = next(r for r in rules() if r.key == "gpu_temp")
    assert (rule.threshold, rule.clear, rule.min_s, rule.clear_s) == (85.0, 82.0, 5.0, 15.0)
    h.step(0, gpu_temp_c=86)
    h.step(3, gpu_temp_c=86)
    assert h.events == [] and not Alert.objects.exists()  # pending, not yet 5 s
    h.step(5.5, gpu_temp_c=87)
    assert h.events == [("opened", "gpu_temp")]
    alert = Alert.objects.get()
    assert alert.card_id == card.pk and alert.severity == "warning" and alert.value == 87
    assert alert.started.timestamp() == 0.0  # when the condition began, not when it opened
    h.step(6, gpu_temp_c=84)  # under the threshold but above the hysteresis point: still open
    h.step(7, gpu_temp_c=81)  # clearing starts
    h.step(10, gpu_temp_c=86)  # back up: clearing resets
    h.step(11, gpu_temp_c=81)
    h.step(25, gpu_temp_c=80)  # 14 s of clear: not yet
    assert h.events == [("opened", "gpu_temp")]
    h.step(26.5, gpu_temp_c=80)
    assert h.events == [("opened", "gpu_temp"), ("closed", "gpu_temp")]
    alert.refresh_from_db()
    assert alert.ended is not None and alert.ended.timestamp() == pytest.approx(26.5)


def test_a_value_flapping_around_the_threshold_opens_one_alert(tiny_cluster):
    card = tiny_cluster["cards"][0]
    h = Harness(tiny_cluster["cluster"].pk, card.pk)
    for second in range(6):
        h.step(float(second), gpu_temp_c=86)
    # Then two minutes of wobble: around the threshold, with 1 s dips below the
    # hysteresis point every 5 s. Without damping this would open and close ~40 times.
    for second in range(6, 126):
        h.step(float(second), gpu_temp_c=80 if second % 5 == 0 else (86 if second % 2 else 84))
    assert h.events == [("opened", "gpu_temp")]
    assert Alert.objects.get().ended is None
    # A value that crosses the threshold for shorter than min_s never opens one.
    h2 = Harness(tiny_cluster["cluster"].pk, tiny_cluster["cards"][1].pk)
    for second in range(60):
        h2.step(float(second), link_latency_ns=250 if second % 4 == 0 else 150)
    assert h2.events == []


def test_xid_and_ecc_open_at_once_and_are_critical(tiny_cluster):
    h = Harness(tiny_cluster["cluster"].pk, tiny_cluster["cards"][0].pk)
    h.step(0, xid_errors=79, ecc_errors=2, rdma_latency_us=1.5, link_latency_ns=160)
    assert sorted(h.events) == [("opened", "ecc"), ("opened", "xid")]
    assert set(Alert.objects.values_list("severity", flat=True)) == {"critical"}
    assert Alert.objects.get(rule="xid").message.endswith("XID 79")


def rack_world(tiny_cluster, settings) -> tuple[int, list[int]]:
    settings.TELEMETRY_THRESHOLDS = {r.key: {"min_s": 0.0, "clear_s": 0.0} for r in rules()}
    return tiny_cluster["cluster"].pk, [c.pk for c in tiny_cluster["cards"]]


def test_a_rack_over_its_budget_raises_a_critical_alert(tiny_cluster, settings):
    cid, ids = rack_world(tiny_cluster, settings)
    from twin.hardware.models import Rack

    Rack.objects.filter(pk=tiny_cluster["rack"].pk).update(power_budget_w=6_000)
    state.touch_layout(cid)
    put(cid, {"power_w": [600] * 8}, cards=ids)  # 4.8 kW + 1,885 W overhead > 6 kW
    processing.tick(cid, force=True)
    alert = Alert.objects.get(rule="rack_power")
    assert alert.severity == "critical" and alert.rack_id == tiny_cluster["rack"].pk
    assert alert.value == pytest.approx(6_685) and alert.threshold == 6_000
    assert "6.7 kW over its 6.0 kW budget" in alert.message
    # Card health is per card: a hot rack alone does not make its cards unhealthy.
    assert not CardHealth.objects.exists()
    put(cid, {"power_w": [300] * 8}, cards=ids)
    processing.tick(cid, force=True)
    alert.refresh_from_db()
    assert alert.ended is not None


def test_card_health_follows_the_worst_open_alert(tiny_cluster, settings, admin_client_api):
    cid, ids = rack_world(tiny_cluster, settings)
    put(cid, {"gpu_temp_c": [70, 88, 95, 70, 70, 70, 70, 70],
              "xid_errors": [0, 0, 0, 48, 0, 0, 0, 0]}, cards=ids)
    processing.tick(cid, force=True)
    names = [state.HEALTH_NAMES[h] for h in state.health(cid, ids)]
    assert names == ["ok", "warning", "critical", "critical", "ok", "ok", "ok", "ok"]
    rows = {r.card_id: (r.status, r.reasons) for r in CardHealth.objects.all()}
    assert rows == {ids[1]: ("warning", "gpu_temp"),
                    ids[2]: ("critical", "gpu_temp,gpu_temp_critical"),
                    ids[3]: ("critical", "xid")}
    listed = admin_client_api.get(f"/api/telemetry/health/?cluster={cid}&status=critical")
    assert sorted(r["card"] for r in listed.json()["results"]) == [ids[2], ids[3]]
    card = admin_client_api.get(f"/api/telemetry/cards/{ids[2]}/").json()
    assert card["health"] == "critical" and card["health_detail"]["status"] == "critical"
    assert sorted(a["rule"] for a in card["alerts"]) == ["gpu_temp", "gpu_temp_critical"]


def test_a_sudden_utilization_drop_is_flagged(tiny_cluster, settings):
    cid, ids = rack_world(tiny_cluster, settings)
    put(cid, {"gpu_util": [95] * 8}, cards=ids)
    processing.tick(cid, force=True)  # the 1-minute average starts at 95 %
    put(cid, {"gpu_util": [95] * 7 + [3]}, cards=ids)
    processing.tick(cid, force=True)
    alert = Alert.objects.get(rule="util_drop")
    assert alert.card_id == ids[7] and "fell to 3 %" in alert.message


def test_the_alerts_api_lists_filters_and_acknowledges(tiny_cluster, settings, reader_client,
                                                       admin_client_api, staff_user):
    cid, ids = rack_world(tiny_cluster, settings)
    put(cid, {"gpu_temp_c": [95, 70, 70, 70, 70, 70, 70, 70],
              "rdma_latency_us": [1.0, 3.0, 1, 1, 1, 1, 1, 1]}, cards=ids)
    processing.tick(cid, force=True)
    url = "/api/telemetry/alerts/"
    everything = admin_client_api.get(url, {"cluster": cid}).json()["results"]
    assert sorted(a["rule"] for a in everything) == ["gpu_temp", "gpu_temp_critical",
                                                     "rdma_latency"]
    critical = admin_client_api.get(url, {"severity": "critical", "active": "true"}).json()
    assert [a["rule"] for a in critical["results"]] == ["gpu_temp_critical"]
    by_card = admin_client_api.get(url, {"card": ids[1]}).json()["results"]
    assert [a["rule"] for a in by_card] == ["rdma_latency"]
    target = by_card[0]["id"]
    # A reader may look but not acknowledge; an operator with change_alert may.
    assert reader_client.get(url).status_code == 200
    assert reader_client.post(f"{url}{target}/acknowledge/").status_code == 403
    staff_user.user_permissions.add(Permission.objects.get(codename="change_alert"))
    from rest_framework.test import APIClient

    operator = APIClient()
    operator.force_authenticate(staff_user)
    acked = operator.post(f"{url}{target}/acknowledge/").json()
    assert acked["acknowledged_by"] == "operator" and acked["acknowledged_at"]
    assert admin_client_api.get(url, {"acknowledged": "true"}).json()["results"][0]["id"] == \
        target
    assert admin_client_api.get(url, {"acknowledged": "false"}).json()["count"] == 2
    assert admin_client_api.post(url, {}).status_code == 405  # rows come from the rules only
    assert reader_client.get(url, {"severity": "apocalyptic"}).status_code == 400


def test_live_endpoints_for_people(tiny_cluster, settings, reader_client, anon_client):
    cid, ids = rack_world(tiny_cluster, settings)
    put(cid, {"power_w": [500] * 8, "gpu_util": [80] * 8}, cards=ids)
    processing.tick(cid, force=True)
    live = reader_client.get(f"/api/telemetry/clusters/{cid}/").json()
    assert live["reporting"] == 8 and live["power_draw_w"] == pytest.approx(4_000 + 1_885)
    roll = reader_client.get(f"/api/telemetry/clusters/{cid}/rollup/",
                             {"level": "rack", "metric": "gpu_util"}).json()
    assert roll["mean"] == [80.0, ] and roll["names"] == ["r0"]
    bad = reader_client.get(f"/api/telemetry/clusters/{cid}/rollup/",
                            {"level": "row", "metric": "x"})
    assert bad.status_code == 400 and set(bad.json()) == {"level", "metric"}
    card = reader_client.get(f"/api/telemetry/cards/{ids[0]}/",
                             {"history": "power_w", "n": 5}).json()
    assert card["metrics"]["power_w"] == 500 and card["history"]["points"][-1][1] == 500
    metrics = reader_client.get("/api/telemetry/metrics/").json()
    assert len(metrics) >= 20 and metrics[0]["key"] == "gpu_util"
    assert anon_client.get(f"/api/telemetry/clusters/{cid}/").status_code == 401


def test_cards_that_start_reporting_ok_cost_the_health_table_nothing(tiny_cluster):
    """unknown → ok is synced without a write to CardHealth (only bad cards have rows):
    a million cards starting up must not mean a million row deletes."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    cid = tiny_cluster["cluster"].pk
    state.redis_client().set(keys.tick_gate(cid), 1, px=60_000)  # the drain does not tick
    put(cid, {"gpu_util": [50] * 8})
    with CaptureQueriesContext(connection) as queries:
        assert processing.tick(cid, force=True)
    writes = [q["sql"] for q in queries.captured_queries if "cardhealth" in q["sql"].lower()
              and not q["sql"].lstrip().upper().startswith("SELECT")]
    assert writes == []  # (one SELECT: health_db is new, so the table is read once)
    assert (state.health(cid) == state.HEALTH_CODES["ok"]).all()
    raw = state.redis_client().get(keys.health_db(cid, state.layout(cid).version))
    assert raw == bytes([state.HEALTH_CODES["ok"]]) * 8  # the table reflects it


def test_a_row_left_from_before_a_redis_restart_goes_when_its_card_is_ok(tiny_cluster):
    """Without ``health_db`` (Redis lost it) the tick starts from the table itself."""
    cid = tiny_cluster["cluster"].pk
    card = tiny_cluster["cards"][0]
    CardHealth.objects.create(card=card, cluster_id=cid, status="stale", reasons="stale",
                              since=timezone.now())
    put(cid, {"gpu_util": [50] * 8})
    processing.tick(cid, force=True)
    assert not CardHealth.objects.exists()
