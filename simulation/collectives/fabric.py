"""The levels a collective runs on, built from a topology.

:func:`fabric_from_topology` turns a :class:`~simulation.topology.graph.Topology`
and a rank count into a :class:`CommFabric`: one level for a standalone family or
a job inside one supernode (routed on its graph when small enough:
:class:`~simulation.collectives.routed.RoutedLevel`; otherwise a closed-form
:class:`~simulation.collectives.levels.TorusLevel` or
:class:`~simulation.collectives.levels.UniformLevel`), two for a job across
supernodes (the supernode level plus a uniform level across them). It picks each
level's ring channels (:mod:`~simulation.collectives.patterns`), its protocol
efficiency (:mod:`~simulation.collectives.efficiency`) and whether NVLS applies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.sparse import csgraph

from simulation.topology.graph import NodeKind, Topology, TopologyError
from simulation.topology.search import latency_tree

from .efficiency import Efficiency, fabric_efficiency
from .levels import FlatLevel, Level, TorusLevel, UniformLevel
from .patterns import I64, rail_orders
from .routed import ROUTE_CELLS, RoutedLevel

__all__ = ["CommFabric", "fabric_from_topology"]


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
    "in_network_reduction",
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
    outer.in_network_reduction = bool(topo.params.get("in_network_reduction", False))
    return CommFabric([inner, outer], notes, eff)
