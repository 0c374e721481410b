"""Published measurements of real training runs, and the model's figure for each.

Each row names its source, the model, the accelerator, the layout the paper
states, and the published figure: hardware TFLOP/s per GPU (``hfu``: Narayanan
et al. count recomputation, their 96·B·s·l·h² formula) or MFU. Where a paper
does not state a setting the row says what is assumed (``assumed``).
:func:`fidelity_table` prices every row with :func:`~simulation.training.evaluate`
on :func:`~simulation.training.system_for_accelerator` for the catalogue
accelerator — nothing is fitted to this table.

**Layout settings a paper does not publish** (:data:`UNPUBLISHED`: the
micro-batch size and the number of virtual pipeline stages; which of them a
row publishes is in its ``layout``) are chosen the way an engineer tuning the
run would: every combination of the candidates is priced, those the memory
model says do not fit HBM (or that Megatron-LM refuses: interleaving needs
pp > 1 and micro-batches a multiple of pp; for the Megatron-LM rows also pp > 2
and whole layers per virtual stage) are dropped, and the fastest step
is taken. The same rule for every row; the choice is reported (``chosen``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from .errors import TrainingInputError
from .execution import Execution, execution_from_params
from .models import MODELS, model_from_params
from .step import StepResult, evaluate
from .system import system_for_accelerator

__all__ = ["ACCELERATORS", "KORTHIKANTI_LAYER_TIMES", "PUBLISHED_RUNS", "UNPUBLISHED",
           "PublishedRun", "fidelity_table", "layer_time_table"]

UNPUBLISHED: dict[str, tuple[Any, ...]] = {
    "micro_batch": (1, 2, 4, 8), "vpp": (1, 2, 4), "recompute": ("none", "selective", "full")}
"""Candidates for a layout setting a row does not publish (the search's own)."""

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
reduced gradients after the backward pass (no DP overlap: ``overlap_dp`` off), and
their pipeline sends block: Megatron-LM's ``p2p_communication`` waits on
``batch_isend_irecv`` and then calls ``torch.cuda.synchronize()`` (its comment:
"to protect against race condition when using batch_isend_irecv()") before the
stage computes (``overlap_pp`` off)."""
MEGATRON_2021 = {"overlap_dp": False, "overlap_pp": False, "grad_accum_fusion": False}
"""Narayanan et al.'s Megatron-LM (2021): no fused weight-gradient accumulation
(``--gradient-accumulation-fusion`` and apex's ``fused_weight_gradient_mlp_cuda``
came with the 2021/22 code that also brought sequence parallelism), so the FP32
``main_grad`` is accumulated by a separate pass per micro-batch."""
MEGATRON_2022 = {"overlap_dp": False, "overlap_pp": False, "grad_accum_fusion": True,
                 "fp32_grads": True, "overlap_tp_bwd": True}
"""Korthikanti et al.'s Megatron-LM (2022, sequence parallelism): fused accumulation;
BF16, for which Megatron-LM's ``arguments.py`` forces gradient accumulation and
all-reduce in FP32 (``accumulate_allreduce_grads_in_fp32``). Narayanan's FP16 runs
keep 16-bit gradients (that option's default)."""


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
    model_changes: dict[str, Any] = field(default_factory=dict)
    """Fields that differ from the catalogue model (Llama 3's 131k-token stage)."""
    framework: str = ""
    """``megatron-lm``: the layouts Megatron-LM refuses are not candidates
    (:func:`megatron_refuses`)."""


LLAMA3_PIPELINE = {"pp_balance": True, "fp32_grads": True, "dp_every_microbatch": True,
                   "overlap_dp": True, "overlap_pp": True}
"""What Dubey et al. 2024 §3.3.2 state about their pipeline and FSDP, as mechanisms:
one transformer layer fewer on the first and the last stage ("the first model
chunk on the first stage has only the embedding, and the last model chunk on
the last stage has only output projection and loss": ``pp_balance``); FSDP
sharding gradients, accumulated in FP32 and reduce-scattered in FP32 ("we use
FP32 gradient accumulation during backward computation over multiple
micro-batches and also reduce-scatter gradients in FP32 across data parallel
workers in FSDP": ``fp32_grads``, and a shard accumulates only what was reduced
to it, so every micro-batch's gradients are reduce-scattered:
``dp_every_microbatch``); weights not resharded after the forward (one gather a
step, ``zero`` 2); DP "asynchronously prefetching sharded model weights and
reducing gradients" (``overlap_dp``); "asynchronous point-to-point
communication in PP" (``overlap_pp``); early freeing of the stages' input and
output tensors (the memory model counts no send/receive buffers)."""


def _nar(model: str, tp: int, pp: int, gpus: int, batch: int, tflops: float, mb: int,
         vpp: int, ddp: str) -> PublishedRun:
    return PublishedRun(
        f"Megatron {model.split('-')[1].upper()} on {gpus} A100", model, "a100-sxm-80gb", gpus,
        {"tp": tp, "pp": pp, "global_batch": batch, "micro_batch": mb, "vpp": vpp,
         "recompute": "full", "precision": "fp16", "flash_attention": False,
         **MEGATRON_2021, "overlap_dp": ddp == "torch"},
        "hfu_tflops", tflops, NARAYANAN,
        f"micro-batch {mb}, {vpp} virtual stage(s), DDP {ddp}: the paper's own launch script "
        "(Megatron-LM examples/sc21/run_table_1.sh)", SELENE, framework="megatron-lm")


def _kor(model: str, gpus: int, pp: int, mfu: float, recompute: str = "selective",
         batch: int = 0, mb: int = 1, vpp: int = 1) -> PublishedRun:
    return PublishedRun(
        f"{model} on {gpus} A100, {recompute} recompute", model, "a100-sxm-80gb", gpus,
        {"tp": 8, "pp": pp, "global_batch": batch or gpus, "micro_batch": mb, "vpp": vpp,
         "recompute": recompute, "sequence_parallel": recompute == "selective",
         "precision": "bf16", "flash_attention": False, **MEGATRON_2022},
        "mfu", mfu, KORTHIKANTI,
        f"global batch {batch or gpus}, micro-batch {mb}, {vpp} virtual stage(s) "
        "(Korthikanti et al. Table 3 and §6; the 2,240-GPU rows: the 280-GPU layout × dp 8)",
        SELENE, framework="megatron-lm")


def _llama(gpus: int, dp: int, mfu: float, cp: int = 1) -> PublishedRun:
    seq = 131072 if cp > 1 else 8192
    layout: dict[str, Any] = {
        "tp": 8, "pp": 16, "cp": cp, "global_batch": 16 * 1024 * 1024 // seq,
        "sequence_parallel": True, "precision": "bf16", "zero": 2, "flash_attention": True,
        **LLAMA3_PIPELINE}
    if cp == 1:
        layout["recompute"] = "none"
    return PublishedRun(
        f"Llama 3 405B on {gpus} H100" + (f", CP {cp}, {seq // 1024}k tokens" if cp > 1 else ""),
        "llama3-405b", "h100-sxm5-80gb", gpus, layout, "mfu", mfu, LLAMA3,
        f"dp {dp}, 16M tokens/step, FSDP sharding optimizer states and gradients but not "
        "re-sharding weights after the forward (= ZeRO-2), gradients reduce-scattered in FP32 "
        "after every micro-batch, one layer fewer on the first and last stage (§3.3.2); "
        + ("no recomputation (§3.3.2: 8K sequences trained without activation "
           "checkpointing); " if cp == 1 else "recomputation not stated: chosen by the rule; ")
        + "micro-batch and virtual stages not published: chosen by the rule",
        {"scale_out_technology": "roce"}, {"seq_len": seq} if cp > 1 else {})


PUBLISHED_RUNS: tuple[PublishedRun, ...] = (
    _nar("megatron-1.7b", 1, 1, 32, 512, 137, 16, 1, "torch"),
    _nar("megatron-7.5b", 4, 1, 128, 512, 142, 16, 1, "torch"),
    _nar("megatron-18b", 8, 1, 256, 1024, 135, 8, 1, "torch"),
    _nar("megatron-39b", 8, 2, 512, 1536, 138, 4, 1, "local"),
    _nar("megatron-145b", 8, 8, 1536, 2304, 148, 2, 2, "local"),
    _nar("megatron-310b", 8, 16, 1920, 2160, 155, 1, 2, "local"),
    _nar("megatron-530b", 8, 35, 2520, 2520, 163, 1, 3, "local"),
    _nar("megatron-1t", 8, 64, 3072, 3072, 163, 1, 1, "local"),
    _kor("megatron-22b", 8, 1, 0.415, batch=4, mb=4),
    _kor("gpt3-175b", 64, 8, 0.514, vpp=3),
    _kor("megatron-530b", 280, 35, 0.560, vpp=3),
    _kor("megatron-1t", 512, 64, 0.563),
    _kor("megatron-530b", 2240, 35, 0.542, vpp=3),
    _kor("megatron-530b", 2240, 35, 0.421, "full", vpp=3),
    _llama(8192, 64, 0.43),
    _llama(16384, 128, 0.41),
    _llama(16384, 8, 0.38, cp=16),
)


def megatron_refuses(model_layers: int, ex: Execution) -> bool:
    """Interleaving Megatron-LM's ``arguments.py`` refuses: it needs pp > 2 and the
    layers of a stage divisible by the virtual stages (whole layers per chunk)."""
    if ex.vpp == 1:
        return False
    return ex.pp <= 2 or model_layers % ex.pp != 0 or (model_layers // ex.pp) % ex.vpp != 0


def engineer_choice(run: PublishedRun, rule: str = "fastest") -> tuple[Execution, StepResult]:
    """The published layout, its unpublished settings set by the rule (module docstring).

    ``rule="first"`` takes the first candidate of each instead (micro-batch 1, no
    interleaving, no recomputation): the fixed assumption, for comparison.
    """
    base = MODELS[run.model]
    model = model_from_params({"base": run.model, **run.model_changes}) if (
        run.model_changes) else base
    system = system_for_accelerator(ACCELERATORS[run.accelerator], run.gpus, **run.system)
    free = [k for k in UNPUBLISHED if k not in run.layout]
    best: tuple[Execution, StepResult] | None = None
    fallback: tuple[Execution, StepResult] | None = None
    options = [UNPUBLISHED[k][:1] if rule == "first" else UNPUBLISHED[k] for k in free]
    for values in itertools.product(*options):
        try:
            ex = execution_from_params({**run.layout, **dict(zip(free, values, strict=True))},
                                       run.gpus, model)
        except TrainingInputError:
            continue
        if run.framework == "megatron-lm" and megatron_refuses(model.layers, ex):
            continue
        res = evaluate(model, system, ex)
        if fallback is None or res.values["memory_gib_per_card"] < fallback[1].values[
                "memory_gib_per_card"]:
            fallback = (ex, res)
        if res.values["fits"] and (best is None or res.values["step_time_s"]
                                   < best[1].values["step_time_s"]):
            best = (ex, res)
    chosen = best or fallback
    if chosen is None:
        raise TrainingInputError("layout", f"{run.run}: no valid setting")
    return chosen


def fidelity_table(rule: str = "fastest") -> list[dict[str, Any]]:
    """Every published run with the model's figure and the relative error.

    ``rule``: how unpublished settings are chosen (:func:`engineer_choice`).
    """
    out = []
    for run in PUBLISHED_RUNS:
        ex, res = engineer_choice(run, rule)
        system = system_for_accelerator(ACCELERATORS[run.accelerator], run.gpus, **run.system)
        if run.metric == "mfu":
            value = float(res.values["mfu"])
        else:
            value = float(res.values["hfu"]) * system.peak(ex.precision)
        out.append({
            "run": run.run, "published": run.published, "model": value,
            "error": value / run.published - 1, "metric": run.metric, "source": run.source,
            "assumed": run.assumed, "fits": bool(res.values["fits"]),
            "chosen": {k: getattr(ex, k) for k in UNPUBLISHED if k not in run.layout},
        })
    return out


KORTHIKANTI_LAYER_TIMES: tuple[tuple[str, str, bool, float, float], ...] = (
    ("baseline, no recompute", "none", False, 7.7, 11.9),
    ("sequence parallelism", "none", True, 7.2, 11.8),
    ("full recompute", "full", False, 7.7, 19.5),
    ("selective recompute", "selective", False, 7.7, 13.2),
    ("selective recompute + sequence parallelism", "selective", True, 7.2, 13.1),
)
"""Korthikanti et al. 2022, Table 4: forward and backward (recompute included)
milliseconds of one transformer layer of their 22B model (h 6,144, 64 heads,
s 2,048, TP 8 on one DGX A100; micro-batch 4, their Table 3), BF16, no flash
attention: (experiment, recompute, sequence parallel, forward ms, backward ms)."""


def layer_time_table(**system_overrides: Any) -> list[dict[str, Any]]:
    """The model's per-layer forward / backward times against Korthikanti's Table 4.

    The layout is the paper's (Table 3: TP 8, micro-batch 4 on 8 A100s) with its
    2022 Megatron-LM (:data:`MEGATRON_2022`); ``StepResult.values["layer"]`` holds
    one layer's forward, backward and recompute per micro-batch, TP collectives
    that are not hidden included. ``system_overrides`` replace fields of the
    A100 system (e.g. ``matmul_efficiency`` to see the rate's share).
    """
    model = MODELS["megatron-22b"]
    system = system_for_accelerator(ACCELERATORS["a100-sxm-80gb"], 8,
                                    **{**SELENE, **system_overrides})
    out = []
    for name, recompute, sp, fwd, bwd in KORTHIKANTI_LAYER_TIMES:
        ex = execution_from_params(
            {"tp": 8, "global_batch": 4, "micro_batch": 4, "recompute": recompute,
             "sequence_parallel": sp, "precision": "bf16", "flash_attention": False,
             **MEGATRON_2022}, 8, model)
        layer = evaluate(model, system, ex).values["layer"]
        f_ms = layer["forward"] * 1e3
        b_ms = (layer["backward"] + layer["recompute"]) * 1e3
        out.append({"experiment": name, "forward_ms": fwd, "model_forward_ms": f_ms,
                    "forward_error": f_ms / fwd - 1, "backward_ms": bwd,
                    "model_backward_ms": b_ms, "backward_error": b_ms / bwd - 1})
    return out
