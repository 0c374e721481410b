"""The facility's fixed figures: which element may feed which (written once), the rack
classes, and the defaults the builder sizes a plant with. Sources: docs/facility.md.
"""
from __future__ import annotations

from dataclasses import dataclass

from twin.facility.choices import CoolingKindChoices as C
from twin.facility.choices import PowerKindChoices as P
from twin.facility.choices import RackClassChoices

__all__ = [
    "AIR_FAN_KW_PER_KW",
    "CDU_APPROACH_C",
    "CDU_UNIT_KW",
    "CONTINUOUS_LOAD_FACTOR",
    "COOLING_PARENTS",
    "COOLING_ROOTS",
    "CP_WATER_KJ_KG_K",
    "CRAH_UNIT_KW",
    "FACILITY_SUPPLY_C",
    "FEED_UNIT_MAX_KW",
    "LIQUID_RACK_KINDS",
    "MAX_KW",
    "POWER_PARENTS",
    "POWER_RACK_KINDS",
    "RACKS_PER_CDU",
    "RACK_CLASSES",
    "ROWS_PER_UPS",
    "TOWER_APPROACH_C",
    "TOWER_FAN_KW_PER_KW",
    "TOWER_UNIT_KW",
    "RackClass",
    "pump_kw",
]

#: Which kinds may feed each power kind (its parent's kind); a feed is a root.
POWER_PARENTS: dict[str, tuple[str, ...]] = {
    P.FEED: (),
    P.TRANSFORMER: (P.FEED,),
    P.UPS: (P.FEED, P.TRANSFORMER),
    P.PDU: (P.TRANSFORMER, P.UPS),
    P.BUSWAY: (P.TRANSFORMER, P.UPS, P.PDU),
    P.POWER_SHELF: (P.UPS, P.PDU, P.BUSWAY),
}
#: Where heat from each cooling kind goes (its parent's kind); heat rejection is a root
#: (a chiller may also reject to a tower or dry cooler through its condenser loop).
COOLING_PARENTS: dict[str, tuple[str, ...]] = {
    C.COOLING_TOWER: (),
    C.DRY_COOLER: (),
    C.CHILLER: (C.COOLING_TOWER, C.DRY_COOLER),
    C.FACILITY_LOOP: (C.COOLING_TOWER, C.DRY_COOLER, C.CHILLER),
    C.CDU: (C.FACILITY_LOOP,),
    C.TCS_LOOP: (C.CDU,),
    C.CRAH: (C.FACILITY_LOOP, C.CHILLER),
}
#: Cooling kinds that may stand without a parent (they reject heat to outside air).
COOLING_ROOTS = (C.COOLING_TOWER, C.DRY_COOLER, C.CHILLER)
#: What a rack's power link may name, and its liquid (cold-plate) link.
POWER_RACK_KINDS = (P.PDU, P.BUSWAY, P.POWER_SHELF)
LIQUID_RACK_KINDS = (C.CDU, C.TCS_LOOP)

#: The largest rating or capacity the twin takes per unit (10 GW: no single element is
#: near it; a larger figure is a unit mistake, W for kW).
MAX_KW = 10_000_000.0


@dataclass(frozen=True)
class RackClass:
    """A rack class: the draw range it is built for and the share of heat taken by liquid."""

    value: str
    min_kw: float
    max_kw: float
    liquid_fraction: float


#: Air racks 15-40 kW (no liquid); the seeds' 40 kW cold-plate rack, GPUs and CPUs on
#: cold plates (~80 % of the heat; memory, drives, NICs and power supplies by air); an
#: NVL72-class rack at 120-140 kW whose compute trays take ~94 % of their heat by liquid
#: (6.2 of 6.6 kW per tray), switch trays and power shelves less: ~90 % of the rack.
RACK_CLASSES: dict[str, RackClass] = {
    RackClassChoices.AIR: RackClass(RackClassChoices.AIR, 15.0, 40.0, 0.0),
    RackClassChoices.LIQUID: RackClass(RackClassChoices.LIQUID, 15.0, 60.0, 0.80),
    RackClassChoices.NVL72: RackClass(RackClassChoices.NVL72, 100.0, 140.0, 0.90),
}

# --- sizing defaults of the builder --------------------------------------------------------
#: Continuous loads are sized at 125 % (NEC 210.20(A)/215.3): plan at most 80 % of a rating.
CONTINUOUS_LOAD_FACTOR = 0.8
#: Rows (one PDU pair each) per UPS pair and transformer pair.
ROWS_PER_UPS = 8
#: One utility feed element (two incoming lines, 2N) per this much planned load.
FEED_UNIT_MAX_KW = 100_000.0
#: Racks per CDU (a row-based CDU feeds one row's racks through manifolds).
RACKS_PER_CDU = 8
#: Per-unit capacities (design conditions) of a row-based liquid-to-liquid CDU, a
#: chilled-water CRAH and a cooling-tower cell: representative sizes, not one datasheet.
CDU_UNIT_KW = 800.0
CRAH_UNIT_KW = 150.0
TOWER_UNIT_KW = 5_000.0
#: ASHRAE TC 9.9 liquid-cooling class W32: facility water supply up to 32 °C; we plan 30 °C.
FACILITY_SUPPLY_C = 30.0
#: CDU plate heat-exchanger approach (facility supply → TCS supply), and a tower's approach
#: to the wet bulb, at design flow.
CDU_APPROACH_C = 3.0
TOWER_APPROACH_C = 4.0
#: Specific heat of water near 30 °C (kJ/kg·K; IAPWS-95 gives 4.178 at 30 °C, 1 bar).
CP_WATER_KJ_KG_K = 4.18
#: Tower fan power per kW rejected: ASHRAE 90.1 Table 6.8.1-7 requires >= 40.2 gpm/hp for
#: open axial-fan towers at 95/85/75 °F; 1 kW over a 10 °F range is 0.68 gpm → 0.0126 kW.
TOWER_FAN_KW_PER_KW = 0.0126
#: CRAH fan power per kW of air heat: 12 K air rise, 500 Pa, fan efficiency 0.6.
AIR_FAN_KW_PER_KW = 1.0 / (1.006 * 12.0) / 1.2 * 500.0 / 0.6 / 1000.0


def pump_kw(heat_kw: float, delta_t_c: float, head_kpa: float, efficiency: float = 0.6) -> float:
    """Pump shaft power at design flow: ``ṁ = Q / (c_p ΔT)``, ``P = V̇ Δp / η``
    (water at ~1,000 kg/m³): 1 MW over 10 K at 250 kPa and η 0.6 is ~10 kW."""
    flow_m3_s = heat_kw / (CP_WATER_KJ_KG_K * delta_t_c) / 1000.0
    return flow_m3_s * head_kpa / efficiency
