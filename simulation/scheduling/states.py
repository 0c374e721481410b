"""Nodes bucketed by state, so that a policy scores each distinct state once, not each node.

A node's *state* is what every state-based policy's feasibility and score depend
on: its shape (CPU, memory and GPU capacity, GPU model, SR-IOV limit), its cards'
free shares as a multiset (sorted), its free CPU and memory, and whether it has a
virtual function left. Nodes in the same state are interchangeable for first-fit,
best-fit, dot-product, GPU packing and FGD except for their index, and those
policies break ties by the lowest index; so the table keeps, per state, the node
count and the lowest node index (a heap with lazy deletion), and a placement is

1. a vector pass over the live states (feasibility, score), and
2. the lowest-index node of the best state(s).

On a busy million-card cluster most nodes are in a few states (idle; one card
used; …): the 131,072 nodes of the million-card preset fall into a few thousand
states, so a pass is ~50× shorter than a pass over nodes. Each state carries
its own FGD aggregates (:mod:`.fragmentation`) computed once when the state is
first seen, so a node changing state costs a dict look-up and two heap
operations; the cluster's fragmentation is ``Σ_state count · F_state``.
Dead states (no node left) are dropped by a vectorised rebuild when they
outnumber the live ones.

Example (three 2-card nodes, two of them idle):
    >>> import numpy as np
    >>> from simulation.scheduling.fragmentation import TaskTypes
    >>> t = StateTable(np.zeros(3, np.int64), np.ones((1, 3)), np.array([2]),
    ...                np.ones((1, 1), bool), TaskTypes.from_arrays([1], [1000], [0], [0], [1]))
    >>> t.rebuild(np.array([[1000, 1000], [500, 1000], [1000, 1000]], np.int16),
    ...           np.zeros(3, np.int64), np.zeros(3, np.int64), np.ones(3, bool))
    >>> live = t.live_states()
    >>> t.count[live].tolist(), t.minnode[live].tolist(), t.frag[live].tolist()
    ([1, 2], [1, 0], [500.0, 0.0])
"""

from __future__ import annotations

import heapq
import struct
from bisect import bisect_left
from itertools import accumulate

import numpy as np
import numpy.typing as npt

from .fragmentation import TaskTypes, fragmentation_from_aggregates, node_aggregates

__all__ = ["StateTable"]

I64 = npt.NDArray[np.int64]
I16 = npt.NDArray[np.int16]
I32 = npt.NDArray[np.int32]
F64 = npt.NDArray[np.float64]
BoolA = npt.NDArray[np.bool_]

_PACK = struct.Struct("<qqq?")
NO_NODE = np.iinfo(np.int64).max
"""``minnode`` of a state without nodes."""


class StateTable:
    """Distinct node states with their counts, lowest node, aggregates and scores.

    Args:
        node_shape: shape id of each node.
        shape_inv: shapes × 3 — 1/CPU, 1/memory, 1/GPU-thousandths capacity (0 if none).
        shape_gpus: healthy cards of each shape.
        shape_type_ok: shapes × types — the task type may use this shape's GPU model.
        types: FGD's task types.
    """

    def __init__(self, node_shape: I64, shape_inv: F64, shape_gpus: I64,
                 shape_type_ok: BoolA, types: TaskTypes) -> None:
        self.node_shape = node_shape
        self.shape_inv = shape_inv
        self.shape_gpus = shape_gpus
        self.shape_type_ok = shape_type_ok
        self.types = types
        self.node_state = np.zeros(len(node_shape), np.int64)
        self.lookup: dict[bytes, int] = {}
        self.keys: list[bytes] = []
        self.heaps: list[list[int]] = []
        self.set_type_ok(shape_type_ok)
        self.size = 0
        self.live = 0
        self._alloc(0, 0)

    def set_type_ok(self, shape_type_ok: BoolA) -> None:
        """Which task types each shape's GPU model allows (then :meth:`rebuild`)."""
        self.shape_type_ok = shape_type_ok
        t = self.types
        self._type_lists = (t.theta.tolist(), t.need.tolist(), t.cpu_milli.tolist(),
                            t.memory_mib.tolist(), t.p.tolist())
        self._shape_ok_lists = shape_type_ok.tolist()
        self._shape_inv_lists = self.shape_inv.tolist()

    # ------------------------------------------------------------ storage
    def _alloc(self, capacity: int, cards: int) -> None:
        t = len(self.types)
        self.rows: I16 = np.zeros((capacity, cards), np.int16)
        self.cpu: I64 = np.zeros(capacity, np.int64)
        self.mem: I64 = np.zeros(capacity, np.int64)
        self.shape: I64 = np.zeros(capacity, np.int64)
        self.vf_ok: BoolA = np.zeros(capacity, bool)
        self.full: I64 = np.zeros(capacity, np.int64)
        self.max_r: I64 = np.zeros(capacity, np.int64)
        self.sum_r: I64 = np.zeros(capacity, np.int64)
        self.count_ge: I32 = np.zeros((capacity, t), np.int32)
        self.case2: I32 = np.zeros((capacity, t), np.int32)
        self.frag: F64 = np.zeros(capacity, np.float64)
        self.base: F64 = np.zeros(capacity, np.float64)
        self.count: I64 = np.zeros(capacity, np.int64)
        self.minnode: I64 = np.full(capacity, NO_NODE, np.int64)

    _COLS = ("rows", "cpu", "mem", "shape", "vf_ok", "full", "max_r", "sum_r", "count_ge",
             "case2", "frag", "base", "count", "minnode")

    def _grow(self) -> None:
        cap = max(64, 2 * len(self.cpu))
        for name in self._COLS:
            old = getattr(self, name)
            new = np.zeros((cap, *old.shape[1:]), old.dtype)
            if name == "minnode":
                new[:] = NO_NODE
            new[: len(old)] = old
            setattr(self, name, new)

    def _fill(self, lo: int, rows: I16, cpu: I64, mem: I64, shape: I64, vf: BoolA) -> None:
        """Columns of states ``lo .. lo+len(rows)`` from their defining values."""
        hi = lo + len(rows)
        self.rows[lo:hi] = rows
        self.cpu[lo:hi], self.mem[lo:hi], self.shape[lo:hi] = cpu, mem, shape
        self.vf_ok[lo:hi] = vf
        r = rows.astype(np.int64)
        self.full[lo:hi] = (r == 1000).sum(axis=1)
        self.max_r[lo:hi] = r.max(axis=1) if r.shape[1] else 0
        cg, c2, sr = node_aggregates(r, self.types)
        self.count_ge[lo:hi], self.case2[lo:hi], self.sum_r[lo:hi] = cg, c2, sr
        self.frag[lo:hi] = fragmentation_from_aggregates(
            cg, c2, sr, cpu, mem, self.types, self.shape_type_ok[shape])
        inv = self.shape_inv[shape]
        self.base[lo:hi] = cpu * inv[:, 0] + mem * inv[:, 1] + sr * inv[:, 2]

    @staticmethod
    def key(sorted_row: list[int], cpu: int, mem: int, shape: int, vf: bool) -> bytes:
        """The dict key of a state."""
        return _PACK.pack(cpu, mem, shape, vf) + bytes(str(sorted_row), "ascii")

    # ------------------------------------------------------------ building
    def rebuild(self, free: I16, cpu_free: I64, mem_free: I64, vf_ok: BoolA) -> None:
        """All states from the node columns at once (setup, live state, compaction)."""
        n, g = free.shape
        srt = np.sort(free, axis=1)
        mat = np.column_stack([srt.astype(np.int64), cpu_free, mem_free, self.node_shape,
                               vf_ok.astype(np.int64)]) if n else np.zeros((0, g + 4), np.int64)
        uniq, first, inverse, counts = np.unique(
            mat, axis=0, return_index=True, return_inverse=True, return_counts=True)
        inverse = inverse.reshape(-1)
        s = len(uniq)
        self._alloc(max(64, 2 * s), g)
        rows = uniq[:, :g].astype(np.int16)
        self._fill(0, rows, uniq[:, g], uniq[:, g + 1], uniq[:, g + 2], uniq[:, g + 3] > 0)
        self.count[:s] = counts
        self.minnode[:s] = first
        self.size = self.live = s
        self.node_state = inverse.astype(np.int64)
        row_lists = rows.tolist()
        self.keys = [self.key(row_lists[k], int(uniq[k, g]), int(uniq[k, g + 1]),
                              int(uniq[k, g + 2]), bool(uniq[k, g + 3])) for k in range(s)]
        self.lookup = {key: k for k, key in enumerate(self.keys)}
        order = np.argsort(inverse, kind="stable")
        bounds = np.cumsum(counts)[:-1]
        self.heaps = [part.tolist() for part in np.split(order, bounds)] if s else []

    def _new_state(self, key: bytes, srt: list[int], cpu: int, mem: int, shape: int,
                   vf: bool) -> int:
        """Append one state; its aggregates from the sorted shares in O(types) in plain
        Python (cards ≥ θ are a suffix of the sorted row, the shares below θ a prefix sum;
        a few scalars beat a dozen numpy calls on 8 cards × 16 types)."""
        if self.size == len(self.cpu):
            self._grow()
        k = self.size
        g = len(srt)
        prefix = [0, *accumulate(srt)]
        sr = prefix[-1]
        self.rows[k] = srt
        self.cpu[k], self.mem[k], self.shape[k], self.vf_ok[k] = cpu, mem, shape, vf
        self.full[k] = g - bisect_left(srt, 1000)
        self.max_r[k] = srt[-1] if g else 0
        self.sum_r[k] = sr
        cgs, c2s = [], []
        frag = 0.0
        ok = self._shape_ok_lists[shape]
        for theta, need, tcpu, tmem, p, tok in zip(*self._type_lists, ok, strict=True):
            below = bisect_left(srt, theta)
            cg, c2 = g - below, prefix[below]
            cgs.append(cg)
            c2s.append(c2)
            fits = cg >= need and cpu >= tcpu and mem >= tmem and tok
            frag += p * (c2 if fits else sr)
        self.count_ge[k], self.case2[k] = cgs, c2s
        self.frag[k] = frag
        inv = self._shape_inv_lists[shape]
        self.base[k] = cpu * inv[0] + mem * inv[1] + sr * inv[2]
        self.size += 1
        self.lookup[key] = k
        self.keys.append(key)
        self.heaps.append([])
        return k

    def compact(self) -> None:
        """Drop the states without nodes (renumbering; O(states) plus one gather over nodes)."""
        live = self.live_states()
        remap = np.full(self.size, -1, np.int64)
        remap[live] = np.arange(len(live))
        for name in self._COLS:
            col = getattr(self, name)
            col[: len(live)] = col[live]
            if name == "minnode":
                col[len(live):] = NO_NODE
            elif name == "count":
                col[len(live):] = 0
        self.node_state = remap[self.node_state]
        keep = live.tolist()
        self.heaps = [self.heaps[k] for k in keep]
        self.keys = [self.keys[k] for k in keep]
        self.lookup = {key: k for k, key in enumerate(self.keys)}
        self.size = len(live)
        # heap entries stay meaningful: an entry is valid iff node_state[node] is the
        # heap's state, and the renumbering is one-to-one on live states

    # ------------------------------------------------------------ updates
    def move(self, node: int, srt: list[int], cpu: int, mem: int, vf: bool) -> float:
        """Put ``node`` in the state of its new values (``srt``: its free shares, sorted);
        returns the change of ``Σ F``."""
        shape = int(self.node_shape[node])
        key = _PACK.pack(cpu, mem, shape, vf) + bytes(str(srt), "ascii")
        b = self.lookup.get(key)
        if b is None:
            b = self._new_state(key, srt, cpu, mem, shape, vf)
        a = int(self.node_state[node])
        if a == b:
            return 0.0
        self.node_state[node] = b
        count = self.count
        count[a] -= 1
        if count[a] == 0:
            self.live -= 1
            self.minnode[a] = NO_NODE
            self.heaps[a] = []
        elif self.minnode[a] == node:
            heap, states = self.heaps[a], self.node_state
            while heap and states[heap[0]] != a:
                heapq.heappop(heap)
            self.minnode[a] = heap[0]
        if count[b] == 0:
            self.live += 1
        count[b] += 1
        heapq.heappush(self.heaps[b], node)
        if node < self.minnode[b]:
            self.minnode[b] = node
        return float(self.frag[b] - self.frag[a])

    @property
    def needs_compaction(self) -> bool:
        """Dead states outnumber live ones (and there are enough to matter)."""
        return self.size - self.live > max(64, self.live // 2)

    # ------------------------------------------------------------ queries
    def live_states(self) -> I64:
        """Indices of the states that hold at least one node."""
        result: I64 = np.flatnonzero(self.count[: self.size] > 0)
        return result

    def frag_total(self) -> float:
        """``Σ_n F_n(M)`` over the cluster."""
        n = self.size
        return float(self.count[:n] @ self.frag[:n])

    def maxima(self) -> tuple[int, int, int]:
        """(most untouched cards, largest free share, most free CPU) of any node."""
        live = self.count[: self.size] > 0
        if not live.any():
            return 0, 0, 0
        return (int(self.full[: self.size][live].max()), int(self.max_r[: self.size][live].max()),
                int(self.cpu[: self.size][live].max()))
