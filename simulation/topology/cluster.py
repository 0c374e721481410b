"""One topology for a whole cluster: every supernode fabric plus the cluster network.

Node numbering (symmetry claims rest on it): cards supernode by supernode (each
in its fabric's numbering), then per-supernode fabric switches, PCIe access
switches (one per ``cards_per_switch`` consecutive cards; none with
``nic_per_card``), NICs (server-major; with ``nic_per_card`` NIC *i* is card
*i*'s, so card slot *r* of a server is rail *r*), and the core network's
switches. NIC ports are attached to leaf ports in the order (supernode, rail,
server): one rail of one supernode is a contiguous block (rail-optimised wiring,
as in NVIDIA's DGX SuperPOD reference architecture).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .builders import build
from .graph import IntArray, NodeKind, Topology
from .spec import ClusterSpec, FabricSpec, FamilySpec
from .wiring import I64, clos_network, complete_links, grid_links, torus_block_classes

__all__ = ["cluster", "from_spec"]


def _fabric_links(fabric: FabricSpec) -> tuple[I64, I64, int]:
    """Local links of one supernode fabric and how many switches it adds."""
    n = fabric.n_cards
    if fabric.kind in ("torus", "ring"):
        u, v = grid_links(fabric.dims, True)
        return u, v, 0
    if fabric.kind == "mesh":
        u, v = grid_links(fabric.dims, False)
        return u, v, 0
    if fabric.kind == "full_mesh":
        u, v = complete_links(n)
        return u, v, 0
    if fabric.kind == "server_mesh":  # a full mesh inside each server of dims[1] cards
        servers, per = fabric.dims
        cu, cv = complete_links(per)
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
        return torus_block_classes(fabric.dims, block)
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
    spine and core tiers form a pruned k-ary fat tree (:func:`clos_network`).
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
    if net is not None and net.in_network_reduction:
        params["in_network_reduction"] = True  # SHARP in the network's switches
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
        clos = clos_network(n_srv * rails, net.core)
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
