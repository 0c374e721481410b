"""EASY backfilling's reservation for the head of the queue, computed per node.

EASY (Lifka, "The ANL/IBM SP scheduling system", JSSPP 1995; Mu'alem & Feitelson,
IEEE TPDS 12(6), 2001): the job at the head of the queue gets a reservation at the
earliest time enough resources are free *where it can run* (the shadow time); a later
job may start now if it ends by then or uses only what the head leaves spare. Here
"where it can run" is a node (or, for a job wider than a node, a set of nodes): the
running jobs' releases are replayed in order of expected end on copies of the nodes
they touch until a node the head can use holds it. The running jobs include the
live twin's pinned jobs (``simulate(initial=...)``): their expected end is when
their cards free up, as for any running job — ignoring it would put the shadow
time at infinity (or too late) and let a long job backfill onto the cards the
head is about to get.

Example (hand-worked in tests/simulation/scheduling): nodes A, B of 4 cards, both
holding two 2-card jobs (A's end at 10 s and 100 s, B's at 20 s and 100 s): a 4-card
head gets A at 100 s — not 20 s, when 4 cards are free but on two nodes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from .policies import JobRequest
from .state import ClusterState, Placement

__all__ = ["reservation"]


def reservation(st: ClusterState, running: Iterable[tuple[float, int, Placement, JobRequest]],
                head: JobRequest) -> tuple[float, set[int], int]:
    """EASY's reservation for the queue's head, per node: ``(shadow, nodes, spare)``.

    Replays the running tasks' releases in order of expected end on a copy of the
    nodes they touch (cards, CPU, memory, virtual functions). The shadow time is the
    first end after which a suitable node holds the head (whole cards: that many
    untouched cards; shared: a card with the share left; CPU and memory; a free
    virtual function); ``nodes`` = {that node}, ``spare`` = its untouched cards beyond
    the head's. A task wider than a node: the first end after which the suitable
    nodes' untouched cards add up to its width; ``nodes`` = the nodes holding them,
    ``spare`` = the surplus. (Lifka 1995; Mu'alem & Feitelson 2001: the reservation
    is the earliest time enough resources are free *where the job can run*.)
    """
    model_ok = st.model_ok(head.gpu_model)
    multi = head.num_gpu > st.nodes.max_gpus
    proj: dict[int, list[Any]] = {}
    total = 0
    if multi:
        total = int(np.where(model_ok & st.vf_ok, st.full, 0).sum())

    def node(n: int) -> list[Any]:
        if n not in proj:
            proj[n] = [st.free[n].tolist(), int(st.cpu_free[n]), int(st.mem_free[n]),
                       int(st.tenants[n])]
        return proj[n]

    def holds(n: int) -> bool:
        row, cpu, mem, tenants = proj[n]
        if not model_ok[n] or tenants >= int(st.vf_limit[n]):
            return False
        if cpu < head.cpu_milli or mem < head.memory_mib:
            return False
        if head.shared:
            return max(row, default=0) >= head.gpu_milli
        return bool(row.count(1000) >= head.num_gpu)

    for end, _, pl, req in sorted(running, key=lambda v: v[0]):
        touched = _split(pl, req)
        for n, cards, cpu, mem in touched:
            rec = node(n)
            before = rec[0].count(1000)
            for c, m in cards:
                rec[0][c] += m
            rec[1] += cpu
            rec[2] += mem
            rec[3] -= 1
            if multi and model_ok[n] and rec[3] < int(st.vf_limit[n]):
                total += rec[0].count(1000) - before
        if multi:
            if total >= head.num_gpu:
                nodes = {int(n) for n in np.flatnonzero(model_ok & st.vf_ok & (st.full > 0))}
                nodes |= {n for n, rec in proj.items() if rec[0].count(1000) > 0}
                return end, nodes, total - head.num_gpu
            continue
        for n in sorted(n for n, *_ in touched):
            if holds(n):
                spare = 0 if head.shared or head.num_gpu == 0 else \
                    proj[n][0].count(1000) - head.num_gpu
                return end, {n}, spare
    return float("inf"), set(), 0


def _split(pl: Placement, req: JobRequest) -> list[tuple[int, list[tuple[int, int]], int, int]]:
    """Per node of a placement: (node, [(card, thousandths)], CPU, memory) as
    :meth:`ClusterState.allocate` splits them (by cards; CPU-only: evenly)."""
    per: dict[int, list[tuple[int, int]]] = {}
    for n, c, m in pl:
        per.setdefault(n, [])
        if c >= 0:
            per[n].append((c, m))
    gpus = sum(len(v) for v in per.values())
    out = []
    for n, cards in per.items():
        share = len(cards) / gpus if gpus else 1.0 / len(per)
        out.append((n, cards, int(round(req.cpu_milli * share)),
                    int(round(req.memory_mib * share))))
    return out
