"""Placement policies: which node (and card) a task goes to, scored over all nodes at once.

Every policy first computes the feasible nodes (GPU model, CPU, memory, a free
SR-IOV virtual function, and cards: ``k`` untouched cards for a whole-card task,
one card with at least the share left for a shared task) as one boolean vector,
then picks among them with a vectorised score (``argmin``), never a Python loop
over nodes. The policies in :data:`STATE_POLICIES` (first-fit, best-fit,
dot-product, GPU packing, FGD) score only what a node's state determines, so they
run over the distinct node states (:mod:`.states`) and take the lowest-index node
of the best state — the same choice as over nodes with ties to the lowest index,
on a vector up to ~50× shorter on a large, mostly idle cluster:

``fifo-first-fit``
    the first feasible node in node order (Slurm/Kubernetes default order).
``best-fit``, ``dot-product``, ``gpu-packing``, ``gpu-clustering``, ``fgd``
    the FGD artifact's score plugins (Weng et al., ATC'23, §6.1 baselines and FGD,
    Alg. 1; hkust-adsl/kubernetes-scheduler-simulator ``pkg/simulator/plugin``),
    one implementation in :mod:`.scores` shared with :mod:`.openb`: integer 0–100
    scores, the highest wins, ties to the lowest node index. FGD's fragmentation
    is :mod:`.fragmentation`'s, a shared task tries every distinct share.
``random``
    uniform over the feasible nodes (seeded).
``topology-aware``
    single-node tasks best-fit on cards, ties to the fullest supernode; a
    multi-node task goes onto whole free servers (every rail, the same local
    card indices on each: rail-aligned) of one supernode if any has enough of
    them (the smallest that has, in id order: a compact sub-block); otherwise
    whole free servers across the fewest supernodes, then partly free servers.
``easy-backfill``
    first-fit placement; the simulator's queue then backfills (EASY, Lifka 1995).

Multi-node tasks (more cards than the widest node) are placed all-or-nothing
(gang scheduling): whole cards only, CPU and memory split by cards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .errors import SchedulingInputError
from .scores import (
    best_fit_score,
    clustering_score,
    dot_product_score,
    nonzero_cpu,
    packing_score,
    sigmoid_score,
)
from .state import ClusterState, Placement

__all__ = ["POLICIES", "STATE_POLICIES", "JobRequest", "place_job"]

I64 = npt.NDArray[np.int64]
IntA = npt.NDArray[np.signedinteger[Any]]
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
    "best-fit": "Least CPU+GPU left after placement (the FGD artifact's best-fit score).",
    "random": "Uniformly random feasible node (seeded).",
    "dot-product": "Smallest dot product of free resources and request (FGD paper baseline).",
    "gpu-packing": "Partly used cards first, then used nodes, idle nodes last (artifact).",
    "gpu-clustering": "Nodes holding only GPU tasks of the same tag first (artifact).",
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


STATE_POLICIES = frozenset({"fifo-first-fit", "easy-backfill", "best-fit", "dot-product",
                            "gpu-packing", "fgd"})
"""Policies whose feasibility and score depend on a node's state only (:mod:`.states`)."""


def _feasible_states(st: ClusterState, job: JobRequest) -> I64:
    """Live states where ``job`` fits (same rules as :func:`_feasible`, per state)."""
    tab = st.table
    n = tab.size
    ok = (tab.count[:n] > 0) & tab.vf_ok[:n]
    if job.shared:
        ok &= tab.max_r[:n] >= job.gpu_milli
    elif job.num_gpu > 0:
        ok &= tab.full[:n] >= job.num_gpu
    if job.gpu_model:
        ok &= st.shape_model_ok(job.gpu_model)[tab.shape[:n]]
    if job.cpu_milli > 0:
        ok &= tab.cpu[:n] >= job.cpu_milli
    if job.memory_mib > 0:
        ok &= tab.mem[:n] >= job.memory_mib
    result: I64 = np.flatnonzero(ok)
    return result


def _lowest_node(st: ClusterState, states: I64, score: F64 | None = None,
                 tol: float = 0.0) -> int:
    """The lowest node index among the states of least score (all of them if no score)."""
    if score is not None:
        states = states[score <= score.min() + tol]
    return int(st.table.minnode[states].min())


def _fits_with(st: ClusterState, idx: I64, cpu: IntA, mem: IntA) -> BoolA:
    """states × types: with ``cpu``/``mem`` left (per state), CPU, memory and the GPU
    model allow the type (the cards are :func:`_frag_terms`' test)."""
    tab, t = st.table, st.types
    ok: BoolA = (cpu[:, None] >= t.cpu_milli) & (mem[:, None] >= t.memory_mib)
    ok &= tab.shape_type_ok[tab.shape[idx]]
    return ok


def _frag_terms(st: ClusterState, cg: IntA, c2: IntA, sr: IntA, fits: BoolA) -> I64:
    """``F_n(m)`` per candidate and type from the aggregates (:mod:`.fragmentation`)."""
    fits = fits & (cg >= st.types.need)
    result: I64 = np.where(fits, c2, sr[:, None]).astype(np.int64)
    return result


def _fgd_whole(st: ClusterState, job: JobRequest, idx: I64, cpu: int) -> I64:
    """FGD's score of putting ``job`` (whole cards or CPU only) on each state of ``idx``.

    Whole cards: k untouched cards go to 0 — ``count_ge`` drops by k for every type
    with θ > 0, ``case2`` is unchanged (a card at 0 is no fragment), Σ R drops by 1000k.
    ``cpu``: the request as the score sees it (:func:`.scores.nonzero_cpu`).
    """
    tab = st.table
    k = job.num_gpu
    cpu_now, mem_now = tab.cpu[idx], tab.mem[idx]
    old = _frag_terms(st, tab.count_ge[idx], tab.case2[idx], tab.sum_r[idx],
                      _fits_with(st, idx, cpu_now, mem_now))
    cg = tab.count_ge[idx] - np.where(st.types.theta > 0, k, 0)
    new = _frag_terms(st, cg, tab.case2[idx], tab.sum_r[idx] - 1000 * k,
                      _fits_with(st, idx, cpu_now - cpu, mem_now - job.memory_mib))
    return sigmoid_score((old - new) @ st.types.p)


def _fgd_shared(st: ClusterState, job: JobRequest, idx: I64, cpu: int) -> tuple[int, int]:
    """(node, card) of FGD's best score for a shared task; candidates = each state's
    distinct shares that hold it (the artifact tries every card; cards of one share score
    alike). Ties: the lowest node, then its lowest card among the best shares.

    Card with share r → r − d: ``count_ge`` changes by [r−d ≥ θ] − [r ≥ θ], ``case2`` by
    (r−d)[r−d < θ] − r[r < θ], Σ R by −d.
    """
    tab = st.table
    d = job.gpu_milli
    srt = tab.rows[idx]  # sorted ascending
    distinct = np.ones(srt.shape, bool)
    distinct[:, 1:] = srt[:, 1:] != srt[:, :-1]
    ci, cj = np.nonzero(distinct & (srt >= d))
    r = srt[ci, cj].astype(np.int64)[:, None]
    th = st.types.theta[None, :]
    rd = r - d
    state = idx[ci]
    cpu_now, mem_now = tab.cpu[state], tab.mem[state]
    old = _frag_terms(st, tab.count_ge[state], tab.case2[state], tab.sum_r[state],
                      _fits_with(st, state, cpu_now, mem_now))
    ge_r, ge_rd = r >= th, rd >= th
    cg = tab.count_ge[state] + ge_rd - ge_r
    c2 = tab.case2[state] + np.where(ge_rd, 0, rd) - np.where(ge_r, 0, r)
    new = _frag_terms(st, cg, c2, tab.sum_r[state] - d,
                      _fits_with(st, state, cpu_now - cpu, mem_now - job.memory_mib))
    score = sigmoid_score((old - new) @ st.types.p)
    top = score == score.max()
    n = int(tab.minnode[state[top]].min())
    row = st.free[n].astype(np.int64)
    shares = r[top & (tab.minnode[state] == n), 0]
    card = int(np.flatnonzero(np.isin(row, shares))[0])
    return n, card


def _state_node(st: ClusterState, job: JobRequest, policy: str) -> int | tuple[int, int] | None:
    """A state-based policy's node (or (node, card) for FGD's shared tasks).

    Best-fit, dot-product, GPU packing and FGD are the artifact's score plugins
    (:mod:`.scores`, highest wins); a state's score is its nodes' score, so the best
    state's lowest node is the artifact's choice with ties to the lowest node.
    """
    idx = _feasible_states(st, job)
    if idx.size == 0:
        return None
    tab = st.table
    if policy in ("fifo-first-fit", "easy-backfill"):
        return _lowest_node(st, idx)
    cpu = nonzero_cpu(job.cpu_milli)
    gpu = job.demand_milli if job.num_gpu else 0
    score: I64
    if policy == "best-fit":
        score = best_fit_score(tab.cpu[idx], tab.sum_r[idx], cpu, gpu, st.max_cpu, st.max_gpu)
    elif policy == "dot-product":
        score = dot_product_score(tab.cpu[idx], tab.sum_r[idx], cpu, gpu, st.max_cpu,
                                  st.max_gpu)
    elif policy == "gpu-packing":
        milli = job.gpu_milli if job.num_gpu else 0
        score = packing_score(tab.rows[idx], tab.shape_gpus[tab.shape[idx]], job.num_gpu,
                              milli)
    elif job.shared:  # fgd
        return _fgd_shared(st, job, idx, cpu)
    else:
        score = _fgd_whole(st, job, idx, cpu)
    return _lowest_node(st, idx, -score.astype(np.float64))


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
    card_rule = "first" if policy in ("fifo-first-fit", "easy-backfill") else "tight"
    node: int | None
    if policy in STATE_POLICIES:
        found = _state_node(st, job, policy)
        if isinstance(found, tuple):
            return [(found[0], found[1], job.gpu_milli)]
        node = found
    else:
        ok = _feasible(st, job)
        if policy == "random":
            cand = np.flatnonzero(ok)
            node = int(rng.choice(cand)) if cand.size else None
            card_rule = "random"
        elif policy == "gpu-clustering":
            cand = np.flatnonzero(ok)
            milli = job.gpu_milli if job.num_gpu else 0
            score = clustering_score(st.tag_count[cand], st.sum_r[cand], job.num_gpu, milli,
                                     st.max_gpu)
            node = int(cand[np.argmax(score)]) if cand.size else None
        elif policy == "topology-aware":
            sn_share = (st.sn_free / st.sn_cap)[st.sn]
            node = _argmin(st.sum_r * 0.002 + sn_share, ok)
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

    Whole free servers give a rail-aligned ring of ``min_i c_i = 8`` channels; a partly
    free server in the ring caps every channel at its free cards (see
    :mod:`.allreduce`). So: if some supernode has enough whole free servers, the
    smallest such supernode's whole servers in id order (a compact block, one spine
    block); else whole free servers anywhere, supernodes with the most of them first
    (fewest supernodes), then partly free servers by free cards.
    """
    sn = st.nodes.supernode
    cand = np.flatnonzero(usable)
    whole = usable[cand] == st.capacity_gpus[cand]
    sn_whole = np.bincount(sn[cand], weights=np.where(whole, usable[cand], 0),
                           minlength=int(sn.max()) + 1)
    holds = np.flatnonzero(sn_whole >= k)
    if holds.size:
        best = holds[np.argmin(sn_whole[holds])]
        block: I64 = cand[whole & (sn[cand] == best)]
        return block
    sn_key = np.where(whole, -sn_whole[sn[cand]], 0.0)
    order = np.lexsort((cand, -usable[cand], sn_key, ~whole))
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
