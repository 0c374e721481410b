"""The facility kind: what happens to a cluster's plant when something trips.

Runs :func:`simulation.facility.whatif.run` (the physical twin's engine,
``docs/facility.md``) on the cluster's plant (``twin.facility.plant.plant_for_cluster``)
over a horizon, with events over time: a CDU or pump trip, the loss of a tower,
dry cooler, chiller or CRAH cell, a hot day (wet and dry bulb + N °C), the loss
of a power feed unit, a load surge, capping on or off. Each event is the engine's
own JSON (``{"at_s": 600, "kind": "pump_trip", "target": "cdu-0", "value": 1,
"duration_s": 900}``), the same shape ``Event.to_dict`` writes.

The start: ``start="budget"`` loads every rack to ``load_fraction`` of its cards' TDP (within its
budget; a rack without cards, network or storage, at its nameplate draw: it has no cards to
load or cap, and a surge leaves it be — ``simulation.facility.whatif``);
``start="live"`` takes every rack's measured draw from the run's snapshot
(``twin.scenarios.snapshot.live_state``: the fork every kind shares; a rack the
snapshot has no draw for starts at ``load_fraction``). The engine starts from the
plant's steady state at that load (it settles the thermal network; the measured
card temperatures are not an initial condition it takes — ``docs/facility.md``).

The cards the caps and throughput need (cards per rack, TDP and idle draw) are the
cluster's: the most cards any of its racks holds and its most common accelerator.

The result: time series (at most ``points`` samples), per rack the time until it
reached its thermal limit ("you have 90 s") and its cap, the racks that tripped,
energy and throughput lost, what capping did, PUE over time, and ``first_at_limit``:
the racks that reach their limit first, soonest first.

Bad input is a 400 naming the field: ``cluster`` (none given, or no facility yet),
``params.events[2].target`` (no such element of this site, or one of another kind),
``params.events[0].value`` (negative, NaN, more units than the element has),
``params.horizon_s`` (over :data:`MAX_HORIZON_S`).
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

from simulation.facility.capping import POLICIES
from simulation.facility.plant import Plant, PlantError
from simulation.facility.validate import validate
from simulation.facility.whatif import EVENT_KINDS, Event, WhatIfInput, check
from simulation.facility.whatif import run as run_whatif
from twin.scenarios.kinds.base import (
    FieldSpec,
    Progress,
    ScenarioInputError,
    ScenarioKind,
    fmt,
    jsonable,
    register,
)

__all__ = ["MAX_EVENTS", "MAX_HORIZON_S", "MAX_POINTS", "FacilityKind"]

MAX_HORIZON_S = 7 * 86_400.0
"""A week: at 1 s steps the engine computes only what moves (quiescent stretches are
skipped exactly), 24 h of the demo cluster with six events takes ~1-3 s
(``benchmarks/facility_kind.py``)."""
MAX_EVENTS = 200
MAX_POINTS = 5_000
"""Samples per series kept in the result (the result is stored as JSON)."""
MIN_DT_S = 0.1
MAX_STEPS = 2_000_000
"""Steps per run (horizon / dt): a week at 1 s is 604,800."""
EVENT_FIELDS = ("at_s", "kind", "target", "value", "duration_s")
_UNITS = ("pump_trip", "cooling_loss", "feed_loss")
"""Events whose value counts units lost (an integer ≥ 1, at most the element's units)."""


def _fields() -> tuple[FieldSpec, ...]:
    return (
        FieldSpec("events", "object", "Events", "A JSON list of events: {\"at_s\", \"kind\" "
                  f"({', '.join(EVENT_KINDS)}), \"target\" (an element key of the site), "
                  "\"value\" (units lost, + °C, a load factor, 1/0 for capping), "
                  "\"duration_s\" (then it reverts)}.", default=[], needs_cluster=True),
        FieldSpec("horizon_s", "number", "Horizon (s)", "How long to simulate.",
                  default=3600.0, min=1.0, max=MAX_HORIZON_S, needs_cluster=True),
        FieldSpec("dt_s", "number", "Step (s)", "", default=1.0, min=MIN_DT_S, max=3600.0,
                  advanced=True, needs_cluster=True),
        FieldSpec("start", "choice", "Start from", "budget: every rack at load_fraction of "
                  "its cards' TDP (within its budget), a rack without cards at its "
                  "nameplate; live: every rack's measured draw (the run's snapshot).",
                  default="budget", choices=("budget", "live"), needs_cluster=True),
        FieldSpec("load_fraction", "number", "Load (fraction of budget)", "", default=0.9,
                  min=0.0, max=2.0, needs_cluster=True),
        FieldSpec("capping", "boolean", "Capping", "Live power capping on from the start.",
                  default=False, needs_cluster=True),
        FieldSpec("policy", "choice", "Capping policy", "", default="uniform",
                  choices=POLICIES, needs_cluster=True),
        FieldSpec("wet_bulb_c", "number", "Wet bulb (°C)", "Empty: the site's design wet "
                  "bulb.", min=-40.0, max=45.0, needs_cluster=True),
        FieldSpec("dry_bulb_c", "number", "Dry bulb (°C)", "Empty: the site's design dry "
                  "bulb.", min=-50.0, max=60.0, needs_cluster=True),
        FieldSpec("points", "integer", "Samples", "Samples kept per time series.",
                  default=500, min=2, max=MAX_POINTS, advanced=True, needs_cluster=True),
    )


def _number(value: Any, where: str, *, minimum: float | None = None,
            maximum: float | None = None, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(float(value)):
        raise ScenarioInputError.one(where, f"a finite number, got {value!r}")
    if minimum is not None and value < minimum:
        raise ScenarioInputError.one(where, f"at least {minimum:g}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ScenarioInputError.one(where, f"at most {maximum:g}, got {value!r}")
    return float(value)


def _events(raw: Any, plant: Plant, horizon_s: float) -> list[dict[str, Any]]:
    """The events as the engine's JSON, each field checked (type, sign, target)."""
    if not isinstance(raw, list):
        raise ScenarioInputError.one("params.events", "a list of event objects")
    if len(raw) > MAX_EVENTS:
        raise ScenarioInputError.one("params.events", f"at most {MAX_EVENTS} events, got "
                                                      f"{len(raw)}")
    units = {c.key: c.units for c in plant.cooling} | {p.key: p.units for p in plant.power}
    out = []
    for i, e in enumerate(raw):
        where = f"params.events[{i}]"
        if not isinstance(e, Mapping):
            raise ScenarioInputError.one(where, "an object with at_s, kind, target, value, "
                                                "duration_s")
        extra = sorted(set(e) - set(EVENT_FIELDS))
        if extra:
            raise ScenarioInputError.one(f"{where}.{extra[0]}", (
                f"unknown field (allowed: {', '.join(EVENT_FIELDS)})"))
        kind = e.get("kind")
        if kind not in EVENT_KINDS:
            raise ScenarioInputError.one(f"{where}.kind",
                                         f"one of {', '.join(EVENT_KINDS)}, got {kind!r}")
        at = _number(e.get("at_s"), f"{where}.at_s", minimum=0.0, maximum=horizon_s)
        target = e.get("target", "")
        if not isinstance(target, str):
            raise ScenarioInputError.one(f"{where}.target", f"an element key, got {target!r}")
        value = _number(e.get("value"), f"{where}.value", minimum=0.0, optional=True)
        duration = _number(e.get("duration_s"), f"{where}.duration_s", optional=True)
        if duration is not None and duration <= 0:
            raise ScenarioInputError.one(f"{where}.duration_s", f"> 0, got {duration!r}")
        if kind in _UNITS and value is not None:
            if value != int(value) or value < 1:
                raise ScenarioInputError.one(f"{where}.value",
                                             f"whole units lost (≥ 1), got {value!r}")
            if target in units and value > units[target]:
                raise ScenarioInputError.one(f"{where}.value", (
                    f"{target!r} has {units[target]} units, cannot lose {int(value)}"))
        if kind == "capping" and value not in (None, 0.0, 1.0):
            raise ScenarioInputError.one(f"{where}.value", f"1 (on) or 0 (off), got {value!r}")
        out.append({"at_s": at, "kind": kind, "target": target, "value": value,
                    "duration_s": duration})
    return out


def _cards(cluster: Any, rack_ids: list[int]) -> dict[str, Any]:
    """Cards per rack (the most any rack holds) and the most common accelerator's
    TDP and idle draw: what the engine's caps and throughput model read."""
    from twin.hardware.models import Card

    per_rack = Counter(Card.objects.filter(server__rack_id__in=rack_ids)
                       .values_list("server__rack_id", flat=True))
    kinds = Counter(Card.objects.filter(server__rack_id__in=rack_ids)
                    .values_list("accelerator__tdp_w", "accelerator__idle_w"))
    if not kinds:
        raise ScenarioInputError.one("cluster", (
            f"cluster {cluster.name!r} has no cards in the racks of its facility"))
    (tdp, idle), _ = kinds.most_common(1)[0]
    idle = min(float(idle), float(tdp) * 0.999)
    return {"cards_per_rack": max(per_rack.values()), "card_tdp_w": float(tdp),
            "card_idle_w": idle, "cards": [per_rack.get(r, 0) for r in rack_ids]}


def _budget_rack_w(plant: Plant, cards: list[int], tdp_w: float,
                   fraction: float) -> list[float]:
    """``fraction`` of what each rack with cards can draw: its cards at TDP, within its
    budget (a rack's budget may be far above its cards' nameplate). A rack without cards
    (network, storage) draws its own nameplate, whatever the fraction: its switches' or
    drives' power barely moves with the cards' load (``simulation.facility.whatif``, "Racks
    without cards", which leaves them out of surges and caps for the same reason). It
    counted as a rack of the most cards any rack holds: a GB200 NVL72 cluster's 15 kW
    network rack drew 77.8 kW on a CDU sized for its nameplate and tripped at t = 0
    (issue 24). Without nameplates (a plant built by hand) such a rack takes ``fraction``
    of its budget, the engine's own default."""
    plate = (plant.racks.nameplate_w.tolist() if plant.racks.nameplate_w is not None
             else None)
    out = []
    for i, (b, n) in enumerate(zip(plant.racks.budget_w.tolist(), cards, strict=True)):
        if n:
            out.append(fraction * min(float(b), n * tdp_w))
        else:
            out.append(float(plate[i]) if plate is not None else fraction * float(b))
    return out


def _live_rack_w(cluster: Any, plant: Plant,
                 fallback: list[float]) -> tuple[list[float], str]:
    """Every plant rack's draw from the run's snapshot (``fallback`` where the snapshot
    has none), and a note of where it came from."""
    from twin.scenarios.snapshot import live_state

    snap = live_state(cluster)
    if snap.racks is None:
        raise ScenarioInputError.one("params.start", (
            f"cluster {cluster.name!r} has no live rack draw ({snap.note or 'no telemetry'}); "
            f"start from the budget (start=budget)"))
    draw = dict(zip(snap.racks.ids, snap.racks.draw_w, strict=True))
    out, measured = [], 0
    for rid, other in zip(plant.racks.ids.tolist(), fallback, strict=True):
        w = draw.get(int(rid))
        if w is not None and math.isfinite(w) and w >= 0:
            out.append(float(w))
            measured += 1
        else:
            out.append(other)
    return out, (f"live draw of {measured} of {len(out)} racks from the snapshot; the rest "
                 f"at load_fraction of their cards' TDP (racks without cards at their "
                 f"nameplate)")


def _plant(cluster_id: int) -> Plant:
    from twin.facility.plant import plant_for_cluster

    return plant_for_cluster(cluster_id)


@register
class FacilityKind(ScenarioKind):
    name = "facility"
    label = "Facility"
    description = ("The cluster's power and cooling plant over time with events (a CDU, pump, "
                   "tower or feed lost, a hot day, a load surge, capping): temperatures, "
                   "flows, power, PUE, and per rack the time until it throttles.")
    fields = _fields()
    chart = None

    def prepare(self, params: Mapping[str, Any], cluster: Any | None) -> dict[str, Any]:
        rest, mine = self.split(params)
        if rest:
            key = sorted(rest)[0]
            raise ScenarioInputError.one(f"params.{key}", (
                f"unknown field for a facility scenario (allowed: "
                f"{', '.join(sorted(self.options))})"))
        if cluster is None:
            raise ScenarioInputError.one("cluster", "required: a facility what-if runs on "
                                                    "a cluster's plant")
        opt = {f.name: mine.get(f.name, f.default) for f in self.fields}
        for name in ("horizon_s", "dt_s", "load_fraction", "wet_bulb_c", "dry_bulb_c"):
            f = self.field(name)
            opt[name] = _number(opt[name], f"params.{name}", minimum=f.min, maximum=f.max,
                                optional=f.default is None)
        if opt["horizon_s"] / opt["dt_s"] > MAX_STEPS:
            raise ScenarioInputError.one("params.dt_s", (
                f"{opt['horizon_s'] / opt['dt_s']:,.0f} steps; at most {MAX_STEPS:,}: "
                f"use a longer step or a shorter horizon"))
        points = opt["points"]
        if isinstance(points, bool) or not isinstance(points, int) \
                or not 2 <= points <= MAX_POINTS:
            raise ScenarioInputError.one("params.points",
                                         f"an integer in 2..{MAX_POINTS}, got {points!r}")
        for name in ("start", "policy"):
            if opt[name] not in (self.field(name).choices or ()):
                raise ScenarioInputError.one(f"params.{name}", (
                    f"one of {', '.join(self.field(name).choices or ())}, got {opt[name]!r}"))
        if not isinstance(opt["capping"], bool):
            raise ScenarioInputError.one("params.capping", f"true or false, got "
                                                           f"{opt['capping']!r}")
        try:
            plant = _plant(cluster.pk)
            validate(plant)
        except PlantError as exc:
            if exc.field == "site":
                raise ScenarioInputError.one("cluster", (
                    f"cluster {cluster.name!r} has no facility; build one with manage.py "
                    f"build_facility")) from exc
            raise ScenarioInputError.one("cluster", f"its plant: {exc}") from exc
        events = _events(opt["events"], plant, opt["horizon_s"])
        cards = _cards(cluster, plant.racks.ids.tolist())
        per_rack = cards.pop("cards")
        if opt["start"] == "live":
            rack_w, start_note = _live_rack_w(cluster, plant, _budget_rack_w(
                plant, per_rack, cards["card_tdp_w"], opt["load_fraction"]))
        else:
            rack_w = _budget_rack_w(plant, per_rack, cards["card_tdp_w"], opt["load_fraction"])
            start_note = (f"every rack at {opt['load_fraction']:g} of its cards' TDP "
                          f"(within its budget); racks without cards at their nameplate")
        whatif = {"horizon_s": opt["horizon_s"], "dt_s": opt["dt_s"], "events": events,
                  "rack_w": rack_w, "load_fraction": opt["load_fraction"],
                  "wet_bulb_c": opt["wet_bulb_c"], "dry_bulb_c": opt["dry_bulb_c"],
                  "capping": opt["capping"], "policy": opt["policy"], "points": points,
                  **cards}
        try:
            check(plant, WhatIfInput.from_dict(whatif))
        except PlantError as exc:
            where = "cluster" if exc.field.startswith(("site", "power", "cooling", "rack")) \
                else f"params.{exc.field}"
            raise ScenarioInputError.one(where, exc.message if where != "cluster"
                                         else f"its plant: {exc}") from exc
        return jsonable({"whatif": whatif, "start": start_note,
                         "cluster": {"id": cluster.pk, "name": cluster.name},
                         "racks": len(plant.racks)})

    def run(self, inputs: Mapping[str, Any], progress: Progress) -> dict[str, Any]:
        progress(0.05, "reading the plant")
        plant = _plant(int(inputs["cluster"]["id"]))
        inp = WhatIfInput.from_dict(dict(inputs["whatif"]))
        progress(0.1, f"simulating {inp.horizon_s:,.0f} s at {inp.dt_s:g} s steps")
        res = run_whatif(plant, inp).to_dict()
        limit = res["racks"]["time_to_limit_s"]
        names = res["racks"]["names"]
        order = sorted((t, i) for i, t in enumerate(limit) if t is not None)
        res["first_at_limit"] = [{"rack": names[i], "time_to_limit_s": t}
                                 for t, i in order[:20]]
        res["racks_at_limit"] = len(order)
        res["racks_total"] = len(limit)
        res["cdu_keys"] = [c.key for c in plant.cooling if c.kind == "cdu"]
        res["start"] = inputs.get("start")
        res["cluster"] = inputs["cluster"]
        res["events"] = [Event(**e).to_dict() for e in inputs["whatif"]["events"]]
        return jsonable(res)

    def rows(self, result: Mapping[str, Any]) -> list[tuple[str, str]]:
        energy = result.get("energy") or {}
        cap = result.get("capping") or {}
        first = result.get("first_at_limit") or []
        soonest = (f"{first[0]['rack']} in {fmt(first[0]['time_to_limit_s'])} s"
                   if first else "none")
        return [
            ("start", str(result.get("start"))),
            ("racks at their thermal limit", f"{fmt(result.get('racks_at_limit'))} of "
                                             f"{fmt(result.get('racks_total'))}; first: "
                                             f"{soonest}"),
            ("racks tripped", fmt(sum(1 for x in (result.get("racks") or {}).get(
                "tripped", []) if x))),
            ("mean PUE", fmt(energy.get("mean_pue"))),
            ("energy", f"facility {fmt(energy.get('facility_kwh'))} kWh, IT "
                       f"{fmt(energy.get('it_kwh'))} kWh, IT lost "
                       f"{fmt(energy.get('it_lost_kwh'))} kWh"),
            ("throughput lost", fmt(energy.get("throughput_lost_fraction"))),
            ("capping", f"on at end: {cap.get('on_at_end')}, steps capped "
                        f"{fmt(cap.get('ticks_capped'))}, most racks capped "
                        f"{fmt(cap.get('max_racks_capped'))}, lowest cap "
                        f"{fmt(cap.get('min_cap_fraction'))} of demand"),
            ("steps", f"{fmt(result.get('steps'))} ({fmt(result.get('steps_computed'))} "
                      f"computed, {fmt(result.get('relaxations_jumped', 0))} relaxations "
                      f"in closed form, the rest quiescent)"),
        ]
