"""The facility side of a what-if: the plant's engine fed with the racks' power, and
what the plant does to the jobs.

**Composition** (:func:`compose`, one round): each case's jobs run first as if the
plant held every card at full clock; the plant then runs under that case's mean rack
power (with the facility events in the perturbed case) and records, per rack, the power
per card it allows over time — the tighter of the thermal ceiling
(T_limit − T_coolant)/R of :mod:`simulation.facility.whatif` (the firmware's slowdown)
and, when live capping was applying at the fork, the capping controller's cap
(:class:`simulation.facility.capping.CapController`) — floored to :data:`LIMIT_STEP` of
the TDP, and 0 for a rack that tripped (cards past their shutdown temperature) or lost
its power. The case's jobs then run again under those limits: a limited rack's cards
run at the clock whose busy power fits (``clock_for_cap``: the training model's step
time at that clock for a job that names a model, c/f + 1 − c otherwise, as under
``cap_power``), and a rack at 0 goes down — its jobs lose the work since their last
checkpoint and are requeued, as on a failure. A plant that never limits a rack below
the TDP leaves the jobs exactly as they were. The facility figures reported are the
plant's run that set the limits (one round: the lower power of the throttled jobs is
not fed back again — an upper bound on the throttling).

**The fork**: elements the snapshot lists ``failed`` or in ``maintenance``
(``facility_down``) are down in both cases (the plant's ``down``); a ``degraded`` one
has one unit out from time 0 (pump, cooling or feed loss of one unit).

**Peak feed power** (:func:`peak_feed_kw`): each utility feed's input (its IT load and
the chain's losses, ``simulation.facility.power_chain.power_flow``) at the instants of
the case's exact rack-power step function where the racks under it draw most.

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

__all__ = ["FACILITY_DT_S", "LIMIT_STEP", "compose", "contract_plant", "facility_events",
           "facility_pair", "forked_plant", "peak_feed_kw"]

Limits = list[tuple[float, int, float | None]]

LIMIT_STEP = 0.02
"""The plant's per-card limits reach the jobs in steps of 2 % of the TDP, floored (never
looser than the plant's): a transient of minutes re-times a rack's jobs tens of times,
not once per facility step. An assumption of resolution, not of physics."""

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
    a ``degraded`` one with one unit out from time 0 (the events returned); and the keys
    the plant does not have (ignored: the facility changed since the fork)."""
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
        if f"cooling:{c.key}" in degraded:
            kind = ("pump_trip" if c.kind in ("cdu", "facility_loop") else "cooling_loss"
                    if c.kind in ("cooling_tower", "dry_cooler", "chiller", "crah") else None)
            if kind:
                events.append(FacilityEvent(0.0, kind, c.key, 1.0))
    for p in plant.power:
        if f"power:{p.key}" in degraded:
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


def _rack_input(plant: Plant, case: CaseResult, at: npt.NDArray[np.int64] | None
                ) -> dict[str, Any]:
    mean_w = case.totals["mean_power_kw"] * 1e3
    budget = np.asarray(plant.racks.budget_w, dtype=float)
    if at is not None and "mean_rack_w" in case.per_job:
        w = _plant_w(plant, at, np.asarray(case.per_job["mean_rack_w"], float))
        return {"rack_w": tuple(float(x) for x in w)}
    return {"load_fraction": float(min(1.0, max(0.01, mean_w / max(budget.sum(), 1.0))))}


def _cards_per_rack(layout: Layout) -> int:
    """The most cards in one rack of the layout (the plant's per-card figures)."""
    _, rack_of_node = layout.rack_index()
    per = np.bincount(rack_of_node, weights=[sum(1 for c in row if c >= 0)
                                             for row in layout.cards])
    return max(1, int(per.max(initial=1)))


def _run_plant(plant: Plant, spec: WhatIfSpec, case: CaseResult, events: Sequence[FacilityEvent],
               layout: Layout | None, capping: bool, at: npt.NDArray[np.int64] | None
               ) -> WhatIfResult:
    matched = at is not None
    extra: dict[str, Any] = {}
    if layout is not None:
        extra = {"cards_per_rack": _cards_per_rack(layout), "card_tdp_w": layout.tdp_w,
                 "card_idle_w": min(layout.idle_w, layout.tdp_w * 0.999),
                 "compute_share": spec.compute_share, "capping": capping,
                 "limit_step": LIMIT_STEP if matched else 0.0}
    try:
        return run_facility(plant, WhatIfInput(horizon_s=spec.horizon_s, dt_s=FACILITY_DT_S,
                                               events=tuple(events), points=spec.points,
                                               **_rack_input(plant, case, at), **extra))
    except PlantError as exc:
        raise WhatIfInputError(f"facility.{exc.field}", exc.message) from exc


def _summary(site: Plant, res: WhatIfResult) -> dict[str, Any]:
    limit = [t for t in res.racks["time_to_limit_s"] if t is not None]
    capped = [t for t in res.racks["time_to_cap_s"] if t is not None]
    return {"contract_kw": site.site.contract_kw,
            "mean_pue": res.energy["mean_pue"],
            "facility_mwh": res.energy["facility_kwh"] / 1e3,
            "it_lost_mwh": res.energy["it_lost_kwh"] / 1e3,
            "racks_at_thermal_limit": len(limit),
            "first_thermal_limit_s": min(limit) if limit else None,
            "racks_capped": len(capped),
            "racks_tripped": int(sum(res.racks["tripped"])),
            "max_card_c": max(res.series["max_card_c"], default=None),
            "series": {"t_s": res.t_s, "pue": res.series["pue"],
                       "max_card_c": res.series["max_card_c"]}}


def compose(plant: Plant, spec: WhatIfSpec, snapshot: LiveSnapshot | None, layout: Layout,
            base: CaseResult, pert: CaseResult,
            rerun: Callable[[bool, Limits], CaseResult]
            ) -> tuple[CaseResult, CaseResult, dict[str, Any]]:
    """Both cases through the plant and back into the jobs (see the module doc).
    ``rerun(perturbed, limits)`` runs a case again under the plant's limits."""
    forked, fork_events, unknown = forked_plant(plant, snapshot)
    events = facility_events(forked, spec)
    racks = len(base.rack_peak_w)
    at = rack_map(plant, layout.rack_index()[0], racks)
    owner = {int(p): k for k, p in enumerate([] if at is None else at.tolist())}
    capping = (snapshot is not None and snapshot.readings is not None
               and snapshot.readings.cap_w is not None)
    out: dict[str, Any] = {"matched_racks": at is not None, "capping": capping,
                           "limit_step": LIMIT_STEP}
    if fork_events or forked is not plant:
        out["fork"] = {"down": sorted(k for r in ("failed", "maintenance")
                                      for k in (snapshot.facility_down.get(r, ())
                                                if snapshot else ())),
                       "degraded": [e.target for e in fork_events], "unknown": unknown}
    cases = {"baseline": base, "perturbed": pert}
    for name, evs, site in (("baseline", fork_events, forked),
                            ("perturbed", (*fork_events, *events),
                             contract_plant(forked, spec))):
        res = _run_plant(site, spec, cases[name], evs, layout, capping, at)
        out[name] = _summary(site, res)
        limits: Limits = [(t, owner[r], w) for t, r, w in res.card_limits if r in owner]
        out[name]["job_limits"] = {
            "changes": len(limits), "racks_limited": len({r for _, r, _ in limits}),
            "racks_out": len({r for _, r, w in limits if w == 0.0}),
            "lowest_card_w": min((w for _, _, w in limits if w), default=None)}
        if limits:
            cases[name] = rerun(name == "perturbed", limits)
    b, p = out["baseline"], out["perturbed"]
    out["difference"] = {k: p[k] - b[k] for k in ("mean_pue", "facility_mwh", "it_lost_mwh",
                                                  "racks_at_thermal_limit", "racks_capped",
                                                  "racks_tripped")}
    for name in ("baseline", "perturbed"):
        site = forked if name == "baseline" else contract_plant(forked, spec)
        cases[name].totals["peak_feed_kw"] = peak_feed_kw(site, cases[name], at)
    return cases["baseline"], cases["perturbed"], out


def peak_feed_kw(plant: Plant, case: CaseResult,
                 at: npt.NDArray[np.int64] | None) -> float | None:
    """The highest input of any utility feed (kW) over the case: the chain's
    ``power_flow`` (IT load and every element's losses) at the instants where the racks
    under each feed draw most, from the case's exact rack-power step function. Feeds
    lost by a ``feed_loss`` event are counted as if they still ran (their peak is the
    planned load's). The racks' power is the cards' (the what-if's), a plant rack outside
    the layout at its nameplate. None when the racks cannot be matched (``at``: the
    layout racks' plant indices, :func:`rack_map`) or the plant has no feed."""
    steps = case.rack_steps
    feeds = [i for i, e in enumerate(plant.power) if e.kind == "feed"]
    if steps is None or not feeds or at is None:
        return None
    if not len(steps[1]):
        return 0.0
    rack_w = _plant_w(plant, at, steps[1])
    chain = compile_chain(plant.power, plant.racks.power_parent)
    root = np.arange(chain.n)
    for _ in range(len(chain.levels)):
        up = chain.parent[root]
        root = np.where(up >= 0, up, root)
    under = root[chain.rack_parent]  # each rack's root element
    candidates = set()
    for f in feeds:
        mask = under == f
        if mask.any():
            candidates.add(int(np.argmax(rack_w[:, mask].sum(axis=1))))
    best = 0.0
    for t in sorted(candidates):
        flow = power_flow(chain, rack_w[t])
        best = max(best, float(flow.input_w[feeds].max()))
    return best / 1e3


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
