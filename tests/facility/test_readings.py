"""Measured facility readings (native batches): validated whole, stored per element in
the real Redis with their lifetime, preferred over the model by the live tick (frame,
/metrics, alerts), and compared with the model by the ``model_drift`` rule."""
from __future__ import annotations

import json
import math
import time
from typing import Any

import numpy as np
import pytest
from django.test import Client

from tests.conftest import wait_until
from tests.telemetry.conftest import PREFIX
from tests.telemetry.test_state import put
from twin.facility import batches, readings
from twin.telemetry import processing, state

pytestmark = pytest.mark.usefixtures("plant_namespace")


@pytest.fixture
def world(plant_world: dict[str, Any]) -> dict[str, Any]:
    from twin.telemetry.models import TelemetryAgent

    _, token = TelemetryAgent.issue(plant_world["cluster"], "plant-agent")
    return {**plant_world, "client": Client(HTTP_AUTHORIZATION=f"Bearer {token}"),
            "url": f"/api/telemetry/clusters/{plant_world['cluster'].pk}/facility/"}


def _post(w: dict[str, Any], body: Any) -> Any:
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return w["client"].post(w["url"], data=data, content_type="application/json")


def _stored(cid: int) -> list[str]:
    r = state.redis_client()
    return sorted(k.decode() for k in r.scan_iter(match=f"{PREFIX}:c{cid}:facility:reading:*"))


def _tick(w: dict[str, Any], watts: float = 600.0) -> dict[str, Any]:
    cid = w["cluster"].pk
    put(cid, {"power_w": [watts] * 8}, cards=[c.pk for c in w["cards"]])
    processing.tick(cid, force=True)
    s = state.plant_summary(cid)
    assert s is not None
    return s


def test_a_batch_stores_each_elements_reading_with_its_lifetime(world: dict[str, Any]) -> None:
    cid = world["cluster"].pk
    world["cdu"].name = "CDU hall A"
    world["cdu"].save(update_fields=["name"])
    got = _post(world, {"readings": [
        {"element": "CDU hall A", "supply_c": 31.0, "return_c": 38.5, "flow_kg_s": 2.2},
        {"element": world["pdu"].pk, "power_w": 5200.0},
        {"element": "feed-0", "power_w": 6100},
    ]})
    assert got.status_code == 202, got.content
    assert got.json()["accepted"] == 3
    assert sorted(got.json()["elements"]) == ["cooling:cdu-0", "power:feed-0", "power:pdu-r0"]
    assert _stored(cid) == [f"{PREFIX}:c{cid}:facility:reading:{k}"
                            for k in ("cooling:cdu-0", "power:feed-0", "power:pdu-r0")]
    r = state.redis_client()
    key = readings.reading_key(PREFIX, cid, "cooling", "cdu-0")
    doc = json.loads(r.get(key))
    assert doc["values"] == {"supply_c": 31.0, "return_c": 38.5, "flow_kg_s": 2.2}
    assert doc["source"] == "native" and abs(doc["ts"] - time.time()) < 5
    assert 0 < r.pttl(key) <= readings.DEFAULT_TTL_S * 1000


def test_the_tick_publishes_readings_in_place_of_the_model(world: dict[str, Any]) -> None:
    from tests.telemetry.test_monitoring import scrape
    from twin.live import frames
    from twin.live.protocol import SubscriptionKey

    cid = world["cluster"].pk
    modelled = _tick(world)
    (cdu,) = modelled["cdus"]
    assert cdu["measured"] == [] and "model" not in cdu
    got = _post(world, {"readings": [
        {"element": "cdu-0", "supply_c": cdu["supply_c"] + 1.0, "heat_w": 0.5 * cdu["heat_w"]},
        {"element": "feed-0", "power_w": 300_000.0}]})
    assert got.status_code == 202, got.content
    s = _tick(world)
    (cdu2,) = s["cdus"]
    assert cdu2["measured"] == ["heat_w", "supply_c"] and cdu2["reading_source"] == "native"
    assert cdu2["supply_c"] == pytest.approx(cdu["supply_c"] + 1.0, abs=1e-3)
    # the model's own figures stay beside the reading (same load: same prediction)
    assert cdu2["model"]["supply_c"] == pytest.approx(cdu["supply_c"], abs=0.05)
    assert cdu2["model"]["heat_w"] == pytest.approx(cdu["heat_w"], rel=1e-3)
    # what derives from a reading follows it: load = measured heat / capacity
    # (the summary rounds to 4 decimals)
    assert cdu2["load_fraction"] == pytest.approx(cdu2["heat_w"] / cdu2["capacity_w"],
                                                  abs=1e-4)
    assert cdu2["return_c"] == pytest.approx(cdu["return_c"], abs=0.05)  # not measured
    (feed,) = s["feeds"]
    assert feed["measured"] == ["power_w"] and feed["input_w"] == 300_000.0
    limit = min(feed["planned_w"], feed["available_w"])
    assert feed["headroom_w"] == pytest.approx(limit - 300_000.0)
    assert feed["load_fraction"] == pytest.approx(300_000.0 / limit, abs=1e-4)
    assert s["readings"]["elements"] == 2
    # the frame says which values are measured
    plant = frames.build(cid, SubscriptionKey("cluster", None, "power_w")).extra["facility"]
    assert plant["cdus"][0]["measured"] == ["heat_w", "supply_c"]
    assert plant["feeds"][0]["model"]["power_w"] == pytest.approx(feed["model"]["power_w"])
    assert plant["pdus"][0]["measured"] == []
    # and so does /metrics: the reading (with its source) and the model's prediction
    m = scrape()
    c = str(cid)
    assert m[("twin_facility_reading", (("cluster", c), ("element", "feed-0"),
                                        ("quantity", "power_w"), ("source", "native")))] \
        == 300_000.0
    assert m[("twin_facility_model_prediction", (("cluster", c), ("element", "cdu-0"),
                                                 ("quantity", "supply_c")))] \
        == pytest.approx(cdu2["model"]["supply_c"])
    assert m[("twin_facility_cdu_temperature_celsius",
              (("cdu", "cdu-0"), ("cluster", c), ("side", "supply")))] \
        == pytest.approx(cdu2["supply_c"])


def test_stale_readings_expire_and_the_model_takes_over(world: dict[str, Any],
                                                        settings: Any) -> None:
    settings.FACILITY_READING_TTL_S = 1.0
    cid = world["cluster"].pk
    assert _post(world, {"readings": [{"element": "cdu-0", "supply_c": 20.0}]}) \
        .status_code == 202
    assert _tick(world)["cdus"][0]["supply_c"] == 20.0
    wait_until(lambda: not _stored(cid), timeout=5.0, what="the reading to expire")
    s = _tick(world)
    assert s["cdus"][0]["measured"] == [] and s["cdus"][0]["supply_c"] != 20.0
    # a reading whose own time is already past its lifetime is refused, not stored
    got = _post(world, {"readings": [{"element": "cdu-0", "supply_c": 20.0,
                                      "ts": time.time() - 5.0}]})
    assert got.status_code == 400 and "readings[0].ts" in got.json()["errors"]
    assert not _stored(cid)


GOOD = {"element": "cdu-0", "supply_c": 30.0}


@pytest.mark.parametrize(("reading", "field", "words"), [
    ({"element": "cdu-9", "supply_c": 30.0}, "readings[1].element", "no cooling element"),
    ({"element": 10**9, "power_w": 10.0}, "readings[1].element", "no power element"),
    ({"element": "crah-0", "supply_c": 30.0}, "readings[1].element", "crah"),
    ({"element": "ups-0", "power_w": 10.0}, "readings[1].element", "ups"),
    ({"element": "pdu-r0", "power_w": -1.0}, "readings[1].power_w", "outside"),
    ({"element": "pdu-r0", "power_w": "12"}, "readings[1].power_w", "finite number"),
    ({"element": "pdu-r0", "power_w": True}, "readings[1].power_w", "finite number"),
    ({"element": "pdu-r0", "power_w": 1e12}, "readings[1].power_w", "outside"),
    # a PDU of 2 × 100 kW reading 10 MW (over 1.5 × its installed rating)
    ({"element": "pdu-r0", "power_w": 1e7}, "readings[1].power_w",
     "over 1.5 × pdu-r0's installed rating (300000 W)"),
    ({"element": "pdu-r0", "volts": 230.0}, "readings[1].volts", "unknown field"),
    ({"element": "cdu-0", "return_c": 30.0, "power_w": 5.0}, "readings[1].power_w",
     "cannot be in one reading"),
    ({"element": "pdu-r0"}, "readings[1]", "no quantity"),
    ({"supply_c": 30.0}, "readings[1].element", "required"),
    ({"element": "pdu-r0", "power_w": 5.0, "ts": time.time() + 3600}, "readings[1].ts",
     "future"),
    ({"element": "cdu-0", "flow_kg_s": 2.0}, "readings[1].element", "already in readings[0]"),
    ([1, 2], "readings[1]", "an object"),
])
def test_a_bad_reading_refuses_the_whole_batch(world: dict[str, Any], reading: Any,
                                                field: str, words: str) -> None:
    got = _post(world, {"readings": [GOOD, reading]})
    assert got.status_code == 400, got.content
    errors = got.json()["errors"]
    assert words in errors[field], errors
    assert not _stored(world["cluster"].pk)  # not even the good one


def test_a_cdu_heat_over_its_physical_bound_is_refused(world: dict[str, Any]) -> None:
    """cdu-0 is 2 × 100 kW: 300 kW is its bound (1.5 ×), 400 kW is no reading of it."""
    got = _post(world, {"readings": [{"element": "cdu-0", "heat_w": 4e5}]})
    assert got.status_code == 400
    assert "over 1.5 × cdu-0's installed rating" in got.json()["errors"]["readings[0].heat_w"]
    assert not _stored(world["cluster"].pk)
    assert _post(world, {"readings": [{"element": "cdu-0", "heat_w": 2.9e5}]}).status_code in (
        200, 202)


def test_nan_and_malformed_bodies_answer_400_per_field(world: dict[str, Any]) -> None:
    # Python's JSON reads the NaN literal: a NaN is refused like any non-finite number
    got = _post(world, '{"readings": [{"element": "cdu-0", "supply_c": NaN}]}')
    assert got.status_code == 400 and "finite" in got.json()["errors"]["readings[0].supply_c"]
    for body, field in (("{not json", "body"), ("[1]", "body"), ('{"readings": []}', "readings"),
                        ('{"readings": [], "extra": 1}', "extra")):
        got = _post(world, body)
        assert got.status_code == 400 and field in got.json()["errors"], (body, got.content)
    too_many = {"readings": [GOOD] * (batches.MAX_READINGS + 1)}
    got = _post(world, too_many)
    assert got.status_code == 400 and "at most" in got.json()["errors"]["readings"]
    got = world["client"].post(world["url"], data="x", content_type="text/plain")
    assert got.status_code == 415
    assert not _stored(world["cluster"].pk)


def test_only_an_agent_of_the_cluster_may_send(world: dict[str, Any]) -> None:
    from twin.hardware.models import Cluster
    from twin.telemetry.models import TelemetryAgent

    assert Client().post(world["url"], data=json.dumps({"readings": [GOOD]}),
                         content_type="application/json").status_code == 401
    other = Cluster.objects.create(name="other")
    _, token = TelemetryAgent.issue(other, "other-agent")
    got = Client(HTTP_AUTHORIZATION=f"Bearer {token}").post(
        world["url"], data=json.dumps({"readings": [GOOD]}), content_type="application/json")
    assert got.status_code == 403
    got = world["client"].post("/api/telemetry/clusters/999999/facility/",
                               data=json.dumps({"readings": [GOOD]}),
                               content_type="application/json")
    assert got.status_code == 404
    assert not _stored(world["cluster"].pk)


def test_model_drift_opens_when_a_reading_departs_for_its_period_and_closes(
        world: dict[str, Any], settings: Any) -> None:
    from twin.telemetry.models import Alert

    settings.TELEMETRY_THRESHOLDS = {"model_drift": {"min_s": 1.0, "clear_s": 0.0}}
    cid = world["cluster"].pk
    model = _tick(world)["cdus"][0]
    # within tolerance (1.5 K < 2 K; 5 % < 10 %): no drift
    _post(world, {"readings": [{"element": "cdu-0", "supply_c": model["supply_c"] + 1.5,
                                "flow_kg_s": model["flow_kg_s"] * 1.05}]})
    _tick(world)
    time.sleep(1.1)
    _tick(world)
    assert not Alert.objects.filter(cluster_id=cid, rule="model_drift").exists()
    # 5 K off: pending at the first tick, open once it held for min_s
    _post(world, {"readings": [{"element": "cdu-0", "supply_c": model["supply_c"] + 5.0,
                                "flow_kg_s": model["flow_kg_s"] * 1.05}]})
    _tick(world)
    assert not Alert.objects.filter(cluster_id=cid, rule="model_drift").exists()
    time.sleep(1.1)
    _tick(world)
    (alert,) = Alert.objects.filter(cluster_id=cid, rule="model_drift", ended__isnull=True)
    assert alert.subject == "drift:cdu-0:supply_c" and alert.level == "facility"
    assert alert.value == pytest.approx(5.0 / 2.0, abs=0.05)  # 5 K over a 2 K tolerance
    assert "reading" in alert.message and "model" in alert.message
    # the sensor agrees again: the alert closes
    _post(world, {"readings": [{"element": "cdu-0", "supply_c": model["supply_c"]}]})
    _tick(world)
    assert not Alert.objects.filter(cluster_id=cid, rule="model_drift",
                                    ended__isnull=True).exists()


def test_drift_is_the_departure_over_the_documented_tolerance() -> None:
    """Closed forms of ``readings.TOLERANCES``: 2 K absolute on temperatures; 10 % of
    the model on flow, heat and power, floored (0.05 kg/s, 1 kW)."""
    cdus = [{"key": "cdu-0", "supply_c": 33.0, "return_c": 40.0, "flow_kg_s": 0.01,
             "heat_w": 1e5, "capacity_w": 2e5, "load_fraction": 0.5}]
    power = [{"key": "pdu-0", "input_w": 500.0, "planned_w": 1e4, "available_w": 1e4}]
    fresh = {("cooling", "cdu-0"): readings.Reading(
        "cooling", "cdu-0", {"supply_c": 36.0, "flow_kg_s": 0.04, "heat_w": 1.3e5}, 0.0),
        ("power", "pdu-0"): readings.Reading("power", "pdu-0", {"power_w": 2500.0}, 0.0)}
    readings.overlay(cdus, power, ["pdu"], fresh, now=1.0)
    slots, values = readings.drift_slots(cdus, power, ["pdu"])
    by = {s["subject"]: v for s, v in zip(slots, values, strict=True)}
    assert list(by) == ["drift:cdu-0:supply_c", "drift:cdu-0:return_c",
                        "drift:cdu-0:flow_kg_s", "drift:cdu-0:heat_w", "drift:pdu-0:power_w"]
    assert by["drift:cdu-0:supply_c"] == pytest.approx(3.0 / 2.0)
    assert math.isnan(by["drift:cdu-0:return_c"])  # not measured
    assert by["drift:cdu-0:flow_kg_s"] == pytest.approx(0.03 / 0.05)  # floor, not 0.001
    assert by["drift:cdu-0:heat_w"] == pytest.approx(3e4 / 1e4)
    assert by["drift:pdu-0:power_w"] == pytest.approx(2000.0 / 1000.0)  # floor, not 50 W
    assert cdus[0]["load_fraction"] == pytest.approx(0.65)
    assert power[0]["headroom_w"] == pytest.approx(7500.0)
    # the slots built once (DriftSlots, the live tick's) with only the read elements
    # evaluated give the same slots and values as evaluating every element
    more_cdus = [{"key": "cdu-x"}, cdus[0], {"key": "cdu-y"}]
    more_power = [{"key": "pdu-x"}, power[0]]
    once = readings.DriftSlots(["cdu-x", "cdu-0", "cdu-y"], ["pdu-x", "pdu-0"], ["pdu", "pdu"])
    got_slots, got_values = once.evaluate([("cooling", cdus[0]), ("power", power[0])])
    want_slots, want_values = readings.drift_slots(more_cdus, more_power, ["pdu", "pdu"])
    assert got_slots == want_slots
    assert np.allclose(got_values, want_values, equal_nan=True)
    # and the shared static slots are not changed by an evaluation
    assert once.evaluate([])[0][4]["subject"] == "drift:cdu-0:supply_c"
    assert "reading" not in once.evaluate([])[0][4]


def test_a_long_key_gets_a_drift_subject_of_its_own() -> None:
    """Alert subjects hold 40 characters: two 64-character keys that share their first
    30 still get two subjects (a digest of the key), both within the limit."""
    a, b = "cdu-" + "x" * 60, "cdu-" + "x" * 59 + "y"
    sa, sb = readings.drift_subject(a, "supply_c"), readings.drift_subject(b, "supply_c")
    assert sa != sb and len(sa) <= 40 and len(sb) <= 40
    assert readings.drift_subject("cdu-0", "heat_w") == "drift:cdu-0:heat_w"
