"""Mutable allocation state of a cluster during a simulation (numpy columns).

Per node and card: the unallocated share (thousandths); per node: free CPU,
memory, tenants (one SR-IOV virtual function per task), the FGD aggregates
(:mod:`~simulation.scheduling.fragmentation`) and the best-fit base score, all
kept current on every allocation, so that scoring a task is a few vector
operations over the nodes and never recomputes the cluster. Small integer
types (int16/int32) halve the memory traffic of each pass on a million cards.
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


def _uniform(a: npt.NDArray[np.generic]) -> bool:
    return bool(a.size == 0 or (a == a.flat[0]).all())


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
        cpu_cap = np.maximum(nodes.cpu_milli, 1).astype(np.float64)
        mem_cap = np.maximum(nodes.memory_mib, 1).astype(np.float64)
        gpu_cap = np.maximum(self.capacity_gpus * 1000, 1).astype(np.float64)
        self.inv_cpu = (1.0 / cpu_cap).astype(np.float32)
        self.inv_mem = (1.0 / mem_cap).astype(np.float32)
        self.inv_gpu = np.where(self.capacity_gpus > 0, 1.0 / gpu_cap, 0.0).astype(np.float32)
        self.uniform_caps = (_uniform(nodes.cpu_milli) and _uniform(nodes.memory_mib)
                             and _uniform(self.capacity_gpus))
        self.cpu_free = nodes.cpu_milli.astype(np.int64)
        self.mem_free = nodes.memory_mib.astype(np.int64)
        self.tenants = np.zeros(n, np.int32)
        self.vf_limit = nodes.vf_limit.astype(np.int32)
        self.vf_ok = self.vf_limit > 0
        self.full = self.capacity_gpus.astype(np.int16)
        self.max_r = np.where(self.capacity_gpus > 0, 1000, 0).astype(np.int16)
        self.sum_r = (self.capacity_gpus * 1000).astype(np.int64)
        self.allocated_milli = 0
        self.base = (self.cpu_free * self.inv_cpu + self.mem_free * self.inv_mem
                     + self.sum_r * self.inv_gpu).astype(np.float32)
        self.sn = nodes.supernode
        self.sn_free = np.bincount(self.sn, weights=self.sum_r,
                                   minlength=int(self.sn.max(initial=0)) + 1)
        self.sn_cap = np.maximum(self.sn_free.copy(), 1.0)
        self.type_ok = np.ones((n, len(types)), bool)
        self.all_types_ok = True
        self.track_frag = True
        self.count_ge, self.case2, _ = node_aggregates(self.free, types)
        self.frag = fragmentation_from_aggregates(
            self.count_ge, self.case2, self.sum_r, self.cpu_free, self.mem_free, types)
        self.frag_total = float(self.frag.sum())
        # tasks of each type per node (GPU clustering); the last column: other types
        self.type_count = np.zeros((n, len(types) + 1), np.int32)
        self._mask_cache: dict[str, BoolA] = {}
        self._theta = types.theta.astype(np.int16)[:, None]
        self.keys: I64 | None = None

    def state_keys(self) -> I64:
        """A hash per node of what FGD's score depends on (sorted shares, CPU, memory,
        model): nodes with equal keys score the same, so FGD scores one of each."""
        if self.keys is None:
            self.keys = np.array([self._key(i) for i in range(len(self.nodes))], np.int64)
        return self.keys

    def _key(self, i: int) -> int:
        return hash((np.sort(self.free[i]).tobytes(), int(self.cpu_free[i]),
                     int(self.mem_free[i]), int(self.nodes.gpu_model[i])))

    def set_type_models(self, specs: Sequence[str]) -> None:
        """Which nodes each task type may use (its GPU-model constraint)."""
        for t, spec in enumerate(specs):
            self.type_ok[:, t] = self.model_ok(spec)
        self.all_types_ok = bool(self.type_ok.all())
        self.refresh_all()

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

    def refresh_all(self) -> None:
        """Recompute every derived column from ``free``, CPU and memory (setup, live state)."""
        self.count_ge, self.case2, self.sum_r = node_aggregates(self.free, self.types)
        self.full = (self.free == 1000).sum(axis=1).astype(np.int16)
        self.max_r = (self.free.max(axis=1) if self.free.shape[1]
                      else np.zeros(len(self.nodes))).astype(np.int16)
        self.vf_ok = self.tenants < self.vf_limit
        self.base = (self.cpu_free * self.inv_cpu + self.mem_free * self.inv_mem
                     + self.sum_r * self.inv_gpu).astype(np.float32)
        self.sn_free = np.bincount(self.sn, weights=self.sum_r, minlength=len(self.sn_free))
        self.frag = fragmentation_from_aggregates(
            self.count_ge, self.case2, self.sum_r, self.cpu_free, self.mem_free, self.types,
            None if self.all_types_ok else self.type_ok)
        self.frag_total = float(self.frag.sum())
        self.keys = None

    def _refresh_node(self, i: int) -> None:
        """One node's derived columns, with small-array operations only."""
        row = self.free[i].astype(np.int64)
        old_sum = int(self.sum_r[i])
        sr = int(row.sum())
        self.sum_r[i] = sr
        self.sn_free[self.sn[i]] += sr - old_sum
        self.full[i] = int((row == 1000).sum())
        self.max_r[i] = int(row.max()) if row.size else 0
        self.vf_ok[i] = self.tenants[i] < self.vf_limit[i]
        cpu, mem = int(self.cpu_free[i]), int(self.mem_free[i])
        self.base[i] = cpu * self.inv_cpu[i] + mem * self.inv_mem[i] + sr * self.inv_gpu[i]
        if self.keys is not None:
            self.keys[i] = self._key(i)
        if not self.track_frag:
            return
        below = row[None, :] < self._theta
        cg = row.size - below.sum(axis=1)
        c2 = (row * below).sum(axis=1)
        self.count_ge[i] = cg
        self.case2[i] = c2
        t = self.types
        fits = (cg >= t.need) & (cpu >= t.cpu_milli) & (mem >= t.memory_mib)
        if not self.all_types_ok:
            fits &= self.type_ok[i]
        new = float(np.where(fits, c2, sr) @ t.p)
        self.frag_total += new - float(self.frag[i])
        self.frag[i] = new

    def _apply(self, placement: Placement, cpu: int, mem: int, sign: int, type_id: int) -> None:
        per_node: dict[int, int] = {}
        gpus_total = 0
        for node, card, milli in placement:
            if card >= 0:
                self.free[node, card] -= sign * milli
                self.allocated_milli += sign * milli
                gpus_total += 1
                per_node[node] = per_node.get(node, 0) + 1
            else:
                per_node.setdefault(node, 0)
        for node, gpus_here in per_node.items():
            share = gpus_here / gpus_total if gpus_total else 1.0 / len(per_node)
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
