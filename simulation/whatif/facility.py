"""The facility side of a what-if: the plant's engine fed with the racks' power, and
what the plant does to the jobs.

**Composition** (:func:`compose`, to a fixed point): each case's jobs run first as if
the plant held every card at full clock. The plant then runs under that case's
**per-rack** power — each rack's cards as the jobs' placement and clock make them, plus
its static non-card IT load (``Layout.rack_static_w``: servers' CPUs and fans, switches
and optics) — as a step function of windows (:func:`window_s`: at most
:data:`PLANT_WINDOWS` over the horizon, none shorter than :data:`MIN_WINDOW_S`; each
window's exact mean per rack, :func:`window_means`), with the facility events in the
perturbed case, and records per rack the power per card it allows over time — the
tighter of the thermal ceiling (T_limit − T_coolant)/R of
:mod:`simulation.facility.whatif` (the firmware's slowdown) and, when live capping was
applying at the fork, the capping controller's cap
(:class:`simulation.facility.capping.CapController`) — floored to :data:`LIMIT_STEP` of
the TDP, and 0 while a rack is tripped (cards past their shutdown temperature, back
after :data:`TRIP_COOLDOWN_S` once its cards are under the limit again) or unpowered.
The case's jobs then run again under those limits: a limited rack's cards run at the
clock whose busy power fits (``clock_for_cap``: the training model's step time at that
clock for a job that names a model, c/f + 1 − c otherwise, as under ``cap_power``), a
rack at 0 goes down — its jobs lose the work since their last checkpoint and are
requeued, as on a failure — and comes back when the plant powers it again.

**The power chain** too (:func:`feed_power`): when an element that lost units
(``feed_trip``, or a degraded one at the fork) cannot carry the racks under it with the
units still running, those racks are unpowered from that instant until its units are
back (:func:`feed_outages`); the case's jobs run again with them down, applied as a
``fail_rack`` (the work since the checkpoint lost, a hot spare or a requeue onto cards
elsewhere; ``_Case.power_out``). An unpowered rack draws nothing and heats nothing (the
plant's drive), but the chain is still asked for the load that overloaded it (held,
as below); a job that moved onto racks under another weak element can overload that
one in turn — the next round finds it.

The throttled jobs draw less and run longer, and a rack's jobs move when it trips: that
power goes back to the plant (a rack held out is fed the demand that took it out,
:func:`held_demand`: fed as nothing, the plant would not take it out and the rounds
would alternate), and the rounds repeat — jobs → plant and chain → limits and
outages → jobs — until the limits and the outages repeat exactly or, the outages
repeating, the jobs' power under the limits is within :data:`FIXED_POINT_TOL` of the
power that set them (:func:`fixed_point_residual`), at most :data:`MAX_ROUNDS` rounds
(``fixed_point``: rounds, converged, residual) — a few in practice: the racks an
outage unpowered are held at the load that overloaded them, so it is found again, and
the outages change when the jobs it moved overload another element. This is
successive substitution (Picard iteration), the fixed-point coupling co-simulation uses
between two simulators that exchange values at communication steps (Gomes et al.,
"Co-simulation: a survey", ACM Computing Surveys 51(3), 2018, §4 — here the steps are
the windows and the exchanged values the racks' power and limits). A plant
that never limits a rack below the TDP leaves the jobs exactly as they were (one round).
The facility figures reported are the last plant run's, the one that set the final
case's limits.

**The fork**: elements the snapshot lists ``failed`` or in ``maintenance``
(``facility_down``) are down in both cases (the plant's ``down``); a ``degraded`` one
has one unit out from time 0 (pump, cooling or feed loss of one unit).

**Peak feed power** (:func:`feed_power`): each utility feed's input — its IT load (the
cards' and the racks' static non-card load), the chain's losses and its share of the
mechanical plant (``simulation.facility.power_chain.power_flow``) — as a time series:
at every window start, every change of a ``feed_trip`` and the instants where the racks
under each feed draw most, with the units lost then (a lost unit's load on the running
ones; racks down when they cannot carry it) and the plant run's mechanical draw at that
same instant; the peak is the series' highest point.

:func:`facility_pair` runs :func:`simulation.facility.whatif.run` twice — the
baseline's and the perturbed case's mean rack power, the perturbed case with the
facility events (``cdu_trip`` → a CDU trip, ``feed_trip`` → the loss of one unit
of a power element, ``raise_wet_bulb`` → a hot day of + ``value`` °C) — and returns
PUE, energy, thermal limits and capping side by side. A ``change_contract`` reaches
the plant too: the perturbed run's site contract is the lowest in force
(:func:`contract_plant`); the cards' capping under it is the engine's. The racks are
matched by id (:func:`rack_map`: a plant rack the layout does not have — a network rack
— draws its nameplate), else by position when the plant has as many racks as the
layout; otherwise the plant runs at the cluster's mean load fraction of its budgets
(and says so).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from simulation.facility.plant import Plant, PlantError
from simulation.facility.power_chain import compile_chain, power_flow
from simulation.facility.whatif import Event as FacilityEvent
from simulation.facility.whatif import WhatIfInput, WhatIfResult
from simulation.facility.whatif import run as run_facility
from simulation.snapshot import LiveSnapshot

from .events import WhatIfInputError, WhatIfSpec

if TYPE_CHECKING:
    from .engine import CaseResult
    from .layout import Layout

__all__ = ["FACILITY_DT_S", "FIXED_POINT_TOL", "LIMIT_STEP", "MAX_ROUNDS", "MIN_WINDOW_S",
           "PLANT_WINDOWS", "TRIP_COOLDOWN_S", "compose", "contract_plant", "facility_events",
           "facility_pair", "feed_outages", "feed_power", "fixed_point_residual",
           "forked_plant", "held_demand", "out_intervals", "peak_feed_kw", "plant_limits",
           "rack_schedule", "window_means", "window_s"]

Limits = list[tuple[float, int, float | None]]
Outages = list[tuple[int, float, float | None]]
"""(layout rack index, from s, to s — None: the horizon) a rack is unpowered."""

LIMIT_STEP = 0.02
"""The plant's per-card limits reach the jobs in steps of 2 % of the TDP, floored (never
looser than the plant's): a transient of minutes re-times a rack's jobs tens of times,
not once per facility step. An assumption of resolution, not of physics."""

F64 = npt.NDArray[np.float64]

PLANT_WINDOWS = 48
"""The jobs' per-rack power drives the plant as a step function of at most this many
windows over the horizon (each window's exact mean per rack): an assumption of
resolution — within a window the plant sees the mean, not every job start."""
MIN_WINDOW_S = 600.0
"""No drive window is shorter than 10 minutes, the slowest time constant of the plant
(the demo plant's τ ≈ 600 s): shorter changes are what the plant's own capacitance
averages anyway."""
MAX_ROUNDS = 6
"""At most this many rounds of jobs → plant → limits → jobs per case (see
:func:`compose`)."""
FIXED_POINT_TOL = 0.01
"""Converged when the limits repeat exactly, or when no rack's power under the limits
differs from the power that set them by more than 1 % of a full rack's card power (cards
per rack × TDP) on average over the horizon (:func:`fixed_point_residual`)."""
TRIP_COOLDOWN_S = 600.0
"""A rack the plant tripped comes back once 10 minutes have passed *and* its cards (at
no power: its coolant) are back under the card limit — an **assumption** (a firmware
restart and the operator's reset), not a measured figure."""

FACILITY_DT_S = 10.0
"""The facility engine's step over a what-if horizon (its transients are minutes;
quiescent stretches are skipped exactly)."""

_KIND = {"cdu_trip": "cdu_trip", "feed_trip": "feed_loss", "raise_wet_bulb": "hot_day"}


def facility_events(plant: Plant, spec: WhatIfSpec) -> tuple[FacilityEvent, ...]:
    """The spec's facility events as the plant's; an unknown element → ``events[i].target``."""
    cooling = {c.key for c in plant.cooling}
    power = {p.key for p in plant.power}
    out = []
    for i, e in enumerate(spec.events):
        if e.kind not in _KIND:
            continue
        if e.kind == "cdu_trip" and e.target not in cooling:
            raise WhatIfInputError(f"events[{i}].target", f"no CDU {e.target!r} in the "
                                                          f"plant (has {sorted(cooling)})")
        if e.kind == "feed_trip" and e.target not in power:
            raise WhatIfInputError(f"events[{i}].target", f"no power element {e.target!r} "
                                                          f"in the plant")
        out.append(FacilityEvent(e.at_s, _KIND[e.kind], str(e.target or ""),
                                 e.value if e.kind == "raise_wet_bulb" else None,
                                 e.duration_s))
    return tuple(out)


def forked_plant(plant: Plant, snapshot: LiveSnapshot | None
                 ) -> tuple[Plant, tuple[FacilityEvent, ...], list[str]]:
    """The plant as the snapshot froze it: its ``failed`` / ``maintenance`` elements down
    (and no other, whatever the plant's rows say now),
    a ``degraded`` one with one unit out from time 0 (the events returned) — but never
    its last: a one-unit degraded element runs (``simulation.facility.validate.units_out``,
    the live plant's rule), so it gets no event; and the keys the plant does not have
    (ignored: the facility changed since the fork)."""
    if snapshot is None:
        return plant, (), []
    fd = snapshot.facility_down
    down = {k for r in ("failed", "maintenance") for k in fd.get(r, ())}
    degraded = set(fd.get("degraded", ())) - down
    known = {f"cooling:{c.key}" for c in plant.cooling} | {f"power:{p.key}"
                                                           for p in plant.power}
    unknown = sorted((down | degraded) - known)
    # the snapshot's states, not the plant's today (the same run gives the same answer)
    cooling = tuple(c if c.down == (f"cooling:{c.key}" in down) else
                    replace(c, down=f"cooling:{c.key}" in down) for c in plant.cooling)
    power = tuple(p if p.down == (f"power:{p.key}" in down) else
                  replace(p, down=f"power:{p.key}" in down) for p in plant.power)
    if not fd and cooling == plant.cooling and power == plant.power:
        return plant, (), []
    events = []
    for c in plant.cooling:
        if f"cooling:{c.key}" in degraded and c.units > 1:
            kind = ("pump_trip" if c.kind in ("cdu", "facility_loop") else "cooling_loss"
                    if c.kind in ("cooling_tower", "dry_cooler", "chiller", "crah") else None)
            if kind:
                events.append(FacilityEvent(0.0, kind, c.key, 1.0))
    for p in plant.power:
        if f"power:{p.key}" in degraded and p.units > 1:
            events.append(FacilityEvent(0.0, "feed_loss", p.key, 1.0))
    return replace(plant, cooling=cooling, power=power), tuple(events), unknown


def rack_map(plant: Plant, rack_ids: Sequence[int] | None, racks: int
             ) -> npt.NDArray[np.int64] | None:
    """The plant rack index of each layout rack: by id when the plant has every layout
    rack (``rack_ids``, ``Layout.rack_index`` order), else by position when the counts
    are equal; None: the racks cannot be matched."""
    ids = [int(x) for x in np.asarray(plant.racks.ids).tolist()]
    pos = {r: i for i, r in enumerate(ids)}
    if rack_ids is not None and len(rack_ids) == racks and all(int(r) in pos
                                                               for r in rack_ids):
        return np.array([pos[int(r)] for r in rack_ids], np.int64)
    if len(ids) == racks:
        return np.arange(racks, dtype=np.int64)
    return None


def _plant_w(plant: Plant, at: npt.NDArray[np.int64], rack_w: npt.NDArray[np.float64]
             ) -> npt.NDArray[np.float64]:
    """Layout racks' power (``… × layout racks``) as the plant's racks (``… × plant
    racks``): a plant rack outside the layout at its nameplate draw (0 without one)."""
    n = len(plant.racks)
    np_w = plant.racks.nameplate_w
    out = np.broadcast_to(np.zeros(n) if np_w is None else np.asarray(np_w, float),
                          (*rack_w.shape[:-1], n)).copy()
    out[..., at] = rack_w
    return out


def window_s(horizon_s: float) -> float:
    """The plant's drive window over ``horizon_s``: :data:`PLANT_WINDOWS` windows, none
    shorter than :data:`MIN_WINDOW_S`."""
    return max(MIN_WINDOW_S, horizon_s / PLANT_WINDOWS)


def window_means(times: F64, rack_w: F64, horizon_s: float, window: float) -> F64:
    """Each window's mean of a per-rack step function (``rack_w[i]`` from ``times[i]`` to
    the next time, the last to the horizon): windows × racks, exact integrals
    (a cumulative sum evaluated at the window edges), the last window possibly shorter.

    >>> window_means(np.array([0.0, 30.0]), np.array([[2.0], [4.0]]), 100.0, 50.0).tolist()
    [[2.8], [4.0]]
    """
    edges = np.append(np.arange(0.0, horizon_s, window), horizon_s)
    if not len(times):
        return np.zeros((len(edges) - 1, rack_w.shape[-1]))
    dt = np.diff(np.append(times, horizon_s))
    cum = np.vstack([np.zeros(rack_w.shape[1]), np.cumsum(rack_w * dt[:, None], axis=0)])
    i = np.clip(np.searchsorted(times, edges, side="right") - 1, 0, None)
    at = cum[i] + rack_w[i] * np.clip(edges - times[i], 0.0, None)[:, None]
    at[edges < times[0]] = 0.0
    return np.diff(at, axis=0) / np.diff(edges)[:, None]


Steps = tuple[F64, F64]
"""A per-rack step function: (change times s, W per time × layout rack)."""


def rack_schedule(plant: Plant, demand: Steps, at: npt.NDArray[np.int64], static_w: F64,
                  horizon_s: float) -> tuple[tuple[tuple[float, tuple[float, ...]], ...], F64]:
    """The plant's drive from the jobs' per-rack power (``demand``): per window
    (:func:`window_s`) each layout rack's mean — its cards' as the jobs' placement and
    clock make it, plus its static non-card IT load (``static_w``) — as the plant's racks
    (one outside the layout at its nameplate). Returns the schedule (a window whose
    demand repeats the previous one dropped) and the windows × layout racks means (the
    fixed-point residual's)."""
    w = window_s(horizon_s)
    means = window_means(demand[0], demand[1], horizon_s, w) + static_w[None, :]
    full = _plant_w(plant, at, means)
    out: list[tuple[float, tuple[float, ...]]] = []
    for k in range(len(full)):
        if k == 0 or not np.array_equal(full[k], full[k - 1]):
            out.append((k * w, tuple(float(x) for x in full[k])))
    return tuple(out), means


def out_intervals(limits: Limits, horizon_s: float) -> list[tuple[int, float, float]]:
    """(layout rack, from s, to s) of every stretch the limits hold a rack out (at 0)."""
    out: list[tuple[int, float, float]] = []
    since: dict[int, float] = {}
    for t, r, w in sorted(limits, key=lambda x: (x[0], x[1])):
        if w == 0.0:
            since.setdefault(r, t)
        elif r in since:
            out.append((r, since.pop(r), t))
    out.extend((r, t, horizon_s) for r, t in since.items())
    return out


def held_demand(case: Steps, before: Steps, intervals: Sequence[tuple[int, float, float]]
                ) -> Steps:
    """The case's per-rack power, except where the plant held a rack out: there the
    demand that made the plant take it out (``before``'s). Fed back as it is, a rack
    out would draw nothing, the plant would not take it out, and the rounds would
    alternate: the rack's *demand* while out is what its jobs would draw there."""
    if not intervals:
        return case
    t = np.union1d(case[0], before[0])
    a = case[1][np.clip(np.searchsorted(case[0], t, side="right") - 1, 0, None)]
    b = before[1][np.clip(np.searchsorted(before[0], t, side="right") - 1, 0, None)]
    for r, t0, t1 in intervals:
        m = (t >= t0) & (t < t1)
        a[m, r] = b[m, r]
    return t, a


def _rack_input(plant: Plant, case: CaseResult, demand: Steps | None,
                at: npt.NDArray[np.int64] | None, static_w: F64, horizon_s: float
                ) -> dict[str, Any]:
    if at is not None and demand is not None:
        return {"rack_w_schedule": rack_schedule(plant, demand, at, static_w, horizon_s)[0]}
    mean_w = case.totals["mean_power_kw"] * 1e3 + float(static_w.sum())
    budget = np.asarray(plant.racks.budget_w, dtype=float)
    return {"load_fraction": float(min(1.0, max(0.01, mean_w / max(budget.sum(), 1.0))))}


def _cards_per_rack(layout: Layout) -> int:
    """The most cards in one rack of the layout (the plant's per-card figures)."""
    _, rack_of_node = layout.rack_index()
    per = np.bincount(rack_of_node, weights=[sum(1 for c in row if c >= 0)
                                             for row in layout.cards])
    return max(1, int(per.max(initial=1)))


def _run_plant(plant: Plant, spec: WhatIfSpec, case: CaseResult, events: Sequence[FacilityEvent],
               layout: Layout | None, capping: bool, at: npt.NDArray[np.int64] | None,
               demand: Steps | None = None) -> WhatIfResult:
    matched = at is not None
    extra: dict[str, Any] = {}
    static = layout.static_w() if layout is not None else np.zeros(len(case.rack_peak_w))
    if layout is not None:
        extra = {"cards_per_rack": _cards_per_rack(layout), "card_tdp_w": layout.tdp_w,
                 "card_idle_w": min(layout.idle_w, layout.tdp_w * 0.999),
                 "compute_share": spec.compute_share, "capping": capping,
                 "limit_step": LIMIT_STEP if matched else 0.0,
                 "trip_cooldown_s": TRIP_COOLDOWN_S}
    try:
        return run_facility(plant, WhatIfInput(horizon_s=spec.horizon_s, dt_s=FACILITY_DT_S,
                                               events=tuple(events), points=spec.points,
                                               **_rack_input(plant, case, demand or case.rack_steps,
                                                             at, static,
                                                             spec.horizon_s), **extra))
    except PlantError as exc:
        raise WhatIfInputError(f"facility.{exc.field}", exc.message) from exc


def _summary(site: Plant, res: WhatIfResult) -> dict[str, Any]:
    limit = [t for t in res.racks["time_to_limit_s"] if t is not None]
    capped = [t for t in res.racks["time_to_cap_s"] if t is not None]
    return {"contract_kw": site.site.contract_kw,
            "mean_pue": res.energy["mean_pue"],
            "facility_mwh": res.energy["facility_kwh"] / 1e3,
            "it_mwh": res.energy["it_kwh"] / 1e3,
            "it_lost_mwh": res.energy["it_lost_kwh"] / 1e3,
            "racks_at_thermal_limit": len(limit),
            "first_thermal_limit_s": min(limit) if limit else None,
            "racks_capped": len(capped),
            "racks_tripped": int(sum(res.racks["tripped"])),
            "max_card_c": max(res.series["max_card_c"], default=None),
            "series": {"t_s": res.t_s, "pue": res.series["pue"],
                       "max_card_c": res.series["max_card_c"],
                       "mechanical_kw": [w / 1e3 for w in res.series["mechanical_w"]]}}


def fixed_point_residual(power: Steps, demand: Steps, horizon_s: float) -> float:
    """W: the largest, over racks, of the mean absolute difference over the horizon between
    the racks' power under the plant's limits (``power``) and the power that set those
    limits (``demand``), both as the plant sees them (window means, :func:`window_s`). A
    job that ends a few seconds later moves little; a rack throttled differently all
    along moves by its difference."""
    w = window_s(horizon_s)
    diff = np.abs(window_means(*power, horizon_s, w) - window_means(*demand, horizon_s, w))
    edges = np.append(np.arange(0.0, horizon_s, w), horizon_s)
    return float((diff * np.diff(edges)[:, None]).sum(axis=0).max(initial=0.0) / horizon_s)


def _limits(res: WhatIfResult, owner: dict[int, int]) -> Limits:
    return [(t, owner[r], w) for t, r, w in res.card_limits if r in owner]


def plant_limits(plant: Plant, spec: WhatIfSpec, snapshot: LiveSnapshot | None,
                 layout: Layout, case: CaseResult, *, perturbed: bool) -> Limits:
    """The plant's limits — (time s, layout rack index, W per card; None: no limit, 0: out)
    — for ``case``'s per-rack power as it ran: one step of :func:`compose`'s rounds, for
    checking its fixed point from outside."""
    forked, fork_events, _ = forked_plant(plant, snapshot)
    evs = (*fork_events, *facility_events(forked, spec)) if perturbed else fork_events
    site = contract_plant(forked, spec) if perturbed else forked
    at = rack_map(plant, layout.rack_index()[0], len(case.rack_peak_w))
    if at is None:
        return []
    capping = (snapshot is not None and snapshot.readings is not None
               and snapshot.readings.cap_w is not None)
    res = _run_plant(site, spec, case, evs, layout, capping, at, case.rack_steps)
    return _limits(res, {int(p): k for k, p in enumerate(at.tolist())})


def compose(plant: Plant, spec: WhatIfSpec, snapshot: LiveSnapshot | None, layout: Layout,
            base: CaseResult, pert: CaseResult,
            rerun: Callable[[bool, Limits, Outages], CaseResult]
            ) -> tuple[CaseResult, CaseResult, dict[str, Any]]:
    """Both cases through the plant and the power chain and back into the jobs, to a
    fixed point (see the module doc). ``rerun(perturbed, limits, outages)`` runs a case
    again under the plant's limits and with the racks the power chain cannot carry
    unpowered (:func:`feed_outages`)."""
    forked, fork_events, unknown = forked_plant(plant, snapshot)
    events = facility_events(forked, spec)
    racks = len(base.rack_peak_w)
    rack_ids = layout.rack_index()[0]
    at = rack_map(plant, rack_ids, racks)
    owner = {int(p): k for k, p in enumerate([] if at is None else at.tolist())}
    capping = (snapshot is not None and snapshot.readings is not None
               and snapshot.readings.cap_w is not None)
    static = layout.static_w()
    out: dict[str, Any] = {"matched_racks": at is not None, "capping": capping,
                           "limit_step": LIMIT_STEP, "static_kw": float(static.sum()) / 1e3,
                           "window_s": window_s(spec.horizon_s)}
    if fork_events or forked is not plant:
        out["fork"] = {"down": sorted(k for r in ("failed", "maintenance")
                                      for k in (snapshot.facility_down.get(r, ())
                                                if snapshot else ())),
                       "degraded": [e.target for e in fork_events], "unknown": unknown}
    cases = {"baseline": base, "perturbed": pert}
    tol_w = FIXED_POINT_TOL * _cards_per_rack(layout) * layout.tdp_w
    for name, evs, site in (("baseline", fork_events, forked),
                            ("perturbed", (*fork_events, *events),
                             contract_plant(forked, spec))):
        case = cases[name]
        demand = case.rack_steps   # what drives the plant
        supply = case.rack_steps   # what the power chain is asked to carry

        def check(case: CaseResult, supply: Steps | None, res: WhatIfResult
                  ) -> tuple[dict[str, Any] | None, Outages]:
            feed = feed_power(site, case, at, static, events=evs,  # noqa: B023
                              mechanical=(res.t_s, res.series["mechanical_w"]),
                              horizon_s=spec.horizon_s, demand=supply)
            return feed, feed_outages(feed)

        res = _run_plant(site, spec, case, evs, layout, capping, at, demand)
        applied: Limits = []
        limits = _limits(res, owner)
        feed, outs = check(case, supply, res)
        applied_outs: Outages = []
        rounds, residual, converged = 1, None, True
        # jobs → plant and power chain → limits and outages → jobs, until both repeat or
        # the power stops moving
        while ((limits != applied or outs != applied_outs) and at is not None
               and demand is not None):
            case = rerun(name == "perturbed", limits, outs)
            applied, applied_outs = limits, outs
            assert case.rack_steps is not None
            now = held_demand(case.rack_steps, demand,
                              out_intervals(limits, spec.horizon_s))
            # an unpowered rack draws nothing and heats nothing (the plant's drive), but
            # the chain is asked for the load that overloaded it (held, as above)
            supply = held_demand(case.rack_steps, case.rack_steps if supply is None else supply,
                                 [(r, t0, spec.horizon_s if t1 is None else t1)
                                  for r, t0, t1 in outs])
            residual = fixed_point_residual(now, demand, spec.horizon_s)
            demand = now
            feed, outs = check(case, supply, res)
            if residual <= tol_w and outs == applied_outs:
                break
            if rounds >= MAX_ROUNDS:
                converged = False
                break
            res = _run_plant(site, spec, case, evs, layout, capping, at, demand)
            limits = _limits(res, owner)
            feed, outs = check(case, supply, res)
            rounds += 1
            if limits == applied and outs == applied_outs:   # its own power gives them back
                residual = 0.0
        cases[name] = case
        out[name] = _summary(site, res)
        out[name]["job_limits"] = {
            "changes": len(applied), "racks_limited": len({r for _, r, _ in applied}),
            "racks_out": len({r for _, r, w in applied if w == 0.0}),
            "lowest_card_w": min((w for _, _, w in applied if w), default=None),
            "racks_unpowered": len({r for r, _, _ in applied_outs}),
            "unpowered_card_h": _unpowered_card_h(layout, applied_outs, spec.horizon_s)}
        out[name]["fixed_point"] = {"rounds": rounds, "converged": converged,
                                    "residual_kw": None if residual is None
                                    else residual / 1e3, "tolerance_kw": tol_w / 1e3}
        out[name]["peak_mechanical_kw"] = max(res.series["mechanical_w"], default=0.0) / 1e3
        if at is not None:
            lim = res.racks["time_to_limit_s"]
            trips = res.racks["trips"]
            out[name]["racks"] = {"ids": list(rack_ids),
                                  "time_to_limit_s": [lim[int(i)] for i in at.tolist()],
                                  "trips": [int(trips[int(i)]) for i in at.tolist()]}
        cases[name].totals["peak_feed_kw"] = None if feed is None else feed["peak_kw"]
        if feed is not None:
            out[name]["feed"] = feed
        cases[name].totals["it_static_kw"] = float(static.sum()) / 1e3
    b, p = out["baseline"], out["perturbed"]
    out["difference"] = {k: p[k] - b[k] for k in ("mean_pue", "facility_mwh", "it_lost_mwh",
                                                  "racks_at_thermal_limit", "racks_capped",
                                                  "racks_tripped")}
    return cases["baseline"], cases["perturbed"], out


def feed_outages(feed: dict[str, Any] | None) -> Outages:
    """:func:`feed_power`'s ``racks_down`` as the jobs take them: (layout rack, from s,
    to s — None: the horizon), one per rack and stretch, sorted (so that two rounds'
    outages compare equal when the same racks are out over the same stretches)."""
    if feed is None:
        return []
    return sorted({(int(r), float(d["from_s"]), None if d["to_s"] is None
                    else float(d["to_s"])) for d in feed["racks_down"] for r in d["racks"]},
                  key=lambda x: (x[1], x[0], math.inf if x[2] is None else x[2]))


def _unpowered_card_h(layout: Layout, outages: Outages, horizon_s: float) -> float:
    """Card-hours the outages keep unpowered: per rack, its cards × the union of its
    stretches (two nested elements over the same rack count once)."""
    _, rack_of_node = layout.rack_index()
    cards = np.bincount(rack_of_node, weights=[sum(1 for c in row if c >= 0)
                                               for row in layout.cards])
    total = 0.0
    for rack in {r for r, _, _ in outages}:
        spans = sorted((t0, horizon_s if t1 is None else min(t1, horizon_s))
                       for r, t0, t1 in outages if r == rack)
        end = -math.inf
        for t0, t1 in spans:
            lo = max(t0, end)
            if t1 > lo:
                total += float(cards[rack]) * (t1 - lo)
            end = max(end, t1)
    return total / 3600.0


def _failed_units(plant: Plant, events: Sequence[FacilityEvent], t: float
                  ) -> npt.NDArray[np.int64]:
    """Units of each power element out at ``t`` by the ``feed_loss`` events in force then
    (as the facility engine applies them: ``value`` units, 1 by default, from ``at_s`` for
    ``duration_s``)."""
    idx = {p.key: i for i, p in enumerate(plant.power)}
    out = np.zeros(len(plant.power), np.int64)
    for e in events:
        if e.kind != "feed_loss" or e.target not in idx or t < e.at_s - 1e-9:
            continue
        if e.duration_s is not None and t >= e.at_s + e.duration_s - 1e-9:
            continue
        out[idx[e.target]] += int(e.value) if e.value is not None else 1
    return out


def feed_power(plant: Plant, case: CaseResult, at: npt.NDArray[np.int64] | None,
               static_w: F64 | None = None, *, events: Sequence[FacilityEvent] = (),
               mechanical: tuple[Sequence[float], Sequence[float]] | float = 0.0,
               horizon_s: float | None = None, demand: Steps | None = None
               ) -> dict[str, Any] | None:
    """The utility feeds' input (kW) as a time series over the case, and its peak.

    At each instant — every drive window's start (:func:`window_s`), every change of a
    ``feed_loss`` event, and the instants where the racks under each feed draw most in
    the case's exact rack-power step function — the chain's ``power_flow``
    (``simulation.facility.power_chain``) of the racks' power then (the cards', the what-if's,
    plus ``static_w``, each layout rack's non-card IT load; a plant rack outside the
    layout at its nameplate) with the units lost **at that instant** (``events``) and the
    mechanical plant's draw **at that instant** (``mechanical``: the plant run's series
    ``(t_s, W)``, linearly interpolated; a number: constant), spread over the feeds as
    ``power_flow`` does. A lost unit's load moves to the element's running units (its
    redundancy: a 2N feed that loses a unit carries it all on the other); if the running
    units cannot carry it (input > units running × rating) the racks under that element
    go down — counted at 0 from then until the element's lost units are back, and
    reported (``racks_down``: element, ``from_s``, ``to_s`` — None: to the horizon —
    and the layout rack indices); with no unit running they are unpowered
    (``power_flow``). :func:`compose` feeds such stretches back to the jobs
    (:func:`feed_outages`); ``demand`` (default: the case's own step function) is then
    the racks' power with a rack it unpowered held at the demand that overloaded it
    (:func:`held_demand`), so the overload found stays found.
    With constant efficiencies η along a chain of k elements and one feed, each point is
    (cards + static) / η^k + mechanical(t). Returns ``{"t_s", "kw", "mechanical_kw",
    "peak_kw", "peak_at_s", "racks_down"}``; None when the racks cannot be matched
    (``at``, :func:`rack_map`) or the plant has no feed."""
    steps = case.rack_steps if demand is None else demand
    feeds = [i for i, e in enumerate(plant.power) if e.kind == "feed"]
    if steps is None or not feeds or at is None:
        return None
    times, cards = steps
    horizon = float(horizon_s if horizon_s is not None
                    else (times[-1] if len(times) else 0.0))
    if not len(times):
        times, cards = np.zeros(1), np.zeros((1, len(at)))
    rack_w = _plant_w(plant, at, cards if static_w is None else cards + static_w[None, :])
    chain = compile_chain(plant.power, plant.racks.power_parent)
    anc = np.zeros((chain.n, len(chain.rack_parent)), bool)  # element over rack
    node = chain.rack_parent.copy()
    while (node >= 0).any():
        ok = node >= 0
        anc[node[ok], np.nonzero(ok)[0]] = True
        node = np.where(ok, chain.parent[np.where(ok, node, 0)], -1)
    root = np.arange(chain.n)
    for _ in range(len(chain.levels)):
        up = chain.parent[root]
        root = np.where(up >= 0, up, root)
    under = root[chain.rack_parent]
    instants = set(np.arange(0.0, max(horizon, 1e-9), window_s(max(horizon, 1.0))).tolist())
    for e in events:
        if e.kind == "feed_loss":
            instants.add(float(e.at_s))
            if e.duration_s is not None:
                instants.add(float(e.at_s + e.duration_s))
    for f in feeds:
        mask = under == f
        if mask.any():
            instants.add(float(times[int(np.argmax(rack_w[:, mask].sum(axis=1)))]))
    ts = sorted(t for t in instants if t < horizon or horizon == 0.0)
    if isinstance(mechanical, tuple):
        mt, mw = np.asarray(mechanical[0], float), np.asarray(mechanical[1], float)
        mech = np.interp(ts, mt, mw) if len(mt) else np.zeros(len(ts))
    else:
        mech = np.full(len(ts), float(mechanical))
    layout_of = {int(p): k for k, p in enumerate(at.tolist())}
    kw: list[float] = []
    down: dict[str, dict[str, Any]] = {}   # "key@t" per stretch; "key": the open one
    tripped: dict[str, float] = {}   # elements whose racks are down: since
    for t, m in zip(ts, mech.tolist(), strict=True):
        i = max(0, int(np.searchsorted(times, t, side="right")) - 1)
        w = rack_w[i].copy()
        failed = _failed_units(plant, events, t)
        for key in [k for k in tripped if failed[chain.keys.index(k)] == 0]:
            down[key]["to_s"] = t   # its units back: its racks with them
            del tripped[key]
        held = np.array(sorted(chain.keys.index(k) for k in tripped), np.int64)
        if held.size:
            w[anc[held].any(axis=0)] = 0.0
        flow = power_flow(chain, w, failed_units=failed, mechanical_w=m)
        over = np.nonzero((failed > 0) & (flow.input_w > flow.available_w * (1 + 1e-9))
                          & (flow.available_w > 0))[0]
        if over.size:   # the survivors cannot carry it: the racks under it go down
            w[anc[over].any(axis=0)] = 0.0
            flow = power_flow(chain, w, failed_units=failed, mechanical_w=m)
            for el in over.tolist():
                key = chain.keys[el]
                tripped[key] = t
                down[f"{key}@{t}"] = {
                    "element": key, "from_s": t, "to_s": None,
                    "racks": sorted(layout_of[r] for r in np.nonzero(anc[el])[0].tolist()
                                    if r in layout_of)}
                down[key] = down[f"{key}@{t}"]
        kw.append(float(flow.input_w[feeds].max()) / 1e3)
    k = int(np.argmax(kw)) if kw else 0
    return {"t_s": ts, "kw": kw, "mechanical_kw": (mech / 1e3).tolist(),
            "peak_kw": kw[k] if kw else 0.0, "peak_at_s": ts[k] if ts else 0.0,
            "racks_down": [v for k, v in down.items() if "@" in k]}


def peak_feed_kw(plant: Plant, case: CaseResult, at: npt.NDArray[np.int64] | None,
                 static_w: F64 | None = None, mechanical_w: float = 0.0,
                 events: Sequence[FacilityEvent] = ()) -> float | None:
    """The highest input of any utility feed (kW) over the case: :func:`feed_power`'s
    peak with a constant mechanical draw."""
    res = feed_power(plant, case, at, static_w, events=events, mechanical=mechanical_w)
    return None if res is None else float(res["peak_kw"])


def contract_plant(plant: Plant, spec: WhatIfSpec) -> Plant:
    """The plant the perturbed case runs on: with ``change_contract`` events, its site's
    contract is the lowest in force over the horizon (the facility engine takes one
    contract for the whole run: the tightest is the conservative reading)."""
    changes = [e.value for e in spec.events if e.kind == "change_contract" and e.value]
    if not changes:
        return plant
    lowest = min([*changes, *([spec.contract_kw] if spec.contract_kw else [])])
    return replace(plant, site=replace(plant.site, contract_kw=float(lowest)))


def facility_pair(plant: Plant, spec: WhatIfSpec, base: CaseResult,
                  pert: CaseResult) -> dict[str, Any]:
    """Baseline and perturbed facility runs on the plant as given, without feeding the
    plant's limits back to the jobs (:func:`compose` does)."""
    events = facility_events(plant, spec)
    at = rack_map(plant, None, len(base.rack_peak_w))
    out: dict[str, Any] = {"matched_racks": at is not None}
    perturbed_plant = contract_plant(plant, spec)
    for name, case, evs, site in (("baseline", base, (), plant),
                                  ("perturbed", pert, events, perturbed_plant)):
        out[name] = _summary(site, _run_plant(site, spec, case, evs, None, False, at))
    b, p = out["baseline"], out["perturbed"]
    out["difference"] = {k: p[k] - b[k] for k in ("mean_pue", "facility_mwh", "it_lost_mwh",
                                                  "racks_at_thermal_limit", "racks_capped")}
    return out
