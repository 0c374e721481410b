"""Coolant properties as cited constants (no property library at run time).

The engine needs two numbers per coolant: the specific heat c_p (J/(kg·K)), which
turns a heat flow into a temperature rise (ΔT = Q / (ṁ c_p)), and the density ρ
(kg/m³), which turns a volume into a mass (a loop's heat capacity, its transit time)
and a vendor's litres per minute into kg/s. Over the range a liquid-cooled plant runs
(15-60 °C) both vary by under 1 % for water and under 2 % for PG25, so a constant at
a representative temperature is within the model's other uncertainties; CoolProp
(which would give them as functions of temperature) is therefore not a dependency.

Sources:
    - Water at 30 °C: c_p = 4178 J/(kg·K), ρ = 995.7 kg/m³ (IAPWS-95 as tabulated in
      Incropera et al., *Fundamentals of Heat and Mass Transfer*, 7th ed., Table A.6).
    - PG25 (25 % propylene glycol by mass, the usual technology-cooling-loop fluid,
      OCP and ASHRAE TC 9.9 "Liquid Cooling Guidelines"): c_p = 3940 J/(kg·K),
      ρ = 1017 kg/m³ at 40 °C (Dow, *DOWFROST Engineering and Operating Guide*,
      properties of 25 wt % solutions; ASHRAE Handbook — Fundamentals 2017, ch. 31).

>>> round(WATER.kg_s_from_l_min(60.0), 4)
0.9957
>>> round(rise_c(40_000.0, PG25.kg_s_from_l_min(60.0), PG25.cp_j_kg_k), 2)
9.98
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PG25", "WATER", "Fluid", "rise_c"]


@dataclass(frozen=True)
class Fluid:
    """A coolant: specific heat and density at a representative temperature."""

    name: str
    cp_j_kg_k: float
    rho_kg_m3: float

    def kg_s_from_l_min(self, l_min: float) -> float:
        """Mass flow (kg/s) of a volume flow in litres per minute."""
        return l_min / 60_000.0 * self.rho_kg_m3

    def heat_capacity_j_k(self, litres: float) -> float:
        """Heat capacity (J/K) of ``litres`` of this fluid: ρ V c_p."""
        return litres / 1000.0 * self.rho_kg_m3 * self.cp_j_kg_k


WATER = Fluid("water", 4178.0, 995.7)
"""Facility water (IAPWS-95 at 30 °C)."""

PG25 = Fluid("PG25", 3940.0, 1017.0)
"""25 wt % propylene glycol, the technology-cooling-loop fluid (Dow DOWFROST, 40 °C)."""


def rise_c(heat_w: float, flow_kg_s: float, cp_j_kg_k: float) -> float:
    """Coolant temperature rise across a heat load: ΔT = Q / (ṁ c_p) (first law,
    steady flow, no phase change)."""
    return heat_w / (flow_kg_s * cp_j_kg_k)
