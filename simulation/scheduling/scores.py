"""The FGD artifact's node scores, one implementation for both scheduling paths.

Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
Fragmentation Gradient Descent", USENIX ATC'23, publish their simulator
(hkust-adsl/kubernetes-scheduler-simulator, commit 8f3d641); its score plugins
(``pkg/simulator/plugin/*_score.go``) are what the paper's policies *are*. The
functions here are those plugins, vectorised over candidate rows: a row is a node
(:mod:`.openb`'s replay) or a distinct node state (:mod:`.policies`, the general
engine), so the two paths score with the same code. Every score is an integer
0–100 and the **highest wins**; ties go to the lowest node index (the artifact's
patched ``selectHost`` takes the smallest node name; on the openb node list, whose
names sort in file order, the two are the same node).

``max_cpu`` / ``max_gpu`` are the artifact's ``MaxSpecCpu`` = 128 000 milli-cores
and ``MaxSpecGpu`` = 8 000 thousandths (``open-gpu-share/utils/const.go``): the
largest node of the Alibaba cluster. The general engine passes its own cluster's
largest node (assumption: that is what the constants stand for; on the openb node
list both are 128 000 and 8 × 1000, so the figures are the artifact's).

Example (best-fit's raw score of a node with 64 cores and 4 cards left, for a
4-core, one-card pod: ``int(100·(1 − ½·60/128 − ½·3/8)) = 57``):
    >>> import numpy as np
    >>> best_fit_raw(np.array([64000]), np.array([4000]), 4000, 1000, 128000, 8000).tolist()
    [57]
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["DEFAULT_CPU", "best_fit_raw", "best_fit_score", "clustering_score",
           "dot_product_score", "gpu_tag", "min_max_normalise", "nonzero_cpu",
           "packing_score", "sigmoid_score"]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
IntA = npt.NDArray[np.signedinteger[Any]]

DEFAULT_CPU = 100
"""kube-scheduler's non-zero default CPU request (milli-cores) for a pod asking none."""


def nonzero_cpu(cpu: int) -> int:
    """The CPU request the scores see: Kubernetes counts 0 as 100 m."""
    return cpu if cpu > 0 else DEFAULT_CPU


def sigmoid_score(gain: F64) -> I64:
    """FGD (``fgd_score.go`` ``calculateGpuShareFragExtendScore``): ``int(100·σ(gain/1000))``.

    ``gain`` is the node's fragmentation before minus after the pod (thousandths of a
    card, ``Σ_m p_m (F_n(m) − F_n'(m))``): no growth scores 50, a drop more. The
    integer cut makes near-equal nodes tie (then the lowest index wins).
    """
    out: I64 = (1.0 / (1.0 + np.exp(-np.asarray(gain, np.float64) / 1000.0)) * 100.0).astype(
        np.int64)
    return out


def best_fit_raw(cpu_left: IntA, gpu_left: IntA, cpu: int, gpu: int, max_cpu: float,
                 max_gpu: float) -> I64:
    """``best_fit_score.go`` ``getBestFitScore``:
    ``int(100·(1 − ½(cpu_left − cpu)/max_cpu − ½(gpu_left − gpu)/max_gpu))``.

    ``gpu_left``: the node's Σ free thousandths; ``gpu``: the pod's total thousandths.
    Memory is not looked at.
    """
    s = (cpu_left - cpu) / max_cpu * 0.5 + (gpu_left - gpu) / max_gpu * 0.5
    out: I64 = ((1.0 - s) * 100.0).astype(np.int64)
    return out


def min_max_normalise(raw: I64) -> I64:
    """``plugin_utils.go`` ``NormalizeScore``: min–max onto 0–100, integer division."""
    lo, hi = int(raw.min()), int(raw.max())
    if hi == lo:
        return np.zeros_like(raw)
    out: I64 = (raw - lo) * 100 // (hi - lo)
    return out


def best_fit_score(cpu_left: IntA, gpu_left: IntA, cpu: int, gpu: int, max_cpu: float,
                   max_gpu: float) -> I64:
    """Best-fit as the scheduler ranks it: :func:`best_fit_raw` then normalised over the
    feasible candidates (the same minimum and maximum over nodes or over their states)."""
    return min_max_normalise(best_fit_raw(cpu_left, gpu_left, cpu, gpu, max_cpu, max_gpu))


def dot_product_score(cpu_left: IntA, gpu_left: IntA, cpu: int, gpu: int, max_cpu: float,
                      max_gpu: float) -> I64:
    """``dot_product_score.go`` ``calculateDotProductScore`` with the experiments'
    ``-dimext merge -norm max``: ``int(100·(1 − (cpu_left·cpu/max_cpu² +
    gpu_left·gpu/max_gpu²)/2))`` — the smallest dot product of free and asked wins."""
    dot = (cpu_left / max_cpu) * (cpu / max_cpu) + (gpu_left / max_gpu) * (gpu / max_gpu)
    out: I64 = (100.0 * (1.0 - dot / 2.0)).astype(np.int64)
    return out


def packing_score(left: IntA, ncards: IntA, num: int, milli: int) -> I64:
    """``gpu_packing_score.go`` ``getPackingScore`` per row of card shares ``left`` (any
    card order; absent cards 0) with ``ncards`` cards.

    An idle node scores ``max(33 − free, free)``; a pod that takes untouched cards on a
    used node ``max(50 − untouched taken, 33)``; a pod that fits on partly used cards
    ``max(100 − Σ(left·100/1000)/10, 50)``; a CPU-only pod 0 everywhere.
    """
    n = left.shape[0]
    if milli <= 0:
        return np.zeros(n, np.int64)
    left = left.astype(np.int64)
    full = (left == 1000).sum(axis=1)
    idle = full == ncards
    # the `num` tightest cards that hold the share (ascending, stable): any untouched?
    holds = np.where(left >= milli, left, 10**9)
    srt = np.sort(holds, axis=1)[:, :num]
    use_full = (srt == 1000).sum(axis=1)
    shared = np.where(srt < 10**9, srt * 100 // 1000, 0).sum(axis=1)
    score = np.where(use_full > 0, np.maximum(50 - use_full, 33),
                     np.maximum(100 - shared // 10, 50))
    out: I64 = np.where(idle, np.maximum(33 - full, full), score).astype(np.int64)
    return out


def gpu_tag(num: int, milli: int) -> int:
    """``pod.go`` ``GetGpuAffinityFromPodAnnotation``: 0 = shares a card, k = k whole cards."""
    return 0 if milli < 1000 else num


def clustering_score(tags: IntA, gpu_left: IntA, num: int, milli: int,
                     max_gpu: float) -> I64:
    """``gpu_clustering_score.go``: ``⌊25·(max_gpu − gpu_left)/max_gpu⌋`` plus 75 if the
    node holds only GPU pods of this pod's tag, 50 if it holds that tag among others, 25
    if it holds no GPU pod, 0 otherwise; a CPU-only pod 0 everywhere.

    ``tags``: rows × tags, the GPU pods of each tag (:func:`gpu_tag`) on the node.
    """
    n = tags.shape[0]
    if milli <= 0:
        return np.zeros(n, np.int64)
    t = gpu_tag(num, milli)
    same = tags[:, t] > 0 if t < tags.shape[1] else np.zeros(n, bool)
    kinds = (tags > 0).sum(axis=1)
    base = (25 * (max_gpu - gpu_left) // max_gpu).astype(np.int64)
    out: I64 = (base + np.where(same, np.where(kinds == 1, 75, 50),
                                np.where(kinds == 0, 25, 0))).astype(np.int64)
    return out
