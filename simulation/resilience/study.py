"""A resilience study: failures, checkpoints and recovery of one job, simulated and in closed form.

:func:`simulate_resilience` derives the job's failure rates (:mod:`.failures`,
calibrated on Llama 3's Table 5 and scaled by component counts), its checkpoint
costs (:mod:`.checkpoint`), then simulates the window (:mod:`.events`) at the
requested interval and sweeps the interval around Young's optimum, next to the
closed forms (:mod:`.closed_forms`).

Definitions (as in Kokolis et al., "Revisiting Reliability in Large-Scale ML
Research Clusters", HPCA'25, and ByteDance's ByteRobust, 2025):

* **ETTR** (effective training time ratio) — useful training time over wall
  time: progress kept at the end of the window / window. Time lost to
  checkpoint stalls, detection, recovery and recomputed work all count against it.
* **lost work** — progress rolled back by failures (to be recomputed), in hours
  of the job (× cards for card-hours).
* **time to recovery** — from a failure to the job training again.
* **availability** — of the service: the share of the window the job trains;
  of a job of N cards: the share of time no server is missing (more in repair
  than spares), simulated and from the M/G/∞ closed form.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .checkpoint import CheckpointTimes, checkpoint_size, checkpoint_times, claim_check
from .closed_forms import (
    daly_ettr,
    daly_interval_s,
    full_size_availability,
    spares_for,
    young_interval_s,
)
from .events import ClassPlan, JobPlan, RunStats, draw_failures, effective_block_s, run_job
from .failures import DETECTION_S, calibrate, component_counts
from .params import ResilienceParams, resilience_from_params

__all__ = ["ResilienceResult", "TIMELINE_LIMIT", "ettr_curve", "job_plan", "simulate_resilience",
           "sweep_intervals"]

TIMELINE_LIMIT = 2000
SPARE_TARGETS = (0.99, 0.999, 0.9999)


def _times(p: ResilienceParams) -> CheckpointTimes:
    size = checkpoint_size(p.params, tp=p.tp, pp=p.pp, dp=p.data_parallel, zero=p.zero)
    return checkpoint_times(size, cards=p.cards, cards_per_server=p.cards_per_server,
                            tiers=p.checkpoint.tiers, mode=p.checkpoint.mode,
                            replicas=p.checkpoint.replicas,
                            network_gbps_per_server=p.network_gbps_per_server)


def job_plan(p: ResilienceParams) -> tuple[JobPlan, CheckpointTimes, dict[str, int]]:
    """The per-class costs of a failure for these inputs (see :class:`.events.ClassPlan`).

    Restore: a failure that loses a server (card, HBM, NIC, host) rolls back to the
    newest checkpoint held by a peer's memory (replicas ≥ 2: restored at network
    speed) or else by the first tier that survives a host loss (every server reads
    back from it); any other failure (software, network, hang) restores from the
    first tier, whose copy lives outside the training process (as Gemini's and
    CheckFreq's agents keep it)."""
    counts = component_counts(p.cards, cards_per_server=p.cards_per_server,
                              hbm_stacks_per_card=p.hbm_stacks_per_card)
    times = _times(p)
    tiers = p.checkpoint.tiers
    first = tiers[0].name
    detection = {**DETECTION_S, **p.detection_s}
    classes: dict[str, ClassPlan] = {}
    for name, fc in calibrate().items():
        fc = replace(fc, rate_per_unit_h=fc.rate_per_unit_h * p.failure_mix.get(name, 1.0),
                     repair_h=p.repair_h.get(name, fc.repair_h))
        if fc.needs_spare:
            if p.checkpoint.replicas > 1:
                restore = max(times.peer_restore_s, times.restore_s[first])
                safe = times.reach_s[first] + times.replication_s
            else:
                tier = next(t for t in tiers if t.survives_host_loss)
                restore, safe = times.restore_s[tier.name], times.reach_s[tier.name]
        else:
            restore, safe = times.restore_s[first], times.reach_s[first]
        if p.checkpoint.mode == "sync":
            safe = max(safe, times.blocking_s)
        classes[name] = ClassPlan(fc, fc.rate_per_unit_h * counts[fc.unit] / 3600.0,
                                  detection[fc.detection], fc.repair_h * 3600.0, restore, safe)
    dp = p.data_parallel
    r = p.recovery
    plan = JobPlan(p.days * 86400.0, times.blocking_s, times.durable_s, classes, r.restart_s,
                   r.swap_s, r.reconfigure_s, r.step_s, r.hot_spare, r.elastic, p.spares,
                   1.0 / dp, max(0, dp - 1))
    return plan, times, counts


def _mean_recovery_s(plan: JobPlan) -> float:
    """Rate-weighted detection + action + restore (the ``R`` of Daly's formula)."""
    total = sum(c.rate_per_s for c in plan.classes.values())
    if total <= 0:
        return 0.0
    cold = not plan.hot_spare
    acc = 0.0
    for c in plan.classes.values():
        action = plan.swap_s if (c.fc.needs_spare and not cold) else plan.restart_s
        acc += c.rate_per_s * (c.detect_s + action + c.restore_s)
    return acc / total


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50": 0.0, "p90": 0.0, "p99": 0.0, "max": 0.0}
    a = np.asarray(values)
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return {"p50": float(p50), "p90": float(p90), "p99": float(p99), "max": float(a.max())}


@dataclass(frozen=True)
class ResilienceResult:
    """Everything a study reports; :meth:`to_dict` is the API's JSON."""

    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return self.data


def _sweep_grid(center_s: float, user_s: float, points: int, wall_s: float) -> list[float]:
    grid = center_s * np.logspace(-2, 2, points, base=2.0)
    values = {float(round(v, 3)) for v in grid if 1.0 <= v <= wall_s}
    values.add(float(user_s))
    return sorted(values)


@dataclass(frozen=True)
class _Setup:
    """What the study and each point of its ETTR curve share: the plan, the
    failure histories (drawn from ``seed`` in a fixed order, so every process
    that builds them draws the same) and the interval grid."""

    p: ResilienceParams
    plan: JobPlan
    times: CheckpointTimes
    counts: dict[str, int]
    mtbi_s: float
    recovery_s: float
    young: float
    daly: float
    tau: float
    histories: list[Any]
    grid: list[float]


def _setup(params: ResilienceParams | Mapping[str, Any]) -> _Setup:
    p = params if isinstance(params, ResilienceParams) else resilience_from_params(params)
    plan, times, counts = job_plan(p)
    rate_per_s = sum(c.rate_per_s for c in plan.classes.values())
    mtbi_s = 1.0 / rate_per_s if rate_per_s > 0 else math.inf
    delta = times.blocking_s
    young = young_interval_s(delta, mtbi_s) if math.isfinite(mtbi_s) else plan.wall_s
    daly = daly_interval_s(delta, mtbi_s) if math.isfinite(mtbi_s) else plan.wall_s
    tau = p.checkpoint.interval_min * 60.0
    rng = np.random.default_rng(p.seed)
    histories = [draw_failures(plan.classes, plan.wall_s, rng) for _ in range(p.sweep_runs)]
    grid = _sweep_grid(max(young, delta, 1.0), tau, p.sweep_points, plan.wall_s)
    return _Setup(p, plan, times, counts, mtbi_s, _mean_recovery_s(plan), young, daly, tau,
                  histories, grid)


def _curve_row(s: _Setup, interval: float) -> dict[str, Any]:
    """One point of the ETTR curve: the mean (min, max) over the histories, and Daly's."""
    plan, delta = s.plan, s.times.blocking_s
    runs = [run_job(plan, interval, h).work_s / plan.wall_s for h in s.histories]
    return {
        "interval_min": interval / 60.0,
        "ettr": float(np.mean(runs)),
        "ettr_min": float(np.min(runs)),
        "ettr_max": float(np.max(runs)),
        "ettr_daly": (daly_ettr(interval, effective_block_s(plan, interval), s.recovery_s,
                                s.mtbi_s)
                      if math.isfinite(s.mtbi_s) else interval / (interval + delta)),
    }


def sweep_intervals(params: ResilienceParams | Mapping[str, Any]) -> int:
    """How many intervals the ETTR curve has (the unit :func:`ettr_curve` splits by)."""
    return len(_setup(params).grid)


def ettr_curve(params: ResilienceParams | Mapping[str, Any], points: list[int], *,
               progress: Any = None) -> list[dict[str, Any]]:
    """The rows of the ETTR curve at positions ``points`` of the interval grid —
    equal to those :func:`simulate_resilience` computes (the same seed draws the
    same histories), so a sweep can be computed in parts and handed back as
    ``curve``."""
    s = _setup(params)
    rows = []
    for done, i in enumerate(points, 1):
        rows.append(_curve_row(s, s.grid[i]))
        if progress:
            progress(done / len(points))
    return rows


def simulate_resilience(params: ResilienceParams | Mapping[str, Any], *,
                        progress: Any = None,
                        curve: list[dict[str, Any]] | None = None) -> ResilienceResult:
    """Run a study (see the module docstring). ``params`` may be the raw JSON dict;
    ``curve``: the ETTR curve already computed (every point, in order, by
    :func:`ettr_curve`), so only the study at the requested interval runs here."""
    s = _setup(params)
    p, plan, times, counts = s.p, s.plan, s.times, s.counts
    mtbi_s, recovery_s, young, daly, tau = s.mtbi_s, s.recovery_s, s.young, s.daly, s.tau
    delta = times.blocking_s
    main: RunStats = run_job(plan, tau, s.histories[0], timeline=True)
    if progress:
        progress(0.2)
    if curve is None:
        curve = []
        for i, interval in enumerate(s.grid):
            curve.append(_curve_row(s, interval))
            if progress:
                progress(0.2 + 0.75 * (i + 1) / len(s.grid))
    elif len(curve) != len(s.grid):
        raise ValueError(f"the curve has {len(curve)} points, the grid {len(s.grid)}")
    best = max(curve, key=lambda row: row["ettr"])

    spare_classes = [c for c in plan.classes.values() if c.fc.needs_spare]
    spare_rate_h = sum(c.rate_per_s for c in spare_classes) * 3600.0
    mean_repair_h = (sum(c.rate_per_s * c.repair_s for c in spare_classes) / 3600.0
                     / (spare_rate_h / 3600.0)) if spare_rate_h > 0 else 0.0
    in_repair = spare_rate_h * mean_repair_h
    wall_h = plan.wall_s / 3600.0
    timeline = [{**row, "t_h": row["t_s"] / 3600.0} for row in main.timeline[:TIMELINE_LIMIT]]
    expected = {name: c.rate_per_s * plan.wall_s for name, c in plan.classes.items()}
    data: dict[str, Any] = {
        "method": "discrete-event simulation (SimPy) of per-class Poisson failures calibrated "
                  "on Llama 3 Table 5, checkpoint cycles and recovery; closed forms of Young "
                  "(1974) and Daly (2006) alongside",
        "cards": p.cards,
        "servers": counts["servers"],
        "days": p.days,
        "components": counts,
        "interruptions": {
            "total": sum(main.by_class.values()),
            "by_class": dict(sorted(main.by_class.items(), key=lambda kv: -kv[1])),
            "by_cause": dict(sorted(main.by_cause.items(), key=lambda kv: -kv[1])),
            "by_action": main.by_action,
            "expected_by_class": expected,
            "expected_total": sum(expected.values()),
        },
        "mtbi_h": mtbi_s / 3600.0,
        "ettr": main.work_s / plan.wall_s,
        "ettr_daly": (daly_ettr(tau, effective_block_s(plan, tau), recovery_s, mtbi_s)
                      if math.isfinite(mtbi_s) else tau / (tau + delta)),
        "lost_hours": main.lost_s / 3600.0,
        "lost_card_hours": main.lost_s / 3600.0 * p.cards,
        "downtime_hours": main.down_s / 3600.0,
        "checkpoint_stall_hours": main.blocked_s / 3600.0,
        "mean_time_to_recover_s": float(np.mean(main.ttr_s)) if main.ttr_s else 0.0,
        "mean_recovery_model_s": recovery_s,
        "time_to_recover_s": _percentiles(main.ttr_s),
        "checkpoint_interval_min": p.checkpoint.interval_min,
        "optimal_checkpoint_interval_min": {
            "young": young / 60.0, "daly": daly / 60.0, "simulated": best["interval_min"],
            "simulated_ettr": best["ettr"],
        },
        "ettr_curve": curve,
        "checkpoint": {
            **times.to_dict(),
            "size": checkpoint_size(p.params, tp=p.tp, pp=p.pp, dp=p.data_parallel,
                                    zero=p.zero).to_dict(),
            "claim_15s": claim_check(times),
        },
        "availability": {
            "service": 1.0 - main.down_s / plan.wall_s,
            "full_size_simulated": main.full_size_s / plan.wall_s,
            "full_size_model": (full_size_availability(p.spares, in_repair)
                                if p.spares is not None else 1.0),
            "spares": p.spares,
            "server_failures_per_day": spare_rate_h * 24.0,
            "mean_repair_h": mean_repair_h,
            "mean_servers_in_repair": in_repair,
            "spares_needed": {str(t): spares_for(t, in_repair) for t in SPARE_TARGETS},
        },
        "timeline": timeline,
        "timeline_truncated": len(main.timeline) > TIMELINE_LIMIT,
        "wall_hours": wall_h,
        "inputs": p.to_dict(),
    }
    return ResilienceResult(data)
