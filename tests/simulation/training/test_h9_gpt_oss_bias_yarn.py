"""GPT-OSS in Megatron-Core: the eager per-expert bias of the experts' down projection
(``TEGroupedMLP._apply_bias``) and the unfused YaRN rotary embedding, priced op by op."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simulation.training import MODELS
from simulation.training.dispatch import (
    EXPERT_BIAS_KERNELS,
    HOST_EXPERT_GEMM_S,
    HOST_OP_S,
    moe_layer_host_s,
    moe_layer_kernels,
)
from simulation.training.layer import (
    BWD_TRAFFIC,
    EXPERT_BIAS_ELEMENTS,
    YARN_ROPE_ELEMENTS,
    layer_kernels,
)

OSS = MODELS["gpt-oss-120b"]
ONE = np.array([1.0])
HBM = 7.0e12
T = 16384.0  # micro-batch 4 × 4,096 tokens


def _kernels(model: object, ep: float = 8.0) -> dict[str, np.ndarray]:
    return layer_kernels(model, T * ONE, ONE, np.array([False]), np.array([True]), 2.0,
                         2e15 * ONE, 2e15 * ONE, HBM, 148, ep=ep * ONE, etp=1.0)


def test_op_passes_of_the_unfused_rotary_and_the_expert_bias() -> None:
    """Each constant is the sum of its ops' HBM passes (elements read + written per
    element): rotary forward t·cos 2, −x2 1, cat 2, ·sin 2, + 3, cat with the empty
    pass-through 2; backward grad·sin 2, −grad 1, chunk's cat 2, grad·cos 2, the empty
    pass-through slice's zero-filled gradient 1, the input's three gradients summed 3 + 3.
    Bias forward b·p 1, t + bp 3, cat 2; backward (grad·p, Σ rows) 3, (grad·b, Σ h) 3,
    split's cat 2. Against the fused kernels' 2 and 3 (:data:`BWD_TRAFFIC` × 2)."""
    assert YARN_ROPE_ELEMENTS == (2 + 1 + 2 + 2 + 3 + 2, 2 + 1 + 2 + 2 + 1 + 3 + 3)
    assert EXPERT_BIAS_ELEMENTS == (1 + 3 + 2, 3 + 3 + 2)
    assert BWD_TRAFFIC * 2.0 == 3.0


def test_yarn_rotary_adds_the_unfused_passes_on_q_and_k() -> None:
    """GPT-OSS with and without YaRN: the layer's memory time differs by (12 − 2) forward and
    (14 − 3) backward 2-byte passes over T·(q + kv) = T·(64·64 + 8·64) rotated elements."""
    rot = T * (OSS.q_dim + OSS.kv_heads * OSS.head_dim)
    assert rot == T * 4608
    with_y, without = _kernels(OSS), _kernels(replace(OSS, yarn=False))
    d_f = float(with_y["fwd_mem"][0] - without["fwd_mem"][0])
    d_b = float(with_y["bwd_mem"][0] - without["bwd_mem"][0])
    assert d_f == pytest.approx((12 - 2) * rot * 2.0 / HBM, rel=1e-12)
    assert d_b == pytest.approx((14 - 3) * rot * 2.0 / HBM, rel=1e-12)
    # the GEMMs and attention do not move
    for key in ("fwd_gemm", "bwd_gemm", "fwd_core", "bwd_core"):
        assert float(with_y[key][0]) == float(without[key][0])


def test_expert_bias_moves_six_and_eight_passes_over_the_routed_rows() -> None:
    """The eager bias over the card's routed rows, T·k = 65,536 rows of h = 2,880: 6
    forward and 8 backward 2-byte passes (0.75 ms a layer and micro-batch at 7 TB/s),
    whatever the EP degree (a card receives T·k rows at balance)."""
    rows_h = T * 4 * 2880
    for ep in (8.0, 64.0):
        with_b, without = _kernels(OSS, ep), _kernels(replace(OSS, bias=False), ep)
        assert float(with_b["fwd_mem"][0] - without["fwd_mem"][0]) == pytest.approx(
            6 * rows_h * 2.0 / HBM, rel=1e-12)
        assert float(with_b["bwd_mem"][0] - without["bwd_mem"][0]) == pytest.approx(
            8 * rows_h * 2.0 / HBM, rel=1e-12)
    # Qwen3 30B-A3B has no biases (nothing priced); given some, top-8 rows of 2,048
    q = MODELS["qwen3-30b-a3b"]
    assert not q.bias
    extra = _kernels(replace(q, bias=True))["fwd_mem"][0] - _kernels(q)["fwd_mem"][0]
    assert float(extra) == pytest.approx(6 * T * 8 * 2048 * 2.0 / HBM, rel=1e-12)


def test_expert_bias_kernels_are_issued_by_the_host() -> None:
    """Per local expert 2 kernels forward (b·p, t + bp) and 6 backward (the product's two
    gradients and reductions, the DDP hook's ``main_grad.add_`` of the two biases), + 1 cat
    forward and 2 backward, each at the 8 µs host cost: 16 local experts (EP 8) add 33 · 8 µs
    forward and 98 · 8 µs backward of host time; the expert GEMMs keep their 68.1 µs."""
    assert EXPERT_BIAS_KERNELS == ((2.0, 1.0), (2.0 + 2.0 + 2.0, 2.0))
    f0, b0 = moe_layer_kernels(16.0, False)
    f1, b1 = moe_layer_kernels(16.0, False, bias=True)
    assert (float(f1 - f0), float(b1 - b0)) == (33.0, 98.0)
    h0 = moe_layer_host_s(16.0, False)
    h1 = moe_layer_host_s(16.0, False, bias=True)
    assert float(h1[0] - h0[0]) == pytest.approx(33 * HOST_OP_S)
    assert float(h1[1] - h0[1]) == pytest.approx(98 * HOST_OP_S)
    assert float(h0[0]) == pytest.approx((8 + 30) * HOST_OP_S + 32 * HOST_EXPERT_GEMM_S)


def test_the_yarn_flag_reaches_the_model_from_params() -> None:
    from simulation.training.models import model_from_params
    assert model_from_params({"base": "gpt-oss-120b"}).yarn
    assert not model_from_params({"base": "gpt-oss-120b", "yarn": False}).yarn
    assert not MODELS["llama3-8b"].yarn
