"""Builders for every topology family and for a whole cluster.

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
from dataclasses import dataclass
from math import prod

import numpy as np
import numpy.typing as npt

from .graph import IntArray, NodeKind, Topology, TopologyError
from .spec import (
    DEFAULT_LINK_GBPS,
    DEFAULT_LINK_NS,
    DEFAULT_SWITCH_NS,
    ClusterSpec,
    FabricSpec,
    FamilySpec,
    TierSpec,
)

__all__ = [
    "build",
    "cluster",
    "fat_tree",
    "from_spec",
    "full_mesh",
    "mesh",
    "ring",
    "star",
    "torus",
]

I64 = npt.NDArray[np.int64]


# ------------------------------------------------------------ local edge sets
def _grid_links(dims: Sequence[int], wrap: bool) -> tuple[I64, I64]:
    """Links of a torus (wrap) or mesh over row-major ids, last dim fastest."""
    dims = [int(k) for k in dims]
    n = prod(dims)
    ids = np.arange(n, dtype=np.int64)
    us: list[I64] = []
    vs: list[I64] = []
    stride = 1
    for axis in range(len(dims) - 1, -1, -1):
        k = dims[axis]
        coord = (ids // stride) % k
        if wrap and k > 2:
            nxt = ids + np.where(coord == k - 1, -(k - 1) * stride, stride)
            us.append(ids)
            vs.append(nxt)
        else:  # mesh, or a ring of 2 (one link)
            sel = coord < k - 1
            us.append(ids[sel])
            vs.append(ids[sel] + stride)
        stride *= k
    if not us:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(us), np.concatenate(vs)


def _complete_links(n: int) -> tuple[I64, I64]:
    u, v = np.triu_indices(n, k=1)
    return u.astype(np.int64), v.astype(np.int64)


def _torus_block_classes(dims: Sequence[int], block: int) -> IntArray | None:
    """Symmetry classes of torus nodes when consecutive ids form blocks.

    Nodes are grouped into blocks of ``block`` consecutive ids (servers on
    one PCIe switch). Translations that map blocks onto blocks, and the
    reflection of one dimension, are automorphisms of the torus *with* its
    block structure. If ``block`` = (product of the last m dims) × q, with q
    dividing the next dimension d, a block is a box that is q long in that
    dimension and full in the later ones: translating by q along it and
    freely along every other dimension preserves blocks, so the class of a
    node is its offset o (0…q−1) inside the box, merged with q−1−o by the
    reflection x ↦ q−1−x. Returns None if blocks are not such boxes (then
    no symmetry is claimed).
    """
    dims = [int(k) for k in dims]
    n = prod(dims)
    suffix = 1
    for axis in range(len(dims) - 1, -1, -1):
        if block == suffix:
            return np.zeros(n, dtype=np.int32)
        if block % suffix:
            return None
        d = dims[axis]
        q = block // suffix
        if q < d:
            if d % q:
                return None
            offset = (np.arange(n, dtype=np.int64) // suffix) % d % q
            return np.minimum(offset, q - 1 - offset).astype(np.int32)
        if q % d:
            return None
        suffix *= d
    return np.zeros(n, dtype=np.int32) if block == suffix else None


def _mesh_classes(dims: Sequence[int]) -> IntArray:
    """Mesh node classes under the reflections of each dimension."""
    dims = [int(k) for k in dims]
    n = prod(dims)
    ids = np.arange(n, dtype=np.int64)
    code = np.zeros(n, dtype=np.int64)
    stride = 1
    for k in reversed(dims):
        x = (ids // stride) % k
        code = code * k + np.minimum(x, k - 1 - x)
        stride *= k
    _, inverse = np.unique(code, return_inverse=True)
    return inverse.astype(np.int32)


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
        _grid_links([nodes], True),
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
        _grid_links(dims, True),
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
        _grid_links(dims, False),
        link_gbps,
        link_ns,
        switch_ns,
        _mesh_classes(dims),
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
        _complete_links(nodes),
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


# ------------------------------------------------------------------ fat trees
@dataclass
class _Clos:
    """Switches and links of a (possibly pruned) k-ary fat tree."""

    n_switches: int
    kind: npt.NDArray[np.int8]
    ns: npt.NDArray[np.float32]
    u: I64  # host-side ends use host slot ids >= 0, switch ends are offset later
    v: I64
    u_is_host: npt.NDArray[np.bool_]
    gbps: npt.NDArray[np.float32]
    link_ns: npt.NDArray[np.float32]
    hosts_per_leaf: int
    n_leaves: int
    n_pods: int


def _clos(n_hosts: int, tiers: Sequence[TierSpec]) -> _Clos:
    """A k-ary fat tree with ``len(tiers)`` switch tiers, pruned to ``n_hosts``.

    1 tier: one switch of radix k. 2 tiers (leaf/spine): leaves with k/2
    hosts each, all k/2 spines connected to every leaf. 3 tiers (Al-Fares et
    al. 2008): pods of k/2 edge + k/2 aggregation switches (complete
    bipartite inside the pod), aggregation switch a of every pod wired to
    cores a·k/2 … a·k/2 + k/2 − 1. Only the edge switches and pods that hold
    hosts are built; aggregation and core switches of a used pod are all
    built, so the fabric stays non-blocking. Switch ids here are local
    (0 … n_switches−1); host ends are host slots.
    """
    k = tiers[0].radix
    t = len(tiers)
    kinds_by_tier = [NodeKind.LEAF, NodeKind.SPINE, NodeKind.CORE]
    if t == 1:
        if n_hosts > k:
            raise TopologyError("network.core", f"{n_hosts} NICs exceed one switch of radix {k}")
        return _Clos(
            1,
            np.array([NodeKind.LEAF], np.int8),
            np.array([tiers[0].switch_ns], np.float32),
            np.arange(n_hosts, dtype=np.int64),
            np.zeros(n_hosts, np.int64),
            np.ones(n_hosts, bool),
            np.full(n_hosts, tiers[0].link_gbps, np.float32),
            np.full(n_hosts, tiers[0].link_ns, np.float32),
            k,
            1,
            1,
        )
    h = k // 2
    n_leaves = -(-n_hosts // h)
    hosts = np.arange(n_hosts, dtype=np.int64)
    us = [hosts]
    vs = [hosts // h]
    host_flag = [np.ones(n_hosts, bool)]
    gb = [np.full(n_hosts, tiers[0].link_gbps, np.float32)]
    ln = [np.full(n_hosts, tiers[0].link_ns, np.float32)]
    kinds = [np.full(n_leaves, kinds_by_tier[0], np.int8)]
    ns = [np.full(n_leaves, tiers[0].switch_ns, np.float32)]
    if t == 2:
        if n_leaves > k:
            raise TopologyError("network.core", f"{n_leaves} leaves exceed a spine of radix {k}")
        leaves = np.repeat(np.arange(n_leaves, dtype=np.int64), h)
        spines = n_leaves + np.tile(np.arange(h, dtype=np.int64), n_leaves)
        us.append(leaves)
        vs.append(spines)
        kinds.append(np.full(h, kinds_by_tier[1], np.int8))
        ns.append(np.full(h, tiers[1].switch_ns, np.float32))
        n_sw, n_pods = n_leaves + h, 1
    else:
        n_pods = -(-n_leaves // h)
        if n_pods > k:
            raise TopologyError("network.core", f"{n_pods} pods exceed a core of radix {k}")
        n_agg = n_pods * h
        leaves = np.repeat(np.arange(n_leaves, dtype=np.int64), h)
        aggs = n_leaves + (leaves // h) * h + np.tile(np.arange(h, dtype=np.int64), n_leaves)
        agg_ids = np.repeat(np.arange(n_agg, dtype=np.int64), h)
        cores = n_leaves + n_agg + (agg_ids % h) * h + np.tile(np.arange(h, dtype=np.int64), n_agg)
        us += [leaves, n_leaves + agg_ids]
        vs += [aggs, cores]
        kinds += [
            np.full(n_agg, kinds_by_tier[1], np.int8),
            np.full(h * h, kinds_by_tier[2], np.int8),
        ]
        ns += [
            np.full(n_agg, tiers[1].switch_ns, np.float32),
            np.full(h * h, tiers[2].switch_ns, np.float32),
        ]
        n_sw = n_leaves + n_agg + h * h
    for tier, arr in zip(tiers[1:], us[1:], strict=True):
        host_flag.append(np.zeros(arr.size, bool))
        gb.append(np.full(arr.size, tier.link_gbps, np.float32))
        ln.append(np.full(arr.size, tier.link_ns, np.float32))
    return _Clos(
        n_sw,
        np.concatenate(kinds),
        np.concatenate(ns),
        np.concatenate(us),
        np.concatenate(vs),
        np.concatenate(host_flag),
        np.concatenate(gb),
        np.concatenate(ln),
        h,
        n_leaves,
        n_pods,
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
    c = _clos(hosts, spec)
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


# -------------------------------------------------------------------- cluster
def _fabric_links(fabric: FabricSpec) -> tuple[I64, I64, int]:
    """Local links of one supernode fabric and how many switches it adds."""
    n = fabric.n_cards
    if fabric.kind in ("torus", "ring"):
        u, v = _grid_links(fabric.dims, True)
        return u, v, 0
    if fabric.kind == "mesh":
        u, v = _grid_links(fabric.dims, False)
        return u, v, 0
    if fabric.kind == "full_mesh":
        u, v = _complete_links(n)
        return u, v, 0
    if fabric.kind == "server_mesh":  # a full mesh inside each server of dims[1] cards
        servers, per = fabric.dims
        cu, cv = _complete_links(per)
        base = (np.arange(servers, dtype=np.int64) * per)[:, None]
        return (base + cu[None, :]).ravel(), (base + cv[None, :]).ravel(), 0
    # "switch": every card on one supernode switch, local id n
    return np.arange(n, dtype=np.int64), np.full(n, n, dtype=np.int64), 1


def _fabric_classes(fabric: FabricSpec, block: int, rails: bool = False) -> IntArray | None:
    """Classes of a supernode's cards under fabric automorphisms that keep blocks.

    ``block``: consecutive cards sharing an access switch (a server). With
    ``rails`` (``nic_per_card``) a card's slot in its block is also its NIC
    rail, so the permutation must apply one slot permutation to every block
    (and permute whole blocks): the full mesh, the switch and the server
    mesh (with ``block`` = its server) allow every such permutation, so all
    their cards are one class; a torus or mesh is not claimed then.
    """
    if fabric.kind in ("full_mesh", "switch"):
        return np.zeros(fabric.n_cards, np.int32)  # any block-preserving permutation
    if fabric.kind == "server_mesh":
        if block in (1, fabric.dims[1]) or (not rails and block % fabric.dims[1] == 0):
            return np.zeros(fabric.n_cards, np.int32)
        return None
    if rails:
        return None
    if fabric.kind in ("torus", "ring"):
        return _torus_block_classes(fabric.dims, block)
    return None  # mesh: not claimed


def _supernode_classes(n_sn: int, servers: int, rails: int, tiers: int, k: int) -> IntArray | None:
    """Classes of supernodes under automorphisms of the pruned fat tree.

    NIC slots run (supernode, rail, server). Claimed only when (a) each
    (supernode, rail) block of ``servers`` NICs lies on one leaf — so
    permuting a supernode's servers is a leaf-port permutation — and (b)
    supernodes and leaves, and supernodes and pods, are aligned (one divides
    the other). Then: supernodes in full pods are all equivalent (permute
    pods, then edge switches within a pod, then port blocks within a leaf);
    in the last, partial pod, those on full leaves are equivalent and those
    on the last partial leaf are equivalent. With 2 tiers there is one
    "pod"; with 1 tier every supernode is equivalent.
    """
    if tiers == 1:
        return np.zeros(n_sn, np.int32)
    h = k // 2
    g = servers * rails
    if h % servers or not (h % g == 0 or g % h == 0):
        return None
    pod = h * (h if tiers == 3 else k)  # host slots per pod (2 tiers: one pod of k leaves)
    if tiers == 3 and not (pod % g == 0 or g % pod == 0):
        return None
    total = n_sn * g
    first_slot = np.arange(n_sn, dtype=np.int64) * g
    leaf = first_slot // h
    pod_of = first_slot // pod
    full_pods = total // pod
    full_leaves = total // h
    cls = np.where(pod_of < full_pods, 0, np.where(leaf < full_leaves, 1, 2))
    _, inverse = np.unique(cls, return_inverse=True)
    return inverse.astype(np.int32)


def cluster(spec: ClusterSpec) -> Topology:
    """One topology for a whole cluster: every supernode fabric + the network.

    Cards of supernode ``i`` connect inside it by its fabric; every
    ``cards_per_switch`` consecutive cards (a server) hang off one PCIe
    access switch; each access switch has ``nics_per_switch`` smart NICs
    (with ``nic_per_card``: no access switch, each card links to its own NIC);
    NIC ports go to leaf ports in (supernode, rail, server) order; the leaf,
    spine and core tiers form a pruned k-ary fat tree (:func:`_clos`).
    """
    spec.validate()
    net = spec.network
    n_cards = spec.n_cards
    n_sn = spec.n_supernodes
    us: list[I64] = []
    vs: list[I64] = []
    gbps: list[npt.NDArray[np.float32]] = []
    lns: list[npt.NDArray[np.float32]] = []

    def add(
        u: I64, v: I64, g: float | npt.NDArray[np.float32], ln: float | npt.NDArray[np.float32]
    ) -> None:
        us.append(u)
        vs.append(v)
        gbps.append(np.broadcast_to(np.asarray(g, np.float32), u.shape))
        lns.append(np.broadcast_to(np.asarray(ln, np.float32), u.shape))

    # cards and fabric-internal switches
    card_ns = np.zeros(n_cards, np.float32)
    card_up = np.full(n_cards, np.inf, np.float32)
    card_out = np.full(n_cards, np.inf, np.float32)
    card_group = np.zeros(n_cards, np.int32)
    fabric_switch_ns: list[float] = []
    fabric_switch_group: list[int] = []
    card_base = 0
    sn_base = 0
    n_fabric_switches = sum(g.count for g in spec.supernodes if g.fabric.kind == "switch")
    fsw_next = n_cards
    for group in spec.supernodes:
        f = group.fabric
        lu, lv, extra = _fabric_links(f)
        size = f.n_cards
        offsets = card_base + size * np.arange(group.count, dtype=np.int64)
        if extra:
            sw = fsw_next + np.arange(group.count, dtype=np.int64)
            u = (lu[None, :] + offsets[:, None]).ravel()
            v = np.broadcast_to(sw[:, None], (group.count, lu.size)).ravel()
            fsw_next += group.count
            fabric_switch_ns += [f.switch_ns] * group.count
            fabric_switch_group += list(range(sn_base, sn_base + group.count))
        else:
            u = (lu[None, :] + offsets[:, None]).ravel()
            v = (lv[None, :] + offsets[:, None]).ravel()
            card_ns[card_base : card_base + size * group.count] = f.switch_ns
        add(u, v, f.link_gbps, f.link_ns)
        if f.card_gbps is not None:
            card_up[card_base : card_base + size * group.count] = f.card_gbps
        card_group[card_base : card_base + size * group.count] = np.repeat(
            np.arange(sn_base, sn_base + group.count, dtype=np.int32), size
        )
        card_base += size * group.count
        sn_base += group.count

    kinds = [
        np.full(n_cards, NodeKind.CARD, np.int8),
        np.full(n_fabric_switches, NodeKind.SWITCH, np.int8),
    ]
    node_ns = [card_ns, np.asarray(fabric_switch_ns, np.float32)]
    groups = [card_group, np.asarray(fabric_switch_group, np.int32)]
    params: dict[str, object] = {
        "supernodes": n_sn,
        "cards": n_cards,
        "scale_up_technology": spec.supernodes[0].fabric.technology,
        "scale_out_technology": net.technology if net is not None else "generic",
    }
    if len({g.fabric.technology for g in spec.supernodes}) > 1:
        params["scale_up_technology"] = "generic"
    first = spec.supernodes[0].fabric
    if all(g.fabric.kind == first.kind for g in spec.supernodes):
        params["scale_up_kind"] = first.kind
    if all(g.fabric == first for g in spec.supernodes) and first.in_switch_reduction:
        # cards per switch domain that reduces in flight (NVLink SHARP)
        params["nvls_domain"] = first.dims[1] if first.kind == "server_mesh" else first.n_cards
    classes: IntArray | None = None

    if net is not None:
        cps = net.access.cards_per_switch
        rails = net.aggregation.nics_per_switch
        direct = net.access.nic_per_card
        n_srv = n_cards // cps
        n_pcie = 0 if direct else n_srv
        pcie0 = n_cards + n_fabric_switches
        nic0 = pcie0 + n_pcie
        net0 = nic0 + n_srv * rails
        cards = np.arange(n_cards, dtype=np.int64)
        srv = np.repeat(np.arange(n_srv, dtype=np.int64), rails)
        nic_local = np.arange(n_srv * rails, dtype=np.int64)
        # a card injects at most its NICs' port speed: its own NIC's, or its server's
        card_out[:] = net.core[0].link_gbps * (1 if direct else rails)
        if direct:  # card i → its own NIC i (rails == cps, checked by validate)
            add(cards, nic0 + cards, net.access.link_gbps, net.access.link_ns)
        else:
            add(cards, pcie0 + cards // cps, net.access.link_gbps, net.access.link_ns)
            add(pcie0 + srv, nic0 + nic_local, net.aggregation.link_gbps, net.aggregation.link_ns)
        # NIC → host slot, ordered (supernode, rail, server)
        srv_group = card_group[::cps].astype(np.int64)  # supernode of each server
        sn_first_srv = np.zeros(n_sn + 1, dtype=np.int64)
        np.cumsum(np.bincount(srv_group, minlength=n_sn), out=sn_first_srv[1:])
        servers_in_sn = np.diff(sn_first_srv)
        srv_local = np.arange(n_srv, dtype=np.int64) - sn_first_srv[srv_group]
        rail = nic_local % rails
        s_of_nic = srv[: n_srv * rails]
        slot = (
            sn_first_srv[srv_group[s_of_nic]] * rails
            + rail * servers_in_sn[srv_group[s_of_nic]]
            + srv_local[s_of_nic]
        )
        clos = _clos(n_srv * rails, net.core)
        slot_to_nic = np.empty(n_srv * rails, dtype=np.int64)
        slot_to_nic[slot] = nic0 + nic_local
        u = np.where(
            clos.u_is_host, slot_to_nic[np.minimum(clos.u, n_srv * rails - 1)], clos.u + net0
        )
        add(u, clos.v + net0, clos.gbps, clos.link_ns)
        kinds += [
            np.full(n_pcie, NodeKind.PCIE_SWITCH, np.int8),
            np.full(n_srv * rails, NodeKind.NIC, np.int8),
            clos.kind,
        ]
        node_ns += [
            np.full(n_pcie, net.access.switch_ns, np.float32),
            np.full(n_srv * rails, net.aggregation.nic_ns, np.float32),
            clos.ns,
        ]
        groups += [
            srv_group[:n_pcie].astype(np.int32),
            np.repeat(srv_group, rails).astype(np.int32),
            np.full(clos.n_switches, -1, np.int32),
        ]
        params.update(
            servers=n_srv,
            nics=n_srv * rails,
            leaves=clos.n_leaves,
            pods=clos.n_pods,
            radix=net.core[0].radix,
            tiers=len(net.core),
            server_cards=cps,
            rails=rails,
            nic_per_card=direct,
        )
        if len(spec.supernodes) == 1:
            f = spec.supernodes[0].fabric
            if f.kind in ("torus", "ring"):
                params["fabric_dims"] = list(f.dims)
            intra = _fabric_classes(f, cps, rails=direct)
            inter = _supernode_classes(
                n_sn, f.n_cards // cps, rails, len(net.core), net.core[0].radix
            )
            if intra is not None and inter is not None:
                n_intra = int(intra.max()) + 1
                classes = (np.repeat(inter, f.n_cards) * n_intra + np.tile(intra, n_sn)).astype(
                    np.int32
                )
    elif len(spec.supernodes) == 1:
        f = spec.supernodes[0].fabric
        if f.kind in ("torus", "ring"):
            params["fabric_dims"] = list(f.dims)
        intra = _fabric_classes(f, 1)
        if intra is not None:
            classes = np.tile(intra, n_sn).astype(np.int32)

    all_kinds = np.concatenate(kinds)
    return Topology.from_links(
        name=spec.name,
        family="cluster",
        n_nodes=int(all_kinds.size),
        n_endpoints=n_cards,
        link_u=np.concatenate(us),
        link_v=np.concatenate(vs),
        link_gbps=np.concatenate(gbps),
        link_ns=np.concatenate(lns),
        node_kind=all_kinds,
        node_ns=np.concatenate(node_ns),
        group=np.concatenate(groups),
        endpoint_class=classes,
        params=params,
        card_up_gbps=card_up,
        card_out_gbps=card_out,
    )


def from_spec(spec: ClusterSpec | FamilySpec) -> Topology:
    """Convert an exported description (cluster or family) to one topology."""
    if isinstance(spec, FamilySpec):
        return build(spec)
    return cluster(spec)
