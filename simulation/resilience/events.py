"""The event simulation of one job under failures: SimPy processes that interact.

Processes (SimPy, ``simpy.Environment`` in seconds):

* **failures** — the superposed Poisson processes of every component class
  (drawn up front with numpy, so every checkpoint interval of a sweep sees the
  same history: common random numbers), each interrupting the job;
* **the job** — runs cycles of ``τ`` of compute and a checkpoint that stalls
  it ``δ_block``; on a failure it rolls back to the newest checkpoint that
  survived *that* failure (a host loss wipes its DRAM and NVMe, so only a
  shared file system or a peer's replica is good), then recovers: detection,
  then a hot-spare swap, a cold restart, an elastic shrink or a wait for a
  repaired server, then the restore. A failure during recovery starts it over
  (as in Daly's model);
* **the spare pool** — a ``simpy.Container`` of servers: a failure that needs
  a replacement takes one; a **repair** process returns it after the class's
  repair time (or regrows a shrunk job).

Between events the job's progress is arithmetic (cycles of ``τ + δ_block``),
so the event count grows with failures, not with checkpoints: a 54-day,
16,384-card history is ~420 events. See :mod:`.closed_forms` for the formulas
the tests hold it to (Daly's ETTR, the M/G/∞ spare pool).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import simpy

from .failures import LLAMA3_TABLE5, FailureClass

__all__ = ["ClassPlan", "FailureHistory", "JobPlan", "RunStats", "draw_failures",
           "effective_block_s", "run_job"]


@dataclass(frozen=True)
class ClassPlan:
    """What a failure of one class costs the job (derived from the inputs)."""

    fc: FailureClass
    rate_per_s: float  #: whole-job rate λ_c·n_c, per second
    detect_s: float
    repair_s: float
    restore_s: float  #: restore after this failure (the surviving tier's read time)
    safe_after_s: float  #: a checkpoint survives this failure once this long past its snapshot


@dataclass(frozen=True)
class JobPlan:
    """Everything the job process needs, in seconds."""

    wall_s: float
    block_s: float  #: δ_block, training stalls per checkpoint
    durable_s: float  #: from snapshot to the last tier (async: one persist in flight at a time)
    classes: Mapping[str, ClassPlan]
    restart_s: float
    swap_s: float
    reconfigure_s: float
    step_s: float
    hot_spare: bool
    elastic: bool
    spares: int | None
    replica_share: float  #: throughput lost per shrunk data-parallel replica (1/dp)
    max_shrink: int


@dataclass(frozen=True)
class FailureHistory:
    times_s: np.ndarray
    classes: tuple[str, ...]
    causes: tuple[str, ...]


def draw_failures(classes: Mapping[str, ClassPlan], wall_s: float,
                  rng: np.random.Generator) -> FailureHistory:
    """Poisson counts per class over ``wall_s``, uniform times (the order statistics of a
    Poisson process), the printed cause drawn within its class in Table 5's proportions."""
    times: list[np.ndarray] = []
    names: list[str] = []
    causes: list[str] = []
    for name, plan in classes.items():
        n = int(rng.poisson(plan.rate_per_s * wall_s))
        times.append(rng.uniform(0.0, wall_s, n))
        names.extend([name] * n)
        rows = [(c, k) for c, cls, k in LLAMA3_TABLE5
                if cls == name or (cls == "network" and name in ("switch", "cable"))]
        if rows and n:
            weights = np.array([k for _, k in rows], dtype=float)
            picks = rng.choice(len(rows), size=n, p=weights / weights.sum())
            causes.extend(rows[i][0] for i in picks)
        else:
            causes.extend([plan.fc.label] * n)
    all_times = np.concatenate(times) if times else np.zeros(0)
    order = np.argsort(all_times, kind="stable")
    return FailureHistory(all_times[order], tuple(names[i] for i in order),
                          tuple(causes[i] for i in order))


@dataclass
class RunStats:
    """What one simulated history produced."""

    work_s: float = 0.0
    lost_s: float = 0.0
    down_s: float = 0.0
    blocked_s: float = 0.0
    ttr_s: list[float] = field(default_factory=list)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    by_class: dict[str, int] = field(default_factory=dict)
    by_cause: dict[str, int] = field(default_factory=dict)
    by_action: dict[str, int] = field(default_factory=dict)
    full_size_s: float = 0.0  #: time with no server missing (in repair beyond the spares)


class _Job:
    """The job process and its bookkeeping (see the module docstring)."""

    def __init__(self, env: simpy.Environment, plan: JobPlan, tau_s: float,
                 stats: RunStats, timeline: bool) -> None:
        self.env, self.plan, self.tau, self.stats = env, plan, tau_s, stats
        self.keep_timeline = timeline
        # CheckFreq's rule: the next snapshot waits for the previous persist
        self.block = plan.block_s + max(0.0, plan.durable_s - plan.block_s - tau_s)
        self.period = tau_s + self.block
        self.work = 0.0  # work at the segment start (or frozen while down)
        self.seg_t = 0.0
        self.rate = 1.0
        self.running = False
        self.shrunk = 0
        self.safe: list[tuple[float, float]] = [(0.0, -math.inf)]  # (work, snapshot time)
        self.pending: list[int] = []  # timeline rows waiting for the job to resume
        self.spares = (simpy.Container(env, capacity=10**9, init=plan.spares)
                       if plan.spares is not None else None)
        self.down_start: float | None = None  # when the current recovery began
        self.need = 0  # replacement servers the job still has to take from the pool
        self.missing = 0  # servers the job lacks (in repair, not covered)
        self.missing_since = 0.0
        self.proc = env.process(self.run())

    # --- progress arithmetic --------------------------------------------------------
    def progress(self, t: float) -> float:
        if not self.running:
            return self.work
        e = max(0.0, t - self.seg_t)
        k = math.floor(e / self.period)
        return self.work + self.rate * (k * self.tau + min(e - k * self.period, self.tau))

    def blocked(self, t: float) -> float:
        e = max(0.0, t - self.seg_t)
        k = math.floor(e / self.period)
        return k * self.block + max(0.0, e - k * self.period - self.tau)

    def latest_safe(self, t: float, after_s: float) -> float:
        best = max((w for w, snap in self.safe if snap + after_s <= t), default=0.0)
        if self.running:
            e = t - self.seg_t
            j = math.floor((e - after_s + self.block) / self.period)
            if j >= 1:
                best = max(best, self.work + self.rate * j * self.tau)
        return best

    def close_segment(self, t: float) -> None:
        """Freeze progress at ``t`` (a rate change or a failure), keeping recent snapshots."""
        if not self.running:
            return
        e = t - self.seg_t
        taken = math.floor((e + self.block) / self.period)
        longest = max((c.safe_after_s for c in self.plan.classes.values()), default=0.0)
        keep = min(taken, math.ceil(longest / self.period) + 1)
        for j in range(taken - keep + 1, taken + 1):
            snap = self.seg_t + j * self.tau + (j - 1) * self.block
            self.safe.append((self.work + self.rate * j * self.tau, snap))
        self.stats.blocked_s += self.blocked(t)
        self.work = self.progress(t)
        self.running = False

    def resume(self) -> None:
        now = self.env.now
        for row in self.pending:
            ttr = now - self.stats.timeline[row]["t_s"]
            self.stats.timeline[row]["recovery_s"] = ttr
            self.stats.ttr_s.append(ttr)
        self.pending.clear()
        self.seg_t, self.running = now, True
        self.rate = 1.0 - self.shrunk * self.plan.replica_share

    # --- spares -----------------------------------------------------------------------
    def set_missing(self, delta: int) -> None:
        now = self.env.now
        if self.missing == 0:
            self.stats.full_size_s += now - self.missing_since
        self.missing += delta
        self.missing_since = now

    def repair(self, seconds: float) -> Any:
        """A failed server comes back after ``seconds``: it regrows a shrunk job (at once
        if running, else when it resumes) or joins the spare pool."""
        yield self.env.timeout(seconds)
        if self.shrunk:
            if self.running:
                self.proc.interrupt(("grow", None))
            else:
                self.shrunk -= 1
                self.set_missing(-1)
        elif self.spares is not None:
            yield self.spares.put(1)

    # --- the job ----------------------------------------------------------------------
    def run(self) -> Any:
        action: tuple[str, Any] | None = None
        self.resume()
        while True:
            try:
                if action is None:
                    yield self.env.timeout(self.plan.wall_s * 10)
                else:
                    yield from self.recover(*action)
                    action = None
                    self.resume()
            except simpy.Interrupt as stop:
                what, info = cast("tuple[str, Any]", stop.cause)
                action = self.on_interrupt(what, info)

    def on_interrupt(self, what: str, info: Any) -> tuple[str, Any] | None:
        now = self.env.now
        was_running = self.running
        if what == "grow":
            self.close_segment(now)
            self.shrunk -= 1
            self.set_missing(-1)
            return ("reconfigure", None)
        name, cause = info
        cp = self.plan.classes[name]
        current = self.progress(now)
        self.close_segment(now)
        shrink = (cp.fc.needs_spare and self.plan.elastic and self.shrunk < self.plan.max_shrink
                  and self.spares is not None and self.spares.level == 0)
        if shrink:  # peers hold the state: only the step in flight is lost
            lost = min(self.plan.step_s * self.rate, current) if was_running else 0.0
            self.work = current - lost
        else:
            restored = self.latest_safe(now, cp.safe_after_s)
            lost = current - restored
            self.work = restored
            self.safe = [(restored, -math.inf)]
        if cp.fc.needs_spare:
            self.env.process(self.repair(cp.repair_s))
            if self.spares is not None and not shrink:
                self.need += 1
                self.set_missing(+1)
        self.stats.lost_s += max(0.0, lost)
        self.stats.by_class[name] = self.stats.by_class.get(name, 0) + 1
        self.stats.by_cause[cause] = self.stats.by_cause.get(cause, 0) + 1
        if cp.fc.needs_spare:
            if shrink:
                kind = "shrink"
            elif self.spares is None or self.spares.level > 0:
                kind = "hot_spare" if self.plan.hot_spare else "restart"
            else:
                kind = "wait_repair"
        else:
            kind = "restart"
        self.stats.by_action[kind] = self.stats.by_action.get(kind, 0) + 1
        if self.keep_timeline:
            self.stats.timeline.append({
                "t_s": now, "class": name, "cause": cause, "detection_s": cp.detect_s,
                "action": kind, "lost_work_s": max(0.0, lost), "recovery_s": None})
            self.pending.append(len(self.stats.timeline) - 1)
        else:
            self.stats.timeline.append({"t_s": now})
            self.pending.append(len(self.stats.timeline) - 1)
        return (kind, cp)

    def recover(self, kind: str, cp: ClassPlan | None) -> Any:
        env, plan = self.env, self.plan
        start = self.down_start = env.now
        try:
            if kind == "reconfigure":
                yield env.timeout(plan.reconfigure_s)
                return
            assert cp is not None
            if kind == "shrink":
                self.shrunk += 1
                self.set_missing(+1)
            while self.need > 0 and self.spares is not None:
                got = self.spares.get(1)
                try:
                    yield got
                except simpy.Interrupt:
                    if not got.triggered:
                        got.cancel()
                    raise
                self.need -= 1
                self.set_missing(-1)
            yield env.timeout(cp.detect_s)
            if kind == "shrink":
                yield env.timeout(plan.reconfigure_s)
                return
            yield env.timeout(plan.swap_s if kind == "hot_spare" else plan.restart_s)
            yield env.timeout(cp.restore_s)
        finally:
            self.stats.down_s += env.now - start
            self.down_start = None


def _failures(env: simpy.Environment, job: _Job, history: FailureHistory) -> Any:
    for t, name, cause in zip(history.times_s.tolist(), history.classes, history.causes,
                                  strict=True):
        yield env.timeout(t - env.now)
        job.proc.interrupt(("failure", (name, cause)))


def effective_block_s(plan: JobPlan, tau_s: float) -> float:
    """Stall per checkpoint at interval ``tau_s``: ``δ_block + max(0, durable − δ_block − τ)``."""
    return plan.block_s + max(0.0, plan.durable_s - plan.block_s - tau_s)


def run_job(plan: JobPlan, tau_s: float, history: FailureHistory, *,
            timeline: bool = False) -> RunStats:
    """Simulate one history at checkpoint interval ``tau_s``; ``timeline`` keeps every event."""
    env = simpy.Environment()
    stats = RunStats()
    job = _Job(env, plan, tau_s, stats, timeline)
    env.process(_failures(env, job, history))
    env.run(until=plan.wall_s)
    end = plan.wall_s
    if job.running:
        stats.blocked_s += job.blocked(end)
    stats.work_s = job.progress(end)
    if job.missing == 0:
        stats.full_size_s += end - job.missing_since
    if job.down_start is not None:  # still recovering at the end of the window
        stats.down_s += end - job.down_start
    for row in job.pending:
        stats.timeline[row]["recovery_s"] = end - stats.timeline[row]["t_s"]
    return stats
