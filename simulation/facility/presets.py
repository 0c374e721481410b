"""Synthetic plants for tests, benchmarks and what-ifs: rows of racks on CDUs, the
CDUs on a facility loop and cooling towers, racks on PDUs under UPS and feeds.

Sizing follows the seeds (40 kW liquid racks, PUE ≤ 1.05) and common practice:
CDU flow for a 10 K coolant rise at its rated load (1.5 L/min per kW for PG25, OCP
guidance); CDU approach 5 K (CoolIT's rated approach temperature difference); towers
at 4 K approach with fans of 0.8 % of the IT load at full speed, CDU pumps 0.6 % of
their capacity, the facility pump 0.4 % of IT (assumptions of the preset, in the
range of the plant shares ExaDigiT reports for Frontier; docs/facility.md).
This module is arrays, not a preset of the twin's database (``twin/facility`` builds
those); the benchmark builds the million-card plant with it.

>>> plant = demo_plant(racks=107)
>>> (len(plant.racks), sum(c.kind == "cdu" for c in plant.cooling))
(107, 4)
"""
from __future__ import annotations

import math

import numpy as np

from simulation.facility.fluids import PG25
from simulation.facility.plant import (
    CoolingElement,
    EfficiencyCurve,
    Plant,
    PowerElement,
    RackSet,
    Site,
)

__all__ = ["BUSWAY_CURVE", "ECO_UPS_CURVE", "UPS_CURVE", "demo_plant", "efficient_plant"]

UPS_CURVE = EfficiencyCurve((0.1, 0.25, 0.5, 0.75, 1.0), (0.90, 0.95, 0.97, 0.975, 0.97))
"""A double-conversion UPS in its efficient mode, the shape of Schneider Electric
White Paper 108's curves (worst at light load, best near three quarters)."""

TRANSFORMER_CURVE = EfficiencyCurve((0.1, 0.5, 1.0), (0.985, 0.993, 0.99))
"""A medium-voltage dry-type transformer (DOE 10 CFR 431 efficiency levels ≈ 99 %)."""


def demo_plant(racks: int = 107, *, rack_kw: float = 40.0, racks_per_cdu: int = 28,
               racks_per_pdu: int = 8, liquid_fraction: float = 0.9,
               wet_bulb_c: float = 24.0, dry_bulb_c: float = 35.0,
               cdu_kw: float | None = None, towers: int = 2) -> Plant:
    """A plant of ``racks`` liquid racks of ``rack_kw`` (W budget) in rows of
    ``racks_per_cdu`` per CDU (N+1 pumps), one facility loop, ``towers`` N+1 tower
    cells; racks on PDUs (2N feeds → transformer → UPS → PDUs)."""
    n_cdu = math.ceil(racks / racks_per_cdu)
    n_pdu = math.ceil(racks / racks_per_pdu)
    it_kw = racks * rack_kw
    cdu_cap = cdu_kw or racks_per_cdu * rack_kw * 1.1
    flow = PG25.kg_s_from_l_min(1.5 * cdu_cap)
    cooling: list[CoolingElement] = [
        CoolingElement("tower", "cooling_tower", it_kw * 1.2 / max(towers - 1, 1),
                       units=towers, redundancy="N+1" if towers > 1 else "N",
                       approach_c=4.0, fan_kw=it_kw * 0.008, volume_l=it_kw * 0.5),
        CoolingElement("fws", "facility_loop", it_kw * 1.2, parent="tower",
                       design_flow_kg_s=flow * n_cdu, pump_kw=it_kw * 0.004, units=2,
                       redundancy="N+1", volume_l=it_kw * 2.0),
    ]
    for k in range(n_cdu):
        cooling.append(CoolingElement(
            f"cdu-{k}", "cdu", cdu_cap, parent="fws", units=2, redundancy="N+1",
            design_flow_kg_s=flow, approach_c=5.0, pump_kw=cdu_cap * 0.006,
            volume_l=cdu_cap * 0.6))
    cooling.append(CoolingElement("crah-0", "crah", max(it_kw * (1 - liquid_fraction) * 1.3, 1.0),
                                  parent="fws", design_flow_kg_s=max(flow, 1.0),
                                  fan_kw=max(it_kw * (1 - liquid_fraction) * 0.03, 0.1),
                                  units=2, redundancy="N+1"))
    feed_kw = it_kw * 1.35
    power: list[PowerElement] = [
        PowerElement("feed", "feed", feed_kw, units=2, redundancy="2N"),
        PowerElement("tx", "transformer", it_kw * 1.2, parent="feed",
                     efficiency=TRANSFORMER_CURVE),
        PowerElement("ups", "ups", it_kw * 1.15 / 2, parent="tx", units=3,
                     redundancy="N+1", efficiency=UPS_CURVE),
    ]
    for k in range(n_pdu):
        power.append(PowerElement(f"pdu-{k}", "pdu", racks_per_pdu * rack_kw * 1.05,
                                  parent="ups",
                                  efficiency=EfficiencyCurve((0.1, 1.0), (0.985, 0.99))))
    idx = np.arange(racks, dtype=np.int64)
    rack_set = RackSet(
        ids=idx + 1, power_parent=3 + idx // racks_per_pdu,
        cooling_parent=2 + idx // racks_per_cdu,
        budget_w=np.full(racks, rack_kw * 1e3), liquid_fraction=np.full(racks, liquid_fraction))
    return Plant(Site("demo", dry_bulb_c=dry_bulb_c, wet_bulb_c=wet_bulb_c),
                 tuple(power), tuple(cooling), rack_set)


ECO_UPS_CURVE = EfficiencyCurve((0.1, 0.25, 0.5, 0.75, 1.0), (0.975, 0.985, 0.99, 0.99, 0.99))
"""A UPS in eco-mode (the inverter on standby, the load on the filtered bypass): "up
to 99 %" from ≈ 25 % load (Schneider Electric Galaxy VX datasheet, ECOnversion mode;
Eaton 9395 ESS: 99 %); the light-load end (97.5 % at 10 %) is an **assumption** of the
preset (the datasheets give no figure below 25 %)."""

BUSWAY_CURVE = EfficiencyCurve((0.1, 1.0), (0.999, 0.996))
"""Overhead busway instead of a PDU: I²R only, ≈ 0.4 % at full load over a row's run
(**assumption** of the preset, the order of the copper losses Schneider Electric's
Canalis/I-Line catalogues tabulate per metre at rated current; no transformer)."""


def efficient_plant(racks: int = 107, *, rack_kw: float = 40.0, racks_per_cdu: int = 28,
                    racks_per_row: int = 8, liquid_fraction: float = 0.9,
                    wet_bulb_c: float = 18.0, dry_bulb_c: float = 25.0,
                    facility_supply_c: float = 32.0) -> Plant:
    """The seeds' "40 kW liquid racks at PUE ≤ 1.05": the demo plant's racks on a power
    chain and heat rejection chosen for efficiency. Each choice is an assumption of
    this preset, labelled with its source (docs/facility.md, "Which preset reaches
    PUE ≤ 1.05"):

    * power: 2N feeds → MV transformer (DOE 10 CFR 431, ≈ 99 %) → UPS in eco-mode
      (:data:`ECO_UPS_CURVE`, ≈ 99 %) → a busway per row (:data:`BUSWAY_CURVE`);
    * heat rejection: dry coolers, no chillers and no evaporation, at ASHRAE TC 9.9
      class W32 (facility supply 32 °C design; it floats up towards W40 on a hot
      day): approach 5 K to the dry bulb, fans 0.5 % of the heat at full speed
      (EC fans; **assumption**, cf. the 0.8 % of the demo's towers);
    * CDUs with a 3 K approach (CoolIT/Vertiv row CDUs rate 3–5 K), pumps 0.4 % of
      their capacity, the facility pump 0.3 % of IT (**assumptions**, the order of
      ExaDigiT's Frontier shares);
    * the racks' air share (``1 − liquid_fraction``) to the CDU water through rear-door
      exchangers (no CRAH fans: the plant has no CRAH);
    * a temperate site's design day, 25 °C dry bulb (**assumption**; a hot day of
      35 °C lets the supply float to 40 °C, the W40 edge).

    >>> from simulation.facility.model import compile_model
    >>> plant = efficient_plant(racks=56)
    >>> round(compile_model(plant).settle(plant.racks.budget_w).pue, 3) <= 1.05
    True
    """
    n_cdu = math.ceil(racks / racks_per_cdu)
    n_row = math.ceil(racks / racks_per_row)
    it_kw = racks * rack_kw
    cdu_cap = racks_per_cdu * rack_kw * 1.1
    flow = PG25.kg_s_from_l_min(1.5 * cdu_cap)
    cooling: list[CoolingElement] = [
        CoolingElement("dry", "dry_cooler", it_kw * 1.2 / 3, units=4, redundancy="N+1",
                       approach_c=5.0, fan_kw=it_kw * 0.005, volume_l=it_kw * 0.5),
        CoolingElement("fws", "facility_loop", it_kw * 1.2, parent="dry",
                       design_flow_kg_s=flow * n_cdu, pump_kw=it_kw * 0.003, units=2,
                       redundancy="N+1", supply_setpoint_c=facility_supply_c,
                       volume_l=it_kw * 2.0),
    ]
    for k in range(n_cdu):
        cooling.append(CoolingElement(
            f"cdu-{k}", "cdu", cdu_cap, parent="fws", units=2, redundancy="N+1",
            design_flow_kg_s=flow, approach_c=3.0, pump_kw=cdu_cap * 0.004,
            volume_l=cdu_cap * 0.6))
    power: list[PowerElement] = [
        PowerElement("feed", "feed", it_kw * 1.35, units=2, redundancy="2N"),
        PowerElement("tx", "transformer", it_kw * 1.2, parent="feed",
                     efficiency=TRANSFORMER_CURVE),
        PowerElement("ups", "ups", it_kw * 1.15 / 2, parent="tx", units=3,
                     redundancy="N+1", efficiency=ECO_UPS_CURVE),
    ]
    for k in range(n_row):
        power.append(PowerElement(f"busway-{k}", "busway", racks_per_row * rack_kw * 1.05,
                                  parent="ups", efficiency=BUSWAY_CURVE))
    idx = np.arange(racks, dtype=np.int64)
    rack_set = RackSet(
        ids=idx + 1, power_parent=3 + idx // racks_per_row,
        cooling_parent=2 + idx // racks_per_cdu,
        budget_w=np.full(racks, rack_kw * 1e3), liquid_fraction=np.full(racks, liquid_fraction))
    return Plant(Site("efficient", dry_bulb_c=dry_bulb_c, wet_bulb_c=wet_bulb_c),
                 tuple(power), tuple(cooling), rack_set)
