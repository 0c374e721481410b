"""Enumerate candidate designs, price them (vectorised), keep those that fit, find the front.

For each design (accelerator, rack power class, cards, switch, optic):

* **cards** rounded up to whole servers (whole racks for an NVL72-class system);
  **servers per rack** = min(⌊rack budget / server nameplate⌋, slots) — the
  nameplate packing of ``simulation/power.py``; an NVL72-class rack must take all
  its trays or it does not fit the rack class;
* **switches and links** of a non-blocking fat tree with one 400G port per card
  (``network.py``: Al-Fares et al. 2008); switch racks at
  :data:`SWITCHES_PER_RACK` (assumption);
* **IT nameplate** = servers × (cards × TDP + overhead) + switches + optics;
  **facility power** = IT × PUE (the definition of PUE: The Green Grid, WP #49);
  **cooling** = the IT heat (every watt drawn becomes heat);
* **capex** = cards × system price + switches + optics (IT) and IT kW × facility
  $/kW (facility); **yearly opex** = training draw × PUE × 8,760 h × $/kWh +
  maintenance share × IT capex;
* **cost of the run** = (IT capex / IT years + facility capex / facility years +
  yearly opex) × years the run takes (straight-line depreciation, pro-rated);
  **cost per million tokens** = cost of the run / tokens × 10⁶; **energy per
  token** = training draw × PUE × seconds / tokens.

The same arithmetic one design at a time is :func:`evaluate_one` — the naive
baseline of ``benchmarks/capacity.py`` and the cross-check of the tests.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from simulation.capacity.errors import CapacityInputError
from simulation.capacity.inputs import CandidateSpace, Site, Workload
from simulation.capacity.network import fat_tree, fat_tree_arrays
from simulation.capacity.prices import PriceTable
from simulation.capacity.timing import StepFigure

__all__ = ["HOURS_PER_YEAR", "SWITCHES_PER_RACK", "Plan", "check_space",
           "compare_generations", "evaluate", "evaluate_one", "pareto_front"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
HOURS_PER_YEAR = 8_760.0
SWITCHES_PER_RACK = 16
"""Scale-out switches per network rack (1U each, with patch panels) — assumption."""
Timer = Callable[[str, int], StepFigure]
COLUMNS = ("cards", "servers", "racks", "network_racks", "scale_up_switches", "switches",
           "tiers", "links",
           "optics", "it_kw", "facility_kw", "cooling_kw", "training_kw", "capex_it",
           "capex_facility", "capex", "opex_per_year", "hours_to_train", "cost_of_run",
           "cost_per_mtok", "energy_j_per_token")


def check_space(space: CandidateSpace, prices: PriceTable,
                figures: Mapping[str, Mapping[str, Any]]) -> None:
    """Every name of the space known to the catalogue and the price table."""
    for i, slug in enumerate(space.accelerators):
        if slug not in figures:
            raise CapacityInputError(f"candidates.accelerators[{i}]", (
                f"unknown accelerator {slug!r} (known: {', '.join(sorted(figures))})"))
        if slug not in prices.systems:
            raise CapacityInputError(f"candidates.accelerators[{i}]", (
                f"no system price for {slug!r}: add prices.systems.{slug}"))
    for key, table in (("switches", prices.switches), ("optics", prices.optics)):
        for i, name in enumerate(getattr(space, key)):
            if name not in table:
                raise CapacityInputError(f"candidates.{key}[{i}]", (
                    f"unknown {key[:-1] if key == 'switches' else 'optic'} {name!r} "
                    f"(known: {', '.join(sorted(table))})"))


def evaluate(site: Site, space: CandidateSpace, workload: Workload, prices: PriceTable,
             figures: Mapping[str, Mapping[str, Any]], timer: Timer,
             progress: Callable[[float], None] | None = None) -> Plan:
    """Every design of ``space`` priced at once (numpy over candidates)."""
    check_space(space, prices, figures)
    grid = np.array(list(itertools.product(
        range(len(space.accelerators)), range(len(space.rack_kw)), range(len(space.cards)),
        range(len(space.switches)), range(len(space.optics)))), dtype=np.int64).reshape(-1, 5)
    acc, rk, cd, sw, op = grid.T
    systems = [prices.systems[s] for s in space.accelerators]
    cps = np.array([s.cards_per_server for s in systems], dtype=np.int64)[acc]
    spr = np.array([s.servers_per_rack for s in systems], dtype=np.int64)[acc]
    whole = np.array([s.whole_rack for s in systems], dtype=np.bool_)[acc]
    overhead = np.array([s.overhead_w for s in systems])[acc]
    card_price = np.array([s.price_per_card for s in systems])[acc]
    up_switches = np.array([s.scale_up_switches for s in systems])[acc]
    tdp = np.array([float(figures[s]["tdp_w"]) for s in space.accelerators])[acc]
    rack_w = np.array(space.rack_kw)[rk] * 1000.0
    asked = np.array(space.cards, dtype=np.int64)[cd]
    switches = [prices.switches[s] for s in space.switches]
    optics = [prices.optics[o] for o in space.optics]
    radix = np.array([s.radix for s in switches], dtype=np.int64)[sw]
    sw_price = np.array([s.price for s in switches])[sw]
    sw_w = np.array([s.power_w for s in switches])[sw]
    ends = np.array([o.ends for o in optics], dtype=np.int64)[op]
    op_price = np.array([o.price for o in optics])[op]
    op_w = np.array([o.power_w for o in optics])[op]

    unit = np.where(whole, cps * spr, cps)
    cards = -(-asked // unit) * unit
    servers = cards // cps
    server_w = cps * tdp + overhead
    by_power = np.floor(rack_w / server_w).astype(np.int64)
    per_rack = np.minimum(by_power, spr)
    rack_short = (per_rack < 1) | (whole & (by_power < spr))
    racks = np.where(rack_short, 0, -(-servers // np.maximum(per_rack, 1)))
    tiers, n_switches, _, links = fat_tree_arrays(cards, radix)
    net_racks = -(-n_switches // SWITCHES_PER_RACK)
    n_optics = links * ends
    network_w = n_switches * sw_w + n_optics * op_w
    it_kw = (servers * server_w + network_w) / 1000.0
    facility_kw = it_kw * site.pue

    # time to train: one search per distinct (accelerator, cards)
    keys = sorted({(int(a), int(c)) for a, c in zip(acc, cards, strict=True)})
    figs: dict[tuple[int, int], StepFigure] = {}
    for i, (a, c) in enumerate(keys):
        figs[(a, c)] = timer(space.accelerators[a], c)
        if progress is not None:
            progress((i + 1) / len(keys))
    hours = np.array([figs[(int(a), int(c))].hours for a, c in zip(acc, cards, strict=True)])
    card_w = np.array([figs[(int(a), int(c))].card_w for a, c in zip(acc, cards, strict=True)])
    training_kw = (cards * card_w + servers * overhead + network_w) / 1000.0

    capex_it = cards * card_price + n_switches * sw_price + n_optics * op_price
    capex_facility = it_kw * prices.facility_per_kw
    opex = (training_kw * site.pue * HOURS_PER_YEAR * prices.energy_per_kwh
            + prices.maintenance_share * capex_it)
    yearly = capex_it / prices.depreciation_years + capex_facility / prices.facility_years + opex
    cost_of_run = yearly * hours / HOURS_PER_YEAR
    tokens = workload.tokens if workload.tokens is not None else math.nan
    cost_per_mtok = cost_of_run / tokens * 1e6
    energy_j_per_token = training_kw * 1000.0 * site.pue * hours * 3600.0 / tokens

    columns: dict[str, Any] = {
        "cards": cards, "servers": servers, "racks": racks, "network_racks": net_racks,
        "scale_up_switches": np.ceil(servers * up_switches).astype(np.int64),
        "switches": n_switches, "tiers": tiers, "links": links, "optics": n_optics,
        "it_kw": it_kw, "facility_kw": facility_kw, "cooling_kw": it_kw,
        "training_kw": training_kw, "capex_it": capex_it, "capex_facility": capex_facility,
        "capex": capex_it + capex_facility, "opex_per_year": opex, "hours_to_train": hours,
        "cost_of_run": cost_of_run, "cost_per_mtok": cost_per_mtok,
        "energy_j_per_token": energy_j_per_token}
    flags = {
        "rack": rack_short, "network": tiers == 0, "power": facility_kw > site.power_kw,
        "cooling": it_kw > site.cooling_kw,
        "floor": (racks + net_racks) > site.floor_racks, "training": ~np.isfinite(hours)}
    fits = ~np.logical_or.reduce(list(flags.values()))
    return Plan(site, space, workload, prices, grid, columns, flags, fits,
                {k: figs[k] for k in keys}, server_w, rack_w, radix)


def evaluate_one(site: Site, space: CandidateSpace, workload: Workload, prices: PriceTable,
                 figures: Mapping[str, Mapping[str, Any]], timer: Timer,
                 index: tuple[int, int, int, int, int]) -> dict[str, Any]:
    """One design by plain Python arithmetic (the module's formulas, unvectorised)."""
    a, r, c, s, o = index
    slug = space.accelerators[a]
    system = prices.systems[slug]
    switch = prices.switches[space.switches[s]]
    optic = prices.optics[space.optics[o]]
    unit = system.cards_per_server * (system.servers_per_rack if system.whole_rack else 1)
    cards = math.ceil(space.cards[c] / unit) * unit
    servers = cards // system.cards_per_server
    server_w = system.cards_per_server * float(figures[slug]["tdp_w"]) + system.overhead_w
    by_power = math.floor(space.rack_kw[r] * 1000.0 / server_w)
    per_rack = min(by_power, system.servers_per_rack)
    rack_short = per_rack < 1 or (system.whole_rack and by_power < system.servers_per_rack)
    racks = 0 if rack_short else math.ceil(servers / per_rack)
    tiers, n_switches, _, links = fat_tree(cards, switch.radix)
    n_optics = links * optic.ends
    network_w = n_switches * switch.power_w + n_optics * optic.power_w
    it_kw = (servers * server_w + network_w) / 1000.0
    fig = timer(slug, cards)
    training_kw = (cards * fig.card_w + servers * system.overhead_w + network_w) / 1000.0
    capex_it = cards * system.price_per_card + n_switches * switch.price + n_optics * optic.price
    capex_facility = it_kw * prices.facility_per_kw
    opex = (training_kw * site.pue * HOURS_PER_YEAR * prices.energy_per_kwh
            + prices.maintenance_share * capex_it)
    yearly = capex_it / prices.depreciation_years + capex_facility / prices.facility_years + opex
    cost_of_run = yearly * fig.hours / HOURS_PER_YEAR
    tokens = workload.tokens if workload.tokens is not None else math.nan
    net_racks = math.ceil(n_switches / SWITCHES_PER_RACK)
    fits = not (rack_short or tiers == 0 or it_kw * site.pue > site.power_kw
                or it_kw > site.cooling_kw or racks + net_racks > site.floor_racks
                or not math.isfinite(fig.hours))
    return {"cards": cards, "racks": racks, "switches": n_switches, "optics": n_optics,
            "it_kw": it_kw, "capex": capex_it + capex_facility, "opex_per_year": opex,
            "hours_to_train": fig.hours, "cost_per_mtok": cost_of_run / tokens * 1e6,
            "fits": fits}


def pareto_front(x: F64, y: F64) -> list[int]:
    """Indices of the points no other point beats on both ``x`` and ``y`` (both
    minimised; ties on both kept once), ordered by ``x``: sort by (x, y), keep each
    point whose y is below every y before it (Kung, Luccio and Preparata 1975)."""
    order = np.lexsort((y, x))
    out: list[int] = []
    best = math.inf
    for i in order:
        if y[i] < best:
            out.append(int(i))
            best = float(y[i])
    return out


@dataclass
class Plan:
    """The priced designs: columns over candidates, the flags of what does not fit."""

    site: Site
    space: CandidateSpace
    workload: Workload
    prices: PriceTable
    grid: I64
    columns: dict[str, Any]
    flags: dict[str, Any]
    fits: Any
    figures: dict[tuple[int, int], StepFigure]
    server_w: F64
    rack_w: F64
    radix: I64
    notes: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return int(len(self.grid))

    def objective(self) -> F64:
        """What a design is ranked by: cost per million tokens, or the cost of the
        run for a trace workload (no tokens)."""
        key = "cost_of_run" if self.workload.is_trace else "cost_per_mtok"
        return np.asarray(self.columns[key], dtype=np.float64)

    def why(self, i: int) -> list[str]:
        """Why design ``i`` does not fit (empty: it fits)."""
        col = self.columns
        a = int(self.grid[i, 0])
        slug = self.space.accelerators[a]
        system = self.prices.systems[slug]
        out = []
        if self.flags["rack"][i]:
            need = system.servers_per_rack * self.server_w[i] if system.whole_rack \
                else self.server_w[i]
            what = f"a {system.servers_per_rack}-tray rack" if system.whole_rack else "a server"
            out.append(f"rack: {what} draws {need / 1000:,.1f} kW > the "
                       f"{self.rack_w[i] / 1000:,.0f} kW rack class")
        if self.flags["network"][i]:
            k = int(self.radix[i])
            out.append(f"network: {int(col['cards'][i]):,} ports > {k ** 3 // 4:,}, the most a "
                       f"3-tier fat tree of radix {k} holds")
        if self.flags["power"][i]:
            out.append(f"power: {col['facility_kw'][i]:,.0f} kW at PUE {self.site.pue:g} > "
                       f"the site's {self.site.power_kw:,.0f} kW")
        if self.flags["cooling"][i]:
            out.append(f"cooling: {col['cooling_kw'][i]:,.0f} kW of heat > the site's "
                       f"{self.site.cooling_kw:,.0f} kW")
        if self.flags["floor"][i]:
            out.append(f"floor: {int(col['racks'][i] + col['network_racks'][i]):,} racks > "
                       f"the site's {self.site.floor_racks:,}")
        if self.flags["training"][i]:
            fig = self.figures[(a, int(col["cards"][i]))]
            out.append(f"training: {fig.reason}")
        return out

    def design(self, i: int) -> dict[str, Any]:
        """Design ``i`` as JSON."""
        a, r, _, s, o = (int(v) for v in self.grid[i])
        slug = self.space.accelerators[a]
        fig = self.figures[(a, int(self.columns["cards"][i]))]
        out: dict[str, Any] = {
            "index": i, "accelerator": slug, "rack_kw": self.space.rack_kw[r],
            "switch": self.space.switches[s], "optic": self.space.optics[o],
            "fits": bool(self.fits[i]), "why_not": self.why(i),
            "execution": fig.execution}
        for key in COLUMNS:
            value = self.columns[key][i]
            out[key] = int(value) if key in ("cards", "servers", "racks", "network_racks",
                                              "scale_up_switches", "switches", "tiers", "links",
                                              "optics") \
                else float(value)
        out["days_to_train"] = out["hours_to_train"] / 24.0
        return out

    def front(self) -> list[int]:
        """The Pareto front of the fitting designs: cost (per million tokens, or of
        the run for a trace) against time to train."""
        idx = np.flatnonzero(self.fits & np.isfinite(self.objective()))
        hours = np.asarray(self.columns["hours_to_train"], dtype=np.float64)[idx]
        return [int(idx[j]) for j in pareto_front(hours, self.objective()[idx])]

    def to_dict(self, top: int = 20) -> dict[str, Any]:
        """The result: counts, why designs were refused, the front, the cheapest."""
        fitting = np.flatnonzero(self.fits)
        refused = {k: int(np.count_nonzero(v)) for k, v in self.flags.items()}
        order = fitting[np.argsort(self.objective()[fitting], kind="stable")]
        out: dict[str, Any] = {
            "candidates": self.count, "fitting": int(len(fitting)), "refused": refused,
            "objective": "cost_of_run" if self.workload.is_trace else "cost_per_mtok",
            "pareto": [self.design(i) for i in self.front()],
            "best": [self.design(int(i)) for i in order[:top]],
            "refused_designs": self.refused_designs(top),
            "searches": len(self.figures),
            "site": self.site.to_dict(), "candidates_space": self.space.to_dict(),
            "workload": self.workload.to_dict(), "prices": self.prices.to_dict(),
            "notes": list(self.notes),
        }
        if not len(fitting):
            out["nothing_fits"] = self.nothing_fits()
        return out

    def refused_designs(self, top: int) -> list[dict[str, Any]]:
        """Up to ``top`` designs that do not fit, the nearest misses first (fewest
        reasons, then cheapest), each with ``why_not``."""
        refused = np.flatnonzero(~self.fits)
        if not len(refused):
            return []
        reasons = np.sum([np.asarray(v, dtype=np.int64)[refused] for v in self.flags.values()],
                         axis=0)
        cost = np.nan_to_num(self.objective()[refused], nan=np.inf)
        order = refused[np.lexsort((cost, reasons))][:top]
        keep = ("index", "accelerator", "rack_kw", "switch", "optic", "cards", "racks",
                "facility_kw", "why_not")
        return [{k: d[k] for k in keep} for d in (self.design(int(i)) for i in order)]

    def nothing_fits(self) -> str:
        """Plain words: nothing fits, and the nearest miss's reasons."""
        d = self.design(int(self.refused_designs(1)[0]["index"]))
        return (f"No design fits: of {self.count:,} candidates, none passes every check "
                f"({', '.join(f'{k} {v:,}' for k, v in self.flags_count().items() if v)} "
                f"refused). The nearest, {d['cards']:,} × {d['accelerator']} in "
                f"{d['rack_kw']:g} kW racks, fails on: {'; '.join(d['why_not'])}.")

    def flags_count(self) -> dict[str, int]:
        return {k: int(np.count_nonzero(v)) for k, v in self.flags.items()}


def compare_generations(plan: Plan, older: str, newer: str) -> dict[str, Any]:
    """The seeds' "unit compute cost falls 70 %" as a question: the cheapest fitting
    design (per million tokens) of ``older`` against that of ``newer`` on the same
    workload, site and prices; the % change and the assumptions it rests on."""
    out: dict[str, Any] = {"older": older, "newer": newer, "claim_percent": -70.0}
    cost = plan.objective()
    for role, slug in (("older", older), ("newer", newer)):
        if slug not in plan.space.accelerators:
            raise CapacityInputError("compare", f"{slug!r} is not among the candidates' "
                                                f"accelerators")
        a = plan.space.accelerators.index(slug)
        mine = np.flatnonzero(plan.fits & (plan.grid[:, 0] == a) & np.isfinite(cost))
        out[f"{role}_design"] = plan.design(int(mine[np.argmin(cost[mine])])) if len(mine) \
            else None
    if out["older_design"] is None or out["newer_design"] is None:
        missing = older if out["older_design"] is None else newer
        out["answer"] = f"no design of {missing} fits the site: nothing to compare"
        out["change_percent"] = None
        return out
    key = "cost_of_run" if plan.workload.is_trace else "cost_per_mtok"
    a_cost, b_cost = out["older_design"][key], out["newer_design"][key]
    change = (b_cost - a_cost) / a_cost * 100.0
    out["change_percent"] = change
    out["answer"] = (f"{key.replace('_', ' ')}: {older} {a_cost:,.4g} → {newer} {b_cost:,.4g} "
                     f"({change:+.0f} %; the seeds claim −70 %)")
    out["assumptions"] = [
        "the same workload, site, PUE and price table for both generations",
        "system prices per card are the price table's (assumptions unless replaced)",
        "time to train from the training model's best layout found for each design",
    ]
    return out
