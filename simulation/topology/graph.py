"""The compact topology representation every metric works on.

A million-card cluster has about 1.45 M nodes and 5.2 M links. networkx would
need several GiB and minutes to hold and walk that, so a :class:`Topology`
keeps plain numpy arrays instead:

* a symmetric CSR adjacency (``indptr``, ``indices``; int32, as
  :mod:`scipy.sparse.csgraph` wants it) with, for each directed entry, the id of
  the undirected link it belongs to (``entry_link``);
* per link: its two ends, bandwidth (Gb/s per direction) and latency (ns);
* per node: its kind (card, PCIe switch, NIC, leaf, spine/aggregation, core,
  generic switch), its forwarding latency in ns (switch latency, or the
  per-hop router latency of a card in a direct network such as a torus) and
  the group it belongs to (its supernode, −1 for the shared network);
* the endpoints (cards, hosts) are always nodes ``0 … n_endpoints−1``, so
  "all card pairs" is a slice, never a mask;
* optional symmetry classes of the endpoints (see :attr:`Topology.endpoint_class`)
  that let a metric run one search per class instead of one per card;
* optional per-endpoint injection/ejection limits (:attr:`Topology.card_up_gbps`,
  :attr:`Topology.card_out_gbps`): what a card can send or receive in total,
  per direction, over its scale-up links and over its other links — a card's
  ports, not its links, bound it (an H100 has 450 GB/s of NVLink in total,
  however many NVSwitch ports it reaches).

The million-card cluster takes about 260 MB in this form (see
``benchmarks/topology.py``). networkx stays the API for *structure* on small
cases (:meth:`Topology.to_networkx`), not the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Any

import networkx as nx
import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

__all__ = [
    "FloatArray",
    "IntArray",
    "NodeKind",
    "Topology",
    "TopologyError",
]

IntArray = npt.NDArray[np.int32]
FloatArray = npt.NDArray[np.float64]

#: Largest graph :meth:`Topology.to_networkx` converts (links); beyond it the
#: conversion alone costs GiBs and minutes, which is what this module avoids.
NETWORKX_LINK_LIMIT = 2_000_000


class TopologyError(ValueError):
    """A topology that cannot be built or queried as asked.

    ``field`` names the input at fault (e.g. ``"dims"``, ``"src"``), so a REST
    layer can return a per-field error without parsing the message.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class NodeKind(IntEnum):
    """What a node is. Stored as int8 per node."""

    CARD = 0
    PCIE_SWITCH = 1
    NIC = 2
    LEAF = 3
    SPINE = 4
    CORE = 5
    SWITCH = 6


def _limits(value: npt.ArrayLike | None, n: int, name: str) -> npt.NDArray[np.float32] | None:
    """Per-endpoint limits as float32 (None stays None); must be > 0 (inf: none)."""
    if value is None:
        return None
    arr = np.broadcast_to(np.asarray(value, dtype=np.float32), (n,)).copy()
    if n and not bool(np.all(arr > 0)):
        raise TopologyError(name, "a card's injection limit must be > 0 Gb/s")
    return arr


@dataclass(eq=False)
class Topology:
    """A network as flat arrays; see the module docstring for the layout.

    Build one with the functions in :mod:`simulation.topology.builders` (families),
    :mod:`simulation.topology.cluster` or
    :func:`Topology.from_links`; do not mutate the arrays afterwards (cached
    sparse matrices share them).
    """

    name: str
    family: str
    n_endpoints: int
    indptr: IntArray
    indices: IntArray
    entry_link: IntArray
    link_u: IntArray
    link_v: IntArray
    link_gbps: npt.NDArray[np.float32]
    link_ns: npt.NDArray[np.float32]
    node_kind: npt.NDArray[np.int8]
    node_ns: npt.NDArray[np.float32]
    group: IntArray
    endpoint_class: IntArray | None = None
    """Symmetry classes of the endpoints, or None when none are known.

    Two endpoints share a class only if an automorphism of the graph that
    preserves link bandwidths and latencies, node latencies and groups maps
    one onto the other. Builders assign classes conservatively (splitting a
    true orbit is allowed, merging two is not), and the property tests check
    every class-based metric against a search from every endpoint.
    """
    params: dict[str, Any] = field(default_factory=dict)
    """Family parameters the closed forms need (``nodes``, ``dims``, ``k``…)."""
    card_up_gbps: npt.NDArray[np.float32] | None = None
    """Per endpoint: the most it sends (and receives) per direction over all its
    scale-up links together (:meth:`scale_up_entries`), Gb/s; inf or None: no
    limit beyond the links themselves."""
    card_out_gbps: npt.NDArray[np.float32] | None = None
    """Per endpoint: the same over its other links (PCIe, NIC): its NICs' total."""
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ build
    @classmethod
    def from_links(
        cls,
        *,
        name: str,
        family: str,
        n_nodes: int,
        n_endpoints: int,
        link_u: npt.ArrayLike,
        link_v: npt.ArrayLike,
        link_gbps: npt.ArrayLike,
        link_ns: npt.ArrayLike,
        node_kind: npt.ArrayLike,
        node_ns: npt.ArrayLike,
        group: npt.ArrayLike | None = None,
        endpoint_class: npt.ArrayLike | None = None,
        params: dict[str, Any] | None = None,
        card_up_gbps: npt.ArrayLike | None = None,
        card_out_gbps: npt.ArrayLike | None = None,
    ) -> Topology:
        """Build the CSR from an undirected link list (vectorised, O(E)).

        Scalars broadcast (e.g. one ``link_gbps`` for every link). Self-loops
        and parallel links are rejected: every metric here assumes a simple
        graph, and a parallel link is modelled as one link of the summed
        bandwidth instead.
        """
        u = np.ascontiguousarray(link_u, dtype=np.int32)
        v = np.ascontiguousarray(link_v, dtype=np.int32)
        if u.shape != v.shape or u.ndim != 1:
            raise TopologyError("links", "link_u and link_v must be 1-D arrays of equal length")
        n_links = int(u.size)
        if 2 * n_links >= 2**31 or n_nodes >= 2**31:
            raise TopologyError("links", "more than 2^30 links or 2^31 nodes are not supported")
        if n_links and (int(min(u.min(), v.min())) < 0 or int(max(u.max(), v.max())) >= n_nodes):
            raise TopologyError("links", "a link end is outside 0…n_nodes−1")
        if n_links and bool(np.any(u == v)):
            raise TopologyError("links", "self-loop")
        gbps = np.broadcast_to(np.asarray(link_gbps, dtype=np.float32), (n_links,)).copy()
        lns = np.broadcast_to(np.asarray(link_ns, dtype=np.float32), (n_links,)).copy()
        kinds = np.broadcast_to(np.asarray(node_kind, dtype=np.int8), (n_nodes,)).copy()
        nns = np.broadcast_to(np.asarray(node_ns, dtype=np.float32), (n_nodes,)).copy()
        grp = (
            np.full(n_nodes, -1, dtype=np.int32)
            if group is None
            else np.broadcast_to(np.asarray(group, dtype=np.int32), (n_nodes,)).copy()
        )
        if n_links and (float(gbps.min()) <= 0 or float(lns.min()) < 0):
            raise TopologyError("links", "bandwidth must be > 0 and latency ≥ 0")
        if n_nodes and float(nns.min()) < 0:
            raise TopologyError("nodes", "node latency must be ≥ 0")
        rows = np.concatenate([u, v])
        cols = np.concatenate([v, u])
        ids = np.concatenate([np.arange(n_links, dtype=np.int32)] * 2)
        # coo→csr is a C++ counting sort; it sums duplicates, which is how we
        # detect parallel links (the entry count drops).
        csr = sp.coo_matrix((ids, (rows, cols)), shape=(n_nodes, n_nodes)).tocsr()
        if csr.nnz != 2 * n_links:
            raise TopologyError("links", "parallel links between the same two nodes")
        del rows, cols, ids
        cls_arr = None
        if endpoint_class is not None:
            cls_arr = np.ascontiguousarray(endpoint_class, dtype=np.int32)
            if cls_arr.shape != (n_endpoints,):
                raise TopologyError("endpoint_class", "one class per endpoint expected")
        return cls(
            name=name,
            family=family,
            n_endpoints=int(n_endpoints),
            indptr=csr.indptr.astype(np.int32, copy=False),
            indices=csr.indices.astype(np.int32, copy=False),
            entry_link=csr.data.astype(np.int32, copy=False),
            link_u=u,
            link_v=v,
            link_gbps=gbps,
            link_ns=lns,
            node_kind=kinds,
            node_ns=nns,
            group=grp,
            endpoint_class=cls_arr,
            params=dict(params or {}),
            card_up_gbps=_limits(card_up_gbps, int(n_endpoints), "card_up_gbps"),
            card_out_gbps=_limits(card_out_gbps, int(n_endpoints), "card_out_gbps"),
        )

    # ------------------------------------------------------------ properties
    def scale_up_entries(self) -> npt.NDArray[np.bool_]:
        """Per directed CSR entry: True when both ends are cards or fabric switches.

        Those are the scale-up fabric (NVLink, a torus, a supernode switch);
        every other link (PCIe switch, NIC, leaf, spine, core) is the
        scale-out path. A standalone star's PCIe switch counts as scale-out.
        """
        hit = self._cache.get("scale_up")
        if hit is None:
            inside = np.isin(self.node_kind, [NodeKind.CARD, NodeKind.SWITCH])
            rows = np.repeat(np.arange(self.n_nodes, dtype=np.int64), np.diff(self.indptr))
            hit = inside[rows] & inside[self.indices]
            self._cache["scale_up"] = hit
        return hit

    def with_card_limits(
        self, up_gbps: float | None, out_gbps: float | None = None
    ) -> Topology:
        """The same topology with one injection limit for every endpoint.

        ``out_gbps`` defaults to ``up_gbps`` (a standalone family has one kind
        of port). None leaves a limit off.
        """
        n = self.n_endpoints
        out = up_gbps if out_gbps is None else out_gbps
        return replace(
            self,
            card_up_gbps=_limits(up_gbps, n, "card_gbps"),
            card_out_gbps=_limits(out, n, "card_gbps"),
            _cache={},
        )

    @property
    def n_nodes(self) -> int:
        """Number of nodes (endpoints and switches)."""
        return int(self.indptr.size - 1)

    @property
    def n_links(self) -> int:
        """Number of undirected links."""
        return int(self.link_u.size)

    def degree(self) -> IntArray:
        """Links per node."""
        return np.diff(self.indptr).astype(np.int32)

    def nbytes(self) -> int:
        """Bytes held by the arrays (the compactness claim, measured)."""
        arrays: list[npt.NDArray[Any]] = [
            self.indptr,
            self.indices,
            self.entry_link,
            self.link_u,
            self.link_v,
            self.link_gbps,
            self.link_ns,
            self.node_kind,
            self.node_ns,
            self.group,
        ]
        if self.endpoint_class is not None:
            arrays.append(self.endpoint_class)
        arrays += [a for a in (self.card_up_gbps, self.card_out_gbps) if a is not None]
        return int(sum(a.nbytes for a in arrays))

    def kind_counts(self) -> dict[str, int]:
        """How many nodes of each kind (for summaries)."""
        counts = np.bincount(self.node_kind.astype(np.int64), minlength=len(NodeKind))
        return {k.name.lower(): int(counts[k.value]) for k in NodeKind if counts[k.value]}

    # --------------------------------------------------------- sparse views
    def adjacency(self) -> sp.csr_matrix:
        """Unweighted adjacency for :mod:`scipy.sparse.csgraph` (cached).

        float64 data because csgraph converts to float64 anyway; caching it
        once avoids an 80 MB copy per search on the million-card cluster.
        """
        mat = self._cache.get("adjacency")
        if mat is None:
            data = np.ones(self.indices.size, dtype=np.float64)
            mat = sp.csr_matrix(
                (data, self.indices, self.indptr), shape=(self.n_nodes, self.n_nodes), copy=False
            )
            self._cache["adjacency"] = mat
        return mat

    def latency_weights(self) -> sp.csr_matrix:
        """Adjacency weighted for latency searches (cached).

        The weight of the directed entry u→v is ``link_ns(u,v) + node_ns(v)``:
        a path's weight is then its link latencies plus the forwarding latency
        of every node it enters, and the latency of a path s→t is that weight
        minus ``node_ns(t)`` (the destination does not forward). Explicit
        zero weights stay edges in csgraph (checked in the tests).
        """
        mat = self._cache.get("latency")
        if mat is None:
            data = self.link_ns[self.entry_link].astype(np.float64)
            data += self.node_ns[self.indices]
            mat = sp.csr_matrix(
                (data, self.indices, self.indptr), shape=(self.n_nodes, self.n_nodes), copy=False
            )
            self._cache["latency"] = mat
        return mat

    def link_between(self, a: int, b: int) -> int:
        """Id of the link a–b, or −1 if there is none."""
        lo, hi = int(self.indptr[a]), int(self.indptr[a + 1])
        hits = np.flatnonzero(self.indices[lo:hi] == b)
        return int(self.entry_link[lo + int(hits[0])]) if hits.size else -1

    def check_node(self, node: int, field_name: str) -> None:
        """Raise a per-field :class:`TopologyError` for a node id out of range."""
        if not isinstance(node, int | np.integer) or not 0 <= int(node) < self.n_nodes:
            raise TopologyError(
                field_name, f"node {node!r} does not exist (valid: 0…{self.n_nodes - 1})"
            )

    # --------------------------------------------------------------- views
    def describe_node(self, node: int) -> str:
        """A short human label: kind, index within kind, group."""
        self.check_node(node, "node")
        kind = NodeKind(int(self.node_kind[node]))
        first = int(np.flatnonzero(self.node_kind == kind.value)[0])
        grp = int(self.group[node])
        where = f" in group {grp}" if grp >= 0 else ""
        return f"{kind.name.lower()} {node - first}{where}"

    def to_networkx(self) -> nx.Graph:
        """The same graph in networkx, with link/node attributes (small graphs).

        Links carry ``gbps`` and ``ns``; nodes carry ``kind``, ``ns`` and
        ``group``. Refused beyond ``NETWORKX_LINK_LIMIT`` links.
        """
        if self.n_links > NETWORKX_LINK_LIMIT:
            raise TopologyError(
                "topology",
                f"{self.n_links} links is too large for networkx; use the array metrics",
            )
        g: nx.Graph = nx.Graph()
        for i in range(self.n_nodes):
            g.add_node(
                i,
                kind=NodeKind(int(self.node_kind[i])).name.lower(),
                ns=float(self.node_ns[i]),
                group=int(self.group[i]),
            )
        g.add_edges_from(
            (int(a), int(b), {"gbps": float(w), "ns": float(t)})
            for a, b, w, t in zip(
                self.link_u, self.link_v, self.link_gbps, self.link_ns, strict=True
            )
        )
        return g

    def without_links(self, dead: npt.NDArray[np.bool_], name: str | None = None) -> Topology:
        """A copy with the links flagged in ``dead`` removed (node set unchanged).

        Symmetry classes are dropped: a failure breaks the symmetry.
        """
        keep = ~dead
        entry_keep = keep[self.entry_link]
        rows = np.repeat(np.arange(self.n_nodes, dtype=np.int32), np.diff(self.indptr))
        counts = np.bincount(rows[entry_keep], minlength=self.n_nodes)
        del rows
        new_indptr = np.zeros(self.n_nodes + 1, dtype=np.int32)
        np.cumsum(counts, out=new_indptr[1:])
        old_ids = np.flatnonzero(keep).astype(np.int32)
        remap = np.full(self.n_links, -1, dtype=np.int32)
        remap[old_ids] = np.arange(old_ids.size, dtype=np.int32)
        return Topology(
            name=name or f"{self.name} (degraded)",
            family="custom",
            n_endpoints=self.n_endpoints,
            indptr=new_indptr,
            indices=self.indices[entry_keep],
            entry_link=remap[self.entry_link[entry_keep]],
            link_u=self.link_u[keep],
            link_v=self.link_v[keep],
            link_gbps=self.link_gbps[keep],
            link_ns=self.link_ns[keep],
            node_kind=self.node_kind,
            node_ns=self.node_ns,
            group=self.group,
            endpoint_class=None,
            params={},
            card_up_gbps=self.card_up_gbps,
            card_out_gbps=self.card_out_gbps,
        )

    def induced(self, nodes: npt.ArrayLike, name: str | None = None) -> Topology:
        """The subgraph induced by ``nodes`` (endpoints keep their relative order).

        Used for one supernode's fabric (its cards and their PCIe switches) in
        the collective models. Node ids are renumbered: endpoints first, in
        their original order, then the other nodes.
        """
        sel = np.unique(np.asarray(nodes, dtype=np.int64))
        is_ep = sel < self.n_endpoints
        order = np.concatenate([sel[is_ep], sel[~is_ep]])
        new_id = np.full(self.n_nodes, -1, dtype=np.int64)
        new_id[order] = np.arange(order.size)
        lu, lv = new_id[self.link_u], new_id[self.link_v]
        keep = (lu >= 0) & (lv >= 0)
        return Topology.from_links(
            name=name or f"{self.name} (subgraph)",
            family="custom",
            n_nodes=int(order.size),
            n_endpoints=int(is_ep.sum()),
            link_u=lu[keep],
            link_v=lv[keep],
            link_gbps=self.link_gbps[keep],
            link_ns=self.link_ns[keep],
            node_kind=self.node_kind[order],
            node_ns=self.node_ns[order],
            group=self.group[order],
            card_up_gbps=None if self.card_up_gbps is None else self.card_up_gbps[sel[is_ep]],
            card_out_gbps=None if self.card_out_gbps is None else self.card_out_gbps[sel[is_ep]],
        )
