"""Card power, energy per step, power caps and per-stage clock planning.

**Power of a card** at utilisation u (share of the step its compute units
are busy) and clock fraction f:

    P(u, f) = idle + (tdp − idle) · u · g(f)

g is the card's dynamic-power curve (``SystemSpec.clock_power``, by default
f·(0.6 + 0.4f)², :func:`simulation.training.system.default_clock_power`):
linear in activity, as measured power of GPUs under load is (Kandiah et al.,
"AccelWattch", MICRO 2021), and CMOS-like in the clock.

**Energy per step** = T · (cards · P + servers · server_static_w + cards ·
network_w_per_card) · PUE (the seeds: PUE ≤ 1.05; default 1.1).

**Power cap** C (per card, as ``nvidia-smi -pl``): the card runs the highest
clock whose busy power fits, g(f) = (C − idle)/(tdp − idle); compute-bound
time grows as 1/f, memory- and network-bound time does not.

>>> curve = ((0.5, 0.32), (1.0, 1.0))
>>> float(clock_for_cap(np.array([292.0]), 700.0, 100.0, curve)[0])   # g = 0.32
0.5
>>> float(clock_for_cap(np.array([800.0]), 700.0, 100.0, curve)[0])
1.0

**Per-stage frequency planning** (Perseus: Chung et al., "Reducing Energy
Bloat in Large Model Training", SOSP 2024; Zeus: You et al., NSDI 2023): a
pipeline runs at the pace of its slowest stage, so a stage with less compute
can lower its clock until it just keeps pace — no slowdown, less energy. With
a slowdown budget ε every stage, the critical one included, may stretch to
(1 + ε) of the critical time. :func:`plan_stage_clocks` gives the clocks.

>>> plan_stage_clocks(np.array([1.0, 0.8]), np.array([0.0, 0.0]), 0.0, 0.5).tolist()
[1.0, 0.8]
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["card_power", "clock_for_cap", "dynamic_fraction", "plan_stage_clocks"]

F64 = npt.NDArray[np.float64]
Curve = tuple[tuple[float, float], ...]


def dynamic_fraction(clock: F64, curve: Curve) -> F64:
    """g(f): the curve interpolated (clamped to its ends)."""
    f = np.array([p[0] for p in curve])
    g = np.array([p[1] for p in curve])
    out: F64 = np.interp(clock, f, g)
    return out


def card_power(util: F64, clock: F64, tdp: float, idle: float, curve: Curve) -> F64:
    """P(u, f) = idle + (tdp − idle)·u·g(f), in watts."""
    out: F64 = idle + (tdp - idle) * np.clip(util, 0.0, 1.0) * dynamic_fraction(clock, curve)
    return out


def clock_for_cap(cap_w: F64, tdp: float, idle: float, curve: Curve) -> F64:
    """Highest clock whose fully busy power stays under ``cap_w`` (the lowest
    clock of the curve if even that exceeds the cap)."""
    f = np.array([p[0] for p in curve])
    g = np.array([p[1] for p in curve])
    need = (np.asarray(cap_w, dtype=np.float64) - idle) / max(tdp - idle, 1e-9)
    out: F64 = np.interp(need, g, f, left=f[0], right=1.0)
    return out


def plan_stage_clocks(compute_s: F64, fixed_s: F64, slowdown: float, min_clock: float) -> F64:
    """Clock per stage so each takes at most (1 + slowdown) × the critical stage.

    ``compute_s`` (scales as 1/f) and ``fixed_s`` (does not) per stage at full
    clock; clocks are clamped to [min_clock, 1].
    """
    total = compute_s + fixed_s
    target = (1 + slowdown) * float(np.max(total))
    room = np.maximum(target - fixed_s, 1e-30)
    out: F64 = np.clip(compute_s / room, min_clock, 1.0)
    return out
