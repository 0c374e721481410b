"""Hopper and Blackwell runs with published layouts, and the model's figure for each.

The A100-era table (:mod:`.fidelity`) checks the model on BF16/FP16 Megatron-LM
runs; this one on today's hardware and precision recipes. Every row is a
published pre-training throughput (tokens per second per GPU, the measured
figure; the "model TFLOP/s" column of the same tables is derived from it) with the
layout the publisher states. The source is NVIDIA's Megatron-Bridge performance
summary (NVIDIA-NeMo/Megatron-Bridge, ``docs/performance-summary.md`` for the
25.11 container and ``docs/performance-summary-archive.md`` for 26.02): DGX-H100,
DGX-B200 and GB200 / GB300 NVL72 systems, FP8 with current scaling ("FP8-CS",
:mod:`.recipes` ``current``), MXFP8 and NVFP4, synthetic data, GBS / MBS / TP /
PP / CP / VP / FSDP as listed. What those recipes set and the table does not
list is taken from Megatron-Bridge's performance recipes and Megatron-Core's
defaults, the same for every row (:data:`MEGATRON_CORE`): the distributed
optimizer (ZeRO-1; FSDP rows ZeRO-3), sequence parallelism with TP, TP
communication overlapped with the GEMMs (Transformer Engine userbuffers),
overlapped gradient reduce-scatter and parameter all-gather, fused gradient
accumulation, flash attention. Recomputation is not listed: it is chosen by
:mod:`.fidelity`'s rule (the fastest setting that fits HBM).

The Llama 3 405B rows of :mod:`.fidelity` (Dubey et al. 2024, Table 4: H100,
BF16) are the second, independent source on Hopper; :func:`validation_table`
includes them (MFU there, converted to the same relative error). The third is
PyTorch's torchtitan (its eager FSDP2 rows, :data:`TORCHTITAN`), the fourth
MosaicML's llm-foundry benchmark tables (MPT on H100, :data:`LLM_FOUNDRY`, shapes in
:data:`VALIDATION_MODELS`).

Accelerator figures are the catalogue's (:data:`ACCELERATORS`, each with its
datasheet), typed here so the check does not depend on the fixture file.

Checks kept out of :func:`validation_table` and its means: the MoE rows of a later
release (:data:`RELEASE_RUNS`) and of the 26.02 table (:data:`MOE_2602_RUNS`), the
llm-foundry sweep on A100s (:data:`LLM_FOUNDRY_A100_RUNS`: the MPT rows' stack on the
card the model's GEMM rate was calibrated on) and NeMo 24.07's H100 FP8 rows
(:data:`NEMO_2407_RUNS`: the layouts issue 23 names).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .execution import execution_from_params
from .fidelity import ACCELERATORS as A100_ERA
from .fidelity import PUBLISHED_RUNS, PublishedRun, engineer_choice
from .models import MODELS, ModelSpec
from .step import evaluate
from .system import system_for_accelerator

__all__ = ["ACCELERATORS", "DROPLESS_REGRESSION", "FULL_ITERATION_MOE", "LLM_FOUNDRY",
           "LLM_FOUNDRY_A100_RUNS", "MEGATRON_BRIDGE", "MEGATRON_CORE", "MODERN_RUNS",
           "MOE_2602_RUNS", "ModernRun", "NEMO_2407_RUNS",
           "RELEASE_RUNS", "VALIDATION_MODELS", "llm_foundry_a100_table", "moe_2602_table",
           "nemo_2407_table", "release_table", "validation_table"]

ACCELERATORS: dict[str, dict[str, Any]] = {
    "h100-sxm5-80gb": A100_ERA["h100-sxm5-80gb"],
    "b200-sxm-180gb": {
        "slug": "b200-sxm-180gb", "bf16_tflops": 2250, "fp8_tflops": 4500, "fp4_tflops": 9000,
        "fp32_tflops": 75, "tf32_tflops": 1100, "hbm_gib": 180, "hbm_tbps": 7.7, "tdp_w": 1000,
        "idle_w": 120, "scaleup_gbps": 1800, "nvlink_domain_cards": 8},
    "gb200-186gb": {
        "slug": "gb200-186gb", "bf16_tflops": 2500, "fp8_tflops": 5000, "fp4_tflops": 10000,
        "fp32_tflops": 80, "tf32_tflops": 1250, "hbm_gib": 186, "hbm_tbps": 8.0, "tdp_w": 1200,
        "idle_w": 150, "scaleup_gbps": 1800, "nvlink_domain_cards": 72},
    "gb300-288gb": {
        "slug": "gb300-288gb", "bf16_tflops": 2500, "fp8_tflops": 5000, "fp4_tflops": 15000,
        "fp32_tflops": 80, "tf32_tflops": 1250, "hbm_gib": 279, "hbm_tbps": 8.0, "tdp_w": 1400,
        "idle_w": 150, "scaleup_gbps": 1800, "nvlink_domain_cards": 72},
}
"""Dense datasheet figures: H100 (the catalogue row); NVIDIA HGX B200 and GB200 NVL72
datasheets (per GPU: BF16 2.25 / 2.5 PFLOP/s, FP8 4.5 / 5, FP4 9 / 10 dense — the
datasheets' "sparse" figures halved —, 180 GB HBM3e at 7.7 TB/s on HGX B200, 186 GB
at 8 TB/s on GB200, NVLink 5 at 1.8 TB/s, 1,000 / 1,200 W); GB300 NVL72 datasheet
(FP4 15 PFLOP/s dense for Blackwell Ultra, 288 GB HBM3e = 279 GiB, 1,400 W).
NVL72 parts: 72 cards in one NVLink domain."""

MEGATRON_CORE: dict[str, Any] = {
    "zero": 1, "overlap_dp": True, "overlap_pp": True, "overlap_tp_bwd": True,
    "grad_accum_fusion": True, "flash_attention": True}
"""Megatron-Core settings of the Megatron-Bridge performance recipes (module docstring)."""

MEGATRON_BRIDGE = ("NVIDIA Megatron-Bridge performance summary "
                   "(NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md, {release} "
                   "NeMo container), {system}")
TORCHTITAN_SOURCE = ("Liang et al. 2025, TorchTitan (ICLR 2025) / pytorch/torchtitan "
                     "docs/performance.md, {release}: Llama 3.1 8B, FSDP2, local batch 2, "
                     "selective activation checkpointing, {system}")
TORCHTITAN: tuple[tuple[str, Any], ...] = (
    ("recompute", "op"), ("fp32_grads", True), ("power_cap_w", 500.0),
    ("fused_elementwise", False), ("optimizer", "foreach"))
"""What torchtitan's page states: selective activation checkpointing (op-level, the
``selective_ac_option = "op"`` of its Llama 3.1 8B config: ``recompute`` ``op``,
:func:`.layer.op_sac_mms`), FSDP2 (ZeRO-3,
prefetching: ``overlap_dp``) reducing gradients in FP32 (torchtitan's default
``mixed_precision_reduce``), "the default 500W power limit" (priced by the DVFS model,
:mod:`.energy`), no ``torch.compile`` (its eager RMSNorm, rotary and SwiGLU:
``fused_elementwise`` off, :data:`.layer.EAGER_ELEMENTS`, autograd's backward kernels
:data:`.layer.EAGER_BWD_ELEMENTS`); PyTorch SDPA's FlashAttention-2 kernel;
``torch.optim.AdamW`` with ``foreach=True`` (``torchtitan/optimizer.py``: ``"foreach": not
fused``, ``--optimizer.fused`` off by default: ``optimizer`` ``foreach``)."""
LLM_FOUNDRY_SOURCE = (
    "MosaicML llm-foundry, scripts/train/benchmarking/README.md (commit 061f2c7c), "
    "{release}: MPT, Composer FSDP FULL_SHARD, {system}")
LLM_FOUNDRY: tuple[tuple[str, Any], ...] = (("fp32_grads", True), ("recompute", "none"),
                                            ("optimizer", "loop"), ("fsdp1_flat_grads", True),
                                            ("dp_every_microbatch", True))
"""What llm-foundry's benchmark table states or its scripts set: FSDP ``FULL_SHARD``
(ZeRO-3, prefetching), ``MP Mode`` DEFAULT (Composer's FSDP mixed precision: BF16
compute, gradients reduced in FP32), activation checkpointing as the table's column
(``recompute`` full when True), flash attention (``attn_impl: triton``), fused
``low_precision_layernorm`` and one-kernel GeLU (``submit_benchmarks.py``); ``amp_fp8``
runs the linears in Transformer Engine with its default delayed scaling; the yamls'
``optimizer: name: decoupled_adamw``, Composer's ``DecoupledAdamW``, a Python loop of
per-parameter ops (``optimizer`` ``loop``, :data:`.core.ADAM_IMPL_BYTES`). Composer 0.16's
FSDP is PyTorch's FSDP1 (torch 2.0.1: ``fsdp1_flat_grads``, its gradient passes
:data:`.core.FSDP1_GRAD_BYTES`), and its trainer enters ``no_sync`` only for
``DistributedDataParallel`` models (``composer/trainer/trainer.py`` at v0.16.3,
``_train_microbatches`` / ``_train_microbatch``), so an FSDP model reduce-scatters its
gradients after every micro-batch (``dp_every_microbatch``)."""


def _mpt(name: str, layers: int, hidden: int, heads: int) -> ModelSpec:
    """An MPT model of llm-foundry's benchmark yamls (``scripts/train/yamls/pretrain``):
    GeLU MLP of 4·d_model, no biases, tied embeddings, learned positions (MPT's default
    ``learned_pos_emb``: no rotary pass), no dropout, vocabulary 50,368, sequence 2,048."""
    return ModelSpec(name, layers, hidden, heads, heads, 4 * hidden, "gelu", 2048, 50368,
                     bias=False, tied_embeddings=True, learned_positions=True,
                     dropout=False, source=LLM_FOUNDRY_SOURCE.format(release="",
                                                                      system="MPT yamls"))


VALIDATION_MODELS: dict[str, ModelSpec] = {
    "mpt-760m": _mpt("mpt-760m", 24, 1536, 12),
    "mpt-1b": _mpt("mpt-1b", 24, 2048, 16),
    "mpt-3b": _mpt("mpt-3b", 32, 2560, 20),
    "mpt-7b": _mpt("mpt-7b", 32, 4096, 32),
    "mpt-13b": _mpt("mpt-13b", 40, 5120, 40),
    "mpt-30b": _mpt("mpt-30b", 48, 7168, 56),
}
"""Shapes only the validation uses (not in the catalogue): MPT's d_model / n_heads /
n_layers; their parameter counts match the table's ``NumParams`` column within 0.1 %
(``tests/simulation/training/test_recipes.py``)."""


def _model(name: str) -> ModelSpec:
    return MODELS[name] if name in MODELS else VALIDATION_MODELS[name]


DEEPSEEK_SOURCE = ("DeepSeek-AI 2024, DeepSeek-V3 Technical Report (arXiv 2412.19437): "
                   "180K H800 GPU hours per trillion tokens on 2,048 H800 (Table 1, §3), "
                   "PP 16, EP 64 over 8 nodes, ZeRO-1, DualPipe, FP8 1×128 / 128×128 "
                   "(§3.2-3.3), batch 15,360 × 4,096 tokens (§4.2)")
DEEPSEEK_TRAINING: tuple[tuple[str, Any], ...] = (
    ("fp8_recipe", "block"), ("ep_overlap", True), ("ep_overlap_schedule", "dualpipe"),
    ("moe_dispatcher", "flex"))
"""What DeepSeek-V3's report states beyond the layout: FP8 with 1×128 activation and
128×128 weight tiles (§3.3.1, :mod:`.recipes` ``block``); DualPipe overlaps the
dispatch and combine all-to-alls with the paired micro-batch's compute (§3.2.1,
``ep_overlap``; the report: "both all-to-all and PP communication can be fully hidden",
``ep_overlap_schedule`` ``dualpipe``: under the whole paired chunk). Its all-to-all is
its own dispatch and combine kernels (§3.2.2), not Megatron-Core's all-to-all dispatcher
and its sort by local expert: ``moe_dispatcher`` ``flex`` (the host synchronisation kept,
as before). The micro-batch is
not stated: 1 sequence (the model's assumption). Not priced: the multi-token-prediction
module (D = 1, §2.2), in the measured hours; DualPipe's smaller bubble; node-limited
routing (≤ 4 nodes per token)."""
QWEN3_H100_V2: tuple[tuple[str, Any], ...] = (("etp", 1), ("ep_overlap", True))
"""Megatron-Bridge ``scripts/performance/configs/qwen/qwen3_workload_base_configs.py``,
``QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_FP8_CS_V2`` (GBS 8192): expert TP 1, the
``alltoall`` dispatcher and ``moe_a2a_overlap=True`` (the all-to-all hidden under the
other micro-batch's compute: ``ep_overlap``). The earlier preset file
(``configs/qwen3/workload_base_configs.py``, GBS 2048) sets expert TP 1 and no overlap."""
HYBRIDEP_2511: tuple[tuple[str, Any], ...] = (("moe_dispatcher", "flex"), ("hybridep_sms", 16))
"""Megatron-Bridge's 25.11 GB200 and GB300 Qwen3 (30B-A3B, 235B-A22B) and DeepSeek-V3 presets
set ``moe_flex_dispatcher_backend="hybridep"`` (``scripts/performance/configs/qwen/
qwen3_workload_base_configs.py`` and ``deepseek/deepseek_workload_base_configs.py`` at
commit 267f8bb, 2025-12-03; ``configs/qwen3/`` and ``configs/deepseek/`` at tag ``v0.2.0``),
which ``apply_flex_dispatcher_backend`` turns into ``moe_token_dispatcher_type = "flex"``:
Megatron-Core's flex dispatcher (``moe_dispatcher`` ``flex``), whose HybridEP dispatch
writes the received tokens expert-major, so the all-to-all dispatcher's sort by local
expert (:func:`.layer.moe_sort_elements`) is not run, and whose all-to-alls are HybridEP's
kernels on Megatron-Core's default 16 SMs (``hybridep_sms``: each token sent once per
destination rank, at HybridEP's measured GB200 bandwidth,
:func:`.dispatch.hybridep_layer_s`). Their B200 and H100 presets and every GPT-OSS preset
set no flex backend (the ``alltoall`` default)."""
MXFP8_PARAM_GATHER_2511: tuple[tuple[str, Any], ...] = (("overlap_param_gather", False),)
"""Megatron-Bridge v0.2.0 (the 25.11 container) turns the parameter all-gather's overlap off
in its MXFP8 recipes of Llama 3 70B and Llama 3.1 405B (GB300, GB200, B200), DeepSeek-V3
(GB300, GB200) and Qwen3 235B-A22B (B200): ``if precision == "fp8_mx":  # keeping this
eanbled causes NaN grad norm`` → ``cfg.ddp.overlap_param_gather = False``
(``scripts/performance/configs/llama31/llama31_llm_pretrain.py``,
``llama3/llama3_llm_pretrain.py``, ``deepseek/deepseek_llm_pretrain.py``,
``qwen3/qwen3_llm_pretrain.py``); Megatron-Core then all-gathers the parameters
synchronously after the optimizer step (``Execution.overlap_param_gather``). Its Llama 3
8B and Qwen3 30B-A3B recipes keep it on, and v0.3.0 (26.02) drops the override (it turns
off only ``overlap_param_gather_with_optimizer_step`` for MXFP8,
``scripts/performance/utils/overrides.py``)."""
QWEN3_B200_2511: tuple[tuple[str, Any], ...] = (("ep_overlap", True),)
"""The 25.11 B200 Qwen3 235B MXFP8 run had the all-to-all overlap on: Megatron-Bridge pull
request 1760 (merged 2025-12-17), "Update Qwen3 235B A22B B200 performance recipe to
address performance regression from 25.09. MXFP8 step time improved from 20.1s to 16.9s
[...] Disable moe_a2a_overlap due to CPU overhead for BF16 and MXFP8. Disable VP for
mxfp8" — 1,024 × 4,096 tokens / 64 GPUs / 20.1 s = 3,261 tokens/s/GPU, the table's 3,269;
the release's preset (tag ``v0.2.0``, ``QWEN3_235B_A22B_B200_FP8_CS_BASE_CONFIG``, which
MXFP8 reuses) sets ``moe_a2a_overlap=True``."""
QWEN3_B200_REGRESSION = (
    "NVIDIA-NeMo/Megatron-Bridge pull request 1760: the 25.11 recipe's MXFP8 step (20.1 s) "
    "is a \"performance regression from 25.09\" (25.09, same layout, MXFP8: 4,275 "
    "tokens/s/GPU); 16.9 s with the all-to-all overlap and VP off")
"""The publisher's statement that the 25.11 B200 Qwen3 235B figure is a regression."""
H800: tuple[tuple[str, Any], ...] = (("scaleup_gbps", 400.0),)
"""H800 SXM: the H100 SXM die, clocks and HBM with NVLink cut to 400 GB/s (NVIDIA H800
product brief); the report's 160 GB/s NVLink / 50 GB/s IB (§3.2.2) are achieved
per-direction figures."""


GRAND_TETON: tuple[tuple[str, Any], ...] = (("hbm_gib", 95.0), ("hbm_tbps", 2.4))
"""Meta's Grand Teton H100: "96GB HBM2e with 2.4 TB/sec peak memory bandwidth" (95 GiB
usable, torchtitan's page); the SXM compute figures (the page uses them for MFU)."""


@dataclass(frozen=True)
class ModernRun:
    """One published run: model, accelerator, layout, tokens/s/GPU measured."""

    model: str
    accelerator: str
    gpus: int
    precision: str
    gbs: int
    mbs: int
    tp: int = 1
    pp: int = 1
    cp: int = 1
    vp: int = 1
    fsdp: bool = False
    tokens_per_gpu: float = 0.0
    release: str = "25.11"
    system: str = "DGX-H100"
    ep: int = 1
    seq: int = 0
    """Sequence length when not the catalogue model's."""
    settings: tuple[tuple[str, Any], ...] = ()
    """Layout settings the source states beyond the table's columns (override
    :data:`MEGATRON_CORE`)."""
    figures: tuple[tuple[str, Any], ...] = ()
    """Accelerator figures that differ from :data:`ACCELERATORS` (the source's part)."""
    source: str = MEGATRON_BRIDGE
    regression: str = ""
    """The publisher's own statement that this figure is a software regression (kept in
    the table and its means; :data:`DROPLESS_REGRESSION`)."""

    @property
    def name(self) -> str:
        """A readable row name."""
        lay = f"TP{self.tp} PP{self.pp}" + (f" CP{self.cp}" if self.cp > 1 else "") + (
            f" VP{self.vp}" if self.vp > 1 else "") + (f" EP{self.ep}" if self.ep > 1 else "") + (
            f" ETP{dict(self.settings)['etp']}" if "etp" in dict(self.settings) else "") + (
            " FSDP" if self.fsdp else "") + (f", seq {self.seq}" if self.seq else "")
        return (f"{self.model} on {self.gpus} {self.system.removeprefix('DGX-')}, "
                f"{self.precision}, {lay}, GBS {self.gbs}"
                + (f" ({self.release})" if self.release != "25.11" else ""))

    def layout(self) -> dict[str, Any]:
        """The execution parameters (the published ones + :data:`MEGATRON_CORE`)."""
        prec, recipe = {"FP8-CS": ("fp8", "current"), "FP8-MX": ("fp8", "mx"),
                        "FP8-DS": ("fp8", "delayed"), "FP8-block": ("fp8", "block"),
                        "NVFP4": ("fp4", "delayed"), "BF16": ("bf16", "delayed")}[
            self.precision]
        out: dict[str, Any] = {
            **MEGATRON_CORE, "tp": self.tp, "pp": self.pp, "cp": self.cp, "vpp": self.vp,
            "global_batch": self.gbs, "micro_batch": self.mbs, "precision": prec, "ep": self.ep,
            "fp8_recipe": recipe, "sequence_parallel": self.tp > 1,
            "overlap_tp": False,
            # Llama 3.1 405B: the embedding and the loss take a layer's slot each
            # (Megatron-Bridge's account_for_{embedding,loss}_in_pipeline_split)
            "pp_balance": self.pp > 1 and _model(self.model).layers % (self.pp * self.vp) != 0}
        if self.fsdp:
            out["zero"] = 3
        out.update(dict(self.settings))
        return out


DROPLESS_REGRESSION = (
    "NVIDIA-NeMo/Megatron-Bridge issue 1998 (2026-01-20, labels performance/release): "
    "\"We have 2X slower performance in QWEN3 30B on H100 and B200 with the dropless "
    "schedule compared to the token-drop schedule. Basically, the perf in 25.11 is 2X slower "
    "than 25.09\"; the 25.09 table's same layouts, token-drop: {before:,} tokens/s/GPU")
"""The two 25.11 Qwen3 30B-A3B rows their publisher calls a 2× regression, with the 25.09
figure of the same layout (``docs/performance-summary-archive.md``, 25.09: H100 10,494,
B200 18,066)."""


def _h(model: str, gpus: int, gbs: int, mbs: int, tok: float, release: str = "25.11",
       **lay: Any) -> ModernRun:
    return ModernRun(model, "h100-sxm5-80gb", gpus, "FP8-CS", gbs, mbs, tokens_per_gpu=tok,
                     release=release, **lay)


MODERN_RUNS: tuple[ModernRun, ...] = (
    _h("llama3-8b", 8, 128, 1, 14451, fsdp=True),
    _h("llama3-70b", 64, 128, 1, 1602, tp=4, pp=8, vp=5),
    _h("llama3-405b", 1024, 512, 1, 292, tp=8, pp=8, cp=2, vp=8),
    _h("llama3-70b", 64, 256, 1, 1621, "26.02", tp=4, pp=8, vp=5),
    _h("llama3-405b", 1024, 1536, 1, 311, "26.02", tp=8, pp=8, cp=2, vp=8),
    ModernRun("llama3-8b", "b200-sxm-180gb", 8, "FP8-CS", 128, 2, tokens_per_gpu=30624,
              system="DGX-B200"),
    ModernRun("llama3-8b", "b200-sxm-180gb", 8, "FP8-MX", 128, 2, tokens_per_gpu=29521,
              system="DGX-B200"),
    ModernRun("llama3-405b", "b200-sxm-180gb", 128, "FP8-CS", 64, 1, 4, 8, 2, 8,
              tokens_per_gpu=661, system="DGX-B200"),
    ModernRun("llama3-405b", "b200-sxm-180gb", 128, "FP8-MX", 64, 1, 4, 8, 2, 8,
              tokens_per_gpu=624, system="DGX-B200", settings=MXFP8_PARAM_GATHER_2511),
    ModernRun("llama3-8b", "gb200-186gb", 8, "FP8-CS", 128, 2, tokens_per_gpu=31508,
              system="GB200"),
    ModernRun("llama3-70b", "gb200-186gb", 64, "FP8-CS", 256, 2, fsdp=True,
              tokens_per_gpu=4312, system="GB200"),
    ModernRun("llama3-405b", "gb200-186gb", 256, "FP8-CS", 1536, 1, 4, 16, 1, 4,
              tokens_per_gpu=813, system="GB200"),
    ModernRun("llama3-70b", "gb200-186gb", 64, "NVFP4", 256, 1, 2, 4, 1, 5,
              tokens_per_gpu=4458, release="26.02", system="GB200"),
    ModernRun("llama3-70b", "gb200-186gb", 64, "FP8-MX", 256, 1, 2, 4, 1, 5,
              tokens_per_gpu=3613, release="26.02", system="GB200"),
    ModernRun("llama3-405b", "gb200-186gb", 256, "NVFP4", 1536, 1, 4, 16, 1, 8,
              tokens_per_gpu=1076, release="26.02", system="GB200"),
    ModernRun("llama3-8b", "gb300-288gb", 8, "FP8-CS", 128, 2, tokens_per_gpu=37556,
              system="GB300"),
    ModernRun("llama3-70b", "gb300-288gb", 64, "NVFP4", 256, 1, 1, 4, 1, 5,
              tokens_per_gpu=6798, release="26.02", system="GB300"),
    # the rest of the 25.11 Llama rows (the FP8-MX figures in parentheses, GB300 70B, 405B)
    ModernRun("llama3-8b", "gb200-186gb", 8, "FP8-MX", 128, 2, tokens_per_gpu=29789,
              system="GB200"),
    ModernRun("llama3-8b", "gb300-288gb", 8, "FP8-MX", 128, 2, tokens_per_gpu=36108,
              system="GB300"),
    ModernRun("llama3-70b", "gb300-288gb", 64, "FP8-CS", 256, 2, fsdp=True,
              tokens_per_gpu=4520, system="GB300"),
    ModernRun("llama3-405b", "gb300-288gb", 256, "FP8-CS", 1536, 1, 2, 8, 2, 4,
              tokens_per_gpu=999, system="GB300"),
    # and the 26.02 rows whose layout or precision the 25.11 table does not have
    ModernRun("llama3-70b", "gb300-288gb", 64, "FP8-MX", 256, 1, 1, 4, 1, 5,
              tokens_per_gpu=4596, release="26.02", system="GB300"),
    ModernRun("llama3-405b", "gb200-186gb", 256, "FP8-MX", 1536, 1, 4, 16, 1, 8,
              tokens_per_gpu=786, release="26.02", system="GB200"),
    ModernRun("llama3-405b", "gb300-288gb", 256, "NVFP4", 1536, 1, 4, 8, 1, 4,
              tokens_per_gpu=1333, release="26.02", system="GB300"),
    ModernRun("llama3-405b", "gb300-288gb", 256, "FP8-MX", 1536, 1, 2, 8, 2, 4,
              tokens_per_gpu=931, release="26.02", system="GB300"),
    ModernRun("llama3-405b", "gb300-288gb", 256, "FP8-CS", 1536, 1, 4, 8, 1, 4,
              tokens_per_gpu=988, release="26.02", system="GB300"),
    # mixture of experts (the tables: token distribution force-balanced, dropless)
    _h("qwen3-30b-a3b", 16, 512, 2, 5275, pp=2, vp=24, ep=8,
       regression=DROPLESS_REGRESSION.format(before=10494)),
    ModernRun("gpt-oss-120b", "h100-sxm5-80gb", 64, "BF16", 512, 4, pp=4, ep=8,
              tokens_per_gpu=5630),
    ModernRun("gpt-oss-120b", "h100-sxm5-80gb", 64, "BF16", 1280, 1, pp=4, ep=8,
              tokens_per_gpu=5993, release="26.02"),
    ModernRun("gpt-oss-120b", "b200-sxm-180gb", 64, "BF16", 512, 4, ep=8,
              tokens_per_gpu=8213, system="DGX-B200"),
    ModernRun("qwen3-30b-a3b", "b200-sxm-180gb", 8, "FP8-MX", 512, 1, ep=8,
              tokens_per_gpu=9299, system="DGX-B200",
              regression=DROPLESS_REGRESSION.format(before=18066)),
    ModernRun("qwen3-235b-a22b", "b200-sxm-180gb", 64, "FP8-MX", 1024, 1, pp=8, vp=2, ep=8,
              tokens_per_gpu=3269, system="DGX-B200",
              settings=QWEN3_B200_2511 + MXFP8_PARAM_GATHER_2511,
              regression=QWEN3_B200_REGRESSION),
    ModernRun("gpt-oss-120b", "gb200-186gb", 64, "BF16", 1280, 1, ep=64, seq=8192,
              tokens_per_gpu=15876, system="GB200"),
    ModernRun("qwen3-30b-a3b", "gb200-186gb", 8, "FP8-MX", 512, 4, ep=8,
              tokens_per_gpu=23766, system="GB200",
              settings=HYBRIDEP_2511),
    ModernRun("qwen3-235b-a22b", "gb200-186gb", 256, "BF16", 8192, 1, pp=8, vp=3, ep=32,
              tokens_per_gpu=4916, system="GB200",
              settings=HYBRIDEP_2511),
    ModernRun("qwen3-30b-a3b", "gb300-288gb", 8, "FP8-MX", 512, 4, ep=8,
              tokens_per_gpu=28934, system="GB300",
              settings=HYBRIDEP_2511),
    ModernRun("gpt-oss-120b", "gb300-288gb", 64, "BF16", 1280, 2, ep=64, seq=8192,
              tokens_per_gpu=18347, system="GB300"),
    ModernRun("qwen3-235b-a22b", "gb300-288gb", 256, "BF16", 8192, 2, pp=4, vp=12, ep=16,
              tokens_per_gpu=6131, system="GB300",
              settings=HYBRIDEP_2511),
    # expert TP: EP 32 over TP 2 × DP 16, each expert whole on its card (etp 1, the
    # recipes' expert_tensor_parallel_size); the GBS-8192 ("V2") H100 recipe also sets
    # moe_a2a_overlap (:data:`QWEN3_H100_V2`), the GBS-2048 preset of before did not
    _h("qwen3-235b-a22b", 256, 2048, 1, 1575, tp=2, pp=8, vp=4, ep=32,
       settings=(("etp", 1),)),
    _h("qwen3-235b-a22b", 256, 8192, 1, 1633, "26.02", tp=2, pp=8, vp=4, ep=32,
       settings=QWEN3_H100_V2),
    # DeepSeek-V3 without its multi-token-prediction module (the 25.11 "w/o MTP" rows;
    # multi-head latent attention, 1 shared + 256 routed experts)
    ModernRun("deepseek-v3", "gb300-288gb", 256, "BF16", 4096, 1, pp=2, vp=4, ep=32,
              tokens_per_gpu=3848, system="GB300",
              settings=HYBRIDEP_2511),
    ModernRun("deepseek-v3", "gb300-288gb", 256, "FP8-MX", 4096, 1, pp=2, vp=4, ep=32,
              tokens_per_gpu=4357, system="GB300",
              settings=HYBRIDEP_2511 + MXFP8_PARAM_GATHER_2511),
    ModernRun("deepseek-v3", "gb200-186gb", 256, "BF16", 4096, 1, pp=4, vp=4, ep=64,
              tokens_per_gpu=3139, system="GB200",
              settings=HYBRIDEP_2511),
    ModernRun("deepseek-v3", "gb200-186gb", 256, "FP8-MX", 4096, 1, pp=8, vp=4, ep=32,
              tokens_per_gpu=4018, system="GB200",
              settings=HYBRIDEP_2511 + MXFP8_PARAM_GATHER_2511),
    # DeepSeek-V3's own pre-training: 10^12 tokens / (180,000 GPU-hours × 3,600 s)
    ModernRun("deepseek-v3", "h100-sxm5-80gb", 2048, "FP8-block", 15360, 1, pp=16, ep=64,
              tokens_per_gpu=1e12 / (180e3 * 3600), release="report", system="H800",
              settings=DEEPSEEK_TRAINING, figures=H800, source=DEEPSEEK_SOURCE),
    # torchtitan (PyTorch), eager FSDP2 rows: the compiled rows fuse ops the model prices
    # one by one, so they are not compared
    ModernRun("llama3-8b", "h100-sxm5-80gb", 8, "BF16", 16, 2, fsdp=True,
              tokens_per_gpu=5762, release="Table 1", system="Grand Teton H100",
              settings=TORCHTITAN, figures=GRAND_TETON, source=TORCHTITAN_SOURCE),
    ModernRun("llama3-8b", "h100-sxm5-80gb", 128, "BF16", 256, 2, fsdp=True,
              tokens_per_gpu=5605, release="Table 3", system="Grand Teton H100",
              settings=TORCHTITAN, figures=GRAND_TETON, source=TORCHTITAN_SOURCE),
    # MosaicML llm-foundry: every H100 row at the yamls' 2,048 tokens on one 8-GPU node
    *(ModernRun(m, "h100-sxm5-80gb", 8, prec, gbs, mb, fsdp=True, tokens_per_gpu=tok,
                release=table, system="H100", source=LLM_FOUNDRY_SOURCE,
                settings=LLM_FOUNDRY + ((("recompute", "full"),) if ckpt else ()))
      for m, prec, gbs, mb, tok, ckpt, table in (
          ("mpt-30b", "BF16", 504, 3, 2002, True, "H100 80GB BF16"),
          ("mpt-13b", "BF16", 16, 2, 4792, False, "H100 80GB BF16"),
          ("mpt-7b", "BF16", 48, 6, 10643, False, "H100 80GB BF16"),
          ("mpt-1b", "BF16", 112, 14, 45455, False, "H100 80GB BF16"),
          ("mpt-760m", "BF16", 384, 24, 63147, False, "H100 80GB BF16"),
          ("mpt-3b", "FP8-DS", 480, 10, 30586, False, "H100 80GB FP8"))),
)
"""Dense pre-training rows of the Megatron-Bridge tables (module docstring): every
Llama 3 row of DGX-H100, DGX-B200, GB200 and GB300 in the 25.11 table (with the FP8-MX
figures it gives in parentheses), and the 26.02 rows with a layout or precision the
25.11 table does not have; then torchtitan's and llm-foundry's rows. Llama 3.1 405B
is priced as ``llama3-405b`` (same shape). MoE rows: Qwen3 30B-A3B, Qwen3 235B-A22B
and GPT-OSS 120B; the H100 Qwen3 235B rows (EP 32 over TP 2 × DP 16) with expert TP 1
(``Execution.etp``); DeepSeek-V3's 25.11 rows "w/o MTP" (the multi-token-prediction
module is not modelled; the B200 row has it); and DeepSeek-V3's own pre-training
(:data:`DEEPSEEK_SOURCE`)."""


FULL_ITERATION_MOE: tuple[tuple[str, Any], ...] = (("moe_dispatcher", "device"),
                                                   ("ep_overlap", True))
"""Megatron-Bridge's 26.08 MXFP8 Qwen3 and DeepSeek-V3 performance recipes
(``src/megatron/bridge/perf_recipes/qwen/common.py`` ``_enable_hybridep_full_iteration_mxfp8``,
``deepseek/common.py`` ``_enable_deepseek_full_iteration_mxfp8``): ``cuda_graph_impl =
"full_iteration"`` over a sync-free MoE (the HybridEP dispatcher and Transformer Engine's
fused grouped MLP, ``NVTE_CUTEDSL_FUSED_GROUPED_MLP``): no host synchronisation
(``moe_dispatcher`` ``device``); ``overlap_moe_expert_parallel_comm = True``
(``ep_overlap``). Not priced: their FP8 attention (``fp8_dot_product_attention``, Qwen3
and the GB300 DeepSeek-V3 recipe), the delayed weight-gradient compute, the paged
activation stash."""


def _r26(model: str, acc: str, gpus: int, gbs: int, mbs: int, tok: float, system: str,
         ep: int, pp: int = 1, vp: int = 1, full: bool = True) -> ModernRun:
    return ModernRun(model, acc, gpus, "FP8-MX", gbs, mbs, pp=pp, vp=vp, ep=ep,
                     tokens_per_gpu=tok, release="26.08", system=system,
                     settings=FULL_ITERATION_MOE if full else ())


RELEASE_RUNS: tuple[ModernRun, ...] = (
    _r26("qwen3-30b-a3b", "gb200-186gb", 8, 512, 4, 39936, "GB200", 8),
    _r26("qwen3-30b-a3b", "gb300-288gb", 8, 512, 8, 44544, "GB300", 8),
    _r26("qwen3-235b-a22b", "gb200-186gb", 256, 8192, 1, 7280, "GB200", 32, pp=8, vp=3),
    _r26("qwen3-235b-a22b", "gb300-288gb", 256, 8192, 2, 8816, "GB300", 32, pp=4, vp=12),
    _r26("deepseek-v3", "gb200-186gb", 256, 4096, 1, 4912, "GB200", 64, pp=4, vp=4),
    _r26("deepseek-v3", "gb300-288gb", 256, 4096, 1, 6288, "GB300", 32, pp=2, vp=8),
    _r26("gpt-oss-120b", "gb200-186gb", 64, 1280, 4, 28672, "GB200", 64, full=False),
    _r26("gpt-oss-120b", "gb300-288gb", 64, 1280, 4, 33024, "GB300", 16, full=False),
)
"""The MoE rows of Megatron-Bridge's newest performance summary (``docs/performance-summary.md``,
26.08 NeMo container, MXFP8, sequence 4,096, token distribution force-balanced, dropless):
the same models on GB200 / GB300 as the 25.11 rows of :data:`MODERN_RUNS`, the Qwen3 30B-A3B
GB200 row in the very same layout (23,766 tokens/s/GPU in 25.11, 39,936 in 26.08). Kept out
of :func:`validation_table` (a second software generation of the same runs; docs/training.md
compares the two). Settings: :data:`FULL_ITERATION_MOE` where the recipe sets it; GPT-OSS's
recipes (``perf_recipes/gpt_oss/gb200``, ``gb300``) set neither and are priced with the
defaults."""


def release_table() -> list[dict[str, Any]]:
    """The model's figure for each of :data:`RELEASE_RUNS` (rows as :func:`validation_table`'s)."""
    return [_modern_row(r) for r in RELEASE_RUNS]


def _m26(model: str, acc: str, gpus: int, precision: str, gbs: int, mbs: int, tok: float,
         system: str, ep: int, pp: int = 1, vp: int = 1, flex: bool = False) -> ModernRun:
    # the GB200 / GB300 flex presets are HybridEP's, on the 32 SMs the 26.02 overrides set
    hybrid = (("hybridep_sms", 32),) if flex and system.startswith("GB") else ()
    return ModernRun(model, acc, gpus, precision, gbs, mbs, pp=pp, vp=vp, ep=ep,
                     tokens_per_gpu=tok, release="26.02", system=system,
                     settings=(("moe_dispatcher", "flex"),) + hybrid if flex else ())


MOE_2602_RUNS: tuple[ModernRun, ...] = (
    _m26("deepseek-v3", "gb300-288gb", 256, "FP8-MX", 4096, 2, 4612, "GB300", 32, pp=2, vp=8,
         flex=True),
    _m26("deepseek-v3", "gb200-186gb", 256, "FP8-MX", 4096, 1, 3955, "GB200", 64, pp=4, vp=4,
         flex=True),
    _m26("gpt-oss-120b", "gb300-288gb", 64, "BF16", 1280, 4, 19412, "GB300", 64),
    _m26("gpt-oss-120b", "gb200-186gb", 64, "BF16", 1280, 4, 15784, "GB200", 64),
    _m26("gpt-oss-120b", "b200-sxm-180gb", 64, "BF16", 1280, 4, 8047, "DGX-B200", 64),
    _m26("qwen3-30b-a3b", "gb300-288gb", 8, "FP8-MX", 512, 8, 30376, "GB300", 8,
         flex=True),
    _m26("qwen3-30b-a3b", "h100-sxm5-80gb", 16, "FP8-CS", 1024, 1, 5113, "DGX-H100", 8, pp=2,
         vp=12,
         flex=True),
    _m26("qwen3-235b-a22b", "gb300-288gb", 256, "FP8-MX", 8192, 2, 6583, "GB300", 32, pp=4,
         flex=True),
    _m26("qwen3-235b-a22b", "gb200-186gb", 256, "FP8-MX", 8192, 1, 5448, "GB200", 32, pp=8,
         flex=True),
    _m26("qwen3-235b-a22b", "b200-sxm-180gb", 256, "FP8-MX", 8192, 1, 3805, "DGX-B200", 8,
         pp=8),
)
"""The MoE rows of Megatron-Bridge's 26.02 summary (``docs/performance-summary-archive.md``,
"26.02 NeMo Container") whose layout or precision the 25.11 table does not have, on the
parts :data:`ACCELERATORS` holds (the DGX-B300 rows and the B200 DeepSeek-V3 row, whose
multi-token-prediction module the table does not state, are left out); the two already
in :data:`MODERN_RUNS` (H100 GPT-OSS, H100 Qwen3 235B) are not repeated. The recipes'
settings for these rows were not checked beyond the dispatcher: priced with the defaults
(no all-to-all overlap, recomputation by the fidelity rule) and the all-to-all dispatcher,
except where Megatron-Bridge's 26.02 presets (tag ``v0.3.0``, 2026-02-26,
``scripts/performance/configs/qwen/qwen3_workload_base_configs.py`` and
``deepseek/deepseek_workload_base_configs.py``) set a flex backend — HybridEP for the GB200
/ GB300 Qwen3 and DeepSeek-V3 presets, DeepEP for the H100 Qwen3 30B-A3B ones
(``moe_dispatcher`` ``flex``, ``flex=True`` here; HybridEP's all-to-all on the 32 SMs that
``scripts/performance/utils/overrides.py`` sets for it, ``hybridep_sms`` 32); its B200
Qwen3 235B and GPT-OSS presets set none. Kept out of
:func:`validation_table` and its means — a check on layouts the table was not built on."""


def moe_2602_table() -> list[dict[str, Any]]:
    """The model's figure for each of :data:`MOE_2602_RUNS` (rows as :func:`validation_table`'s)."""
    return [_modern_row(r) for r in MOE_2602_RUNS]


LLM_FOUNDRY_A100_RUNS: tuple[ModernRun, ...] = tuple(
    ModernRun(m, "a100-sxm-80gb", 8, "BF16", gbs, mb, fsdp=True, tokens_per_gpu=tok,
              release="A100 80GB", system="A100", source=LLM_FOUNDRY_SOURCE,
              settings=LLM_FOUNDRY + ((("recompute", "full"),) if ckpt else ()))
    for m, gbs, mb, tok, ckpt in (
        ("mpt-30b", 504, 3, 916, True),
        ("mpt-13b", 48, 2, 2262, False),
        ("mpt-7b", 96, 6, 4641, False),
        ("mpt-3b", 160, 10, 10811, False),
        ("mpt-1b", 448, 14, 20513, False),
        ("mpt-760m", 384, 24, 32434, False)))
"""The same llm-foundry sweep on A100s (``scripts/train/benchmarking/README.md``, commit
061f2c7c, table "A100 80GB with 1600 Gbps node-node interconnect (RoCE)"): every MPT row
at the yamls' 2,048 tokens on one 8-GPU node, ``amp_bf16``, ``MP Mode`` DEFAULT, FSDP
``FULL_SHARD``, the table's micro-batch, global batch and checkpointing column — the stack
and settings of the H100 rows of :data:`MODERN_RUNS` (:data:`LLM_FOUNDRY`), on the card the
model's A100 rate was calibrated on (:mod:`.fidelity`). A check, kept out of
:func:`validation_table` and its means: it separates what the stack costs on any card from
what it costs on an H100 only (docs/training.md, "PyTorch FSDP stacks")."""


def llm_foundry_a100_table() -> list[dict[str, Any]]:
    """The model's figure for each of :data:`LLM_FOUNDRY_A100_RUNS` (rows as
    :func:`validation_table`'s)."""
    return [_modern_row(r) for r in LLM_FOUNDRY_A100_RUNS]


NEMO_SOURCE = ("NVIDIA NeMo performance summary (NVIDIA/NeMo "
               "docs/source/performance/performance_summary.md, {release} NeMo container, "
               "FP8), {system}")
NEMO_2407_RUNS: tuple[ModernRun, ...] = tuple(
    ModernRun(m, "h100-sxm5-80gb", gpus, "FP8-DS", gbs, mbs, tp, pp, cp, vp,
              tokens_per_gpu=tok, release="24.07", system="DGX-H100", source=NEMO_SOURCE)
    for m, gpus, gbs, mbs, tp, pp, cp, vp, tok in (
        ("gpt3-175b", 128, 256, 1, 4, 8, 1, 6, 726),
        ("gpt3-175b", 512, 2048, 2, 4, 8, 1, 6, 782),
        ("llama3-8b", 8, 128, 1, 1, 1, 2, 1, 12036),
        ("llama3-70b", 64, 128, 1, 4, 4, 2, 5, 1533)))
"""The H100 FP8 pre-training layouts issue 23 names (GPT-3 175B on 128 and 512 cards, Llama 3
8B and 70B with context parallelism, interleaved pipelines): NeMo's performance summary of its
24.07 container (``docs/source/performance/performance_summary.md``, "Pretraining", DGX-H100,
FP8; sequence 2,048 for GPT-3, 8,192 for Llama 3), with its GBS, MBS, TP, PP, CP and VP.
FP8 is Transformer Engine's delayed scaling (``FP8-DS``: per-tensor current scaling came
later, the 25.11 rows' ``FP8-CS``); the rest as :data:`MEGATRON_CORE`. The models whose shape
the catalogue lacks (Llama 2, Nemotron, GPT-3 5B / 20B) are left out. A check, kept out of
:func:`validation_table` and its means: a software generation before the 25.11 rows, on the
same hardware (Llama 3 8B on 8 H100s: 12,036 tokens/s/GPU in 24.07 with CP 2, 14,451 in
25.11 with FSDP)."""


def nemo_2407_table() -> list[dict[str, Any]]:
    """The model's figure for each of :data:`NEMO_2407_RUNS` (rows as
    :func:`validation_table`'s)."""
    return [_modern_row(r) for r in NEMO_2407_RUNS]


def _modern_row(run: ModernRun) -> dict[str, Any]:
    model = _model(run.model)
    if run.seq:
        model = replace(model, seq_len=run.seq)
    base = PublishedRun(run.name, run.model, run.accelerator, run.gpus, run.layout(),
                        "tokens", run.tokens_per_gpu,
                        run.source.format(release=run.release, system=run.system))
    fig = {**{**A100_ERA, **ACCELERATORS}[run.accelerator], **dict(run.figures)}
    system = system_for_accelerator(fig, run.gpus)
    ex, res = _choose(base, model, system)
    value = float(res.values["tokens_per_s"]) / run.gpus
    return {"run": run.name, "accelerator": run.accelerator, "precision": run.precision,
            "moe": model.moe, "eager": run.source == TORCHTITAN_SOURCE,
            "pytorch_fsdp": run.source in (TORCHTITAN_SOURCE, LLM_FOUNDRY_SOURCE),
            "published": run.tokens_per_gpu, "model": value,
            "error": value / run.tokens_per_gpu - 1, "metric": "tokens/s/GPU",
            "source": base.source, "fits": bool(res.values["fits"]),
            "chosen": {"recompute": ex.recompute}, "regression": run.regression}


def _choose(run: PublishedRun, model: Any, system: Any) -> tuple[Any, Any]:
    """The published layout, recomputation by :mod:`.fidelity`'s rule."""
    best = None
    fallback = None
    published = run.layout.get("recompute")
    for rc in (published,) if published else ("none", "selective", "full"):
        ex = execution_from_params({**run.layout, "recompute": rc}, run.gpus, model)
        res = evaluate(model, system, ex)
        if fallback is None or res.values["memory_gib_per_card"] < fallback[1].values[
                "memory_gib_per_card"]:
            fallback = (ex, res)
        if res.values["fits"] and (best is None or res.values["step_time_s"]
                                   < best[1].values["step_time_s"]):
            best = (ex, res)
    chosen = best or fallback
    assert chosen is not None
    return chosen


def validation_table() -> list[dict[str, Any]]:
    """Every Hopper / Blackwell row with the model's figure and the relative error.

    The Megatron-Bridge rows (tokens/s/GPU) and the three Llama 3 405B rows of
    :data:`~simulation.training.fidelity.PUBLISHED_RUNS` (MFU, H100 BF16).
    """
    out = [_modern_row(r) for r in MODERN_RUNS]
    for run in PUBLISHED_RUNS:
        if run.accelerator == "a100-sxm-80gb":
            continue
        ex, res = engineer_choice(run)
        value = float(res.values["mfu"])
        out.append({"run": run.run, "accelerator": run.accelerator, "precision": "BF16",
                    "moe": False, "eager": False, "pytorch_fsdp": False,
                    "published": run.published, "model": value,
                    "error": value / run.published - 1, "metric": "mfu",
                    "source": run.source, "fits": bool(res.values["fits"]),
                    "chosen": {"micro_batch": ex.micro_batch, "vpp": ex.vpp,
                               "recompute": ex.recompute}, "regression": ""})
    return out
