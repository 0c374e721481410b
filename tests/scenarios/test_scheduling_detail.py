"""The scheduling kind's per-job table and rack playback on hand-worked runs."""
from __future__ import annotations

import pytest

from simulation.scheduling import Nodes, Workload, default_allreduce, simulate
from twin.scenarios.kinds import schedulingdetail as detail


def two_racks() -> Nodes:
    # 2 servers × 4 cards, server 0 in rack 10, server 1 in rack 20
    return Nodes.from_records([{"gpus": 4, "rack": 10, "server": 0},
                               {"gpus": 4, "rack": 20, "server": 1}])


def test_full_mode_table_and_timeline_hand_worked() -> None:
    # a: 4 cards 0–100 s; b: 6 cards arrives at 10 s, waits for a (starts 100, ends 160);
    # pinned: 2 cards of rack 20 for 50 s. b needs both servers once a and the pin are gone.
    nodes = two_racks()
    work = Workload.from_records([
        {"name": "a", "num_gpu": 4, "arrival_s": 0, "duration_s": 100},
        {"name": "b", "num_gpu": 6, "arrival_s": 10, "duration_s": 60}])
    pin = [{"placement": [[1, 0, 1.0], [1, 1, 1.0]], "remaining_s": 50.0}]
    price = default_allreduce(1 << 30)
    r = simulate(nodes, work, "fifo-first-fit", mode="full", keep_placements=True,
                 initial=pin)
    table = detail.job_table(r, work, nodes, price)
    assert table["total"] == 2 and table["shown"] == "all 2 tasks"
    a, b = table["rows"]
    assert (a["job"], a["size"], a["queued_s"], a["start_s"], a["end_s"], a["jct_s"]) == \
        ("a", 4.0, 0.0, 0.0, 100.0, 100.0)
    assert (b["job"], b["queued_s"], b["start_s"], b["end_s"], b["jct_s"], b["nodes"]) == \
        ("b", 90.0, 100.0, 160.0, 150.0, 2)
    assert a["allreduce_s"] > 0 and b["allreduce_s"] > a["allreduce_s"]  # across servers
    assert a["nodes"] == 1
    tl = detail.rack_timeline(r, nodes, pin)
    assert tl["axis"] == "time_s" and tl["t"][0] == 0 and tl["t"][-1] == 160
    at = dict(zip(tl["t"], tl["allocated"], strict=True))
    assert at[0.0] == [4.0, 2.0]           # a on rack 10, the pin on rack 20
    assert at[160.0] == [0.0, 0.0]         # all gone at the end
    step = tl["t"][1]
    k = next(i for i, t in enumerate(tl["t"]) if t >= 100)   # b running from 100 s
    assert sum(tl["allocated"][k]) == 6.0 and tl["t"][k] < 160
    k50 = next(i for i, t in enumerate(tl["t"]) if t >= 50)  # pin gone, a still there
    assert tl["allocated"][k50] == [4.0, 0.0] and step > 0
    assert detail.rack_capacity(nodes) == {"ids": [10, 20], "cards": [4, 4]}


def test_the_table_is_bounded_first_last_slowest() -> None:
    nodes = Nodes.uniform(64, 8)
    work = Workload.from_records([{"name": f"j{i}", "num_gpu": 1 + i % 8,
                                   "arrival_s": float(i), "duration_s": 10.0 + (i * 37) % 500}
                                  for i in range(200)])
    r = simulate(nodes, work, "best-fit", mode="full", keep_placements=True)
    table = detail.job_table(r, work, nodes, None)
    names = [row["job"] for row in table["rows"]]
    assert table["total"] == 200 and len(names) <= 3 * detail.TABLE_EDGE
    assert names[:detail.TABLE_EDGE] == [f"j{i}" for i in range(detail.TABLE_EDGE)]
    assert names[-1] == "j199" and table["shown"].startswith(f"{len(names)} of 200 tasks")
    slow = sorted((row["jct_s"] for row in table["rows"]), reverse=True)[:detail.TABLE_EDGE]
    every = sorted((e - a for _, a, _, e in r.job_log.values()), reverse=True)
    assert slow == pytest.approx(every[:detail.TABLE_EDGE])
    assert sum(row["slowest"] for row in table["rows"]) == detail.TABLE_EDGE


def test_arrival_only_timeline_counts_arrivals() -> None:
    nodes = two_racks()
    work = Workload.from_records([{"num_gpu": 4}, {"num_gpu": 4}, {"num_gpu": 4}])
    r = simulate(nodes, work, "fifo-first-fit", target_load=None, keep_placements=True)
    tl = detail.rack_timeline(r, nodes)
    assert tl["axis"] == "arrivals" and tl["t"][-1] == 2  # the last placement is arrival 2
    assert tl["allocated"][0] == [0.0, 0.0] and tl["allocated"][-1] == [4.0, 4.0]
