"""Build a sensible facility for a cluster whose hardware is built.

Power, per the usual 2N design of an AI hall: a PDU pair per row of racks, a UPS
pair and a transformer pair per ``ROWS_PER_UPS`` rows, and utility feeds with two
incoming lines each (2N), one feed per ~``FEED_UNIT_MAX_KW``. Cooling: a CDU (N+1)
per up to ``RACKS_PER_CDU`` liquid racks of a row, each with its technology-cooling
loop; a CRAH group (N+1) per row for the air share, on a chiller (N+1); one facility
water loop and a cooling-tower plant (N+1) sized from the heat. That is the
``standard`` design; the ``efficient`` one (``twin.facility.designs``: the seed
supernode preset's) builds a UPS in eco-mode, a busway pair per row instead of PDUs,
dry coolers at ASHRAE W32 instead of towers,
premium pumps, and takes the liquid racks' air share through rear doors on the CDU
water (no CRAH, no chiller) where the cluster has no air rack. Every element is
sized from the nameplate draw of what it serves (``Rack.objects.draw_by_rack``),
planned at ≤ 80 % of its usable rating (``sizing.units_for``), so the built plant
passes the rating rule with headroom.

A rack's class comes from its hardware, generically: an air rack if its cooling is
air; an NVL72-class liquid rack if its budget is ≥ 100 kW or it holds ≥ 72 cards;
otherwise the seeds' 40 kW liquid rack. Rows are written with ``bulk_create`` (a
million-card cluster: ~27,000 racks, a few thousand elements), in one transaction.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from django.db import connection, transaction
from django.db.models import Count

from simulation.facility.fluids import PG25, WATER
from twin.facility.capacity import CHILLER_DESIGN_COP, positions
from twin.facility.choices import CoolingKindChoices as C
from twin.facility.choices import PowerKindChoices as P
from twin.facility.choices import RackClassChoices, RedundancyChoices
from twin.facility.constants import (
    AIR_FAN_KW_PER_KW,
    CDU_UNIT_KW,
    CONTINUOUS_LOAD_FACTOR,
    CRAH_UNIT_KW,
    FEED_UNIT_MAX_KW,
    RACK_CLASSES,
    RACKS_PER_CDU,
    ROWS_PER_UPS,
    TOWER_UNIT_KW,
    pump_kw,
)
from twin.facility.designs import DEFAULT_DESIGN, DESIGNS, FacilityDesign
from twin.facility.models import CoolingElement, PowerElement, RackFacility, Site
from twin.facility.sizing import curve, efficiency_at, round_up, units_for

__all__ = ["FacilityError", "Progress", "build_facility", "design_for", "rack_classes"]

Progress = Callable[[float, str], None]

#: Coolant temperature rise across racks and loops at design flow (K): ~1.5 L/min per kW.
LOOP_DELTA_T_C = 10.0
#: Chilled-water rise across a CRAH coil at design flow (K): the classic 10 °F design ΔT
#: (ASHRAE Handbook — HVAC Systems and Equipment, ch. 13 "Hydronic heating and cooling").
CRAH_WATER_DELTA_T_C = 5.6
#: Heads the pumps are sized for (kPa): CDU secondary (cold plates, manifolds, hoses) and
#: facility water (plant, pipes, CDU primaries).
TCS_HEAD_KPA, FACILITY_HEAD_KPA = 250.0, 300.0
#: Coolant held: per CDU unit (its tank and exchanger, L), and a loop's transit time at
#: design flow (s) — assumptions, see docs/facility.md.
CDU_UNIT_VOLUME_L, TCS_TRANSIT_S, FACILITY_TRANSIT_S = 150.0, 20.0, 120.0
#: The largest chiller unit the builder uses (kW of cooling, ~1,000 tons).
CHILLER_UNIT_KW = 3_500.0
#: A rack is NVL72-class from this budget (W) or card count.
NVL72_BUDGET_W, NVL72_CARDS = 100_000, 72


class FacilityError(Exception):
    """A facility that cannot be built; ``field`` names the input at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def rack_classes(cooling: np.ndarray, budget_w: np.ndarray, cards: np.ndarray) -> np.ndarray:
    """The class of each rack from its hardware (see the module doc)."""
    big = (budget_w >= NVL72_BUDGET_W) | (cards >= NVL72_CARDS)
    return np.where(cooling == "air", RackClassChoices.AIR,
                    np.where(big, RackClassChoices.NVL72, RackClassChoices.LIQUID)).astype(object)


def _input_kw(losses: str, load_kw: float, usable_kw: float) -> float:
    """What an element whose losses are ``LOSSES[losses]`` draws from its parent
    delivering ``load_kw``."""
    if load_kw <= 0:
        return 0.0
    return load_kw / efficiency_at(losses, load_kw / usable_kw)


def design_for(cluster: Any, design: str | None = None) -> FacilityDesign:
    """The design to build ``cluster`` with: ``design`` if given, else its preset's
    (``Preset.facility_design``), else the default. ``FacilityError`` on ``design``."""
    if design is None:
        from twin.hardware.presets import PRESETS

        preset = PRESETS.get(getattr(cluster, "preset", "") or "")
        design = preset.facility_design if preset is not None else DEFAULT_DESIGN
    if design not in DESIGNS:
        raise FacilityError("design", f"Unknown facility design {design!r}; one of "
                                      f"{', '.join(DESIGNS)}.")
    return DESIGNS[design]


def build_facility(cluster: Any, *, replace: bool = True, design: str | None = None,
                   progress: Progress | None = None) -> dict[str, Any]:
    """Build the facility of ``cluster`` (its racks must exist) in one transaction;
    ``replace`` deletes an existing one first; ``design`` names a
    ``twin.facility.designs`` design (None: the cluster's preset's, else
    ``standard``). Returns a summary. ``FacilityError``."""
    from twin.hardware.models import Rack

    plan = design_for(cluster, design)
    report = progress or (lambda fraction, message: None)
    started = time.perf_counter()
    with transaction.atomic():
        old = Site.objects.filter(cluster_id=cluster.pk)
        if old.exists():
            if not replace:
                raise FacilityError("cluster", f"Cluster {cluster.name!r} already has a "
                                               f"facility; pass --replace to rebuild it.")
            report(0.0, "deleting the old facility")
            old.delete()
        racks = Rack.objects.filter(cluster_id=cluster.pk).order_by("row", "slot", "pk")
        columns = list(zip(*racks.values_list("pk", "row", "cooling", "power_budget_w"),
                           strict=True)) or [(), (), (), ()]
        ids = np.array(columns[0], dtype=np.int64)
        if not len(ids):
            raise FacilityError("cluster", f"Cluster {cluster.name!r} has no racks: build its "
                                           f"hardware first.")
        report(0.05, f"reading the draw of {len(ids):,} racks")
        row = np.array(columns[1], dtype=np.int64)
        draws = racks.draw_by_rack().rows()
        at = positions(np.array([d.rack_id for d in draws], dtype=np.int64), ids)
        found = at >= 0
        kw = np.zeros(len(ids))
        cards = np.zeros(len(ids), dtype=np.int64)
        kw[found] = np.array([d.w for d in draws], dtype=float)[at[found]] / 1000.0
        cards[found] = np.array([d.cards for d in draws], dtype=np.int64)[at[found]]
        classes = rack_classes(np.array(columns[2], dtype=object),
                               np.array(columns[3], dtype=np.int64), cards)
        fraction = np.array([RACK_CLASSES[c].liquid_fraction for c in classes], dtype=float)
        name = cluster.name if not Site.objects.filter(name=cluster.name).exists() \
            else f"{cluster.name}-{cluster.pk}"  # a site someone named so already
        site = Site.objects.create(cluster_id=cluster.pk, name=name, location="", weather=[])
        report(0.15, "power chain")
        power_of_rack, power = _power_chain(site, row, kw, plan)
        report(0.45, "cooling chain")
        cooling_of_rack, air_of_rack, cooling = _cooling_chain(site, row, kw, classes, fraction,
                                                               plan)
        report(0.75, f"placing {len(ids):,} racks")
        RackFacility.objects.bulk_create(
            (RackFacility(rack_id=int(r), site=site, rack_class=c, liquid_fraction=float(f),
                          power_element_id=int(p), cooling_element_id=int(q),
                          air_element_id=int(a) if a >= 0 else None)
             for r, c, f, p, q, a in zip(ids, classes, fraction, power_of_rack, cooling_of_rack,
                                         air_of_rack, strict=True)),
            batch_size=5000)
        site.contract_kw = round_up((power["feed_input_kw"] + cooling["plant_kw"]) * 1.1, 100.0)
        site.save(update_fields=["contract_kw"])
        if connection.vendor == "postgresql":
            # Fresh statistics for the bulk-written tables (a fixed sample: ~0.1 s at any
            # size): without them reading the plant back planned badly (8.8 s vs 1.0 s
            # at a million cards).
            with connection.cursor() as cur:
                for model in (Site, PowerElement, CoolingElement, RackFacility):
                    cur.execute(f"ANALYZE {connection.ops.quote_name(model._meta.db_table)}")
    seconds = time.perf_counter() - started
    report(1.0, f"built the facility of {cluster.name!r} in {seconds:.1f} s")
    counts = dict((*PowerElement.objects.filter(site=site).order_by().values_list("kind")
                    .annotate(n=Count("pk")),
                   *CoolingElement.objects.filter(site=site).order_by().values_list("kind")
                    .annotate(n=Count("pk"))))
    return {"site_id": site.pk, "cluster_id": cluster.pk, "name": site.name,
            "design": plan.name, "racks": len(ids), "it_kw": round(float(kw.sum()), 3),
            "contract_kw": site.contract_kw, "elements": counts,
            "rack_classes": {c: int((classes == c).sum()) for c in RackClassChoices.values()},
            "seconds": round(seconds, 3)}


def _create(model: type, objs: list[Any]) -> list[Any]:
    return list(model.objects.bulk_create(objs, batch_size=2000))


def _power_chain(site: Site, row: np.ndarray, kw: np.ndarray, plan: FacilityDesign
                 ) -> tuple[np.ndarray, dict[str, float]]:
    """PDU (or busway) pair per row, UPS and transformer pairs per group of rows, 2N
    feeds; the UPS's and the rack feed's losses from ``plan``."""
    rack_losses = "busway" if plan.rack_power_kind == P.BUSWAY else "pdu"
    rows, inverse = np.unique(row, return_inverse=True)
    row_kw = np.bincount(inverse, weights=kw, minlength=len(rows))
    two_n = {"units": 2, "redundancy": RedundancyChoices.TWO_N}

    pdu_size = [round_up(load / CONTINUOUS_LOAD_FACTOR, 10.0) for load in row_kw]
    pdu_in = [_input_kw(rack_losses, load, size)
              for load, size in zip(row_kw, pdu_size, strict=True)]
    groups = np.arange(len(rows)) // ROWS_PER_UPS
    n_groups = int(groups.max()) + 1
    ups_load = np.bincount(groups, weights=pdu_in, minlength=n_groups)
    ups_size = [round_up(load / CONTINUOUS_LOAD_FACTOR, 50.0) for load in ups_load]
    ups_in = [_input_kw(plan.ups_losses, load, size)
              for load, size in zip(ups_load, ups_size, strict=True)]
    tx_size = [round_up(load / CONTINUOUS_LOAD_FACTOR, 100.0) for load in ups_in]
    tx_in = [_input_kw("transformer", load, size) for load, size in zip(ups_in, tx_size,
                                                                         strict=True)]
    total = float(sum(tx_in))
    n_feeds = max(1, math.ceil(total / (FEED_UNIT_MAX_KW * CONTINUOUS_LOAD_FACTOR)))
    feed_of = np.arange(n_groups) * n_feeds // n_groups
    feed_load = np.bincount(feed_of, weights=tx_in, minlength=n_feeds)

    feeds = _create(PowerElement, [PowerElement(
        site=site, key=f"feed-{i}", name=f"Utility feed {i} (lines A+B)", kind=P.FEED,
        rating_kw=round_up(load / CONTINUOUS_LOAD_FACTOR, 1000.0), **two_n)
        for i, load in enumerate(feed_load)])
    transformers = _create(PowerElement, [PowerElement(
        site=site, key=f"tx-{g}", kind=P.TRANSFORMER, parent=feeds[int(feed_of[g])],
        rating_kw=tx_size[g], efficiency=curve("transformer"), **two_n)
        for g in range(n_groups)])
    ups = _create(PowerElement, [PowerElement(
        site=site, key=f"ups-{g}", kind=P.UPS, parent=transformers[g], rating_kw=ups_size[g],
        efficiency=curve(plan.ups_losses), **two_n) for g in range(n_groups)])
    what = "busway" if plan.rack_power_kind == P.BUSWAY else "pdu"
    pdus = _create(PowerElement, [PowerElement(
        site=site, key=f"{what}-r{int(r)}",
        name=f"{'Busway' if what == 'busway' else 'PDU'} pair of row {int(r)}",
        kind=plan.rack_power_kind,
        parent=ups[int(groups[i])], rating_kw=pdu_size[i], efficiency=curve(rack_losses),
        **two_n) for i, r in enumerate(rows)])
    pdu_ids = np.array([p.pk for p in pdus], dtype=np.int64)
    return pdu_ids[inverse], {"feed_input_kw": float(feed_load.sum())}


def _cooling_chain(site: Site, row: np.ndarray, kw: np.ndarray, classes: np.ndarray,
                   fraction: np.ndarray, plan: FacilityDesign
                   ) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
    """CDUs and TCS loops per chunk of a row's liquid racks, a CRAH group per row, a
    chiller for the CRAHs, one facility loop, a cooling-tower (or dry-cooler) plant.
    With ``plan.rear_doors`` and no air rack, the liquid racks' air share goes to the
    CDU water through rear doors: the CDUs take all the racks' heat, no CRAH."""
    n = len(row)
    liquid = classes != RackClassChoices.AIR
    doors = plan.rear_doors and bool(liquid.all())
    wet_share = np.ones(n) if doors else fraction
    air_kw = np.where(liquid, kw * (1.0 - wet_share), kw)
    cooling_of, air_of = np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    n_plus_1 = RedundancyChoices.N_PLUS_1
    # Design flows with the engine's fluids (simulation.facility.fluids): PG25 in the
    # technology loops (CDU secondary), water on the facility side and in CRAH coils.
    tcs_cp_dt = PG25.cp_j_kg_k / 1e3 * LOOP_DELTA_T_C
    fws_cp_dt = WATER.cp_j_kg_k / 1e3 * LOOP_DELTA_T_C
    crah_cp_dt = WATER.cp_j_kg_k / 1e3 * CRAH_WATER_DELTA_T_C

    # The roots first (ids for the parents), sized from the heat computed below.
    cdu_plan: list[tuple[int, np.ndarray, float]] = []  # (row, rack indices, heat kW)
    crah_plan: list[tuple[int, np.ndarray, float]] = []
    for r in np.unique(row):
        in_row = np.flatnonzero(row == r)
        wet = in_row[liquid[in_row]]
        if len(wet):
            for chunk in np.array_split(wet, math.ceil(len(wet) / RACKS_PER_CDU)):
                cdu_plan.append((int(r), chunk, float((kw[chunk] * wet_share[chunk]).sum())))
        if not doors and (float(air_kw[in_row].sum()) > 0 or (~liquid[in_row]).any()):
            crah_plan.append((int(r), in_row, float(air_kw[in_row].sum())))

    cdu_sizes = [units_for(heat, CDU_UNIT_KW, 10.0) for _, _, heat in cdu_plan]
    cdu_usable = [(units - 1) * size for units, size in cdu_sizes]
    eta = plan.pump_efficiency
    cdu_pump = [pump_kw(usable, LOOP_DELTA_T_C, TCS_HEAD_KPA, eta) for usable in cdu_usable]
    crah_sizes = [units_for(heat, CRAH_UNIT_KW, 5.0) for _, _, heat in crah_plan]
    crah_fan = [AIR_FAN_KW_PER_KW * (units - 1) * size for units, size in crah_sizes]
    chiller_heat = sum(heat for _, _, heat in crah_plan) + sum(crah_fan)
    loop_heat = sum(heat for _, _, heat in cdu_plan) + sum(cdu_pump)
    loop_size = round_up(loop_heat / CONTINUOUS_LOAD_FACTOR, 100.0)
    loop_pump = pump_kw(loop_size, LOOP_DELTA_T_C, FACILITY_HEAD_KPA, eta) if cdu_plan else 0.0
    tower_heat = (loop_heat + loop_pump if cdu_plan else 0.0) + chiller_heat * (
        1.0 + 1.0 / CHILLER_DESIGN_COP)
    tower_units, tower_size = units_for(tower_heat, TOWER_UNIT_KW, 100.0)
    tower_fan = plan.rejection_fan_kw_per_kw * (tower_units - 1) * tower_size
    dry = plan.heat_rejection == C.DRY_COOLER

    tower = _create(CoolingElement, [CoolingElement(
        site=site, key="dc-0" if dry else "ct-0",
        name="Dry-cooler plant" if dry else "Cooling-tower plant", kind=plan.heat_rejection,
        capacity_kw=tower_size, units=tower_units, redundancy=n_plus_1,
        approach_c=plan.rejection_approach_c, fan_kw=round(tower_fan, 3))])[0]
    plant_kw = tower_fan
    loop = chiller = None
    if cdu_plan:
        loop = _create(CoolingElement, [CoolingElement(
            site=site, key="fwl-0", name="Facility water loop", kind=C.FACILITY_LOOP,
            parent=tower, capacity_kw=loop_size, design_flow_kg_s=round(loop_size / fws_cp_dt, 3),
            supply_setpoint_c=plan.facility_supply_c, pump_kw=round(loop_pump, 3),
            volume_l=round(loop_size / fws_cp_dt / WATER.rho_kg_m3 * 1e3 * FACILITY_TRANSIT_S,
                           1))])[0]
        plant_kw += loop_pump + sum(cdu_pump)
    if crah_plan:
        units, size = units_for(chiller_heat, CHILLER_UNIT_KW, 50.0)
        chiller = _create(CoolingElement, [CoolingElement(
            site=site, key="ch-0", name="Chillers for the air share", kind=C.CHILLER,
            parent=tower, capacity_kw=size, units=units, redundancy=n_plus_1,
            supply_setpoint_c=14.0)])[0]
        plant_kw += chiller_heat / CHILLER_DESIGN_COP + sum(crah_fan)

    tcs_setpoint = plan.facility_supply_c + plan.cdu_approach_c
    cdus = _create(CoolingElement, [CoolingElement(
        site=site, key=f"cdu-r{r}-{k}", kind=C.CDU, parent=loop, capacity_kw=size,
        units=units, redundancy=n_plus_1, design_flow_kg_s=round(usable / tcs_cp_dt, 3),
        approach_c=plan.cdu_approach_c, supply_setpoint_c=tcs_setpoint, pump_kw=round(pump, 3),
        volume_l=CDU_UNIT_VOLUME_L * units)
        for k, ((r, _, _), (units, size), usable, pump) in enumerate(
            zip(cdu_plan, cdu_sizes, cdu_usable, cdu_pump, strict=True))])
    loops = _create(CoolingElement, [CoolingElement(
        site=site, key=f"tcs-r{r}-{k}", kind=C.TCS_LOOP, parent=cdu, capacity_kw=usable,
        design_flow_kg_s=round(usable / tcs_cp_dt, 3), supply_setpoint_c=tcs_setpoint,
        volume_l=round(usable / tcs_cp_dt / PG25.rho_kg_m3 * 1e3 * TCS_TRANSIT_S, 1))
        for k, ((r, _, _), cdu, usable) in enumerate(zip(cdu_plan, cdus, cdu_usable,
                                                         strict=True))])
    for (_, chunk, _), tcs in zip(cdu_plan, loops, strict=True):
        cooling_of[chunk] = tcs.pk
    crahs = _create(CoolingElement, [CoolingElement(
        site=site, key=f"crah-r{r}", name=f"CRAH group of row {r}", kind=C.CRAH,
        parent=chiller, capacity_kw=size, units=units, redundancy=n_plus_1,
        design_flow_kg_s=round((units - 1) * size / crah_cp_dt, 3), fan_kw=round(fan, 3))
        for (r, _, _), (units, size), fan in zip(crah_plan, crah_sizes, crah_fan, strict=True)])
    for (_, in_row, _), crah in zip(crah_plan, crahs, strict=True):
        dry = in_row[~liquid[in_row]]
        cooling_of[dry] = crah.pk
        air_of[in_row[liquid[in_row]]] = crah.pk
    return cooling_of, air_of, {"plant_kw": float(plant_kw)}
