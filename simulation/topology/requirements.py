"""Pass/fail of a topology against the seeds' latency requirements (the seeds:
docs/roadmap.md).

* seed 000: any two cards inside a supernode talk in ≤ 200 ns
  ("单节点内任意两卡间的通信延迟控制在200ns以内");
* seed 001: < 500 ns between cards on the supernode bus
  ("实现计算卡间低于500ns的通信延迟");
* seed 001: RDMA between cards within 2 µs ("通信延迟控制在2μs以内"),
  checked on pairs in different supernodes.

A requirement passes when the *worst* pair meets it (the seeds say "any
two cards"); ``share_within`` tells how many pairs meet it otherwise.
Latency here is the model's path latency (links + forwarding), without
software overhead, so a pass is necessary, not sufficient.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .graph import Topology
from .metrics import LatencyStats, latency_stats

__all__ = ["SEED_REQUIREMENTS", "LatencyRequirement", "RequirementCheck", "check_latency"]


@dataclass(frozen=True)
class LatencyRequirement:
    """A latency limit on a scope of pairs: ``intra`` / ``inter`` supernode or ``all``."""

    name: str
    scope: str
    limit_ns: float
    source: str


SEED_REQUIREMENTS = (
    LatencyRequirement("supernode_200ns", "intra", 200.0, "seed 000: any two cards ≤ 200 ns"),
    LatencyRequirement("supernode_500ns", "intra", 500.0, "seed 001: card to card < 500 ns"),
    LatencyRequirement("rdma_2us", "inter", 2000.0, "seed 001: RDMA ≤ 2 µs"),
)


@dataclass(frozen=True)
class RequirementCheck:
    """The verdict on one requirement (``applicable`` False: no such pairs)."""

    name: str
    scope: str
    limit_ns: float
    worst_ns: float
    average_ns: float
    share_within: float
    passed: bool
    applicable: bool
    source: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


def check_latency(
    topo: Topology,
    latency: LatencyStats | None = None,
    requirements: tuple[LatencyRequirement, ...] = SEED_REQUIREMENTS,
) -> list[RequirementCheck]:
    """Check ``requirements`` from a latency result (computed if not given).

    For a topology without groups (a standalone family) every pair counts as
    ``intra`` (one supernode) and ``inter`` requirements do not apply.
    """
    lat = latency or latency_stats(topo)
    values = np.asarray(lat.distribution.get("values_ns", []), dtype=np.float64)
    counts = np.asarray(lat.distribution.get("pairs", []), dtype=np.int64)
    grouped = lat.intra_group is not None
    out = []
    for req in requirements:
        if req.scope == "intra":
            split = lat.intra_group if grouped else None
            worst = split.maximum if split else lat.max_ns
            avg = split.average if split else lat.average_ns
            pairs = split.pairs if split else lat.pairs
        elif req.scope == "inter":
            split = lat.inter_group if grouped else None
            worst = split.maximum if split else 0.0
            avg = split.average if split else 0.0
            pairs = split.pairs if split else 0
        else:
            worst, avg, pairs = lat.max_ns, lat.average_ns, lat.pairs
        if split is not None:
            share = split.share_within(req.limit_ns)
        elif req.scope == "inter":
            share = 1.0
        else:
            total = int(counts.sum())
            share = float(counts[values <= req.limit_ns].sum() / total) if total else 1.0
        out.append(
            RequirementCheck(
                name=req.name,
                scope=req.scope,
                limit_ns=req.limit_ns,
                worst_ns=worst,
                average_ns=avg,
                share_within=share,
                passed=pairs == 0 or worst <= req.limit_ns,
                applicable=pairs > 0,
                source=req.source,
            )
        )
    return out
