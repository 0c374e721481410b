"""One transformer layer's kernels: its GEMMs by shape and its memory-bound traffic.

Per card, per micro-batch of b sequences of s tokens (T = b·s), tensor
parallel t (Megatron-LM's column/row split: Shoeybi et al. 2019 §3), head
size d = h/a, kv = kv_heads·d, MLP width f (``n_up`` = 1 up matrix for GeLU,
2 fused gate+up for SwiGLU). **Forward GEMMs** (m, n, k, batch):

    QKV          (T, (h + 2kv)/t, h, 1)
    scores QKᵀ   (s, s, d, b·a/t)          } not flash: materialised
    context PV   (s, d, s, b·a/t)          }
    projection   (T, h, h/t, 1)
    MLP up       (T', n_up·f/t, h, E')     T' = tokens per expert, E' = experts
    MLP down     (T', h, f/t, E')          per card (1, T for a dense MLP)
    logits       (T, V/t, h, 1)            last stage only

**Backward**: each GEMM (m, n, k) has a data-gradient GEMM (m, k, n) and a
weight- (or second operand-) gradient GEMM (k, n, m) — 2× the FLOPs, shapes of
their own. Each GEMM is timed by :func:`simulation.training.gemm.gemm_time`.
**Flash attention** (Dao 2023, FlashAttention-2, §3.1–3.2): scores never
reach HBM; with the causal mask the kernel skips the blocks above the
diagonal, so it executes half of the 4·s²·d·(b·a/t) forward FLOPs; its
backward runs 5 GEMMs to the forward's 2 (it recomputes S and P): 2.5×.

**Memory-bound kernels** (bytes moved per element = 2, FP32 4; SP divides the
h-wide ones by t, Korthikanti et al. 2022 §4.2.2), forward:

    2 norms (LayerNorm/RMSNorm)   read x, write y             2 × 2·T·h
    2 bias-dropout-residual adds  read x and the residual,    2 × (3·T·h + ½·T·h mask)
      (Megatron's fused kernel)   write y (+ 1-byte mask)
    activation (GeLU / SwiGLU)    read n_up·T'·f, write T'·f  (n_up + 1)·T'·f/t
    rotary (no learned positions) read, write q and k         2·T·(h + kv)/t
    softmax (not flash), fused    read, write the scores      2·b·(a/t)·s²
      scale-mask-softmax; dropout read, write, 1-byte mask    2.5·b·(a/t)·s²
    cross-entropy (last stage)    FP32 logits read, written   2 × 4 bytes·T·V/t

at HBM bandwidth × ``memory_efficiency``. Backward kernels read the output
gradient and the saved input and write the input gradient: 3 tensors for the
forward's 2, so 1.5 × the forward bytes.

GPT-3 175B under TP 8, one sequence: the four projection/MLP GEMMs do
24·T·h²/t FLOPs, every one of them at 2.67 of 3 waves on 108 SMs (0.889); the
element-wise kernels move 2 bytes × (4 + 2·3.5 + 2·4/8)·T·h without SP:

>>> from simulation.training.models import MODELS
>>> one, T, h = np.array([1.0]), 2048.0, 12288.0
>>> k = layer_kernels(MODELS["gpt3-175b"], T * one, 8 * one, np.array([False]),
...                   np.array([False]), 2.0, one * 268e12, one * 268e12, 1.835e12, 108)
>>> round(float(k["fwd_gemm"][0]) / (24 * T * h**2 / 8 / (268e12 * 8 / 9)), 9)
1.0
>>> round(float(k["fwd_mem"][0]) / (2 * 12 * T * h / 1.835e12), 9)
1.0
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .gemm import gemm_time
from .models import ModelSpec

__all__ = ["CAST_TENSORS", "EAGER_BWD_ELEMENTS", "EAGER_ELEMENTS", "EAGER_LOSS_BYTES",
           "EAGER_REPEAT_KV", "EXPERT_BIAS_ELEMENTS", "MOE_SORT_PASSES", "YARN_ROPE_ELEMENTS",
           "cast_elements", "eager_backward_elements", "eager_elements", "expert_bias_elements",
           "layer_kernels", "logit_kernels", "moe_sort_elements", "op_sac_mms",
           "repeat_kv_elements"]

F64 = npt.NDArray[np.float64]
B8 = npt.NDArray[np.bool_]
BWD_TRAFFIC = 1.5
CAST_TENSORS = 4.0
"""Tensors cast to FP8/FP4 per layer and direction: the inputs of QKV, projection,
MLP up and MLP down forward; their output gradients backward (:mod:`.recipes`)."""


EAGER_ELEMENTS = {"norm": 18.0, "rope": 10.0, "swiglu": 5.0}
"""16-bit elements moved per element by the unfused (eager PyTorch) ops, forward, where
a fused kernel moves 2 (norm, rotary) or n_up + 1 (activation). From the reference
code torchtitan trains with (``torchtitan/models/norms.py`` ``RMSNorm``,
``torchtitan/models/llama/model.py`` ``apply_rotary_emb`` and ``FeedForward``), one
HBM pass per op, in bytes per element: RMSNorm ``x.float()`` 2 + 4, ``pow(2)`` 4 + 4,
``mean`` 4, ``x * rsqrt`` 4 + 4, ``type_as`` 4 + 2, ``* weight`` 2 + 2 = 36 B (18
elements); rotary ``float()`` 2 + 4, complex multiply 4 + 4, ``type_as`` 4 + 2 = 20 B
(10); SwiGLU ``silu`` 2 + 2, ``*`` 4 + 2 = 10 B (5) per FFN element. Backward: autograd's
kernel of each op (:data:`EAGER_BWD_ELEMENTS`), not the fused kernels' 1.5×."""


EAGER_BWD_ELEMENTS = {"norm": 46.0, "rope": 10.0, "swiglu": 9.0}
"""16-bit elements moved per element by autograd's backward of the eager ops of
:data:`EAGER_ELEMENTS` (torchtitan's Dec. 2024 release, ``norm_type = "rmsnorm"`` of its
``train_configs/llama3_8b.toml``: the Python ``RMSNorm`` of ``torchtitan/models/norms.py``,
not its Triton ``fused_rmsnorm``), one HBM pass per backward kernel, by PyTorch's
derivative formulas (``tools/autograd/derivatives.yaml``, ``FunctionsManual.cpp``):
RMSNorm ``* weight``: grad·w (r 2, w 2) and the weight's (grad·y, r 2 + 2, w 2, then
``sum_to_size``, r 2) = 12 B; ``type_as`` (bf16 → fp32: r 2, w 4) 6; ``x * rsqrt``: grad·r
(r 4, w 4) and rsqrt's (grad·x r 4 + 4, w 4, summed over h r 4) 24; ``mean``'s backward
(the expanded grad / h, w 4) 4; ``pow(2)``'s ``pow_backward`` = grad·(2·x.pow(1))
(copy r 4 w 4, ×2 r 4 w 4, × grad r 4 + 4 w 4) 28; the two gradients of ``x.float()``
summed (r 4 + 4, w 4) 12; ``x.float()``'s (fp32 → bf16: r 4, w 2) 6 — 92 B (46 elements,
the fused kernels' 1.5 × 2 = 3). Rotary: ``type_as``'s (r 2, w 4) 6, the complex
product's grad·conj(freqs) (r 4, w 4) 8, ``float()``'s (r 4, w 2) 6 = 20 B (10).
SwiGLU's ``silu(a) * b``: grad·b (r 2 + 2, w 2) 6, grad·silu(a) 6, ``silu_backward``
(r 2 + 2, w 2) 6 = 18 B (9) per FFN element. The views (``view_as_complex``,
``view_as_real``, ``reshape``, ``flatten``) move nothing."""


EAGER_REPEAT_KV = 1.0
"""Grouped-query attention without the kernel's own GQA (torchtitan's ``repeat_kv``:
``unsqueeze``, ``expand``, ``reshape`` of K and V to every query head, a copy): per
token, K and V each read at kv width and written at the queries' width, forward (the
elements ``(kv + q)`` × 2 tensors); backward, ``expand``'s ``sum_to_size`` reads the
gradient at the queries' width and writes it at kv width: as many again (1×, not the
:data:`BWD_TRAFFIC` 1.5×). Nothing when kv = q (``n_rep == 1`` returns its input)."""


EAGER_LOSS_BYTES = (14.0, 22.0)
"""Bytes per logit element of torchtitan's eager loss (``train.py`` ``loss_fn``:
``cross_entropy(pred.flatten(0, 1).float(), labels)`` on the bf16 output layer),
(forward, backward): ``.float()`` (r 2, w 4) and ``log_softmax`` (r 4, w 4) = 14;
``nll_loss``'s backward (its zero-filled gradient, w 4), ``log_softmax``'s (r 4 + 4,
w 4) and ``float()``'s (r 4, w 2) = 22 — where the fused FP32 cross-entropy of
:func:`logit_kernels` moves 8 and 12."""


YARN_ROPE_ELEMENTS = (12.0, 14.0)
"""16-bit elements moved per rotated element by Megatron-Core's unfused rotary embedding,
(forward, backward), where Transformer Engine's fused kernel moves 2 and 3 (1.5×). YaRN
rotary (``position_embedding_type = "yarn"``, :attr:`.models.ModelSpec.yarn`: GPT-OSS) never
runs the fused kernel: Megatron-Bridge's ``validate_rope_fusion_compatibility``
(``src/megatron/bridge/utils/fusions.py``, tag ``v0.2.2``) turns ``apply_rope_fusion`` off for
any type but ``"rope"`` (the performance scripts' ``set_common_perf_overrides`` sets it on,
``scripts/performance/utils/helpers.py``), and Megatron-Core's ``apply_rotary_pos_emb``
(``megatron/core/models/common/embeddings/rope_utils.py``, the 25.11 and 26.02 containers'
commits cba6b0e and b0cc270) falls back to the unfused path whenever YaRN's attention factor
``mscale`` ≠ 1 (0.1·ln 32 + 1 = 1.35 for GPT-OSS's factor 32). ``_apply_rotary_pos_emb_bshd``,
one HBM pass per op, elements per rotated element: ``t * cos_`` (r 1, w 1) 2,
``_rotate_half``'s ``-x2`` (r ½, w ½) 1 and ``torch.cat((-x2, x1))`` (r 1, w 1) 2, ``* sin_``
2, the sum (r 2, w 1) 3, ``torch.cat((t, t_pass))`` with an empty ``t_pass`` (a copy, r 1,
w 1) 2 = 12 (cos and sin of the [s, 1, 1, d] frequencies are negligible). Backward, by
PyTorch's derivative formulas (``tools/autograd/derivatives.yaml``): the cats' gradients
are views; ``grad * sin_`` 2, the negation's 1, ``chunk``'s ``split_backward`` (a cat, r 1,
w 1) 2, ``grad * cos_`` 2; ``t[..., :rot_dim]`` spans the whole head, so PyTorch's indexing
returns ``t`` itself (ATen ``TensorIndexing.h`` ``applySlice``: ``start == 0 && stop ==
length`` returns ``self``), while the empty ``t_pass = t[..., rot_dim:]`` is a real slice
whose ``slice_backward`` writes a zero-filled full-size gradient (w 1); the three gradients
of the input summed by autograd (r 2, w 1, twice) 6 = 14."""


EXPERT_BIAS_ELEMENTS = (6.0, 8.0)
"""16-bit elements moved per routed row and hidden unit by Megatron-Core's eager bias of
the experts' down projection, (forward, backward). ``TEGroupedMLP`` (``megatron/core/
transformer/moe/experts.py``, "Enable bias in expert mlp [gpt-oss 5/5]", Megatron-LM commit
a329dd6, 2025-09-22; the same code at the 25.11 and 26.02 containers' commits cba6b0e and
b0cc270) builds its ``linear_fc2`` with ``skip_bias_add=True`` and adds the bias weighted by
each row's routing probability in ``_apply_bias``: ``torch.cat([t + b * p for t, b, p in
zip(torch.split(output, tokens_per_expert), biases, torch.split(probs, tokens_per_expert))])``
— per local expert ``b * p`` (a [n_e, h] product written, w 1) and ``t + …`` (r 2, w 1),
then the ``cat`` of all experts (r 1, w 1) = 6 (``.to`` is a no-op: the router's
probabilities are BF16, GPT-OSS's provider leaves ``moe_router_dtype`` unset and Transformer
Engine's fused top-k returns "probs in the same dtype as the logits"). Backward: the
``cat``'s and the sum's gradients are views; the product's two gradients, each an
element-wise product (r 1, w 1) reduced over its broadcast dimension (r 1) — the bias's over
the rows, the probabilities' over h — 3 + 3; ``torch.split``'s backward, a ``cat`` of the
row gradients (r 1, w 1) 2 = 8. A packed, one-kernel path (``_apply_packed_bias``) came in
Megatron-LM pull request 6000 (2026-08-14), after the runs. Its kernels (2 per local expert
and the ``cat`` forward, 4 per local expert and 2 ``cat`` backward) are issued from the
host: :data:`.dispatch.EXPERT_BIAS_KERNELS`."""


MOE_SORT_PASSES = 4.0
"""Elements moved per received routed token and hidden unit by Megatron-Core's all-to-all
dispatcher's two sorts, forward (and again backward). ``MoEAlltoAllTokenDispatcher``
(``megatron/core/transformer/moe/token_dispatcher.py``) receives its tokens grouped by
source rank and, with more than one local expert, sorts them by local expert
(``dispatch_postprocess``, "Permutation 2") and back before the combine
(``combine_preprocess``, "Unpermutation 2"), each ``moe_utils.sort_chunks_by_idxs``: a
gather that reads every received row and writes it (Transformer Engine's
``fused_sort_chunks_by_index`` under ``moe_permute_fusion``, else ``torch.split`` +
``torch.cat``) — 2 sorts × (read + write) = 4. Backward: autograd runs each sort's inverse
on the gradient, one read + write again (Transformer Engine's kernel; ``torch.cat``'s
backward takes views, the split's backward one ``cat``), so the backward moves the same 4,
not the :data:`BWD_TRAFFIC` 1.5× of a kernel that reads a saved input. The routing
probabilities sorted with the tokens (one FP32 value a row) are left out: 4 B beside a
row's 2·h (8,192 B at h 4,096). Megatron-Core's flex dispatcher (DeepEP, HybridEP) has no
such sort (DeepEP permutes the received tokens once, in place of the pre-dispatch permute;
HybridEP's dispatch writes them expert-major)."""


def moe_sort_elements(model: ModelSpec, tokens: F64, tp: F64, etp: F64 | float | None,
                      ep: F64 | float) -> F64:
    """Elements the all-to-all dispatcher's sorts move per layer and micro-batch, forward
    (the backward moves as many): :data:`MOE_SORT_PASSES` × R·h on the MoE layers' share,
    R = T·k·c·etp/tp the routed rows a card's experts receive (the grouped GEMMs' rows at
    the mean load, after the all-gather over expert TP); none with one local expert
    (E/ep = 1: Megatron-Core sorts only when ``num_local_experts > 1``) or a dense model.

    >>> from simulation.training.models import MODELS
    >>> m = MODELS["qwen3-235b-a22b"]                 # 128 experts, top-8, h 4,096
    >>> one = np.array([1.0])
    >>> el = moe_sort_elements(m, 4096 * one, 2 * one, 1.0, 32 * one)   # EP 32, ETP 1
    >>> float(el[0]) == 4 * (4096 * 8 / 2) * 4096     # 2,048 local tokens × 8 copies
    True
    >>> float(moe_sort_elements(m, 4096 * one, 2 * one, 1.0, 128 * one)[0])  # 1 local expert
    0.0
    """
    one = np.ones_like(np.asarray(tokens, dtype=np.float64))
    if not model.moe:
        return 0.0 * one
    et = tp if etp is None else etp * one
    rows = tokens * model.top_k * model.capacity_factor * et / tp
    share = model.moe_layers / model.layers
    local = model.experts / (ep * one)
    out: F64 = np.where(local > 1.0, share * MOE_SORT_PASSES * rows * model.hidden, 0.0)
    return out


def expert_bias_elements(model: ModelSpec, tokens: F64, tp: F64, etp: F64 | float | None,
                         ep: F64 | float) -> tuple[F64, F64]:
    """Elements Megatron-Core's eager expert bias moves per layer and micro-batch, (forward,
    backward): :data:`EXPERT_BIAS_ELEMENTS` × R·h on the MoE layers' share, R the routed rows
    a card's experts receive (as :func:`moe_sort_elements`); none without biases or experts.

    >>> from simulation.training.models import MODELS
    >>> m = MODELS["gpt-oss-120b"]                      # 128 experts, top-4, h 2,880
    >>> one = np.array([1.0])
    >>> f, b = expert_bias_elements(m, 16384 * one, one, 1.0, 64 * one)
    >>> float(f[0]) == 6 * 16384 * 4 * 2880, float(b[0]) == 8 * 16384 * 4 * 2880
    (True, True)
    >>> float(expert_bias_elements(MODELS["qwen3-30b-a3b"], 4096 * one, one, 1.0, one)[0][0])
    0.0
    """
    one = np.ones_like(np.asarray(tokens, dtype=np.float64))
    if not (model.moe and model.bias):
        return 0.0 * one, 0.0 * one
    et = tp if etp is None else etp * one
    rows = tokens * model.top_k * model.capacity_factor * et / tp
    el = model.moe_layers / model.layers * rows * model.hidden
    f: F64 = EXPERT_BIAS_ELEMENTS[0] * el * one
    b: F64 = EXPERT_BIAS_ELEMENTS[1] * el * one
    return f, b


def op_sac_mms(model: ModelSpec) -> tuple[tuple[int, int, str, bool], ...]:
    """The layer's matmuls in the order they run, (n, k, split, saved), under op-level SAC.

    torchtitan's op-level selective activation checkpointing (``selective_ac_option =
    "op"``, the Llama 3.1 8B default of its ``train_configs/llama3_8b.toml``; policy in
    ``torchtitan/parallelisms/parallelize_llama.py`` of its Dec. 2024 release, now
    ``torchtitan/distributed/activation_checkpoint.py``): per transformer block, the
    outputs of ``aten.mm``, SDPA (flash / efficient) and the reduce-scatter are saved,
    "except every second mm"; every other op (norms, rotary, SiLU, multiply, residual
    adds, casts) is recomputed in the backward. torchtitan's Llama runs wq, wk, wv, wo
    as four mms, then w1, w3, w2 (SwiGLU): wq, wv, w1, w2 saved, wk, wo, w3 recomputed.
    A GeLU MLP has up, down; MLA its projections in order. The MLP's mms are taken at the
    per-token MLP width (:meth:`ModelSpec.mlp_width_per_token`, the routed experts' as
    if they were mms: an approximation for MoE models, which torchtitan's rows are not).

    >>> from simulation.training.models import MODELS
    >>> [(n, s) for n, _, _, s in op_sac_mms(MODELS["llama3-8b"])][:4]
    [(4096, True), (1024, False), (1024, True), (4096, False)]
    >>> [(n, s) for n, _, _, s in op_sac_mms(MODELS["llama3-8b"])][4:]
    [(14336, True), (14336, False), (4096, True)]
    """
    h = model.hidden
    if model.mla:
        attn = [(n, k, split) for _, n, k, split in model.attention_projections()]
    else:
        kv = model.kv_heads * model.head_dim
        attn = [(model.q_dim, h, "col"), (kv, h, "col"), (kv, h, "col"),
                (h, model.q_dim, "row")]
    fw = int(model.mlp_width_per_token())
    mlp = ([(fw, h, "col"), (fw, h, "col")] if model.activation == "swiglu"
           else [(fw, h, "col")]) + [(h, fw, "row")]
    return tuple((n, k, split, i % 2 == 0) for i, (n, k, split) in enumerate(attn + mlp))


def eager_elements(model: ModelSpec, eager: B8 | bool) -> tuple[F64 | float, F64 | float,
                                                                 F64 | float]:
    """Elements per element of (each norm, rotary, the activation), fused or eager; a YaRN
    model's rotary is Megatron-Core's unfused one (:data:`YARN_ROPE_ELEMENTS`).

    >>> from simulation.training.models import MODELS
    >>> eager_elements(MODELS["llama3-8b"], False), eager_elements(MODELS["llama3-8b"], True)
    ((2.0, 2.0, 3.0), (18.0, 10.0, 5.0))
    >>> eager_elements(MODELS["gpt-oss-120b"], False)[1]
    12.0
    """
    n_up = 2.0 if model.activation == "swiglu" else 1.0
    fused_act = n_up + 1
    eager_act = EAGER_ELEMENTS["swiglu"] if model.activation == "swiglu" else fused_act
    rope = YARN_ROPE_ELEMENTS[0] if model.yarn else 2.0  # Megatron-Core's unfused YaRN
    if isinstance(eager, bool | np.bool_):
        return ((EAGER_ELEMENTS["norm"], EAGER_ELEMENTS["rope"], eager_act) if eager
                else (2.0, rope, fused_act))
    return (np.where(eager, EAGER_ELEMENTS["norm"], 2.0),
            np.where(eager, EAGER_ELEMENTS["rope"], rope),
            np.where(eager, eager_act, fused_act))


def eager_backward_elements(model: ModelSpec, eager: B8 | bool) -> tuple[
        F64 | float, F64 | float, F64 | float]:
    """Elements per element of the backward of (each norm, rotary, the activation): the
    fused kernels' :data:`BWD_TRAFFIC` × their forward, or autograd's eager kernels
    (:data:`EAGER_BWD_ELEMENTS`; a GeLU stays one kernel each way); a YaRN model's rotary
    :data:`YARN_ROPE_ELEMENTS`.

    >>> from simulation.training.models import MODELS
    >>> m = MODELS["llama3-8b"]
    >>> eager_backward_elements(m, False), eager_backward_elements(m, True)
    ((3.0, 3.0, 4.5), (46.0, 10.0, 9.0))
    >>> eager_backward_elements(MODELS["gpt-oss-120b"], False)[1]   # unfused YaRN rotary
    14.0
    """
    n_up = 2.0 if model.activation == "swiglu" else 1.0
    fused = (BWD_TRAFFIC * 2.0, YARN_ROPE_ELEMENTS[1] if model.yarn else BWD_TRAFFIC * 2.0,
             BWD_TRAFFIC * (n_up + 1))
    e_act = EAGER_BWD_ELEMENTS["swiglu"] if model.activation == "swiglu" else fused[2]
    eag = (EAGER_BWD_ELEMENTS["norm"], EAGER_BWD_ELEMENTS["rope"], e_act)
    if isinstance(eager, bool | np.bool_):
        return eag if eager else fused
    return (np.where(eager, eag[0], fused[0]), np.where(eager, eag[1], fused[1]),
            np.where(eager, eag[2], fused[2]))


def repeat_kv_elements(model: ModelSpec, tokens: F64, tp: F64 | float,
                       eager: B8 | bool) -> F64:
    """Elements the eager ``repeat_kv`` copy moves per layer and micro-batch, forward
    (the backward as many): :data:`EAGER_REPEAT_KV` × 2 tensors × T·(kv + q)/t when the
    model has fewer K/V heads than query heads (GQA, not MLA) and the ops are eager.

    >>> from simulation.training.models import MODELS
    >>> one = np.array([1.0])
    >>> m = MODELS["llama3-8b"]                      # 32 query heads, 8 K/V heads of 128
    >>> float(repeat_kv_elements(m, 8192 * one, one, True)[0]) == 2 * 8192 * (1024 + 4096)
    True
    >>> float(repeat_kv_elements(m, 8192 * one, one, False)[0])
    0.0
    """
    t = np.asarray(tokens, dtype=np.float64)
    if model.mla or model.kv_heads >= model.heads:
        return 0.0 * t
    kv, q = float(model.kv_heads * model.head_dim), float(model.q_dim)
    out: F64 = np.where(eager, EAGER_REPEAT_KV * 2.0 * t * (kv + q) / tp, 0.0)
    return out


def cast_elements(model: ModelSpec, tokens: F64, tp: F64, sp: B8) -> tuple[F64, F64]:
    """Elements cast per card, layer and micro-batch: (forward, backward).

    Forward, the GEMM inputs: the normed x of QKV and of the MLP up (T·h, ÷ t with
    SP: Transformer Engine casts before the sequence-parallel all-gather and gathers
    FP8), the attention output of the projection (T·h/t), the activation output of
    the MLP down (T'·f/t, T' = routed tokens). Backward, the output gradients of the
    same four GEMMs: T·(h + 2kv)/t, T·h (÷ t with SP), T'·n_up·f/t, T'·h (÷ t with SP;
    an expert's T'·h); shared experts add their down input T·f_s/t forward (their up
    input is the normed x already cast) and T·n_up·f_s/t + T·h backward. MoE layers
    weighted by their share of the layers. MLA: each projection's input (the normed x
    once, the latents c_Q, c_KV unsplit) and output gradient.

    >>> from simulation.training.models import MODELS
    >>> one = np.array([1.0])
    >>> f, b = cast_elements(MODELS["llama3-8b"], 8192 * one, one, np.array([False]))
    >>> int(f[0]) == 8192 * (3 * 4096 + 14336), int(b[0]) == 8192 * (6144 + 2 * 4096 + 2 * 14336)
    (True, True)
    """
    h = float(model.hidden)
    n_up = 2.0 if model.activation == "swiglu" else 1.0
    r = np.where(sp, 1.0 / tp, 1.0)
    T = tokens
    routed, hs = 1.0, 0.0
    if model.moe:
        share = model.moe_layers / model.layers
        routed = 1.0 + share * (model.top_k * model.capacity_factor - 1.0)
        if model.shared_width:  # shared experts: the down input; backward their gradients
            hs = share * h
    fw = model.mlp_width_per_token()  # routed + shared + dense widths per token
    a_in, a_out = T * h * r, T * 0.0  # the normed x (cast once), then the other inputs
    for _, n_, k_, split in model.attention_projections():
        if split == "row" or k_ != h:  # not the normed x
            a_in = a_in + T * k_ / (tp if split == "row" else 1.0)
        a_out = a_out + (T * h * r if split == "row" else T * n_ / (tp if split == "col"
                                                                     else 1.0))
    fwd = a_in + T * h * r * routed + T * fw / tp
    bwd = a_out + T * n_up * fw / tp + T * (routed * h + hs) * r
    return fwd, bwd


def _fwd_bwd(m: F64, n: F64, k: F64, batch: F64, elem: float | F64, flops: F64, hbm: float,
             sms: int, store: bool = True) -> tuple[F64, F64]:
    fwd, dgrad, wgrad = _fwd_dgrad_wgrad(m, n, k, batch, elem, flops, hbm, sms, store)
    return fwd, dgrad + wgrad


def _fwd_dgrad_wgrad(m: F64, n: F64, k: F64, batch: F64, elem: float | F64, flops: F64,
                     hbm: float, sms: int, store: bool) -> tuple[F64, F64, F64]:
    return (gemm_time(m, n, k, batch, elem, flops, hbm, sms, store_overlap=store),
            gemm_time(m, k, n, batch, elem, flops, hbm, sms, store_overlap=store),
            gemm_time(k, n, m, batch, elem, flops, hbm, sms, store_overlap=store))


def layer_kernels(model: ModelSpec, tokens: F64, tp: F64, sp: B8, flash: B8,
                  elem: float | F64, flops: F64, flops_core: F64, hbm: float, sms: int,
                  act_bytes: float | F64 = 2.0, cp: F64 | float = 1.0,
                  flops_flash: F64 | None = None, store_overlap: bool = True,
                  ep: F64 | float = 1.0, eager: B8 | bool = False,
                  flops_flash_bwd: F64 | None = None,
                  etp: F64 | float | None = None,
                  moe_sort: B8 | bool = False) -> dict[str, F64]:
    """Seconds of one layer's kernels per micro-batch (arrays over configurations).

    ``tokens`` = b·s; ``flops`` the achievable FLOP/s of the projection/MLP
    GEMMs (FP8 where chosen), ``flops_core`` of the attention core (16-bit);
    ``elem`` bytes per GEMM operand element, ``act_bytes`` per activation
    element; ``hbm`` achievable B/s; ``sms`` the card's SM count (0 = no
    quantization); ``cp`` context-parallel ranks (``tokens`` is then b·s/cp:
    each card's queries meet all s keys, and the load-balanced causal split
    gives every card 1/cp of the attention FLOPs); ``flops_flash`` the
    flash-attention kernel's FLOP/s (``SystemSpec.flash_efficiency``;
    default ``flops_core``), ``flops_flash_bwd`` its backward's (default
    ``flops_flash``: Blackwell's is shared-memory bound,
    :func:`~simulation.training.system.flash_bwd_efficiency`); ``store_overlap``
    whether a GEMM's C store hides behind its MMAs
    (:func:`~simulation.training.gemm.gemm_time`); ``etp`` the expert
    tensor-parallel degree (default ``tp``): each expert's GEMMs are f/etp wide and, the
    ep·etp cards of an expert group gathering the tokens of their tp-sharded sequences,
    fed T·k·ep·(etp/tp)/E tokens (Megatron-Core's all-to-all dispatcher: all-to-all over
    EP, then all-gather over ETP). Keys: fwd_gemm,
    fwd_core, fwd_mem, core_mem, bwd_gemm, bwd_core, bwd_mem (``*_core``: the
    attention core, what selective recomputation repeats), and col_dgrad /
    col_wgrad: the backward GEMMs of the column-parallel layers (QKV, MLP up),
    the ones Megatron-LM overlaps its backward TP collectives with; op_rc_gemm: the
    forward of the mms op-level SAC recomputes (:func:`op_sac_mms`); moe_mlp_f /
    moe_mlp_b: an MoE layer's expert GEMMs (routed and shared, forward / backward; 0 on
    a dense model), the compute the EP all-to-all overlap pairs with the dispatch
    (:mod:`.core`, ``ep_overlap``). ``moe_sort``: the all-to-all dispatcher's sorts of
    the received tokens by local expert and back (:func:`moe_sort_elements`), in
    ``fwd_mem`` and once more (not 1.5×) in ``bwd_mem``. A model with biases pays
    Megatron-Core's eager expert bias (:func:`expert_bias_elements`) in both.
    """
    s, h, a = float(model.seq_len), float(model.hidden), float(model.heads)
    d, kv, f = float(model.head_dim), float(model.kv_heads * model.head_dim), float(model.ffn)
    q = a * d  # the queries' width (h unless the model sets its head size)
    one = np.ones_like(tokens)
    T = tokens
    b = T * cp / s
    sq = s / cp * one  # queries per sequence on this card
    heads = b * a / tp
    n_up = 2.0 if model.activation == "swiglu" else 1.0
    r = np.where(sp, 1.0 / tp, 1.0)

    st = store_overlap
    # the attention's projections (QKV + output; MLA's five, its down-projections
    # replicated over TP): column-parallel ones are what the TP backward overlaps
    qkv_f, qkv_d, qkv_w = (np.zeros_like(T) for _ in range(3))
    prj_f, prj_b = np.zeros_like(T), np.zeros_like(T)
    up_proj_f = np.zeros_like(T)  # MLA's up-projections (recompute module ``mla_up_proj``)
    for name, n_, k_, split in model.attention_projections():
        nn = n_ / tp if split == "col" else n_ * one
        kk = k_ / tp if split == "row" else k_ * one
        pf, pd, pw = _fwd_dgrad_wgrad(T, nn, kk, one, elem, flops, hbm, sms, st)
        if model.mla and name in ("Q up", "Q", "KV up"):
            up_proj_f = up_proj_f + pf
        if split == "row":
            prj_f, prj_b = prj_f + pf, prj_b + pd + pw
        else:
            qkv_f, qkv_d, qkv_w = qkv_f + pf, qkv_d + pd, qkv_w + pw
    qkv_b = qkv_d + qkv_w

    def mlp(tok: F64, experts: float | F64, width: float = f,
            split: F64 | None = None) -> tuple[F64, F64, F64, F64]:
        t_ = tp if split is None else split
        up_f, up_d, up_w = _fwd_dgrad_wgrad(tok, n_up * width / t_, h * one, experts * one,
                                            elem, flops, hbm, sms, st)
        dn_f, dn_b = _fwd_bwd(tok, h * one, width / t_, experts * one, elem, flops, hbm, sms,
                              st)
        return up_f + dn_f, up_d + up_w + dn_b, up_d, up_w

    mlp_f, mlp_b, up_d, up_w = mlp(T, 1.0, float(model.dense_width))
    dense_mlp_f = mlp_f  # recompute module ``mlp`` (dense layers only)
    moe_mlp_f, moe_mlp_b = np.zeros_like(T), np.zeros_like(T)
    moe_f, shared_f = np.zeros_like(T), np.zeros_like(T)
    routed = 1.0
    if model.moe:
        share = model.moe_layers / model.layers
        routed = model.top_k * model.capacity_factor
        # a grouped GEMM over the card's E/ep experts, each fed the tokens the ep ranks
        # route to it: T·k·c·ep/E (balanced routing), its tiles quantized per expert
        # (the slowest rank's: its skew beyond the capacity, ModelSpec.rank_load)
        load = model.top_k * model.rank_load
        et = tp if etp is None else etp * one
        e_f, e_b, e_d, e_w = mlp(T * load * ep * (et / tp) / model.experts,
                                 model.experts / ep * one, split=et)
        router = 2 * T * h * model.experts / flops
        if model.shared_width:  # the shared experts: a dense MLP every token runs
            s_f, s_b, s_d, s_w = mlp(T, 1.0, float(model.shared_width))
            e_f, e_b, e_d, e_w = e_f + s_f, e_b + s_b, e_d + s_d, e_w + s_w
            shared_f = share * s_f
        moe_mlp_f, moe_mlp_b = e_f, e_b
        moe_f = share * (e_f + router)
        dense_mlp_f = (1 - share) * dense_mlp_f
        mlp_f = (1 - share) * mlp_f + share * (e_f + router)
        mlp_b = (1 - share) * mlp_b + share * (e_b + 2 * router)
        up_d = (1 - share) * up_d + share * e_d
        up_w = (1 - share) * up_w + share * e_w
        routed = 1 + share * (routed - 1)

    # op-level SAC (:func:`op_sac_mms`): the forward of every second mm, recomputed
    op_rc = np.zeros_like(T)
    for n_, k_, split, saved in op_sac_mms(model):
        if not saved:
            nn = n_ / tp if split == "col" else n_ * one
            kk = k_ / tp if split == "row" else k_ * one
            op_rc = op_rc + gemm_time(T, nn, kk, one, elem, flops, hbm, sms, store_overlap=st)

    # attention core
    dq, dv = float(model.qk_dim), float(model.v_dim)  # d, d (MLA: d_nope + d_rope, d_v)
    sc_f, sc_b = _fwd_bwd(sq, s * one, dq * one, heads, 2.0, flops_core, hbm, sms, st)
    cx_f, cx_b = _fwd_bwd(sq, dv * one, s * one, heads, 2.0, flops_core, hbm, sms, st)
    rate = flops_core if flops_flash is None else flops_flash
    flash_f = sq * s * (dq + dv) * heads / rate  # the causal half of 2·s²·(d_qk + d_v)
    core_f = np.where(flash, flash_f, sc_f + cx_f)
    rate_b = rate if flops_flash_bwd is None else flops_flash_bwd
    core_b = np.where(flash, 2.5 * flash_f * rate / rate_b, sc_b + cx_b)

    # memory-bound kernels (elements, then bytes)
    dropout = 0.5 if model.dropout else 0.0
    norm_el, rope_el, act_el = eager_elements(model, eager)
    norm_b, rope_b, act_b = eager_backward_elements(model, eager)
    per_h = (2 * norm_el + 2 * (3 + dropout)) * T * h * r + norm_el * T * model.latent_width
    per_h_b = ((2 * norm_b + 2 * BWD_TRAFFIC * (3 + dropout)) * T * h * r
               + norm_b * T * model.latent_width)
    width = T * model.mlp_width_per_token() / tp
    act, act_bw = act_el * width, act_b * width
    rope_w = 0.0 if model.learned_positions else T * (q + kv) / tp
    if model.mla:  # rotary on the decoupled parts: a·d_R of the queries, one shared d_R key
        rope_w = T * (a * model.qk_rope_dim / tp + model.qk_rope_dim)
    rope, rope_bw = rope_el * rope_w, rope_b * rope_w
    rkv = repeat_kv_elements(model, T, tp, eager)  # eager GQA: K, V copied to every head
    soft = np.where(flash, 0.0, (2 + (2 + dropout if model.dropout else 0.0)) * heads * sq * s)
    # MoE dispatch on the card (Megatron-Core's token permute / unpermute): the routed
    # copies gathered (read T·h, write T·k·c·h) and combined back (read T·k·c·h, write
    # T·h), the router's FP32 softmax and top-k over T·E scores (read + write, 2 × 4 B)
    moe: float | F64 = 0.0
    if model.moe:
        share = model.moe_layers / model.layers
        kc = model.top_k * model.capacity_factor
        moe = share * (2 * T * h * r * (1 + kc) + 2 * 2 * T * model.experts)
    fwd_mem = (per_h + act + rope + moe + rkv) * act_bytes / hbm
    # backward: the fused kernels' 1.5× or autograd's eager kernels, op by op
    bwd_el = per_h_b + act_bw + rope_bw + BWD_TRAFFIC * moe + rkv
    # the forward memory passes each recompute module re-runs (averaged over the layers as
    # the rest): the two norms; the activation of the dense MLPs, of the routed experts
    # and of the shared experts; MLA's rotary; the MoE layer's permute / unpermute and router
    sh = model.moe_layers / model.layers if model.moe else 0.0
    kc_ = model.top_k * model.capacity_factor if model.moe else 0.0
    per_el = act_bytes / hbm
    norms_mem = 2 * norm_el * T * h * r * per_el
    act_dense = act_el * T * (1 - sh) * model.dense_width / tp * per_el
    act_routed = act_el * T * sh * kc_ * model.ffn / tp * per_el
    act_shared = act_el * T * sh * model.shared_width / tp * per_el
    rope_mem = (rope if model.mla else 0.0) * per_el
    core_mem = soft * act_bytes / hbm
    # the all-to-all dispatcher's sorts by local expert: as many bytes backward as forward
    sort = np.where(moe_sort, moe_sort_elements(model, T, tp, etp, ep), 0.0) * act_bytes / hbm
    # Megatron-Core's eager per-expert bias of the experts' down projection
    xb_f, xb_b = expert_bias_elements(model, T, tp, etp, ep)
    sort_f = sort + xb_f * act_bytes / hbm
    sort_b = sort + xb_b * act_bytes / hbm
    return {
        "fwd_gemm": qkv_f + prj_f + mlp_f,
        "fwd_core": core_f,
        "fwd_mem": fwd_mem + sort_f,
        "core_mem": core_mem,
        "bwd_gemm": qkv_b + prj_b + mlp_b,
        "bwd_core": core_b,
        "bwd_mem": bwd_el * act_bytes / hbm + BWD_TRAFFIC * core_mem + sort_b,
        "col_dgrad": qkv_d + up_d,
        "col_wgrad": qkv_w + up_w,
        "op_rc_gemm": op_rc,
        "moe_mlp_f": moe_mlp_f,
        "moe_mlp_b": moe_mlp_b,
        # selective recomputation's modules (Megatron-Core ``recompute_modules``,
        # :data:`.execution.RECOMPUTE_MODULES`): the forward GEMM and memory-bound seconds
        # each re-runs in the backward (``core_attn``: ``fwd_core`` + ``core_mem``)
        "rc_layernorm_mem": norms_mem * one,
        "rc_moe_act_mem": act_routed * one,
        "rc_mla_up_proj_gemm": up_proj_f,
        "rc_mla_up_proj_mem": rope_mem * one,
        "rc_mlp_gemm": dense_mlp_f,
        "rc_mlp_mem": act_dense * one,
        "rc_moe_gemm": moe_f,
        "rc_moe_mem": (moe * per_el + act_routed + act_shared) * one + sort,
        "rc_shared_experts_gemm": shared_f,
        "rc_shared_experts_mem": act_shared * one,
    }


def logit_kernels(model: ModelSpec, tokens: F64, tp: F64, elem: float | F64, flops: F64,
                  hbm: float, sms: int, store_overlap: bool = True,
                  eager: B8 | bool = False) -> tuple[F64, F64]:
    """(forward, backward) seconds of the output layer and its FP32 cross-entropy: a fused
    kernel (2 × 4 B per logit forward, 1.5× that backward) or, ``eager``, torchtitan's
    upcast and ``cross_entropy`` (:data:`EAGER_LOSS_BYTES`)."""
    one = np.ones_like(tokens)
    h, V = float(model.hidden), float(model.vocab)
    fwd, bwd = _fwd_bwd(tokens, V / tp, h * one, one, elem, flops, hbm, sms, store_overlap)
    logits = tokens * V / tp
    ce_f = np.where(eager, EAGER_LOSS_BYTES[0], 2 * 4.0) * logits / hbm
    ce_b = np.where(eager, EAGER_LOSS_BYTES[1], BWD_TRAFFIC * 2 * 4.0) * logits / hbm
    return fwd + ce_f, bwd + ce_b
