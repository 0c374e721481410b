"""FLOPs of a training step (matrix multiplications; 2 FLOPs per multiply-add).

Forward FLOPs of one layer for b sequences of s tokens (t = 1):

    QKV + output   2bs·h·(h + 2·kv·h/a) + 2bs·h²
    attention      4bs²h                 (QKᵀ and A·V, causal mask not discounted;
                                          2bs²·a·(d_qk + d_v) in general, MLA's d_qk =
                                          d_nope + d_rope = 192 and d_v = 128)
    (MLA: QKV + output is the sum of its five projections,
     :meth:`~simulation.training.models.ModelSpec.attention_projections`;
     dense layers of an MoE model run ``dense_width``)
    MLP            2bs·n_mat·h·ffn · top_k·(capacity on hardware)  (+ 2bs·h·E router)
                   + 2bs·n_mat·h·shared_width (shared experts, every token; MoE layer)
    logits         2bs·h·V               (once, on the last stage)

Backward = 2 × forward (Narayanan et al. 2021, §5.1). Model FLOPs (MFU) count
forward + backward once; hardware FLOPs (HFU) add what recomputation repeats:
the whole forward of every layer (``full``) or only the attention core 4bs²h
(``selective``, Korthikanti et al. 2022 §4.2). For GPT shapes (ffn = 4h, kv =
a) model FLOPs per step reduce to 72·B·s·l·h²(1 + s/6h + V/12lh), and with full
recomputation hardware FLOPs to Narayanan et al.'s 96·B·s·l·h²(1 + s/6h + V/16lh):

>>> from simulation.training.models import MODELS
>>> m = MODELS["gpt3-175b"]
>>> B, s, l, h, V = 1536, m.seq_len, m.layers, m.hidden, m.vocab
>>> hw = step_flops(m, B, "full")[1]
>>> round(hw / (96 * B * s * l * h**2 * (1 + s / (6 * h) + V / (16 * l * h))), 12)
1.0
"""

from __future__ import annotations

from .layer import op_sac_mms
from .models import ModelSpec

__all__ = ["layer_flops", "logit_flops", "step_flops"]


def layer_flops(model: ModelSpec, tokens: float, *, moe: bool = False,
                hardware: bool = False) -> tuple[float, float]:
    """(GEMM FLOPs, attention-core FLOPs) of one layer's forward over ``tokens``.

    ``moe``: this layer's MLP is a mixture of experts (top_k experts per token;
    with ``hardware`` the padding to the capacity factor is computed too).
    """
    h = model.hidden
    proj = 2 * tokens * sum(n * k for _, n, k, _ in model.attention_projections())
    mlp = 2 * tokens * model.mlp_matrices * h * (model.ffn if moe else model.dense_width)
    if moe:
        mlp *= model.top_k * (model.capacity_factor if hardware else 1.0)
        mlp += 2 * tokens * h * model.experts
        mlp += 2 * tokens * model.mlp_matrices * h * model.shared_width
    core = 2 * tokens * model.seq_len * model.heads * (model.qk_dim + model.v_dim)
    return proj + mlp, core


def logit_flops(model: ModelSpec, tokens: float) -> float:
    """Forward FLOPs of the output layer: 2·tokens·h·V."""
    return 2 * tokens * model.hidden * model.vocab


def step_flops(model: ModelSpec, sequences: float, recompute: str = "none") -> tuple[float, float]:
    """(model FLOPs, hardware FLOPs) of one step over ``sequences`` sequences."""
    tokens = sequences * model.seq_len
    dense = model.layers - model.moe_layers
    g_d, c_d = layer_flops(model, tokens)
    g_m, c_m = layer_flops(model, tokens, moe=True)
    g_mh, _ = layer_flops(model, tokens, moe=True, hardware=True)
    fwd = dense * (g_d + c_d) + model.moe_layers * (g_m + c_m) + logit_flops(model, tokens)
    fwd_hw = dense * (g_d + c_d) + model.moe_layers * (g_mh + c_m) + logit_flops(model, tokens)
    extra = 0.0
    if recompute == "full":
        extra = dense * (g_d + c_d) + model.moe_layers * (g_mh + c_m)
    elif recompute == "selective":
        extra = model.layers * c_d
    elif recompute == "op":  # every second mm (:func:`.layer.op_sac_mms`)
        extra = model.layers * tokens * sum(2.0 * n * k for n, k, _, saved
                                            in op_sac_mms(model) if not saved)
    return 3 * fwd, 3 * fwd_hw + extra
