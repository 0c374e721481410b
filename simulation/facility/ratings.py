"""Planning check: no element planned over its rating, by nameplate.

Capacity planning sizes every element for the worst case, every rack at its budget
(the rule of :mod:`simulation.power`, applied up the chains) — or, where the plant
gives ``RackSet.nameplate_w``, at the nameplate draw of its installed hardware (the
twin's rating rule, ``twin/facility/capacity.py``): a PDU, UPS or feed must
carry the input its racks draw at their budgets — losses included, from each
element's efficiency curve at that load — within its *planned* rating (rating × usable
units by redundancy); a CDU must take its racks' liquid share of their budgets, a
CRAH their air share, a facility loop and a heat-rejection root everything below
them, within capacity × usable units; the site's nameplate draw must stay under its
contract. :func:`over_ratings` lists every element over, each as a
:class:`~simulation.facility.plant.PlantError` naming the rating field, so the twin
answers a write that would break one with 409 and the field (the rack budget rule's
style).

>>> from simulation.facility.presets import demo_plant
>>> over_ratings(demo_plant(28))
[]
>>> [e.field for e in over_ratings(demo_plant(28, cdu_kw=1000.0 / 1.1 / 2))]
['cooling[2].capacity_kw']
"""
from __future__ import annotations

import numpy as np

from simulation.facility.plant import Plant, PlantError
from simulation.facility.power_chain import compile_chain, power_flow
from simulation.facility.validate import usable_units, validate

__all__ = ["over_ratings"]


def _kw(w: float) -> str:
    return f"{w / 1e3:,.0f} kW"


def over_ratings(plant: Plant) -> list[PlantError]:
    """Every element whose nameplate load exceeds its planned rating (empty: fits).
    Validates the plant first (a bad plant raises its PlantError)."""
    validate(plant)
    out: list[PlantError] = []
    racks = plant.racks
    budget = np.asarray(racks.budget_w if racks.nameplate_w is None else racks.nameplate_w,
                        dtype=float)
    chain = compile_chain(plant.power, racks.power_parent)
    flow = power_flow(chain, budget)
    for i, e in enumerate(plant.power):
        if flow.input_w[i] > flow.planned_w[i] * (1 + 1e-9):
            out.append(PlantError(
                f"power[{i}].rating_kw",
                f"{e.kind} {e.key!r} would carry {_kw(flow.input_w[i])} at its racks' budgets "
                f"(losses included), over its planned {_kw(flow.planned_w[i])} "
                f"({e.redundancy} of {e.units} × {e.rating_kw:,.0f} kW)"))
    contract = plant.site.contract_kw
    if contract is not None and flow.facility_w > contract * 1e3 * (1 + 1e-9):
        out.append(PlantError("site.contract_kw",
                              f"the racks' budgets draw {_kw(flow.facility_w)} before cooling, "
                              f"over the {contract:,.0f} kW contract"))
    # cooling: heat by nameplate, up the tree (liquid share to CDUs, air share to CRAHs)
    els = plant.cooling
    index = {c.key: i for i, c in enumerate(els)}
    parent = [index[c.parent] if c.parent is not None else -1 for c in els]
    liquid = budget * np.asarray(racks.liquid_fraction, dtype=float)
    heat = np.bincount(racks.cooling_parent, weights=liquid, minlength=len(els)).astype(float)
    crahs = [i for i, c in enumerate(els) if c.kind == "crah"]
    air_w = budget - liquid
    # as the thermal network routes it: an air rack's heat to its CRAH (cooling_parent),
    # a liquid rack's air share to the CRAH ``air_parent`` names, the rest over all CRAHs
    dry = np.asarray(racks.liquid_fraction) == 0
    if crahs:
        heat += np.bincount(racks.cooling_parent[dry], weights=air_w[dry], minlength=len(els))
        air_w = np.where(dry, 0.0, air_w)
    if racks.air_parent is not None:
        named = (racks.air_parent >= 0) & ~dry
        heat += np.bincount(racks.air_parent[named], weights=air_w[named], minlength=len(els))
        air_w = np.where(named, 0.0, air_w)
    air = float(air_w.sum())
    if crahs:
        caps = np.array([els[i].capacity_kw * usable_units(els[i].units, els[i].redundancy)
                         for i in crahs])
        heat[crahs] += air * caps / caps.sum()
    if not crahs and air > 0:
        # no CRAH: the air share rides on the facility water above the CDU (rear doors),
        # as the thermal network routes it
        air_at = np.bincount(racks.cooling_parent, weights=budget - liquid, minlength=len(els))
        for i in np.flatnonzero(air_at > 0).tolist():
            j = i
            while j >= 0 and els[j].kind != "cdu":
                j = parent[j]
            if j >= 0 and parent[j] >= 0:
                heat[parent[j]] += air_at[i]
    depth = []
    for i in range(len(els)):
        d, j = 0, parent[i]
        while j >= 0:
            d, j = d + 1, parent[j]
        depth.append(d)
    total = heat.copy()
    for i in sorted(range(len(els)), key=lambda k: -depth[k]):
        if parent[i] >= 0:
            total[parent[i]] += total[i]
    for i, c in enumerate(els):
        planned = c.capacity_kw * 1e3 * usable_units(c.units, c.redundancy)
        if total[i] > planned * (1 + 1e-9):
            out.append(PlantError(
                f"cooling[{i}].capacity_kw",
                f"{c.kind} {c.key!r} would take {_kw(total[i])} at its racks' budgets, over "
                f"its planned {_kw(planned)} ({c.redundancy} of {c.units} × "
                f"{c.capacity_kw:,.0f} kW)"))
    return out
