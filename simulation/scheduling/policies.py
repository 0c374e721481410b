"""Placement policies: which node (and card) a task goes to, scored over all nodes at once.

Every policy first computes the feasible nodes (GPU model, CPU, memory, a free
SR-IOV virtual function, and cards: ``k`` untouched cards for a whole-card task,
one card with at least the share left for a shared task) as one boolean vector,
then picks among them with a vectorised score (``argmin``), never a Python loop
over nodes:

``fifo-first-fit``
    the first feasible node in node order (Slurm/Kubernetes default order).
``best-fit``
    least resources left after placement, Σ over CPU, memory and GPU of
    (free − request)/capacity (Kubernetes ``MostAllocated`` scoring; the FGD
    paper's Best-fit baseline, ATC'23 §6.1).
``dot-product``
    smallest dot product of the node's free resources and the task's request,
    both normalised by the node's capacity (the FGD paper's DotProd baseline,
    after Tetris, Grandl et al., SIGCOMM'14).
``gpu-packing``
    a shared task goes to an already shared card if one fits, else to a node
    already in use, idle nodes last (the FGD paper's GPU Packing baseline).
``gpu-clustering``
    nodes already running tasks of the same GPU demand first, then nodes with
    the fewest other tasks (the FGD paper's GPU Clustering baseline).
``random``
    uniform over the feasible nodes (seeded).
``fgd``
    the node and card where the cluster's fragmentation ``Σ F_n(M)`` grows
    least (Weng et al., ATC'23, Alg. 1); see :mod:`.fragmentation`.
``topology-aware``
    single-node tasks best-fit on cards, ties to the fullest supernode; a
    multi-node task goes into one supernode if any can hold it (the smallest
    that can), whole servers first and consecutive (a compact sub-block),
    the same local card indices on every server (rail-aligned); otherwise
    across the fewest supernodes.
``easy-backfill``
    first-fit placement; the simulator's queue then backfills (EASY, Lifka 1995).

Multi-node tasks (more cards than the widest node) are placed all-or-nothing
(gang scheduling): whole cards only, CPU and memory split by cards.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .errors import SchedulingInputError
from .state import ClusterState, Placement

__all__ = ["POLICIES", "JobRequest", "place_job"]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
BoolA = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class JobRequest:
    """One task as the placer sees it (thousandths of a card, CPU milli-cores, MiB)."""

    num_gpu: int
    gpu_milli: int
    cpu_milli: int = 0
    memory_mib: int = 0
    gpu_model: str = ""
    type_id: int = -1

    @property
    def shared(self) -> bool:
        """One card, partly."""
        return self.num_gpu == 1 and self.gpu_milli < 1000

    @property
    def demand_milli(self) -> int:
        """Thousandths of a card asked for in total."""
        return self.gpu_milli if self.num_gpu == 1 else self.num_gpu * 1000


POLICIES: dict[str, str] = {
    "fifo-first-fit": "First feasible node in node order.",
    "best-fit": "Least CPU+memory+GPU left after placement (Kubernetes MostAllocated).",
    "random": "Uniformly random feasible node (seeded).",
    "dot-product": "Smallest dot product of free resources and request (FGD paper baseline).",
    "gpu-packing": "Shared cards first, then used nodes, idle nodes last.",
    "gpu-clustering": "Nodes running the same task type first.",
    "fgd": "Least growth of fragmentation (Weng et al., ATC'23).",
    "topology-aware": "Same server, then one supernode, compact and rail-aligned.",
    "easy-backfill": "First-fit placement with EASY backfilling of the queue.",
}
"""Policy name → one-line description (the API lists these)."""


def _feasible(st: ClusterState, job: JobRequest) -> BoolA:
    if job.num_gpu == 0:
        ok = st.vf_ok.copy()
    elif job.shared:
        ok = (st.max_r >= job.gpu_milli) & st.vf_ok
    else:
        ok = (st.full >= job.num_gpu) & st.vf_ok
    if job.gpu_model:
        ok &= st.model_ok(job.gpu_model)
    if job.cpu_milli > 0:
        ok &= st.cpu_free >= job.cpu_milli
    if job.memory_mib > 0:
        ok &= st.mem_free >= job.memory_mib
    return ok


def _first(mask: BoolA) -> int | None:
    i = int(np.argmax(mask))
    return i if mask[i] else None


def _argmin(score: npt.NDArray[np.floating], mask: BoolA) -> int | None:
    """Index of the lowest score among ``mask`` (the first on ties)."""
    first = _first(mask)
    if first is None:
        return None
    masked = np.where(mask, score, score.dtype.type(np.inf))
    return int(np.argmin(masked))


def _leftover(st: ClusterState, job: JobRequest) -> npt.NDArray[np.floating]:
    """Σ (free − request)/capacity over CPU, memory and GPU; with the same capacities on
    every node the request term is one constant, so the ranking is the base score alone."""
    if st.uniform_caps:
        base: npt.NDArray[np.floating] = st.base
        return base
    score: npt.NDArray[np.floating] = (
        st.base - np.float32(job.cpu_milli) * st.inv_cpu
        - np.float32(job.memory_mib) * st.inv_mem - np.float32(job.demand_milli) * st.inv_gpu)
    return score


def _fgd_whole(st: ClusterState, job: JobRequest, idx: I64) -> F64:
    """ΔF of putting ``job`` (whole cards or CPU only) on each node in ``idx``.

    Whole cards: k untouched cards go to 0 — ``count_ge`` drops by k for every type
    with θ > 0, ``case2`` is unchanged (a card at 0 is no fragment), Σ R drops by 1000k.
    """
    k = job.num_gpu
    cg = st.count_ge[idx] - np.where(st.types.theta > 0, k, 0)
    new = _frag(st, idx, cg, st.case2[idx], st.sum_r[idx] - 1000 * k, job)
    delta: F64 = new - st.frag[idx]
    return delta


def _frag(st: ClusterState, idx: I64, cg: I64, c2: I64, sr: I64, job: JobRequest) -> F64:
    from .fragmentation import fragmentation_from_aggregates

    return fragmentation_from_aggregates(
        cg, c2, sr, st.cpu_free[idx] - job.cpu_milli, st.mem_free[idx] - job.memory_mib,
        st.types, st.type_ok[idx])


def _fgd_shared(st: ClusterState, job: JobRequest, idx: I64) -> tuple[int, int] | None:
    """(node, card) of least ΔF for a shared task; candidates = each node's distinct shares.

    Card with share r → r − d: ``count_ge`` changes by [r−d ≥ θ] − [r ≥ θ], ``case2`` by
    (r−d)[r−d < θ] − r[r < θ], Σ R by −d.
    """
    d = job.gpu_milli
    srt = np.sort(st.free[idx].astype(np.int64), axis=1)
    distinct = np.ones_like(srt, bool)
    distinct[:, 1:] = srt[:, 1:] != srt[:, :-1]
    cand = distinct & (srt >= d)
    ci, cj = np.nonzero(cand)
    if ci.size == 0:
        return None
    r = srt[ci, cj][:, None]
    th = st.types.theta[None, :]
    rd = r - d
    node = idx[ci]
    cg = st.count_ge[node] + (rd >= th).astype(np.int64) - (r >= th).astype(np.int64)
    c2 = st.case2[node] + rd * (rd < th) - r * (r < th)
    delta = _frag(st, node, cg, c2, st.sum_r[node] - d, job) - st.frag[node]
    ties = np.flatnonzero(delta <= delta.min() + 1e-9)
    best = int(ties[np.argmin(node[ties])])
    n = int(node[best])
    card = int(np.flatnonzero(st.free[n] == int(r[best, 0]))[0])
    return n, card


def _distinct_states(st: ClusterState, idx: I64) -> I64:
    """One node (the lowest index) per distinct state among ``idx`` (ascending)."""
    if idx.size < 2:
        return idx
    _, first = np.unique(st.state_keys()[idx], return_index=True)
    result: I64 = np.sort(idx[first])
    return result


def _shared_card(st: ClusterState, n: int, d: int, how: str, rng: np.random.Generator) -> int:
    row = st.free[n].astype(np.int64)
    fits = row >= d
    if how == "first":
        return int(np.argmax(fits))
    if how == "random":
        return int(rng.choice(np.flatnonzero(fits)))
    return int(np.argmin(np.where(fits, row, 10**9)))  # tightest


def _whole_cards(st: ClusterState, n: int, k: int) -> list[int]:
    return [int(c) for c in np.flatnonzero(st.free[n] == 1000)[:k]]


def _single_node(
    st: ClusterState, job: JobRequest, policy: str, rng: np.random.Generator
) -> Placement | None:
    ok = _feasible(st, job)
    card_rule = "tight"
    node: int | None
    if policy in ("fifo-first-fit", "easy-backfill"):
        node, card_rule = _first(ok), "first"
    elif policy == "random":
        cand = np.flatnonzero(ok)
        node = int(rng.choice(cand)) if cand.size else None
        card_rule = "random"
    elif policy == "best-fit":
        node = _argmin(_leftover(st, job), ok)
    elif policy == "dot-product":
        score = (job.cpu_milli * st.cpu_free * st.inv_cpu**2
                 + job.memory_mib * st.mem_free * st.inv_mem**2
                 + job.demand_milli * st.sum_r * st.inv_gpu**2)
        node = _argmin(score, ok)
    elif policy == "gpu-packing":
        used = st.sum_r < st.capacity_gpus * 1000
        cat = np.where(used, 1.0, 2.0)
        if job.shared:
            part = (st.free > 0) & (st.free < 1000) & (st.free >= job.gpu_milli)
            cat = np.where(part.any(axis=1), 0.0, cat)
        node = _argmin(cat, ok)
    elif policy == "gpu-clustering":
        same = st.type_count[:, job.type_id]
        others = st.tenants - same
        node = _argmin(-same * 1e6 + others, ok)
    elif policy == "topology-aware":
        sn_share = (st.sn_free / st.sn_cap)[st.sn]
        node = _argmin(st.sum_r * 0.002 + sn_share, ok)
    elif policy == "fgd":
        idx = _distinct_states(st, np.flatnonzero(ok))
        if idx.size == 0:
            return None
        if job.shared:
            found = _fgd_shared(st, job, idx)
            if found is None:
                return None
            return [(found[0], found[1], job.gpu_milli)]
        delta = _fgd_whole(st, job, idx)
        node = int(idx[delta <= delta.min() + 1e-9].min())
    else:
        raise SchedulingInputError(
            "policy", f"unknown policy {policy!r}; one of {sorted(POLICIES)}")
    if node is None:
        return None
    if job.num_gpu == 0:
        return [(node, -1, 0)]
    if job.shared:
        return [(node, _shared_card(st, node, job.gpu_milli, card_rule, rng), job.gpu_milli)]
    return [(node, c, 1000) for c in _whole_cards(st, node, job.num_gpu)]


def _multi_node(
    st: ClusterState, job: JobRequest, policy: str, rng: np.random.Generator
) -> Placement | None:
    """Gang placement of a task wider than any node: all its cards or nothing."""
    k = job.num_gpu
    cpg = job.cpu_milli / k
    mpg = job.memory_mib / k
    usable = st.full.astype(np.int64)
    if cpg > 0:
        usable = np.minimum(usable, (st.cpu_free // cpg).astype(np.int64))
    if mpg > 0:
        usable = np.minimum(usable, (st.mem_free // mpg).astype(np.int64))
    usable = np.where(st.model_ok(job.gpu_model) & st.vf_ok, usable, 0).astype(np.int64)
    if int(usable.sum()) < k:
        return None
    if policy in ("fifo-first-fit", "easy-backfill"):
        order = np.flatnonzero(usable)
    elif policy == "random":
        order = rng.permutation(np.flatnonzero(usable))
    elif policy == "topology-aware":
        order = _topology_order(st, usable, k)
    else:
        cand = np.flatnonzero(usable)
        order = cand[np.argsort(-usable[cand], kind="stable")]
    take = usable[order]
    cum = np.cumsum(take)
    last = int(np.searchsorted(cum, k))
    chosen = order[: last + 1]
    counts = take[: last + 1].copy()
    counts[-1] -= int(cum[last]) - k
    if policy not in ("fifo-first-fit", "easy-backfill", "random") and last > 0:
        # the remainder on the tightest node that holds it, not on a big one
        rem = int(counts[-1])
        rest = order[last:]
        fit = rest[usable[rest] >= rem]
        if fit.size:
            best = int(fit[np.argmin(usable[fit])])
            chosen[-1] = best
    placement: Placement = []
    for n, c in zip(chosen.tolist(), counts.tolist(), strict=True):
        placement.extend((int(n), card, 1000) for card in _whole_cards(st, int(n), int(c)))
    return placement


def _topology_order(st: ClusterState, usable: I64, k: int) -> I64:
    """Nodes in the order topology-aware placement takes them.

    The smallest supernode that holds all ``k`` cards, else supernodes by free cards
    (fewest supernodes); inside, whole free servers first in id order (a compact
    block), then partly free servers by free cards.
    """
    sn = st.nodes.supernode
    sn_free = np.bincount(sn, weights=usable, minlength=int(sn.max()) + 1)
    holds = np.flatnonzero(sn_free >= k)
    if holds.size:
        sn_rank = np.full(len(sn_free), np.inf)
        best = holds[np.argmin(sn_free[holds])]
        sn_rank[best] = 0.0
    else:
        sn_rank = -sn_free.astype(np.float64)
    cand = np.flatnonzero(usable)
    whole = usable[cand] == st.capacity_gpus[cand]
    key_sn = sn_rank[sn[cand]]
    keep = np.isfinite(key_sn)
    cand, whole, key_sn = cand[keep], whole[keep], key_sn[keep]
    order = np.lexsort((cand, -usable[cand], ~whole, key_sn))
    result: I64 = cand[order]
    return result


def place_job(
    st: ClusterState, job: JobRequest, policy: str, rng: np.random.Generator
) -> Placement | None:
    """Where ``job`` goes under ``policy`` (``None`` if nowhere now). Does not allocate."""
    if policy not in POLICIES:
        raise SchedulingInputError(
            "policy", f"unknown policy {policy!r}; one of {sorted(POLICIES)}")
    if job.num_gpu > st.nodes.max_gpus:
        return _multi_node(st, job, policy, rng)
    return _single_node(st, job, policy, rng)
