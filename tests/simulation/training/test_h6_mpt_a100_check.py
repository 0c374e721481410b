"""llm-foundry's MPT sweep on A100s, the same stack as the H100 rows: a check that
separates what the stack costs on any card from what it costs on an H100 only
(:data:`simulation.training.validation.LLM_FOUNDRY_A100_RUNS`; docs/training.md,
"PyTorch FSDP stacks")."""

from __future__ import annotations

import statistics

import pytest

from simulation.training.validation import (
    LLM_FOUNDRY,
    LLM_FOUNDRY_A100_RUNS,
    MODERN_RUNS,
    VALIDATION_MODELS,
    llm_foundry_a100_table,
    validation_table,
)

A100 = llm_foundry_a100_table()
H100 = {r.model: (r, row) for r, row in zip(MODERN_RUNS, validation_table(), strict=False)
        if r.source == LLM_FOUNDRY_A100_RUNS[0].source and r.precision == "BF16"}
#: The figures reached (a change that makes them worse fails). A100_LOW −0.03 → −0.06 with
#: FSDP1's gradient passes (core.FSDP1_GRAD_BYTES), which take MPT 30B's row (21
#: micro-batches a step) from −2.1 to −5.2 % while the mean improves 12.5 → 11.4 %:
#: docs/training.md, "Not done"
A100_MEAN, A100_LOW, A100_HIGH = 0.115, -0.06, 0.20

#: The README's MFU column (percent) for the rows in the table, A100 80GB and H100 80GB BF16.
MFU = {("a100", "mpt-30b"): 55.3, ("a100", "mpt-13b"): 59.57, ("a100", "mpt-7b"): 64.23,
       ("a100", "mpt-3b"): 62.11, ("a100", "mpt-1b"): 59.86, ("a100", "mpt-760m"): 56.85,
       ("h100", "mpt-30b"): 38.11, ("h100", "mpt-13b"): 39.79, ("h100", "mpt-7b"): 46.44,
       ("h100", "mpt-1b"): 41.82, ("h100", "mpt-760m"): 34.9}
NUM_PARAMS = {"mpt-760m": 760470528, "mpt-1b": 1315950592, "mpt-3b": 2651837440,
              "mpt-7b": 6658859008, "mpt-13b": 12853954560, "mpt-30b": 29975214080}


def test_the_rows_are_the_readmes_own_figures() -> None:
    """Each row's tokens/s/GPU gives the README's MFU column by its own formula
    (``mfu = (3·flops_per_seq + 3·attn_flops_per_seq)·seq_per_sec / (gpus·peak)``,
    ``flops_per_seq = 2·n_params·seq``, ``attn_flops_per_seq = n_layers·2·2·d_model·seq²``;
    peak 312 TFLOP/s on the A100, 989.5 on the H100 — Composer's ``GPU_AVAILABLE_FLOPS``,
    1.979e15 / 2) within its rounding: the transcription
    of both tables is checked against a figure it was not copied from."""
    h100 = {r.model: r for r in MODERN_RUNS if (r.model, r.precision) in {
        (m, "BF16") for m in VALIDATION_MODELS}}
    assert len(LLM_FOUNDRY_A100_RUNS) == 6 and len(h100) == 5
    for card, peak, runs in (("a100", 312e12, {r.model: r for r in LLM_FOUNDRY_A100_RUNS}),
                             ("h100", 989.5e12, h100)):
        for name, run in runs.items():
            m = VALIDATION_MODELS[name]
            seq = 2048
            flops_per_token = 3 * 2 * NUM_PARAMS[name] + 3 * m.layers * 4 * m.hidden * seq
            mfu = flops_per_token * run.tokens_per_gpu / peak * 100
            assert mfu == pytest.approx(MFU[(card, name)], abs=0.02), (card, name)


def test_same_stack_on_the_a100_is_close_and_the_h100_gap_is_the_h100s() -> None:
    """On the A100 (the card the model's GEMM rate was calibrated on) the same stack and
    settings land at −2 to +19 % (mean 12.9 %), where the H100 rows are +44 to +67 %:
    the model's H100 / A100 speed-up on the same model is 2.7-3.2×, the sweep's
    1.95-2.29×. So of each H100 row's error, a factor (1 + A100 error) is the stack's cost on
    any card and the rest, 1.27-1.45×, is a speed-up over the A100 that this 2023 stack
    (``mosaicml/pytorch:2.0.1_cu118``) did not get on the H100."""
    assert all(r["fits"] for r in A100)
    assert {r["accelerator"] for r in A100} == {"a100-sxm-80gb"}
    for r in A100:
        assert A100_LOW < r["error"] <= A100_HIGH, r["run"]
    assert statistics.mean(abs(r["error"]) for r in A100) <= A100_MEAN
    assert len(H100) == 5
    for r, run in zip(A100, LLM_FOUNDRY_A100_RUNS, strict=True):
        assert dict(run.settings)["fp32_grads"] is dict(LLM_FOUNDRY)["fp32_grads"] is True
        if run.model not in H100:  # MPT 3B has no BF16 H100 row at 2,048 tokens on 8 GPUs
            continue
        h_run, h = H100[run.model]
        # the same stack and settings (checkpointing as each table's column)
        assert h_run.settings == run.settings and h_run.fsdp and run.fsdp
        assert abs(r["error"]) < h["error"]
        published = h["published"] / r["published"]
        modelled = h["model"] / r["model"]
        assert 1.9 < published < 2.3 and 2.6 < modelled < 3.25
        excess = modelled / published
        assert 1.26 < excess < 1.46
        # the H100 row's error is the A100 row's times the excess speed-up, exactly
        assert 1 + h["error"] == pytest.approx((1 + r["error"]) * excess, rel=1e-12)


def test_the_a100_check_is_not_in_the_table() -> None:
    """Kept out of the 56 rows and their means (like the MoE release checks)."""
    table = validation_table()
    assert len(table) == 56
    assert not any(r["accelerator"] == "a100-sxm-80gb" for r in table)
