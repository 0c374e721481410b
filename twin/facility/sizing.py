"""Sizing a plant from racks' draw: efficiency curves from loss models, and how many
units of what size an element needs for a load (the builder's arithmetic, no Django).

Curves come from the standard loss models, not from one table: a transformer loses
a fixed no-load (core) part and a load (copper) part growing with the square of the
load; a UPS loses ``a + b·x + c·x²`` of its rating at load fraction ``x`` (the
quadratic of Ton & Fortenbury, LBNL/EPRI 2005, *High Performance Buildings: Data
Centers — Uninterruptible Power Supplies*). Coefficients and sources: docs/facility.md.
"""
from __future__ import annotations

import math

from twin.facility.constants import CONTINUOUS_LOAD_FACTOR

__all__ = ["CURVE_POINTS", "LOSSES", "curve", "efficiency_at", "round_up", "units_for"]

#: Load fractions an efficiency curve is tabulated at.
CURVE_POINTS = (0.1, 0.25, 0.5, 0.75, 1.0)

#: Losses as fractions of the rating: (fixed a, linear b, square c) at load fraction x.
#: Transformer: a medium-voltage dry-type with ~0.2 % no-load and ~0.8 % full-load
#: copper loss (≈99.2 % at half load, the order the US DOE 2016 standard requires);
#: UPS: a modern transformerless double-conversion unit (≈95 % at 25 % load, ≈97 %
#: at full load); PDU: a 415 V distribution PDU without transformer (≈99.5 %).
#: The efficient design's parts (``twin.facility.designs``): a UPS in eco-mode, the load
#: on the filtered bypass and the inverter on standby — a fixed 0.2 % (inverter and
#: controls kept ready) and a small load part: ≈ 98.7 % at 25 %, 99.0 % from half load,
#: the "up to 99 %" of the Schneider Electric Galaxy VX (ECOnversion) and Eaton 9395
#: (ESS) datasheets (≈ the engine's ``simulation.facility.presets.ECO_UPS_CURVE``); a
#: busway: copper (I²R) only, 0.4 % at its rated current over a row's run (an
#: **assumption**, the order of the per-metre losses Schneider Electric's Canalis
#: catalogue tabulates; = the engine's ``BUSWAY_CURVE``).
LOSSES: dict[str, tuple[float, float, float]] = {
    "transformer": (0.002, 0.0, 0.008),
    "ups": (0.010, 0.010, 0.010),
    "pdu": (0.001, 0.0, 0.004),
    "ups_eco": (0.002, 0.004, 0.004),
    "busway": (0.0, 0.0, 0.004),
}


def efficiency_at(kind: str, x: float) -> float:
    """``x / (x + a + b·x + c·x²)``: output over input at load fraction ``x`` (> 0);
    ``kind`` is a key of :data:`LOSSES` (a power kind, or ``ups_eco``)."""
    a, b, c = LOSSES.get(kind, (0.0, 0.0, 0.0))
    return x / (x + a + b * x + c * x * x)


def curve(kind: str) -> list[list[float]]:
    """The efficiency curve of ``kind`` (a key of :data:`LOSSES`) as
    ``[[load fraction, efficiency], …]`` ([] lossless)."""
    if kind not in LOSSES:
        return []
    return [[x, round(efficiency_at(kind, x), 5)] for x in CURVE_POINTS]


def round_up(value: float, step: float) -> float:
    """``value`` rounded up to a whole number of ``step`` (at least one step)."""
    return max(step, math.ceil(value / step - 1e-9) * step)


def units_for(load_kw: float, unit_max_kw: float, step: float, spare: int = 1
              ) -> tuple[int, float]:
    """``(units, kW per unit)`` to carry ``load_kw`` at ≤ 80 % of the active units
    (continuous-load rule), units no bigger than ``unit_max_kw``, plus ``spare`` units."""
    planned = max(load_kw, 0.0) / CONTINUOUS_LOAD_FACTOR
    active = max(1, math.ceil(planned / unit_max_kw - 1e-9))
    return active + spare, round_up(planned / active, step)
