"""A cluster's facility rows → ``simulation.facility.plant.Plant`` (the engine's input).

Elements become tuples of frozen dataclasses (a site has a few thousand at a million
cards; an element whose ``status`` is failed or maintenance is ``down``); racks become
arrays built from ``values_list`` with element ids mapped to tuple positions by
``searchsorted`` — no Python object per rack. A rack's budget is
its ``power_budget_w``, its nameplate draw and its cards' TDP come from hardware's
``draw_by_rack``; racks without a place in the plant are left out (the builder gives
every rack one).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from simulation.facility.plant import (
    CoolingElement as PlantCooling,
)
from simulation.facility.plant import (
    EfficiencyCurve,
    Plant,
    PlantError,
    RackSet,
)
from simulation.facility.plant import (
    PowerElement as PlantPower,
)
from simulation.facility.plant import (
    Site as PlantSite,
)
from simulation.facility.validate import units_out as sim_units_out
from twin.facility.capacity import positions
from twin.facility.choices import ElementStatusChoices, RackClassChoices
from twin.facility.models import CoolingElement, PowerElement, RackFacility, Site

__all__ = ["DOWN_STATES", "plant_for_cluster", "plant_for_site", "units_out"]

OUT_OF_SERVICE = ElementStatusChoices.OUT_OF_SERVICE
DOWN_STATES = OUT_OF_SERVICE
"""An element in one of these states is out of the plant (``down``: the live tick runs
without it; a what-if takes the states its snapshot froze instead)."""


def plant_for_cluster(cluster: Any) -> Plant:
    """The plant of ``cluster`` (a ``hardware.Cluster`` or its id). ``PlantError`` on
    ``site`` if it has no facility yet (``manage.py build_facility`` builds one)."""
    cluster_id = getattr(cluster, "pk", cluster)
    site = Site.objects.filter(cluster_id=cluster_id).first()
    if site is None:
        raise PlantError("site", f"Cluster {cluster_id} has no facility yet: build one "
                                 f"(manage.py build_facility) or add a site.")
    return plant_for_site(site)


def plant_for_site(site: Site) -> Plant:
    power_rows = list(PowerElement.objects.filter(site=site).order_by("pk").values_list(
        "pk", "key", "kind", "parent__key", "rating_kw", "units", "redundancy", "efficiency",
        "status"))
    cooling_rows = list(CoolingElement.objects.filter(site=site).order_by("pk").values_list(
        "pk", "key", "kind", "parent__key", "capacity_kw", "units", "redundancy",
        "design_flow_kg_s", "approach_c", "supply_setpoint_c", "pump_kw", "fan_kw", "volume_l",
        "status"))
    power = tuple(PlantPower(
        key=key, kind=kind, rating_kw=float(rating), parent=parent, units=int(units),
        redundancy=redundancy, efficiency=EfficiencyCurve(
            tuple(float(p[0]) for p in points), tuple(float(p[1]) for p in points))
        if points else EfficiencyCurve(), down=status in OUT_OF_SERVICE)
        for _, key, kind, parent, rating, units, redundancy, points, status in power_rows)
    cooling = tuple(PlantCooling(
        key=key, kind=kind, capacity_kw=float(capacity), parent=parent, units=int(units),
        redundancy=redundancy, design_flow_kg_s=float(flow), approach_c=float(approach),
        supply_setpoint_c=None if setpoint is None else float(setpoint),
        pump_kw=float(pump), fan_kw=float(fan), volume_l=float(volume),
        down=status in OUT_OF_SERVICE)
        for _, key, kind, parent, capacity, units, redundancy, flow, approach, setpoint,
        pump, fan, volume, status in cooling_rows)
    power_ids = np.array([r[0] for r in power_rows], dtype=np.int64)
    cooling_ids = np.array([r[0] for r in cooling_rows], dtype=np.int64)

    links = RackFacility.objects.filter(site=site).order_by("rack_id")
    ids = np.fromiter(links.values_list("rack_id", flat=True), dtype=np.int64)
    power_el = np.fromiter(links.values_list("power_element_id", flat=True), dtype=np.int64,
                           count=len(ids))
    cooling_el = np.fromiter(links.values_list("cooling_element_id", flat=True),
                             dtype=np.int64, count=len(ids))
    air_el = np.array(list(links.values_list("air_element_id", flat=True)), dtype=object)
    air_el = np.where(air_el == None, -1, air_el).astype(np.int64)  # noqa: E711 (element-wise)
    budget = np.fromiter(links.values_list("rack__power_budget_w", flat=True), dtype=np.float64,
                         count=len(ids))
    fraction = np.fromiter(links.values_list("liquid_fraction", flat=True), dtype=np.float64,
                           count=len(ids))
    is_air = np.array(list(links.values_list("rack_class", flat=True)), dtype=object) \
        == RackClassChoices.AIR
    names = tuple(links.values_list("rack__name", flat=True))
    air = positions(cooling_ids, air_el)
    from twin.hardware.models import Rack  # the nameplate draw: hardware's one definition

    draws = Rack.objects.filter(pk__in=links.values("rack_id")).draw_by_rack().rows()
    at = positions(np.array([d.rack_id for d in draws], dtype=np.int64), ids)
    nameplate = np.zeros(len(ids))
    nameplate[at >= 0] = np.array([d.w for d in draws], dtype=float)[at[at >= 0]]
    # each rack's card TDP: its cards' nameplate over their count (one kind a rack in
    # every preset; a mixed rack gets the mean), 0 for a rack without cards
    card_tdp = np.zeros(len(ids))
    cards_n = np.array([d.cards for d in draws], dtype=float)
    cards_w = np.array([d.cards_w for d in draws], dtype=float)
    card_tdp[at >= 0] = np.where(cards_n > 0, cards_w / np.maximum(cards_n, 1.0),
                                 0.0)[at[at >= 0]] if len(draws) else 0.0
    return Plant(
        site=PlantSite(name=site.name, dry_bulb_c=site.dry_bulb_c, wet_bulb_c=site.wet_bulb_c,
                       contract_kw=site.contract_kw,
                       weather=tuple(tuple(float(v) for v in p) for p in site.weather or ())),
        power=power, cooling=cooling,
        racks=RackSet(ids=ids, power_parent=positions(power_ids, power_el),
                      cooling_parent=positions(cooling_ids, cooling_el), budget_w=budget,
                      liquid_fraction=np.where(is_air, 0.0, fraction), names=names,
                      air_parent=air, nameplate_w=nameplate, card_tdp_w=card_tdp),
    )


def units_out(site: Site) -> tuple[tuple[int, ...], np.ndarray, list[dict[str, Any]]]:
    """What is out of service on ``site`` now: units out per cooling element and per
    power element (in :func:`plant_for_site`'s order: by pk): its ``units_failed``, and
    for a ``degraded`` one that counts none, one unit, never its last
    (``simulation.facility.validate.units_out``: redundancy decides what the rest
    carry); and every element not plainly in service (status other than ok, or units
    failed) as ``{key, kind, chain, status, units, units_failed}``."""
    out: list[dict[str, Any]] = []
    counts: list[list[int]] = []
    for chain, model in (("cooling", CoolingElement), ("power", PowerElement)):
        rows = list(model.objects.filter(site=site).order_by("pk").values_list(
            "key", "kind", "status", "units", "units_failed"))
        counts.append(sim_units_out([int(r[3]) for r in rows], [int(r[4]) for r in rows],
                                    [r[2] == ElementStatusChoices.DEGRADED for r in rows]
                                    ).tolist() if rows else [])
        out += [{"key": key, "kind": kind, "chain": chain, "status": status, "units": units,
                 "units_failed": failed} for key, kind, status, units, failed in rows
                if status != ElementStatusChoices.OK or failed]
    return tuple(counts[0]), np.array(counts[1], dtype=np.int64), out
