"""Native facility batches: validated whole, or refused whole with a message per field.

The body (JSON)::

    {"readings": [
        {"element": "cdu-0", "supply_c": 31.2, "return_c": 40.8, "flow_kg_s": 2.3,
         "heat_w": 88000, "ts": 1764910000.0},
        {"element": 17, "power_w": 41000}
    ]}

``element`` is an element of the cluster's site, by its key, its name or its id
(an integer). The quantities say which chain it is on: ``supply_c``, ``return_c``,
``flow_kg_s``, ``heat_w`` are a CDU's (``twin.facility.readings.CDU_QUANTITIES``),
``power_w`` a feed's, PDU's, busway's or power shelf's input; an id is looked up in
that chain. ``ts`` (Unix seconds, optional: the time of receipt) may not be in the
future (:data:`MAX_SKEW_S`) nor older than the readings' lifetime. At least one
quantity per reading, each finite and inside its range (a power, or a CDU's heat, at most
``readings.PHYSICAL_MARGIN`` × the element's installed rating: a PDU of 2 × 100 kW cannot
read 10 MW), one reading per element,
at most :data:`MAX_READINGS`. Any error refuses the batch: nothing is stored, and
the 400 lists every error by its path (``readings[1].power_w``).
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from twin.facility.readings import (
    CDU_QUANTITIES,
    PHYSICAL_MARGIN,
    POWER_KINDS_READ,
    QUANTITIES,
    Reading,
)

__all__ = ["MAX_READINGS", "MAX_SKEW_S", "BadFacilityBatch", "parse_batch"]

MAX_READINGS = 10_000
"""Readings per batch (a site's CDUs and PDUs fit many times over)."""
MAX_SKEW_S = 60.0
"""How far in the future a reading's ``ts`` may be (clock skew)."""


class BadFacilityBatch(Exception):
    """The batch is refused: ``errors`` maps each field's path to what is wrong."""

    def __init__(self, errors: Mapping[str, str], detail: str = "the batch was refused; "
                 "nothing was stored") -> None:
        super().__init__(detail)
        self.errors = dict(errors)
        self.detail = detail

    def as_dict(self) -> dict[str, Any]:
        return {"detail": self.detail, "errors": self.errors}


def _elements(cluster_id: int) -> dict[str, dict[str, Any]]:
    """Per chain: the readable elements of the cluster's site by key, name and id."""
    from twin.facility.models import CoolingElement, PowerElement

    out: dict[str, dict[str, Any]] = {"cooling": {}, "power": {}}
    for chain, model, kinds, rating in (
            ("cooling", CoolingElement, ("cdu",), "capacity_kw"),
            ("power", PowerElement, POWER_KINDS_READ, "rating_kw")):
        by: dict[str, dict[Any, Any]] = {"key": {}, "name": {}, "id": {}, "other": {},
                                         "bound": {}}
        for pk, key, name, kind, kw, units in model.objects.filter(
                site__cluster_id=cluster_id).values_list("pk", "key", "name", "kind", rating,
                                                         "units"):
            if kind not in kinds:
                by["other"][key] = kind
                by["other"][pk] = kind
                continue
            by["key"][key] = key
            by["id"][pk] = key
            # the physical bound of its power (or a CDU's heat), W
            by["bound"][key] = PHYSICAL_MARGIN * float(kw or 0.0) * int(units or 1) * 1e3
            if name:
                by["name"].setdefault(name, []).append(key)
        out[chain] = by
    return out


def _resolve(ref: Any, chain: str, known: dict[str, Any]) -> str:
    """The key of the element ``ref`` names on ``chain`` (ValueError: why not)."""
    by = known[chain]
    what = "a CDU" if chain == "cooling" else "a feed, PDU, busway or power shelf"
    if isinstance(ref, bool) or not isinstance(ref, int | str) or ref == "":
        raise ValueError("give the element's key, name or id")
    if isinstance(ref, int):
        if ref in by["id"]:
            return str(by["id"][ref])
        if ref in by["other"]:
            raise ValueError(f"element {ref} is a {by['other'][ref]}: only {what} has "
                             f"these readings")
        raise ValueError(f"no {chain} element with id {ref} on this cluster's site")
    if ref in by["key"]:
        return str(by["key"][ref])
    names = by["name"].get(ref, [])
    if len(names) == 1:
        return str(names[0])
    if len(names) > 1:
        raise ValueError(f"{len(names)} elements are named {ref!r}: give the key")
    if ref in by["other"]:
        raise ValueError(f"{ref!r} is a {by['other'][ref]}: only {what} has these readings")
    raise ValueError(f"no {chain} element {ref!r} on this cluster's site")


def parse_batch(body: bytes, cluster_id: int, now: float, ttl: float) -> list[Reading]:
    """The batch's readings, every one valid (else :class:`BadFacilityBatch`)."""
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadFacilityBatch({"body": f"not JSON: {exc}"}) from None
    if not isinstance(doc, dict):
        raise BadFacilityBatch({"body": 'send an object: {"readings": [...]}'})
    unknown = sorted(set(doc) - {"readings"})
    errors: dict[str, str] = {f: "unknown field" for f in unknown}
    items = doc.get("readings")
    if not isinstance(items, list) or not items:
        errors["readings"] = "a non-empty list of readings"
        raise BadFacilityBatch(errors)
    if len(items) > MAX_READINGS:
        errors["readings"] = f"{len(items):,} readings; at most {MAX_READINGS:,} per batch"
        raise BadFacilityBatch(errors)
    known = _elements(cluster_id)
    out: list[Reading] = []
    seen: dict[tuple[str, str], int] = {}
    for i, item in enumerate(items):
        where = f"readings[{i}]"
        if not isinstance(item, dict):
            errors[where] = "an object with element and quantities"
            continue
        quantities = {k: v for k, v in item.items() if k not in ("element", "ts")}
        cdu = [k for k in quantities if k in CDU_QUANTITIES]
        chain = "cooling" if cdu else "power"
        allowed = QUANTITIES[chain]
        for k in quantities:
            if k not in allowed:
                errors[f"{where}.{k}"] = (
                    "unknown field" if k not in CDU_QUANTITIES and k != "power_w" else
                    "a CDU's quantities and a power element's power cannot be in one reading")
        if not quantities:
            errors[where] = (f"no quantity: give any of {', '.join(CDU_QUANTITIES)} (a CDU) "
                             f"or power_w (a feed, PDU, busway or power shelf)")
        values: dict[str, float] = {}
        for k, v in quantities.items():
            if k not in allowed:
                continue
            unit, lo, hi = allowed[k]
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                errors[f"{where}.{k}"] = f"a finite number ({unit})"
            elif not lo <= v <= hi:
                errors[f"{where}.{k}"] = f"{v!r} is outside {lo:g} … {hi:g} {unit}"
            else:
                values[k] = float(v)
        ts = item.get("ts", now)
        if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts):
            errors[f"{where}.ts"] = "Unix seconds (a finite number)"
        elif ts > now + MAX_SKEW_S:
            errors[f"{where}.ts"] = (f"{ts - now:.0f} s in the future (at most "
                                     f"{MAX_SKEW_S:.0f} s of clock skew)")
        elif ts < now - ttl:
            errors[f"{where}.ts"] = (f"{now - ts:.0f} s old: readings stand for {ttl:.0f} s, "
                                     f"this one would be stale on arrival")
        if "element" not in item:
            errors[f"{where}.element"] = "this field is required"
            continue
        try:
            key = _resolve(item["element"], chain, known)
        except ValueError as exc:
            errors[f"{where}.element"] = str(exc)
            continue
        if (chain, key) in seen:
            errors[f"{where}.element"] = (f"{key} is already in readings[{seen[(chain, key)]}]: "
                                          f"one reading per element and batch")
            continue
        seen[(chain, key)] = i
        bounded = "heat_w" if chain == "cooling" else "power_w"
        bound = known[chain]["bound"].get(key)
        if bounded in values and bound is not None and values[bounded] > bound:
            errors[f"{where}.{bounded}"] = (
                f"{values[bounded]:g} W is over {PHYSICAL_MARGIN:g} × {key}'s installed "
                f"rating ({bound:g} W): not a reading this element can give")
            continue
        if values and f"{where}.ts" not in errors:
            out.append(Reading(chain, key, values, float(ts)))
    if errors:
        raise BadFacilityBatch(errors)
    return out
