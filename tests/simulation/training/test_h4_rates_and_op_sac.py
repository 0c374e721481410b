"""Issue 23 item 4: the GEMM rate by scaling recipe, and torchtitan's op-level SAC."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from simulation.training import MODELS, evaluate, execution_from_params, system_for_accelerator
from simulation.training.core import kernel_rates
from simulation.training.flops import step_flops
from simulation.training.gemm import gemm_time
from simulation.training.layer import layer_kernels, op_sac_mms
from simulation.training.recipes import FP4_OVER_FP8, MX_GEMM_RATE, fp4_over_fp8
from simulation.training.step import batch_of
from simulation.training.validation import ACCELERATORS

GB200 = ACCELERATORS["gb200-186gb"]
GB300 = ACCELERATORS["gb300-288gb"]
H100 = ACCELERATORS["h100-sxm5-80gb"]


def _ex(precision: str, recipe: str = "delayed", **extra: Any) -> Any:
    return execution_from_params({"global_batch": 16, "micro_batch": 1, "zero": 1,
                                  "precision": precision, "fp8_recipe": recipe, **extra},
                                 8, MODELS["llama3-8b"])


def test_block_scaled_gemm_rates_are_transformer_engines_b300_measurement() -> None:
    """Transformer Engine's GEMM profiling tutorial (B300, pre-quantized, 24 layers of
    hidden 4,096 / MLP 16,384): per-tensor FP8 163.493 ms, MXFP8 171.869 ms, NVFP4
    90.337 ms. The model's MXFP8 GEMM rate is per-tensor FP8's × 163.493 / 171.869 on every
    Blackwell part; its NVFP4 rate FP8's × 163.493 / 90.337 on the part measured (GB300:
    B300's FP8 efficiency, a 3× FP4 / FP8 peak) and, on B200 / GB200 (a 2× peak ratio),
    that measurement transferred by :func:`~simulation.training.recipes.fp4_over_fp8`."""
    assert MX_GEMM_RATE == pytest.approx(163.493 / 171.869) and round(MX_GEMM_RATE, 3) == 0.951
    assert FP4_OVER_FP8 == pytest.approx(163.493 / 90.337) and round(FP4_OVER_FP8, 2) == 1.81
    model = MODELS["llama3-8b"]
    for figures in (GB200, GB300, ACCELERATORS["b200-sxm-180gb"]):
        system = system_for_accelerator(figures, 8)
        rates = kernel_rates(model, system, batch_of(
            [_ex("fp8", "current"), _ex("fp8", "mx"), _ex("fp4")]))
        cs, mx, nv = (float(x) for x in rates["peak_gemm"])
        assert mx / cs == pytest.approx(MX_GEMM_RATE)
        ratio = figures["fp4_tflops"] / figures["fp8_tflops"]
        assert nv / cs == pytest.approx(fp4_over_fp8(system.efficiency("fp8"), ratio))
        if figures is GB300:
            assert nv / cs == pytest.approx(FP4_OVER_FP8)
        else:
            assert ratio == 2.0 and 1.4 < nv / cs < FP4_OVER_FP8
        assert cs == pytest.approx(system.peak("fp8") * 1e12 * system.efficiency("fp8"))
    # Hopper has neither; its FP8 recipes keep the FP8 rate
    h = kernel_rates(model, system_for_accelerator(H100, 8), batch_of(
        [_ex("fp8", "current"), _ex("fp8", "block")]))["peak_gemm"]
    assert float(h[0]) == float(h[1])


def test_mxfp8_step_is_slower_than_per_tensor_by_its_gemm_rate() -> None:
    """On a GB200 the MXFP8 step differs from a per-tensor one with the same cast bytes
    only in its projection/MLP GEMMs, which take 1/0.951 as long."""
    model = MODELS["llama3-8b"]
    system = system_for_accelerator(GB200, 8)
    blk = evaluate(model, system, _ex("fp8", "block")).values  # same bytes as mx, 1×128
    mx = evaluate(model, system, _ex("fp8", "mx")).values
    assert mx["ops"]["casts"] == pytest.approx(blk["ops"]["casts"])
    assert mx["ops"]["gemm"] / blk["ops"]["gemm"] == pytest.approx(1 / MX_GEMM_RATE, rel=0.02)
    for op in ("attention", "memory_bound", "output_layer"):
        assert mx["ops"][op] == pytest.approx(blk["ops"][op])


def test_op_sac_recomputes_every_second_mm_and_the_memory_bound_ops() -> None:
    """torchtitan's op-level SAC on Llama 3 8B (wq, wk, wv, wo, w1, w3, w2; every second
    mm recomputed): the recompute of a layer is the forward of wk, wo and w3 plus every
    memory-bound op of the forward, not the attention core (SDPA's output is saved);
    its extra hardware FLOPs per token are 2·(kv·h + h·h + f·h) per layer."""
    model = MODELS["llama3-8b"]
    h, f, kv = 4096.0, 14336.0, 1024.0
    assert [(n, k) for n, k, _, saved in op_sac_mms(model) if not saved] == [
        (kv, h), (h, h), (f, h)]
    system = system_for_accelerator(H100, 8)
    one = np.array([1.0])
    rate = system.peak("bf16") * 1e12 * system.efficiency("bf16")
    hbm = system.hbm_tbps * 1e12 * system.memory_efficiency
    T = 8192.0 * one
    k = layer_kernels(model, T, one, np.array([False]), np.array([True]), 2.0, rate * one,
                      rate * one, hbm, system.sm_count,
                      store_overlap=system.gemm_store_overlap)
    closed = sum(float(gemm_time(T, n * one, kk * one, one, 2.0, rate, hbm, system.sm_count,
                                 store_overlap=system.gemm_store_overlap)[0])
                 for n, kk in ((kv, h), (h, h), (f, h)))
    assert float(k["op_rc_gemm"][0]) == pytest.approx(closed, rel=1e-12)
    res = {rc: evaluate(model, system, _ex("bf16", recompute=rc)).values
           for rc in ("none", "selective", "full", "op")}
    layer = res["op"]["layer"]
    fixed = float(k["fwd_mem"][0] + k["core_mem"][0])
    gaps = 12.0 * 1e-6  # a flash layer's 12 forward kernels, 1 µs apart (core.KERNEL_GAP_S)
    assert layer["recompute"] == pytest.approx(closed + fixed + gaps, rel=1e-9)
    assert res["none"]["step_time_s"] < res["op"]["step_time_s"] < res["full"]["step_time_s"]
    # memory: between none (everything) and full (the layer input only)
    act = {rc: r["memory"]["activations"] for rc, r in res.items()}
    assert act["full"] < act["op"] < act["none"]
    # FLOPs: per sequence of 8,192 tokens, 32 layers
    _, none = step_flops(model, 1.0, "none")
    _, op = step_flops(model, 1.0, "op")
    assert op - none == pytest.approx(32 * 8192 * 2 * (kv * h + h * h + f * h))


def test_op_sac_is_offered_but_not_searched_by_default() -> None:
    """``op`` is a recompute choice of an execution (torchtitan's rows use it); the
    configuration search keeps Megatron's three unless the limits ask for it."""
    from simulation.training.execution import RECOMPUTE
    from simulation.training.search import search
    assert "op" in RECOMPUTE
    sys_ = system_for_accelerator(H100, 8)
    default = search(MODELS["llama3-8b"], sys_, 8, 16, top=50)
    assert {r["execution"]["recompute"] for r in default.best} <= {"none", "selective", "full"}
    op = search(MODELS["llama3-8b"], sys_, 8, 16, top=5, limits={"recompute": ["op"]})
    assert 3 * op.configs_enumerated == default.configs_enumerated
    assert {r["execution"]["recompute"] for r in op.best} == {"op"}
