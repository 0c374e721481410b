"""A burst of arrivals at one instant: the queue's reuse (cached placements and
reservations, settled passes skipped) gives exactly the schedule of the plain dispatch
that runs a full pass per arrival (``_Run.reuse = False``), placement by placement.

The workloads are randomised bursts — hundreds of jobs at the same few instants, mixed
sizes (CPU-only, shared, whole cards, gang jobs wider than a node, elastic jobs),
priorities that put later arrivals inside the backfill window or at the head — so the
queue outgrows :data:`BACKFILL_WINDOW` and the skipped passes are exercised (counted).
EASY is the only backfilling policy the scheduler has (no conservative backfilling);
every other policy runs the same queue code, so all are compared.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from simulation.scheduling import Nodes, Workload, simulate
from simulation.scheduling.engine import BACKFILL_WINDOW, _Run
from simulation.scheduling.policies import POLICIES
from simulation.snapshot import LiveSnapshot, PendingJob, RunningJob
from simulation.whatif import Layout, WhatIfSpec, run_whatif

BACKFILLING = ("easy-backfill",)


def burst_workload(seed: int, n: int = 360) -> Workload:
    """``n`` jobs, 85 % of them in bursts at 0 s, 1,800 s and 7,200 s, the rest scattered."""
    rng = np.random.default_rng(seed)
    at = np.where(rng.random(n) < 0.85, rng.choice([0.0, 1800.0, 7200.0], n),
                  rng.uniform(0.0, 20_000.0, n))
    kinds = rng.choice(["cpu", "shared", "1", "2", "4", "8"], n,
                       p=[0.05, 0.15, 0.3, 0.25, 0.15, 0.1])
    records: list[dict[str, Any]] = []
    for i in range(n):
        kind = str(kinds[i])
        rec: dict[str, Any] = {
            "arrival_s": float(at[i]),
            # mostly long jobs, a few short ones: a short arrival can still backfill
            # where the queue's long jobs are held back by the head's reservation
            "duration_s": float(rng.uniform(60.0, 600.0) if rng.random() < 0.08
                                else rng.lognormal(np.log(6000.0), 0.8)),
            "priority": int(rng.choice([0, 0, 0, 1, 2])),
            "cpu_milli": int(rng.integers(0, 16_000)),
            "memory_mib": int(rng.integers(0, 64_000)),
            "gang": bool(rng.random() < 0.8)}
        if kind == "cpu":
            rec["num_gpu"] = 0
        elif kind == "shared":
            rec.update(num_gpu=1, gpu_milli=int(rng.choice([250, 500, 750])))
        else:
            rec["num_gpu"] = int(kind)
        records.append(rec)
    return Workload.from_records(records)


def fingerprint(r: Any) -> tuple[Any, ...]:
    """Everything a run reports, every placement and every job's times (an arrival-only
    job never ends: its NaN end compares as its text)."""
    body = r.to_dict()
    body.pop("wall_s")
    return body, sorted(r.placements.items()), repr(sorted(r.job_log.items()))


@pytest.fixture
def skipped(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the arrivals whose pass was skipped (the queue settled) while it runs."""
    count = [0]
    settled = _Run.settled_window

    def spy(self: _Run) -> bool:
        result = settled(self)
        count[0] += result
        return result

    monkeypatch.setattr(_Run, "settled_window", spy)
    return count


def one_at_a_time(monkeypatch: pytest.MonkeyPatch, fn: Any) -> Any:
    """``fn()`` with every arrival dispatched by its own full pass, nothing reused."""
    with monkeypatch.context() as m:
        m.setattr(_Run, "reuse", False)
        return fn()


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("policy", BACKFILLING)
def test_a_burst_dispatched_at_once_schedules_as_one_at_a_time(
        policy: str, seed: int, monkeypatch: pytest.MonkeyPatch, skipped: list[int]) -> None:
    nodes = Nodes.uniform(6, 4, servers_per_rack=2)  # 24 cards: 8-card jobs span nodes
    work = burst_workload(seed)
    initial: list[dict[str, Any]] | None = None
    if seed == 1:  # the live twin's pinned jobs: one ends at 2,500 s, one never
        initial = [{"placement": [[0, c, 1.0] for c in range(4)], "remaining_s": 2500.0},
                   {"placement": [[1, 0, 0.5]], "remaining_s": None}]

    def run() -> Any:
        return simulate(nodes, work, policy, mode="full", seed=seed, keep_placements=True,
                        initial=initial)

    fast = run()
    assert skipped[0] > 0  # the bursts outgrew the window and passes were skipped
    assert max(fast.timeline["queued"]) > BACKFILL_WINDOW
    reference = one_at_a_time(monkeypatch, run)
    assert fingerprint(fast) == fingerprint(reference)
    assert fast.jobs["completed"] == len(work)


@pytest.mark.parametrize("reuse", [True, False])
def test_a_backfill_that_moves_a_placement_is_seen_by_the_next_arrival(
        reuse: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nodes A, B (4 cards) and C (2), everything at 0 s. X (2 cards, 100 s) takes half
    of A, Y (4, 1,000 s) all of B. H (4 cards, priority 3) waits: shadow 100 s on A,
    spare 0. K (2 cards, 500 s, priority 2): first-fit puts it on A — long, it would take
    the head's cards, so it waits. 250 fillers (4 cards, priority 0) queue behind the
    window. S (2 cards, 50 s, priority 1) lands behind K: short, it backfills onto A.
    T (4 cards) then arrives behind the window: its pass puts K on C — off the reserved
    node — and K starts at 0 s. The pass that started S must not count as settled, or
    T's pass would be skipped and K would wait."""
    monkeypatch.setattr(_Run, "reuse", reuse)
    nodes = Nodes.from_records([{"gpus": 4}, {"gpus": 4}, {"gpus": 2}])
    fillers = [{"num_gpu": 4, "duration_s": 1000.0}] * 250
    w = Workload.from_records([
        {"num_gpu": 2, "duration_s": 100.0},                   # X -> A
        {"num_gpu": 4, "duration_s": 1000.0},                  # Y -> B
        {"num_gpu": 4, "duration_s": 10.0, "priority": 3},     # H, the head
        {"num_gpu": 2, "duration_s": 500.0, "priority": 2},    # K
        *fillers,
        {"num_gpu": 2, "duration_s": 50.0, "priority": 1},     # S
        {"num_gpu": 4, "duration_s": 1000.0}])                 # T
    r = simulate(nodes, w, "easy-backfill", mode="full", keep_placements=True)
    k, s = 3, 4 + len(fillers)
    assert {n for n, _, _ in r.placements[s]} == {0} and r.job_log[s][2] == 0.0  # S on A
    assert {n for n, _, _ in r.placements[k]} == {2} and r.job_log[k][2] == 0.0  # K on C
    assert r.job_log[2][2] == 100.0  # H on A when X ends


@pytest.mark.parametrize("policy", sorted(set(POLICIES) - set(BACKFILLING)))
def test_other_policies_schedule_bursts_as_before(policy: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The cached placements serve every policy (``random`` keeps drawing from its
    generator: only its misses are remembered)."""
    nodes = Nodes.uniform(6, 4, servers_per_rack=2)
    work = burst_workload(5, n=200)
    for mode in ("full", "arrival-only"):
        def run(mode: str = mode) -> Any:
            return simulate(nodes, work, policy, mode=mode, seed=3, keep_placements=True,
                            target_load=None)

        assert fingerprint(run()) == fingerprint(one_at_a_time(monkeypatch, run))


def test_a_whatifs_queue_burst_schedules_as_one_at_a_time(
        monkeypatch: pytest.MonkeyPatch, skipped: list[int]) -> None:
    """The what-if kind's case: the snapshot's queue (300 jobs) arrives at the fork in
    one burst, with failures, a drain, a cap, a resize, a cancel and an added job."""
    t0 = 1_000_000.0
    servers, per = 8, 8
    lay = Layout(tuple(range(100, 100 + servers)), tuple(1 + i // 2 for i in range(servers)),
                 (0,) * servers, tuple(tuple(range(s * per, s * per + per))
                                       for s in range(servers)),
                 {900: (100, 101)}, tdp_w=700.0, idle_w=100.0)
    rng = np.random.default_rng(4)
    running = tuple(RunningJob(i, f"r{i}", "", 0, tuple(range(i * 8, i * 8 + 8)),
                               (1000,) * 8, t0 - 600.0, t0 + float(rng.uniform(600, 9000)),
                               None) for i in range(6))
    queue = tuple(PendingJob(1000 + i, f"q{i}", "", int(rng.choice([0, 0, 1])),
                             int(rng.choice([1, 2, 4, 8, 16])), 1000, True,
                             float(rng.uniform(600.0, 14_400.0)), t0 - 60.0)
                  for i in range(300))
    snapshot = LiveSnapshot(taken_at=t0, cluster_id=1, cluster_name="c",
                            has_live_state=False, running=running, queue=queue)
    spec = WhatIfSpec.from_dict({
        "horizon_s": 3 * 86400.0, "seed": 2, "policy": "easy-backfill",
        "failure_rate": 200.0, "events": [
            {"at_s": 1800.0, "kind": "fail_rack", "target": 2},
            {"at_s": 3600.0, "kind": "drain_server", "target": 107, "duration_s": 7200.0},
            {"at_s": 5000.0, "kind": "resize_job", "target": 1005, "value": 4},
            {"at_s": 6000.0, "kind": "cancel_job", "target": 1010},
            {"at_s": 7000.0, "kind": "add_job", "job": {"cards": 8, "duration_s": 3600.0}},
            {"at_s": 86400.0, "kind": "cap_power", "value": 450.0, "duration_s": 43200.0}]})

    def run() -> Any:
        return run_whatif(snapshot, lay, spec)

    fast = run()
    assert skipped[0] > 0
    assert fast.failures > 0
    reference = one_at_a_time(monkeypatch, run)
    a, b = fast.to_dict(), reference.to_dict()
    a.pop("wall_s")
    b.pop("wall_s")
    assert a == b
    for mine, theirs in ((fast.baseline, reference.baseline),
                         (fast.perturbed, reference.perturbed)):
        assert mine.per_job.keys() == theirs.per_job.keys()
        for key, values in mine.per_job.items():
            np.testing.assert_array_equal(values, theirs.per_job[key], err_msg=key)
        np.testing.assert_array_equal(mine.segments, theirs.segments)
