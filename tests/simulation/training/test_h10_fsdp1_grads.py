"""FSDP1's gradient passes (issue 23, helper h10): PyTorch ``FullyShardedDataParallel`` of
torch 2.0 (Composer 0.16's FSDP, llm-foundry's MPT rows) handles each unit's gradient
unsharded on every card after every micro-batch's backward — autograd's ``cat`` of the
views' gradients into the flat gradient on the compute stream; the cast to the FP32
``reduce_dtype`` and the reduce-scatter hook's pre-division on the ``post_backward``
stream, ahead of the reduce-scatter (:data:`simulation.training.core.FSDP1_GRAD_BYTES`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulation.training.core import FSDP1_GRAD_BYTES, fsdp1_grad_bytes, memory_arrays
from simulation.training.execution import execution_from_params
from simulation.training.search import execution_at
from simulation.training.step import batch_of, evaluate
from simulation.training.system import system_for_accelerator
from simulation.training.validation import (
    ACCELERATORS,
    LLM_FOUNDRY,
    LLM_FOUNDRY_A100_RUNS,
    VALIDATION_MODELS,
)

MODEL = VALIDATION_MODELS["mpt-7b"]
SYSTEM = system_for_accelerator(ACCELERATORS["h100-sxm5-80gb"], 8)


def _ex(**kw: object) -> object:
    params = {"dp": 8, "global_batch": 48, "micro_batch": 6, "zero": 3, "precision": "bf16",
              "fp32_grads": True, "fsdp1_flat_grads": True, **kw}
    return execution_from_params(params, 8, MODEL)


def test_bytes_are_the_kernels_passes() -> None:
    """Per unit parameter: cat 2 + 2, FP32 cast 2 + 4, pre-division (in place, FP32) 4 + 4;
    per shard parameter (÷ dp): post-division 4 + 4, two 16-bit casts 2 × (4 + 2) less the
    optimizer's one (6), the ``_saved_grad_shard`` accumulation 4 + 4 + 4 from the second
    micro-batch on."""
    assert FSDP1_GRAD_BYTES == {"cat": 4.0, "cast": 6.0, "predivide": 8.0}
    on, side = fsdp1_grad_bytes(True, 8.0, 1.0)
    assert float(on) == 4.0 and float(side) == pytest.approx(6 + 8 + (8 + 12 - 6) / 8)
    on, side = fsdp1_grad_bytes(True, 8.0, 21.0)
    assert float(side) == pytest.approx(14 + (8 + 12 - 6 / 21 + 12 * 20 / 21) / 8)
    # a 16-bit reduce dtype: no cast, the pre- and post-division on 2-byte values
    on, side = fsdp1_grad_bytes(False, 8.0, 1.0)
    assert float(on) == 4.0 and float(side) == pytest.approx(4 + (4 + 12 - 6) / 8)


def test_the_cat_is_serial_and_the_rest_on_the_dp_chain() -> None:
    """With the DP collectives not overlapped, turning the flag on adds exactly the cat to
    the memory-bound ops (4 B per parameter at the card's HBM rate) and the side-stream
    passes to the exposed DP time (one micro-batch: 48 = 8 × 6)."""
    off = evaluate(MODEL, SYSTEM, _ex(fsdp1_flat_grads=False, overlap_dp=False)).values
    on = evaluate(MODEL, SYSTEM, _ex(overlap_dp=False)).values
    b = batch_of([_ex()])
    mem = memory_arrays(MODEL, SYSTEM, b, 0.0)
    p = float(mem["p_dense"][0] + mem["p_expert"][0])
    hbm = SYSTEM.hbm_tbps * 1e12 * SYSTEM.memory_efficiency
    _, side = fsdp1_grad_bytes(True, 8.0, 1.0)
    assert on["ops"]["memory_bound"] - off["ops"]["memory_bound"] == pytest.approx(
        4.0 * p / hbm, rel=1e-9)
    assert on["exposed_comm"]["dp"] - off["exposed_comm"]["dp"] == pytest.approx(
        float(side) * p / hbm, rel=1e-9)
    assert on["step_time_s"] - off["step_time_s"] == pytest.approx(
        (4.0 + float(side)) * p / hbm, rel=1e-9)


def test_only_fsdp_over_several_cards() -> None:
    """ZeRO 1 (no unit all-gathered, no per-unit flat gradient) or one card: no change."""
    for kw in ({"zero": 1}, {"dp": 1, "global_batch": 6}):
        base = _ex(fsdp1_flat_grads=False, **kw)
        on = replace(base, fsdp1_flat_grads=True)
        system = SYSTEM if base.dp == 8 else system_for_accelerator(
            ACCELERATORS["h100-sxm5-80gb"], 1)
        assert (evaluate(MODEL, system, on).values["step_time_s"]
                == evaluate(MODEL, system, base).values["step_time_s"])


def test_flag_round_trips_and_the_mpt_rows_set_it() -> None:
    """The flag survives the batch round trip (search) and is what llm-foundry's rows run:
    Composer 0.16's FSDP1, reducing every micro-batch (no ``no_sync`` for FSDP)."""
    ex = _ex()
    assert execution_at(batch_of([ex]), 0) == ex
    settings = dict(LLM_FOUNDRY)
    assert settings["fsdp1_flat_grads"] is True and settings["dp_every_microbatch"] is True
    assert all(dict(r.settings)["fsdp1_flat_grads"] for r in LLM_FOUNDRY_A100_RUNS)
