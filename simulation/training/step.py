"""One configuration: :func:`evaluate` → :class:`StepResult`.

It runs the vectorised model (:func:`simulation.training.core.step_arrays`)
on a batch of one, then adds what only one configuration needs: the bubble
next to the seeds' formula, per-stage clock planning and its energy saving.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .comm import CommModel
from .core import CAST_RECIPES, RECOMPUTE_CODES, Batch, step_arrays
from .energy import hbm_power_w, op_mix_power, plan_stage_clocks
from .errors import TrainingInputError
from .execution import OPTIMIZERS, Execution, recompute_module_mask, shape_problem
from .models import ModelSpec
from .ops import layer_ops
from .pipeline import articles_utilisation
from .recipes import recipe_name
from .system import PRECISIONS, SystemSpec, with_scale_up_domain

__all__ = ["BREAKDOWN", "MEMORY_RESERVE_GIB", "OP_CLASSES", "StepResult", "batch_of", "evaluate",
           "precision_comparison"]

BREAKDOWN = ("forward", "backward", "recompute", "tp_comm", "cp_comm", "ep_exposed", "pp_bubble",
             "pp_p2p", "dp_exposed", "compression", "optimizer")
OP_CLASSES = ("gemm", "attention", "memory_bound", "casts", "kernel_gaps", "output_layer",
              "optimizer")
"""The critical stage's busy seconds a step by class of op (``StepResult["ops"]``):
projection/MLP GEMMs, the attention core, memory-bound ops (norms, activations,
RoPE, residual adds, dropout, softmax; unfused gradient accumulation), the FP8/FP4
casts (inputs, output gradients, the weights once a step), kernel gaps, the output
layer and loss, the optimizer. With the pipeline bubble and ``exposed_comm`` (per
parallel dimension) they make the step."""
MEMORY_RESERVE_GIB = 3.0
"""Held back on every card: CUDA context (~0.5–1 GiB), NCCL buffers and the
caching allocator's fragmentation (PyTorch, "CUDA semantics: memory management")."""


@dataclass(frozen=True)
class StepResult:
    """Everything the model says about one configuration (``to_dict`` for JSON)."""

    values: dict[str, Any]
    execution: Execution
    notes: list[str] = field(default_factory=list)

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("values", {})
        if name in values:
            return values[name]
        raise AttributeError(name)

    def to_dict(self) -> dict[str, Any]:
        """The contract's keys (``step_time_s``, ``mfu``, ``breakdown`` …)."""
        return {**self.values, "notes": list(self.notes)}


def batch_of(executions: list[Execution]) -> Batch:
    """Executions → a :class:`Batch` of parallel arrays."""
    def col(name: str, dtype: type) -> Any:
        return np.array([getattr(e, name) for e in executions], dtype=dtype)

    return Batch(
        tp=col("tp", np.int64), pp=col("pp", np.int64), dp=col("dp", np.int64),
        ep=col("ep", np.int64), vpp=col("vpp", np.int64), mb=col("micro_batch", np.int64),
        gb=col("global_batch", np.int64),
        recompute=np.array([RECOMPUTE_CODES.index(e.recompute) for e in executions]),
        offload=col("cpu_offload_layers", np.int64),
        rc_modules=np.array([recompute_module_mask(e.recompute, e.recompute_modules)
                             for e in executions], dtype=np.int64),
        zero=col("zero", np.int64),
        precision=np.array([PRECISIONS.index(e.precision) for e in executions]),
        sp=col("sequence_parallel", np.bool_), compression=col("compression", np.float64),
        overlap_dp=col("overlap_dp", np.bool_), overlap_tp=col("overlap_tp", np.bool_),
        overlap_pp=col("overlap_pp", np.bool_), flash=col("flash_attention", np.bool_),
        gpipe=np.array([e.schedule == "gpipe" for e in executions]),
        clock=col("clock", np.float64),
        cap_w=np.array([np.inf if e.power_cap_w is None else e.power_cap_w
                        for e in executions]),
        cp=col("cp", np.int64), grad_fusion=col("grad_accum_fusion", np.bool_),
        fp32_grads=col("fp32_grads", np.bool_),
        overlap_tp_bwd=col("overlap_tp_bwd", np.bool_),
        balance=col("pp_balance", np.bool_) & (col("pp", np.int64) > 1),
        dp_every_mb=col("dp_every_microbatch", np.bool_),
        param_overlap=col("overlap_param_gather", np.bool_),
        recipe=np.array([CAST_RECIPES.index(recipe_name(e.precision, e.fp8_recipe))
                         for e in executions], dtype=np.int64),
        eager=~col("fused_elementwise", np.bool_),
        fsdp1=col("fsdp1_flat_grads", np.bool_),
        ep_overlap=col("ep_overlap", np.bool_),
        ep_dualpipe=np.array([e.ep_overlap_schedule == "dualpipe" for e in executions],
                             dtype=np.bool_),
        connections=col("cuda_max_connections", np.int64),
        moe_sync=np.array([e.moe_dispatcher in ("alltoall", "flex") for e in executions],
                          dtype=np.bool_),
        moe_sort=np.array([e.moe_dispatcher == "alltoall" for e in executions], dtype=np.bool_),
        hybridep_sms=col("hybridep_sms", np.int64),
        etp=np.array([e.expert_tp for e in executions], dtype=np.int64),
        domain=col("nvlink_domain", np.int64),
        adam=np.array([OPTIMIZERS.index(e.optimizer) for e in executions], dtype=np.int64),
    )


def result_from_arrays(out: dict[str, Any], i: int, ex: Execution, system: SystemSpec,
                       train_tokens: float, tokens_per_step: float) -> dict[str, Any]:
    """The contract's dict for row ``i`` of :func:`step_arrays`' output."""
    def v(k: str) -> float:
        return float(out[k][i])

    step = v("step_time_s")
    return {
        "step_time_s": step,
        "mfu": v("mfu"),
        "hfu": v("hfu"),
        "tokens_per_s": v("tokens_per_s"),
        "cards": int(v("cards")),
        "micro_batches": int(v("micro_batches")),
        "memory_gib_per_card": v("mem_total"),
        "memory": {
            "weights": v("mem_weights"), "gradients": v("mem_gradients"),
            "optimizer": v("mem_optimizer"), "activations": v("mem_activations"),
            "reserve": MEMORY_RESERVE_GIB, "total": v("mem_total"), "hbm": system.hbm_gib,
        },
        "fits": v("mem_total") <= system.hbm_gib,
        "energy_j_per_step": v("energy_j_per_step"),
        "energy_j_per_token": v("energy_j_per_token"),
        "cost_per_step": v("cost_per_step"),
        "power": {"card_w": v("card_power_w"), "facility_w": v("facility_power_w"),
                  "utilisation": v("utilisation"), "clock": v("clock"),
                  "by_class_s": {"compute": v("energy_compute_s"),
                                 "memory_bound": v("energy_memory_s"),
                                 "comm": v("energy_comm_s"),
                                 "idle": max(step - v("energy_compute_s") - v("energy_memory_s")
                                             - v("energy_comm_s"), 0.0)}},
        "breakdown": {k: v(k) for k in BREAKDOWN},
        "ops": {k: v(f"op_{k}") for k in OP_CLASSES},
        "exposed_comm": {"tp": v("tp_comm"), "cp": v("cp_comm"), "ep": v("ep_exposed"),
                         "pp": v("pp_p2p"), "dp": v("dp_exposed")},
        "layer": {"forward": v("layer_forward_s"), "backward": v("layer_backward_s"),
                  "recompute": v("layer_recompute_s")},
        "bubble": {
            "fraction": v("bubble_fraction"),
            "utilisation": 1.0 / (1.0 + v("bubble_fraction")),
            "articles_formula": articles_utilisation(ex.pp, max(ex.micro_batches, 1)),
        },
        "model_flops_per_step": v("model_flops_per_step"),
        "train_tokens": train_tokens,
        "days_to_train": train_tokens / tokens_per_step * step / 86400.0,
    }


def evaluate(model: ModelSpec, system: SystemSpec, execution: Execution, *,
             train_tokens: float | None = None, comm: CommModel | None = None) -> StepResult:
    """Price one configuration (see :mod:`simulation.training.core`).

    ``train_tokens`` defaults to 20 tokens per parameter (Hoffmann et al.
    2022, the Chinchilla-optimal budget) for ``days_to_train``.
    """
    reason = shape_problem(model, execution)
    if reason is not None:
        raise TrainingInputError(*reason)
    if execution.cards > system.cards:
        raise TrainingInputError("cards", f"{execution.cards} cards but the system has "
                                 f"{system.cards}")
    if system.peak(execution.precision) <= 0:
        offered = ", ".join(p for p in PRECISIONS if system.peak(p) > 0)
        raise TrainingInputError("precision", f"{system.accelerator} has no "
                                 f"{execution.precision} peak (choose from {offered})")
    if (execution.precision == "fp8" and execution.fp8_recipe == "mx"
            and not system.block_scaled_mma):
        raise TrainingInputError("fp8_recipe", f"{system.accelerator} has no block-scaled "
                                 "tensor cores for MXFP8 (choose from delayed, current, block)")
    system = with_scale_up_domain(system, execution.nvlink_domain, "nvlink_domain")
    if comm is None or comm.system.scale_up_domain < system.scale_up_domain:
        comm = CommModel(system)  # its scale-up mesh must hold the run's domain
    batch = batch_of([execution])
    out = step_arrays(model, system, batch, comm, MEMORY_RESERVE_GIB)
    tokens = float(train_tokens) if train_tokens else 20.0 * model.params
    values = result_from_arrays(out, 0, execution, system, tokens,
                                execution.global_batch * model.seq_len)
    values["dvfs"] = stage_clock_plan(model, system, execution, out)
    values["layer_ops"] = layer_ops(model, system, batch, host=(
        float(out["layer_host_f"][0]), float(out["layer_host_b"][0])))
    values["precisions"] = precision_comparison(model, system, execution, comm)
    notes = []
    if not values["fits"]:
        notes.append(f"needs {values['memory_gib_per_card']:.1f} GiB per card, the card has "
                     f"{system.hbm_gib:g}")
    return StepResult(values, execution, notes)


def precision_comparison(model: ModelSpec, system: SystemSpec, execution: Execution,
                         comm: CommModel) -> dict[str, dict[str, Any]]:
    """The same layout at every GEMM precision the card offers (BF16, FP8, FP4).

    FP8 keeps the run's scaling recipe when the card supports it (``mx`` needs
    block-scaled tensor cores), else ``delayed``; FP4 is NVFP4. Each entry: the step
    time, tokens/s, whether it fits, the op classes (:data:`OP_CLASSES`) and the
    speed-up over BF16 — the FP8 gain as the model sees it, GEMMs only sped up.
    """
    from dataclasses import replace

    options = [p for p in ("bf16", "fp8", "fp4") if system.peak(p) > 0]
    recipe = execution.fp8_recipe if (execution.fp8_recipe != "mx"
                                      or system.block_scaled_mma) else "delayed"
    runs = [replace(execution, precision=p, fp8_recipe=recipe) for p in options]
    out = step_arrays(model, system, batch_of(runs), comm, MEMORY_RESERVE_GIB)
    base = float(out["step_time_s"][0])
    return {p: {"step_time_s": float(out["step_time_s"][i]),
                "tokens_per_s": float(out["tokens_per_s"][i]),
                "fits": bool(out["mem_total"][i] <= system.hbm_gib),
                "speedup_over_bf16": base / float(out["step_time_s"][i]),
                "ops": {k: float(out[f"op_{k}"][i]) for k in OP_CLASSES}}
            for i, p in enumerate(options)}


def stage_clock_plan(model: ModelSpec, system: SystemSpec, ex: Execution,
                     out: dict[str, Any]) -> dict[str, Any]:
    """Per-stage clocks at 0 % and 1 % slowdown and the energy each saves.

    Stage i holds its share of the layers (the first stages one more when
    they do not divide); the last also the output layer. Only compute scales
    with the clock. Energy compared: the cards' own energy over the step.
    """
    p = ex.pp
    layers = np.full(p, model.layers // p, dtype=np.float64)
    layers[: model.layers % p] += 1
    crit = float(np.ceil(model.layers / p))
    comp = float(out["stage_compute_s"][0]) * layers / crit
    fixed = float(out["stage_fixed_s"][0]) * layers / crit
    comp[-1] += float(out["stage_logit_s"][0])  # the last stage carries the output layer
    step = float(out["step_time_s"][0])
    base_clock = float(out["clock"][0])
    idle, tdp, curve = system.idle_w, system.tdp_w, system.clock_power
    min_clock = curve[0][0]
    hbm_w = hbm_power_w(system.hbm_tbps * 1e12 * system.memory_efficiency, tdp, idle)
    comm_s = np.full(p, float(out["energy_comm_s"][0]))

    def energy(clocks: np.ndarray, stretch: float) -> float:
        # each stage's op mix (:mod:`.energy`): compute at its clock, memory-bound ops
        # at HBM power + their SM share, the step's exposed communication
        t = np.full(p, step + stretch)
        watts = op_mix_power(comp / clocks, fixed, comm_s, t, clocks, tdp, idle, curve,
                             hbm_w, system.memory_sm_activity, system.comm_activity)
        return float(np.sum(watts * t))

    base = energy(np.full(p, base_clock), 0.0)
    res: dict[str, Any] = {"stages": p}
    for name, slow in (("no_slowdown", 0.0), ("one_percent", 0.01)):
        clocks = plan_stage_clocks(comp / base_clock, fixed, slow, min_clock) * base_clock
        clocks = np.maximum(clocks, min_clock)
        crit_time = float(np.max(comp / base_clock + fixed))
        stretch = float(np.max(comp / clocks + fixed)) - crit_time
        e = energy(clocks, stretch)
        res[name] = {
            "clocks": [round(float(c), 4) for c in clocks],
            "slowdown": stretch / step,
            "card_energy_saved_fraction": 1 - e / base if base > 0 else 0.0,
        }
    return res
