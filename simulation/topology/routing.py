"""The route between two nodes, with its hops, latency and bottleneck.

``by="hops"`` returns a fewest-hop path (one BFS, the first found in BFS
order); ``by="latency"`` a lowest-latency path (Dijkstra). Latency of a path
= Σ link ns + Σ forwarding ns of the intermediate nodes, the same
definition the metrics use.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .graph import Topology, TopologyError
from .search import bfs_tree, latency_tree, path_from_predecessors

__all__ = ["Route", "path_latency_ns", "route"]


@dataclass(frozen=True)
class Route:
    """One path: node ids, labels, link ids, and its figures.

    ``reachable`` is False (lists empty, latency None) when a failure
    separated the two nodes; ``bottleneck_gbps`` is None for a node to itself.
    """

    src: int
    dst: int
    by: str
    reachable: bool
    nodes: list[int]
    labels: list[str]
    links: list[int]
    hops: int
    latency_ns: float | None
    bottleneck_gbps: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


def path_latency_ns(topo: Topology, nodes: list[int], links: list[int]) -> float:
    """Σ link latency + Σ forwarding latency of the intermediate nodes."""
    if len(nodes) < 2:
        return 0.0
    return float(
        topo.link_ns[np.asarray(links, dtype=np.int64)].astype(np.float64).sum()
        + topo.node_ns[np.asarray(nodes[1:-1], dtype=np.int64)].astype(np.float64).sum()
    )


def route(topo: Topology, src: int, dst: int, *, by: str = "hops") -> Route:
    """The route from ``src`` to ``dst`` (node ids; cards are 0…n_endpoints−1)."""
    topo.check_node(src, "src")
    topo.check_node(dst, "dst")
    if by == "hops":
        _, pred = bfs_tree(topo, src)
    elif by == "latency":
        _, pred = latency_tree(topo, src)
    else:
        raise TopologyError("by", f"route by 'hops' or 'latency', got {by!r}")
    nodes = path_from_predecessors(pred, int(src), int(dst))
    if not nodes:
        return Route(int(src), int(dst), by, False, [], [], [], 0, None, None)
    links = [topo.link_between(a, b) for a, b in zip(nodes, nodes[1:], strict=False)]
    gb = float(topo.link_gbps[np.asarray(links, dtype=np.int64)].min()) if links else None
    return Route(
        src=int(src),
        dst=int(dst),
        by=by,
        reachable=True,
        nodes=nodes,
        labels=[topo.describe_node(x) for x in nodes],
        links=links,
        hops=len(nodes) - 1,
        latency_ns=path_latency_ns(topo, nodes, links),
        bottleneck_gbps=gb,
    )
