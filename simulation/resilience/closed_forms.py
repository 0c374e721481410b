"""Closed forms of checkpoint/restart and spare pools: the references the simulation is tested on.

Optimal checkpoint interval, with ``δ`` the time a checkpoint costs, ``M`` the
mean time between interruptions and ``R`` the restart time:

* Young (CACM 17(9), 1974): ``τ = √(2·δ·M)``, the first-order optimum.
* Daly ("A higher order estimate of the optimum checkpoint interval for restart
  dumps", FGCS 22(3), 2006, eq. 37):

      τ = √(2δM)·[1 + ⅓·√(δ/(2M)) + (1/9)·(δ/(2M))] − δ    for δ < 2M,   else τ = M.

* Daly's expected wall time (eq. 20) to do ``T_s`` of work in segments of ``τ``
  with exponential failures (failures may strike during checkpoints and restarts):

      T_w = M · e^{R/M} · (e^{(τ+δ)/M} − 1) · T_s / τ

  so the effective training time ratio is ``ETTR = T_s / T_w``.

Spares. Servers fail at rate ``Λ`` (per hour, whole job) and each takes ``r``
hours to repair; servers in repair form an M/G/∞ queue, so their number is
Poisson with mean ``a = Λ·r`` whatever the repair-time distribution (Palm's
theorem; Kleinrock, Queueing Systems Vol. I, 1975, the M/G/∞ queue). A job of ``N`` cards with ``s``
spare servers runs at full size while at most ``s`` are in repair:

      A(s) = P(Poisson(a) ≤ s),   spares for a target p: the least s with A(s) ≥ p.

Example:
    >>> round(young_interval_s(60, 3 * 3600))
    1138
    >>> round(daly_interval_s(60, 3 * 3600))
    1099
    >>> spares_for(0.999, 2.0)
    8
"""
from __future__ import annotations

import math

from scipy import stats

__all__ = [
    "daly_ettr",
    "daly_interval_s",
    "first_order_ettr",
    "full_size_availability",
    "spares_for",
    "young_interval_s",
]


def young_interval_s(delta_s: float, mtbi_s: float) -> float:
    """Young (1974): ``τ = √(2·δ·M)``."""
    return math.sqrt(2.0 * delta_s * mtbi_s)


def daly_interval_s(delta_s: float, mtbi_s: float) -> float:
    """Daly (2006), eq. 37: the higher-order optimum; ``M`` when ``δ ≥ 2M``."""
    if delta_s >= 2.0 * mtbi_s:
        return mtbi_s
    x = delta_s / (2.0 * mtbi_s)
    return math.sqrt(2.0 * delta_s * mtbi_s) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - delta_s


def daly_ettr(tau_s: float, delta_s: float, restart_s: float, mtbi_s: float) -> float:
    """``T_s / T_w`` from Daly (2006), eq. 20: ``τ / (M e^{R/M} (e^{(τ+δ)/M} − 1))``."""
    m = mtbi_s
    return tau_s / (m * math.exp(restart_s / m) * math.expm1((tau_s + delta_s) / m))


def first_order_ettr(tau_s: float, delta_s: float, restart_s: float, mtbi_s: float) -> float:
    """First-order waste (Young): ``1 − δ/(τ+δ) − (τ/2 + R)/M`` (floored at 0)."""
    return max(0.0, 1.0 - delta_s / (tau_s + delta_s) - (tau_s / 2.0 + restart_s) / mtbi_s)


def full_size_availability(spares: int, mean_in_repair: float) -> float:
    """``P(Poisson(a) ≤ s)``: share of time at most ``s`` servers are in repair (M/G/∞)."""
    return float(stats.poisson.cdf(spares, mean_in_repair))


def spares_for(target: float, mean_in_repair: float) -> int:
    """The least ``s`` with ``P(Poisson(a) ≤ s) ≥ target`` (the Poisson quantile)."""
    return int(stats.poisson.ppf(target, mean_in_repair))
