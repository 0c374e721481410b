"""Single-source searches on a :class:`~simulation.topology.graph.Topology`.

Everything here is a thin, vectorised layer over :mod:`scipy.sparse.csgraph`
(compiled BFS and Dijkstra): one search on the million-card cluster (1.45 M
nodes, 10.5 M directed entries) takes about 0.05 s for hops and 0.25 s for
latency on the reference 2-core machine.

Hop distances come from ``breadth_first_order``: it returns the visit order
and the BFS tree but not the depth. Because the queue is FIFO, the position
(in visit order) of a node's parent never decreases along the order, so the
levels are contiguous blocks of the order and a ``searchsorted`` per level
recovers them in O(V + D log V) — no Python loop over nodes.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.sparse import csgraph

from .graph import FloatArray, IntArray, Topology

__all__ = [
    "bfs_tree",
    "hop_distances",
    "latency_distances",
    "latency_tree",
    "path_from_predecessors",
]


def bfs_tree(topo: Topology, source: int) -> tuple[IntArray, IntArray]:
    """Hop distances (−1 if unreachable) and BFS predecessors (−9999 for none).

    The predecessor tree gives one shortest (fewest-hop) path to every node.
    """
    topo.check_node(source, "src")
    order, pred = csgraph.breadth_first_order(
        topo.adjacency(), int(source), directed=True, return_predecessors=True
    )
    n = topo.n_nodes
    dist = np.full(n, -1, dtype=np.int32)
    dist[source] = 0
    if order.size > 1:
        pos = np.empty(n, dtype=np.int64)
        pos[order] = np.arange(order.size)
        parent_pos = pos[pred[order[1:]]]  # non-decreasing (FIFO queue)
        end, level = 1, 0
        while end < order.size:
            nxt = int(np.searchsorted(parent_pos, end, side="left")) + 1
            level += 1
            dist[order[end:nxt]] = level
            end = nxt
    return dist, pred.astype(np.int32, copy=False)


def hop_distances(topo: Topology, source: int) -> IntArray:
    """Fewest-hop distance from ``source`` to every node (−1 if unreachable)."""
    return bfs_tree(topo, source)[0]


def latency_tree(topo: Topology, source: int) -> tuple[FloatArray, IntArray]:
    """Lowest latency (ns) from ``source`` to every node, and Dijkstra predecessors.

    Latency of a path = its link latencies + the forwarding latency of every
    intermediate node (see :meth:`Topology.latency_weights`). Unreachable
    nodes get ``inf``; the source gets 0.
    """
    topo.check_node(source, "src")
    dist, pred = csgraph.dijkstra(
        topo.latency_weights(), directed=True, indices=int(source), return_predecessors=True
    )
    dist = np.asarray(dist, dtype=np.float64)
    dist -= topo.node_ns  # the destination does not forward
    dist[source] = 0.0
    return dist, np.asarray(pred, dtype=np.int32)


def latency_distances(topo: Topology, source: int) -> FloatArray:
    """Lowest latency (ns) from ``source`` to every node (``inf`` if unreachable)."""
    return latency_tree(topo, source)[0]


def path_from_predecessors(pred: npt.NDArray[np.int32], source: int, target: int) -> list[int]:
    """Walk a predecessor array back from ``target``; [] if unreachable."""
    if source == target:
        return [int(source)]
    path = [int(target)]
    node = int(target)
    while node != source:
        node = int(pred[node])
        if node < 0:
            return []
        path.append(node)
    path.reverse()
    return path
