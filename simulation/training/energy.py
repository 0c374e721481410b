"""Card power, energy per step, power caps and per-stage clock planning.

**Power of a card** at utilisation u (share of the step its compute units
are busy) and clock fraction f:

    P(u, f) = idle + (tdp − idle) · u · g(f)

g is the card's dynamic-power curve (``SystemSpec.clock_power``, by default
f·(0.6 + 0.4f)², :func:`simulation.training.system.default_clock_power`):
linear in activity, as measured power of GPUs under load is (Kandiah et al.,
"AccelWattch", MICRO 2021), and CMOS-like in the clock.

**Power by op mix.** The step's time on a card splits by what bounds it, and
each class draws its own power over idle (the dynamic range tdp − idle):

* compute-bound (GEMMs, the attention core, the output layer) t_c: the whole
  range × g(f) — the old formula's busy power;
* memory-bound (norms, activations, residuals, casts, the optimizer, gradient
  compression) t_m: the HBM's own power, e_bit · 8 · (achieved B/s), which the
  core clock does not change (HBM runs on its own clock), plus the SMs, L2 and
  crossbar moving those bytes, a share s_m of the range × g(f);
* exposed communication t_x: a share a_x of the range (links, copy engines, a
  few SMs polling), clock-independent;
* pipeline bubble, kernel gaps, host-bound waits: idle (clock gating stops the
  SMs' dynamic power within cycles when no kernel runs).

    P = idle + [(tdp − idle)·g(f)·t_c + (P_hbm + (tdp − idle)·s_m·g(f))·t_m
                + (tdp − idle)·a_x·t_x] / T

So an all-GEMM step gives the old P(u = t_c/T, f) exactly, and a memory-bound
step draws well under TDP — as measured: LLM decode (memory-bound) draws much
less than the compute-bound prompt phase and is barely slowed by a power cap
(Patel et al., "Splitwise", ISCA 2024, §III power characterisation), and on
H100/H200 the power of a bandwidth benchmark splits between HBM and the SMs
very differently from DGEMM's ("Architectural Trade-offs in the Energy-Efficient
Era: power-capping NVIDIA H100 and H200", arXiv 2604.11391: DGEMM vs
TheBandwidthBenchmark). e_bit = 3.9 pJ/bit is HBM2's access energy (O'Connor et
al., "Fine-Grained DRAM", MICRO 2017); HBM3/3e taken as the same
(**assumption**). s_m = 0.25 and a_x = 0.2 are **assumptions** (no per-class
figure found for these parts): ``SystemSpec.memory_sm_activity`` /
``comm_activity`` override them.

>>> curve = ((0.5, 0.32), (1.0, 1.0))
>>> one = np.array([1.0]); zero = np.array([0.0])
>>> float(op_mix_power(one, zero, zero, np.array([2.0]), one, 700.0, 100.0, curve,
...                    0.0, 0.25, 0.2)[0])   # all GEMM, half busy: 100 + 600·0.5
400.0
>>> float(op_mix_power(zero, one, zero, one, np.array([0.5]), 700.0, 100.0, curve,
...                    100.0, 0.25, 0.2)[0])   # memory-bound at f = 0.5: 100 + 100 + 600·0.25·0.32
248.0

**Energy per step** = T · (cards · P + servers · server_static_w + cards ·
network_w_per_card) · PUE (the seeds: PUE ≤ 1.05; default 1.1).

**DVFS.** A lower clock f stretches compute-bound time as 1/f (peak × f) and
leaves memory-bound and communication time alone (:mod:`.core`, HBM and links on
their own clocks): under a clock or a cap, a GEMM-heavy step slows and saves the
dynamic power g(f) on its GEMMs; a memory-bound step keeps its time and saves
only its SM share s_m·(1 − g(f)).

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

__all__ = ["HBM_PJ_PER_BIT", "card_power", "clock_for_cap", "dynamic_fraction", "hbm_power_w",
           "op_mix_power", "plan_stage_clocks"]

F64 = npt.NDArray[np.float64]
Curve = tuple[tuple[float, float], ...]
HBM_PJ_PER_BIT = 3.9
"""HBM access energy, pJ per bit moved (O'Connor et al., MICRO 2017: HBM2 ≈ 3.9
pJ/bit; HBM3/3e assumed the same — **assumption**)."""


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


def hbm_power_w(bytes_per_s: float, tdp: float, idle: float) -> float:
    """HBM power while streaming at ``bytes_per_s``: e_bit · 8 · B/s (at most the
    dynamic range tdp − idle).

    >>> round(hbm_power_w(3.35e12 * 0.9, 700.0, 70.0), 1)   # H100 at 90 % of 3.35 TB/s
    94.1
    """
    return min(HBM_PJ_PER_BIT * 1e-12 * 8.0 * bytes_per_s, max(tdp - idle, 0.0))


def op_mix_power(compute_s: F64, memory_s: F64, comm_s: F64, step_s: F64, clock: F64,
                 tdp: float, idle: float, curve: Curve, hbm_w: float, memory_sm: float,
                 comm_activity: float) -> F64:
    """Mean card power over a step from its op mix (module docstring), watts.

    ``compute_s`` / ``memory_s`` / ``comm_s``: the step's seconds in each class
    (the rest of ``step_s`` idle); ``hbm_w`` the HBM's streaming power
    (:func:`hbm_power_w`); ``memory_sm`` the memory-bound ops' SM share of the
    dynamic range at full clock; ``comm_activity`` the exposed collectives'.
    """
    g = dynamic_fraction(clock, curve)
    rng = tdp - idle
    mem_w = np.minimum(hbm_w + rng * memory_sm * g, rng)
    t = np.maximum(step_s, 1e-30)
    dyn = (rng * g * compute_s + mem_w * memory_s + rng * comm_activity * comm_s) / t
    out: F64 = idle + np.clip(dyn, 0.0, rng)
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
