"""What a ``scheduling`` run shows beyond its curves: a per-job table and a rack playback.

Both are read from one policy's :class:`simulation.scheduling.SimResult` run with
``keep_placements`` (each started task's placement and its ``job_log`` entry:
job index, arrival, start, end).

**The job table** (:func:`job_table`) — one row per started task (a gang job is
one task; each card of a job that is not a gang is its own task, as the library
starts them): job, size (the cards it holds, or a share of one),
queued seconds, start, end and completion time (``full`` mode; in
``arrival-only`` mode tasks never end), nodes spanned and the AllReduce time its
placement gives. A run can start 100,000 tasks, so the table is bounded: the
first :data:`TABLE_EDGE` tasks started, the last :data:`TABLE_EDGE`, and the
:data:`TABLE_EDGE` slowest (longest completion time in ``full`` mode, longest
AllReduce otherwise), each task once, with the total and that rule in
``shown``. Only those rows are priced (the collective model is not run for the
others).

**The playback** (:func:`rack_timeline`) — cards allocated per rack at
:data:`TIMELINE_POINTS` evenly spaced points: simulated seconds in ``full``
mode, arrivals in ``arrival-only`` mode (its clock does not move; a task's
sequence number is its arrival's). Pinned
allocations (the live twin's jobs with ``from_live``) are in it from the start.
Computed with one ``searchsorted`` and a cumulative sum over the points, never a
loop per task and point. Only for clusters with at most :data:`MAX_RACKS` racks
(the dashboard colours the floor's racks); larger ones get no playback.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from simulation.scheduling import AllReducePrice, Nodes, SimResult, Workload

__all__ = ["MAX_RACKS", "TABLE_EDGE", "TIMELINE_POINTS", "job_table", "rack_capacity",
           "rack_timeline"]

TABLE_EDGE = 25
TIMELINE_POINTS = 48
MAX_RACKS = 2048


def _round(x: float | None, digits: int = 3) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), digits)


def job_table(result: SimResult, work: Workload, nodes: Nodes,
              price: AllReducePrice | None) -> dict[str, Any]:
    """The bounded per-job table of one policy's run (see the module doc)."""
    log = result.job_log
    seqs = sorted(log)
    full = result.mode == "full"
    n = len(seqs)
    if n == 0:
        return {"rows": [], "total": 0, "shown": "no task started"}

    def wide(seq: int) -> bool:
        return sum(1 for _, c, m in result.placements[seq] if c >= 0 and m >= 1000) >= 2

    if full:
        key = {s: (log[s][3] - log[s][1]) if math.isfinite(log[s][3]) else math.inf
               for s in seqs}
        slow_rule = "longest completion time"
    else:
        multi = [s for s in seqs if wide(s)]
        key = ({s: float(price(nodes, result.placements[s])) for s in multi}
               if price is not None else {s: 0.0 for s in multi})
        slow_rule = "longest AllReduce"
    slowest = sorted(key, key=lambda s: (-key[s], s))[:TABLE_EDGE]
    chosen = sorted({*seqs[:TABLE_EDGE], *seqs[-TABLE_EDGE:], *slowest})
    rows = []
    for seq in chosen:
        j, arrival, start, end = log[seq]
        pl = result.placements[seq]
        size = sum(m for _, c, m in pl if c >= 0) / 1000.0  # what this task holds
        ar = float(price(nodes, pl)) if price is not None and wide(seq) else None
        rows.append({
            "job": work.name[j], "size": size, "queued_s": _round(start - arrival),
            "start_s": _round(start), "end_s": _round(end),
            "jct_s": _round(end - arrival), "nodes": len({node for node, _, _ in pl}),
            "allreduce_s": _round(ar, 9), "slowest": seq in slowest,
        })
    shown = (f"all {n} tasks" if len(chosen) == n else
             f"{len(chosen)} of {n} tasks: the first {TABLE_EDGE} started, the last "
             f"{TABLE_EDGE} and the {TABLE_EDGE} with the {slow_rule}")
    return {"rows": rows, "total": n, "shown": shown}


def rack_timeline(result: SimResult, nodes: Nodes,
                  pinned: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any] | None:
    """Cards allocated per rack at evenly spaced points (see the module doc); None when
    the cluster has more than :data:`MAX_RACKS` racks."""
    racks, rack_of_node = np.unique(nodes.rack, return_inverse=True)
    if len(racks) > MAX_RACKS:
        return None
    log, full = result.job_log, result.mode == "full"
    seqs = sorted(log)
    rack, start, end, share = [], [], [], []
    for seq in seqs:
        _, _, t0, t1 = log[seq]
        for node, card, milli in result.placements[seq]:
            if card >= 0:
                rack.append(rack_of_node[node])
                start.append(t0 if full else seq + 1)
                end.append(t1 if full and math.isfinite(t1) else math.inf)
                share.append(milli / 1000.0)
    for entry in pinned:
        remaining = entry.get("remaining_s")
        for node, card, part in entry["placement"]:
            if card >= 0:
                rack.append(rack_of_node[int(node)])
                start.append(-math.inf)
                end.append(float(remaining) if full and remaining is not None else math.inf)
                share.append(float(part))
    finite = [t for t in [*start, *end] if math.isfinite(t)]
    horizon = max(finite, default=0.0) if full else float(max(seqs, default=-1) + 1)
    t = np.linspace(0.0, max(horizon, 0.0), TIMELINE_POINTS)
    alloc = np.zeros((TIMELINE_POINTS + 1, len(racks)))
    r = np.asarray(rack, np.int64)
    s = np.asarray(share, np.float64)
    # a task counts at t_k when start <= t_k < end
    np.add.at(alloc, (np.searchsorted(t, np.asarray(start, np.float64), "left"), r), s)
    np.add.at(alloc, (np.searchsorted(t, np.asarray(end, np.float64), "left"), r), -s)
    alloc = np.cumsum(alloc, axis=0)[:TIMELINE_POINTS]
    return {"axis": "time_s" if full else "arrivals", "t": [round(float(x), 3) for x in t],
            "allocated": np.round(np.maximum(alloc, 0.0), 3).tolist()}


def rack_capacity(nodes: Nodes) -> dict[str, list[int]] | None:
    """The racks (ids as the nodes carry them: the twin's rack ids) and their healthy cards."""
    racks, rack_of_node = np.unique(nodes.rack, return_inverse=True)
    if len(racks) > MAX_RACKS:
        return None
    cards = np.bincount(rack_of_node, weights=nodes.healthy().sum(axis=1),
                        minlength=len(racks))
    return {"ids": [int(x) for x in racks], "cards": [int(x) for x in cards]}
