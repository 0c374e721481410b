"""Builders for every standalone topology family (the whole cluster: :mod:`.cluster`).

All builders are vectorised (numpy index arithmetic, no per-node Python
loop), so the million-card cluster builds in about a second.

Node numbering is fixed and documented because symmetry claims rest on it:

* torus / mesh: row-major coordinates, the last dimension varies fastest;
* fat tree: hosts first (edge switch by edge switch), then edge/leaf,
  aggregation/spine and core switches;
* cluster: cards supernode by supernode (each in its fabric's numbering),
  then per-supernode fabric switches, PCIe access switches (one per
  ``cards_per_switch`` consecutive cards; none with ``nic_per_card``), NICs
  (server-major; with ``nic_per_card`` NIC *i* is card *i*'s, so card slot
  *r* of a server is rail *r*), and the core network's switches. NIC ports
  are attached to leaf ports in the order (supernode, rail, server): one
  rail of one supernode is a contiguous block (rail-optimised wiring, as in
  NVIDIA's DGX SuperPOD reference architecture).
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

import numpy as np

from .graph import IntArray, NodeKind, Topology, TopologyError
from .spec import (
    DEFAULT_LINK_GBPS,
    DEFAULT_LINK_NS,
    DEFAULT_SWITCH_NS,
    FamilySpec,
    TierSpec,
)
from .wiring import I64, clos_network, complete_links, grid_links, mesh_classes

__all__ = [
    "build",
    "fat_tree",
    "full_mesh",
    "mesh",
    "ring",
    "star",
    "torus",
]


# ------------------------------------------------------------------- families
def _direct(
    name: str,
    family: str,
    n: int,
    links: tuple[I64, I64],
    gbps: float,
    link_ns: float,
    switch_ns: float,
    classes: IntArray,
    params: dict[str, object],
) -> Topology:
    return Topology.from_links(
        name=name,
        family=family,
        n_nodes=n,
        n_endpoints=n,
        link_u=links[0],
        link_v=links[1],
        link_gbps=gbps,
        link_ns=link_ns,
        node_kind=NodeKind.CARD,
        node_ns=switch_ns,
        endpoint_class=classes,
        params=params,
    )


def ring(
    nodes: int,
    *,
    link_gbps: float = DEFAULT_LINK_GBPS,
    link_ns: float = DEFAULT_LINK_NS,
    switch_ns: float = DEFAULT_SWITCH_NS,
) -> Topology:
    """A ring of ``nodes`` cards (a 1-D torus)."""
    if nodes < 2:
        raise TopologyError("nodes", f"a ring needs at least 2 nodes, got {nodes}")
    return _direct(
        f"ring {nodes}",
        "ring",
        nodes,
        grid_links([nodes], True),
        link_gbps,
        link_ns,
        switch_ns,
        np.zeros(nodes, np.int32),
        {"nodes": nodes, "dims": [nodes]},
    )


def torus(
    dims: Sequence[int],
    *,
    link_gbps: float = DEFAULT_LINK_GBPS,
    link_ns: float = DEFAULT_LINK_NS,
    switch_ns: float = DEFAULT_SWITCH_NS,
) -> Topology:
    """A k-ary n-cube / mixed-radix torus C_{k1} × … × C_{kn}.

    A dimension of 2 has a single link between its two nodes (the wrap link
    would be parallel to it), as in a hypercube.
    """
    dims = _check_dims(dims)
    n = prod(dims)
    return _direct(
        "torus " + "×".join(map(str, dims)),
        "torus",
        n,
        grid_links(dims, True),
        link_gbps,
        link_ns,
        switch_ns,
        np.zeros(n, np.int32),
        {"dims": list(dims)},
    )


def mesh(
    dims: Sequence[int],
    *,
    link_gbps: float = DEFAULT_LINK_GBPS,
    link_ns: float = DEFAULT_LINK_NS,
    switch_ns: float = DEFAULT_SWITCH_NS,
) -> Topology:
    """A mesh (grid without wrap-around links)."""
    dims = _check_dims(dims)
    n = prod(dims)
    return _direct(
        "mesh " + "×".join(map(str, dims)),
        "mesh",
        n,
        grid_links(dims, False),
        link_gbps,
        link_ns,
        switch_ns,
        mesh_classes(dims),
        {"dims": list(dims)},
    )


def full_mesh(
    nodes: int,
    *,
    link_gbps: float = DEFAULT_LINK_GBPS,
    link_ns: float = DEFAULT_LINK_NS,
    switch_ns: float = DEFAULT_SWITCH_NS,
) -> Topology:
    """``nodes`` cards with a direct link between every two (complete graph)."""
    if nodes < 2:
        raise TopologyError("nodes", f"a full mesh needs at least 2 nodes, got {nodes}")
    return _direct(
        f"full mesh {nodes}",
        "full_mesh",
        nodes,
        complete_links(nodes),
        link_gbps,
        link_ns,
        switch_ns,
        np.zeros(nodes, np.int32),
        {"nodes": nodes},
    )


def star(
    nodes: int,
    *,
    link_gbps: float = DEFAULT_LINK_GBPS,
    link_ns: float = DEFAULT_LINK_NS,
    switch_ns: float = DEFAULT_SWITCH_NS,
) -> Topology:
    """``nodes`` cards on one PCIe switch (node ``nodes`` is the switch)."""
    if nodes < 2:
        raise TopologyError("nodes", f"a star needs at least 2 cards, got {nodes}")
    kinds = np.full(nodes + 1, NodeKind.CARD, dtype=np.int8)
    kinds[nodes] = NodeKind.PCIE_SWITCH
    ns = np.zeros(nodes + 1, dtype=np.float32)
    ns[nodes] = switch_ns
    return Topology.from_links(
        name=f"star {nodes}",
        family="star",
        n_nodes=nodes + 1,
        n_endpoints=nodes,
        link_u=np.arange(nodes),
        link_v=np.full(nodes, nodes),
        link_gbps=link_gbps,
        link_ns=link_ns,
        node_kind=kinds,
        node_ns=ns,
        endpoint_class=np.zeros(nodes, np.int32),
        params={"nodes": nodes},
    )


def fat_tree(
    k: int,
    tiers: int = 3,
    *,
    link_gbps: float = DEFAULT_LINK_GBPS,
    link_ns: float = DEFAULT_LINK_NS,
    switch_ns: float = DEFAULT_SWITCH_NS,
) -> Topology:
    """A full k-ary fat tree with 2 (k²/2 hosts) or 3 (k³/4 hosts) tiers."""
    if k < 2 or k % 2:
        raise TopologyError("k", f"a k-ary fat tree needs an even k ≥ 2, got {k}")
    if tiers not in (2, 3):
        raise TopologyError("tiers", f"2 or 3 tiers, got {tiers}")
    hosts = k * k // 2 if tiers == 2 else k**3 // 4
    spec = [TierSpec(f"tier{i}", k, link_gbps, link_ns, switch_ns) for i in range(tiers)]
    c = clos_network(hosts, spec)
    u = np.where(c.u_is_host, c.u, c.u + hosts)
    v = c.v + hosts
    return Topology.from_links(
        name=f"fat tree k={k} ({tiers} tiers)",
        family="fat_tree",
        n_nodes=hosts + c.n_switches,
        n_endpoints=hosts,
        link_u=u,
        link_v=v,
        link_gbps=c.gbps,
        link_ns=c.link_ns,
        node_kind=np.concatenate([np.full(hosts, NodeKind.CARD, np.int8), c.kind]),
        node_ns=np.concatenate([np.zeros(hosts, np.float32), c.ns]),
        endpoint_class=np.zeros(hosts, np.int32),
        params={"k": k, "tiers": tiers},
    )


def _check_dims(dims: Sequence[int]) -> list[int]:
    out = [int(k) for k in dims]
    if not out:
        raise TopologyError("dims", "at least one dimension")
    for i, k in enumerate(out):
        if k <= 1:
            raise TopologyError(f"dims[{i}]", f"every dimension must be ≥ 2, got {k}")
    return out


def build(spec: FamilySpec) -> Topology:
    """Build a standalone family from its :class:`FamilySpec`."""
    topo = _build_family(spec)
    if spec.card_gbps is not None:
        topo = topo.with_card_limits(spec.card_gbps)
    return topo


def _build_family(spec: FamilySpec) -> Topology:
    kw = {"link_gbps": spec.link_gbps, "link_ns": spec.link_ns, "switch_ns": spec.switch_ns}
    if spec.family == "ring":
        return ring(spec.nodes or 0, **kw)
    if spec.family == "torus":
        return torus(spec.dims or (), **kw)
    if spec.family == "mesh":
        return mesh(spec.dims or (), **kw)
    if spec.family == "full_mesh":
        return full_mesh(spec.nodes or 0, **kw)
    if spec.family == "star":
        return star(spec.nodes or 0, **kw)
    if spec.family == "fat_tree":
        return fat_tree(spec.k or 0, spec.tiers or 3, **kw)
    raise TopologyError("family", f"unknown family {spec.family!r}")
