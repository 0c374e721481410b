"""How a run is laid out: :class:`Execution` and :func:`execution_from_params`.

Ranks are ordered tensor-parallel fastest, then data-parallel, then pipeline
(Megatron-LM's default ``tp-dp-pp`` order), so a TP group sits in one
scale-up domain, a DP group strides over servers on one NIC rail, and
consecutive pipeline stages sit tp·dp cards apart. Expert parallelism (EP)
splits each DP group into ep-sized groups that hold different experts.

Validation here is what a single configuration needs (divisibility, batch);
whether it fits memory is an output (``fits``), because the search wants the
reason as a count, not an exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from ._check import check_keys, choice, flag, integer, number
from .errors import TrainingInputError
from .models import ModelSpec

__all__ = ["EP_OVERLAP_SCHEDULES", "MAX_SCALE_UP_DOMAIN", "OPTIMIZERS", "RECOMPUTE",
           "RECOMPUTE_MODULES", "SCHEDULES", "Execution", "execution_from_params",
           "recompute_module_mask"]

RECOMPUTE = ("none", "selective", "full", "op")
RECOMPUTE_MODULES = ("core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe",
                     "shared_experts")
"""Megatron-Core's fine-grained recomputation modules (``TransformerConfig.recompute_modules``,
``megatron/core/transformer/transformer_config.py``): ``core_attn`` the attention core,
``moe_act`` the MoE experts' activation, ``layernorm`` the input and pre-MLP norms,
``mla_up_proj`` MLA's up-projections and rotary, ``mlp`` the dense MLP, ``moe`` the whole MoE
layer, ``shared_experts`` the shared experts; bit i of :func:`recompute_module_mask` is the
i-th. What each re-runs and drops: :func:`.layer.layer_kernels` (``rc_*`` keys) and
:func:`.memory.saved_activation_bytes`."""


def recompute_module_mask(recompute: str, modules: tuple[str, ...]) -> int:
    """Bit mask of the modules a ``selective`` recomputation re-runs (0 otherwise).

    Megatron-Core's default module list is ``["core_attn"]``; a list given replaces it.

    >>> recompute_module_mask("selective", ()), recompute_module_mask("selective", ("moe_act",))
    (1, 2)
    >>> recompute_module_mask("full", ("moe_act",))
    0
    """
    if recompute != "selective":
        return 0
    return sum(1 << RECOMPUTE_MODULES.index(m) for m in (modules or ("core_attn",)))
MAX_SCALE_UP_DOMAIN = 65536
"""The largest NVLink domain a run may ask for (the catalogue's bound on
``nvlink_domain_cards``)."""
SCHEDULES = ("1f1b", "gpipe")
OPTIMIZERS = ("fused", "foreach", "loop")
"""How the Adam step runs (``Execution.optimizer``; bytes in :data:`.core.ADAM_IMPL_BYTES`)."""
EP_OVERLAP_SCHEDULES = ("megatron", "dualpipe")
"""How ``ep_overlap`` pairs the micro-batches (:func:`.core.ep_overlap_exposed`):
Megatron-Core's three phases, or DualPipe's whole paired chunk."""


@dataclass(frozen=True)
class Execution:
    """One parallel configuration (every field plain JSON).

    ``zero`` is the ZeRO stage (Rajbhandari et al. 2020): 1 shards optimizer
    states (= Megatron's distributed optimizer), 2 also gradients, 3 also
    weights. ``compression`` is the DP gradient compression ratio (4 = 4:1).
    ``overlap_dp``: DP gradient reduction overlaps the last micro-batch's
    backward; ``overlap_tp``: TP collectives overlap the neighbouring GEMMs
    (comm/GEMM overlap); ``overlap_pp``: steady-state stage sends overlap
    compute. ``clock`` is a fixed clock fraction; ``power_cap_w`` a per-card cap.
    ``cp`` is context parallelism (Llama 3 §3.3.2: each sequence split over cp
    cards, K/V all-gathered); ranks are ordered tp, cp, dp, pp.
    ``grad_accum_fusion``: the weight-gradient GEMM accumulates into the FP32
    gradient (Megatron-LM's ``--gradient-accumulation-fusion``); off, every
    micro-batch pays an element-wise ``main_grad += grad`` pass (Megatron-LM
    of 2021, the SC21 runs). ``fp32_grads``: gradients accumulated, held and
    DP-reduced in FP32 (Megatron-LM's ``accumulate_allreduce_grads_in_fp32``).
    ``overlap_tp_bwd``: the backward TP collectives of the column-parallel layers
    (QKV, MLP up) run while their weight-gradient GEMMs compute (Megatron-LM's
    ``--async-tensor-model-parallel-allreduce``, and with SP its overlapped
    all-gather / reduce-scatter; Korthikanti et al. 2022 §5, Table 4); the
    row-parallel layers' SP all-gathers stay exposed. ``overlap_tp`` (every TP
    collective hidden) supersedes it.
    ``pp_balance`` (Llama 3, Dubey et al. 2024 §3.3.2): the embedding and the
    output layer each take one transformer layer's slot, so the first and last
    stages hold one layer fewer (L + 2 slots over pp·vpp chunks; with one slot
    per chunk the first chunk holds only the embedding, the last only the output
    and loss). ``dp_every_microbatch``: gradients are accumulated in the DP
    shard, so each micro-batch's gradients are reduce-scattered after its
    backward (ZeRO-2 / FSDP sharding gradients, Rajbhandari et al. 2020 §5.2;
    Llama 3's FSDP) instead of once per step.
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    global_batch: int = 1
    micro_batch: int = 1
    ep: int = 1
    vpp: int = 1
    sequence_parallel: bool = False
    recompute: str = "none"
    zero: int = 0
    precision: str = "bf16"
    compression: float = 1.0
    overlap_dp: bool = True
    overlap_tp: bool = False
    overlap_pp: bool = True
    flash_attention: bool = True
    schedule: str = "1f1b"
    clock: float = 1.0
    power_cap_w: float | None = None
    cp: int = 1
    grad_accum_fusion: bool = True
    fp32_grads: bool = False
    overlap_tp_bwd: bool = False
    pp_balance: bool = False
    dp_every_microbatch: bool = False
    overlap_param_gather: bool = True
    """With the distributed optimizer (ZeRO ≥ 1) and ``overlap_dp``, the step's parameter
    all-gather runs under the first micro-batch's forward (Megatron-Core's
    ``overlap_param_gather``: dispatched from the forward pre-hooks, bucket by bucket);
    False: it runs synchronously after the optimizer step, fully exposed
    (``megatron/core/optimizer/distrib_optimizer.py``, ``step_with_ready_grads``: "If not
    overlapping all-gather for parameters, launch synchronous all-gather communication
    calls here"). Megatron-Bridge v0.2.0 (the 25.11 container) turns it off in every MXFP8
    performance recipe: "keeping this enabled causes NaN grad norm"
    (``scripts/performance/configs/llama3/llama3_llm_pretrain.py``,
    ``llama31/llama31_llm_pretrain.py``, ``qwen3/qwen3_llm_pretrain.py``,
    ``deepseek/deepseek_llm_pretrain.py``)."""
    fsdp1_flat_grads: bool = False
    """PyTorch FSDP1 (``FullyShardedDataParallel`` with ``FlatParameter`` s, torch 2.0,
    Composer's FSDP) handles each unit's gradient unsharded on every card after every
    micro-batch's backward: the flat gradient's ``cat`` (autograd's split backward), the
    cast to the reduce dtype and the reduce-scatter's pre-division, one HBM pass each
    (:data:`.core.FSDP1_GRAD_BYTES`); only with ZeRO 3 over more than one card."""
    fused_elementwise: bool = True
    """Norms, rotary and the activation run as fused kernels (Megatron-LM, Transformer
    Engine); False: as eager PyTorch ops, one HBM pass each (:data:`.layer.EAGER_ELEMENTS`,
    torchtitan without ``torch.compile``)."""
    ep_overlap: bool = False
    """The expert-parallel dispatch/combine all-to-alls run under the other micro-batch's
    compute (Megatron-Core's ``overlap_moe_expert_parallel_comm``; DeepSeek-V3 report
    §3.2.1 DualPipe), only with ≥ 2 micro-batches per pipeline to pair; how much hides
    is ``ep_overlap_schedule``'s."""
    ep_overlap_schedule: str = "megatron"
    """``megatron``: a forward and a backward paired in three phases, each all-to-all
    hidden only under its phase's compute (Megatron-LM pull request 2719's schedule,
    :func:`.core.ep_overlap_exposed`); ``dualpipe``: hidden under the whole paired
    chunk's forward + backward (DeepSeek-V3 §3.2.1: with its SM split tuned, "both
    all-to-all and PP communication can be fully hidden")."""
    cuda_max_connections: int = 8
    """Hardware work queues per GPU (``CUDA_DEVICE_MAX_CONNECTIONS``, CUDA C programming
    guide, 1 to 32). Only 1 is priced differently: every stream's kernels then start in
    launch order, and under ``ep_overlap`` (schedule ``megatron``) the forward dispatch
    and combine all-to-alls hold back the compute launched after them
    (:func:`.core.ep_overlap_exposed`; Megatron-LM pull request 2719). Default 8: what
    Megatron-Bridge's H100 Qwen3 235B recipes set with the all-to-all dispatcher and the
    overlap (``perf_recipes/qwen/h100/qwen3_moe.py``); its Blackwell and DeepEP / HybridEP
    recipes set 32 (``scripts/performance/utils/overrides.py``); 1 only where TP or CP
    communication is overlapped without the all-to-all overlap."""
    fp8_recipe: str = "delayed"
    """How FP8 scales are found (:mod:`.recipes`): ``delayed``, ``current``,
    ``block`` (DeepSeek-V3's 1×128 / 128×128) or ``mx`` (MXFP8, Blackwell); only
    read when ``precision`` is ``fp8`` (``fp4`` is NVFP4)."""
    moe_dispatcher: str = "alltoall"
    """How an MoE layer's tokens reach their experts (:mod:`.dispatch`): ``alltoall``,
    Megatron-Core's all-to-all dispatcher, synchronises the host on the tokens per
    expert once per MoE layer, so the kernels after it are launch-bound where the
    host is slower than the GPU, and sorts the received tokens by local expert and back
    (:func:`.layer.moe_sort_elements`); ``flex``, Megatron-Core's flex dispatcher (DeepEP,
    HybridEP), synchronises likewise but does not sort; ``device``: the sizes stay on the
    GPU (CUDA-graphed MoE, device-initiated grouped GEMMs), no synchronisation, no sort."""
    hybridep_sms: int = 0
    """Non-zero: the EP all-to-alls run as HybridEP's dispatch and combine kernels on this many
    SMs (Megatron-Core's ``moe_flex_dispatcher_backend = "hybridep"``,
    ``moe_hybridep_num_sms``; 16 or 32, :data:`.dispatch.HYBRIDEP_SMS`): each token sent once
    per destination rank, at HybridEP's measured bandwidth inside an NVLink domain
    (:func:`.dispatch.hybridep_layer_s`); elsewhere, or on a card without a measurement at
    that SM count, the model's all-to-all price. 0: the model's all-to-all."""
    optimizer: str = "fused"
    """How the Adam(W) step runs over the card's parameter shard: ``fused`` one kernel
    (Megatron-LM / Apex ``FusedAdam``, PyTorch ``fused=True``), ``foreach`` PyTorch's
    multi-tensor ``torch.optim.AdamW`` (torchtitan's default, ``optimizer.fused`` off),
    ``loop`` a Python loop of per-parameter ops (Composer's ``DecoupledAdamW``,
    llm-foundry's ``decoupled_adamw``); each moves the bytes of
    :data:`.core.ADAM_IMPL_BYTES`."""
    recompute_modules: tuple[str, ...] = ()
    """With ``recompute`` ``selective``: the modules re-run in the backward
    (:data:`RECOMPUTE_MODULES`, Megatron-Core's ``recompute_modules``; empty = its default
    ``("core_attn",)``, the attention core). Megatron-Bridge's performance presets set them
    per model and system (e.g. DeepSeek-V3 on GB200 ``["mla_up_proj"]``). Given without
    ``recompute`` they mean ``selective``; with another ``recompute`` they are refused."""
    cpu_offload_layers: int = 0
    """Layers whose saved activations are offloaded to host memory (Megatron-Core's
    ``cpu_offloading`` / ``cpu_offloading_num_layers``, activations only, as
    Megatron-Bridge's presets set it): out of HBM, copied over the host link under the
    neighbouring layers' compute (:func:`.core.offload_exposed`). As Megatron-Core
    (``transformer_config.py``): fewer than the model's layers, no pipeline parallelism,
    no recomputation."""
    etp: int = 0
    """Expert tensor parallelism (Megatron-Core's ``expert_tensor_parallel_size``): each
    expert's MLP split over etp cards; 0 = tp (Megatron-Core's default). The experts'
    ep × etp cards come from the tp × cp × dp ranks of a pipeline stage, so with
    etp < tp expert parallelism can span tensor-parallel ranks (EP 32 over TP 2 × DP 16)."""
    nvlink_domain: int = 0
    """Cards per NVLink (scale-up) domain for this run; 0 = the system's
    (``SystemSpec.scale_up_domain``). E.g. a GB200 rack as one NVL72 domain or as
    NVL8 islands: which TP / EP / DP groups stay inside NVLink follows
    (:mod:`.comm`, ``group_split``); checked against the system by
    :func:`simulation.training.system.with_scale_up_domain`."""

    @property
    def expert_tp(self) -> int:
        """etp, or tp when 0 (Megatron-Core's default)."""
        return self.etp or self.tp

    @property
    def cards(self) -> int:
        """tp × cp × pp × dp."""
        return self.tp * self.cp * self.pp * self.dp

    @property
    def micro_batches(self) -> int:
        """Micro-batches per pipeline per step: global / (dp × micro)."""
        return self.global_batch // (self.dp * self.micro_batch)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (round-trips through :func:`execution_from_params`; the module
        tuple as a list, as JSON gives it back)."""
        out = asdict(self)
        out["recompute_modules"] = list(self.recompute_modules)
        return out


_NAMES = {f.name for f in fields(Execution)} | {"distributed_optimizer"}


def execution_from_params(
    data: Mapping[str, Any], cards: int, model: ModelSpec | None = None, path: str = ""
) -> Execution:
    """Validate a layout for ``cards`` cards (dp derived as cards / (tp·pp) if absent).

    With ``model`` the shape checks run too (tp divides heads, pp layers …).
    Unknown keys are refused only among the execution's own names when
    ``data`` also carries other scenario parameters: pass just the execution.

    >>> e = execution_from_params({"tp": 8, "pp": 8, "global_batch": 64}, 64)
    >>> e.dp, e.micro_batches
    (1, 64)
    >>> execution_from_params({"tp": 3, "global_batch": 8}, 8)
    Traceback (most recent call last):
    ...
    simulation.training.errors.TrainingInputError: tp: tp × pp (3) must divide the 8 cards
    """
    if not isinstance(data, Mapping):
        raise TrainingInputError(path.rstrip(".") or "params", "must be an object")
    check_keys(data, _NAMES, path)
    cards = integer(cards, f"{path}cards", high=1 << 24)
    tp = integer(data.get("tp", 1), f"{path}tp", high=4096)
    pp = integer(data.get("pp", 1), f"{path}pp", high=4096)
    cp = integer(data.get("cp", 1), f"{path}cp", high=4096)
    if cards % (tp * pp):
        raise TrainingInputError(f"{path}tp", f"tp × pp ({tp * pp}) must divide the {cards} cards")
    if cards % (tp * cp * pp):
        raise TrainingInputError(
            f"{path}cp", f"tp × cp × pp ({tp * cp * pp}) must divide the {cards} cards")
    dp_default = cards // (tp * cp * pp)
    dp_raw = data.get("dp")  # None or absent: derived; 0 is refused like any bad count
    dp = integer(dp_default if dp_raw is None else dp_raw, f"{path}dp", high=1 << 24)
    if tp * cp * pp * dp > cards:
        raise TrainingInputError(
            f"{path}dp", f"tp × cp × pp × dp = {tp * cp * pp * dp} > {cards} cards")
    if "global_batch" not in data:
        raise TrainingInputError(f"{path}global_batch", "required (sequences per step)")
    gb = integer(data["global_batch"], f"{path}global_batch", high=1 << 30)
    mb = integer(data.get("micro_batch", 1), f"{path}micro_batch", high=1 << 20)
    if gb % (dp * mb):
        raise TrainingInputError(
            f"{path}global_batch",
            f"must be a multiple of dp × micro_batch = {dp * mb} (got {gb})",
        )
    ep = integer(data.get("ep", 1), f"{path}ep", high=4096)
    etp_raw = data.get("etp")
    etp = 0  # 0 or absent: the experts split like the rest (etp = tp)
    if etp_raw is not None and not (type(etp_raw) is int and etp_raw == 0):
        etp = integer(etp_raw, f"{path}etp", high=4096)
    if etp and etp != tp and (tp * cp * dp) % (ep * etp):
        raise TrainingInputError(
            f"{path}etp", f"ep × etp ({ep * etp}) must divide tp × cp × dp ({tp * cp * dp})")
    if (not etp or etp == tp) and dp % ep:
        raise TrainingInputError(f"{path}ep", f"ep ({ep}) must divide dp ({dp})" + (
            " (expert TP = tp; etp 1 lets EP span the TP ranks)" if tp > 1 else ""))
    if etp == tp:
        etp = 0
    vpp = integer(data.get("vpp", 1), f"{path}vpp", high=1024)
    if vpp > 1 and pp == 1:
        raise TrainingInputError(f"{path}vpp", "virtual stages need pp > 1")
    sp = flag(data.get("sequence_parallel", False), f"{path}sequence_parallel")
    if sp and tp == 1:
        sp = False  # nothing to split
    recompute = choice(data.get("recompute", "none"), f"{path}recompute", RECOMPUTE)
    raw_modules = data.get("recompute_modules", ())
    if raw_modules is None:
        raw_modules = ()
    if isinstance(raw_modules, str):  # "layernorm,moe_act" (the API's and the CLI's form)
        raw_modules = [m.strip() for m in raw_modules.split(",") if m.strip()]
    if not isinstance(raw_modules, list | tuple):
        raise TrainingInputError(f"{path}recompute_modules",
                                 f"a list of modules ({', '.join(RECOMPUTE_MODULES)}), "
                                 f"got {raw_modules!r}")
    modules = tuple(dict.fromkeys(
        choice(m, f"{path}recompute_modules[{i}]", RECOMPUTE_MODULES)
        for i, m in enumerate(raw_modules)))
    if modules and data.get("recompute") is None:
        recompute = "selective"  # the modules name selective recomputation (as Megatron-Bridge's
        # set_recompute_overrides turns a preset's recompute_modules into granularity selective)
    if modules and recompute != "selective":
        raise TrainingInputError(f"{path}recompute_modules",
                                 f"only with recompute 'selective' (got {recompute!r})")
    zero = integer(data.get("zero", 0), f"{path}zero", low=0, high=3)
    if flag(data.get("distributed_optimizer", False), f"{path}distributed_optimizer"):
        zero = max(zero, 1)
    from .system import PRECISIONS  # local: system imports nothing from here

    precision = choice(data.get("precision", "bf16"), f"{path}precision", PRECISIONS)
    compression = number(data.get("compression", 1.0), f"{path}compression", low=1.0, high=1e4)
    flags = {
        k: flag(data.get(k, getattr(Execution, k)), f"{path}{k}")
        for k in ("overlap_dp", "overlap_tp", "overlap_pp", "flash_attention",
                  "grad_accum_fusion", "fp32_grads", "overlap_tp_bwd",
                  "pp_balance", "dp_every_microbatch", "fused_elementwise", "ep_overlap",
                  "overlap_param_gather", "fsdp1_flat_grads")
    }
    schedule = choice(data.get("schedule", "1f1b"), f"{path}schedule", SCHEDULES)
    ep_schedule = choice(data.get("ep_overlap_schedule", "megatron"),
                         f"{path}ep_overlap_schedule", EP_OVERLAP_SCHEDULES)
    clock = number(data.get("clock", 1.0), f"{path}clock", low=0.1, high=1.0)
    cap = data.get("power_cap_w")
    cap_w = None if cap is None else number(cap, f"{path}power_cap_w", open_low=True, high=1e5)
    from .recipes import FP8_RECIPES

    fp8_recipe = choice(data.get("fp8_recipe", "delayed"), f"{path}fp8_recipe", FP8_RECIPES)
    from .dispatch import HYBRIDEP_SMS, MOE_DISPATCHERS

    dispatcher = choice(data.get("moe_dispatcher", "alltoall"), f"{path}moe_dispatcher",
                        MOE_DISPATCHERS)
    optimizer = choice(data.get("optimizer", "fused"), f"{path}optimizer", OPTIMIZERS)
    hybridep_sms = integer(data.get("hybridep_sms", 0), f"{path}hybridep_sms", low=0,
                           high=max(HYBRIDEP_SMS))
    if hybridep_sms not in HYBRIDEP_SMS:
        raise TrainingInputError(f"{path}hybridep_sms", f"{hybridep_sms}: HybridEP is measured "
                                 f"at {' or '.join(str(n) for n in HYBRIDEP_SMS[1:])} SMs "
                                 "(0: the model's all-to-all)")
    connections = integer(data.get("cuda_max_connections", 8), f"{path}cuda_max_connections",
                          high=32)
    domain = data.get("nvlink_domain")
    nvlink_domain = 0 if domain is None or (type(domain) is int and domain == 0) else integer(
        domain, f"{path}nvlink_domain", high=MAX_SCALE_UP_DOMAIN)
    offload = integer(data.get("cpu_offload_layers", 0), f"{path}cpu_offload_layers", low=0,
                      high=1 << 16)
    if offload and pp > 1:
        raise TrainingInputError(f"{path}cpu_offload_layers",
                                 "no CPU offloading with pipeline parallelism (Megatron-Core)")
    if offload and recompute != "none":
        raise TrainingInputError(f"{path}cpu_offload_layers",
                                 "no CPU offloading with recomputation (Megatron-Core)")
    ex = Execution(tp, pp, dp, gb, mb, ep, vpp, sp, recompute, zero, precision, compression,
                   clock=clock, power_cap_w=cap_w, schedule=schedule, cp=cp,
                   fp8_recipe=fp8_recipe, moe_dispatcher=dispatcher, etp=etp,
                   nvlink_domain=nvlink_domain, ep_overlap_schedule=ep_schedule,
                   cuda_max_connections=connections, optimizer=optimizer,
                   recompute_modules=modules, cpu_offload_layers=offload,
                   hybridep_sms=hybridep_sms, **flags)
    if model is not None:
        reason = shape_problem(model, ex)
        if reason is not None:
            raise TrainingInputError(f"{path}{reason[0]}", reason[1])
    return ex


def shape_problem(model: ModelSpec, ex: Execution) -> tuple[str, str] | None:
    """The first reason ``ex`` cannot split ``model`` (field, reason), or None."""
    if model.heads % ex.tp:
        return "tp", f"tp ({ex.tp}) does not divide the {model.heads} heads"
    if model.kv_heads % ex.tp and ex.tp % model.kv_heads:
        return "tp", f"tp ({ex.tp}) and the {model.kv_heads} KV heads do not divide each other"
    if ex.cp > 1 and model.seq_len % (2 * ex.cp):
        return "cp", (f"cp ({ex.cp}) must split the {model.seq_len}-token sequence into "
                      f"2·cp equal chunks (load-balanced causal attention)")
    slots = model.layers + (2 if ex.pp_balance and ex.pp > 1 else 0)
    if ex.pp * ex.vpp > slots:
        return "pp", f"pp × vpp ({ex.pp * ex.vpp}) exceeds the {slots} layers" + (
            " (+ embedding and output slots)" if slots > model.layers else "")
    if ex.ep > 1 and (not model.moe or model.experts % ex.ep):
        return "ep", f"ep ({ex.ep}) must divide the experts ({model.experts})"
    if ex.cpu_offload_layers >= model.layers:
        return "cpu_offload_layers", (f"offloads fewer than the model's {model.layers} "
                                      f"layers (Megatron-Core)")
    if ex.etp and (not model.moe or model.ffn % ex.etp):
        return "etp", f"etp ({ex.etp}) must divide the experts' FFN width ({model.ffn})"
    if ex.vpp > 1 and ex.micro_batches % ex.pp:
        return "vpp", "interleaving needs micro-batches a multiple of pp (Megatron-LM)"
    return None
