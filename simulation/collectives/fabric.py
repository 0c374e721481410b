"""What a collective's traffic costs on the links a topology actually has.

A collective algorithm is a sequence of steps; in each step every rank sends
to a partner given by a *pattern* (ring neighbour, XOR partner at distance
d, cyclic shift by d, tree edges, torus neighbours along a dimension, or all
pairs). A :class:`Level` prices a pattern as a :class:`PatternCost`:

* ``alpha_s`` = software overhead per message + the latency of the slowest
  path in the pattern (links + forwarding nodes, the metric of
  :mod:`simulation.topology.metrics`);
* ``gbps`` = the bandwidth each flow gets when all flows of the step run at
  once: 1 / max over directed links of (flow units on the link / link Gb/s),
  every flow being one unit split over its equal-cost paths — so a link
  shared by d flows gives each link/d (contention included).

Step time is then ``alpha_s + bytes / gbps`` (bulk-synchronous: the slowest
flow ends the step; taking the worst latency and the worst bandwidth
together is a slight over-estimate when they belong to different flows).

Levels:

:class:`RoutedLevel`
    routes every flow on the level's graph over all lowest-latency paths
    (per-hop ECMP) — exact contention, for ranks × directed links ≤
    ``ROUTE_CELLS`` (a 512-card supernode, an 8×8×8 torus, a k=16 fat tree).
:class:`TorusLevel`
    the same quantities in closed form for a large standalone torus with
    uniform links (ranks in row-major order; snake order for the ring).
:class:`UniformLevel`
    one α and one bandwidth for every pattern: the level across supernodes
    (the non-blocking fat tree's share per card) and the fallback for large
    irregular graphs (no contention modelled — flagged ``routed=False``).
:class:`FlatLevel`
    a flat (non-hierarchical) algorithm over all ranks of a two-level
    fabric: steps whose partners share a supernode are priced on the inner
    level, steps that cross on the outer one.

:func:`fabric_from_topology` builds the levels from a
:class:`~simulation.topology.graph.Topology`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.sparse import csgraph

from simulation.topology.graph import NodeKind, Topology, TopologyError
from simulation.topology.search import latency_tree

from .costs import torus_alltoall_load
from .efficiency import Efficiency, fabric_efficiency

__all__ = [
    "ROUTE_CELLS",
    "CommFabric",
    "FlatLevel",
    "Level",
    "PatternCost",
    "RoutedLevel",
    "TorusLevel",
    "UniformLevel",
    "binary_tree_edges",
    "double_tree_edges",
    "fabric_from_topology",
    "rail_orders",
    "snake_order",
]

ROUTE_CELLS = 16_000_000
"""Largest ranks × directed links for which every flow is routed on the graph
(a 512-card supernode: 2 M; a k=16 fat tree: 6 M; beyond, closed forms)."""
CHUNK_CELLS = 2_000_000
"""Directed links × destinations handled at once while routing (memory bound)."""

I64 = npt.NDArray[np.int64]


def _gbps_to_Bps(gbps: float) -> float:
    return gbps * 1e9 / 8.0


@dataclass(frozen=True)
class PatternCost:
    """Price of one step pattern: worst α (s) and the slowest flow's Gb/s."""

    alpha_s: float
    gbps: float
    hops: int

    def time(self, nbytes: float) -> float:
        """α + bytes / bandwidth for one step moving ``nbytes`` per flow."""
        return self.alpha_s + nbytes / _gbps_to_Bps(self.gbps)


# ------------------------------------------------------------------ orders
def snake_order(dims: tuple[int, ...]) -> I64:
    """Row-major ids in boustrophedon (reflected mixed-radix Gray) order.

    Consecutive ids differ by one step in one dimension; if the first
    dimension is even the last id is also adjacent to the first (through
    that dimension's wrap link), so on a torus the order is a Hamiltonian
    cycle and a ring over it uses only nearest-neighbour links. Dimensions
    are re-ordered to put an even one first when there is one.
    """
    dims_l = list(dims)
    even = [i for i, k in enumerate(dims_l) if k % 2 == 0]
    perm = (
        ([even[0]] + [i for i in range(len(dims_l)) if i != even[0]])
        if even
        else list(range(len(dims_l)))
    )
    pdims = [dims_l[i] for i in perm]
    coords = np.zeros((1, 0), dtype=np.int64)
    for k in reversed(pdims):
        m = coords.shape[0]
        blocks = []
        for x in range(k):
            sub = coords if x % 2 == 0 else coords[::-1]
            blocks.append(np.column_stack([np.full(m, x, dtype=np.int64), sub]))
        coords = np.vstack(blocks)
    # coords columns follow pdims; map back to the original dimension order
    full = np.zeros_like(coords)
    for j, axis in enumerate(perm):
        full[:, axis] = coords[:, j]
    ids = np.zeros(coords.shape[0], dtype=np.int64)
    for axis, k in enumerate(dims_l):
        ids = ids * k + full[:, axis]
    return ids


def rail_orders(p: int, server_cards: int, rails: int) -> list[I64]:
    """One ring order per NIC rail, as NCCL builds its channels across servers.

    Ranks are consecutive servers of ``server_cards`` cards. Channel c
    visits each server's cards starting at slot ``c·server_cards/rails``
    (rotated), so it leaves a server from the card just before that slot and
    enters the next one at it: successive channels cross between servers on
    successive rails, and together they use every rail (NCCL's rings on a
    rail-optimised DGX; ``NCCL_CROSS_NIC=0``). The crossing hop itself is
    routed like any flow (NVLink to the rail's card, then its NIC — NCCL's
    PXN — or the other way round).
    """
    servers = p // server_cards
    base = (np.arange(servers, dtype=np.int64) * server_cards)[:, None]
    out = []
    step = max(server_cards // max(rails, 1), 1)
    for c in range(min(rails, server_cards)):
        local = (np.arange(server_cards, dtype=np.int64) + c * step) % server_cards
        out.append((base + local[None, :]).ravel())
    return out


def binary_tree_edges(p: int) -> tuple[I64, I64, int]:
    """(parent, child) rank arrays and depth of NCCL's binary tree on p ranks.

    As ``ncclGetBtree`` (NCCL ``src/graph/trees.cc``): rank r > 0 with lowest
    set bit b has parent (r ^ b) | 2b, or r ^ b if that is ≥ p; rank 0 is the
    root with one child. Every odd rank is a leaf; the depth is ⌈log₂ p⌉.
    """
    r = np.arange(1, p, dtype=np.int64)
    bit = r & -r
    up = (r ^ bit) | (bit << 1)
    up = np.where(up >= p, r ^ bit, up)
    parent = np.full(p, -1, dtype=np.int64)
    parent[1:] = up
    depth = np.zeros(p, dtype=np.int64)
    anc = parent.copy()
    while (anc >= 0).any():  # pointer walk, at most ⌈log₂ p⌉ rounds
        live = anc >= 0
        depth[live] += 1
        anc[live] = parent[anc[live]]
    return up, r, int(depth.max()) if p > 1 else 0


def double_tree_edges(p: int) -> tuple[I64, I64, int]:
    """Edges of NCCL's double binary tree (``ncclGetDtree``).

    The second tree is the first mirrored (r ↦ p−1−r) when p is even and
    shifted by one when p is odd, so that no rank is interior in both
    (Sanders, Speck & Träff 2009): each rank forwards at most one tree's data.
    """
    par, ch, depth = binary_tree_edges(p)
    if p % 2 == 0:
        par2, ch2 = p - 1 - par, p - 1 - ch
    else:
        par2, ch2 = (par + 1) % p, (ch + 1) % p
    return np.concatenate([par, par2]), np.concatenate([ch, ch2]), depth


# ------------------------------------------------------------------ levels
@dataclass
class Level:
    """Ranks of one level and how to price a pattern among them (base class)."""

    name: str
    ranks: int
    overhead_s: float
    dims: tuple[int, ...] | None = None
    routed: bool = False
    orders: list[I64] | None = None
    """Ring channels: each order is run in both directions, each directed ring
    carrying an equal share of the data (None: rank order, both ways)."""
    nvls_ranks: int = 0
    """Cards per in-switch-reduction domain (NVLS) when all ranks are in one; 0: none."""
    nvls_efficiency: float = 1.0
    _cache: dict[tuple[str, int], PatternCost] = field(default_factory=dict, repr=False)

    @property
    def ring_channels(self) -> int:
        """Directed rings running at once (two per order)."""
        return 2 * (len(self.orders) if self.orders else 1)

    def cost(self, kind: str, arg: int = 0) -> PatternCost:
        """Price pattern ``kind`` (``ring``, ``xor``, ``shift``, ``pair``,
        ``tree``, ``dim``, ``uniform``) with its argument
        (distance, pair count or dimension index), cached."""
        key = (kind, int(arg))
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cost(kind, int(arg))
            self._cache[key] = hit
        return hit

    def _cost(self, kind: str, arg: int) -> PatternCost:  # pragma: no cover - abstract
        raise NotImplementedError

    def tree_depth(self) -> int:
        """Depth of the double binary tree over this level's ranks."""
        return binary_tree_edges(self.ranks)[2] if self.ranks > 1 else 0

    def describe(self) -> dict[str, Any]:
        """Summary for results: ranks, whether routed, the ring's α and Gb/s."""
        ring = self.cost("ring") if self.ranks > 1 else PatternCost(0.0, math.inf, 0)
        return {
            "name": self.name,
            "ranks": self.ranks,
            "routed": self.routed,
            "dims": list(self.dims) if self.dims else None,
            "ring_alpha_us": ring.alpha_s * 1e6,
            "ring_gbps": ring.gbps,
            "ring_channels": self.ring_channels,
            "ring_busbw_gbps": ring.gbps * self.ring_channels,
            "nvls": self.nvls_ranks > 0,
        }


def _pairs(kind: str, arg: int, p: int, orders: list[I64] | None) -> tuple[I64, I64]:
    """Sender and receiver ranks of a pattern on p ranks.

    ``ring``: every order's ring in both directions, one flow per rank and
    directed ring — with p = 2 the two directions of one order are two flows
    on the same pair, as they are on the wire.
    """
    r = np.arange(p, dtype=np.int64)
    if kind == "ring":
        srcs, dsts = [], []
        for o in orders if orders else [r]:
            nxt = np.roll(o, -1)
            srcs += [o, nxt]
            dsts += [nxt, o]
        return np.concatenate(srcs), np.concatenate(dsts)
    if kind == "xor":
        q = 1 << (p.bit_length() - 1)
        s = r[r < q]
        return s, s ^ arg
    if kind == "shift":
        return r, (r + arg) % p
    if kind == "pair":  # TRG's fold: ranks 2i ↔ 2i+1 for i < arg
        even = 2 * np.arange(min(arg, p // 2), dtype=np.int64)
        return np.concatenate([even, even + 1]), np.concatenate([even + 1, even])
    if kind == "tree":
        par, ch, _ = double_tree_edges(p)
        return np.concatenate([par, ch]), np.concatenate([ch, par])
    if kind == "uniform":
        src = np.repeat(r, p)
        dst = np.tile(r, p)
        keep = src != dst
        return src[keep], dst[keep]
    raise ValueError(f"unknown pattern {kind!r}")


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
        src, dst = _pairs(kind, arg, self.ranks, self.orders if kind == "ring" else None)
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
        src, dst = _pairs(kind, arg, self.ranks, self.orders if kind == "ring" else None)
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


class UniformLevel(Level):
    """One α and bandwidth for every pattern (no contention modelled).

    ``gbps`` is what one card may inject when every card sends (its share
    of the network), ``single_gbps`` what one flow alone gets: a pattern in
    which each card sends d flows gives each min(single, gbps/d).
    """

    def __init__(
        self,
        name: str,
        ranks: int,
        alpha_s: float,
        gbps: float,
        *,
        single_gbps: float | None = None,
        dims: tuple[int, ...] | None = None,
        routed: bool = False,
        note: str = "",
    ) -> None:
        super().__init__(name=name, ranks=ranks, overhead_s=0.0, dims=dims)
        self.alpha_s = alpha_s
        self.gbps = gbps
        self.single_gbps = single_gbps if single_gbps is not None else gbps
        self.routed = routed
        self.note = note

    def _cost(self, kind: str, arg: int) -> PatternCost:
        if kind == "uniform":
            return PatternCost(self.alpha_s, self.gbps, 0)
        if kind == "dim":
            d = 2
        else:
            src, dst = _pairs(kind, arg, self.ranks, self.orders if kind == "ring" else None)
            if not src.size:
                return PatternCost(self.alpha_s, math.inf, 0)
            d = int(max(np.bincount(src).max(), np.bincount(dst).max()))
        return PatternCost(self.alpha_s, min(self.single_gbps, self.gbps / d), 0)

    def describe(self) -> dict[str, Any]:
        """Adds the per-card shared and single-flow bandwidths and the note."""
        out = super().describe()
        out.update(shared_gbps=self.gbps, single_flow_gbps=self.single_gbps, note=self.note)
        return out


class TorusLevel(Level):
    """Closed-form pattern costs on a large torus with uniform links.

    Ranks are row-major coordinates (snake order for the ring, which is
    then nearest-neighbour). A pattern's hop count per flow is the torus
    distance; for XOR/shift partners differing in one dimension by d the
    shortest path is unique (d < k/2) and the d flows crossing any link of
    that line share it, so the bandwidth is link/d; at d = k/2 ECMP splits
    every flow over both directions, link/(d/2). The routed level finds the
    same (tested). Other patterns take the longest path's hops as their
    contention — a stated approximation.
    """

    def __init__(
        self,
        name: str,
        dims: tuple[int, ...],
        link_gbps: float,
        link_ns: float,
        router_ns: float,
        overhead_s: float,
        *,
        efficiency: float = 1.0,
        card_gbps: float = math.inf,
    ) -> None:
        super().__init__(name=name, ranks=math.prod(dims), overhead_s=overhead_s, dims=dims)
        self.routed = True
        self.link_gbps = link_gbps * efficiency
        self.card_gbps = card_gbps * efficiency
        self.link_ns = link_ns
        self.router_ns = router_ns

    def _hops(self, a: I64, b: I64) -> I64:
        assert self.dims is not None
        total = np.zeros(a.size, dtype=np.int64)
        stride = self.ranks
        for k in self.dims:
            stride //= k
            d = np.abs((a // stride) % k - (b // stride) % k)
            total += np.minimum(d, k - d)
        return total

    def _of_hops(self, h: int, share: float, flows: int = 1) -> PatternCost:
        """α of h hops; a flow's Gb/s: its link share, and its card's limit
        shared by the ``flows`` each card sends."""
        lat = h * self.link_ns + max(h - 1, 0) * self.router_ns
        gbps = min(self.link_gbps / max(share, 1.0), self.card_gbps / flows)
        return PatternCost(self.overhead_s + lat * 1e-9, gbps, h)

    def _cost(self, kind: str, arg: int) -> PatternCost:
        if kind == "ring":
            return self._of_hops(1, 1.0, 2)
        if kind == "dim":
            assert self.dims is not None
            return self._of_hops(1, 1.0, 2 if self.dims[arg] > 2 else 1)
        if kind == "uniform":
            assert self.dims is not None
            load = torus_alltoall_load(self.dims)
            p = self.ranks
            diam = sum(k // 2 for k in self.dims)
            c = self._of_hops(diam, 1.0)
            gbps = min(self.link_gbps * (p - 1) / p / load, self.card_gbps)
            return PatternCost(c.alpha_s, gbps, diam)
        src, dst = _pairs(kind, arg, self.ranks, None)
        if not src.size:
            return PatternCost(self.overhead_s, math.inf, 0)
        h = int(self._hops(src, dst).max())
        return self._of_hops(h, self._contention(src, dst, h))

    def _contention(self, src: I64, dst: I64, h: int) -> float:
        """Flows per directed link: d along one line, d/2 when d = k/2 (ECMP
        splits both ways); for anything else the longest path's hops."""
        assert self.dims is not None
        stride = self.ranks
        moved = []
        for k in self.dims:
            stride //= k
            d = np.abs((src // stride) % k - (dst // stride) % k)
            d = np.minimum(d, k - d)
            if d.any():
                moved.append((k, d))
        if len(moved) == 1:
            k, d = moved[0]
            if (d == d.max()).all() or (d[d > 0] == d.max()).all():
                dist = int(d.max())
                return dist / 2 if 2 * dist == k else float(dist)
        return float(h)


class FlatLevel(Level):
    """A flat algorithm over all ranks of a two-level fabric (see module doc)."""

    def __init__(self, inner: Level, outer: UniformLevel) -> None:
        super().__init__(
            name=f"flat over {inner.ranks * outer.ranks} ranks",
            ranks=inner.ranks * outer.ranks,
            overhead_s=inner.overhead_s,
        )
        self.inner = inner
        self.outer = outer
        self.routed = inner.routed

    @property
    def ring_channels(self) -> int:
        """The inner level's channels, each crossing every supernode boundary."""
        return self.inner.ring_channels

    def _combine(self, a: PatternCost, alpha: float, gbps: float) -> PatternCost:
        return PatternCost(max(a.alpha_s, alpha), min(a.gbps, gbps), a.hops)

    def _cost(self, kind: str, arg: int) -> PatternCost:
        p0 = self.inner.ranks
        o = self.outer
        if kind == "ring":
            # each directed channel leaves every supernode once: its flow gets
            # one path's speed, and the channels share the supernode's uplinks
            cross = min(o.single_gbps, o.gbps * p0 / self.ring_channels)
            return self._combine(self.inner.cost("ring"), o.alpha_s, cross)
        if kind == "tree":  # few crossing edges per supernode
            return self._combine(self.inner.cost(kind), o.alpha_s, o.single_gbps)
        if kind == "xor":
            return self.inner.cost("xor", arg) if arg < p0 else PatternCost(o.alpha_s, o.gbps, 0)
        if kind == "pair":
            return self.inner.cost("pair", min(arg, p0 // 2))
        if kind == "shift":
            inner = (
                self.inner.cost("shift", arg % p0) if arg % p0 else PatternCost(0.0, math.inf, 0)
            )
            return self._combine(inner, o.alpha_s, o.gbps)
        if kind == "uniform":
            # (p−p0)/p of each rank's bytes cross at the shared rate, the rest inside
            p = self.ranks
            u = self.inner.cost("uniform")
            cross = (p - p0) / (p * o.gbps)
            inside = (p0 - 1) / (p * u.gbps)
            return PatternCost(max(o.alpha_s, u.alpha_s), (p - 1) / p / max(cross, inside), 0)
        raise ValueError(f"unknown pattern {kind!r}")

    def tree_depth(self) -> int:
        """Depth of the double binary tree over all ranks."""
        return binary_tree_edges(self.ranks)[2]


@dataclass
class CommFabric:
    """The levels a collective runs on: [inner] or [inner, outer]."""

    levels: list[Level]
    notes: list[str] = field(default_factory=list)
    efficiency: Efficiency | None = None

    @property
    def ranks(self) -> int:
        """Total ranks (product over levels)."""
        return math.prod(level.ranks for level in self.levels)

    def flat(self) -> Level:
        """The single level a flat (non-hierarchical) algorithm sees."""
        if len(self.levels) == 1:
            return self.levels[0]
        outer = self.levels[1]
        assert isinstance(outer, UniformLevel)
        return FlatLevel(self.levels[0], outer)

    def describe(self) -> list[dict[str, Any]]:
        """Per-level summaries."""
        return [level.describe() for level in self.levels]


# ----------------------------------------------------------- construction
def _channel_orders(graph: Topology, p: int) -> list[I64] | None:
    """NCCL-style ring channels for ``p`` ranks on ``graph`` (None: the default).

    When the ranks span several servers whose cards reach each other only
    through their NIC rails (a DGX unit), one channel per rail
    (:func:`rail_orders`); otherwise one order, run both ways — inside a
    switch-based domain more channels add nothing here, because each card's
    injection limit, not the number of rings, bounds it.
    """
    cps = int(graph.params.get("server_cards", 0))
    rails = int(graph.params.get("rails", 0))
    per_server = graph.params.get("scale_up_kind") == "server_mesh"
    has_nics = bool((graph.node_kind == NodeKind.NIC).any())
    if per_server and cps and rails > 1 and has_nics and p > cps and p % cps == 0:
        return rail_orders(p, cps, rails)
    return None


def _level_for(
    name: str,
    graph: Topology,
    rank_nodes: I64,
    overhead_s: float,
    dims: tuple[int, ...] | None,
    notes: list[str],
    eff: Efficiency,
) -> Level:
    p = int(rank_nodes.size)
    if p * graph.indices.size <= ROUTE_CELLS:
        routed = RoutedLevel(
            name,
            graph,
            rank_nodes,
            overhead_s,
            dims,
            efficiency=eff,
            orders=_channel_orders(graph, p),
        )
        domain = int(graph.params.get("nvls_domain", 0))
        if domain and p <= domain:  # every rank in one switch domain that reduces
            routed.nvls_ranks = p
            routed.nvls_efficiency = eff.nvls
        return routed
    uniform = (
        graph.n_links > 0
        and float(graph.link_gbps.min()) == float(graph.link_gbps.max())
        and float(graph.link_ns.min()) == float(graph.link_ns.max())
    )
    if dims and math.prod(dims) == p and graph.family in ("torus", "ring") and uniform:
        caps = graph.card_up_gbps
        return TorusLevel(
            name,
            dims,
            float(graph.link_gbps[0]),
            float(graph.link_ns[0]),
            float(graph.node_ns[0]),
            overhead_s,
            efficiency=eff.scale_up,
            card_gbps=float(caps[rank_nodes].min()) if caps is not None else math.inf,
        )
    dist, _ = latency_tree(graph, int(rank_nodes[0]))
    lat = float(np.max(dist[rank_nodes][np.isfinite(dist[rank_nodes])]))
    ends = np.isin(graph.link_u, rank_nodes) | np.isin(graph.link_v, rank_nodes)
    gbps = float(graph.link_gbps[ends].min()) * min(eff.scale_up, eff.scale_out)
    for caps in (graph.card_up_gbps, graph.card_out_gbps):  # a card's ports bound it too
        if caps is not None:
            gbps = min(gbps, float(caps[rank_nodes].min()) * min(eff.scale_up, eff.scale_out))
    notes.append(
        f"{name}: too large to route ({p} ranks × {graph.n_nodes} nodes); no contention modelled"
    )
    return UniformLevel(name, p, overhead_s + lat * 1e-9, gbps, routed=False)


def _network_share(topo: Topology, group: int, cards: int) -> float:
    """Per-card bandwidth to the shared network when all cards of a group send.

    min over the cuts between a supernode's cards and the core: each card's
    own link(s) out of the fabric, the group's access→NIC links, the
    group's NIC→leaf links (each divided by the cards sharing them), times
    the oversubscription (up/down capacity, capped at 1) of each switch
    tier above.
    """
    g = topo.group
    kind = topo.node_kind
    gu, gv = g[topo.link_u], g[topo.link_v]
    ku, kv = kind[topo.link_u], kind[topo.link_v]
    gb = topo.link_gbps.astype(np.float64)
    in_group_u, in_group_v = gu == group, gv == group
    # group → shared network (NIC → leaf)
    up = (in_group_u & (gv < 0)) | (in_group_v & (gu < 0))
    shares = [float(gb[up].sum()) / cards]
    # card → access switch
    pcie = NodeKind.PCIE_SWITCH.value
    card = NodeKind.CARD.value
    nic = NodeKind.NIC.value
    acc = (in_group_u & in_group_v) & (  # a card's own link to its PCIe switch or NIC
        ((ku == card) & np.isin(kv, [pcie, nic])) | ((kv == card) & np.isin(ku, [pcie, nic]))
    )
    if acc.any():
        shares.append(float(gb[acc].min()))
    a2n = (in_group_u & in_group_v) & (((ku == pcie) & (kv == nic)) | ((kv == pcie) & (ku == nic)))
    if a2n.any():
        shares.append(float(gb[a2n].sum()) / cards)
    factor = 1.0
    for low, high in ((NodeKind.LEAF, NodeKind.SPINE), (NodeKind.SPINE, NodeKind.CORE)):
        lo_v, hi_v = low.value, high.value
        upl = ((ku == lo_v) & (kv == hi_v)) | ((kv == lo_v) & (ku == hi_v))
        down = ((ku == lo_v) & (kv != hi_v)) | ((kv == lo_v) & (ku != hi_v))
        if upl.any() and down.any():
            factor = min(factor, float(gb[upl].sum()) / float(gb[down].sum()))
    return min(shares[0] * min(factor, 1.0), *shares[1:]) if len(shares) > 1 else shares[0] * factor


def _supernode_graph(topo: Topology) -> Topology:
    """Supernode 0's own graph: its cards, PCIe switches and fabric switches.

    When those do not connect its cards — a DGX-style unit whose NVLink
    domains are single servers, joined only through their rail NICs and
    leaves (NVIDIA DGX SuperPOD reference architecture) — the unit's NICs
    and the leaves they attach to are added: that is where its traffic runs
    (across rails it takes one NVLink hop, never a spine: fewer hops and
    less latency), so the inner level stays routed on real links.
    """
    kind, group = topo.node_kind, topo.group
    members = np.flatnonzero(
        (group == 0) & np.isin(kind, [NodeKind.CARD, NodeKind.PCIE_SWITCH, NodeKind.SWITCH])
    )
    sub = _keep_params(topo, topo.induced(members, name="supernode 0"))
    _, labels = csgraph.connected_components(sub.adjacency(), directed=False)
    if np.all(labels[: sub.n_endpoints] == labels[0]):
        return sub
    nics = np.flatnonzero((group == 0) & (kind == NodeKind.NIC))
    on_nic = np.isin(topo.link_u, nics) | np.isin(topo.link_v, nics)
    ends = np.concatenate([topo.link_u[on_nic], topo.link_v[on_nic]])
    leaves = ends[kind[ends] == NodeKind.LEAF]
    return _keep_params(
        topo, topo.induced(np.concatenate([members, nics, leaves]), name="supernode 0")
    )


_LEVEL_PARAMS = (
    "scale_up_kind",
    "server_cards",
    "rails",
    "nic_per_card",
    "nvls_domain",
    "scale_up_technology",
    "scale_out_technology",
)


def _keep_params(topo: Topology, sub: Topology) -> Topology:
    """Carry what the collective levels read (servers, rails, NVLS, technologies)
    from the cluster to a subgraph of it."""
    sub.params.update({k: topo.params[k] for k in _LEVEL_PARAMS if k in topo.params})
    return sub


def fabric_from_topology(
    topo: Topology,
    ranks: int | None = None,
    *,
    overhead_ns: float = 0.0,
    scale_up_efficiency: float | None = None,
    scale_out_efficiency: float | None = None,
) -> CommFabric:
    """Levels for ``ranks`` ranks placed on the first cards of ``topo``.

    Standalone families and a job inside one supernode: one level, routed
    on the graph (the supernode's cards and its internal switches). A job
    over several supernodes of a cluster: the supernode level plus a level
    across supernodes whose α is the worst cross-supernode path latency and
    whose bandwidth is the per-card network share (:func:`_network_share`),
    the core fat tree being non-blocking. Ranks must then fill whole
    supernodes.

    Bandwidths are scaled by the protocol efficiency of their fabric
    (:func:`~simulation.collectives.efficiency.fabric_efficiency`: the
    technologies the topology declares, or the overrides given).
    """
    eff = fabric_efficiency(topo, scale_up_efficiency, scale_out_efficiency)
    n = topo.n_endpoints
    p = n if ranks is None else int(ranks)
    if p < 2:
        raise TopologyError("ranks", f"a collective needs at least 2 ranks, got {p}")
    if p > n:
        raise TopologyError("ranks", f"{p} ranks but the topology has only {n} cards")
    overhead_s = overhead_ns * 1e-9
    notes: list[str] = []
    grp = topo.group[:n]
    grouped = n > 0 and int(grp.min()) >= 0 and int(grp.max()) > 0
    dims_param = (
        topo.params.get("dims")
        if topo.family in ("ring", "torus")
        else topo.params.get("fabric_dims")
    )
    dims = tuple(int(k) for k in dims_param) if dims_param else None
    if not grouped:
        graph = topo
        rank_nodes = np.arange(p, dtype=np.int64)
        level = _level_for("fabric", graph, rank_nodes, overhead_s, dims, notes, eff)
        return CommFabric([level], notes, eff)
    p0 = int((grp == 0).sum())
    sub = _supernode_graph(topo)
    if p <= p0:
        level = _level_for(
            "supernode", sub, np.arange(p, dtype=np.int64), overhead_s, dims, notes, eff
        )
        return CommFabric([level], notes, eff)
    sizes = np.bincount(grp)
    if p % p0 or not np.all(sizes[: p // p0] == p0):
        raise TopologyError(
            "ranks",
            f"{p} ranks must fill whole supernodes of {p0} cards (or fit in one)",
        )
    p1 = p // p0
    inner = _level_for(
        "supernode", sub, np.arange(p0, dtype=np.int64), overhead_s, dims, notes, eff
    )
    dist, pred = latency_tree(topo, 0)
    others = (grp >= 1) & (grp < p1)
    lat = dist[:n][others]
    if not np.isfinite(lat).all():
        raise TopologyError("ranks", "some supernodes are not connected to supernode 0")
    far = int(np.flatnonzero(others)[int(np.argmax(lat))])
    path = [far]
    while path[-1] != 0:
        path.append(int(pred[path[-1]]))
    links = [topo.link_between(a, b) for a, b in zip(path, path[1:], strict=False)]
    single = float(topo.link_gbps[np.asarray(links)].min())
    shared = _network_share(topo, 0, p0)
    if topo.card_out_gbps is not None:  # no card injects more than its NICs
        card_cap = float(topo.card_out_gbps[:p0].min())
        single, shared = min(single, card_cap), min(shared, card_cap)
    single, shared = single * eff.scale_out, shared * eff.scale_out
    outer = UniformLevel(
        "across supernodes",
        p1,
        overhead_s + float(lat.max()) * 1e-9,
        shared,
        single_gbps=single,
        note="core fat tree taken as non-blocking; per-card share of the network uplinks",
    )
    return CommFabric([inner, outer], notes, eff)
