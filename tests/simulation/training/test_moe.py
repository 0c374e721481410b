"""Mixture-of-experts features: shared experts, multi-head latent attention, DeepSeek-V3."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from simulation.training import MODELS, evaluate, execution_from_params, system_for_accelerator
from simulation.training.flops import step_flops
from simulation.training.gemm import gemm_time
from simulation.training.layer import layer_kernels
from simulation.training.models import model_from_params
from simulation.training.validation import ACCELERATORS

H100 = ACCELERATORS["h100-sxm5-80gb"]
QWEN = MODELS["qwen3-30b-a3b"]
SHARED = dataclasses.replace(QWEN, shared_experts=2, shared_ffn=1024)


def test_shared_experts_add_a_dense_mlp_to_every_moe_layer() -> None:
    """DeepSeekMoE's shared experts (Dai et al. 2024, §3.2): per MoE layer 3·h·n_s·f_s
    SwiGLU weights counted in the total and in the active parameters; 2·T·3·h·n_s·f_s
    forward FLOPs for every token (3× with the backward)."""
    h, w, L = QWEN.hidden, 2 * 1024, QWEN.moe_layers
    assert SHARED.shared_width == w and QWEN.shared_width == 0
    assert SHARED.params - QWEN.params == L * 3 * h * w
    assert SHARED.active_params - QWEN.active_params == L * 3 * h * w
    seqs = 4
    extra = step_flops(SHARED, seqs)[0] - step_flops(QWEN, seqs)[0]
    assert extra == pytest.approx(3 * L * 2 * seqs * QWEN.seq_len * 3 * h * w, rel=1e-12)
    # shared_ffn 0 means the routed experts' width; parsed with per-field errors
    assert model_from_params({"base": "qwen3-30b-a3b", "shared_experts": 1}).shared_width == 768
    with pytest.raises(Exception, match="shared_experts"):
        model_from_params({"base": "qwen3-30b-a3b", "shared_experts": -1})


def test_shared_experts_are_priced_as_a_dense_gemm_pair() -> None:
    """The layer's forward GEMM time grows by exactly the up (T, 2·f_s/t, h) and down
    (T, h, f_s/t) GEMMs of one dense MLP, every token, whatever the EP degree."""
    one = np.array([1.0])
    T, tp, rate, hbm, sms = 4096.0 * one, 2.0 * one, 700e12 * one, 3.0e12, 132
    for ep in (1.0, 8.0):
        args = (T, tp, np.array([False]), np.array([True]), 2.0, rate, rate, hbm, sms)
        a = layer_kernels(QWEN, *args, ep=ep)
        b = layer_kernels(SHARED, *args, ep=ep)
        w = 2048.0
        up = gemm_time(T, 2 * w / tp, 2048.0 * one, one, 2.0, rate, hbm, sms)
        dn = gemm_time(T, 2048.0 * one, w / tp, one, 2.0, rate, hbm, sms)
        assert float(b["fwd_gemm"][0] - a["fwd_gemm"][0]) == pytest.approx(
            float(up[0] + dn[0]), rel=1e-9)
        assert float(b["fwd_mem"][0]) > float(a["fwd_mem"][0])


def test_shared_experts_weights_are_replicated_over_ep() -> None:
    """The shared experts sit with the dense weights (split by TP, not by EP): the
    per-card weight memory grows by the same bytes at ep = 1 and ep = 8."""
    system = system_for_accelerator(H100, 8)

    def weights(model: object, ep: int) -> float:
        ex = execution_from_params({"global_batch": 8, "ep": ep, "precision": "bf16"}, 8,
                                   model)  # type: ignore[arg-type]
        return float(evaluate(model, system, ex).values["memory"]["weights"])  # type: ignore[arg-type]

    d1 = weights(SHARED, 1) - weights(QWEN, 1)
    d8 = weights(SHARED, 8) - weights(QWEN, 8)
    assert d1 > 0 and d8 == pytest.approx(d1, rel=1e-9)
