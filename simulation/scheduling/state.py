"""Mutable allocation state of a cluster during a simulation (numpy columns).

Per node and card: the unallocated share (thousandths); per node: free CPU,
memory, tenants (one SR-IOV virtual function per task) and the FGD aggregates
(:mod:`~simulation.scheduling.fragmentation`), kept current on every allocation
so that scoring never recomputes the whole cluster.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from .cluster import Nodes
from .fragmentation import TaskTypes, fragmentation_from_aggregates, node_aggregates

__all__ = ["ClusterState", "Placement", "model_mask"]

I64 = npt.NDArray[np.int64]
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
        healthy = nodes.healthy()
        self.free = np.where(healthy, 1000, 0).astype(np.int64)
        self.capacity_gpus = healthy.sum(axis=1).astype(np.int64)
        self.total_milli = int(self.capacity_gpus.sum()) * 1000
        self.cpu_cap = np.maximum(nodes.cpu_milli, 1)
        self.mem_cap = np.maximum(nodes.memory_mib, 1)
        self.gpu_cap = np.maximum(self.capacity_gpus * 1000, 1)
        self.cpu_free = nodes.cpu_milli.copy()
        self.mem_free = nodes.memory_mib.copy()
        self.tenants = np.zeros(len(nodes), np.int64)
        self.vf_limit = nodes.vf_limit
        self.full = self.capacity_gpus.copy()
        self.max_r = np.where(self.capacity_gpus > 0, 1000, 0).astype(np.int64)
        self.allocated_milli = 0
        self.type_ok = np.ones((len(nodes), len(types)), bool)
        self.count_ge, self.case2, self.sum_r = node_aggregates(self.free, types)
        self.frag = fragmentation_from_aggregates(
            self.count_ge, self.case2, self.sum_r, self.cpu_free, self.mem_free, types,
            self.type_ok)
        self.frag_total = float(self.frag.sum())
        # tasks of each type per node (GPU clustering)
        self.type_count = np.zeros((len(nodes), len(types) + 1), np.int64)
        self._mask_cache: dict[str, BoolA] = {}

    def set_type_models(self, specs: Sequence[str]) -> None:
        """Which nodes each task type may use (its GPU-model constraint)."""
        for t, spec in enumerate(specs):
            self.type_ok[:, t] = self.model_ok(spec)
        self._refresh(np.arange(len(self.nodes)))

    def model_ok(self, spec: str) -> BoolA:
        """Cached :func:`model_mask`."""
        mask = self._mask_cache.get(spec)
        if mask is None:
            mask = self._mask_cache[spec] = model_mask(self.nodes, spec)
        return mask

    @property
    def allocation_rate(self) -> float:
        """Allocated share of the cluster's healthy GPU capacity."""
        return self.allocated_milli / self.total_milli if self.total_milli else 0.0

    def _refresh(self, rows: npt.ArrayLike) -> None:
        idx = np.atleast_1d(np.asarray(rows, np.int64))
        sub = self.free[idx]
        cg, c2, sr = node_aggregates(sub, self.types)
        self.count_ge[idx], self.case2[idx], self.sum_r[idx] = cg, c2, sr
        self.full[idx] = (sub == 1000).sum(axis=1)
        self.max_r[idx] = sub.max(axis=1) if sub.shape[1] else 0
        new = fragmentation_from_aggregates(
            cg, c2, sr, self.cpu_free[idx], self.mem_free[idx], self.types, self.type_ok[idx])
        self.frag_total += float(new.sum() - self.frag[idx].sum())
        self.frag[idx] = new

    def _apply(self, placement: Placement, cpu: int, mem: int, sign: int, type_id: int) -> None:
        touched: dict[int, int] = {}
        for node, card, milli in placement:
            if card >= 0:
                self.free[node, card] -= sign * milli
                self.allocated_milli += sign * milli
            touched[node] = touched.get(node, 0) + max(milli, 0) + (card >= 0)
        nodes = sorted(touched)
        gpus_total = sum(1 for _, c, _ in placement if c >= 0)
        for node in nodes:
            gpus_here = sum(1 for n, c, _ in placement if n == node and c >= 0)
            share = gpus_here / gpus_total if gpus_total else 1.0 / len(nodes)
            self.cpu_free[node] -= sign * int(round(cpu * share))
            self.mem_free[node] -= sign * int(round(mem * share))
            self.tenants[node] += sign
            self.type_count[node, type_id] += sign
        self._refresh(nodes)

    def allocate(self, placement: Placement, cpu: int, mem: int, type_id: int = -1) -> None:
        """Take the placement's shares, CPU and memory (split by cards), one tenant per node."""
        self._apply(placement, cpu, mem, 1, type_id)

    def release(self, placement: Placement, cpu: int, mem: int, type_id: int = -1) -> None:
        """Give back what :meth:`allocate` took."""
        self._apply(placement, cpu, mem, -1, type_id)
