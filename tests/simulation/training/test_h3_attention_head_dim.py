"""The attention kernel's rate by head dim (FlashAttention-3 paper, H100 cuDNN bars)."""
from __future__ import annotations

import pytest

from simulation.training import MODELS, execution_from_params, system_for_accelerator
from simulation.training.core import kernel_rates
from simulation.training.step import batch_of
from simulation.training.system import (
    FLASH_EFFICIENCY,
    FLASH_HEAD_DIM_RATE_BWD,
    FLASH_HEAD_DIM_RATE_FWD,
    flash_head_dim_factor,
)
from simulation.training.validation import A100_ERA, ACCELERATORS


def _rates(model_name: str, slug: str) -> tuple[float, float, float]:
    """(forward flash FLOP/s, backward flash FLOP/s, BF16 peak FLOP/s) of a BF16 run."""
    figures = {**A100_ERA, **ACCELERATORS}[slug]
    system = system_for_accelerator(figures, 8)
    model = MODELS[model_name]
    ex = execution_from_params({"global_batch": 8, "precision": "bf16"}, 8, model)
    r = kernel_rates(model, system, batch_of([ex]))
    return float(r["peak_flash"][0]), float(r["peak_flash_bwd"][0]), system.peak("bf16") * 1e12


def test_the_factors_are_the_figures_cudnn_bars() -> None:
    """FlashAttention-3 (Shah et al. 2024), H100 SXM5, cuDNN: forward causal 16k 388 / 539 /
    509 TFLOP/s at head dim 64 / 128 / 256; backward 8k 432 / 518 at 64 / 128."""
    assert flash_head_dim_factor(64, FLASH_HEAD_DIM_RATE_FWD) * 539 == pytest.approx(388)
    assert flash_head_dim_factor(256, FLASH_HEAD_DIM_RATE_FWD) * 539 == pytest.approx(509)
    assert flash_head_dim_factor(64, FLASH_HEAD_DIM_RATE_BWD) * 518 == pytest.approx(432)
    assert flash_head_dim_factor(128, FLASH_HEAD_DIM_RATE_FWD) == 1.0
    assert flash_head_dim_factor(128, FLASH_HEAD_DIM_RATE_BWD) == 1.0
    # linear between measured dims: 192 is halfway from 128 (1) to 256 (509/539)
    assert flash_head_dim_factor(192, FLASH_HEAD_DIM_RATE_FWD) == pytest.approx(
        (1 + 509 / 539) / 2)


def test_gpt_oss_head_dim_64_runs_at_the_figures_share_of_hoppers_rate() -> None:
    """GPT-OSS (head dim 64) on an H100: 335 TFLOP/s (the head-dim-128 figure) × 388/539
    forward, × 432/518 backward; Llama 3 (head dim 128) keeps 335 both ways."""
    f, b, peak = _rates("gpt-oss-120b", "h100-sxm5-80gb")
    assert f == pytest.approx(335e12 * 388 / 539)
    assert b == pytest.approx(335e12 * 432 / 518)
    f, b, _ = _rates("llama3-8b", "h100-sxm5-80gb")
    assert f == pytest.approx(335e12) and b == pytest.approx(335e12)
    assert FLASH_EFFICIENCY["h100-sxm5-80gb"] * peak == pytest.approx(335e12)


def test_blackwell_applies_the_same_ratios_to_its_own_rates() -> None:
    """B200: forward 1,613/1.3 TFLOP/s × 388/539, backward 518/132 per SM × 148 × 432/518."""
    f, b, _ = _rates("gpt-oss-120b", "b200-sxm-180gb")
    assert f == pytest.approx(1613e12 / 1.3 * 388 / 539)
    assert b == pytest.approx(518e12 / 132 * 148 * 432 / 518)


def test_mla_heads_take_the_mean_of_their_qk_and_v_dims() -> None:
    """DeepSeek-V3: d_qk 192, d_v 128 → 160, a quarter of the way from 128 to 256 forward;
    the backward has no figure above 128 and keeps 128's rate."""
    f, b, _ = _rates("deepseek-v3", "gb200-186gb")
    full = 1613e12 / 1.3 / 2250 * 2500
    assert f == pytest.approx(full * (1 + (509 / 539 - 1) * 32 / 128))
    assert b == pytest.approx(518e12 / 132 * 148)


def test_cards_outside_hopper_and_blackwell_keep_their_figure() -> None:
    """The A100's flash figure (FlashAttention-2's 73 %) is not rescaled by head dim."""
    f, _, peak = _rates("gpt-oss-120b", "a100-sxm-80gb")
    assert f == pytest.approx(0.73 * peak)
