"""The air path of an air-cooled rack: how warm the air reaching its cards is, and the
card power at which a card reaches its thermal limit (the capping controller's ceiling
for air racks, as (T_limit − T_coolant)/R is for liquid ones).

The closed forms (an energy balance on the air stream; Incropera et al.,
*Fundamentals of Heat and Mass Transfer*, 7th ed., §1.3.1, eq. 1.12e: q = ṁ c_p ΔT)::

    ΔT_air   = P_rack / (ṁ_air c_p,air)                  the rack's front-to-back rise
    ṁ_air    = P_design / (c_p,air ΔT_design)             airflow sized for its budget
    T_air    = T_supply + f ΔT_air                        air at the cards
    T_card   = T_air + P_card R_air                       junction
    P_max    = (T_limit − T_air) / R_air                  the thermal ceiling

* **Air** (dry, 300 K, 1 atm; Incropera Table A.4): c_p = 1,007 J/(kg·K),
  ρ = 1.1614 kg/m³. The data-centre rule of thumb "158 CFM per kW at a 20 °F rise"
  (BTU/h = 1.08 × CFM × ΔT °F, standard air 0.075 lb/ft³, 0.24 Btu/(lb·°F); Data Center
  Frontier, "Understanding the Physics of Airflow in High Density Environments", 2022)
  is the same balance (:func:`volumetric_flow_m3_s`, tested).
* **Airflow**: a rack's fans are sized for its budget at the design rise ΔT_design
  (default 12 K, the CRAH design air rise the thermal network already uses,
  ``ThermalParams.air_rise_c``: servers run 10–17 K, "20 °F to 30 °F" measured at
  customer sites as quoted by insideHPC, 2011) — an assumption: the twin has no fan
  curve per server; at the budget the air rises ΔT_design, at half the budget half.
* **Where the card sits** (f): 0.5, the middle of its rack's air rise — an assumption,
  as the liquid path takes the mean of the rack's coolant in and out; a card at the
  exhaust side of its server sees f → 1.
* **R_air** (junction to the air around it) and T_limit come from
  ``ThermalParams`` (0.065 K/W, 85 °C: docs/facility.md).
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["AIR_CP_J_KG_K", "AIR_DENSITY_KG_M3", "CARD_POSITION", "DESIGN_RISE_C",
           "air_ceiling_w", "air_rise_c", "card_air_c", "design_airflow_kg_s",
           "volumetric_flow_m3_s"]

F64 = npt.NDArray[np.float64]

AIR_CP_J_KG_K = 1007.0
"""Specific heat of dry air at 300 K (Incropera 7th ed., Table A.4)."""
AIR_DENSITY_KG_M3 = 1.1614
"""Density of dry air at 300 K and 1 atm (Incropera 7th ed., Table A.4)."""
DESIGN_RISE_C = 12.0
"""The air rise a rack's fans are sized for at its budget (assumption; see above)."""
CARD_POSITION = 0.5
"""Fraction of the rack's air rise upstream of a card (assumption; see above)."""


def air_rise_c(power_w: F64 | float, airflow_kg_s: F64 | float,
               cp: float = AIR_CP_J_KG_K) -> F64:
    """ΔT = P / (ṁ c_p) (K): the air's rise through a rack drawing ``power_w`` (all of
    it heat) with ``airflow_kg_s`` of air; no airflow is an infinite rise.

    >>> float(air_rise_c(12_084.0, 1.0))
    12.0
    """
    p = np.asarray(power_w, dtype=float)
    m = np.asarray(airflow_kg_s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(m > 0, p / (np.where(m > 0, m, 1.0) * cp),
                       np.where(p > 0, np.inf, 0.0))
    return np.asarray(out, dtype=float)


def design_airflow_kg_s(design_w: F64 | float, design_rise_c: float = DESIGN_RISE_C,
                        cp: float = AIR_CP_J_KG_K) -> F64:
    """ṁ = P_design / (c_p ΔT_design) (kg/s): the airflow that carries ``design_w`` away
    at the design rise.

    >>> round(float(design_airflow_kg_s(40e3)), 4)
    3.3102
    """
    if not design_rise_c > 0:
        raise ValueError("design_rise_c: must be > 0")
    return np.asarray(np.asarray(design_w, dtype=float) / (cp * design_rise_c), dtype=float)


def volumetric_flow_m3_s(airflow_kg_s: F64 | float,
                         density: float = AIR_DENSITY_KG_M3) -> F64:
    """V̇ = ṁ / ρ (m³/s)."""
    return np.asarray(np.asarray(airflow_kg_s, dtype=float) / density, dtype=float)


def card_air_c(supply_c: F64 | float, rack_w: F64 | float, airflow_kg_s: F64 | float,
               position: float = CARD_POSITION, cp: float = AIR_CP_J_KG_K) -> F64:
    """T_air = T_supply + f · P / (ṁ c_p) (°C): the air reaching a card ``position`` of
    the way along its rack's rise.

    >>> round(float(card_air_c(25.0, 40e3, design_airflow_kg_s(40e3))), 9)
    31.0
    """
    return np.asarray(np.asarray(supply_c, dtype=float)
                      + position * air_rise_c(rack_w, airflow_kg_s, cp), dtype=float)


def air_ceiling_w(limit_c: float, supply_c: F64 | float, rack_w: F64 | float,
                  airflow_kg_s: F64 | float, r_k_w: float,
                  position: float = CARD_POSITION) -> F64:
    """P_max = (T_limit − T_air) / R_air (W): the card power at which a card in the air
    at :func:`card_air_c` reaches ``limit_c`` (≤ 0: the air alone is too hot).

    >>> round(float(air_ceiling_w(85.0, 25.0, 40e3, design_airflow_kg_s(40e3), 0.065)), 1)
    830.8
    """
    if not r_k_w > 0:
        raise ValueError("r_k_w: must be > 0")
    return np.asarray((limit_c - card_air_c(supply_c, rack_w, airflow_kg_s, position))
                      / r_k_w, dtype=float)
