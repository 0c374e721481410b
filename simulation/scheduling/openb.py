"""The FGD artifact's openb experiment, reproduced: arrival-only replay of an Alibaba pod list.

Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent", USENIX ATC'23, publish their simulator
(hkust-adsl/kubernetes-scheduler-simulator, commit 8f3d641) with the per-policy GPU
allocation ratio at each arrived load (``experiments/analysis/expected_results/
analysis_allo_discrete.csv``, 10 seeds per policy and pod list). This module follows
that simulator's procedure step by step, so that our figures can be put beside the
published ones (docs/simulation.md, "The FGD headline"). Every rule names the
artifact's file and function it follows:

Workload (``pkg/simulator/core.go`` ``RunCluster`` → ``simulator.go``
``SortClusterPods`` and ``TunePodsByNodeTotalResource``)
    the pod list is shuffled (``--shuffle-pod=true``), then pods drawn uniformly with
    replacement from the original list are *appended* until their GPU request reaches
    ``ratio`` (1.3) × the cluster's GPUs (``tuneUpPods``: it stops when the running
    total plus the drawn pod's *per-card* share would pass the target, a quirk kept
    here). Pods never leave; a pod that fits nowhere fails and is dropped.
Typical pods (``pkg/utils/frag.go`` ``GetTypicalPods``, config
``typicalPodsConfig`` of ``scripts/generate_config_and_run.py``)
    the original pod list (before tuning) grouped by (CPU, GPU share, GPU count, GPU
    model), CPU-only pods included, the most popular kept until they cover 95 % of the
    pods, then renormalised to sum to one. A pod's CPU is its non-zero request
    (Kubernetes counts 0 as 100 m).
Node fragmentation (``frag.go`` ``NodeGpuShareFragAmount``, ``GetNodePodFrag``)
    for each typical pod ``m`` with popularity ``p_m``: if ``m`` fits (the node's GPU
    model allowed, ``num`` cards with at least its share left, its CPU left — memory
    is not looked at) the fragment is the left-over of the cards too small for it;
    otherwise, *and for every CPU-only typical pod*, all the node's unallocated GPU
    share is a fragment. ``F_n = Σ_m p_m F_n(m)`` in thousandths of a card.
Filter (the default kube-scheduler filters + ``open_gpu_share.go`` ``Filter`` →
``gpunodeinfo.go`` ``AllocateGpuId``)
    CPU and memory requests fit; a GPU pod needs its GPU model and one card with its
    share left (shared) or ``num`` untouched cards (whole).
Scores (``pkg/simulator/plugin/*_score.go``), integers 0–100, the highest wins;
ties go to the lexicographically smallest node name (the artifact's patched
``generic_scheduler.go`` ``selectHost``) — and the names are *renamed at random per seed*
first (``simulator.go`` ``syncClusterResourceList``: nodes sorted by name, the ``i``-th
renamed ``"%04d-" % perm[i] + name`` with ``perm = rand.Perm(n)`` from the run's seeded
generator), so a tie goes to a seeded random node, not to the first by name
(:func:`artifact_node_rank`, ``replay(..., ties="artifact")``, the default):

* ``fgd`` (``fgd_score.go`` ``calculateGpuShareFragExtendScore``):
  ``int(100·sigmoid((F_n − F_n')/1000))`` with ``F_n'`` after the pod; a shared pod
  tries each card that holds it and keeps the first best card.
* ``best-fit`` (``best_fit_score.go`` ``getBestFitScore``):
  ``int(100·(1 − ½(cpu_left − cpu)/128 000 − ½(gpu_left − gpu)/8 000))``, then
  ``NormalizeScore`` (``plugin_utils.go``: min–max to 0–100 with integer division).
* ``gpu-packing`` (``gpu_packing_score.go`` ``getPackingScore``): an idle node
  ``max(33 − free, free)``; a pod that needs untouched cards on a used node
  ``max(50 − untouched used, 33)``; a pod that fits on partly used cards
  ``max(100 − Σ(left·100/1000)/10, 50)``; CPU-only pods score 0 everywhere.
* ``dot-product`` (``dot_product_score.go`` ``calculateDotProductScore`` with the
  experiments' ``-dimext merge -norm max``, ``utils.go`` ``GenerateSchedulingMatchGroups``):
  ``int(100·(1 − (cpu_left·cpu/128 000² + gpu_left·gpu/8 000²)/2))``.
* ``gpu-clustering`` (``gpu_clustering_score.go``): a GPU pod's tag is "share" or
  "k-gpu"; ``⌊25·(8000 − gpu_left)/8000⌋`` plus 75 if the node holds only pods of the
  same tag, 50 if it holds that tag among others, 25 if it holds no GPU pod, 0
  otherwise; CPU-only pods score 0 everywhere.
* ``random`` (``random_score.go``): one feasible node drawn uniformly.

Card choice (``open_gpu_share.go`` ``allocateGpuIdBasedOnBestFit``, and for FGD
``fgd_score.go`` ``allocateGpuIdBasedOnFGDScore``): a shared pod goes to the
tightest card that holds it (the first such), whole cards are the first untouched
ones by index; random picks a random card that holds it.

Measurement (``pkg/simulator/analysis.go`` ``ClusterGpuFragReport``, ``experiments/
analysis/merge_alloc_discrete.py``): after every pod, allocated thousandths of a card
over the cluster's cards and the arrived GPU request over the cluster's cards; the
ratio at an arrived load of ``L`` % is the mean over the pods whose arrived load
rounds to ``L`` (within ±1 if none does).

The scores live in :mod:`.scores`, shared with the general engine's policies
(:mod:`.policies`), which place every pod on the same node as this replay when run with
``simulate(..., shuffle=True)`` (tests/simulation/scheduling/test_engine_openb.py).

Not the artifact's code: this is our own vectorised implementation (numpy over all
nodes at once, per-type aggregates updated for the one node that changed). The
artifact's random numbers (Go ``math/rand`` seeded 42…51) are not reproduced; our
shuffle, resampling and node renaming are NumPy's, so single runs differ and the
comparison is of means over seeds.

Example (a two-node toy; FGD keeps the whole 8-card node free for an 8-card type):
    >>> from simulation.scheduling.cluster import Nodes
    >>> from simulation.scheduling.workload import Workload
    >>> nodes = Nodes.from_records([
    ...     dict(name="a", gpus=8, gpu_model="G2", cpu_milli=96000, memory_mib=1 << 20),
    ...     dict(name="b", gpus=8, gpu_model="G2", cpu_milli=96000, memory_mib=1 << 20)])
    >>> w = Workload(name=["p0", "p1", "p2"], tenant=[""] * 3, arrival_s=[0, 1, 2],
    ...              duration_s=[0] * 3, num_gpu=[1, 8, 1], gpu_milli=[500, 1000, 500],
    ...              cpu_milli=[4000, 32000, 4000], memory_mib=[0] * 3,
    ...              gpu_model=[""] * 3, priority=[0] * 3, gang=[True] * 3)
    >>> r = replay(nodes, w, "fgd", order=np.arange(3), ties="name")
    >>> r.failed, round(float(r.used_milli[-1]) / 16000, 3)
    (0, 0.562)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .cluster import Nodes
from .errors import SchedulingInputError
from .scores import (
    best_fit_score,
    clustering_score,
    dot_product_score,
    gpu_tag,
    packing_score,
    sigmoid_score,
)
from .workload import Workload

__all__ = ["OPENB_POLICIES", "TIES", "OpenbResult", "TypicalPods", "allocation_at_load",
           "artifact_node_order", "artifact_node_rank", "replay", "tuned_order",
           "typical_pods"]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
BoolA = npt.NDArray[np.bool_]

OPENB_POLICIES = ("random", "dot-product", "gpu-clustering", "gpu-packing", "best-fit", "fgd")
"""The artifact's six policies, in its order (01-Random … 06-FGD)."""

TIES = ("artifact", "name", "index")
"""How :func:`replay` breaks score ties: the artifact's seeded random renaming
(:func:`artifact_node_rank`), the smallest node name, or the lowest node index (the
general engine's rule, :func:`.engine.simulate`)."""

_MAX_SPEC_CPU = 128_000  # open-gpu-share/utils/const.go MaxSpecCpu (milli-cores)
_MAX_SPEC_GPU = 8_000  # MaxSpecGpu (thousandths of a card)
_DEFAULT_CPU = 100  # kube-scheduler's non-zero default CPU request (milli-cores)


def _nonzero_cpu(cpu: I64) -> I64:
    out: I64 = np.where(cpu > 0, cpu, _DEFAULT_CPU).astype(np.int64)
    return out


@dataclass(frozen=True, eq=False)
class TypicalPods:
    """FGD's target workload: pod shapes and their popularity (``frag.go`` GetTypicalPods)."""

    cpu_milli: I64
    gpu_milli: I64  # share per card; 0 for CPU-only
    num_gpu: I64
    gpu_model: list[str]  # "" = any; else "|"-separated models
    p: F64

    def __len__(self) -> int:
        return len(self.p)


def typical_pods(work: Workload, coverage: float = 0.95) -> TypicalPods:
    """The most popular pod shapes covering ``coverage`` of the pods, renormalised.

    Shapes are sorted by count, ties by (CPU, share, count, model) descending — Go's
    ``sort.Reverse`` of ``TargetPodList.Less`` (``pkg/type/resource.go``).
    """
    if len(work) == 0:
        raise SchedulingInputError("pods", "the pod list is empty")
    cpu = _nonzero_cpu(work.cpu_milli)
    milli = np.where(work.num_gpu > 0, work.gpu_milli, 0)
    counts: dict[tuple[int, int, int, str], int] = {}
    for key in zip(cpu.tolist(), milli.tolist(), work.num_gpu.tolist(), work.gpu_model,
                   strict=True):
        counts[key] = counts.get(key, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    total = float(len(work))
    cum = np.cumsum([c for _, c in ranked])
    keep = int(np.searchsorted(cum, coverage * total)) + 1
    kept = ranked[:keep]
    share = np.array([c for _, c in kept], np.float64) / total
    share /= cum[keep - 1] / total
    return TypicalPods(
        cpu_milli=np.array([k[0] for k, _ in kept], np.int64),
        gpu_milli=np.array([k[1] for k, _ in kept], np.int64),
        num_gpu=np.array([k[2] for k, _ in kept], np.int64),
        gpu_model=[k[3] for k, _ in kept], p=share)


def tuned_order(work: Workload, total_gpus: int, ratio: float = 1.3,
                seed: int = 42) -> I64:
    """Pod indices in arrival order: the list shuffled, then resampled up to ``ratio``.

    ``simulator.go`` ``SortClusterPods`` (shuffle) then ``tuneUpPods`` / ``tuneDownPods``
    (``TunePodsByNodeTotalResource``), with NumPy's generator for Go's ``math/rand``.
    """
    rng = np.random.default_rng(seed)
    n = len(work)
    total_req = work.num_gpu * np.where(work.num_gpu > 0, work.gpu_milli, 0)
    order = rng.permutation(n).astype(np.int64)
    target = ratio * total_gpus * 1000
    arrived = int(total_req.sum())
    if arrived > target:  # tuneDownPods: drop random pods until under the target
        keep = list(order.tolist())
        while arrived > target and keep:
            i = int(rng.integers(len(keep)))
            arrived -= int(total_req[keep.pop(i)])
        return np.array(keep, np.int64)
    extra: list[int] = []
    per_card = np.where(work.num_gpu > 0, work.gpu_milli, 0)
    while True:
        i = int(rng.integers(n))
        if arrived + int(per_card[i]) > target:
            break
        arrived += int(total_req[i])
        extra.append(i)
    out: I64 = np.concatenate([order, np.array(extra, np.int64)])
    return out


def artifact_node_rank(nodes: Nodes, seed: int = 42) -> I64:
    """Each node's place in the artifact's tie order for the run seeded ``seed``.

    ``pkg/simulator/simulator.go`` ``syncClusterResourceList`` sorts the nodes by name,
    draws ``perm = rand.Perm(n)`` from the run's generator (``core.go`` seeds it with the
    tuning seed) and renames the ``i``-th node ``fmt.Sprintf("%04d-", perm[i]) + name``;
    ``selectHost`` then gives a tie to the smallest name, i.e. the smallest ``perm[i]``
    (four zero-padded digits: numeric order while ``n`` ≤ 10 000). The rank returned is
    ``perm[i]`` for the node that is ``i``-th by name. The permutation is drawn from
    NumPy's generator seeded ``(seed, 1)``, not Go's ``math/rand``: a different random
    order per seed, as there, but not the artifact's own.

    >>> from simulation.scheduling.cluster import Nodes
    >>> nodes = Nodes.from_records([dict(name=n, gpus=1) for n in "cab"])
    >>> sorted(artifact_node_rank(nodes, 42).tolist())
    [0, 1, 2]
    """
    n = len(nodes.names)
    by_name = sorted(range(n), key=lambda k: nodes.names[k])
    perm = np.random.default_rng((seed, 1)).permutation(n)
    rank = np.empty(n, np.int64)
    rank[by_name] = perm
    return rank


def artifact_node_order(nodes: Nodes, seed: int = 42) -> Nodes:
    """``nodes`` reordered by :func:`artifact_node_rank`: the node that wins the artifact's
    ties first. A scheduler that breaks ties by the lowest index (the general engine)
    then breaks them as the artifact's run seeded ``seed`` does."""
    records = nodes.to_records()
    order = np.argsort(artifact_node_rank(nodes, seed), kind="stable")
    return Nodes.from_records([records[int(k)] for k in order])


def _tie_rank(nodes: Nodes, ties: str, seed: int) -> I64:
    if ties == "artifact":
        return artifact_node_rank(nodes, seed)
    n = len(nodes.names)
    if ties == "index":
        return np.arange(n, dtype=np.int64)
    order = sorted(range(n), key=lambda k: nodes.names[k])
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    return rank


@dataclass(frozen=True, eq=False)
class OpenbResult:
    """One replay: per arrival, the arrived GPU request, the allocated thousandths and the
    node it went to (-1: failed)."""

    policy: str
    total_gpus: int
    arrived_milli: I64
    used_milli: I64
    failed: int
    node: I64

    def allocation_at(self, load_pct: int) -> float:
        """GPU allocation ratio (%) at ``load_pct`` % arrived (:func:`allocation_at_load`)."""
        return allocation_at_load(self.arrived_milli, self.used_milli, self.total_gpus,
                                  load_pct)


def allocation_at_load(arrived_milli: I64, used_milli: I64, total_gpus: int,
                       load_pct: int) -> float:
    """``merge_alloc_discrete.py``: mean allocation (%, 2 decimals) over arrivals at a load.

    Arrived load is rounded to whole percent, allocation to 2 decimals, as there; if no
    arrival rounds to ``load_pct`` the window is ±1 %. NaN when none is near.
    """
    arr = np.round(arrived_milli / total_gpus / 10, 0)
    alloc = np.round(used_milli / total_gpus / 10, 2)
    sel = arr == load_pct
    if not sel.any():
        sel = (arr >= load_pct - 1) & (arr <= load_pct + 1)
        if not sel.any():
            return float("nan")
    return round(float(alloc[sel].mean()), 2)


class _Cluster:
    """Node state and FGD's per-type aggregates, all nodes at once."""

    def __init__(self, nodes: Nodes, types: TypicalPods, rank: I64) -> None:
        n = len(nodes.names)
        g = int(nodes.gpus.max()) if n else 0
        self.n = n
        self.ncards = nodes.gpus.astype(np.int64)
        self.left = np.where(np.arange(g)[None, :] < self.ncards[:, None], 1000, 0).astype(
            np.int64)
        self.cpu = nodes.cpu_milli.astype(np.int64).copy()
        self.mem = nodes.memory_mib.astype(np.int64).copy()
        self.model = [nodes.models[i] if nodes.gpus[k] > 0 else ""
                      for k, i in enumerate(nodes.gpu_model.tolist())]
        self.tie_rank = rank  # tie order: the smallest (renamed) name wins
        self.types = types
        self.t_gpu = types.gpu_milli > 0
        self.t_access = np.array([[_accessible(m, s) for s in types.gpu_model]
                                  for m in self.model], bool).reshape(n, len(types))
        # aggregates: cards ≥ θ, Σ left of cards < θ, Σ left
        # GPU pods per node and tag (share, 1-, 2-, … max-card): gpu-clustering's affinity
        self.tags = np.zeros((n, g + 1), np.int64)
        self.ge = np.zeros((n, len(types)), np.int64)
        self.small = np.zeros((n, len(types)), np.int64)
        self.refresh(np.arange(n))

    def refresh(self, idx: I64) -> None:
        left = self.left[idx][:, :, None]
        th = self.types.gpu_milli[None, None, :]
        self.ge[idx] = (left >= th).sum(axis=1)
        self.small[idx] = np.where(left < th, left, 0).sum(axis=1)

    def frag_terms(self, idx: I64, ge: I64, small: I64, total: I64, cpu: I64) -> I64:
        """``F_n(m)`` per node of ``idx`` and typical pod (integers, thousandths)."""
        t = self.types
        ok = (ge >= t.num_gpu[None, :]) & (cpu[:, None] >= t.cpu_milli[None, :])
        ok &= self.t_access[idx] & self.t_gpu[None, :]
        out: I64 = np.where(ok, small, total[:, None])
        return out

    def feasible(self, cpu: int, mem: int, num: int, milli: int, model: str) -> I64:
        ok = (self.cpu >= cpu) & (self.mem >= mem)
        if num > 0 and milli > 0:
            ok &= np.array([_accessible(m, model) for m in self.model], bool) if model else \
                self.ncards > 0
            if num == 1:
                ok &= (self.left >= milli).any(axis=1)
            else:
                ok &= (self.left >= milli).sum(axis=1) >= num
        result: I64 = np.flatnonzero(ok)
        return result

    def pick(self, idx: I64, score: I64) -> int:
        best = idx[score == score.max()]
        return int(best[np.argmin(self.tie_rank[best])])


def _accessible(node_model: str, spec: str) -> bool:
    """``utils.go`` ``IsNodeAccessibleToPodByType``: "" or one of the "|"-listed models."""
    wanted = [s for s in spec.split("|") if s]
    return not wanted or (bool(node_model) and node_model in wanted)


def _fgd(cl: _Cluster, idx: I64, cpu: int, num: int, milli: int) -> tuple[int, list[int]]:
    total = cl.left[idx].sum(axis=1)
    f_old = cl.frag_terms(idx, cl.ge[idx], cl.small[idx], total, cl.cpu[idx])
    p = cl.types.p
    th = cl.types.gpu_milli[None, :]
    if num == 1 and milli < 1000:
        left = cl.left[idx]
        # one candidate per node and distinct share (the first card of that share)
        first = np.ones(left.shape, bool)
        for j in range(1, left.shape[1]):
            first[:, j] = (left[:, :j] != left[:, j:j + 1]).all(axis=1)
        ci, cj = np.nonzero(first & (left >= milli))
        r = left[ci, cj][:, None]
        rd = r - milli
        ge = cl.ge[idx][ci] - (r >= th) + (rd >= th)
        small = cl.small[idx][ci] - np.where(r < th, r, 0) + np.where(rd < th, rd, 0)
        sub = idx[ci]
        f_new = cl.frag_terms(sub, ge, small, total[ci] - milli, cl.cpu[sub] - cpu)
        score = sigmoid_score((f_old[ci] - f_new) @ p)
        # per node: best score, first card on ties; then across nodes
        best = score.max()
        nodes_best = sub[score == best]
        node = int(nodes_best[np.argmin(cl.tie_rank[nodes_best])])
        on = (sub == node) & (score == best)
        return node, [int(cj[on].min())]
    k = num if milli > 0 else 0
    ge = cl.ge[idx] - np.where(cl.t_gpu, k, 0)[None, :]
    f_new = cl.frag_terms(idx, ge, cl.small[idx], total - 1000 * k, cl.cpu[idx] - cpu)
    score = sigmoid_score((f_old - f_new) @ p)
    node = cl.pick(idx, score)
    return node, _whole_cards(cl, node, k)


def _whole_cards(cl: _Cluster, node: int, k: int) -> list[int]:
    """``resource.go`` ``AllocateExclusiveGpuId``: the first ``k`` untouched cards."""
    return [int(c) for c in np.flatnonzero(cl.left[node] == 1000)[:k]]


def _tightest(cl: _Cluster, node: int, milli: int) -> int:
    """``allocateGpuIdBasedOnBestFit``: the first card with the least share that holds it."""
    row = cl.left[node]
    return int(np.argmin(np.where(row >= milli, row, 10**9)))


def _best_fit(cl: _Cluster, idx: I64, cpu: int, num: int, milli: int) -> int:
    return cl.pick(idx, best_fit_score(cl.cpu[idx], cl.left[idx].sum(axis=1), cpu,
                                       milli * num, _MAX_SPEC_CPU, _MAX_SPEC_GPU))


def _dot_product(cl: _Cluster, idx: I64, cpu: int, num: int, milli: int) -> int:
    return cl.pick(idx, dot_product_score(cl.cpu[idx], cl.left[idx].sum(axis=1), cpu,
                                          milli * num, _MAX_SPEC_CPU, _MAX_SPEC_GPU))


def _clustering(cl: _Cluster, idx: I64, num: int, milli: int) -> int:
    return cl.pick(idx, clustering_score(cl.tags[idx], cl.left[idx].sum(axis=1), num, milli,
                                         _MAX_SPEC_GPU))


def _packing(cl: _Cluster, idx: I64, num: int, milli: int) -> int:
    return cl.pick(idx, packing_score(cl.left[idx], cl.ncards[idx], num, milli))


def replay(nodes: Nodes, work: Workload, policy: str, *, ratio: float = 1.3, seed: int = 42,
           order: I64 | None = None, ties: str = "artifact") -> OpenbResult:
    """Place ``work`` (shuffled and tuned to ``ratio``, or in ``order``) under ``policy``.

    Arrival-only, as the artifact's ``InitSchedule`` phase; see the module docstring.
    ``ties`` (one of :data:`TIES`): score ties go to the node first in the artifact's
    seeded random renaming (:func:`artifact_node_rank` with ``seed``), the smallest name,
    or the lowest index.
    """
    if policy not in OPENB_POLICIES:
        raise SchedulingInputError("policy", f"unknown policy {policy!r}; one of "
                                   f"{list(OPENB_POLICIES)}")
    if ties not in TIES:
        raise SchedulingInputError("ties", f"unknown tie rule {ties!r}; one of {list(TIES)}")
    total_gpus = int(nodes.gpus.sum())
    if total_gpus <= 0:
        raise SchedulingInputError("nodes", "the cluster has no GPUs")
    types = typical_pods(work)
    seq = tuned_order(work, total_gpus, ratio, seed) if order is None else order
    cl = _Cluster(nodes, types, _tie_rank(nodes, ties, seed))
    rng = np.random.default_rng(seed + 1)  # the general engine's pick_rng: the same draws
    cpu_req = work.cpu_milli
    cpu_score = _nonzero_cpu(work.cpu_milli)
    arrived = np.zeros(seq.size, np.int64)
    used = np.zeros(seq.size, np.int64)
    where = np.full(seq.size, -1, np.int64)
    acc_arr = acc_used = failed = 0
    for step, i in enumerate(seq.tolist()):
        num = int(work.num_gpu[i])
        milli = int(work.gpu_milli[i]) if num > 0 else 0
        acc_arr += num * milli
        idx = cl.feasible(int(cpu_req[i]), int(work.memory_mib[i]), num, milli,
                          work.gpu_model[i])
        if idx.size == 0:
            failed += 1
        else:
            c = int(cpu_score[i])
            cards: list[int]
            if policy == "fgd":
                node, cards = _fgd(cl, idx, c, num, milli)
            else:
                if policy == "random":
                    node = int(rng.choice(idx))
                elif policy == "best-fit":
                    node = _best_fit(cl, idx, c, num, milli)
                elif policy == "dot-product":
                    node = _dot_product(cl, idx, c, num, milli)
                elif policy == "gpu-clustering":
                    node = _clustering(cl, idx, num, milli)
                else:
                    node = _packing(cl, idx, num, milli)
                if milli == 0:
                    cards = []
                elif num == 1 and milli < 1000:
                    if policy == "random":
                        cards = [int(rng.choice(np.flatnonzero(cl.left[node] >= milli)))]
                    else:
                        cards = [_tightest(cl, node, milli)]
                else:
                    cards = _whole_cards(cl, node, num)
            cl.cpu[node] -= int(cpu_req[i])
            cl.mem[node] -= int(work.memory_mib[i])
            for card in cards:
                cl.left[node, card] -= milli
            acc_used += milli * len(cards)
            if milli > 0:
                cl.tags[node, gpu_tag(num, milli)] += 1
            where[step] = node
            cl.refresh(np.array([node]))
        arrived[step] = acc_arr
        used[step] = acc_used
    return OpenbResult(policy=policy, total_gpus=total_gpus, arrived_milli=arrived,
                       used_milli=used, failed=failed, node=where)
