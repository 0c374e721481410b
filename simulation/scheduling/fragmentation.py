"""GPU fragmentation as defined by FGD, evaluated for every node at once.

Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent", USENIX ATC'23, §3: fragmentation is measured
*with respect to the workload that is expected to arrive*. The workload is a
distribution over task types ``m`` (GPU demand ``D_m`` — a fraction of a card,
or whole cards — plus CPU and memory) with popularity ``p_m``. For a node ``n``
whose cards have unallocated shares ``R_g`` (thousandths, 0..1000):

* if task ``m`` cannot run on ``n`` at all (not enough CPU or memory, wrong GPU
  model, or no card set that holds ``D_m``) every unallocated share is a
  fragment for it: ``F_n(m) = Σ_g R_g``; so is it for a CPU-only task, which uses
  no card (the artifact, hkust-adsl/kubernetes-scheduler-simulator ``pkg/utils/
  frag.go`` ``NodeGpuShareFragAmount``: a typical pod without GPU counts the node's
  whole unallocated share; :data:`CPU_ONLY_NEED` makes the fit test fail for it);
* otherwise a card's share is a fragment when it is too small for the task:
  ``F_n(m) = Σ_g R_g · [R_g < min(D_m, 1)]`` (a partly used card cannot serve a
  whole-card task; a card with less left than a shared task's fraction cannot
  serve it).

The node's fragmentation is the expectation ``F_n(M) = Σ_m p_m F_n(m)`` and
the cluster's is ``Σ_n F_n(M)``. FGD places each task where ``F_n(M)`` grows
least (the steepest descent of fragmentation).

To score all nodes at once, each node keeps per-type aggregates — ``count_ge``
(cards with ``R_g ≥ θ_m``, where ``θ_m = min(D_m, 1)``), ``case2``
(``Σ_g R_g [R_g < θ_m]``) and ``sum_r`` (``Σ_g R_g``) — from which ``F_n(m)``
before and after a candidate placement follow in O(types) per node.

Example (hand-worked, §3's definition): a 4-card node with shares left
[1000, 1000, 500, 0] and two task types, a half card (p = 0.5) and one whole
card (p = 0.5), both fitting: for the half card no share is below 500, so
F = 0; for the whole card the 500 left on card 2 is a fragment, F = 500;
F_n(M) = 0.5·0 + 0.5·500 = 250 thousandths of a card.

    >>> import numpy as np
    >>> types = TaskTypes.from_arrays([1, 1], [500, 1000], [0, 0], [0, 0], [1, 1])
    >>> float(node_fragmentation(np.array([[1000, 1000, 500, 0]]), np.array([10**6]),
    ...                          np.array([10**6]), types)[0])
    250.0
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["CPU_ONLY_NEED", "TaskTypes", "fragmentation_from_aggregates", "node_aggregates",
           "node_fragmentation"]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
BoolA = npt.NDArray[np.bool_]


CPU_ONLY_NEED = 1 << 30
"""``need`` of a CPU-only task type: more cards than any node has, so it never "fits" and
every unallocated share counts as its fragment (the artifact's ``frag.go``)."""


@dataclass(frozen=True, eq=False)
class TaskTypes:
    """The target workload as task types (FGD's ``M``), in columns.

    ``theta``: ``min(D_m, 1)`` in thousandths (0 for CPU-only tasks); ``need``:
    cards that must have ``R_g ≥ θ`` (``num_gpu`` for whole cards, 1 for a shared
    task, :data:`CPU_ONLY_NEED` for CPU-only); ``p``: popularity (sums to 1).
    """

    num_gpu: I64
    milli: I64
    cpu_milli: I64
    memory_mib: I64
    p: F64
    theta: I64
    need: I64

    @classmethod
    def from_arrays(
        cls,
        num_gpu: npt.ArrayLike,
        milli: npt.ArrayLike,
        cpu_milli: npt.ArrayLike,
        memory_mib: npt.ArrayLike,
        weight: npt.ArrayLike,
    ) -> TaskTypes:
        """Types from columns; ``weight`` is normalised to popularity."""
        k = np.asarray(num_gpu, np.int64)
        m = np.asarray(milli, np.int64)
        w = np.asarray(weight, np.float64)
        total = float(w.sum())
        p = w / total if total > 0 else w
        theta = np.where(k == 0, 0, np.where(k == 1, np.minimum(m, 1000), 1000))
        need = np.where(k == 0, CPU_ONLY_NEED, np.where((k == 1) & (m < 1000), 1, k))
        return cls(k, m, np.asarray(cpu_milli, np.int64), np.asarray(memory_mib, np.int64),
                   p, theta.astype(np.int64), need.astype(np.int64))

    @classmethod
    def from_workload(
        cls,
        num_gpu: I64,
        gpu_milli: I64,
        cpu_milli: I64,
        memory_mib: I64,
        max_types: int = 16,
    ) -> TaskTypes:
        """The workload's distinct (num_gpu, gpu_milli) classes, each with its median CPU
        and memory: every whole-card and CPU-only class, and the most popular shared
        classes up to ``max_types`` in all (popularities renormalised).

        FGD (§4) takes the target workload from the recent task history; grouping by
        GPU demand is its task-type notion; capping the count keeps scoring O(types).
        """
        if len(num_gpu) == 0:
            return cls.from_arrays([1], [1000], [0], [0], [1.0])
        key = num_gpu.astype(np.int64) * 2048 + gpu_milli.astype(np.int64)
        uniq, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
        # every whole-card and CPU-only class is kept (rare 8-card tasks are what
        # fragmentation hurts most); the shared classes fill the rest by popularity
        shared = (uniq // 2048 == 1) & (uniq % 2048 < 1000)
        whole = np.flatnonzero(~shared)
        by_pop = np.flatnonzero(shared)[np.argsort(-counts[shared], kind="stable")]
        order = np.concatenate([whole, by_pop[: max(0, max_types - len(whole))]])
        order = order[np.argsort(-counts[order], kind="stable")]
        cpu = np.array([np.median(cpu_milli[inverse == t]) for t in order], np.int64)
        mem = np.array([np.median(memory_mib[inverse == t]) for t in order], np.int64)
        return cls.from_arrays(uniq[order] // 2048, uniq[order] % 2048, cpu, mem, counts[order])

    def __len__(self) -> int:
        return len(self.p)

    def to_dict(self) -> list[dict[str, float]]:
        """Plain JSON: one entry per type."""
        return [
            {"num_gpu": int(self.num_gpu[t]), "gpu_milli": int(self.milli[t]),
             "cpu_milli": int(self.cpu_milli[t]), "memory_mib": int(self.memory_mib[t]),
             "popularity": float(self.p[t])}
            for t in range(len(self))
        ]


def node_aggregates(free: npt.NDArray[np.integer], types: TaskTypes) -> tuple[I64, I64, I64]:
    """``(count_ge, case2, sum_r)`` of each node: nodes × types, nodes × types, nodes.

    ``free`` is nodes × cards of unallocated thousandths (0 for missing or failed cards).
    """
    r = np.asarray(free, np.int64)[:, None, :]
    th = types.theta[None, :, None]
    count_ge = (r >= th).sum(axis=2)
    case2 = (r * (r < th)).sum(axis=2)
    return count_ge.astype(np.int64), case2.astype(np.int64), r[:, 0, :].sum(axis=1)


def fragmentation_from_aggregates(
    count_ge: I64,
    case2: I64,
    sum_r: I64,
    cpu_free: I64,
    mem_free: I64,
    types: TaskTypes,
    type_ok: BoolA | None = None,
) -> F64:
    """``F_n(M)`` (thousandths of a card) from the aggregates; leading shapes broadcast.

    ``count_ge``/``case2`` are (..., types); ``sum_r``, ``cpu_free``, ``mem_free`` (...);
    ``type_ok`` (..., types) is False where the node's GPU model rules the type out.
    """
    fits = count_ge >= types.need
    fits &= cpu_free[..., None] >= types.cpu_milli
    fits &= mem_free[..., None] >= types.memory_mib
    if type_ok is not None:
        fits &= type_ok
    per_type = np.where(fits, case2, sum_r[..., None])
    result: F64 = per_type @ types.p
    return result


def node_fragmentation(
    free: npt.NDArray[np.integer],
    cpu_free: npt.NDArray[np.integer],
    mem_free: npt.NDArray[np.integer],
    types: TaskTypes,
    type_ok: BoolA | None = None,
) -> F64:
    """``F_n(M)`` of every node directly from its free shares (ATC'23 §3, Eq. 1–2)."""
    count_ge, case2, sum_r = node_aggregates(free, types)
    return fragmentation_from_aggregates(
        count_ge, case2, sum_r, np.asarray(cpu_free, np.int64),
        np.asarray(mem_free, np.int64), types, type_ok)
