"""Measured facility readings: stored per element in Redis, preferred over the model.

CDU, PDU and power-shelf readings come in two ways, into one store: native batches
(``POST /api/telemetry/clusters/<id>/facility/``, parsed by :mod:`twin.facility.batches`)
and the Redfish poller (:mod:`twin.facility.redfish`). Each element's latest reading is
one JSON string at :func:`reading_key` (its quantities, the time it was taken and where
it came from) that Redis expires ``settings.FACILITY_READING_TTL_S`` seconds (default
:data:`DEFAULT_TTL_S`) after that time: a sensor that stops reporting hands its element
back to the model without anyone cleaning up.

The live tick (``twin.facility.live.step_live``) reads the fresh readings of the
elements it publishes and :func:`overlay` puts them in place of the model's figures:
each element dict then says which quantities are ``measured``, keeps the model's own
prediction of them under ``model``, and recomputes what derives from them (a CDU's
load fraction from its measured heat, a power element's headroom and load fraction
from its measured input). The thermal state itself is not corrected by a reading (the
model keeps its own trajectory, which is what the drift rule compares against).

Model drift (:func:`drift_slots`): for each quantity that may be measured, the ratio
``|reading − model| / tolerance``; the ``model_drift`` alert rule fires when it stays
over 1 for its ``min_s``. The tolerances (:data:`TOLERANCES`) are assumptions, not
taken from a standard: 2 K on a temperature (the order of a clamp-on or immersion
sensor's accuracy plus the model's approach-temperature error), 10 % on a flow, a heat
or an electrical power (the accuracy class of an uncalibrated flow meter, and a PDU's
metering plus the model's efficiency curves), with an absolute floor so that an idle
element (model ≈ 0) does not drift on noise.
"""
from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ACCEPTED", "CDU_OBSERVED", "CDU_QUANTITIES", "DEFAULT_TTL_S", "OBSERVED",
           "PHYSICAL_MARGIN", "POWER_KINDS_READ", "POWER_QUANTITIES", "QUANTITIES", "TOLERANCES",
           "DriftSlots", "Reading", "drift_slots", "drift_subject", "index_key", "overlay",
           "read_fresh", "reading_key", "store", "ttl_s"]

DEFAULT_TTL_S = 60.0
"""How long a reading stands in for the model (assumption: six 10 s batches or two
30 s Redfish polls missed and the model takes over again)."""

CDU_QUANTITIES: dict[str, tuple[str, float, float]] = {
    "supply_c": ("°C", 0.0, 150.0),
    "return_c": ("°C", 0.0, 150.0),
    "flow_kg_s": ("kg/s", 0.0, 1e6),
    "heat_w": ("W", 0.0, 1e10),
}
"""A CDU's readings (technology-loop side): name → (unit, lowest, highest accepted)."""
POWER_QUANTITIES: dict[str, tuple[str, float, float]] = {"power_w": ("W", 0.0, 1e10)}
"""A power element's reading: the power it draws (its input, as the model's ``input_w``)."""
QUANTITIES = {"cooling": CDU_QUANTITIES, "power": POWER_QUANTITIES}

CDU_OBSERVED: dict[str, tuple[str, float, float]] = {
    "leaks": ("detectors", 0.0, 10_000.0),
    "internal_c": ("°C", -40.0, 150.0),
    "intake_c": ("°C", -40.0, 150.0),
    "exhaust_c": ("°C", -40.0, 150.0),
    "fan_speed_pct": ("%", 0.0, 100.0),
}
"""A CDU's readings that the model has no figure of (Redfish LeakDetection and the
chassis' ThermalSubsystem): stored and shown (``observed`` on the element), never
compared with the model. ``leaks``: the leak detectors reporting a leak (the
``cdu_leak`` alert rule)."""
OBSERVED = {"cooling": CDU_OBSERVED, "power": {}}

PHYSICAL_MARGIN = 1.5
"""A power reading above this × the element's installed rating (``rating_kw × units``),
or a CDU heat above this × its installed capacity (``capacity_kw × units``), is refused
(native batches and Redfish). An assumption: UL 489 breakers must trip within an hour
at 135 % of their rating and within minutes at 200 %, so a steady reading over 150 % is
a wrong reading (a PDU of 2 × 100 kW reading 10 MW), not a state of the element."""
ACCEPTED = {chain: {**QUANTITIES[chain], **OBSERVED[chain]} for chain in QUANTITIES}
"""Every quantity a reading may carry, per chain: name → (unit, lowest, highest)."""

POWER_KINDS_READ = ("feed", "pdu", "busway", "power_shelf")
"""Power elements whose readings the tick publishes (the ones the summary lists)."""

TOLERANCES: dict[str, tuple[str, float, float]] = {
    "supply_c": ("abs", 2.0, 0.0),
    "return_c": ("abs", 2.0, 0.0),
    "flow_kg_s": ("rel", 0.10, 0.05),
    "heat_w": ("rel", 0.10, 1000.0),
    "power_w": ("rel", 0.10, 1000.0),
}
"""Per quantity: (kind, tolerance, floor). ``abs``: a reading within ``tolerance`` of
the model (K) agrees; ``rel``: within ``tolerance × |model|``, but never less than
``floor`` in the quantity's unit. Assumptions (see the module doc)."""

_MODEL_FIELD = {"power_w": "input_w"}
"""A reading's name → the element dict's field it replaces (same name when absent)."""


def ttl_s() -> float:
    """``settings.FACILITY_READING_TTL_S`` (default :data:`DEFAULT_TTL_S`)."""
    from django.conf import settings

    return float(getattr(settings, "FACILITY_READING_TTL_S", DEFAULT_TTL_S))


def reading_key(prefix: str, cluster_id: int, chain: str, key: str) -> str:
    """One element's latest reading (``<prefix>:c<id>:facility:reading:<chain>:<key>``)."""
    return f"{prefix}:c{cluster_id}:facility:reading:{chain}:{key}"


def index_key(prefix: str, cluster_id: int) -> str:
    """The cluster's measured elements (a sorted set: ``<chain>:<key>`` scored by the time
    its reading expires), so a tick reads only the readings that exist: one small call
    when there are none, instead of a lookup per CDU and PDU."""
    return f"{prefix}:c{cluster_id}:facility:readings"


@dataclass(frozen=True)
class Reading:
    """One element's measured quantities at ``ts`` (Unix seconds), from ``source``."""

    chain: str  # "cooling" (a CDU) or "power"
    key: str
    values: Mapping[str, float]
    ts: float
    source: str = "native"  # or "redfish"

    def to_json(self) -> str:
        return json.dumps({"values": dict(self.values), "ts": self.ts, "source": self.source})


def store(r: Any, prefix: str, cluster_id: int, readings: Iterable[Reading], now: float,
          ttl: float | None = None) -> int:
    """Store each reading as its element's latest, expiring ``ttl`` after its time;
    returns how many were stored (a reading already older than ``ttl`` is not)."""
    ttl = ttl_s() if ttl is None else ttl
    pipe = r.pipeline(transaction=True)
    index = index_key(prefix, cluster_id)
    n = 0
    for rd in readings:
        left = rd.ts + ttl - now
        if left <= 0:
            continue
        pipe.set(reading_key(prefix, cluster_id, rd.chain, rd.key), rd.to_json(),
                 px=max(int(left * 1000), 1))
        pipe.zadd(index, {f"{rd.chain}:{rd.key}": rd.ts + ttl})
        n += 1
    if n:
        pipe.zremrangebyscore(index, "-inf", now)
        pipe.pexpire(index, int(ttl * 1000) + 1000)  # outlives every reading it lists
        pipe.execute()
    return n


def read_fresh(r: Any, prefix: str, cluster_id: int, wanted: Sequence[tuple[str, str]],
               now: float, ttl: float | None = None) -> dict[tuple[str, str], Reading]:
    """The fresh readings of ``wanted`` ((chain, key) pairs): the index's unexpired
    members, then one MGET of those among ``wanted`` (none: one call in all)."""
    if not wanted:
        return {}
    ttl = ttl_s() if ttl is None else ttl
    listed = {m.decode() if isinstance(m, bytes) else str(m)
              for m in r.zrangebyscore(index_key(prefix, cluster_id), now, "+inf")}
    present = [(c, k) for c, k in wanted if f"{c}:{k}" in listed]
    if not present:
        return {}
    raws = r.mget([reading_key(prefix, cluster_id, c, k) for c, k in present])
    out: dict[tuple[str, str], Reading] = {}
    for (chain, key), raw in zip(present, raws, strict=True):
        if not raw:
            continue
        d = json.loads(raw)
        ts = float(d["ts"])
        if now - ts > ttl:
            continue
        out[(chain, key)] = Reading(chain, key, {k: float(v) for k, v in d["values"].items()},
                                    ts, str(d.get("source", "native")))
    return out


def _tolerance(quantity: str, model: float) -> float:
    kind, tol, floor = TOLERANCES[quantity]
    return tol if kind == "abs" else max(tol * abs(model), floor)


def overlay(cdus: list[dict[str, Any]], power: list[dict[str, Any]],
            power_kinds: Sequence[str], fresh: Mapping[tuple[str, str], Reading],
            now: float) -> None:
    """Put the fresh readings in place of the model's figures, in the element dicts
    (``FacilityReading.elements``: ``cdus``, and ``power`` with each one's kind in
    ``power_kinds``). Every element gets ``measured`` (the quantities read, empty
    when none) and ``observed`` (the readings the model has no figure of,
    :data:`OBSERVED`, set on the element under their names); a read one also ``model``
    (the model's own figures of those), ``reading_source`` and ``reading_age_s``."""
    for chain, elems in (("cooling", cdus), ("power", power)):
        for i, e in enumerate(elems):
            e["measured"] = []
            e["observed"] = []
            if chain == "power" and power_kinds[i] not in POWER_KINDS_READ:
                continue
            rd = fresh.get((chain, str(e["key"])))
            if rd is None:
                continue
            model: dict[str, float] = {}
            for q, v in sorted(rd.values.items()):
                if q in OBSERVED[chain]:
                    e[q] = float(v)
                    e["observed"].append(q)
                    continue
                f = _MODEL_FIELD.get(q, q)
                if f not in e:
                    continue
                model[q] = float(e[f])
                e[f] = float(v)
                e["measured"].append(q)
            e["model"] = model
            e["reading_source"] = rd.source
            e["reading_age_s"] = round(max(now - rd.ts, 0.0), 3)
            if chain == "cooling" and "heat_w" in model and e.get("capacity_w"):
                e["load_fraction"] = float(e["heat_w"]) / float(e["capacity_w"])
            if chain == "power" and "power_w" in model:
                limit = min(float(e["planned_w"]), float(e["available_w"]))
                e["headroom_w"] = limit - float(e["input_w"])
                e["load_fraction"] = (float(e["input_w"]) / limit if limit > 0
                                      else float("inf"))


def drift_subject(key: str, quantity: str) -> str:
    """``drift:<key>:<quantity>``; over the alert's 40 characters, the key's BLAKE2 digest
    (8 hex) stands for it, so two long keys with one prefix never share a subject."""
    subject = f"drift:{key}:{quantity}"
    if len(subject) <= 40:
        return subject
    return f"drift:{hashlib.blake2s(key.encode(), digest_size=4).hexdigest()}:{quantity}"


def drift_slots(cdus: Sequence[Mapping[str, Any]], power: Sequence[Mapping[str, Any]],
                power_kinds: Sequence[str]) -> tuple[list[dict[str, Any]], list[float]]:
    """The ``model_drift`` rule's subjects and values, after :func:`overlay`.

    One slot per (element, quantity) that may be read — every CDU × its four
    quantities, every published power element × its power — in a fixed order, so a
    slot keeps its position from tick to tick (the alert damping state is by
    position). The value is ``|reading − model| / tolerance`` (NaN: not measured now);
    each slot dict has ``subject`` (:func:`drift_subject`), ``label`` (the whole key)
    and, when measured, the reading, the model and the tolerance.
    """
    slots: list[dict[str, Any]] = []
    values: list[float] = []
    for chain, elems in (("cooling", cdus), ("power", power)):
        for i, e in enumerate(elems):
            if chain == "power" and power_kinds[i] not in POWER_KINDS_READ:
                continue
            model = e.get("model") or {}
            for q in QUANTITIES[chain]:
                key = str(e["key"])
                slot: dict[str, Any] = {"subject": drift_subject(key, q),
                                        "label": f"{key} {q}", "chain": chain, "key": key,
                                        "quantity": q}
                value = float("nan")
                if q in model:
                    reading = float(e[_MODEL_FIELD.get(q, q)])
                    tol = _tolerance(q, model[q])
                    slot.update(reading=reading, model=model[q], tolerance=tol)
                    if math.isfinite(model[q]) and tol > 0:
                        value = abs(reading - model[q]) / tol
                slots.append(slot)
                values.append(value)
    return slots, values


class DriftSlots:
    """:func:`drift_slots` for a plant whose elements do not change: the slots (subjects,
    labels) built once, and each tick only the elements with a fresh reading evaluated
    (a million-card plant has ~19,000 slots and a handful of readings). Same answer as
    :func:`drift_slots` on every element."""

    def __init__(self, cdu_keys: Sequence[str], power_keys: Sequence[str],
                 power_kinds: Sequence[str]) -> None:
        cdus = [{"key": k} for k in cdu_keys]
        power = [{"key": k} for k in power_keys]
        self.slots, self.values = drift_slots(cdus, power, power_kinds)
        self.at: dict[tuple[str, str], int] = {}
        for i, slot in enumerate(self.slots):
            self.at.setdefault((str(slot["chain"]), str(slot["key"])), i)

    def evaluate(self, read: Iterable[tuple[str, Mapping[str, Any]]]
                 ) -> tuple[list[dict[str, Any]], list[float]]:
        """The slots and values with the elements of ``read`` ((chain, element dict after
        :func:`overlay`) pairs) evaluated; the others' slots are the shared static ones."""
        slots, values = list(self.slots), list(self.values)
        for chain, e in read:
            at = self.at.get((chain, str(e["key"])))
            if at is None:
                continue
            sub, vals = (drift_slots([e], [], []) if chain == "cooling"
                         else drift_slots([], [e], [next(iter(POWER_KINDS_READ))]))
            slots[at:at + len(sub)] = sub
            values[at:at + len(sub)] = vals
        return slots, values
