"""The Redfish poller: CDU and PDU readings from DMTF Redfish services, into the same
store as native batches (``twin.facility.readings``).

Each enabled ``RedfishSource`` is read with the DMTF client library (python-redfish-
library, ``redfish.redfish_client``) every ``interval_s``; each of its bindings names
the element and the resource that measures it. What is read (DMTF schemas, DSP8010):

* **CoolingUnit** (``CoolingUnit.v1_3_0``, under ``/redfish/v1/ThermalEquipment/CDUs``):
  its ``SecondaryCoolantConnectors`` (the technology-cooling side, which the model's
  CDU figures describe), each a ``CoolantConnector`` (v1_2_0) with the sensor excerpts
  ``SupplyTemperatureCelsius``, ``ReturnTemperatureCelsius``, ``FlowLitersPerMinute``
  and ``HeatRemovedkW`` (``{"Reading": …}``). Over several connectors the flows and
  heats add up and the temperatures are the flow-weighted mean (a mixing cup; the plain
  mean where a flow is missing). Flow in L/min becomes kg/s with the technology
  loop's coolant density (PG25, 1017 kg/m³: ``simulation.facility.fluids``, the
  model's ``tcs_fluid``).
* **PowerDistribution** (``PowerDistribution.v1``, under ``/redfish/v1/PowerEquipment``:
  ``RackPDUs``, ``FloorPDUs``, ``PowerShelves``…): its ``Metrics`` link, a
  ``PowerDistributionMetrics`` whose ``PowerWatts.Reading`` is the element's power.
* **PowerSubsystem** of a chassis (``PowerSubsystem.v1``, e.g.
  ``/redfish/v1/Chassis/PowerShelf/PowerSubsystem``: a power shelf modelled as a
  chassis, as DMTF's power-shelf examples do): the sum of its ``PowerSupplies``'
  ``PowerSupplyMetrics.InputPowerWatts``.

* **LeakDetection** (``LeakDetection.v1``): the CoolingUnit's ``LeakDetection`` link
  (and a ThermalSubsystem's): its ``LeakDetectors`` collection, each a
  ``LeakDetector`` whose ``DetectorState`` is ``OK``, ``Warning`` or ``Critical``;
  ``leaks`` is how many say other than ``OK`` (a detector ``Absent`` or
  ``Disabled`` is not counted). A CDU with ``leaks`` > 0 opens the ``cdu_leak`` alert.
* **ThermalSubsystem** (``ThermalSubsystem.v1``) of the chassis a CoolingUnit links
  (``Links.Chassis``), or bound directly (a CDU that is only a chassis):
  ``ThermalMetrics.TemperatureSummaryCelsius`` ``Internal``, ``Intake`` (else
  ``Ambient``) and ``Exhaust`` as ``internal_c``, ``intake_c``, ``exhaust_c``; the mean
  ``SpeedPercent`` of its ``Fans`` (an absent fan left out) as ``fan_speed_pct``; its
  ``LeakDetection``. These are ``observed`` readings
  (``twin.facility.readings.OBSERVED``): shown, never compared with the model.

**Refused values** (each counted in the source's ``values_refused`` and named in
``last_error``; the binding's other values are still stored, and a CDU quantity mixed
over connectors is dropped whole when one connector's value is refused):

* a reading that is not a finite number (NaN, ±Infinity, a string, a boolean);
* a reading in other units than its property's: a sensor excerpt's name states its
  unit (``…Celsius``, ``…LitersPerMinute``, ``…kW``, ``…Watts``, ``…Percent``) and
  carries none of its own, but where a service adds ``ReadingUnits`` (the ``Sensor``
  resource's UCUM unit) it must be that unit (:data:`UNITS`: ``Cel``, ``L/min``, ``kW``,
  ``W``, ``%``) — a supply temperature in ``[degF]`` is refused, not converted;
* a value outside the native batches' ranges (``readings.ACCEPTED``);
* a value over the element's physical bound: a power reading above
  ``readings.PHYSICAL_MARGIN`` (1.5) × its installed rating (``rating_kw × units``), a
  CDU heat above that × its installed capacity (``capacity_kw × units``): a PDU of 2 × 100 kW
  cannot draw 10 MW. The margin is an assumption: UL 489 breakers must trip within an
  hour at 135 % of their rating and within minutes at 200 %, so a steady reading above
  150 % is a wrong reading, not a state of the element.

A resource of another type, an unreachable service or a 4xx/5xx is that binding's
error: the source's other bindings are still stored, and ``last_error`` on the source
row says what failed (blank when the last poll read everything). Readings carry the
poll's time (Redfish sensor excerpts have none of their own). A lying service never
reaches the tick: only checked values are stored.

This module is below telemetry in the layers: the caller (the ``poll_redfish``
management command or the Celery task of ``twin.telemetry.tasks``) hands it the
Redis client and key prefix, as the live tick does for ``twin.facility.live``.
"""
from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any

from simulation.facility.fluids import PG25
from twin.facility.readings import ACCEPTED, PHYSICAL_MARGIN, Reading, store

__all__ = ["PHYSICAL_MARGIN", "UNITS", "PollResult", "RedfishReadError", "bounds_of",
           "checked", "poll_due", "poll_source", "read_cooling_unit", "read_power_distribution"]

log = logging.getLogger(__name__)

UNITS = {
    "SupplyTemperatureCelsius": "Cel", "ReturnTemperatureCelsius": "Cel",
    "Internal": "Cel", "Intake": "Cel", "Exhaust": "Cel", "Ambient": "Cel",
    "FlowLitersPerMinute": "L/min", "HeatRemovedkW": "kW", "PowerWatts": "W",
    "InputPowerWatts": "W", "SpeedPercent": "%",
}
"""The UCUM unit (DSP0268's ``ReadingUnits``) each property's name implies."""

_LEAK_STATES = {"OK": 0, "Warning": 1, "Critical": 1}


class RedfishReadError(Exception):
    """A resource could not be read as the reading its binding expects."""


@dataclass
class PollResult:
    """What one poll of one source did."""

    source: str
    stored: int = 0
    refused: int = 0  # values refused (wrong units, not a number, out of bounds)
    errors: dict[str, str] = field(default_factory=dict)  # uri → what failed


def _get(client: Any, uri: str) -> dict[str, Any]:
    resp = client.get(uri)
    if resp.status != 200:
        raise RedfishReadError(f"GET {uri} answered {resp.status}")
    d = resp.dict
    if not isinstance(d, dict):
        raise RedfishReadError(f"GET {uri} is not a JSON object")
    return d


def _link(d: dict[str, Any], name: str) -> str | None:
    target = d.get(name)
    uri = target.get("@odata.id") if isinstance(target, dict) else None
    return uri if isinstance(uri, str) and uri else None


def _members(client: Any, uri: str) -> list[str]:
    out = []
    for m in _get(client, uri).get("Members") or []:
        member = m.get("@odata.id") if isinstance(m, dict) else None
        if isinstance(member, str):
            out.append(member)
    return out


def _typed(d: dict[str, Any], uri: str, schema: str) -> None:
    kind = str(d.get("@odata.type", ""))
    if f".{schema}" not in kind and not kind.endswith(schema):
        raise RedfishReadError(f"{uri} is a {kind or 'resource without @odata.type'}, "
                               f"not a {schema}")


def _reading(d: dict[str, Any], name: str, where: str, refused: list[str]) -> float | None:
    """The excerpt ``name``'s ``Reading`` (None: absent or null); a reading that is not
    a finite number, or in other units than :data:`UNITS` says, is refused (appended to
    ``refused``) and None."""
    excerpt = d.get(name)
    if excerpt is None:
        return None
    if not isinstance(excerpt, dict):
        refused.append(f"{where} {name}: not a sensor excerpt")
        return None
    value = excerpt.get("Reading")
    if value is None:
        return None
    units = excerpt.get("ReadingUnits")
    if units is not None and units != UNITS[name]:
        refused.append(f"{where} {name}: in {units!r}, not {UNITS[name]!r}")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        refused.append(f"{where} {name}: {value!r} is not a number")
        return None
    return float(value)


def _leaks(client: Any, uri: str, refused: list[str]) -> int | None:
    """Leak detectors of a LeakDetection resource reporting a leak (None: no detector
    reports)."""
    ld = _get(client, uri)
    _typed(ld, uri, "LeakDetection")
    link = _link(ld, "LeakDetectors")
    if not link:
        return None
    leaks, read = 0, 0
    for m in _members(client, link):
        det = _get(client, m)
        status = det.get("Status") if isinstance(det.get("Status"), dict) else {}
        if status.get("State") in ("Absent", "Disabled"):
            continue
        state = det.get("DetectorState")
        if state is None:
            continue
        if state not in _LEAK_STATES:
            refused.append(f"{m} DetectorState: {state!r} is not OK, Warning or Critical")
            continue
        leaks += _LEAK_STATES[state]
        read += 1
    return leaks if read else None


def _read_thermal_subsystem(client: Any, uri: str, ts: dict[str, Any],
                            refused: list[str]) -> dict[str, float]:
    """A chassis' ThermalSubsystem: temperature summary, mean fan speed, leaks."""
    _typed(ts, uri, "ThermalSubsystem")
    out: dict[str, float] = {}
    metrics = _link(ts, "ThermalMetrics")
    if metrics:
        summary = _get(client, metrics).get("TemperatureSummaryCelsius")
        if isinstance(summary, dict):
            for q, names in (("internal_c", ("Internal",)), ("intake_c", ("Intake", "Ambient")),
                             ("exhaust_c", ("Exhaust",))):
                for name in names:
                    if summary.get(name) is None:
                        continue
                    v = _reading(summary, name, metrics, refused)
                    if v is not None:
                        out[q] = v
                    break
    fans = _link(ts, "Fans")
    if fans:
        speeds = []
        for m in _members(client, fans):
            fan = _get(client, m)
            status = fan.get("Status") if isinstance(fan.get("Status"), dict) else {}
            if status.get("State") in ("Absent", "Disabled"):
                continue
            v = _reading(fan, "SpeedPercent", m, refused)
            if v is not None:
                speeds.append(v)
        if speeds:
            out["fan_speed_pct"] = sum(speeds) / len(speeds)
    leak = _link(ts, "LeakDetection")
    if leak:
        n = _leaks(client, leak, refused)
        if n is not None:
            out["leaks"] = out.get("leaks", 0.0) + n
    return out


def read_cooling_unit(client: Any, uri: str,
                      refused: list[str] | None = None) -> dict[str, float]:
    """A CDU's readings (our quantities, SI) from its CoolingUnit resource (its
    connectors, its LeakDetection, its chassis' ThermalSubsystem), or from a
    ThermalSubsystem bound directly. Refused values are appended to ``refused``."""
    refused = [] if refused is None else refused
    cu = _get(client, uri)
    if "ThermalSubsystem" in str(cu.get("@odata.type", "")):
        out = _read_thermal_subsystem(client, uri, cu, refused)
        if not out and not refused:
            raise RedfishReadError(f"{uri}: no temperature, fan or leak detector reports")
        return out
    _typed(cu, uri, "CoolingUnit")
    out = _read_connectors(client, uri, cu, refused)
    leak = _link(cu, "LeakDetection")
    if leak:
        n = _leaks(client, leak, refused)
        if n is not None:
            out["leaks"] = float(n)
    links = cu.get("Links") if isinstance(cu.get("Links"), dict) else {}
    chassis = links.get("Chassis") or []
    if isinstance(chassis, list) and chassis and isinstance(chassis[0], dict):
        ch_uri = chassis[0].get("@odata.id")
        thermal = _link(_get(client, ch_uri), "ThermalSubsystem") if ch_uri else None
        if thermal:
            got = _read_thermal_subsystem(client, thermal, _get(client, thermal), refused)
            if "leaks" in got:
                got["leaks"] += out.get("leaks", 0.0)
            out.update(got)
    if not out and not refused:
        raise RedfishReadError(f"{uri}: no connector reports a reading")
    return out


def _read_connectors(client: Any, uri: str, cu: dict[str, Any],
                     refused: list[str]) -> dict[str, float]:
    """The secondary connectors mixed: flows and heats add, temperatures are the
    flow-weighted mean; a quantity one connector's refused value spoils is left out."""
    link = _link(cu, "SecondaryCoolantConnectors")
    if not link:
        raise RedfishReadError(f"{uri} has no SecondaryCoolantConnectors")
    flows: list[float | None] = []
    sup: list[float | None] = []
    ret: list[float | None] = []
    heat: list[float] = []
    spoiled: set[str] = set()
    for m in _members(client, link):
        conn = _get(client, m)
        got = {}
        for q, name in (("flow", "FlowLitersPerMinute"), ("supply_c", "SupplyTemperatureCelsius"),
                        ("return_c", "ReturnTemperatureCelsius"), ("heat", "HeatRemovedkW")):
            before = len(refused)
            got[q] = _reading(conn, name, m, refused)
            if len(refused) > before:
                spoiled.add(q)
        flows.append(got["flow"])
        sup.append(got["supply_c"])
        ret.append(got["return_c"])
        if got["heat"] is not None:
            heat.append(got["heat"])
    out: dict[str, float] = {}
    known = [f for f in flows if f is not None]
    if known and "flow" not in spoiled:
        out["flow_kg_s"] = PG25.kg_s_from_l_min(sum(known))
    for name, temps in (("supply_c", sup), ("return_c", ret)):
        pairs = [(t, f) for t, f in zip(temps, flows, strict=True) if t is not None]
        if not pairs or name in spoiled:
            continue
        if "flow" not in spoiled and all(f is not None and f > 0 for _, f in pairs):
            total = sum(f for _, f in pairs if f is not None)
            out[name] = sum(t * f for t, f in pairs if f is not None) / total
        else:
            out[name] = sum(t for t, _ in pairs) / len(pairs)
    if heat and "heat" not in spoiled:
        out["heat_w"] = sum(heat) * 1e3
    return out


def read_power_distribution(client: Any, uri: str,
                            refused: list[str] | None = None) -> dict[str, float]:
    """A feed's, PDU's or power shelf's power: a PowerDistribution's ``Metrics``
    (``PowerWatts``), or a chassis' PowerSubsystem (a power shelf as a chassis): the sum
    of its power supplies' ``Metrics.InputPowerWatts``."""
    refused = [] if refused is None else refused
    pd = _get(client, uri)
    if "PowerSubsystem" in str(pd.get("@odata.type", "")):
        return _read_power_subsystem(client, uri, pd, refused)
    _typed(pd, uri, "PowerDistribution")
    link = _link(pd, "Metrics")
    if not link:
        raise RedfishReadError(f"{uri} has no Metrics")
    before = len(refused)
    watts = _reading(_get(client, link), "PowerWatts", link, refused)
    if watts is None:
        if len(refused) > before:
            return {}
        raise RedfishReadError(f"{link} has no PowerWatts reading")
    return {"power_w": watts}


def _read_power_subsystem(client: Any, uri: str, ps: dict[str, Any],
                          refused: list[str]) -> dict[str, float]:
    """Σ input power of a PowerSubsystem's supplies (PowerSupplyMetrics ``InputPowerWatts``;
    a supply without a reading is left out, none at all is an error, a refused one spoils
    the sum)."""
    link = _link(ps, "PowerSupplies")
    if not link:
        raise RedfishReadError(f"{uri} has no PowerSupplies")
    total, read, before = 0.0, 0, len(refused)
    for m in _members(client, link):
        supply = _get(client, m)
        metrics = _link(supply, "Metrics")
        watts = (_reading(_get(client, metrics), "InputPowerWatts", metrics, refused)
                 if metrics else None)
        if watts is not None:
            total += watts
            read += 1
    if len(refused) > before:
        return {}
    if not read:
        raise RedfishReadError(f"{uri}: no power supply reports InputPowerWatts")
    return {"power_w": total}


def bounds_of(binding: Any) -> dict[str, float]:
    """The physical bound of each bounded quantity of the binding's element:
    ``readings.PHYSICAL_MARGIN`` × its installed rating (power) or capacity (CDU heat), W."""
    if binding.chain == "cooling":
        el = binding.cooling_element
        return {"heat_w": PHYSICAL_MARGIN * el.capacity_kw * el.units * 1e3}
    el = binding.power_element
    return {"power_w": PHYSICAL_MARGIN * el.rating_kw * el.units * 1e3}


def checked(chain: str, values: dict[str, float], uri: str, refused: list[str],
            bounds: dict[str, float] | None = None) -> dict[str, float]:
    """The values within the native batches' ranges and under the element's physical
    bounds; each other one is refused (appended to ``refused``) and left out."""
    out = {}
    for k, v in values.items():
        unit, lo, hi = ACCEPTED[chain][k]
        bound = (bounds or {}).get(k)
        if not lo <= v <= hi:
            refused.append(f"{uri}: {k} {v:g} is outside {lo:g} … {hi:g} {unit}")
        elif bound is not None and v > bound:
            refused.append(f"{uri}: {k} {v:g} {unit} is over {PHYSICAL_MARGIN:g} × the "
                           f"element's installed rating ({bound:g} {unit})")
        else:
            out[k] = v
    return out


def _client(source: Any) -> Any:
    import redfish

    password = os.environ.get(source.password_env, "") if source.password_env else None
    client = redfish.redfish_client(base_url=source.base_url, username=source.username or None,
                                    password=password, timeout=source.timeout_s, max_retry=1)
    if source.username:
        client.login(auth="session")
    return client


def poll_source(source: Any, r: Any, prefix: str, now: float | None = None) -> PollResult:
    """Read every binding of ``source`` once and store what was read; count the refused
    values on the source row (``values_refused``)."""
    from django.db.models import F
    from django.utils import timezone

    now = time.time() if now is None else now
    result = PollResult(source.name)
    got: list[Reading] = []
    client = None
    try:
        client = _client(source)
        for b in source.bindings.select_related("cooling_element", "power_element"):
            chain = b.chain
            refused: list[str] = []
            try:
                if chain == "cooling":
                    values = read_cooling_unit(client, b.uri, refused)
                    key = b.cooling_element.key
                else:
                    values = read_power_distribution(client, b.uri, refused)
                    key = b.power_element.key
                values = checked(chain, values, b.uri, refused, bounds_of(b))
                if values:
                    got.append(Reading(chain, key, values, now, "redfish"))
            except RedfishReadError as exc:
                result.errors[b.uri] = str(exc)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                result.errors[b.uri] = f"{b.uri}: malformed resource ({type(exc).__name__}: {exc})"
            if refused:
                result.refused += len(refused)
                result.errors[b.uri] = "; ".join(
                    ([result.errors[b.uri]] if b.uri in result.errors else [])
                    + [f"refused {x.replace(b.uri, '').lstrip('/: ')}" for x in refused])
    except Exception as exc:  # the service as a whole: unreachable, refused the login
        result.errors[source.base_url] = f"{type(exc).__name__}: {exc}"
    finally:
        if client is not None and source.username:
            try:
                client.logout()
            except Exception:  # a failed logout leaves a session to time out
                log.warning("redfish source %s: logout failed", source.name)
    cluster_id = source.site.cluster_id
    result.stored = store(r, prefix, cluster_id, got, now)
    error = "; ".join(f"{k}: {v}" for k, v in result.errors.items())[:500]
    type(source).objects.filter(pk=source.pk).update(
        last_polled=timezone.now(), last_error=error,
        values_refused=F("values_refused") + result.refused)
    if result.errors:
        log.warning("redfish source %s: %s", source.name, error)
    return result


def poll_due(r: Any, prefix: str, now: float | None = None) -> list[PollResult]:
    """Poll every enabled source whose interval has passed since its last poll."""
    from twin.facility.models import RedfishSource

    now = time.time() if now is None else now
    out = []
    for source in RedfishSource.objects.filter(enabled=True).select_related("site"):
        last = source.last_polled.timestamp() if source.last_polled else None
        if last is None or now - last >= source.interval_s:
            out.append(poll_source(source, r, prefix, now))
    return out
