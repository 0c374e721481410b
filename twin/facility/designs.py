"""What the builder builds a plant of: a facility design is data (which UPS mode, what
feeds the racks, how heat leaves the site, the loops' temperatures and pump figures),
read by ``twin.facility.builder``. Two designs:

* ``standard`` — what the builder always built (and still builds by default): a
  double-conversion UPS, a PDU pair per row, cooling towers at ASHRAE 90.1's fan limit,
  facility water at 30 °C, the liquid racks' air share on CRAHs and a chiller. The
  built seed cluster computes PUE ≈ 1.12 at its nameplate draw.
* ``efficient`` — the seeds' "40 kW liquid racks at PUE ≤ 1.05" as a built plant: a
  UPS in eco-mode, busways instead of PDUs, warm-water direct liquid cooling at
  ASHRAE class W32 rejected by dry coolers (no evaporation, no chiller for the liquid
  loop; the supply floats up towards W40 on a hot day), the liquid racks' air share
  through rear-door exchangers on the CDU water (no CRAH fans) where the cluster has
  no air rack, pumps of a premium efficiency. Each figure and its source:
  docs/facility.md, "The efficient design".

A preset names its design (``twin.hardware.presets.Preset.facility_design``: the
seed supernode is built efficient); ``manage.py build_facility --design`` and
``build_facility(design=…)`` choose one for any cluster.
"""
from __future__ import annotations

from dataclasses import dataclass

from twin.facility.choices import CoolingKindChoices as C
from twin.facility.choices import PowerKindChoices as P
from twin.facility.constants import (
    CDU_APPROACH_C,
    FACILITY_SUPPLY_C,
    TOWER_APPROACH_C,
    TOWER_FAN_KW_PER_KW,
)

__all__ = ["DEFAULT_DESIGN", "DESIGNS", "EFFICIENT", "STANDARD", "FacilityDesign", "get_design"]


@dataclass(frozen=True)
class FacilityDesign:
    """How the builder sizes a plant (module doc). ``ups_losses`` and the rack feed's
    losses are keys of ``twin.facility.sizing.LOSSES``."""

    name: str
    label: str
    ups_losses: str
    rack_power_kind: str
    heat_rejection: str
    rejection_approach_c: float
    rejection_fan_kw_per_kw: float
    facility_supply_c: float
    cdu_approach_c: float
    pump_efficiency: float
    rear_doors: bool


STANDARD = FacilityDesign(
    name="standard", label="Standard (double-conversion UPS, PDUs, cooling towers, CRAHs)",
    ups_losses="ups", rack_power_kind=P.PDU, heat_rejection=C.COOLING_TOWER,
    rejection_approach_c=TOWER_APPROACH_C, rejection_fan_kw_per_kw=TOWER_FAN_KW_PER_KW,
    facility_supply_c=FACILITY_SUPPLY_C, cdu_approach_c=CDU_APPROACH_C,
    pump_efficiency=0.6, rear_doors=False)

EFFICIENT = FacilityDesign(
    name="efficient",
    label="Efficient (eco-mode UPS, busways, W32 warm water on dry coolers, rear doors)",
    ups_losses="ups_eco", rack_power_kind=P.BUSWAY, heat_rejection=C.DRY_COOLER,
    # A dry cooler's approach to the dry bulb at design and its EC fans' draw per kW
    # rejected at full speed: 5 K and 0.5 % (**assumptions**, the engine's
    # simulation.facility.presets.efficient_plant; docs/facility.md).
    rejection_approach_c=5.0, rejection_fan_kw_per_kw=0.005,
    # ASHRAE TC 9.9 (2021) liquid-cooling class W32: facility supply up to 32 °C.
    facility_supply_c=32.0, cdu_approach_c=CDU_APPROACH_C,
    # A premium pump set: ~0.8 hydraulic × 0.95 IE4 motor (**assumption**).
    pump_efficiency=0.75, rear_doors=True)

DESIGNS: dict[str, FacilityDesign] = {d.name: d for d in (STANDARD, EFFICIENT)}
DEFAULT_DESIGN = STANDARD.name


def get_design(name: str) -> FacilityDesign:
    """The design called ``name``; ``KeyError`` naming the known ones otherwise."""
    try:
        return DESIGNS[name]
    except KeyError:
        raise KeyError(f"unknown facility design {name!r}; known: {', '.join(DESIGNS)}") \
            from None
