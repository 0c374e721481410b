"""Exact pricing: every flow routed on the level's graph, with card limits.

Used for ranks × directed links ≤ :data:`ROUTE_CELLS` (a 512-card supernode,
an 8×8×8 torus, a k = 16 fat tree); beyond, the closed-form levels of
:mod:`~simulation.collectives.levels` take over.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.sparse import csgraph

from simulation.topology.graph import Topology, TopologyError

from .efficiency import Efficiency, fabric_efficiency
from .levels import Level, PatternCost
from .patterns import I64, pattern_pairs, snake_order

__all__ = ["CHUNK_CELLS", "ROUTE_CELLS", "RoutedLevel"]

ROUTE_CELLS = 16_000_000
"""Largest ranks × directed links for which every flow is routed on the graph
(a 512-card supernode: 2 M; a k=16 fat tree: 6 M; beyond, closed forms)."""
CHUNK_CELLS = 2_000_000
"""Directed links × destinations handled at once while routing (memory bound)."""


class RoutedLevel(Level):
    """Every flow routed on the level's graph, split over equal-cost paths.

    Paths are the lowest-latency ones (ties broken towards fewer hops by a
    10⁻⁶ ns per-hop nudge). A flow to destination t that reaches node u
    splits evenly over u's next hops on a lowest-latency path to t (per-hop
    ECMP, as fat trees and tori route in practice); link loads are the sums
    of these fractions, computed for all destinations at once by pushing
    the flow matrix (nodes × destinations) one hop per iteration.

    A flow's bandwidth is then the smallest share it gets of any capacity it
    uses: a link (its Gb/s × the protocol efficiency of its fabric) or a
    card's injection / ejection limit — the sum of a card's flows over its
    scale-up links, and over its other links, in each direction, against
    ``card_up_gbps`` and ``card_out_gbps`` (× efficiency). Traffic a card
    forwards counts against its ports too (a DGX GPU relaying to its rail NIC
    over NVLink, NCCL's PXN, uses its NVLink bandwidth).
    """

    EPS_NS = 1e-6
    TOL_NS = 1e-8

    def __init__(
        self,
        name: str,
        graph: Topology,
        rank_nodes: I64,
        overhead_s: float,
        dims: tuple[int, ...] | None = None,
        *,
        efficiency: Efficiency | None = None,
        orders: list[I64] | None = None,
    ) -> None:
        super().__init__(name=name, ranks=int(rank_nodes.size), overhead_s=overhead_s, dims=dims)
        self.routed = True
        self.efficiency = efficiency or fabric_efficiency(graph)
        self.graph = graph
        self.rank_nodes = rank_nodes.astype(np.int64)
        v = graph.n_nodes
        weights = graph.latency_weights()
        # latency from every rank (for α) …
        lat = csgraph.dijkstra(weights, directed=True, indices=self.rank_nodes)
        self._lat = np.asarray(lat, dtype=np.float64) - graph.node_ns.astype(np.float64)[None, :]
        # … and, nudged towards fewer hops, *to* every rank (for the ECMP DAGs)
        nudged = sp.csr_matrix(
            (weights.data + self.EPS_NS, weights.indices, weights.indptr), shape=(v, v)
        )
        to = csgraph.dijkstra(nudged.T.tocsr(), directed=True, indices=self.rank_nodes)
        self._to = np.asarray(to, dtype=np.float64)  # [rank, node] = cost node → rank
        self._row = np.repeat(np.arange(v, dtype=np.int64), np.diff(graph.indptr))
        self._col = graph.indices.astype(np.int64)
        self._w = nudged.data.astype(np.float64)
        up = graph.scale_up_entries()
        eff = self.efficiency
        self._entry_gbps = graph.link_gbps[graph.entry_link].astype(np.float64) * np.where(
            up, eff.scale_up, eff.scale_out
        )
        if orders is not None:
            self.orders = orders
        elif dims and math.prod(dims) == self.ranks:
            self.orders = [snake_order(dims)]
        # card injection/ejection groups: (entry mask, card of each entry, cap per card)
        n_ep = graph.n_endpoints
        self._card_groups: list[tuple[npt.NDArray[np.bool_], I64, npt.NDArray[np.float64]]] = []
        for caps, cls, factor in (
            (graph.card_up_gbps, up, eff.scale_up),
            (graph.card_out_gbps, ~up, eff.scale_out),
        ):
            if caps is None or not np.isfinite(caps).any():
                continue
            cap = caps.astype(np.float64) * factor
            for end in (self._row, self._col):
                mask = (end < n_ep) & cls
                self._card_groups.append((mask, end[mask], cap))
        self._rows_mat = sp.csr_matrix(
            (np.ones(self._row.size), (self._row, np.arange(self._row.size))),
            shape=(v, self._row.size),
        )
        self._cols_mat = sp.csr_matrix(
            (np.ones(self._col.size), (self._col, np.arange(self._col.size))),
            shape=(v, self._col.size),
        )

    def loads(self, src_rank: I64, dst_rank: I64) -> tuple[npt.NDArray[np.float64], int]:
        """Flow units per directed CSR entry (each flow = 1 unit), and max hops.

        Destinations are processed in chunks (loads add up), so memory stays
        at about ``CHUNK_CELLS`` floats per array whatever the pattern.
        """
        dests_all = np.unique(dst_rank)
        load = np.zeros(self._row.size)
        hops = 0
        step = max(1, CHUNK_CELLS // max(self._row.size, 1))
        for lo in range(0, dests_all.size, step):
            chunk = dests_all[lo : lo + step]
            sel = np.isin(dst_rank, chunk)
            part, h = self._loads_chunk(src_rank[sel], dst_rank[sel], chunk)
            load += part
            hops = max(hops, h)
        return load, hops

    def _loads_chunk(
        self, src_rank: I64, dst_rank: I64, dests: I64
    ) -> tuple[npt.NDArray[np.float64], int]:
        col = np.searchsorted(dests, dst_rank)
        to = self._to[dests]  # (m, V)
        if not np.isfinite(to[col, self.rank_nodes[src_rank]]).all():
            raise TopologyError("ranks", "two ranks are not connected")
        # entry u→v is on a cheapest path to t iff cost(u) = w + cost(v)
        on_dag = np.abs(to[:, self._row] - (self._w[None, :] + to[:, self._col])) <= self.TOL_NS
        dag = on_dag.T.astype(np.float64)  # (E, m)
        del on_dag
        next_hops = np.asarray(self._rows_mat @ dag)  # (V, m)
        nh = next_hops[self._row]
        share = np.divide(dag, nh, out=np.zeros_like(dag), where=nh > 0)
        del dag, nh
        x = np.zeros((self.graph.n_nodes, dests.size))
        np.add.at(x, (self.rank_nodes[src_rank], col), 1.0)
        sink = (self.rank_nodes[dests], np.arange(dests.size))
        x[sink] = 0.0
        load = np.zeros(self._row.size)
        hops = 0
        while x.any():
            hops += 1
            if hops > self.graph.n_nodes:
                raise TopologyError("ranks", "routing did not converge")
            flow = x[self._row] * share  # (E, m)
            load += flow.sum(axis=1)
            x = np.asarray(self._cols_mat @ flow)
            x[sink] = 0.0
            x[x < 1e-12] = 0.0
        return load, hops

    def _cost(self, kind: str, arg: int) -> PatternCost:
        if kind == "dim":
            return self._dim_cost(arg)
        src, dst = pattern_pairs(kind, arg, self.ranks, self.orders if kind == "ring" else None)
        return self._price(src, dst, kind == "uniform")

    def _dim_cost(self, axis: int) -> PatternCost:
        assert self.dims is not None
        dims = self.dims
        r = np.arange(self.ranks, dtype=np.int64)
        stride = math.prod(dims[axis + 1 :])
        k = dims[axis]
        x = (r // stride) % k
        up = r + np.where(x == k - 1, -(k - 1) * stride, stride)
        if k == 2:
            return self._price(r, up, False)
        down = r + np.where(x == 0, (k - 1) * stride, -stride)
        return self._price(np.concatenate([r, r]), np.concatenate([up, down]), False)

    def _price(self, src: I64, dst: I64, uniform: bool) -> PatternCost:
        if src.size == 0:
            return PatternCost(self.overhead_s, math.inf, 0)
        load, hops = self.loads(src, dst)
        alpha = self.overhead_s + float(self._lat[src, self.rank_nodes[dst]].max()) * 1e-9
        worst = self._worst(load)  # Gb/s⁻¹ per unit of flow
        if uniform:
            # a whole all-to-all of S per rank: each flow is S/p, time S·worst/p
            p = self.ranks
            return PatternCost(alpha, (p - 1) / worst, hops)
        return PatternCost(alpha, 1.0 / worst, hops)


    def _worst(self, load: npt.NDArray[np.float64]) -> float:
        """max over capacities of (flow units using it / its Gb/s)."""
        worst = float(np.max(load / self._entry_gbps))
        for mask, card, cap in self._card_groups:
            total = np.bincount(card, weights=load[mask], minlength=cap.size)
            worst = max(worst, float(np.max(total / cap)))
        return worst

    def card_scale_up_gbps(self) -> float:
        """Line rate a rank can send over its scale-up links: the least, over
        the ranks, of its links' sum and its injection limit."""
        up = self.graph.scale_up_entries()
        raw = self.graph.link_gbps[self.graph.entry_link].astype(np.float64)
        n_ep = self.graph.n_endpoints
        mask = up & (self._row < n_ep)
        total = np.bincount(self._row[mask], weights=raw[mask], minlength=n_ep)
        if self.graph.card_up_gbps is not None:
            total = np.minimum(total, self.graph.card_up_gbps.astype(np.float64))
        return float(total[self.rank_nodes].min())

    def card_rates(self, kind: str, arg: int = 0) -> dict[str, npt.NDArray[np.float64]]:
        """Gb/s each card sends and receives over its scale-up and its other
        links while ``kind`` runs at its priced rate (for the property test
        that no card exceeds its limits)."""
        if kind == "dim":
            raise ValueError("card_rates: not for dim patterns")
        src, dst = pattern_pairs(kind, arg, self.ranks, self.orders if kind == "ring" else None)
        load, _ = self.loads(src, dst)
        rate = load / self._worst(load)  # Gb/s per directed entry
        n_ep = self.graph.n_endpoints
        up = self.graph.scale_up_entries()
        out: dict[str, npt.NDArray[np.float64]] = {}
        for name, cls in (("up", up), ("out", ~up)):
            for way, end in (("send", self._row), ("recv", self._col)):
                mask = (end < n_ep) & cls
                out[f"{name}_{way}"] = np.asarray(
                    np.bincount(end[mask], weights=rate[mask], minlength=n_ep), dtype=np.float64
                )
        return out
