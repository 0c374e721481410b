"""The facility side of a what-if: the plant's engine fed with the racks' power.

:func:`facility_pair` runs :func:`simulation.facility.whatif.run` twice — the
baseline's and the perturbed case's mean rack power, the perturbed case with the
facility events (``cdu_trip`` → a CDU trip, ``feed_trip`` → the loss of one unit
of a power element, ``raise_wet_bulb`` → a hot day of + ``value`` °C) — and returns
PUE, energy, thermal limits and capping side by side. A ``change_contract`` reaches
the plant too: the perturbed run's site contract is the lowest in force
(:func:`contract_plant`); the cards' capping under it is the engine's. The racks are matched by
position when the plant has as many racks as the layout; otherwise the plant runs
at the cluster's mean load fraction of its budgets (and says so).
"""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from simulation.facility.plant import Plant, PlantError
from simulation.facility.whatif import Event as FacilityEvent
from simulation.facility.whatif import WhatIfInput
from simulation.facility.whatif import run as run_facility

from .events import WhatIfInputError, WhatIfSpec

if TYPE_CHECKING:
    from .engine import CaseResult

__all__ = ["FACILITY_DT_S", "contract_plant", "facility_events", "facility_pair"]

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


def _rack_input(plant: Plant, case: CaseResult, racks: int) -> dict[str, Any]:
    mean_w = case.totals["mean_power_kw"] * 1e3
    budget = np.asarray(plant.racks.budget_w, dtype=float)
    if len(plant.racks) == racks and "mean_rack_w" in case.per_job:
        return {"rack_w": tuple(float(x) for x in case.per_job["mean_rack_w"])}
    return {"load_fraction": float(min(1.0, max(0.01, mean_w / max(budget.sum(), 1.0))))}


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
    """Baseline and perturbed facility runs (see the module doc)."""
    events = facility_events(plant, spec)
    racks = len(base.rack_peak_w)
    out: dict[str, Any] = {"matched_racks": len(plant.racks) == racks}
    perturbed_plant = contract_plant(plant, spec)
    for name, case, evs, site in (("baseline", base, (), plant),
                                  ("perturbed", pert, events, perturbed_plant)):
        try:
            res = run_facility(site, WhatIfInput(horizon_s=spec.horizon_s, dt_s=FACILITY_DT_S,
                                                  events=evs, points=spec.points,
                                                  **_rack_input(plant, case, racks)))
        except PlantError as exc:
            raise WhatIfInputError(f"facility.{exc.field}", exc.message) from exc
        limit = [t for t in res.racks["time_to_limit_s"] if t is not None]
        capped = [t for t in res.racks["time_to_cap_s"] if t is not None]
        out[name] = {"contract_kw": site.site.contract_kw,
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
    b, p = out["baseline"], out["perturbed"]
    out["difference"] = {k: p[k] - b[k] for k in ("mean_pue", "facility_mwh", "it_lost_mwh",
                                                  "racks_at_thermal_limit", "racks_capped")}
    return out
