"""``simulate(initial=...)``: allocations pinned before the first arrival (the twin's
``from_live``), and ``job_log`` (start/end of each task with ``keep_placements``).

Hand-worked cases on tiny clusters: what is pinned is taken, the policy places only
the workload around it, and in ``full`` mode a pinned allocation leaves at its
``remaining_s`` and the queue starts.
"""
from __future__ import annotations

import math

import pytest

from simulation.scheduling import Nodes, SchedulingInputError, Workload, simulate


def test_pinned_cards_are_taken_forever_in_arrival_only() -> None:
    # 2 nodes × 4 cards; node 0 holds a pinned 3-card job: a 4-card job fits only node 1,
    # a second 4-card job fits nowhere; rate = (3 + 4) / 8.
    nodes = Nodes.uniform(2, 4)
    work = Workload.from_records([{"num_gpu": 4}, {"num_gpu": 4}])
    pin = [{"placement": [[0, 0, 1.0], [0, 1, 1.0], [0, 2, 1.0]]}]
    r = simulate(nodes, work, "fifo-first-fit", target_load=None, initial=pin,
                 keep_placements=True)
    assert r.jobs["placed"] == 1 and r.jobs["failed"] == 1 and r.jobs["pinned"] == 1
    assert r.gpu_allocation_rate == pytest.approx(7 / 8)
    assert {n for n, _, _ in next(iter(r.placements.values()))} == {1}
    # without the pin both fit
    free = simulate(nodes, work, "fifo-first-fit", target_load=None)
    assert free.jobs["placed"] == 2 and "pinned" not in free.jobs


def test_pinned_share_leaves_the_rest_of_the_card() -> None:
    # one 1-card node, 0.6 pinned: a 0.5 job fails, a 0.4 job fits
    nodes = Nodes.uniform(1, 1)
    work = Workload.from_records([{"num_gpu": 1, "gpu_milli": 500},
                                  {"num_gpu": 1, "gpu_milli": 400}])
    r = simulate(nodes, work, "best-fit", target_load=None,
                 initial=[{"placement": [[0, 0, 0.6]]}])
    assert (r.jobs["placed"], r.jobs["failed"]) == (1, 1)
    assert r.gpu_allocation_rate == pytest.approx(1.0)


def test_pinned_job_leaves_at_remaining_time_in_full_mode() -> None:
    # 1 node × 2 cards, both pinned for 100 s; a 2-card job arriving at 10 s waits 90 s,
    # runs 50 s: start 100, end 150, JCT 140.
    nodes = Nodes.uniform(1, 2)
    work = Workload.from_records([{"num_gpu": 2, "arrival_s": 10, "duration_s": 50}])
    pin = [{"placement": [[0, 0, 1.0], [0, 1, 1.0]], "remaining_s": 100.0}]
    r = simulate(nodes, work, "fifo-first-fit", mode="full", initial=pin,
                 keep_placements=True)
    assert r.jobs["completed"] == 1
    assert r.queue_delay_s["p50"] == pytest.approx(90.0)
    assert r.jct_s["p50"] == pytest.approx(140.0)
    (j, arrival, start, end), = r.job_log.values()
    assert (j, arrival, start, end) == (0, 10.0, 100.0, 150.0)


def test_pinned_forever_in_full_mode_without_remaining() -> None:
    nodes = Nodes.uniform(1, 2)
    work = Workload.from_records([{"num_gpu": 2, "arrival_s": 0, "duration_s": 5}])
    r = simulate(nodes, work, "fifo-first-fit", mode="full",
                 initial=[{"placement": [[0, 0, 1.0]]}], keep_placements=True)
    assert r.jobs["placed"] == 0 and r.jobs["waiting"] == 1


def test_job_log_without_end_in_arrival_only() -> None:
    r = simulate(Nodes.uniform(1, 4), Workload.from_records([{"num_gpu": 2}]), "fgd",
                 target_load=None, keep_placements=True)
    (j, arrival, start, end), = r.job_log.values()
    assert (j, arrival, start) == (0, 0.0, 0.0) and math.isnan(end)


@pytest.mark.parametrize(("pin", "field"), [
    ([{"placement": [[5, 0, 1.0]]}], "initial[0].placement[0]"),
    ([{"placement": [[0, 0, 1.0]]}, {"placement": [[0, 0, 0.5]]}], "initial[1].placement[0]"),
    ([{"placement": [["x"]]}], "initial[0].placement[0]"),
    ([{"placement": []}], "initial[0].placement"),
    ([{"placement": [[0, 1, 1.0]], "remaining_s": -1}], "initial[0].remaining_s"),
])
def test_bad_initial_names_the_field(pin: list[dict], field: str) -> None:
    nodes = Nodes.from_records([{"gpus": 2, "failed_gpus": []}])
    with pytest.raises(SchedulingInputError) as err:
        simulate(nodes, Workload.from_records([{"num_gpu": 1}]), "fgd", mode="full",
                 initial=pin)
    assert err.value.field == field


def test_failed_card_cannot_be_pinned() -> None:
    nodes = Nodes.from_records([{"gpus": 2, "failed_gpus": [1]}])
    with pytest.raises(SchedulingInputError) as err:
        simulate(nodes, Workload.from_records([{"num_gpu": 1}]), "fgd",
                 initial=[{"placement": [[0, 1, 1.0]]}])
    assert err.value.field == "initial[0].placement[0]"


def test_easy_backfill_counts_a_pinned_jobs_expected_end() -> None:
    """EASY (Lifka 1995; Mu'alem & Feitelson 2001): the head's reservation is the
    earliest time enough cards free up — a pinned live job's expected end included.

    One 8-card node; a pinned job holds 4 cards until 10 s; W (2 cards, 1000 s) starts
    at 0; the head H (6 cards, 10 s) arrives at 1: 2 free, it waits. Its reservation:
    the pinned job leaves at 10 → 6 free → shadow 10, no spare. B (2 cards, 500 s)
    arrives at 2: it fits now but would end at 502 > 10 and take cards H needs, so
    EASY keeps it waiting; H starts at 10, B at 20 when H leaves. Ignoring the pinned
    end (the shadow is then W's end plus never: infinity) backfills B and H starts
    only at 502.
    """
    nodes = Nodes.uniform(1, 8)
    work = Workload.from_records([
        {"num_gpu": 2, "arrival_s": 0, "duration_s": 1000},
        {"num_gpu": 6, "arrival_s": 1, "duration_s": 10},
        {"num_gpu": 2, "arrival_s": 2, "duration_s": 500}])
    pin = [{"placement": [[0, c, 1.0] for c in range(4)], "remaining_s": 10.0}]
    r = simulate(nodes, work, "easy-backfill", mode="full", initial=pin,
                 keep_placements=True)
    start = {j: s for j, _, s, _ in r.job_log.values()}
    assert start[1] == pytest.approx(10.0)
    assert start[2] == pytest.approx(20.0)
    assert r.jobs["completed"] == 3
