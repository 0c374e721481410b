"""Wiring shared by the builders: local edge sets, symmetry classes, pruned fat trees.

Vectorised index arithmetic (no per-node Python loop). The symmetry classes are
conservative (see :attr:`simulation.topology.graph.Topology.endpoint_class`):
splitting a true orbit is allowed, merging two is not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

import numpy as np
import numpy.typing as npt

from .graph import IntArray, NodeKind, TopologyError
from .spec import TierSpec

__all__ = [
    "I64",
    "Clos",
    "clos_network",
    "complete_links",
    "grid_links",
    "mesh_classes",
    "torus_block_classes",
]

I64 = npt.NDArray[np.int64]


def grid_links(dims: Sequence[int], wrap: bool) -> tuple[I64, I64]:
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


def complete_links(n: int) -> tuple[I64, I64]:
    u, v = np.triu_indices(n, k=1)
    return u.astype(np.int64), v.astype(np.int64)


def torus_block_classes(dims: Sequence[int], block: int) -> IntArray | None:
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


def mesh_classes(dims: Sequence[int]) -> IntArray:
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


@dataclass
class Clos:
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


def clos_network(n_hosts: int, tiers: Sequence[TierSpec]) -> Clos:
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
        return Clos(
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
    return Clos(
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
