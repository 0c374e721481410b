"""Host-side dispatch of an MoE layer: when the CPU cannot run ahead of the GPU.

A GPU is fed by one host thread that launches kernels asynchronously: as long as
that thread is ahead, each kernel starts as soon as the previous one ends and the
host's per-op cost is hidden (only the ~1 µs back-to-back gap stays,
:data:`.core.KERNEL_GAP_S`). Megatron-Core's all-to-all token dispatcher
(``MoEAlltoAllTokenDispatcher``, ``megatron/core/transformer/moe/token_dispatcher.py``)
breaks that: the all-to-all's ``input_splits`` / ``output_splits`` and the grouped
GEMM's tokens per expert are needed on the host, so ``preprocess`` copies them
device → host and the dispatcher synchronises the stream (``cuda_sync_point``
``before_ep_alltoall`` with EP, ``before_finish`` without; dropless routing). After
that point the host is exactly where the GPU is, so until the next synchronisation
(the next MoE layer's) every kernel waits for its own launch: that stretch of the
step takes

    max(GPU time, n_kernels × host cost per op)

(the forward segment: from one layer's dispatch to the next's, i.e. one layer's
forward kernels). The backward has no synchronisation (the splits are saved on the
host), but every 1F1B step interleaves forwards, so the host starts each backward
with no lead; it is priced the same way per layer (homogeneous layers: the running
max over a stage equals the per-layer max).

**Host cost per op** :data:`HOST_OP_S` = 8 µs: an eager PyTorch CUDA op issued back to
back (Python, the ATen dispatcher, the CUDA launch), measured at 8 µs per ``add`` on an
A100 (flagos-ai/Torch-FL pull request 27, "cuda_sub" column: N ops issued, one sync at
the end, so the host cost alone); consistent with 6.8 µs per autograd-recorded op in
pytorch/pytorch issue 41383 and with the 6.7 µs a launch adds when the host waits for
the GPU before each kernel (NVIDIA Technical Blog, A. Gray 2019, "Getting Started with
CUDA Graphs": 2.9 µs kernels take 9.6 µs each when every launch follows a
synchronisation). A lower bound for Megatron's Python-level ops (module hooks,
autograd functions), an upper one for the kernels Transformer Engine launches from
C++ (grouped GEMMs, casts); one figure for both.

**Kernels per MoE layer** (:func:`moe_layer_kernels`), counted from Megatron-Core's
code (``moe_layer.py``, ``router.py``, ``token_dispatcher.py``, ``moe_utils.py``,
``experts.py`` ``TEGroupedMLP``) with the permute fusion on:

* the layer outside the MLP (:data:`ATTENTION_KERNELS_FWD` = 8: norm, QKV GEMM, flash
  attention, projection GEMM, TP collective, bias-dropout-add, pre-MLP norm, the MLP's
  bias-dropout-add; backward twice, as :data:`.core.KERNELS_FWD`);
* router and dispatch outside the experts (:data:`MOE_KERNELS_FWD` = 30): gating GEMM,
  the benchmark's forced-balance logits, top-k + softmax, the auxiliary-loss scores,
  its ``routing_map.sum``, the switch load-balancing loss (4 element-wise ops) and
  its tracker add (10); ``preprocess``: the tokens per expert, the per-rank input
  splits, their all-gather over TP × EP, the local slice, the per-rank and per-TP sums
  and the local-expert sum, three device-to-host copies (11); permute 1 (tokens and
  probs, 2); the two dispatch all-to-alls (tokens, probs: 2); sort by local expert
  (1); the weighted activation (1); unsort, combine all-to-all, unpermute (3); with
  expert biases (GPT-OSS) the eager bias of the down projection (:data:`EXPERT_BIAS_KERNELS`);
  backward :data:`MOE_KERNELS_BWD` = 31: the differentiable ones twice (router 8 →
  16 minus the no-grad counts, permutes, all-to-alls, sorts, activation);
* the experts (``TEGroupedMLP``: Transformer Engine's ``GroupedLinear`` issues one GEMM
  per local expert): per local expert E/ep 2 GEMMs forward and 4 backward (data and
  weight gradients), and under FP8 / FP4 one input cast per GEMM forward and one
  output-gradient cast per GEMM backward (2 + 2).

Qwen3-30B-A3B on EP 8 (16 local experts) under MXFP8: 8 + 30 + 16·4 = 102 kernels
forward, 16 + 31 + 16·6 = 143 backward, + the two attention GEMMs' casts each way
(MXFP8: one kernel a cast): 249 kernels per layer and micro-batch.

**An expert GEMM costs more to issue than an element-wise op**
(:data:`HOST_EXPERT_GEMM_S` = 68.1 µs, :func:`moe_layer_host_s`). Transformer Engine's
``GroupedLinear`` runs its per-expert GEMMs through ``nvte_multi_stream_cublas_gemm``
(NVIDIA/TransformerEngine pull request 853, "Grouped GEMM via multi-stream cuBLAS";
``transformer_engine/common/gemm/cublaslt_gemm.cu``: one ``nvte_cublas_gemm`` per expert
on ``compute_streams[i % num_streams]``, an event record and wait per stream; pull request
3134, 2026: it "currently runs as a per-expert loop of cuBLASLt GEMMs across multiple CUDA
streams"), and around those calls the module runs PyTorch ops per expert: "the CPU
overheads of PyTorch ops, such as ``torch.split()``, and ``torch.empty()`` (2x
``num_gemms`` calls)" (a Transformer Engine maintainer, NVIDIA/TransformerEngine issue
1499, on why a ``TERowParallelGroupedLinear`` forward lasts far longer than its
``nvte_multi_stream_cublas_gemm``). The whole module's host cost per expert GEMM is
measured in a published Megatron-Core profile of this very layer
(yanring/Megatron-MoE-ModelZoo issue 7, 2025-08-18: Qwen3-30B-A3B on 8 B200, EP 8, BF16,
micro-batch 1, all-to-all dispatcher, ``nsys`` NVTX summary): the ``MOE_EXPERTS_COMP``
range — ``TEGroupedMLP``'s forward, after the dispatcher's synchronisation, with no
blocking call in it (the tokens per expert are already a host list) — has a median of
2,187,257 ns over 6,144 instances for 16 local experts: 32 expert GEMMs and the weighted
activation, so (2.187 ms − 8 µs) / 32 = 68.1 µs per expert GEMM. In the same profile the
``nvte_cublas_gemm`` range alone (the cuBLASLt call) has a median of 13.7 µs: the rest is
the module's PyTorch-side work the maintainer names. Cross-checks, not fitted:
Transformer Engine pull request 3134's "PURE" row times the GEMM calls alone, operands
pre-swizzled (8 experts × 128 tokens, N = K = 2,048, NVFP4, SM100: 0.267 ms, 33.4 µs a
GEMM), below the module's figure as it should be; issue 1499's H800 FP8 run (Megatron-Core
0.10, 8 local experts) reports a ``TEGroupedLinear`` forward of "about 1ms" — the model
prices one at 8 × (68.1 + 8 µs cast) = 0.61 ms, below it. It is priced as the issue cost
of each expert GEMM in the host-bound segment, so it counts only where it exceeds the
GPU's own time. **Assumptions**: the same per-GEMM cost on every card, host CPU and GEMM
dtype (the path is host-bound, not tensor-core bound; the figure is a B200 host's, with
``nsys`` tracing on, whose per-CUDA-call cost it includes), the backward's data- and
weight-gradient GEMMs at the forward's figure (no backward range was published), and the
casts and the other kernels at :data:`HOST_OP_S`. The profile's router and dispatch ranges
(``MOE_ROUTER_AND_PRE`` 1.87 ms, ``MOE_DISPATCH`` 2.62 ms median) are not used: they hold
the dispatcher's device-to-host synchronisation, i.e. waits for the GPU, not host cost.
Qwen3-30B-A3B on EP 8, MXFP8: 32 expert GEMMs forward, 64 backward, (104 − 32)·8 +
32·68.1 = 2.76 ms forward and (145 − 64)·8 + 64·68.1 = 5.01 ms backward of host time per
layer and micro-batch (the bare 8 µs per kernel gave 2.0 ms for both).

``Execution.moe_dispatcher``: ``alltoall`` (the default: the
``moe_token_dispatcher_type`` Megatron-Bridge's H100, B200 and B300 Qwen3 235B
performance presets set) and ``flex`` (Megatron-Core's flex dispatcher: its GB200 / GB300
presets use HybridEP with the router and the dispatch preprocessing CUDA-graphed; the
permuted buffer is sized on the host, ``tokens_per_expert.sum()``, its full cost not
checked) price this, ``flex`` with the same kernel count (its own is not counted) but
without the sort by local expert (:func:`.layer.moe_sort_elements`); ``device`` is a
dispatch whose sizes stay on the GPU (a CUDA-graphed MoE layer, device-initiated grouped
GEMMs), where the host runs ahead as in a dense layer.

**HybridEP's all-to-all** (``Execution.hybridep_sms``, :func:`hybridep_layer_s`).
Megatron-Core's flex dispatcher with ``moe_flex_dispatcher_backend = "hybridep"``
(``_HybridEPManager``, ``megatron/core/transformer/moe/token_dispatcher.py`` and
``fused_a2a.py`` at the commit Megatron-Bridge ``v0.2.0`` pins, 0d8e0714,
``core_dev_r0.15.0``) runs each dispatch as HybridEP's ``dispatch_with_permute``
(deepseek-ai/DeepEP branch ``hybrid-ep``): the routing map all-gathered over the EP group, a
metadata-preprocessing kernel, the received-token count copied to the host
(``use_host_meta``: Megatron passes no ``num_permuted_tokens`` in dropless training, "which
causes a D2H synchronization" — the host wait the model already prices for ``flex``; still so
at the commit Megatron-Bridge ``v0.3.0`` pins, b0cc2706: ``non_blocking`` only with
``num_permuted_tokens`` given), one TMA dispatch kernel on ``moe_hybridep_num_sms`` SMs (16
by default, ``transformer_config.py``: "In pure NVL scenarios, 16 SMs can generally achieve
good bandwidth"; the 25.11 presets leave it, the 26.02 ones set 32) and a local permute
(priced with the layer's permute, :func:`.layer.layer_kernels`); the combine is
``combine_with_unpermute``; their backwards swap them. Each token is sent **once per
destination rank**, not once per expert (the receiving rank permutes it to its experts), and
the time is the one measured for HybridEP: DeepEP ``hybrid-ep`` pull request 428
(``Hybrid-EP_Intra-node_Implementation.md``, 2025-09-25, now ``docs/README_Hybrid-EP.md``),
GB200 NVL72, 4,096 tokens a rank, hidden 7,168, top-8, 8 local experts, random uniform
routing, "Torch API" columns (the Python call: the routing-map all-gather, the
preprocessing, the host copy and the kernel — the path Megatron takes), "algorithm
bandwidth" = the BF16 bytes of the tokens a rank receives (``dispatched_hidden.numel() * 2``
in the pull request's ``tests/test_mnnvlink_hybridep.py``) over the call's time, GB/s:

=====  ==================  ==================
ranks  16 SMs: dispatch /  32 SMs: dispatch /
       combine             combine
=====  ==================  ==================
8      550.10 / 538.44     545.71 / 568.94
16     472.84 / 474.48     523.48 / 521.55
24     441.89 / 444.40     507.32 / 483.76
32     485.50 / 423.19     484.22 / 464.54
36     469.96 / 418.27     479.02 / 447.89
=====  ==================  ==================

(:data:`HYBRIDEP_GB200`; the B200 row of the same document, 8 ranks, 16 SMs: 535.94 /
530.86, :data:`HYBRIDEP_B200`). A rank receives T·ep·f tokens of its peers' T each, f the
chance a token's top-k experts touch it (:func:`ranks_hit_fraction`, uniform top-k as the
benchmark's random router and the force-balanced router of the published runs); one layer's
four (dispatch and combine, forward and backward) take 2·B/dispatch + 2·B/combine,
B = T·ep·f·h·2 bytes (BF16: the 25.11 dispatcher asserts "HybridEP dispatcher does not
support fp8 dispatch now"). **Assumptions**: the rank count read linearly between the
measured ones and held at the nearest outside them (no figure past 36 ranks: EP 64 at 36's);
GB300 at GB200's figures (the same NVLink-5 switch tray, not measured); the backward's
dispatch at the forward's figure though it reuses the handle (no all-gather or
preprocessing again: an upper bound); the message size of the measured runs (58.7 MB a rank
in) for every run; uniform top-k (DeepSeek-V3's group-limited routing, 4 of 8 groups, makes
f ≤ 10 % smaller: not priced); only inside one NVLink domain (across domains the model's
all-to-all price stays: HybridEP's RDMA path was not measured here); other cards, and B200
at 32 SMs, keep the model's price. Under ``ep_overlap`` the hidden part holds HybridEP's SMs,
not ``SystemSpec.comm_sms``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = [
    "ATTENTION_KERNELS_FWD",
    "EXPERTS_COMP_MEDIAN_S",
    "EXPERT_BIAS_KERNELS",
    "HOST_EXPERT_GEMM_S",
    "HOST_OP_S",
    "MOE_DISPATCHERS",
    "MOE_KERNELS_BWD",
    "MOE_KERNELS_FWD",
    "HYBRIDEP_B200",
    "HYBRIDEP_GB200",
    "HYBRIDEP_SMS",
    "host_bound_excess",
    "hybridep_layer_s",
    "moe_layer_host_s",
    "moe_layer_kernels",
    "ranks_hit_fraction",
]

F64 = npt.NDArray[np.float64]

HOST_OP_S = 8e-6
"""Host cost of one eager op issued back to back (module docstring)."""
EXPERTS_COMP_MEDIAN_S = 2_187_257e-9
"""Median host time of ``TEGroupedMLP``'s forward for 16 local experts (32 expert GEMMs and
the weighted activation), Qwen3-30B-A3B on 8 B200, BF16, EP 8: the ``MOE_EXPERTS_COMP``
NVTX range of yanring/Megatron-MoE-ModelZoo issue 7 (module docstring)."""
HOST_EXPERT_GEMM_S = (EXPERTS_COMP_MEDIAN_S - HOST_OP_S) / 32
"""Host cost of one expert GEMM of Transformer Engine's ``GroupedLinear`` (its cuBLASLt call
and the module's per-expert PyTorch ops): :data:`EXPERTS_COMP_MEDIAN_S` less the activation's
:data:`HOST_OP_S`, over its 32 GEMMs — 68.1 µs (module docstring)."""
MOE_DISPATCHERS = ("alltoall", "flex", "device")
"""``Execution.moe_dispatcher``: host-synchronised with the received tokens sorted by local
expert (Megatron-Core's all-to-all dispatcher), host-synchronised without that sort
(Megatron-Core's flex dispatcher, DeepEP or HybridEP: the tokens per expert read on the host
to size the permuted buffer, ``tokens_per_expert.sum().item()`` in ``_DeepepManager``,
``num_permuted_tokens`` in ``_HybridEPManager``), or device-side sizes (no synchronisation,
no sort: e.g. HybridEP with the MoE layer CUDA-graphed)."""
HYBRIDEP_SMS = (0, 16, 32)
"""``Execution.hybridep_sms``: 0, the model's all-to-all; 16 or 32, HybridEP on that many SMs
(the SM counts HybridEP was measured at). Megatron-Core's ``moe_hybridep_num_sms`` default is
16 (``transformer_config.py``, core_dev_r0.15.0), which the 25.11 presets leave; the 26.02
presets set 32 (Megatron-Bridge v0.3.0 ``scripts/performance/utils/overrides.py``)."""
_Table = tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]
HYBRIDEP_GB200: dict[int, _Table] = {
    16: ((8.0, 16.0, 24.0, 32.0, 36.0),
         (550.10e9, 472.84e9, 441.89e9, 485.50e9, 469.96e9),
         (538.44e9, 474.48e9, 444.40e9, 423.19e9, 418.27e9)),
    32: ((8.0, 16.0, 24.0, 32.0, 36.0),
         (545.71e9, 523.48e9, 507.32e9, 484.22e9, 479.02e9),
         (568.94e9, 521.55e9, 483.76e9, 464.54e9, 447.89e9)),
}
"""SMs → (ranks, dispatch BF16 B/s, combine B/s): HybridEP's "Torch API" algorithm bandwidth on
GB200 NVL72, DeepEP ``hybrid-ep`` pull request 428 (module docstring)."""
HYBRIDEP_B200: dict[int, _Table] = {16: ((8.0,), (535.94e9,), (530.86e9,))}
"""The same document's B200 row (8 ranks, 16 SMs, Torch API; no 32-SM figure)."""
_HYBRIDEP_TABLES = {"gb200-186gb": HYBRIDEP_GB200, "gb300-288gb": HYBRIDEP_GB200,
                    "b200-sxm-180gb": HYBRIDEP_B200}

ATTENTION_KERNELS_FWD = 8.0
MOE_KERNELS_FWD = 30.0
MOE_KERNELS_BWD = 31.0
_EXPERT_FWD, _EXPERT_BWD, _EXPERT_CASTS = 2.0, 4.0, 2.0
EXPERT_BIAS_KERNELS = ((2.0, 1.0), (6.0, 2.0))
"""Kernels the experts' biases add, (per local expert, per layer), forward and backward.
Megatron-Core's eager bias of the down projection (``TEGroupedMLP._apply_bias``,
:data:`.layer.EXPERT_BIAS_ELEMENTS`): ``b * p`` and ``t + …`` per expert, then one ``cat``;
backward the product's two gradients and their two reductions per expert, and the ``cat``
of each ``torch.split``'s gradients (the rows', the probabilities'). And per expert the
``main_grad.add_`` of its two biases' gradients (up and down projection) in the data-parallel
wrapper's backward hook (``megatron/core/distributed/distributed_data_parallel.py``
``_make_backward_post_hook``: a parameter whose gradient Transformer Engine did not add to
``main_grad`` itself — the weights' fused accumulation, not the biases' — is added there):
2 + 4 + 2 per expert."""


def moe_layer_kernels(
    experts_per_card: F64 | float,
    low: npt.NDArray[np.bool_] | bool,
    cast_kernels: F64 | float = 0.0,
    bias: bool = False,
) -> tuple[F64, F64]:
    """Kernels the host launches for one MoE layer and micro-batch: (forward, backward).

    ``experts_per_card`` = E/ep; ``low``: FP8/FP4 GEMM inputs (one cast per expert GEMM
    and direction); ``cast_kernels``: the attention GEMMs' cast kernels per direction;
    ``bias``: the experts have biases (:data:`EXPERT_BIAS_KERNELS`).

    >>> f, b = moe_layer_kernels(16.0, True)
    >>> float(f), float(b)
    (102.0, 143.0)
    >>> [float(x) for x in moe_layer_kernels(2.0, False)]
    [42.0, 55.0]
    >>> [float(x) for x in moe_layer_kernels(2.0, False, bias=True)]   # + 2·2 + 1, 6·2 + 2
    [47.0, 69.0]
    """
    e = np.asarray(experts_per_card, dtype=np.float64)
    casts = np.where(low, _EXPERT_CASTS, 0.0)
    (bf_e, bf_l), (bb_e, bb_l) = EXPERT_BIAS_KERNELS if bias else ((0.0, 0.0), (0.0, 0.0))
    fwd = (ATTENTION_KERNELS_FWD + MOE_KERNELS_FWD + e * (_EXPERT_FWD + casts + bf_e)
           + bf_l + cast_kernels)
    bwd = (2 * ATTENTION_KERNELS_FWD + MOE_KERNELS_BWD + e * (_EXPERT_BWD + casts + bb_e)
           + bb_l + cast_kernels)
    return fwd, bwd


def host_bound_excess(kernels: F64, gpu_s: F64, host_op_s: float = HOST_OP_S) -> F64:
    """Seconds a synchronised segment adds beyond its GPU time: max(n·c − GPU, 0).

    >>> round(float(host_bound_excess(np.array(100.0), np.array(5e-4))), 12)
    0.0003
    >>> float(host_bound_excess(np.array(100.0), np.array(1e-3)))
    0.0
    """
    return np.maximum(kernels * host_op_s - gpu_s, 0.0)


def moe_layer_host_s(
    experts_per_card: F64 | float,
    low: npt.NDArray[np.bool_] | bool,
    cast_kernels: F64 | float = 0.0,
    host_op_s: float = HOST_OP_S,
    expert_gemm_s: float = HOST_EXPERT_GEMM_S,
    bias: bool = False,
) -> tuple[F64, F64]:
    """Host seconds to issue one MoE layer's kernels for one micro-batch: (forward, backward).

    Every kernel of :func:`moe_layer_kernels` at ``host_op_s``, except the expert GEMMs
    (2 per local expert forward, 4 backward) at ``expert_gemm_s`` (module docstring).
    Qwen3-30B-A3B on EP 8 (16 local experts), MXFP8, two attention casts per direction:

    >>> f, b = moe_layer_host_s(16.0, True, 2.0)
    >>> round(float(f) * 1e6, 1), round(float(b) * 1e6, 1)
    (2755.3, 5006.5)
    >>> f, b = moe_layer_host_s(16.0, True, 2.0, expert_gemm_s=HOST_OP_S)  # all at 8 µs
    >>> round(float(f + b) * 1e6)
    1992
    """
    n_f, n_b = moe_layer_kernels(experts_per_card, low, cast_kernels, bias)
    e = np.asarray(experts_per_card, dtype=np.float64)
    g_f, g_b = e * _EXPERT_FWD, e * _EXPERT_BWD
    fwd: F64 = (n_f - g_f) * host_op_s + g_f * expert_gemm_s
    bwd: F64 = (n_b - g_b) * host_op_s + g_b * expert_gemm_s
    return fwd, bwd


def ranks_hit_fraction(experts: float, ep: F64 | float, top_k: float) -> F64:
    """Chance that a token's top-k experts (k distinct of E, uniformly drawn) include one of
    a given rank's E/ep: 1 − C(E − E/ep, k) / C(E, k).

    >>> from math import comb
    >>> f = float(ranks_hit_fraction(64, 8.0, 8))            # HybridEP's benchmark, 8 ranks
    >>> round(f, 4), round(f - (1 - comb(56, 8) / comb(64, 8)), 12)
    (0.6791, 0.0)
    >>> float(ranks_hit_fraction(128, 1.0, 8))               # every token stays on the rank
    1.0
    >>> round(float(ranks_hit_fraction(256, 256.0, 8)), 6) == 8 / 256   # one expert a rank
    True
    """
    ep_a = np.asarray(ep, dtype=np.float64)
    miss = np.ones_like(ep_a)
    other = experts - experts / ep_a
    for i in range(int(top_k)):
        miss = miss * np.maximum(other - i, 0.0) / (experts - i)
    out: F64 = 1.0 - miss
    return out


def hybridep_layer_s(accelerator: str, tokens: F64, ep: F64, experts: float, top_k: float,
                     hidden: float, sms: int = 16) -> F64 | None:
    """Seconds of one MoE layer's HybridEP dispatch and combine, forward and backward, for
    ``tokens`` a rank on ``sms`` SMs (module docstring): 2·B/dispatch + 2·B/combine,
    B = T·ep·f·h·2 bytes a rank receives; None where no measurement covers ``accelerator``
    at ``sms``.

    The benchmark's own shape on GB200 at 8 ranks reproduces its bandwidths:

    >>> T, one = np.array([4096.0]), np.array([8.0])
    >>> t = float(hybridep_layer_s("gb200-186gb", T, one, 64, 8, 7168)[0])
    >>> B = 4096 * 8 * float(ranks_hit_fraction(64, 8.0, 8)) * 7168 * 2
    >>> round(t / (2 * B / 550.10e9 + 2 * B / 538.44e9), 12)
    1.0
    >>> hybridep_layer_s("h100-sxm5-80gb", T, one, 64, 8, 7168) is None
    True
    >>> hybridep_layer_s("b200-sxm-180gb", T, one, 64, 8, 7168, 32) is None
    True
    """
    table = _HYBRIDEP_TABLES.get(accelerator, {}).get(sms)
    if table is None:
        return None
    ranks, disp, comb = (np.asarray(x, dtype=np.float64) for x in table)
    ep_a = np.asarray(ep, dtype=np.float64)
    recv = tokens * ep_a * ranks_hit_fraction(experts, ep_a, top_k) * hidden * 2.0
    out: F64 = 2.0 * recv / np.interp(ep_a, ranks, disp) + 2.0 * recv / np.interp(
        ep_a, ranks, comb)
    return out
