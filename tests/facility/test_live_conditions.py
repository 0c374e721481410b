"""The live plant under real conditions: an element's status and failed units set through
the API, and the site's weather at now, reach the next tick (real Redis, real tick)."""
from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.telemetry.conftest import flush_namespace
from tests.telemetry.test_state import put
from twin.facility import live
from twin.telemetry import processing, state


@pytest.fixture(autouse=True)
def namespace(settings: Any) -> Iterator[None]:
    settings.TELEMETRY_AUTO_DRAIN = False
    settings.FACILITY_LIVE_RECHECK_S = 0.0  # every tick looks for facility edits
    settings.TELEMETRY_THRESHOLDS = {k: {"min_s": 0.0, "clear_s": 0.0}
                                     for k in ("coolant_flow", "coolant_supply", "cdu_load")}
    flush_namespace()
    live._cache.clear()
    yield
    flush_namespace()
    live._cache.clear()


def _tick(w: dict[str, Any], watts: float = 600.0) -> dict[str, Any]:
    cid = w["cluster"].pk
    put(cid, {"power_w": [watts] * 8}, cards=[c.pk for c in w["cards"]])
    assert processing.tick(cid, force=True)
    s = state.plant_summary(cid)
    assert s is not None
    return s


def _r0(w: dict[str, Any]) -> dict[str, float]:
    cid = w["cluster"].pk
    lay = state.layout(cid)
    racks = state.plant_racks(cid, lay.version)
    assert racks is not None
    k = lay.groups["rack"].names.index("r0")
    return {name: float(v[k]) for name, v in racks.items()}


def test_a_cdu_that_fails_through_the_api_stops_its_loop_and_the_flow_alert_fires(
        plant_world: dict[str, Any], staff_client: Any) -> None:
    from twin.telemetry.models import Alert

    w = plant_world
    cid = w["cluster"].pk
    url = f"/api/facility/cooling/{w['cdu'].pk}/"
    before = _tick(w)
    design = _r0(w)
    assert before["cdus"][0]["flow_kg_s"] == pytest.approx(2.4)
    assert before["out_of_service"] == [] and before["ambient"]["source"] == "design"
    # N+1: one of the CDU's two modules trips, the other carries the design flow
    got = staff_client.patch(url, {"units_failed": 1}, format="json")
    assert got.status_code == 200, got.content
    one = _tick(w)
    assert one["cdus"][0]["flow_kg_s"] == pytest.approx(2.4)
    assert _r0(w)["flow_ratio"] == pytest.approx(1.0)
    assert one["out_of_service"] == [{"key": "cdu-0", "kind": "cdu", "chain": "cooling",
                                      "status": "ok", "units": 2, "units_failed": 1}]
    assert not Alert.objects.filter(cluster_id=cid, rule="coolant_flow").exists()
    # more failed units than it has: 400 on the field
    bad = staff_client.patch(url, {"units_failed": 3}, format="json")
    assert bad.status_code == 400 and "units_failed" in bad.json()
    # the whole CDU fails: no flow on r0's loop, its coolant heats, the alert opens
    got = staff_client.patch(url, {"status": "failed", "units_failed": 0}, format="json")
    assert got.status_code == 200, got.content
    time.sleep(0.3)
    down = _tick(w)
    first = _r0(w)
    assert down["cdus"][0]["flow_kg_s"] == 0.0 and first["flow_kg_s"] == 0.0
    assert first["flow_ratio"] == 0.0
    assert first["return_c"] > design["return_c"]
    cdu = next(e for e in live.rated_rows(down["rated"]) if e["key"] == "cdu-0")
    assert cdu["available_w"] == 0.0 and cdu["headroom_w"] <= 0.0
    opened = Alert.objects.get(cluster_id=cid, rule="coolant_flow", ended__isnull=True)
    assert opened.severity == "critical" and opened.subject == f"rack:{w['rack'].pk}"
    time.sleep(0.3)
    _tick(w)
    assert _r0(w)["return_c"] > first["return_c"]  # no flow: heats until something trips
    # repaired: the flow is back and the alert closes
    assert staff_client.patch(url, {"status": "ok"}, format="json").status_code == 200
    back = _tick(w)
    assert back["cdus"][0]["flow_kg_s"] == pytest.approx(2.4) and back["out_of_service"] == []
    assert not Alert.objects.filter(cluster_id=cid, rule="coolant_flow",
                                    ended__isnull=True).exists()


def test_a_hot_weather_point_at_now_raises_the_coolant_supply(
        plant_world: dict[str, Any], staff_client: Any) -> None:
    w = plant_world
    cid = w["cluster"].pk
    cool = _tick(w)
    assert cool["ambient"] == {"dry_bulb_c": 35.0, "wet_bulb_c": 24.0, "source": "design"}
    now = time.time()
    hot = [[now - 3600, 44.0, 33.0], [now + 3600, 46.0, 35.0]]  # Unix times around now
    got = staff_client.patch(f"/api/facility/sites/{w['site'].pk}/", {"weather": hot},
                             format="json")
    assert got.status_code == 200, got.content
    # start the plant from its steady state under the new weather
    from twin.telemetry.config import conf

    state.redis_client().delete(live.state_key(conf().prefix, cid))
    s = _tick(w)
    amb = s["ambient"]
    assert amb["source"] == "weather" and 44.0 < amb["dry_bulb_c"] < 46.0
    assert 33.0 < amb["wet_bulb_c"] < 35.0
    # the tower cannot hold its setpoint (design wet bulb + approach, 28 °C) on a wet
    # bulb of ~34 °C, nor cool below the wet bulb: the facility water, the CDU supply
    # (31 °C on the design day) and the rack's coolant all rise above it
    assert cool["cdus"][0]["supply_c"] == pytest.approx(31.0)
    assert s["cdus"][0]["supply_c"] > amb["wet_bulb_c"] > cool["cdus"][0]["supply_c"]
    assert _r0(w)["supply_c"] > amb["wet_bulb_c"]


def test_every_rated_element_s_headroom_in_the_frame_and_metrics(
        plant_world: dict[str, Any]) -> None:
    from tests.telemetry.test_monitoring import scrape
    from twin.live import frames
    from twin.live.protocol import SubscriptionKey

    cid = plant_world["cluster"].pk
    s = _tick(plant_world)
    rated = {e["key"]: e for e in live.rated_rows(s["rated"])}
    assert set(rated) == {"feed-0", "ups-0", "pdu-r0", "ct-0", "cdu-0", "crah-0"}
    pdu = rated["pdu-r0"]
    # the PDU carries the racks' IT (and the loss of its own conversion): 2N of 100 kW
    assert pdu["rating_w"] == 100e3 and pdu["headroom_w"] == pytest.approx(
        100e3 - pdu["load_w"], rel=1e-6)
    assert pdu["load_w"] > s["it_w"]
    cdu, tower = rated["cdu-0"], rated["ct-0"]
    assert cdu["rating_w"] == 100e3 and cdu["load_w"] == pytest.approx(s["cdus"][0]["heat_w"])
    assert tower["rating_w"] == 300e3 and 0 < tower["load_fraction"] < 1
    built = frames.build(cid, SubscriptionKey("cluster", None, "power_w"))
    plant = built.extra["facility"]
    assert {e["key"]: e["headroom_w"] for e in live.rated_rows(plant["rated"])} == {
        k: e["headroom_w"] for k, e in rated.items()}
    assert plant["ambient"]["source"] == "design" and plant["out_of_service"] == []
    got = scrape()
    c = str(cid)
    assert got[("twin_facility_element_headroom_watts",
                (("chain", "cooling"), ("cluster", c), ("element", "ct-0"),
                 ("kind", "cooling_tower")))] == pytest.approx(tower["headroom_w"])
    assert got[("twin_facility_element_load_ratio",
                (("chain", "power"), ("cluster", c), ("element", "ups-0"),
                 ("kind", "ups")))] == pytest.approx(rated["ups-0"]["load_fraction"])
    assert got[("twin_facility_pdu_load_ratio", (("cluster", c), ("pdu", "pdu-r0")))] == \
        pytest.approx(s["pdus"][0]["load_fraction"])
    assert got[("twin_facility_pdu_input_watts", (("cluster", c), ("pdu", "pdu-r0")))] == \
        pytest.approx(pdu["load_w"])
    assert got[("twin_facility_ambient_celsius", (("bulb", "wet"), ("cluster", c)))] == 24.0


def test_a_failed_feed_moves_its_load_to_the_survivor_and_an_alert_names_it(
        plant_world: dict[str, Any], staff_client: Any, settings: Any) -> None:
    """A feed element's units are its utility feeds (lines A and B of a 2N pair). A
    failed one has no capacity: its load moves to the units left (the model's
    ``available_w``), the ``feed_headroom`` rule fires on them when they are short, and
    ``feed_failed`` names the feed, through the real tick."""
    from django.utils import timezone

    from twin.facility.models import PowerElement
    from twin.telemetry.models import Alert

    settings.TELEMETRY_THRESHOLDS = {k: {"min_s": 0.0, "clear_s": 0.0}
                                     for k in ("feed_headroom", "feed_failed")}
    w = plant_world
    cid = w["cluster"].pk
    url = f"/api/facility/power/{w['feed'].pk}/"

    def open_alerts() -> dict[str, Alert]:
        return {a.rule: a for a in Alert.objects.filter(
            cluster_id=cid, rule__in=("feed_headroom", "feed_failed"), ended__isnull=True)}

    # 2N: each of the two feeds carries the whole load; one fails, the other carries it
    # within its rating: the feed is named, no headroom alert
    ok = _tick(w)
    load = ok["feeds"][0]["input_w"]
    assert ok["feeds"][0]["units_out"] == 0 and not open_alerts()
    assert staff_client.patch(url, {"units_failed": 1}, format="json").status_code == 200
    one = _tick(w)
    feed = one["feeds"][0]
    assert feed["units"] == 2 and feed["units_out"] == 1
    assert feed["available_w"] == 400e3 and feed["input_w"] == pytest.approx(load, rel=1e-3)
    assert one["it_w"] == pytest.approx(ok["it_w"], rel=1e-3)  # its racks keep their power
    alerts = open_alerts()
    assert set(alerts) == {"feed_failed"}
    failed = alerts["feed_failed"]
    assert failed.subject == "feed:feed-0" and failed.severity == "critical"
    assert failed.value == 1.0
    assert "FEED feed-0 failed: 1 of 2 units out; the 1 left carry its load at" in failed.message
    # repaired: the alert closes
    assert staff_client.patch(url, {"units_failed": 0}, format="json").status_code == 200
    _tick(w)
    assert not open_alerts()
    # N: two feeds that share the load, each rated for 70 % of it (behind the rating
    # rule's back, as a plant planned too tight): one fails, the survivor is short
    PowerElement.objects.filter(pk=w["feed"].pk).update(
        redundancy="N", rating_kw=0.7 * load / 1e3, last_updated=timezone.now())
    shared = _tick(w)["feeds"][0]
    assert shared["load_fraction"] == pytest.approx(shared["input_w"] / (1.4 * load), rel=1e-3)
    assert shared["load_fraction"] < 0.9 and not open_alerts()
    assert staff_client.patch(url, {"units_failed": 1}, format="json").status_code == 200
    short = _tick(w)["feeds"][0]
    assert short["available_w"] == pytest.approx(0.7 * load, rel=1e-6)
    assert short["load_fraction"] == pytest.approx(short["input_w"] / (0.7 * load), rel=1e-3)
    assert short["load_fraction"] > 1.0 and short["headroom_w"] < 0
    alerts = open_alerts()
    assert set(alerts) == {"feed_headroom", "feed_failed"}
    assert alerts["feed_headroom"].subject == "feed:feed-0"
    assert alerts["feed_headroom"].value == pytest.approx(short["load_fraction"], rel=1e-6)
    assert f"carry its load at {short['load_fraction'] * 100:.0f} % of their rating" in \
        alerts["feed_failed"].message
    # the whole feed fails: no unit left, its racks have no power (the tick goes on)
    got = staff_client.patch(url, {"status": "failed", "units_failed": 0}, format="json")
    assert got.status_code == 200, got.content
    dark = _tick(w)
    assert dark["feeds"][0]["units_out"] == 2 and dark["it_w"] == 0.0
    assert dark["out_of_service"][0]["key"] == "feed-0"
    failed = Alert.objects.get(cluster_id=cid, rule="feed_failed", ended__isnull=True)
    assert failed.pk == alerts["feed_failed"].pk  # the same alert: still open
    # back in service and re-rated: both close
    PowerElement.objects.filter(pk=w["feed"].pk).update(
        redundancy="2N", rating_kw=400.0, status="ok", last_updated=timezone.now())
    _tick(w)
    assert not open_alerts()


def test_a_degraded_cdu_loses_a_unit_and_its_redundancy_decides_the_rest(
        plant_world: dict[str, Any], staff_client: Any) -> None:
    """``degraded`` (through the API, no units counted failed) takes one unit out in
    the next tick: the N+1 CDU keeps its design flow but not its spare; as an N pair it
    loses half its flow and capacity."""
    from django.utils import timezone

    from twin.facility.models import CoolingElement

    w = plant_world
    url = f"/api/facility/cooling/{w['cdu'].pk}/"

    def cdu_rated(s: dict[str, Any]) -> dict[str, Any]:
        return next(e for e in live.rated_rows(s["rated"]) if e["key"] == "cdu-0")

    ok = _tick(w)
    assert cdu_rated(ok)["available_w"] == 200e3  # 2 × 100 kW running
    got = staff_client.patch(url, {"status": "degraded"}, format="json")
    assert got.status_code == 200, got.content
    deg = _tick(w)
    assert deg["cdus"][0]["flow_kg_s"] == pytest.approx(2.4)  # N+1: the duty holds
    assert _r0(w)["flow_ratio"] == pytest.approx(1.0)
    assert cdu_rated(deg)["available_w"] == 100e3 and cdu_rated(deg)["rating_w"] == 100e3
    assert deg["out_of_service"] == [{"key": "cdu-0", "kind": "cdu", "chain": "cooling",
                                      "status": "degraded", "units": 2, "units_failed": 0}]
    # the same CDU as an N pair (both pumps needed): one out halves its flow and capacity
    CoolingElement.objects.filter(pk=w["cdu"].pk).update(redundancy="N",
                                                         last_updated=timezone.now())
    half = _tick(w)
    assert half["cdus"][0]["flow_kg_s"] == pytest.approx(1.2)
    assert _r0(w)["flow_ratio"] == pytest.approx(0.5)
    assert cdu_rated(half)["rating_w"] == 200e3 and cdu_rated(half)["available_w"] == 100e3
    # counted failures win over the one unit degraded stands for
    assert staff_client.patch(url, {"units_failed": 2}, format="json").status_code == 200
    assert _tick(w)["cdus"][0]["flow_kg_s"] == 0.0
    assert staff_client.patch(url, {"status": "ok", "units_failed": 0},
                              format="json").status_code == 200
    assert _tick(w)["cdus"][0]["flow_kg_s"] == pytest.approx(2.4)
