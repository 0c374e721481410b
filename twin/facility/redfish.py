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

A value outside the native batches' ranges, a resource of another type, an
unreachable service or a 4xx/5xx is that binding's error: the source's other bindings
are still stored, and ``last_error`` on the source row says what failed (blank when the
last poll read everything). Readings carry the poll's time (Redfish sensor excerpts
have none of their own).

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
from twin.facility.readings import QUANTITIES, Reading, store

__all__ = ["PollResult", "RedfishReadError", "poll_due", "poll_source", "read_cooling_unit",
           "read_power_distribution"]

log = logging.getLogger(__name__)


class RedfishReadError(Exception):
    """A resource could not be read as the reading its binding expects."""


@dataclass
class PollResult:
    """What one poll of one source did."""

    source: str
    stored: int = 0
    errors: dict[str, str] = field(default_factory=dict)  # uri → what failed


def _get(client: Any, uri: str) -> dict[str, Any]:
    resp = client.get(uri)
    if resp.status != 200:
        raise RedfishReadError(f"GET {uri} answered {resp.status}")
    d = resp.dict
    if not isinstance(d, dict):
        raise RedfishReadError(f"GET {uri} is not a JSON object")
    return d


def _typed(d: dict[str, Any], uri: str, schema: str) -> None:
    kind = str(d.get("@odata.type", ""))
    if f".{schema}" not in kind and not kind.endswith(schema):
        raise RedfishReadError(f"{uri} is a {kind or 'resource without @odata.type'}, "
                               f"not a {schema}")


def _reading(d: dict[str, Any], name: str) -> float | None:
    excerpt = d.get(name)
    value = excerpt.get("Reading") if isinstance(excerpt, dict) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def read_cooling_unit(client: Any, uri: str) -> dict[str, float]:
    """A CDU's readings (our quantities, SI) from its CoolingUnit resource."""
    cu = _get(client, uri)
    _typed(cu, uri, "CoolingUnit")
    link = (cu.get("SecondaryCoolantConnectors") or {}).get("@odata.id")
    if not link:
        raise RedfishReadError(f"{uri} has no SecondaryCoolantConnectors")
    members = _get(client, link).get("Members") or []
    flows: list[float | None] = []
    sup: list[float | None] = []
    ret: list[float | None] = []
    heat: list[float] = []
    for m in members:
        conn = _get(client, m["@odata.id"])
        flows.append(_reading(conn, "FlowLitersPerMinute"))
        sup.append(_reading(conn, "SupplyTemperatureCelsius"))
        ret.append(_reading(conn, "ReturnTemperatureCelsius"))
        h = _reading(conn, "HeatRemovedkW")
        if h is not None:
            heat.append(h)
    out: dict[str, float] = {}
    known = [f for f in flows if f is not None]
    if known:
        out["flow_kg_s"] = PG25.kg_s_from_l_min(sum(known))
    for name, temps in (("supply_c", sup), ("return_c", ret)):
        pairs = [(t, f) for t, f in zip(temps, flows, strict=True) if t is not None]
        if not pairs:
            continue
        if all(f is not None and f > 0 for _, f in pairs):
            total = sum(f for _, f in pairs if f is not None)
            out[name] = sum(t * f for t, f in pairs if f is not None) / total
        else:
            out[name] = sum(t for t, _ in pairs) / len(pairs)
    if heat:
        out["heat_w"] = sum(heat) * 1e3
    if not out:
        raise RedfishReadError(f"{uri}: no connector reports a reading")
    return out


def read_power_distribution(client: Any, uri: str) -> dict[str, float]:
    """A feed's, PDU's or power shelf's power: a PowerDistribution's ``Metrics``
    (``PowerWatts``), or a chassis' PowerSubsystem (a power shelf as a chassis): the sum
    of its power supplies' ``Metrics.InputPowerWatts``."""
    pd = _get(client, uri)
    if "PowerSubsystem" in str(pd.get("@odata.type", "")):
        return _read_power_subsystem(client, uri, pd)
    _typed(pd, uri, "PowerDistribution")
    link = (pd.get("Metrics") or {}).get("@odata.id")
    if not link:
        raise RedfishReadError(f"{uri} has no Metrics")
    watts = _reading(_get(client, link), "PowerWatts")
    if watts is None:
        raise RedfishReadError(f"{link} has no PowerWatts reading")
    return {"power_w": watts}


def _read_power_subsystem(client: Any, uri: str, ps: dict[str, Any]) -> dict[str, float]:
    """Σ input power of a PowerSubsystem's supplies (PowerSupplyMetrics ``InputPowerWatts``;
    a supply without a reading is left out, none at all is an error)."""
    link = (ps.get("PowerSupplies") or {}).get("@odata.id")
    if not link:
        raise RedfishReadError(f"{uri} has no PowerSupplies")
    total, read = 0.0, 0
    for m in _get(client, link).get("Members") or []:
        supply = _get(client, m["@odata.id"])
        metrics = (supply.get("Metrics") or {}).get("@odata.id")
        watts = _reading(_get(client, metrics), "InputPowerWatts") if metrics else None
        if watts is not None:
            total += watts
            read += 1
    if not read:
        raise RedfishReadError(f"{uri}: no power supply reports InputPowerWatts")
    return {"power_w": total}


def _checked(chain: str, values: dict[str, float], uri: str) -> dict[str, float]:
    """The native batches' ranges apply: a value outside is refused, not stored."""
    for k, v in values.items():
        unit, lo, hi = QUANTITIES[chain][k]
        if not lo <= v <= hi:
            raise RedfishReadError(f"{uri}: {k} {v:g} is outside {lo:g} … {hi:g} {unit}")
    return values


def _client(source: Any) -> Any:
    import redfish

    password = os.environ.get(source.password_env, "") if source.password_env else None
    client = redfish.redfish_client(base_url=source.base_url, username=source.username or None,
                                    password=password, timeout=source.timeout_s, max_retry=1)
    if source.username:
        client.login(auth="session")
    return client


def poll_source(source: Any, r: Any, prefix: str, now: float | None = None) -> PollResult:
    """Read every binding of ``source`` once and store what was read."""
    from django.utils import timezone

    now = time.time() if now is None else now
    result = PollResult(source.name)
    got: list[Reading] = []
    client = None
    try:
        client = _client(source)
        for b in source.bindings.select_related("cooling_element", "power_element"):
            chain = b.chain
            try:
                if chain == "cooling":
                    values = read_cooling_unit(client, b.uri)
                    key = b.cooling_element.key
                else:
                    values = read_power_distribution(client, b.uri)
                    key = b.power_element.key
                got.append(Reading(chain, key, _checked(chain, values, b.uri), now, "redfish"))
            except RedfishReadError as exc:
                result.errors[b.uri] = str(exc)
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
    type(source).objects.filter(pk=source.pk).update(last_polled=timezone.now(),
                                                     last_error=error)
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
