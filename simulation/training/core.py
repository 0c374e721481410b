"""The vectorised step model: every configuration of a batch at once.

One function, :func:`step_arrays`, prices N configurations held as numpy
arrays (:class:`Batch`); :func:`simulation.training.step.evaluate` calls it
with N = 1 and :func:`simulation.training.search.search` with N in the
hundreds of thousands. Formulas (each in its module's docstring):

* compute per layer and micro-batch: every kernel by its shape
  (:mod:`.layer`): each GEMM with tile/wave quantization on the card's SMs at
  peak × matmul efficiency × clock, or its HBM traffic if more (:mod:`.gemm`);
  the memory-bound kernels (norms, bias-dropout-add, activation, rotary,
  softmax) by their bytes at HBM × memory efficiency; backward by the data-
  and weight-gradient GEMMs' own shapes;
* FP8 / FP4 (:mod:`.recipes`): the projection/MLP GEMMs at that dtype's peak × its
  measured fraction (``SystemSpec.efficiency``), the attention core and the output
  layer in BF16, every GEMM input and output gradient cast at the recipe's bytes per
  element (+ the weights once a step), one more kernel per cast;
* MoE (:mod:`.layer`): a grouped GEMM over the card's E/ep experts, the token
  permute / unpermute and the router's softmax as memory-bound passes;
* recompute: full repeats the forward, selective the attention core, op (torchtitan's
  op-level SAC, :func:`.layer.op_sac_mms`) every second mm and every memory-bound op of
  the forward (the attention core's output is saved);
* TP: 2 AllReduces of b·s·h 16-bit values per layer forward and 2 backward
  (Megatron-LM; with SP a ReduceScatter + AllGather pair each, same volume,
  Korthikanti §4.2.2); +2 with full recomputation; overlapped with the
  layer's GEMMs when ``overlap_tp`` (exposed = max(0, comm − GEMM));
* EP: 2 AllToAlls forward + 2 backward per MoE layer of the tokens × top_k ×
  capacity × h values a card routes (Lepikhin et al. 2021, GShard), exposed; with
  ``ep_overlap`` (Megatron-Core's ``overlap_moe_expert_parallel_comm``, DualPipe's
  pairing) a forward and a backward micro-batch run in three phases, each the longer of
  its communication and its compute (the schedule of Megatron-LM pull request 2719,
  "Refine A2A overlap": combine_bwd ‖ attn_fwd → post_attn_fwd; dispatch_fwd →
  dispatch_bwd ‖ mlp_bwd → mlp_bwd_dw → mlp_fwd; combine_fwd ‖ post_attn_bwd →
  attn_bwd): with a = one all-to-all, A_f / A_b the layer's forward / backward without
  its expert GEMMs M_f / M_b, exposed = max(0, a − A_f) + max(0, 2a − M_f − M_b) +
  max(0, a − A_b) (each all-to-all hides only under its phase's compute, not under the
  whole paired layer); with ``ep_overlap_schedule`` ``dualpipe`` (DeepSeek-V3 §3.2.1,
  whose SM split is tuned so that "both all-to-all and PP communication can be fully
  hidden") under the whole paired chunk, max(0, a2a − fwd − bwd); the hidden part holds
  ``comm_sms`` SMs (DeepSeek-V3 §3.2.2), adding hidden·c/(sm − c) as for DP;
* PP: step = m × (critical stage time per micro-batch) + bubble
  (p − 1)/v × the per-micro-batch time of a stage without the output layer (the
  fill and drain pass through the other stages; :mod:`.pipeline`); stage sends of b·s·h/t values
  (Megatron's scatter/gather), the fill and drain exposed, the steady state
  too unless ``overlap_pp``; balanced stages (``pp_balance``, Llama 3 §3.3.2):
  L + 2 slots, S = ⌈(L + 2)/p⌉, the last stage S − 1 layers + the output layer,
  a middle one S layers, the slower of the two critical, the bubble priced by S;
* DP: gradients AllReduced (ZeRO 0) or ReduceScattered + parameters
  AllGathered (ZeRO ≥ 1, same volume), ZeRO-3 also gathers weights for the
  forward and backward of every micro-batch; bytes ÷ compression; overlap
  with the last micro-batch's backward (gradients of a stage are final only
  then) and the parameter gather with the first forward (not without
  ``overlap_param_gather``: then synchronous after the optimizer step, exposed whole,
  Megatron-Core's ``DistributedOptimizer.step_with_ready_grads``); compression costs a
  memory-bound pass (2 + 2/r)·bytes / HBM; with ``dp_every_microbatch``
  (sharded gradients, ZeRO-2 / Llama 3's FSDP) m reductions a step, which can
  run from the first backward's end (after half the bubble) to the step's end,
  the last only under the last backward: exposed = max(t − bwd, m·t − ((m − 1)·
  stage + bubble/2 + bwd)); the hidden part of the DP collectives holds
  ``SystemSpec.comm_sms`` SMs, so the compute under it takes sm/(sm − c) as long
  (hidden·c/(sm − c) added to the DP cost; DeepSeek-V3 §3.5.1);
* CP (context parallelism, Llama 3 §3.3.2): a card holds s/cp of every
  sequence; K and V are all-gathered over the cp group before attention
  (forward) and their gradients reduce-scattered (backward), 2·kv/t values
  per token each, exposed; attention FLOPs ÷ cp (the load-balanced causal
  split), queries s/cp against s keys;
* gradient accumulation: without ``grad_accum_fusion`` (Megatron-LM
  before its fused weight-gradient GEMM, e.g. the SC21 runs) every
  micro-batch's backward ends with an element-wise ``main_grad += grad``
  over the card's parameters: read the 16-bit gradient (2 B), read and write
  the accumulator (2 + 2 B, or 4 + 4 B with ``fp32_grads``) at HBM speed;
  with the fusion the weight-gradient GEMM accumulates in its epilogue.
  ``fp32_grads`` (Megatron-LM's ``accumulate_allreduce_grads_in_fp32``,
  which its ``arguments.py`` forces on for BF16) also keeps the gradient
  buffer and the DP reduction in FP32 (4 bytes per parameter, not 2);
* optimizer: memory-bound passes over the card's shard, per parameter
  (Megatron-LM's ``MixedPrecisionOptimizer.step``): grad-norm read 4 B; Adam
  (apex FusedAdam) reads g, w, m, v and writes w, m, v in FP32 = 28 B;
  master-to-16-bit copy 4 + 2 B; FP16 loss scaling adds the unscale and
  inf check (read + write 4 + 4 B) — 38 B (BF16), 46 B (FP16), 32 B (FP32
  with no copy); then the gradient buffer is zeroed (4 B per parameter of
  the card's gradient buffer);
* kernel gaps: a GPU runs a stream's kernels back to back with ~1 µs between
  them even when the host has queued them ahead (NVIDIA Technical Blog,
  A. Gray 2019, "Getting Started with CUDA Graphs": 2.9 µs kernels take
  3.8 µs each launched asynchronously back to back), × the kernels a layer
  launches (:data:`KERNELS_FWD`; backward twice as many, + one
  ``main_grad`` add per parameter tensor when the accumulation is unfused);
* energy: :mod:`.energy` — each class of op (compute-bound, memory-bound, exposed
  communication, idle) at its own power.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from .comm import CommModel, group_split
from .dispatch import HYBRIDEP_SMS, hybridep_layer_s, moe_layer_host_s
from .energy import clock_for_cap, hbm_power_w, op_mix_power
from .execution import RECOMPUTE_MODULES
from .flops import step_flops
from .layer import CAST_TENSORS, cast_elements, layer_kernels, logit_kernels
from .memory import STATE_BYTES, chunks_in_flight, first_chunk_share, saved_activation_bytes
from .models import ModelSpec
from .recipes import CAST_KERNELS, GEMM_RATE, cast_bytes
from .system import (
    FLASH_HEAD_DIM_CARDS,
    FLASH_HEAD_DIM_RATE_BWD,
    FLASH_HEAD_DIM_RATE_FWD,
    PRECISIONS,
    SystemSpec,
    flash_head_dim_factor,
)

__all__ = ["ADAM_IMPL_BYTES", "Batch", "CAST_RECIPES", "FSDP1_GRAD_BYTES", "RECOMPUTE_CODES",
           "ep_overlap_exposed", "ep_unpaired_share", "fsdp1_grad_bytes", "kernel_rates",
           "memory_arrays", "step_arrays"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
B8 = npt.NDArray[np.bool_]
RECOMPUTE_CODES = ("none", "selective", "full", "op")
ADAM_BYTES = 28.0
"""FusedAdam: read g, w, m, v, write w, m, v, FP32 (core docstring)."""
ADAM_IMPL_BYTES = (ADAM_BYTES, 80.0, 88.0)
"""FP32 bytes per parameter of the Adam(W) step by ``Execution.optimizer`` (``fused``,
``foreach``, ``loop``), one HBM pass per kernel. ``foreach``: PyTorch's
``_multi_tensor_adamw`` (``torch/optim/adamw.py``, not capturable): ``_foreach_mul_``
(weight decay, r 4 w 4) 8, ``_foreach_lerp_`` (m, g → m) 12, ``_foreach_mul_`` (v) 8,
``_foreach_addcmul_`` (v, g → v) 12, ``_foreach_sqrt`` 8, ``_foreach_div_`` 8,
``_foreach_add_`` (eps) 8, ``_foreach_addcdiv_`` (w, m, denominator → w) 16 = 80.
``loop``: Composer's ``DecoupledAdamW.adamw`` (``composer/optim/decoupled_weight_decay.py``),
per parameter ``param.mul_`` 8, ``exp_avg.mul_(beta1).add_(grad)`` 8 + 12,
``exp_avg_sq.mul_(beta2).addcmul_(grad, grad)`` 8 + 12, ``(exp_avg_sq.sqrt() / c).add_(eps)``
8 + 8 + 8, ``param.addcdiv_`` 16 = 88."""
OPTIM_EXTRA_BYTES = (0.0, 10.0, 18.0, 10.0, 10.0)
"""Per precision code (fp32, bf16, fp16, fp8, fp4): grad-norm read 4 B + master → 16-bit
copy 6 B (not fp32) + FP16's unscale and inf check 8 B (core docstring)."""
CAST_RECIPES = ("none", "delayed", "current", "block", "mx", "nvfp4")
"""Codes of ``Batch.recipe`` (:mod:`.recipes`)."""
_CAST_B = np.array([cast_bytes(r) for r in CAST_RECIPES])
_CAST_K = np.array([CAST_KERNELS.get(r, 0.0) for r in CAST_RECIPES])
_GEMM_RATE = np.array([GEMM_RATE.get(r, 1.0) for r in CAST_RECIPES])
"""The recipe's GEMM kernel rate over its precision's (MXFP8 0.951, :mod:`.recipes`)."""
ZERO_GRAD_BYTES = 4.0
ACCUM_BYTES = 2.0
"""Unfused accumulation: read the 16-bit gradient (2 B), then read + write the
accumulator (2 × its bytes: 4 FP32, or the gradient's own width)."""
FSDP1_GRAD_BYTES = {"cat": 4.0, "cast": 6.0, "predivide": 8.0}
"""Bytes per parameter of a card's FSDP units (unsharded) that PyTorch FSDP1 (torch 2.0,
``use_orig_params=False``: one ``FlatParameter`` per unit, its parameters views made by
``torch.split``) moves after every micro-batch's backward, one HBM pass each, with a
16-bit ``param_dtype`` (``Execution.fsdp1_flat_grads``):

* ``cat``: autograd's backward of the views' ``split`` concatenates the parameters'
  16-bit gradients into the flat gradient, read 2 + write 2 B (the
  ``SplitWithSizesBackward`` per FSDP unit and micro-batch in FSDP1's traces:
  facebookresearch/fairscale pull request 1184, which removes it for all but the last
  micro-batch; PyTorch pull request 90248 makes that flat gradient padded so no further
  copy is needed);
* ``cast``: with an FP32 ``reduce_dtype`` (``fp32_grads``; Composer's ``DEFAULT`` mixed
  precision from v0.16.4, Composer pull request 2628) ``_post_backward_hook`` runs
  ``flat_param.grad.to(reduce_dtype)``
  over the unsharded gradient (``torch/distributed/fsdp/_runtime_utils.py`` of torch 2.0),
  read 2 + write 4 B; none with a 16-bit ``reduce_dtype``;
* ``predivide``: the default ``reduce_scatter_hook`` (``torch/distributed/algorithms/
  _comm_hooks/default_hooks.py``) divides the unsharded gradient in place by
  ``gradient_predivide_factor`` (> 1 for any world size ≥ 2: 4 on 8 ranks) before the
  reduce-scatter, read + write of the reduce dtype (8 B FP32, 4 B 16-bit).

Per card shard parameter (:func:`fsdp1_grad_bytes`): the post-division of the reduced
shard (read + write), the FP32 → 16-bit cast of the shard before each all-gather
(``MixedPrecision(param_dtype)``, forward and backward: 2 × (4 + 2) B, one of which the
optimizer's master → 16-bit copy already counts), and from the second micro-batch on the
``_saved_grad_shard += new_sharded_grad`` accumulation (read 2 × 4, write 4 B)."""
KERNEL_GAP_S = 1e-6
"""Back-to-back kernel gap on one stream (Gray 2019, NVIDIA blog: 3.8 − 2.9 µs ≈ 1 µs)."""
KERNELS_FWD = 16.0
"""Kernels of one Megatron-LM GPT layer's forward (``ParallelTransformerLayer``):
LayerNorm, QKV GEMM, scores ``baddbmm``, fused scale-mask-softmax, attention
dropout, context ``bmm``, the context's permute copy, projection GEMM, TP
AllReduce, fused bias-dropout-add, LayerNorm, fc1 GEMM, fused bias-GeLU, fc2
GEMM, TP AllReduce, bias-dropout-add = 16; one flash kernel replaces the
4 of the core and the copy (12). Backward: twice the forward."""
PARAM_TENSORS = 12.0
"""Parameter tensors of a GPT layer (QKV, projection, fc1, fc2 weight and bias;
two LayerNorms' gain and bias): one unfused ``main_grad`` add each."""
GIB = float(1 << 30)


@dataclass
class Batch:
    """N configurations as parallel arrays (codes index RECOMPUTE_CODES / PRECISIONS)."""

    tp: I64
    pp: I64
    dp: I64
    ep: I64
    vpp: I64
    mb: I64
    gb: I64
    recompute: I64
    zero: I64
    precision: I64
    sp: B8
    compression: F64
    overlap_dp: B8
    overlap_tp: B8
    overlap_pp: B8
    flash: B8
    gpipe: B8
    clock: F64
    cap_w: F64  # inf: no cap
    cp: I64 = field(default_factory=lambda: np.ones(0, dtype=np.int64))
    grad_fusion: B8 = field(default_factory=lambda: np.ones(0, dtype=np.bool_))
    fp32_grads: B8 = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    overlap_tp_bwd: B8 = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    balance: B8 = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    dp_every_mb: B8 = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    param_overlap: B8 = field(default_factory=lambda: np.ones(0, dtype=np.bool_))
    """The parameter all-gather under the first forward (``Execution.overlap_param_gather``);
    True where not given."""
    recipe: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    ep_overlap: B8 = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    """EP all-to-alls hidden under the paired micro-batch's compute (``Execution.ep_overlap``)."""
    ep_dualpipe: B8 = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    """The overlap hides under the whole paired chunk (``Execution.ep_overlap_schedule``
    ``dualpipe``), not phase by phase."""
    connections: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Hardware work queues (``Execution.cuda_max_connections``; 8 where not given): with
    1 the overlap's kernels start in launch order (:func:`ep_overlap_exposed`)."""
    eager: B8 = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    """Unfused element-wise ops (``Execution.fused_elementwise`` off)."""
    fsdp1: B8 = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    """FSDP1's unsharded gradient passes (``Execution.fsdp1_flat_grads``)."""
    moe_sync: B8 = field(default_factory=lambda: np.ones(0, dtype=np.bool_))
    """MoE dispatch synchronises the host (``Execution.moe_dispatcher`` ``alltoall`` or
    ``flex``, ``alltoall`` the default where not given; :mod:`.dispatch`)."""
    moe_sort: B8 = field(default_factory=lambda: np.ones(0, dtype=np.bool_))
    """The dispatcher sorts the received tokens by local expert and back
    (``moe_dispatcher`` ``alltoall`` only; :func:`.layer.moe_sort_elements`); where not
    given, as ``moe_sync``."""
    hybridep_sms: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """SMs of HybridEP's all-to-all kernels, 0 for the model's all-to-all
    (``Execution.hybridep_sms``, :func:`.dispatch.hybridep_layer_s`); 0 where not given."""
    etp: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Expert tensor parallelism (``Execution.expert_tp``; tp where not given)."""
    domain: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Cards per NVLink domain (``Execution.nvlink_domain``); 0 = the system's."""
    adam: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Adam implementation code (``Execution.optimizer``, :data:`ADAM_IMPL_BYTES`);
    0 (fused) where not given."""
    offload: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Layers whose activations go to host memory (``Execution.cpu_offload_layers``)."""
    rc_modules: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Selective recomputation's modules (:func:`.execution.recompute_module_mask`); 0 with
    ``recompute`` selective = the attention core only (Megatron-Core's default)."""
    """Cast recipe codes (:data:`CAST_RECIPES`); default: FP8 delayed, FP4 NVFP4."""

    def __post_init__(self) -> None:
        """cp 1, fused gradient accumulation, the other flags off where not given."""
        if self.recipe.size != self.tp.size:
            self.recipe = np.select(
                [self.precision == PRECISIONS.index("fp8"),
                 self.precision == PRECISIONS.index("fp4")],
                [CAST_RECIPES.index("delayed"), CAST_RECIPES.index("nvfp4")], 0).astype(np.int64)
        if self.cp.size != self.tp.size:
            self.cp = np.ones_like(self.tp)
        if self.grad_fusion.size != self.tp.size:
            self.grad_fusion = np.ones(self.tp.size, dtype=np.bool_)
        if self.fp32_grads.size != self.tp.size:
            self.fp32_grads = np.zeros(self.tp.size, dtype=np.bool_)
        for name in ("overlap_tp_bwd", "balance", "dp_every_mb", "eager", "ep_overlap",
                     "ep_dualpipe", "fsdp1"):
            if getattr(self, name).size != self.tp.size:
                setattr(self, name, np.zeros(self.tp.size, dtype=np.bool_))
        if self.param_overlap.size != self.tp.size:
            self.param_overlap = np.ones(self.tp.size, dtype=np.bool_)
        if self.moe_sync.size != self.tp.size:
            self.moe_sync = np.ones(self.tp.size, dtype=np.bool_)
        if self.moe_sort.size != self.tp.size:
            self.moe_sort = self.moe_sync.copy()
        if self.etp.size != self.tp.size:
            self.etp = self.tp.copy()
        if self.connections.size != self.tp.size:
            self.connections = np.full(self.tp.size, 8, dtype=np.int64)
        if self.adam.size != self.tp.size:
            self.adam = np.zeros(self.tp.size, dtype=np.int64)
        if self.hybridep_sms.size != self.tp.size:
            self.hybridep_sms = np.zeros(self.tp.size, dtype=np.int64)
        if self.domain.size != self.tp.size:
            self.domain = np.zeros(self.tp.size, dtype=np.int64)
        if self.offload.size != self.tp.size:
            self.offload = np.zeros(self.tp.size, dtype=np.int64)
        if self.rc_modules.size != self.tp.size:
            self.rc_modules = np.zeros(self.tp.size, dtype=np.int64)

    def __len__(self) -> int:
        return int(self.tp.size)

    def take(self, idx: I64) -> Batch:
        """The configurations at ``idx``."""
        return Batch(**{k: v[idx] for k, v in self.__dict__.items()})


def offload_exposed(layer_bytes: F64, link_bps: float, fwd: F64, bwd: F64) -> tuple[F64, F64]:
    """(forward, backward) seconds one offloaded layer's host copies stay exposed.

    Transformer Engine's CPU offloading (``get_cpu_offload_context``, driven by
    Megatron-Core's ``cpu_offloading_num_layers``) copies a layer's saved activations to
    the host on a side stream while the next layer's forward runs, and prefetches them back
    while the following layer's backward runs: each copy of ``layer_bytes`` over the host
    link (``SystemSpec.host_link_gbps``, each way) hides under one layer's compute.

    >>> f, b = offload_exposed(np.array([4.5e9]), 450e9, np.array([0.004]), np.array([0.012]))
    >>> round(float(f[0]), 6), round(float(b[0]), 6)
    (0.006, 0.0)
    """
    copy = layer_bytes / link_bps
    out_f: F64 = np.maximum(copy - fwd, 0.0)
    out_b: F64 = np.maximum(copy - bwd, 0.0)
    return out_f, out_b


def selective_modules(rc: I64, mask: I64) -> I64:
    """The module mask selective recomputation runs (:data:`.execution.RECOMPUTE_MODULES`):
    0 unless ``rc`` is 1 (selective); an empty mask is Megatron-Core's default, the
    attention core (bit 0).

    >>> selective_modules(np.array([0, 1, 1, 2]), np.array([0, 0, 6, 6])).tolist()
    [0, 1, 6, 0]
    """
    out: I64 = np.where(rc == 1, np.where(mask == 0, 1, mask), 0).astype(np.int64)
    return out


def _has(mods: I64, name: str) -> B8:
    """Whether module ``name`` is in the masks ``mods``."""
    out: B8 = (mods >> RECOMPUTE_MODULES.index(name)) & 1 == 1
    return out


RC_MODULE_KERNELS = {"core_attn": 4.0, "layernorm": 2.0, "moe_act": 1.0, "mla_up_proj": 4.0,
                     "mlp": 3.0, "moe": 8.0, "shared_experts": 3.0}
"""Forward kernels each recompute module re-launches (``core_attn`` with flash: 1): the
scores, softmax, dropout and context of the unfused core; the two norms; the experts'
activation; MLA's Q and KV up-projection GEMMs and the two rotary passes
(``multi_latent_attention.py`` ``qkv_up_proj_and_rope_apply``); fc1, activation, fc2; the
MoE layer's router GEMM, its softmax / top-k, permute, fc1, activation, fc2, unpermute and
the shared experts' fc1 (the three shared-expert kernels when alone)."""


def selective_parts(k: dict[str, F64], mods: I64, flash: B8) -> tuple[F64, F64, F64, F64]:
    """(GEMM, attention-core, memory-bound seconds, kernels) the modules ``mods`` re-run.

    Megatron-Core (``transformer_layer.py``, ``moe/moe_layer.py``, ``moe/experts.py``,
    ``multi_latent_attention.py``): ``core_attn`` the attention core; ``layernorm`` the
    input and pre-MLP norms; ``moe_act`` the routed experts' activation; ``mla_up_proj``
    MLA's Q / KV up-projections and rotary; ``mlp`` a dense layer's MLP (not an MoE
    layer's); ``moe`` the whole MoE layer (router, permute, routed and shared experts,
    which it includes: ``moe_act`` and ``shared_experts`` then add nothing);
    ``shared_experts`` the shared experts. Keys of :func:`.layer.layer_kernels`.
    """
    has = {n: _has(mods, n) for n in RECOMPUTE_MODULES}
    moe = has["moe"]

    def part(name: str, key: str, inside_moe: bool = False) -> F64:
        on = has[name] & ~moe if inside_moe else has[name]
        out: F64 = np.where(on, k[key], 0.0)
        return out

    gemm = (part("mla_up_proj", "rc_mla_up_proj_gemm") + part("mlp", "rc_mlp_gemm")
            + part("moe", "rc_moe_gemm") + part("shared_experts", "rc_shared_experts_gemm", True))
    core = part("core_attn", "fwd_core")
    mem = (part("core_attn", "core_mem") + part("layernorm", "rc_layernorm_mem")
           + part("moe_act", "rc_moe_act_mem", True) + part("mla_up_proj", "rc_mla_up_proj_mem")
           + part("mlp", "rc_mlp_mem") + part("moe", "rc_moe_mem")
           + part("shared_experts", "rc_shared_experts_mem", True))
    kernels = np.zeros_like(gemm)
    for n, c in RC_MODULE_KERNELS.items():
        on = has[n] & ~moe if n in ("moe_act", "shared_experts") else has[n]
        c_ = np.where(flash, 1.0, c) if n == "core_attn" else c
        kernels = kernels + np.where(on, c_, 0.0)
    return gemm, core, mem, kernels


def ep_overlap_exposed(a2a: F64, fwd: F64, bwd: F64, mlp_f: F64, mlp_b: F64,
                       one_queue: B8 | None = None) -> F64:
    """Exposed seconds of an MoE layer's four all-to-alls under the EP overlap.

    Megatron-Core's ``overlap_moe_expert_parallel_comm`` (the batch-level overlap of
    DeepSeek-V3's DualPipe, §3.2.1 and Fig. 4) pairs one micro-batch's forward with
    another's backward and runs them in three phases, the communication stream beside
    the compute stream (the schedule as Megatron-LM pull request 2719, "Refine A2A
    overlap", tabulates it):

    ====== ============================ ===============================================
    phase  communication                compute
    ====== ============================ ===============================================
    1      combine (backward)           attention, router (forward)
    2      dispatch (fwd), dispatch     expert MLP backward, its weight gradient,
           (bwd)                        expert MLP forward
    3      combine (forward)            router, attention (backward)
    ====== ============================ ===============================================

    Each phase lasts the longer of its two streams, so with ``a2a`` the four
    all-to-alls (one is a2a/4), ``fwd`` / ``bwd`` the layer's forward / backward and
    ``mlp_f`` / ``mlp_b`` its expert GEMMs:

        exposed = max(0, a − (fwd − mlp_f)) + max(0, 2a − (mlp_f + mlp_b))
                  + max(0, a − (bwd − mlp_b)),   a = a2a / 4

    — never less than the whole-layer bound max(0, a2a − fwd − bwd): an all-to-all
    hides only under its own phase's compute.

    >>> one = np.array([1.0])
    >>> float(ep_overlap_exposed(4 * one, 3 * one, 5 * one, 1 * one, 2 * one)[0])  # a = 1
    0.0
    >>> # a = 2: phase 1 hides it (A_f 2), phase 2 exposes 4 − 3, phase 3 none (A_b 3)
    >>> float(ep_overlap_exposed(8 * one, 3 * one, 5 * one, 1 * one, 2 * one)[0])
    1.0
    >>> float(np.maximum(8 - 3 - 5, 0.0))  # the whole-layer bound would hide it all
    0.0

    **One hardware queue** (``one_queue``: ``CUDA_DEVICE_MAX_CONNECTIONS=1``,
    ``Execution.cuda_max_connections``). With one connection every stream's work goes
    through one hardware queue and starts in launch order: a kernel waiting on its
    dependency (the previous kernel of its stream, or an event) holds back every kernel
    launched after it (Megatron-LM issue 533, "It enforces the order of kernel execution
    on GPU as the kernel queuing order from host"; Megatron-LM pull request 2719: the
    overlap "requires CUDA_DEVICE_MAX_CONNECTIONS to be set to a relatively large value",
    with 1 it is weakened; ``token_dispatcher.py`` moves the shared experts' fc1 "to
    prevent the probs A2A block the launch of fc1 GEMM when CUDA_DEVICE_MAX_CONNECTIONS=1").
    Megatron-Core launches a paired layer (``TransformerLayerSchedulePlan.run``) as
    combine_bwd, attn_fwd, mlp_bwd, dispatch_fwd, mlp_bwd_dw, dispatch_bwd, mlp_fwd,
    combine_fwd, attn_bwd. A compute node is a chain of kernels, so nothing launched after
    it starts before its last kernel; a forward communication node has kernels after its
    all-to-all (dispatch: the probs all-to-all after the tokens'; combine: the unpermute
    and bias-dropout-add), so it too holds the queue until its all-to-all ends; a
    backward one ends with its all-to-all (autograd's reverse order) and lets the next
    node start beside it. Walking the queue: combine_bwd beside attn_fwd; dispatch_fwd
    only after mlp_bwd and before mlp_bwd_dw (exposed); dispatch_bwd beside mlp_fwd;
    combine_fwd before attn_bwd (exposed):

        exposed = max(0, a − (fwd − mlp_f)) + max(0, a − mlp_f) + 2a

    >>> q = np.array([True])
    >>> float(ep_overlap_exposed(4 * one, 3 * one, 5 * one, 1 * one, 2 * one, q)[0])  # a = 1
    2.0
    >>> float(ep_overlap_exposed(8 * one, 3 * one, 5 * one, 1 * one, 2 * one, q)[0])  # a = 2
    5.0
    """
    a = 0.25 * a2a
    out: F64 = (np.maximum(a - (fwd - mlp_f), 0.0) + np.maximum(2.0 * a - (mlp_f + mlp_b), 0.0)
                + np.maximum(a - (bwd - mlp_b), 0.0))
    if one_queue is not None and np.any(one_queue):
        queued: F64 = (np.maximum(a - (fwd - mlp_f), 0.0) + np.maximum(a - mlp_f, 0.0)
                       + 2.0 * a)
        out = np.where(one_queue, queued, out)
    return out


def ep_unpaired_share(pp: I64, vpp: I64, m: F64) -> F64:
    """Share of a stage's micro-batch chunks whose all-to-alls have no partner under the EP
    overlap.

    Megatron-Core pairs a forward with a backward only in the steady 1F1B state. Without a
    pipeline (``combined_1f1b_schedule_for_no_pipelining``) the first micro-batch's
    forward runs alone and the last one's backward too: 1 of m. With one
    (``schedules.py``, interleaved; the overlap needs virtual stages) a rank r runs
    W = 2(p − r − 1) + (v − 1)·p + 1 warm-up forwards (the "+ 1": "we schedule one extra
    micro-batch forward step before the 1f1b stages" for the overlap) and as many
    cool-down backwards alone, of its m·v chunks; the last stage (the model's critical
    one, r = p − 1): W = (v − 1)·p + 1. The share is min(1, W / (m·v)).

    >>> float(ep_unpaired_share(np.array([1]), np.array([1]), np.array([16.0]))[0])
    0.0625
    >>> float(ep_unpaired_share(np.array([4]), np.array([2]), np.array([16.0]))[0])  # 5 of 32
    0.15625
    >>> float(ep_unpaired_share(np.array([1]), np.array([1]), np.array([1.0]))[0])  # no partner
    1.0
    """
    p = pp.astype(np.float64)
    v = vpp.astype(np.float64)
    warm = np.where(pp > 1, (v - 1.0) * p + 1.0, 1.0)
    out: F64 = np.minimum(warm / (m * v), 1.0)
    return out


def kernel_rates(model: ModelSpec, system: SystemSpec, b: Batch) -> dict[str, F64]:
    """What every kernel of a configuration is priced with (arrays of N).

    ``clock`` (the fixed clock, lowered by a power cap: :mod:`.energy`); ``peaks``
    each precision's dense peak × the fraction its GEMMs reach
    (``SystemSpec.efficiency``), FLOP/s; ``peak_gemm`` the projection/MLP GEMMs' rate
    at the run's precision, recipe (MXFP8's kernel at 0.951 of per-tensor FP8's,
    :data:`.recipes.MX_GEMM_RATE`) and clock; ``peak_core`` and ``peak_flash`` the attention
    core's (16-bit under FP8/FP4, :mod:`.recipes`; flash at its measured fraction;
    ``peak_flash_bwd`` its backward's, ``SystemSpec.flash_bwd_efficiency``; both at the
    model's head dim, :func:`~.system.flash_head_dim_factor`));
    ``hbm`` achievable B/s; ``act_scale`` 2 for FP32 activations; ``tokens`` per
    micro-batch and card (b·s/cp); ``elem`` bytes per GEMM operand; ``low`` 1 where
    the GEMM inputs are cast (FP8 / FP4).
    """
    f_cap = clock_for_cap(b.cap_w, system.tdp_w, system.idle_w, system.clock_power)
    clock = np.minimum(b.clock, np.where(np.isfinite(b.cap_w), f_cap, 1.0))
    raw = np.array([system.peak(p) for p in PRECISIONS]) * 1e12
    peaks = raw * np.array([system.efficiency(p) for p in PRECISIONS])
    low = b.precision >= PRECISIONS.index("fp8")
    flash_eff = system.flash_efficiency or system.efficiency("bf16")
    flash_bwd = system.flash_bwd_efficiency or flash_eff
    # the kernel's rate at the model's head dim (the measured figures are at 128) on the
    # cards where TE runs cuDNN's kernel; MLA's 192 / 128 heads at their mean
    if system.accelerator in FLASH_HEAD_DIM_CARDS:
        d_att = (model.qk_dim + model.v_dim) / 2.0
        flash_bwd *= flash_head_dim_factor(d_att, FLASH_HEAD_DIM_RATE_BWD)
        flash_eff *= flash_head_dim_factor(d_att, FLASH_HEAD_DIM_RATE_FWD)
    att_raw = np.where(low, raw[1], raw[b.precision]) * clock
    return {
        "clock": clock,
        "peaks": peaks,
        "peak_gemm": peaks[b.precision] * _GEMM_RATE[b.recipe] * clock,
        "peak_core": np.where(low, peaks[1], peaks[b.precision]) * clock,
        "peak_flash": att_raw * flash_eff,
        "peak_flash_bwd": att_raw * flash_bwd,
        "hbm": np.array([system.hbm_tbps * 1e12 * system.memory_efficiency]),
        "act_scale": np.where(b.precision == 0, 2.0, 1.0),
        "tokens": b.mb.astype(np.float64) * model.seq_len / b.cp.astype(np.float64),
        "elem": np.array([4.0, 2.0, 2.0, 1.0, 0.5])[b.precision],
        "low": low.astype(np.float64),
    }


def fsdp1_grad_bytes(fp32_reduce: B8 | bool, dp: F64 | float, m: F64 | float
                     ) -> tuple[F64, F64]:
    """HBM bytes per parameter of the card's FSDP units, per micro-batch, of FSDP1's
    gradient handling (:data:`FSDP1_GRAD_BYTES`) over ``dp`` ranks, ``m`` micro-batches a
    step, as (on the compute stream, on FSDP's side streams).

    The compute stream runs autograd's ``cat``. The rest runs on FSDP1's
    ``post_backward`` stream (``_post_backward_hook``: ``with
    torch.cuda.stream(state._streams["post_backward"])``), ahead of the reduce-scatter it
    feeds, or on its ``pre_unshard`` stream (the 16-bit shard casts): the cast to the reduce
    dtype and the pre-division of the unsharded gradient, and per shard parameter (÷
    ``dp``) the post-division, the two 16-bit casts less the one the optimizer counts, and
    the accumulation after the first micro-batch.

    >>> [float(x) for x in fsdp1_grad_bytes(True, 8.0, 1.0)]   # 6 + 8 + (8 + 12 − 6) / 8
    [4.0, 15.75]
    >>> [float(x) for x in fsdp1_grad_bytes(False, 8.0, 1.0)]  # 16-bit: 4 + (4 + 6) / 8
    [4.0, 5.25]
    """
    g = np.where(fp32_reduce, 4.0, 2.0)
    mm = np.asarray(m, dtype=np.float64)
    unsharded = (np.where(fp32_reduce, FSDP1_GRAD_BYTES["cast"], 0.0)
                 + FSDP1_GRAD_BYTES["predivide"] * g / 4.0)
    casts = 2.0 * (4.0 + 2.0) - 6.0 / mm  # one a step is the optimizer's master copy
    shard = 2.0 * g + casts + 12.0 * (1.0 - 1.0 / mm)
    side = unsharded + shard / np.asarray(dp, dtype=np.float64)
    return (np.full_like(side, FSDP1_GRAD_BYTES["cat"]), np.asarray(side, dtype=np.float64))


def step_arrays(model: ModelSpec, system: SystemSpec, b: Batch, comm: CommModel,
                reserve_gib: float) -> dict[str, F64]:
    """Every output of the step model for every configuration (arrays of N)."""
    s, h, L = model.seq_len, model.hidden, model.layers
    tp, pp, dp, ep = (x.astype(np.float64) for x in (b.tp, b.pp, b.dp, b.ep))
    cp = b.cp.astype(np.float64)
    m = b.gb / (b.dp * b.mb)
    L_stage = np.ceil(L / pp)
    moe_share = model.moe_layers / L
    cards = tp * cp * pp * dp
    # cards per NVLink domain, per configuration (the search varies it; :mod:`.comm`)
    dom = np.where(b.domain > 0, b.domain, system.scale_up_domain)

    # ---- clocks, peaks, bytes per element (:func:`kernel_rates`)
    rates = kernel_rates(model, system, b)
    clock, peaks, peak_gemm, peak_core, peak_flash = (
        rates["clock"], rates["peaks"], rates["peak_gemm"], rates["peak_core"],
        rates["peak_flash"])
    hbm = float(rates["hbm"][0])
    act_scale, tokens, elem, low = (rates["act_scale"], rates["tokens"], rates["elem"],
                                    rates["low"] > 0)

    # ---- one layer, one micro-batch, per card: kernels by shape (:mod:`.layer`)
    k = layer_kernels(model, tokens, tp, b.sp, b.flash, elem, peak_gemm, peak_core, hbm,
                      system.sm_count, 2.0 * act_scale, cp=cp, flops_flash=peak_flash,
                      flops_flash_bwd=rates["peak_flash_bwd"],
                      store_overlap=system.gemm_store_overlap, ep=ep,
                      eager=b.eager if np.any(b.eager) else False,
                      etp=b.etp.astype(np.float64) if model.moe else None,
                      moe_sort=b.moe_sort)
    t_gemm = k["fwd_gemm"]
    # FP8 / FP4 casts of the GEMM inputs (forward) and output gradients (backward)
    c_f, c_b = cast_elements(model, tokens, tp, b.sp)
    cast_b = _CAST_B[b.recipe]
    cast_f = c_f * cast_b / hbm
    cast_bw = c_b * cast_b / hbm
    fwd_comp = k["fwd_gemm"] + k["fwd_core"]
    fwd_fixed = k["fwd_mem"] + k["core_mem"] + cast_f
    bwd_comp = k["bwd_gemm"] + k["bwd_core"]
    bwd_fixed = k["bwd_mem"] + cast_bw
    fwd = fwd_comp + fwd_fixed
    bwd = bwd_comp + bwd_fixed
    rc = b.recompute
    # selective recomputation by module (Megatron-Core ``recompute_modules``): each re-runs
    # its forward in the backward (:func:`selective_parts`)
    mods = selective_modules(rc, b.rc_modules)
    sel_gemm, sel_core, sel_mem, sel_kernels = selective_parts(k, mods, b.flash)
    rc_comp = np.where(rc == 2, fwd_comp, np.where(rc == 1, sel_gemm + sel_core,
                                                   np.where(rc == 3, k["op_rc_gemm"], 0.0)))
    rc_fixed = np.where(rc == 2, fwd_fixed, np.where(rc == 1, sel_mem,
                                                     np.where(rc == 3, fwd_fixed, 0.0)))
    t_rc = rc_comp + rc_fixed

    # ---- kernel gaps per layer and micro-batch
    k_fwd = np.where(b.flash, KERNELS_FWD - 4.0, KERNELS_FWD)
    k_cast = CAST_TENSORS * _CAST_K[b.recipe]  # cast kernels, forward and backward each
    gap_f = (k_fwd + k_cast) * KERNEL_GAP_S
    gap_b = (2.0 * k_fwd + k_cast + np.where(b.grad_fusion, 0.0, PARAM_TENSORS)) * KERNEL_GAP_S
    gap_rc = np.where(rc >= 2, gap_f, np.where(rc == 1, sel_kernels * KERNEL_GAP_S, 0.0))
    fwd = fwd + gap_f
    bwd = bwd + gap_b
    t_rc = t_rc + gap_rc

    # ---- TP / SP collectives per layer (16-bit b·s·h)
    act_msg = tokens * h * 2.0 * act_scale
    one = np.ones_like(b.tp)
    # a TP group wider than its NVLink domain spans k cards in each of n domains
    k_tp, n_tp = group_split(b.tp, one, dom)
    ar = comm.time("allreduce", k_tp, n_tp, act_msg)
    t_ag = comm.time("allgather", k_tp, n_tp, act_msg)
    rsag = comm.time("reduce_scatter", k_tp, n_tp, act_msg) + t_ag
    per_coll = np.where(b.sp, rsag, ar)
    n_coll_f = 2.0
    tp_f = n_coll_f * per_coll
    tp_b = 2.0 * per_coll
    # full recomputation re-runs both forward collective pairs; the ``mlp`` module the dense
    # MLP's (one pair on the dense layers), ``moe`` the MoE layer's (its expert-TP pair below)
    tp_rc = np.where(rc == 2, tp_f, np.where(_has(mods, "mlp"), (1.0 - moe_share) * per_coll,
                                             0.0))
    ex_f = np.where(b.overlap_tp, np.maximum(tp_f - t_gemm, 0.0), tp_f)
    # Megatron's async backward (overlap_tp_bwd): without SP the column-parallel
    # layers' input-gradient AllReduces run under their weight-gradient GEMMs;
    # with SP their ReduceScatters do, and the input AllGathers they redo for the
    # weight gradient run under the data-gradient GEMMs, while the row-parallel
    # layers' output-gradient AllGathers stay exposed (Execution docstring)
    async_b = np.where(
        b.sp, 2.0 * t_ag + np.maximum(2.0 * rsag - k["col_dgrad"] - k["col_wgrad"], 0.0),
        np.maximum(2.0 * ar - k["col_wgrad"], 0.0))
    ex_b = np.where(b.overlap_tp, np.maximum(tp_b - k["bwd_gemm"], 0.0),
                    np.where(b.overlap_tp_bwd, async_b, tp_b))
    ex_rc = np.where(b.overlap_tp, np.maximum(tp_rc - t_gemm, 0.0), tp_rc)
    if model.moe:
        # an MoE layer's MLP collective is the dispatcher's, over the expert-TP group:
        # the routed tokens all-gathered over etp after the all-to-all and reduce-scattered
        # before the combine (Megatron-Core, ``output_splits_tp``): T·k·(etp/tp)·h values,
        # in place of the dense MLP's pair over tp (etp 1: none)
        moe_msg = act_msg * model.top_k * model.rank_load * b.etp / b.tp
        k_et, n_et = group_split(b.etp, one, dom)
        moe_coll = (comm.time("reduce_scatter", k_et, n_et, moe_msg)
                    + comm.time("allgather", k_et, n_et, moe_msg))
        d_moe = moe_share * (moe_coll - per_coll)
        ex_f = ex_f + np.where(b.overlap_tp, 0.0, d_moe)
        ex_b = ex_b + np.where(b.overlap_tp, 0.0, d_moe)
        ex_rc = ex_rc + np.where(b.overlap_tp | ~_has(mods, "moe"), 0.0, moe_share * moe_coll)
    tp_layer = ex_f + ex_b + ex_rc

    # ---- EP all-to-all per MoE layer
    if model.moe:
        local_tokens = tokens / np.where(b.sp, tp, 1.0)
        # the whole send buffer of a rank: its tokens × k copies (collectives.costs.ring_alltoall:
        # S is the per-rank buffer, (ep − 1)/ep of it leaves the card)
        # the slowest rank's: routing skew beyond the capacity (ModelSpec.rank_load)
        a2a_bytes = local_tokens * model.top_k * model.rank_load * h * 2.0
        k_ep, n_ep = group_split(b.ep, b.etp, dom)  # EP strides etp
        a2a = 4.0 * comm.time("alltoall", k_ep, n_ep, a2a_bytes)
        for sms in HYBRIDEP_SMS[1:]:
            # HybridEP (``Execution.hybridep_sms``): each token sent once per destination
            # rank, at the measured dispatch / combine bandwidth (DeepEP hybrid-ep pull
            # request 428), inside one NVLink domain on a card with a measurement
            use = (b.hybridep_sms == sms) & (n_ep == 1)
            if not np.any(use):
                continue
            hy = hybridep_layer_s(system.accelerator, local_tokens, b.ep.astype(np.float64),
                                  float(model.experts), float(model.top_k), h, sms)
            if hy is not None:
                a2a = np.where(use, hy * model.rank_load, a2a)
        a2a_one = a2a / 4.0
        if np.any(b.ep_overlap):
            # Megatron-Core's EP all-to-all overlap (``overlap_moe_expert_parallel_comm``):
            # a forward and a backward micro-batch paired in three phases, each as long as
            # the longer of its communication and its compute (Megatron-LM pull request
            # 2719's schedule): the backward combine under the forward's attention and
            # router; the forward dispatch and the backward dispatch under the expert GEMMs
            # (backward, weight gradient, forward); the forward combine under the
            # backward's router and attention. DualPipe (``ep_dualpipe``): under the whole
            # paired chunk (no partner with a single micro-batch)
            phased = np.where(b.ep_dualpipe, np.maximum(a2a - (fwd + bwd), 0.0),
                              ep_overlap_exposed(a2a, fwd, bwd, k["moe_mlp_f"],
                                                 k["moe_mlp_b"], b.connections == 1))
            # only the steady 1F1B pairs a forward with a backward: the warm-up forwards
            # and as many cool-down backwards run alone (:func:`ep_unpaired_share`)
            u = np.where(b.ep_dualpipe, np.where(m >= 2, 0.0, 1.0),
                         ep_unpaired_share(b.pp, b.vpp, m))
            exposed = np.where(b.ep_overlap, (1.0 - u) * phased + u * a2a, a2a)
            # the hidden part holds ``comm_sms`` SMs (DeepSeek-V3 §3.2.2: 20 of 132 SMs run
            # the dispatch and combine): the compute under it takes sm/(sm − c) as long
            # (HybridEP's kernels hold their own: ``Execution.hybridep_sms``)
            if 0 < system.comm_sms < system.sm_count:
                c = np.where(b.hybridep_sms > 0, b.hybridep_sms, system.comm_sms).astype(
                    np.float64)
                exposed = exposed + (a2a - exposed) * c / (system.sm_count - c)
            a2a = np.where(b.ep > 1, exposed, a2a)
        # the ``moe`` module's recomputed forward dispatches and combines again, alone in
        # the backward (no partner micro-batch to hide under)
        ep_layer = a2a * moe_share + np.where(_has(mods, "moe") & (b.ep > 1),
                                              2.0 * a2a_one * moe_share, 0.0)
    else:
        ep_layer = np.zeros_like(fwd)

    # ---- host-bound MoE dispatch (:mod:`.dispatch`): after the dispatcher's device→host
    # synchronisation each segment takes max(GPU time, host time to issue its kernels:
    # 8 µs an op, 68.1 µs an expert GEMM of TE's GroupedLinear, ModelZoo issue 7); the
    # GPU time of a layer's forward (backward) segment: its kernels, exposed TP and half
    # the layer's exposed all-to-all
    host_f = np.zeros_like(fwd)
    host_b = np.zeros_like(fwd)
    if model.moe and np.any(b.moe_sync):
        h_f, h_b = moe_layer_host_s(model.experts / ep, low, 2.0 * _CAST_K[b.recipe],
                                    bias=model.bias)
        seg_a2a = 0.5 * ep_layer / moe_share
        host_f = np.where(b.moe_sync, moe_share * np.maximum(
            h_f - (fwd + ex_f + seg_a2a), 0.0), 0.0)
        host_b = np.where(b.moe_sync, moe_share * np.maximum(
            h_b - (bwd + ex_b + seg_a2a), 0.0), 0.0)
        fwd = fwd + host_f
        bwd = bwd + host_b

    # ---- CP: K and V all-gathered forward, their gradients reduce-scattered backward
    cp_layer = np.zeros_like(fwd)
    if np.any(b.cp > 1):  # (the search holds cp at 1: no table look-ups then)
        kv_w = float(model.kv_gather_width)  # K + V per token (MLA: up-projected)
        kv_bytes = cp * tokens * kv_w / tp * 2.0 * act_scale  # the gathered K and V
        k_cp, n_cp = group_split(b.cp, b.tp, dom)
        cp_ag = comm.time("allgather", k_cp, n_cp, kv_bytes)
        cp_layer = np.where(b.cp > 1, cp_ag * np.where(rc == 2, 2.0, 1.0)
                            + comm.time("reduce_scatter", k_cp, n_cp, kv_bytes), 0.0)

    # ---- parameters and memory on a card
    wb = np.array([STATE_BYTES[p][0] for p in PRECISIONS])[b.precision]
    mem = memory_arrays(model, system, b, reserve_gib)
    p_dense, p_expert = mem["p_dense"], mem["p_expert"]
    p_card = p_dense + p_expert

    # ---- the critical (last) stage per micro-batch
    # the output layer stays 16-bit under FP8 / FP4 (:mod:`.recipes`)
    logit_f, logit_b = logit_kernels(model, tokens, tp, np.where(low, 2.0, elem),
                                     np.where(low, peaks[1] * clock, peak_gemm), hbm,
                                     system.sm_count, system.gemm_store_overlap,
                                     eager=b.eager if np.any(b.eager) else False)
    acc_w = np.where(b.fp32_grads, 4.0, wb)
    accum = np.where(b.grad_fusion, 0.0, (ACCUM_BYTES + 2.0 * acc_w) * p_card / hbm)
    # FSDP1's gradient passes after every micro-batch's backward (:data:`FSDP1_GRAD_BYTES`):
    # autograd's cat on the compute stream (serial, like ``accum``)
    fsdp1 = b.fsdp1 & (b.zero >= 3) & (dp * cp > 1)
    fsdp1_side = np.zeros_like(tp)
    if np.any(fsdp1):
        on_compute, on_side = fsdp1_grad_bytes(b.fp32_grads, dp * cp, m)
        accum = accum + np.where(fsdp1, on_compute * p_card / hbm, 0.0)
        # the side streams' passes run ahead of each unit's reduce-scatter: on the DP
        # chain, hidden under the backward as it is (below)
        fsdp1_side = np.where(fsdp1, on_side * p_card / hbm, 0.0)
    # Llama 3's balanced stages (``pp_balance``): S = ⌈(L + 2)/p⌉ slots a stage, the
    # last holds S − 1 layers + the output layer, the middle ones S layers; the
    # slower of the two is the critical stage
    L_mid = L_stage
    w_logit = np.ones_like(tp)
    if np.any(b.balance):
        per_layer = fwd + bwd + t_rc + tp_layer + ep_layer + cp_layer
        S = np.ceil((L + 2.0) / pp)
        mid_critical = S * per_layer > (S - 1) * per_layer + logit_f + logit_b
        L_mid = np.where(b.balance, S, L_stage)
        L_stage = np.where(b.balance, np.where(mid_critical, S, S - 1), L_stage)
        w_logit = np.where(b.balance & mid_critical, 0.0, 1.0)
    # CPU offloading (Transformer Engine's ``get_cpu_offload_context``, which Megatron-Core's
    # ``cpu_offloading_num_layers`` drives): an offloaded layer's saved activations are
    # copied to the host while the next layer computes its forward, and back while the
    # layer after it computes its backward; the copy's excess over that compute is exposed
    off_f, off_b = offload_exposed(mem["act_layer_bytes"], system.host_link_gbps * 1e9,
                                   fwd + ex_f, bwd + ex_b)
    n_off = np.minimum(b.offload.astype(np.float64), L_stage)
    stage_f = L_stage * fwd + w_logit * logit_f + n_off * off_f
    stage_b = L_stage * bwd + w_logit * logit_b + accum + n_off * off_b
    stage_rc = L_stage * t_rc
    stage_comm = L_stage * (tp_layer + ep_layer + cp_layer)
    stage_mb = stage_f + stage_b + stage_rc + stage_comm
    # the fill and drain run through the other stages, which do not hold the output
    # layer (the last, critical stage does): their time per micro-batch prices the bubble
    bubble = (pp - 1) / b.vpp * (L_mid * (fwd + bwd + t_rc + tp_layer + ep_layer + cp_layer)
                                 + accum)

    # ---- PP sends
    across = (b.tp * b.dp) >= dom
    p2p = comm.p2p(across, act_msg / tp)
    pp_on = pp > 1
    pp_p2p = np.where(pp_on, 2 * (pp * b.vpp - 1) * p2p
                      + np.where(b.overlap_pp, 0.0, 2 * b.vpp * m * p2p), 0.0)

    # ---- DP (gradients reduced over dp × cp: the cp ranks hold the same weights)
    gw = np.where(b.fp32_grads, 4.0, wb)  # Megatron reduces its FP32 main_grad
    grad_bytes = p_dense * gw / b.compression
    egrad_bytes = p_expert * gw / b.compression
    k_dp, n_dp = group_split(b.dp * b.cp, b.tp, dom)
    # expert data parallelism: the tp·cp·dp ranks of a stage over ep × etp
    edp = np.maximum(b.tp * b.dp * b.cp // np.maximum(b.ep * b.etp, 1), 1)
    k_edp, n_edp = group_split(edp, b.etp * b.ep, dom)
    z = b.zero
    grad_t = np.where(z >= 1, comm.time("reduce_scatter", k_dp, n_dp, grad_bytes),
                      comm.time("allreduce", k_dp, n_dp, grad_bytes)) + fsdp1_side
    if model.moe:
        grad_t = grad_t + np.where(
            z >= 1, comm.time("reduce_scatter", k_edp, n_edp, egrad_bytes),
            comm.time("allreduce", k_edp, n_edp, egrad_bytes))
    gather = comm.time("allgather", k_dp, n_dp, p_dense * wb) + (
        comm.time("allgather", k_edp, n_edp, p_expert * wb) if model.moe else 0.0)
    gather = np.where(z >= 1, gather, 0.0)
    mb_bwd = L_stage * bwd
    mb_fwd = L_stage * fwd
    # the parameter all-gather hides under the first forward only with
    # ``overlap_param_gather``; without it Megatron-Core runs it synchronously after the
    # optimizer step (``Execution.overlap_param_gather``)
    gather_hide = np.where(b.overlap_dp & b.param_overlap, mb_fwd, 0.0)
    dp_exposed = np.maximum(grad_t - np.where(b.overlap_dp, mb_bwd, 0.0), 0.0) + np.maximum(
        gather - gather_hide, 0.0)
    dp_total = grad_t + gather
    z3 = np.where(z >= 3, np.maximum(2 * m * gather - (stage_f + stage_b) * m, 0.0), 0.0)
    dp_exposed = dp_exposed + z3
    if np.any(b.dp_every_mb):
        # gradients reduced after every micro-batch's backward (``dp_every_microbatch``):
        # m reductions on the DP stream, which can run from the first backward's end
        # (after the fill, half the bubble) to the step's end; the last one can hide
        # only under the last backward
        every = m * grad_t
        window = np.where(b.overlap_dp, (m - 1) * stage_mb + bubble / 2 + mb_bwd, 0.0)
        dp_every = np.maximum(grad_t - np.where(b.overlap_dp, mb_bwd, 0.0),
                              every - window)
        dp_exposed = np.where(
            b.dp_every_mb, np.maximum(dp_every, 0.0) + np.maximum(
                gather - gather_hide, 0.0) + z3, dp_exposed)
        dp_total = np.where(b.dp_every_mb, every + gather, dp_total)
    # the hidden part of the DP collectives holds ``comm_sms`` SMs: the compute it
    # overlaps runs on the rest (SystemSpec.comm_sms), i.e. takes sm/(sm − c) as long
    if 0 < system.comm_sms < system.sm_count:
        busy_c = m * (stage_f + stage_b + stage_rc)
        hidden = np.clip(dp_total - (dp_exposed - z3), 0.0, busy_c)
        dp_exposed = dp_exposed + np.where(
            b.overlap_dp, hidden * system.comm_sms / (system.sm_count - system.comm_sms), 0.0)
    comp = np.where(b.compression > 1, (2 + 2 / b.compression) * p_dense * wb / hbm, 0.0)

    # ---- optimizer (memory-bound passes over the card's shard, core docstring)
    dpc = dp * cp
    shard = p_dense / np.where(z >= 1, dpc, 1.0) + p_expert / np.where(z >= 1, edp, 1.0)
    grad_buf = p_card / np.where(z >= 2, dpc, 1.0)
    adam = np.array(ADAM_IMPL_BYTES)[b.adam]  # fused, foreach or per-parameter loop
    optim = (shard * (adam + np.array(OPTIM_EXTRA_BYTES)[b.precision])
             + grad_buf * ZERO_GRAD_BYTES) / hbm
    # the low-precision weight copies, cast once a step (TE caches them over micro-batches)
    optim = optim + p_card * cast_b / hbm

    step = m * stage_mb + bubble + pp_p2p + dp_exposed + comp + optim

    # ---- the critical stage's busy time by class of op (:mod:`.recipes`): per step
    rc_gemm = np.where(rc == 2, k["fwd_gemm"], np.where(rc == 3, k["op_rc_gemm"],
                                                        np.where(rc == 1, sel_gemm, 0.0)))
    rc_core = np.where(rc == 2, k["fwd_core"], np.where(rc == 1, sel_core, 0.0))
    rc_mem = np.where(rc >= 2, k["fwd_mem"] + k["core_mem"], np.where(rc == 1, sel_mem, 0.0))
    rc_cast = np.where(rc >= 2, cast_f, 0.0)
    per_step = m * L_stage
    op_cast_w = p_card * cast_b / hbm
    # ---- FLOPs, utilisation
    mflops, hflops = step_flops(model, 1.0, "none")
    _, hf_sel = step_flops(model, 1.0, "selective")
    _, hf_full = step_flops(model, 1.0, "full")
    _, hf_op = step_flops(model, 1.0, "op")
    hw_per_seq = np.where(rc == 2, hf_full, np.where(_has(mods, "core_attn"), hf_sel,
                                                     np.where(rc == 3, hf_op, hflops)))
    dense_peak = np.array([system.peak(p) for p in PRECISIONS])[b.precision] * 1e12
    model_flops = mflops * b.gb
    mfu = model_flops / (step * cards * dense_peak)
    hfu = hw_per_seq * b.gb / (step * cards * dense_peak)

    # ---- energy by op mix (:mod:`.energy`): compute-bound, memory-bound, exposed
    # communication; the bubble, kernel gaps and host-bound waits draw idle power
    busy = m * (stage_f + stage_b + stage_rc) + comp + optim
    util = np.clip(busy / step, 0.0, 1.0)
    op_gemm = per_step * (k["fwd_gemm"] + k["bwd_gemm"] + rc_gemm)
    op_attn = per_step * (k["fwd_core"] + k["bwd_core"] + rc_core)
    op_mem = per_step * (k["fwd_mem"] + k["core_mem"] + k["bwd_mem"] + rc_mem) + m * accum
    op_casts = per_step * (cast_f + cast_bw + rc_cast) + op_cast_w
    op_logit = m * w_logit * (logit_f + logit_b)
    t_compute = op_gemm + op_attn + op_logit
    t_memory = op_mem + op_casts + (optim - op_cast_w) + comp
    t_comm = m * stage_comm + pp_p2p + dp_exposed
    p_card_w = op_mix_power(t_compute, t_memory, t_comm, step, clock, system.tdp_w,
                            system.idle_w, system.clock_power,
                            hbm_power_w(hbm, system.tdp_w, system.idle_w),
                            system.memory_sm_activity, system.comm_activity)
    servers = np.ceil(cards / system.cards_per_server)
    facility_w = (cards * (p_card_w + system.network_w_per_card)
                  + servers * system.server_static_w) * system.pue
    energy = facility_w * step
    tokens_step = b.gb * float(s)

    return {
        "step_time_s": step,
        "mfu": mfu,
        "hfu": hfu,
        "tokens_per_s": tokens_step / step,
        "model_flops_per_step": model_flops.astype(np.float64),
        "cards": cards,
        "micro_batches": m.astype(np.float64),
        "clock": clock,
        "card_power_w": p_card_w,
        "facility_power_w": facility_w,
        "utilisation": util,
        "energy_j_per_step": energy,
        "energy_j_per_token": energy / tokens_step,
        "cost_per_step": cards * step / 3600.0 * system.price_per_card_hour,
        "forward": m * stage_f,
        "backward": m * stage_b,
        "recompute": m * stage_rc,
        "tp_comm": m * L_stage * tp_layer,
        "cp_comm": m * L_stage * cp_layer,
        "ep_exposed": m * L_stage * ep_layer,
        "pp_bubble": bubble,
        "pp_p2p": pp_p2p,
        "dp_exposed": dp_exposed,
        "compression": comp,
        "optimizer": optim,
        "bubble_fraction": (pp - 1) / (b.vpp * m),
        "mem_weights": mem["mem_weights"],
        "mem_gradients": mem["mem_gradients"],
        "mem_optimizer": mem["mem_optimizer"],
        "mem_activations": mem["mem_activations"],
        "mem_total": mem["mem_total"],
        "layer_forward_s": fwd + ex_f,
        "layer_backward_s": bwd + ex_b,
        "layer_recompute_s": t_rc + ex_rc,
        "stage_compute_s": m * L_stage * (fwd_comp + bwd_comp + rc_comp),
        "stage_logit_s": m * (logit_f + logit_b),
        "stage_fixed_s": m * L_stage * (fwd_fixed + bwd_fixed + rc_fixed),
        "op_gemm": op_gemm,
        "op_attention": op_attn,
        "op_memory_bound": op_mem,
        "op_casts": op_casts,
        "op_kernel_gaps": per_step * (gap_f + gap_b + gap_rc + host_f + host_b),
        "layer_host_f": host_f,
        "layer_host_b": host_b,
        "op_output_layer": op_logit,
        "energy_compute_s": t_compute,
        "energy_memory_s": t_memory,
        "energy_comm_s": t_comm,
        "op_optimizer": optim - op_cast_w,
    }


def memory_arrays(model: ModelSpec, system: SystemSpec, b: Batch,
                  reserve_gib: float) -> dict[str, F64]:
    """Memory per card of the critical (first/last) stage, GiB (:mod:`.memory`).

    Also returns ``p_dense`` / ``p_expert``: the parameters a card holds
    (its stage's layers + the output layer, split by tp; experts also by ep;
    balanced stages: the stage with the most, S layers or S − 1 + V·h).
    Separate from :func:`step_arrays` so a memory-only question (does this
    model fit anywhere?) needs no collective tables.
    """
    s, h, V, L = model.seq_len, model.hidden, model.vocab, model.layers
    tp, pp, dp, ep = (x.astype(np.float64) for x in (b.tp, b.pp, b.dp, b.ep))
    mb = b.mb.astype(np.float64)
    cp = b.cp.astype(np.float64)
    m = b.gb / (b.dp * b.mb)
    L_stage = np.ceil(L / pp)
    moe_share = model.moe_layers / L
    act_scale = np.where(b.precision == 0, 2.0, 1.0)  # FP32 activations are twice 16-bit
    z = b.zero

    dense_layer = model.layer_params if not model.moe else (
        model.attention_params + 4 * h + (1 - moe_share) * model.dense_mlp_params
        + moe_share * model.shared_params)  # shared experts: replicated over EP, as dense
    expert_layer = moe_share * model.experts * model.mlp_params if model.moe else 0.0
    p_dense = (L_stage * dense_layer + V * h) / tp
    etp = b.etp.astype(np.float64)  # each expert split over etp cards (tp by default)
    p_expert = L_stage * expert_layer / (etp * ep)
    p_mem_dense, p_mem_expert = p_dense, p_expert  # the first stage (the activation peak)
    if np.any(b.balance):
        # Llama 3's balanced stages: the first holds S − 1 layers + the embedding,
        # a middle one S layers (the most parameters when a layer outweighs V·h)
        S = np.ceil((L + 2.0) / pp)
        p_mem_dense = np.where(b.balance, ((S - 1) * dense_layer + V * h) / tp, p_dense)
        p_dense = np.where(b.balance, np.maximum(S * dense_layer, (S - 1) * dense_layer
                                                 + V * h) / tp, p_dense)
        p_mem_expert = np.where(b.balance, (S - 1) * expert_layer / (etp * ep), p_expert)
        p_expert = np.where(b.balance, S * expert_layer / (etp * ep), p_expert)
    wgo = np.array([STATE_BYTES[p] for p in PRECISIONS])[b.precision]
    dpz = np.maximum(dp * cp, 1.0)  # ZeRO / distributed optimizer shard over dp × cp
    # the experts' states shard over the expert-DP group, tp·cp·dp / (ep·etp) ranks
    # (Megatron-Core's distributed optimizer: expert parameters in their own buffers)
    edpz = np.maximum(tp * cp * dp / np.maximum(ep * etp, 1.0), 1.0)

    def sharded(stage: int, bytes_: F64) -> F64:
        dense: F64 = np.where(z >= stage, p_mem_dense / dpz, p_mem_dense)
        expert: F64 = np.where(z >= stage, p_mem_expert / edpz, p_mem_expert)
        out: F64 = bytes_ * (dense + expert)
        return out

    weights = sharded(3, wgo[:, 0])
    grads = sharded(2, np.where(b.fp32_grads, 4.0, wgo[:, 1]))
    optimizer = sharded(1, wgo[:, 2])
    per_layer = act_scale * saved_activation_bytes(
        model, mb, tp=tp, sp=b.sp, recompute=b.recompute, flash=b.flash, cp=cp,
        modules=selective_modules(b.recompute, b.rc_modules))
    v = b.vpp.astype(np.float64)
    in_flight = chunks_in_flight(pp, m, v)
    layers_held = np.where(b.gpipe, m * L_stage, in_flight * L_stage / v)
    if np.any(b.balance):
        # balanced: the first stage's S slots hold S − 1 layers, its first chunk one
        # layer short (:func:`.memory.first_chunk_share`)
        S = np.ceil((L + 2.0) / pp)
        short = np.where(b.gpipe, m, first_chunk_share(pp, m, v, in_flight))
        layers_held = np.where(b.balance, np.where(b.gpipe, m * (S - 1),
                                                   in_flight * S / v - short), layers_held)
    # CPU offloading (Megatron-Core ``cpu_offloading_num_layers``, pp 1 only): that many
    # layers' activations wait in host memory, not in HBM
    offloaded = np.minimum(b.offload.astype(np.float64), layers_held)
    acts = (layers_held - offloaded) * per_layer + np.where(
        pp == 1, 4.0 * s * mb * V / (tp * cp), 0.0)
    total = weights + grads + optimizer + acts + reserve_gib * GIB
    return {
        "p_dense": p_dense, "p_expert": p_expert,
        "mem_weights": weights / GIB, "mem_gradients": grads / GIB,
        "mem_optimizer": optimizer / GIB, "mem_activations": acts / GIB,
        "act_layer_bytes": per_layer,
        "mem_total": total / GIB,
    }
