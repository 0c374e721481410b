"""Memory per card: weights, gradients, optimizer states, activations.

**States** (Rajbhandari et al. 2020, ZeRO, §3: mixed-precision Adam keeps 2 + 2
+ 12 bytes per parameter — 16-bit weights, 16-bit gradients, FP32 master
weights, momentum and variance). FP32 training: 4 + 4 + 8. FP8 (Micikevicius et
al. 2022): matmul inputs cast on the fly, states as BF16. A card holds
P/(tp·pp) of the dense parameters (experts: /(tp·pp·ep)); ZeRO shards over the
dp ranks: stage 1 the optimizer states (= Megatron's distributed optimizer),
stage 2 also gradients, stage 3 also weights.

>>> round(state_bytes(7.5e9, 1, "bf16") / 7.5e9)            # ZeRO paper Fig. 1, baseline
16
>>> round(state_bytes(7.5e9, 64, "bf16", zero=1) / 1e9, 1)   # Pos: 4Ψ + 12Ψ/Nd = 31.4 GB
31.4

**Activations** of one layer for one micro-batch of b sequences
(Korthikanti et al. 2022, eqs. 1–5, 16-bit activations):

    no parallelism          s·b·h·(34 + 5·a·s/h)
    tensor parallel         s·b·h·(10 + 24/t + 5·a·s/(h·t))
    tensor + sequence par.  s·b·h·(34/t + 5·a·s/(h·t))
    + selective recompute   drop the 5·a·s/(h·t) term (also what FlashAttention does)
    full recompute          2·s·b·h  (only the layer input; /t with SP)

>>> sbh = 2048 * 12288
>>> layer_activation_bytes(2048, 1, 12288, 96, tp=8, sp=True, recompute="selective") / sbh
4.25

**Per architecture** (:func:`saved_activation_bytes`): the same count, tensor
by tensor, from what each kernel of a layer keeps for its backward pass
(Korthikanti §4.1 lists them for GPT), per token on a card, 16-bit:

    norm inputs (2 norms)                 2·2h      } h-wide, at the layer's
    norm outputs = QKV and MLP-up inputs  2·2h      } boundary: ÷t only with SP
    dropout masks after attention / MLP   2·1·h     } (only with dropout)
    Q, K, V (GQA: K and V are kv wide)    2h + 2·2kv               } split by
    attention output = projection input   2h                       } tensor
    activation input (GeLU: f; SwiGLU: gate and up, 2f)   2·n_up·f } parallelism
    MLP-down input                        2f                       } (÷t)
    attention core, per head and query (not flash): softmax output 2s,
      + dropout mask s + dropout output 2s when the model has dropout
    flash attention: the FP32 log-sum-exp, 4 bytes per head and query

For GPT (GeLU, f = 4h, kv = h, dropout) this is exactly Korthikanti's 34·sbh +
5·a·s²·b; for Llama 3 (SwiGLU f = 3.25h, GQA, RMSNorm, no dropout, flash) it
is (12h + 4kv + 6f)/t per token with TP + SP: 31.75·sbh/t for 405B:

>>> from simulation.training.models import MODELS
>>> one = np.array([1.0])
>>> gpt = MODELS["gpt3-175b"]
>>> s, h, a = 2048, 12288, 96
>>> float(saved_activation_bytes(gpt, one, tp=one, sp=np.array([False]),
...       recompute=np.array([0]), flash=np.array([False]))[0]) == s*h*(34 + 5*a*s/h)
True
>>> ll = MODELS["llama3-405b"]
>>> t = 8 * one
>>> x = saved_activation_bytes(ll, one, tp=t, sp=np.array([True]), recompute=np.array([0]),
...                            flash=np.array([True]))
>>> round(float(x[0]) * 8 / (8192 * 16384), 3)   # 31.75 + the log-sum-exp 4·a/h
31.781

Pipeline (Narayanan 2021 §2.2; Korthikanti §4.2.3): with 1F1B the first stage
holds p micro-batches in flight, so a card stores L/p layers × p micro-batches
= L layers' activations for one micro-batch; GPipe holds all m micro-batches.
Interleaving (:func:`chunks_in_flight`): Megatron-LM's interleaved schedule
(``forward_backward_pipelining_with_interleaving``) runs (p − r − 1)·2 +
(v − 1)·p warm-up forwards on rank r, capped at the m·v chunk-micro-batches
of the step, then one more before its first backward; each chunk holds L/(p·v)
layers. Uncapped, rank 0 holds (2(p−1) + (v−1)p + 1)·L/(p·v) = L·(1 + (p−1)/(p·v))
layers — Korthikanti's interleaving factor; with m = p micro-batches the cap
m·v makes it L, as without interleaving:

>>> chunks_in_flight(16.0, 32.0, 2.0), chunks_in_flight(16.0, 16.0, 2.0)
(47.0, 32.0)

Balanced stages (Llama 3, Dubey et al. 2024 §3.3.2: "we reduce one Transformer
layer each from the first and the last stages ... the first model chunk on the
first stage has only the embedding"): L + 2 slots, S = (L + 2)/p per stage, the
first stage's first chunk one layer short. Rank 0 runs its warm-up forwards
chunk by chunk in groups of p micro-batches (chunk (k // p) mod v), so of the W
chunk-micro-batches it holds, :func:`first_chunk_share` are of the short chunk;
it keeps W·S/v − that many layers' activations. Llama 3 405B (126 layers, p
16, v 8: one slot per chunk), 32 micro-batches: W = 143, 31 of them
embedding-only, 112 layers held (Megatron's unbalanced count: 143):

>>> w = chunks_in_flight(16.0, 32.0, 8.0)
>>> w, first_chunk_share(16.0, 32.0, 8.0, w), w * 8 / 8 - first_chunk_share(16.0, 32.0, 8.0, w)
(143.0, 31.0, 112.0)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

import numpy as np
import numpy.typing as npt

from .layer import op_sac_mms

if TYPE_CHECKING:
    from .models import ModelSpec

__all__ = [
    "STATE_BYTES",
    "chunks_in_flight",
    "first_chunk_share",
    "layer_activation_bytes",
    "saved_activation_bytes",
    "state_bytes",
]

STATE_BYTES = {  # (weights, gradients, optimizer) bytes per parameter
    "fp32": (4.0, 4.0, 8.0),
    "bf16": (2.0, 2.0, 12.0),
    "fp16": (2.0, 2.0, 12.0),
    "fp8": (2.0, 2.0, 12.0),
    "fp4": (2.0, 2.0, 12.0),
}

A = TypeVar("A", float, npt.NDArray[np.float64])


def state_bytes(params: float, dp: int, precision: str, zero: int = 0) -> float:
    """Weights + gradients + optimizer bytes of ``params`` on one card, ZeRO over dp."""
    w, g, o = STATE_BYTES[precision]
    return (w / (dp if zero >= 3 else 1) + g / (dp if zero >= 2 else 1)
            + o / (dp if zero >= 1 else 1)) * params


def layer_activation_bytes(s: float, b: A, h: float, a: float, *, tp: A,
                           sp: bool | npt.NDArray[np.bool_],
                           recompute: str | npt.NDArray[np.str_] = "none",
                           flash: bool | npt.NDArray[np.bool_] = False) -> A:
    """Bytes one layer keeps for the backward pass of one micro-batch (see above)."""
    sbh = s * b * h
    core = 5 * a * s / (h * tp)
    base = np.where(sp, 34 / tp, 10 + 24 / tp)
    sel = np.logical_or(np.asarray(recompute) == "selective", flash)
    per = base + np.where(sel, 0.0, core)
    full = np.where(sp, 2 / tp, 2.0)
    out = sbh * np.where(np.asarray(recompute) == "full", full, per)
    return out if isinstance(out, np.ndarray) and out.ndim else float(out)  # type: ignore[return-value]


F64 = npt.NDArray[np.float64]


def saved_activation_bytes(model: ModelSpec, mb: F64, *, tp: F64, sp: npt.NDArray[np.bool_],
                           recompute: npt.NDArray[np.int64], flash: npt.NDArray[np.bool_],
                           cp: F64 | float = 1.0,
                           modules: npt.NDArray[np.int64] | None = None) -> F64:
    """Bytes one layer keeps for backward, one micro-batch of ``mb`` sequences, per card.

    Tensor by tensor (module docstring); ``recompute`` codes 0 none, 1
    selective (drops the attention core), 2 full (keeps the layer input, 2h
    per token, ÷t with SP), 3 op (torchtitan's op-level SAC: the layer input, the
    outputs of every other mm and of the attention core). Context parallelism ``cp``
    splits the sequence: a card holds s/cp queries (and their rows of the scores) of every tensor.
    MoE layers keep top_k × capacity copies of the MLP tensors (the routed
    tokens), the shared experts' MLP tensors at their width, dense layers at
    ``dense_width``; MLA keeps its up-projected Q, K, V and output (split by t) and
    its latents c_Q, c_KV + the rotary key (replicated). 16-bit elements; the caller
    doubles them for FP32.

    ``modules``: with selective recomputation (code 1), the module mask of
    :data:`.execution.RECOMPUTE_MODULES` (None or 0: the attention core, Megatron-Core's
    default); each drops what its recomputation rebuilds (Megatron-Core's
    ``CheckpointWithoutOutput`` discards a module's output, a plain checkpoint keeps only
    its input): ``core_attn`` the core term; ``layernorm`` the two norm outputs
    (2·2h, ÷t with SP); ``moe_act`` the routed experts' activation output (the fc2 input,
    2·k·c·f per routed token ÷t); ``mla_up_proj`` the up-projected Q, K, V
    (2·(a·d_qk + K + V widths)/t); ``mlp`` a dense layer's fc1 and activation outputs;
    ``moe`` every tensor inside the MoE layer (routed and shared); ``shared_experts`` the
    shared experts' (all averaged over the layers, as the rest).
    """
    s, h, a = float(model.seq_len), float(model.hidden), float(model.heads)
    n_up = 2.0 if model.activation == "swiglu" else 1.0
    drop = 1.0 if model.dropout else 0.0
    tokens = mb * s / cp
    boundary = (8.0 + 2.0 * drop) * h / np.where(sp, tp, 1.0)
    # Q, K, V and the attention output (2 bytes each): 4q + 4kv, MLA a·(2·d_qk + 2·d_v)
    qkvo = 2.0 * (a * model.qk_dim + model.kv_gather_width + a * model.v_dim) \
        if model.mla else 4.0 * model.q_dim + 4.0 * model.kv_heads * model.head_dim
    # MLA's latents c_Q, c_KV (norm input and output, 2 bytes each) and the shared rotary
    # key, replicated over TP
    latents = 4.0 * model.latent_width + 2.0 * model.qk_rope_dim if model.mla else 0.0
    split = (qkvo + (2.0 * n_up + 2.0) * model.mlp_width_per_token()) / tp + latents
    core = np.where(flash, 4.0 * a / tp, (2.0 + 3.0 * drop) * a * s / tp)
    mods = np.where(recompute == 1, 1, 0) if modules is None else np.where(
        recompute == 1, np.where(modules == 0, 1, modules), 0)

    def has(i: int) -> npt.NDArray[np.bool_]:
        return (mods >> i) & 1 == 1  # type: ignore[no-any-return]

    sh = model.moe_layers / model.layers if model.moe else 0.0
    kc = model.top_k * model.capacity_factor if model.moe else 0.0
    routed, shared = sh * kc * model.ffn, sh * model.shared_width
    dense = (1.0 - sh) * model.dense_width
    # RECOMPUTE_MODULES order: core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, shared
    in_moe = ~has(5)
    dropped = (np.where(has(2), 4.0 * h / np.where(sp, tp, 1.0), 0.0)
               + np.where(has(1) & in_moe, 2.0 * routed / tp, 0.0)
               + np.where(has(3) & model.mla,
                          2.0 * (a * model.qk_dim + model.kv_gather_width) / tp, 0.0)
               + np.where(has(4), (2.0 * n_up + 2.0) * dense / tp, 0.0)
               + np.where(has(5), (2.0 * n_up + 2.0) * (routed + shared) / tp, 0.0)
               + np.where(has(6) & in_moe, (2.0 * n_up + 2.0) * shared / tp, 0.0))
    per_token = boundary + split - dropped + np.where(has(0), 0.0, core)
    full = 2.0 * h / np.where(sp, tp, 1.0)
    # op-level SAC (:func:`.layer.op_sac_mms`): the layer input, the saved mms' outputs,
    # the attention output and its FP32 log-sum-exp (flash: SDPA's outputs are saved)
    op = full + 2.0 * a * model.v_dim / tp + np.where(flash, 4.0 * a / tp, core)
    for n_, _, split_, saved in op_sac_mms(model):
        if saved:
            op = op + 2.0 * n_ / (tp if split_ == "col" else np.where(sp, tp, 1.0))
    kept = np.where(recompute == 3, op, per_token)
    out: F64 = tokens * np.where(recompute == 2, full, kept)
    return out


def chunks_in_flight(p: A, m: A, v: A) -> A:
    """Chunk-micro-batches rank 0 holds under Megatron's (interleaved) 1F1B (docstring)."""
    uncapped = np.where(v > 1, 2 * (p - 1) + (v - 1) * p + 1, p)
    out = np.minimum(m * v, uncapped)
    return out if isinstance(out, np.ndarray) and out.ndim else float(out)  # type: ignore[return-value]


def first_chunk_share(p: A, m: A, v: A, in_flight: A) -> A:
    """Of rank 0's ``in_flight`` warm-up chunk-micro-batches, those of its first chunk.

    Megatron's (and Llama 3's, N = p) interleaved order runs chunk (k // p) mod v
    for the k-th forward (module docstring); without interleaving all are.
    """
    cycle = p * v
    out = np.where(v > 1, np.floor(in_flight / cycle) * np.minimum(p, m)
                   + np.minimum(np.mod(in_flight, cycle), np.minimum(p, m)), in_flight)
    return out if isinstance(out, np.ndarray) and out.ndim else float(out)  # type: ignore[return-value]
