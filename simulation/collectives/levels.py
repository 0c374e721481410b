"""How a level of ranks prices a step pattern: the base class and the closed-form levels.

A :class:`Level` prices a pattern (:mod:`~simulation.collectives.patterns`)
as a :class:`PatternCost`:

* ``alpha_s`` = software overhead per message + the latency of the slowest
  path in the pattern (links + forwarding nodes, the metric of
  :mod:`simulation.topology.metrics`);
* ``gbps`` = the bandwidth each flow gets when all flows of the step run at
  once: the smallest share of any capacity it uses — a link (shared by d
  flows: link/d) or its card's injection limit.

Step time is then ``alpha_s + bytes / gbps`` (bulk-synchronous: the slowest
flow ends the step; taking the worst latency and the worst bandwidth
together is a slight over-estimate when they belong to different flows).

Levels (the routed one, exact, is in :mod:`~simulation.collectives.routed`):

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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .costs import torus_alltoall_load
from .patterns import I64, binary_tree_edges, pattern_pairs

__all__ = ["FlatLevel", "Level", "PatternCost", "TorusLevel", "UniformLevel"]


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
    in_network_reduction: bool = False
    """The switches joining this level's ranks reduce in flight (InfiniBand SHARP)."""
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
            "in_network_reduction": self.in_network_reduction,
        }


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
            src, dst = pattern_pairs(kind, arg, self.ranks, self.orders if kind == "ring" else None)
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
        src, dst = pattern_pairs(kind, arg, self.ranks, None)
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
            if p0 % (2 * arg) == 0:  # every pair inside one supernode
                return self.inner.cost("xor", arg)
            # some partners sit in another supernode (arg ≥ p0, or p0 not a multiple of
            # 2·arg, as with 72-card NVL72 racks): those flows take the network
            q0 = 1 << (p0.bit_length() - 1)
            local = self.inner.cost("xor", arg) if arg < q0 else PatternCost(0.0, math.inf, 0)
            return self._combine(local, o.alpha_s, o.gbps)
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
