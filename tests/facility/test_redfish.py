"""The Redfish poller against a real Redfish service: sushy-tools' static emulator
(``sushy-static``), started here on the committed mockup (``redfish_mockup/``: a
CoolingUnit with two secondary connectors, one that lies, a rack PDU and a power shelf),
read with the DMTF library; its readings go through the real Redis into the tick."""
from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from tests.conftest import wait_until
from tests.telemetry.conftest import PREFIX
from tests.telemetry.test_monitoring import scrape
from tests.telemetry.test_state import put
from twin.facility import readings, redfish
from twin.telemetry import processing, state

MOCKUP = Path(__file__).parent / "redfish_mockup"


pytestmark = pytest.mark.usefixtures("plant_namespace")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def sushy() -> Iterator[str]:
    """``sushy-static`` serving the mockup on a free local port (its URL)."""
    port = _free_port()
    exe = Path(sys.executable).with_name("sushy-static")
    proc = subprocess.Popen([str(exe), "-i", "127.0.0.1", "-p", str(port), "-m", str(MOCKUP)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return requests.get(f"{url}/redfish/v1", timeout=1).status_code == 200
        except requests.ConnectionError:
            return False

    try:
        wait_until(up, timeout=20.0, what="sushy-static to serve the mockup")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _source(world: dict[str, Any], url: str, **bindings: str) -> Any:
    from twin.facility.models import RedfishBinding, RedfishSource

    src = RedfishSource.objects.create(site=world["site"], name="bmc", base_url=url,
                                       interval_s=30.0)
    for attr, uri in bindings.items():
        el = world[attr]
        field = "cooling_element" if attr == "cdu" else "power_element"
        b = RedfishBinding(source=src, uri=uri, **{field: el})
        b.full_clean()
        b.save()
    return src


def _stored(cid: int, chain: str, key: str) -> dict[str, Any] | None:
    raw = state.redis_client().get(readings.reading_key(PREFIX, cid, chain, key))
    return None if raw is None else dict(json.loads(raw))


def _tick(world: dict[str, Any]) -> dict[str, Any]:
    cid = world["cluster"].pk
    put(cid, {"power_w": [600.0] * 8}, cards=[c.pk for c in world["cards"]])
    processing.tick(cid, force=True)
    s = state.plant_summary(cid)
    assert s is not None
    return s


def test_the_poller_reads_a_cooling_unit_and_a_pdu_into_the_tick(
        plant_world: dict[str, Any], sushy: str) -> None:
    cid = plant_world["cluster"].pk
    src = _source(plant_world, sushy, cdu="/redfish/v1/ThermalEquipment/CDUs/1",
                  pdu="/redfish/v1/PowerEquipment/RackPDUs/1")
    call_command("poll_redfish", "--once", stdout=io.StringIO())
    cdu = _stored(cid, "cooling", "cdu-0")
    assert cdu is not None and cdu["source"] == "redfish"
    # two connectors mixed: flows add, temperatures are the flow-weighted mean, heat adds;
    # L/min → kg/s with PG25's 1017 kg/m³
    assert cdu["values"]["supply_c"] == pytest.approx((30.0 * 60 + 32.0 * 20) / 80)
    assert cdu["values"]["return_c"] == pytest.approx((40.0 * 60 + 42.0 * 20) / 80)
    assert cdu["values"]["flow_kg_s"] == pytest.approx(80.0 / 60_000.0 * 1017.0)
    assert cdu["values"]["heat_w"] == pytest.approx(55_000.0)
    pdu = _stored(cid, "power", "pdu-r0")
    assert pdu is not None and pdu["values"] == {"power_w": 6200.0}
    src.refresh_from_db()
    assert src.last_polled is not None and src.last_error == ""
    s = _tick(plant_world)
    (c,) = s["cdus"]
    assert c["reading_source"] == "redfish" and c["supply_c"] == pytest.approx(30.5)
    assert c["measured"] == ["flow_kg_s", "heat_w", "return_c", "supply_c"]
    (p,) = s["pdus"]
    assert p["measured"] == ["power_w"] and p["input_w"] == 6200.0
    assert p["model"]["power_w"] > 0


def test_a_lying_cdu_raises_model_drift(plant_world: dict[str, Any], sushy: str,
                                        settings: Any) -> None:
    from twin.telemetry.models import Alert

    settings.TELEMETRY_THRESHOLDS = {"model_drift": {"min_s": 0.0}}
    cid = plant_world["cluster"].pk
    src = _source(plant_world, sushy, cdu="/redfish/v1/ThermalEquipment/CDUs/2")
    assert redfish.poll_source(src, state.redis_client(), PREFIX).stored == 1
    s = _tick(plant_world)
    (c,) = s["cdus"]
    assert c["supply_c"] == 12.0 and c["model"]["supply_c"] > 12.0 + 2.0
    opened = {a.subject: a for a in Alert.objects.filter(cluster_id=cid, rule="model_drift")}
    assert "drift:cdu-0:supply_c" in opened
    a = opened["drift:cdu-0:supply_c"]
    assert a.value == pytest.approx((c["model"]["supply_c"] - 12.0) / 2.0, abs=0.01)
    assert a.severity == "warning" and "reading 12" in a.message


def test_a_failing_binding_is_reported_and_the_others_still_stored(
        plant_world: dict[str, Any], sushy: str) -> None:
    from twin.facility.models import RedfishSource

    cid = plant_world["cluster"].pk
    # the CDU bound to a missing resource, the PDU to a CoolingUnit (wrong type)
    src = _source(plant_world, sushy, cdu="/redfish/v1/ThermalEquipment/CDUs/9",
                  pdu="/redfish/v1/ThermalEquipment/CDUs/1")
    with pytest.raises(CommandError, match="CDUs/9"):
        call_command("poll_redfish", "--once", stdout=io.StringIO())
    src.refresh_from_db()
    assert "answered 404" in src.last_error and "not a PowerDistribution" in src.last_error
    assert _stored(cid, "cooling", "cdu-0") is None and _stored(cid, "power", "pdu-r0") is None
    # a power shelf and the right CDU on a second source: stored despite the first
    from twin.facility.models import PowerElement

    shelf = PowerElement.objects.create(site=plant_world["site"], key="shelf-r0",
                                        kind="power_shelf", parent=plant_world["pdu"],
                                        rating_kw=30.0)
    ok = RedfishSource.objects.create(site=plant_world["site"], name="bmc-2", base_url=sushy)
    ok.bindings.create(power_element=shelf, uri="/redfish/v1/PowerEquipment/PowerShelves/1")
    got = redfish.poll_source(ok, state.redis_client(), PREFIX)
    assert got.stored == 1 and not got.errors
    assert _stored(cid, "power", "shelf-r0") == {"values": {"power_w": 5400.0},
                                                 "ts": pytest.approx(time.time(), abs=10),
                                                 "source": "redfish"}


def test_a_power_shelf_as_a_chassis_is_its_supplies_input_power(
        plant_world: dict[str, Any], sushy: str) -> None:
    """PowerSubsystem → PowerSupplies → PowerSupplyMetrics.InputPowerWatts, summed over
    the supplies that report (2650 + 2710 W; the third bay is empty)."""
    from twin.facility.models import PowerElement, RedfishSource

    shelf = PowerElement.objects.create(site=plant_world["site"], key="shelf-r0",
                                        kind="power_shelf", parent=plant_world["pdu"],
                                        rating_kw=33.0)
    src = RedfishSource.objects.create(site=plant_world["site"], name="shelf-bmc",
                                       base_url=sushy)
    src.bindings.create(power_element=shelf,
                        uri="/redfish/v1/Chassis/PowerShelf/PowerSubsystem")
    got = redfish.poll_source(src, state.redis_client(), PREFIX)
    assert got.stored == 1 and not got.errors
    stored = _stored(plant_world["cluster"].pk, "power", "shelf-r0")
    assert stored is not None and stored["values"] == {"power_w": 2650.0 + 2710.0}


def test_an_unreachable_service_is_an_error_on_its_source(plant_world: dict[str, Any]) -> None:
    src = _source(plant_world, f"http://127.0.0.1:{_free_port()}",
                  cdu="/redfish/v1/ThermalEquipment/CDUs/1")
    src.timeout_s = 1.0
    got = redfish.poll_source(src, state.redis_client(), PREFIX)
    assert got.stored == 0 and list(got.errors) == [src.base_url]
    src.refresh_from_db()
    assert src.last_error.startswith(src.base_url) and src.last_polled is not None


def test_poll_due_waits_for_each_sources_interval(plant_world: dict[str, Any],
                                                  sushy: str) -> None:
    r = state.redis_client()
    _source(plant_world, sushy, pdu="/redfish/v1/PowerEquipment/RackPDUs/1")
    now = time.time()
    assert [x.stored for x in redfish.poll_due(r, PREFIX, now)] == [1]
    assert redfish.poll_due(r, PREFIX, now + 10.0) == []  # 30 s interval: not yet
    assert [x.stored for x in redfish.poll_due(r, PREFIX, now + 31.0)] == [1]


def test_a_binding_is_one_readable_element_of_the_sources_site(
        plant_world: dict[str, Any]) -> None:
    from twin.facility.models import RedfishBinding, RedfishSource

    src = RedfishSource.objects.create(site=plant_world["site"], name="bmc",
                                       base_url="http://cdu.example:8000")
    cases = [
        ({"cooling_element": plant_world["crah"]}, "cooling_element", "only a CDU"),
        ({"power_element": plant_world["ups"]}, "power_element", "feed, PDU"),
        ({}, "__all__", "exactly one"),
        ({"cooling_element": plant_world["cdu"], "power_element": plant_world["pdu"]},
         "__all__", "exactly one"),
    ]
    for kwargs, field, words in cases:
        with pytest.raises(ValidationError) as err:
            RedfishBinding(source=src, uri="/redfish/v1/x", **kwargs).full_clean()
        assert words in " ".join(err.value.message_dict[field])
    with pytest.raises(ValidationError) as err:
        RedfishBinding(source=src, uri="/cdu/1", cooling_element=plant_world["cdu"]).full_clean()
    assert "uri" in err.value.message_dict
    with pytest.raises(ValidationError) as err:
        RedfishSource(site=plant_world["site"], name="x", base_url="http://a.example",
                      username="admin").full_clean()
    assert "password_env" in err.value.message_dict


def test_sources_and_bindings_are_rows_of_the_api(plant_world: dict[str, Any],
                                                  staff_client: Any) -> None:
    site = plant_world["site"]
    bad = staff_client.post("/api/facility/redfish-sources/",
                            {"site": site.pk, "name": "bmc", "base_url": "not a url",
                             "interval_s": 0.1}, format="json")
    assert bad.status_code == 400
    assert set(bad.json()) >= {"base_url", "interval_s"}
    ok = staff_client.post("/api/facility/redfish-sources/",
                           {"site": site.pk, "name": "bmc", "base_url": "https://cdu.example",
                            "username": "ops", "password_env": "CDU_BMC_PASSWORD"},
                           format="json")
    assert ok.status_code == 201, ok.content
    assert "password" not in ok.json() and ok.json()["last_error"] == ""
    src = ok.json()["id"]
    bad = staff_client.post("/api/facility/redfish-bindings/",
                            {"source": src, "cooling_element": plant_world["tcs"].pk,
                             "uri": "/redfish/v1/ThermalEquipment/CDUs/1"}, format="json")
    assert bad.status_code == 400 and "only a CDU" in str(bad.json()["cooling_element"])
    ok = staff_client.post("/api/facility/redfish-bindings/",
                           {"source": src, "cooling_element": plant_world["cdu"].pk,
                            "uri": "/redfish/v1/ThermalEquipment/CDUs/1"}, format="json")
    assert ok.status_code == 201, ok.content
    again = staff_client.post("/api/facility/redfish-bindings/",
                              {"source": src, "cooling_element": plant_world["cdu"].pk,
                               "uri": "/redfish/v1/ThermalEquipment/CDUs/2"}, format="json")
    assert again.status_code in (400, 409)
    listed = staff_client.get(f"/api/facility/redfish-bindings/?source={src}")
    assert listed.status_code == 200 and listed.json()["count"] == 1


def test_a_cdus_leak_detection_and_its_chassis_thermal_subsystem_are_observed(
        plant_world: dict[str, Any], sushy: str) -> None:
    """CoolingUnit → LeakDetection → LeakDetectors (two OK, one absent: no leak), and
    Links.Chassis → ThermalSubsystem: the temperature summary (33.5 / 24 / 29.5 °C) and
    the mean speed of the fans present (40 and 50 %; the third bay is absent)."""
    cid = plant_world["cluster"].pk
    _source(plant_world, sushy, cdu="/redfish/v1/ThermalEquipment/CDUs/1")
    call_command("poll_redfish", "--once", stdout=io.StringIO())
    stored = _stored(cid, "cooling", "cdu-0")
    assert stored is not None
    values = stored["values"]
    assert {k: values[k] for k in readings.CDU_OBSERVED} == {
        "leaks": 0.0, "internal_c": 33.5, "intake_c": 24.0, "exhaust_c": 29.5,
        "fan_speed_pct": 45.0}
    s = _tick(plant_world)
    (c,) = s["cdus"]
    # observed, not measured: the model has no figure of them, so no drift slot either
    assert c["measured"] == ["flow_kg_s", "heat_w", "return_c", "supply_c"]
    assert c["observed"] == ["exhaust_c", "fan_speed_pct", "intake_c", "internal_c", "leaks"]
    assert c["leaks"] == 0.0 and c["fan_speed_pct"] == 45.0


def test_a_thermal_subsystem_bound_directly(plant_world: dict[str, Any], sushy: str) -> None:
    src = _source(plant_world, sushy, cdu="/redfish/v1/Chassis/CDU1/ThermalSubsystem")
    got = redfish.poll_source(src, state.redis_client(), PREFIX)
    assert got.stored == 1 and not got.errors and got.refused == 0
    stored = _stored(plant_world["cluster"].pk, "cooling", "cdu-0")
    assert stored is not None and stored["values"] == {
        "internal_c": 33.5, "intake_c": 24.0, "exhaust_c": 29.5, "fan_speed_pct": 45.0}


def test_a_leak_opens_a_critical_alert_that_clears_when_the_tray_is_dry(
        plant_world: dict[str, Any], sushy: str, settings: Any) -> None:
    from twin.telemetry.models import Alert

    settings.TELEMETRY_THRESHOLDS = {"cdu_leak": {"clear_s": 0.0}}
    cid = plant_world["cluster"].pk
    src = _source(plant_world, sushy, cdu="/redfish/v1/ThermalEquipment/CDUs/3")
    assert redfish.poll_source(src, state.redis_client(), PREFIX).stored == 1
    s = _tick(plant_world)
    (c,) = s["cdus"]
    assert c["leaks"] == 1.0
    (a,) = Alert.objects.filter(cluster_id=cid, rule="cdu_leak")
    assert a.subject == "cdu:cdu-0" and a.severity == "critical" and a.ended is None
    assert "leak reported by 1 leak detector" in a.message
    # the tray dries: the CDU now reads as CDUs/1 (its detectors all OK)
    b = src.bindings.get()
    b.uri = "/redfish/v1/ThermalEquipment/CDUs/1"
    b.save()
    assert redfish.poll_source(src, state.redis_client(), PREFIX).stored == 1
    _tick(plant_world)
    wait_until(lambda: (_tick(plant_world) and Alert.objects.get(pk=a.pk).ended is not None),
               timeout=10.0, what="the leak alert to close")


def test_a_lying_service_is_refused_value_by_value_and_counted(
        plant_world: dict[str, Any], sushy: str, staff_client: Any) -> None:
    """CDUs/4's connector A gives its flow in US gallons per minute and its supply in °F
    (ReadingUnits not the property's unit) and a NaN return: those three values are
    refused, and with them the mixed flow, supply and return (one connector spoils the
    mix); the heats (30 kW, in kW as the name says, + 14 kW) are stored. RackPDUs/2
    claims 10 MW on a PDU of 2 × 100 kW: over 1.5 × its rating, refused. The tick runs."""
    from twin.facility.models import RedfishSource

    cid = plant_world["cluster"].pk
    src = _source(plant_world, sushy, cdu="/redfish/v1/ThermalEquipment/CDUs/4",
                  pdu="/redfish/v1/PowerEquipment/RackPDUs/2")
    got = redfish.poll_source(src, state.redis_client(), PREFIX)
    assert got.refused == 4 and got.stored == 1
    stored = _stored(cid, "cooling", "cdu-0")
    assert stored is not None and stored["values"] == {"heat_w": 44_000.0}
    assert _stored(cid, "power", "pdu-r0") is None
    src.refresh_from_db()
    assert src.values_refused == 4
    refused = ("twin_facility_redfish_values_refused_total",
               (("cluster", str(cid)), ("source", "bmc")))
    assert scrape()[refused] == 4
    for words in ("'[gal_us]/min', not 'L/min'", "'[degF]', not 'Cel'", "nan is not a number",
                  "over 1.5 × the element's installed rating"):
        assert words in src.last_error, (words, src.last_error)
    s = _tick(plant_world)
    (c,) = s["cdus"]
    assert c["measured"] == ["heat_w"] and c["heat_w"] == 44_000.0
    # counted across polls, shown by the API (read-only)
    redfish.poll_source(RedfishSource.objects.get(pk=src.pk), state.redis_client(), PREFIX)
    listed = staff_client.get(f"/api/facility/redfish-sources/{src.pk}/")
    assert listed.status_code == 200 and listed.json()["values_refused"] == 8
    # and /metrics counts them per source (the row's counter: every poller process adds)
    assert scrape()[refused] == 8
    patched = staff_client.patch(f"/api/facility/redfish-sources/{src.pk}/",
                                 {"values_refused": 0}, format="json")
    assert patched.status_code in (200, 400)
    src.refresh_from_db()
    assert src.values_refused == 8


def test_the_command_counts_refused_values(plant_world: dict[str, Any], sushy: str) -> None:
    _source(plant_world, sushy, pdu="/redfish/v1/PowerEquipment/RackPDUs/2")
    out = io.StringIO()
    with pytest.raises(CommandError, match="over 1.5"):
        call_command("poll_redfish", "--once", stdout=out)
    assert "bmc: 0 readings stored, 1 values refused" in out.getvalue()
