"""Mutable allocation state of a cluster during a simulation (numpy columns).

Per node and card: the unallocated share (thousandths); per node: free CPU,
memory, tenants (one SR-IOV virtual function per task) and the derived
columns the node-level policies read (untouched cards, largest share, Σ share,
free share of its supernode), all kept current on every allocation with scalar
updates, never recomputing the cluster. The state-based policies read a
:class:`~simulation.scheduling.states.StateTable` instead: the nodes bucketed by
state (shape, sorted shares, CPU, memory, virtual function left), each state
with its FGD aggregates, so they score each distinct state once.

Two counters let a caller reuse what it computed on an unchanged state:
``version`` moves on every change, ``releases`` on every change that can make a
task fit where it did not (a release, a recomputation). Allocating only takes
resources, so a task that fits nowhere still fits nowhere until ``releases`` moves
(the scheduler's queue relies on it: :class:`simulation.scheduling.engine._Run`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from .cluster import Nodes
from .fragmentation import TaskTypes
from .states import StateTable

__all__ = ["ClusterState", "Placement", "model_mask"]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
BoolA = npt.NDArray[np.bool_]

Placement = list[tuple[int, int, int]]
"""(node, card, thousandths) per piece; a CPU-only task has card −1 and 0."""


def model_mask(nodes: Nodes, spec: str) -> BoolA:
    """Nodes whose GPU model satisfies ``spec`` ("" = any; "A|B" = either)."""
    if not spec:
        return np.ones(len(nodes), bool)
    wanted = {s.strip() for s in spec.split("|") if s.strip()}
    ok_models = np.array([m in wanted for m in nodes.models] or [False], bool)
    return ok_models[nodes.gpu_model]


class ClusterState:
    """Free resources of every node, updated in place by :meth:`allocate`/:meth:`release`."""

    def __init__(self, nodes: Nodes, types: TaskTypes) -> None:
        self.nodes = nodes
        self.types = types
        n = len(nodes)
        healthy = nodes.healthy()
        self.free = np.where(healthy, 1000, 0).astype(np.int16)
        self.capacity_gpus = healthy.sum(axis=1).astype(np.int64)
        self.total_milli = int(self.capacity_gpus.sum()) * 1000
        self.cpu_free = nodes.cpu_milli.astype(np.int64)
        self.mem_free = nodes.memory_mib.astype(np.int64)
        self.tenants = np.zeros(n, np.int32)
        self.vf_limit = nodes.vf_limit.astype(np.int32)
        self.vf_ok = self.vf_limit > 0
        self.full = self.capacity_gpus.astype(np.int16)
        self.max_r = np.where(self.capacity_gpus > 0, 1000, 0).astype(np.int16)
        self.sum_r = (self.capacity_gpus * 1000).astype(np.int64)
        self.allocated_milli = 0
        self.sn = nodes.supernode
        self.sn_free = np.bincount(self.sn, weights=self.sum_r,
                                   minlength=int(self.sn.max(initial=0)) + 1)
        self.sn_cap = np.maximum(self.sn_free.copy(), 1.0)
        self.type_ok = np.ones((n, len(types)), bool)
        self.all_types_ok = True
        # tasks of each type per node (GPU clustering); the last column: other types
        self.type_count = np.zeros((n, len(types) + 1), np.int32)
        # GPU tasks per node and tag (the FGD artifact's gpu-clustering: column 0 = shares
        # a card, k = k whole cards, the last column = wider than a node)
        self.tag_count = np.zeros((n, nodes.max_gpus + 2), np.int32)
        # the artifact's MaxSpecCpu / MaxSpecGpu: the largest node (.scores)
        self.max_cpu = float(max(int(nodes.cpu_milli.max(initial=0)), 1))
        self.max_gpu = float(max(nodes.max_gpus, 1) * 1000)
        self._mask_cache: dict[str, BoolA] = {}
        self._shape_mask_cache: dict[str, BoolA] = {}
        # node shapes: what a node is before anything runs on it
        shape_cols = np.column_stack([nodes.cpu_milli, nodes.memory_mib, self.capacity_gpus,
                                      nodes.gpu_model, nodes.vf_limit]) if n else \
            np.zeros((0, 5), np.int64)
        _, self.shape_first, node_shape = np.unique(
            shape_cols, axis=0, return_index=True, return_inverse=True)
        self.node_shape = node_shape.reshape(-1).astype(np.int64)
        sf = self.shape_first
        gpu_cap = self.capacity_gpus[sf] * 1000.0
        self.shape_inv = np.column_stack([
            1.0 / np.maximum(nodes.cpu_milli[sf], 1), 1.0 / np.maximum(nodes.memory_mib[sf], 1),
            np.where(gpu_cap > 0, 1.0 / np.maximum(gpu_cap, 1.0), 0.0)]).astype(np.float64)
        self.table = StateTable(self.node_shape, self.shape_inv, self.capacity_gpus[sf],
                                self.type_ok[sf], types)
        self.table.rebuild(self.free, self.cpu_free, self.mem_free, self.vf_ok)
        self.frag_total = self.table.frag_total()
        #: moves on every change of the state; ``releases`` on every change that frees
        self.version = 0
        self.releases = 0
        self._maxima: tuple[int, tuple[int, int, int, int]] | None = None

    # ------------------------------------------------------------ reads
    @property
    def frag(self) -> F64:
        """``F_n(M)`` of every node (thousandths of a card), from its state."""
        result: F64 = self.table.frag[self.table.node_state]
        return result

    def set_type_models(self, specs: Sequence[str]) -> None:
        """Which nodes each task type may use (its GPU-model constraint)."""
        for t, spec in enumerate(specs):
            self.type_ok[:, t] = self.model_ok(spec)
        self.all_types_ok = bool(self.type_ok.all())
        self.table.set_type_ok(self.type_ok[self.shape_first])
        self.refresh_all()

    def model_ok(self, spec: str) -> BoolA:
        """Cached :func:`model_mask`."""
        mask = self._mask_cache.get(spec)
        if mask is None:
            mask = self._mask_cache[spec] = model_mask(self.nodes, spec)
        return mask

    def shape_model_ok(self, spec: str) -> BoolA:
        """:func:`model_mask` per node shape."""
        mask = self._shape_mask_cache.get(spec)
        if mask is None:
            mask = self._shape_mask_cache[spec] = self.model_ok(spec)[self.shape_first]
        return mask

    @property
    def allocation_rate(self) -> float:
        """Allocated share of the cluster's healthy GPU capacity."""
        return self.allocated_milli / self.total_milli if self.total_milli else 0.0

    def maxima(self, *, cached: bool = True) -> tuple[int, int, int, int]:
        """(most untouched cards, largest free share, most free CPU, free thousandths);
        kept until the state changes (the queue asks before every placement)."""
        kept = self._maxima
        if cached and kept is not None and kept[0] == self.version:
            return kept[1]
        full, max_r, cpu = self.table.maxima()
        result = (full, max_r, cpu, self.total_milli - self.allocated_milli)
        self._maxima = (self.version, result)
        return result

    def changed(self, *, freed: bool) -> None:
        """Note a change (``freed``: one that may make a task fit where it did not)."""
        self.version += 1
        if freed:
            self.releases += 1

    # ------------------------------------------------------------ updates
    def refresh_all(self) -> None:
        """Recompute every derived column from ``free``, CPU and memory (setup, live state)."""
        self.changed(freed=True)
        self.sum_r = self.free.astype(np.int64).sum(axis=1)
        self.full = (self.free == 1000).sum(axis=1).astype(np.int16)
        self.max_r = (self.free.max(axis=1) if self.free.shape[1]
                      else np.zeros(len(self.nodes))).astype(np.int16)
        self.vf_ok = self.tenants < self.vf_limit
        self.sn_free = np.bincount(self.sn, weights=self.sum_r, minlength=len(self.sn_free))
        self.table.rebuild(self.free, self.cpu_free, self.mem_free, self.vf_ok)
        self.frag_total = self.table.frag_total()

    def _refresh_node(self, i: int) -> None:
        """One node's derived columns (scalar updates) and its state."""
        srt = sorted(self.free[i].tolist())
        old_sum = int(self.sum_r[i])
        sr = sum(srt)
        self.sum_r[i] = sr
        self.sn_free[self.sn[i]] += sr - old_sum
        self.full[i] = srt.count(1000)
        self.max_r[i] = srt[-1] if srt else 0
        vf = bool(self.tenants[i] < self.vf_limit[i])
        self.vf_ok[i] = vf
        self.frag_total += self.table.move(i, srt, int(self.cpu_free[i]),
                                           int(self.mem_free[i]), vf)
        if self.table.needs_compaction:
            self.table.compact()

    def _apply(self, placement: Placement, cpu: int, mem: int, sign: int, type_id: int) -> None:
        self.changed(freed=sign < 0)
        per_node: dict[int, int] = {}
        gpus_total = 0
        shares = False
        for node, card, milli in placement:
            if card >= 0:
                shares = shares or milli < 1000
                self.free[node, card] -= sign * milli
                self.allocated_milli += sign * milli
                gpus_total += 1
                per_node[node] = per_node.get(node, 0) + 1
            else:
                per_node.setdefault(node, 0)
        tag = -1 if not gpus_total else 0 if shares else min(gpus_total,
                                                              self.tag_count.shape[1] - 1)
        for node, gpus_here in per_node.items():
            share = gpus_here / gpus_total if gpus_total else 1.0 / len(per_node)
            if tag >= 0:
                self.tag_count[node, tag] += sign
            self.cpu_free[node] -= sign * int(round(cpu * share))
            self.mem_free[node] -= sign * int(round(mem * share))
            self.tenants[node] += sign
            self.type_count[node, type_id] += sign
            self._refresh_node(node)

    def allocate(self, placement: Placement, cpu: int, mem: int, type_id: int = -1) -> None:
        """Take the placement's shares, CPU and memory (split by cards), one tenant per node."""
        self._apply(placement, cpu, mem, 1, type_id)

    def release(self, placement: Placement, cpu: int, mem: int, type_id: int = -1) -> None:
        """Give back what :meth:`allocate` took."""
        self._apply(placement, cpu, mem, -1, type_id)
