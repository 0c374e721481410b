"""Published measurements of real training runs, and the model's figure for each.

Each row names its source, the model, the accelerator, the layout the paper
states, and the published figure: hardware TFLOP/s per GPU (``hfu``: Narayanan
et al. count recomputation, their 96·B·s·l·h² formula) or MFU. Where a paper
does not state a setting the row says what is assumed (``assumed``).
:func:`fidelity_table` prices every row with :func:`~simulation.training.evaluate`
on :func:`~simulation.training.system_for_accelerator` for the catalogue
accelerator — nothing is fitted to this table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .execution import execution_from_params
from .models import MODELS
from .step import evaluate
from .system import system_for_accelerator

__all__ = ["ACCELERATORS", "PUBLISHED_RUNS", "PublishedRun", "fidelity_table"]

ACCELERATORS: dict[str, dict[str, Any]] = {
    "a100-sxm-80gb": {"slug": "a100-sxm-80gb", "bf16_tflops": 312, "fp8_tflops": None,
                      "fp32_tflops": 19.5, "tf32_tflops": 156, "hbm_gib": 80,
                      "hbm_tbps": 2.039, "tdp_w": 400, "idle_w": 55, "scaleup_gbps": 600},
    "h100-sxm5-80gb": {"slug": "h100-sxm5-80gb", "bf16_tflops": 989.5, "fp8_tflops": 1979,
                       "fp32_tflops": 67, "tf32_tflops": 494.5, "hbm_gib": 80,
                       "hbm_tbps": 3.35, "tdp_w": 700, "idle_w": 70, "scaleup_gbps": 900},
}
"""Rows of the twin's catalogue (``twin/hardware/fixtures/catalogue.json``)."""

NARAYANAN = ("Narayanan et al. 2021, Efficient Large-Scale Language Model Training on GPU "
             "Clusters Using Megatron-LM (SC21), Table 1")
KORTHIKANTI = ("Korthikanti et al. 2022, Reducing Activation Recomputation in Large "
               "Transformer Models (MLSys 2023), Table 5 / abstract")
LLAMA3 = "Dubey et al. 2024, The Llama 3 Herd of Models, Table 4"
SELENE: dict[str, Any] = {"scale_out_gbps": 200.0}
"""Selene, where Narayanan et al. and Korthikanti et al. ran (Narayanan 2021 §5:
DGX A100 nodes, 8 × 200 Gb/s HDR InfiniBand HCAs each). Both papers' Megatron-LM
reduced gradients after the backward pass (no DP overlap: ``overlap_dp`` off)."""


@dataclass(frozen=True)
class PublishedRun:
    """One published run: what ran, and the figure the paper reports."""

    run: str
    model: str
    accelerator: str
    gpus: int
    layout: dict[str, Any]
    metric: str  # "hfu_tflops" (TFLOP/s per GPU incl. recompute) or "mfu"
    published: float
    source: str
    assumed: str = ""
    system: dict[str, Any] = field(default_factory=dict)


def _nar(model: str, tp: int, pp: int, gpus: int, batch: int, tflops: float) -> PublishedRun:
    return PublishedRun(
        f"Megatron {model.split('-')[1].upper()} on {gpus} A100", model, "a100-sxm-80gb", gpus,
        {"tp": tp, "pp": pp, "global_batch": batch, "micro_batch": 1, "recompute": "full",
         "precision": "fp16", "flash_attention": False, "overlap_dp": False},
        "hfu_tflops", tflops, NARAYANAN,
        "micro-batch 1, no interleaving (not stated per row)", SELENE)


def _kor(model: str, gpus: int, pp: int, mfu: float, recompute: str = "selective") -> PublishedRun:
    return PublishedRun(
        f"{model} on {gpus} A100, {recompute} recompute", model, "a100-sxm-80gb", gpus,
        {"tp": 8, "pp": pp, "global_batch": gpus, "micro_batch": 1, "recompute": recompute,
         "sequence_parallel": recompute == "selective", "precision": "bf16",
         "flash_attention": False, "overlap_dp": False},
        "mfu", mfu, KORTHIKANTI, "global batch = GPUs, micro-batch 1, no interleaving", SELENE)


def _llama(gpus: int, dp: int, mfu: float) -> PublishedRun:
    return PublishedRun(
        f"Llama 3 405B on {gpus} H100", "llama3-405b", "h100-sxm5-80gb", gpus,
        {"tp": 8, "pp": 16, "global_batch": 2048, "micro_batch": 1, "recompute": "none",
         "sequence_parallel": True, "precision": "bf16", "zero": 2, "flash_attention": True},
        "mfu", mfu, LLAMA3,
        f"dp {dp}, 16M tokens/step, no recomputation (§3.3.2: 8K sequences trained without "
        "activation checkpointing), FSDP sharding optimizer states and gradients but not "
        "re-sharding weights after the forward (= ZeRO-2); no interleaving (V not published)",
        {"scale_out_technology": "roce"})


PUBLISHED_RUNS: tuple[PublishedRun, ...] = (
    _nar("megatron-1.7b", 1, 1, 32, 512, 137),
    _nar("megatron-7.5b", 4, 1, 128, 512, 142),
    _nar("megatron-18b", 8, 1, 256, 1024, 135),
    _nar("megatron-39b", 8, 2, 512, 1536, 138),
    _nar("megatron-145b", 8, 8, 1536, 2304, 148),
    _nar("megatron-310b", 8, 16, 1920, 2160, 155),
    _nar("megatron-530b", 8, 35, 2520, 2520, 163),
    _nar("megatron-1t", 8, 64, 3072, 3072, 163),
    _kor("megatron-22b", 8, 1, 0.415),
    _kor("gpt3-175b", 64, 8, 0.514),
    _kor("megatron-530b", 280, 35, 0.560),
    _kor("megatron-1t", 512, 64, 0.563),
    _kor("megatron-530b", 2240, 35, 0.542),
    _kor("megatron-530b", 2240, 35, 0.421, "full"),
    _llama(8192, 64, 0.43),
    _llama(16384, 128, 0.41),
)


def fidelity_table() -> list[dict[str, Any]]:
    """Every published run with the model's figure and the relative error."""
    out = []
    for run in PUBLISHED_RUNS:
        model = MODELS[run.model]
        system = system_for_accelerator(ACCELERATORS[run.accelerator], run.gpus, **run.system)
        ex = execution_from_params(run.layout, run.gpus, model)
        res = evaluate(model, system, ex)
        if run.metric == "mfu":
            value = float(res.values["mfu"])
        else:
            value = float(res.values["hfu"]) * system.peak(ex.precision)
        out.append({
            "run": run.run, "published": run.published, "model": value,
            "error": value / run.published - 1, "metric": run.metric, "source": run.source,
            "assumed": run.assumed, "fits": bool(res.values["fits"]),
        })
    return out
