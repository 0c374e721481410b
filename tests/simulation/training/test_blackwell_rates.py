"""Blackwell's costs: the attention backward's shared-memory bound, NVFP4's amax pass."""
from __future__ import annotations

import numpy as np
import pytest

from simulation.training import MODELS, evaluate, execution_from_params, system_for_accelerator
from simulation.training.layer import cast_elements, layer_kernels
from simulation.training.recipes import CAST_BYTES, CAST_KERNELS
from simulation.training.system import (
    FLASH_BWD_TFLOPS_PER_SM,
    FLASH_EFFICIENCY,
    SystemSpec,
    flash_bwd_efficiency,
)
from simulation.training.validation import ACCELERATORS


def test_blackwell_backward_rate_is_hoppers_per_sm_times_its_sms() -> None:
    """Shared-memory bound: cuDNN's 518 TFLOP/s on 132 H100 SMs, per SM, × the card's SMs,
    over its BF16 peak (B200 148 SMs of 2,250; GB200 148 of 2,500; GB300 160 of 2,500).
    Hopper keeps its measured kernel (0 = the forward's rate)."""
    assert FLASH_BWD_TFLOPS_PER_SM == pytest.approx(518.0 / 132)
    for slug, sms in (("b200-sxm-180gb", 148), ("gb200-186gb", 148), ("gb300-288gb", 160)):
        s = system_for_accelerator(ACCELERATORS[slug], 8)
        assert s.sm_count == sms
        assert s.flash_bwd_efficiency * s.peak("bf16") == pytest.approx(518.0 * sms / 132)
    h100 = system_for_accelerator(ACCELERATORS["h100-sxm5-80gb"], 8)
    assert h100.flash_bwd_efficiency == 0.0
    assert flash_bwd_efficiency("a100-sxm-80gb", 108, 312) == 0.0
    # never above the peak, whatever a custom card declares
    assert flash_bwd_efficiency("b200-sxm-180gb", 148, 100.0) == 1.0
    assert SystemSpec.from_dict(h100.to_dict(), "").flash_bwd_efficiency == 0.0


def test_layer_backward_core_is_two_and_a_half_forwards_at_the_backward_rate() -> None:
    """Flash backward = 2.5 × the forward's FLOPs (Dao 2023: 5 GEMMs to 2) at its own rate:
    bwd / fwd = 2.5 × fwd_rate / bwd_rate exactly; without a backward rate, 2.5."""
    model = MODELS["llama3-8b"]
    one = np.array([1.0])
    fwd_rate, bwd_rate = one * 1241e12, one * 580.8e12
    args = (model, 16384.0 * one, one, np.array([False]), np.array([True]), 1.0,
            one * 3400e12, one * 2000e12, 7e12, 148)
    k = layer_kernels(*args, flops_flash=fwd_rate, flops_flash_bwd=bwd_rate)
    assert float(k["bwd_core"][0] / k["fwd_core"][0]) == pytest.approx(2.5 * 1241 / 580.8)
    k0 = layer_kernels(*args, flops_flash=fwd_rate)
    assert float(k0["bwd_core"][0] / k0["fwd_core"][0]) == pytest.approx(2.5)
    assert float(k0["fwd_core"][0]) == float(k["fwd_core"][0])
    # the forward: the causal half of 4·s²·d per head (32 heads, 2 sequences of 8,192)
    assert float(k["fwd_core"][0]) == pytest.approx(8192**2 * 2 * 128 * 32 * 2 / 1241e12)


def test_b200_step_prices_the_backward_op_at_its_rate() -> None:
    """The per-op table and the step's attention class agree with the closed form on a B200:
    the backward row = 2.5 × forward FLOPs / (518/132 × 148 TFLOP/s)."""
    model = MODELS["llama3-8b"]
    system = system_for_accelerator(ACCELERATORS["b200-sxm-180gb"], 8)
    ex = execution_from_params({"global_batch": 16, "micro_batch": 2, "precision": "fp8",
                                "fp8_recipe": "current"}, 8, model)
    res = evaluate(model, system, ex).values
    rows = {r["op"]: r for r in res["layer_ops"]}
    fwd, bwd = rows["flash attention"], rows["flash attention (backward)"]
    assert bwd["flops"] == pytest.approx(2.5 * fwd["flops"])
    assert bwd["time_s"] == pytest.approx(bwd["flops"] / (518e12 / 132 * 148))
    assert fwd["time_s"] == pytest.approx(
        fwd["flops"] / (2250e12 * FLASH_EFFICIENCY["b200-sxm-180gb"]))
    per_step = res["micro_batches"] * model.layers
    assert res["ops"]["attention"] == pytest.approx(per_step * (fwd["time_s"] + bwd["time_s"]))


def test_nvfp4_casts_pay_an_amax_pass_like_current_scaling() -> None:
    """NVFP4's per-tensor FP32 scale is 6·448 / amax of the tensor itself (two-level
    scaling, arXiv 2509.25149), so every cast reads the 16-bit tensor twice (amax, then
    cast) and writes two 4-bit copies + E4M3 scales per 16 elements: 5.125 B, 2 kernels.
    On a GB200 the FP4 casts of a step are the closed form (elements × 5.125 / HBM)."""
    assert CAST_BYTES["nvfp4"] == 2 + 2 + 0.5 + 0.5 + 2 / 16
    assert CAST_KERNELS["nvfp4"] == CAST_KERNELS["current"] == 2.0
    model = MODELS["llama3-8b"]
    system = system_for_accelerator(ACCELERATORS["gb200-186gb"], 8)
    ex = execution_from_params({"global_batch": 16, "micro_batch": 1, "precision": "fp4"}, 8,
                               model)
    res = evaluate(model, system, ex).values
    one = np.array([1.0])
    f, b = cast_elements(model, 8192 * one, one, np.array([False]))
    hbm = system.hbm_tbps * 1e12 * system.memory_efficiency
    card = model.params - model.vocab * model.hidden  # the weights, cast once a step
    expect = (2 * model.layers * float(f[0] + b[0]) + card) * 5.125 / hbm
    assert res["ops"]["casts"] == pytest.approx(expect, rel=1e-9)
