"""The hardware a run lands on: :class:`SystemSpec` and :func:`system_for_accelerator`.

Plain JSON in and out (``to_dict`` / ``from_dict``), so the twin builds one from
a cluster's own rows. Fields and their sources:

* per-precision dense peaks (TFLOP/s) from the accelerator's datasheet (the
  twin's catalogue stores the dense figures); FP16 = BF16 on every catalogue
  card; a precision without a peak (FP8 on an A100) is not offered;
* ``matmul_efficiency`` — the fraction of peak the tensor cores reach in a wave
  of GEMM tiles: H100 SXM 792.1 / 989.5 = 0.80 (S. Bekman, *ML Engineering*,
  "Maximum Achievable Matmul FLOPS", mamf-finder); A100 0.75, calibrated on
  Korthikanti et al.'s per-layer forward time (:data:`MATMUL_EFFICIENCY`); 0.80
  where no measurement is known. This is the one compute constant.
* ``memory_efficiency`` — achieved / nominal HBM bandwidth of a streaming kernel:
  0.90 (STREAM-like copies reach ~1.8 of 2.0 TB/s on A100 80 GB and ~3.0 of
  3.35 TB/s on H100 SXM; NVIDIA/cuda-samples bandwidthTest, Citadel's
  "Dissecting the Ampere/Hopper" microbenchmarks);
* scale-up per card per direction (Gb/s) = the datasheet's bidirectional GB/s
  × 8 / 2 (H100: 900 GB/s → 3,600 Gb/s), its technology (``nvlink``,
  ``hccs``…) and topology: ``switch`` (every card of the domain reaches every
  other at full rate: an 8-card NVLink server) or ``torus`` (``scale_up_dims``,
  e.g. the seeds' 8×8×8 = 512-card supernode);
* scale-out: one NIC per card of ``scale_out_gbps`` (400 Gb/s NDR / 400G RoCE),
  rail-aligned (card r of every server on rail r), ``scale_out_latency_us``;
* power: ``tdp_w``, ``idle_w`` per card, ``server_static_w`` per server (CPUs,
  memory, fans, NICs: DGX A100 6.5 kW max − 8 × 400 W ≈ 3.3 kW at full load,
  about 1.5 kW of it constant; DGX H100 10.2 kW − 8 × 700 W = 4.6 kW), the network's
  ``network_w_per_card`` (switch ports and optics: a 64-port 400G switch ≈ 1.5 kW +
  optics ≈ 50 W per card on a 2-tier rail fabric), ``pue`` (the seeds: ≤ 1.05);
* ``clock_power`` — points (clock fraction, dynamic-power fraction) of the
  card's DVFS curve (see :mod:`simulation.training.energy`), overridable.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from ._check import check_keys, choice, integer, number
from .errors import TrainingInputError
from .gemm import mma_efficiency
from .recipes import fp4_over_fp8

__all__ = [
    "HOST_LINK_GBPS",
    "FLASH_BWD_SMEM_BOUND",
    "FLASH_BWD_TFLOPS_PER_SM",
    "FLASH_EFFICIENCY",
    "FLASH_HEAD_DIM_CARDS",
    "FLASH_HEAD_DIM_RATE_BWD",
    "FLASH_HEAD_DIM_RATE_FWD",
    "GEMM_STORE_OVERLAP",
    "MATMUL_EFFICIENCY",
    "MATMUL_EFFICIENCY_BY_PRECISION",
    "MAMF_SHAPE",
    "PRECISIONS",
    "BLOCK_SCALED_MMA",
    "SM_COUNT",
    "SystemSpec",
    "default_clock_power",
    "flash_bwd_efficiency",
    "flash_head_dim_factor",
    "system_for_accelerator",
    "with_scale_up_domain",
]

PRECISIONS = ("fp32", "bf16", "fp16", "fp8", "fp4")

MATMUL_EFFICIENCY: dict[str, float] = {
    "a100-sxm-80gb": 0.75,
    "h100-sxm5-80gb": 792.1 / 989.5,
    "h200-sxm-141gb": 792.1 / 989.5,
    "h800-sxm5-80gb": 792.1 / 989.5,
}
"""The tensor cores' achieved fraction of the dense BF16 peak inside a wave of
GEMM tiles (wave quantization and the C store are priced on top, :mod:`.gemm`).

H100 / H200: the measured maximum achievable matmul rate, 792.1 / 989.5
(mamf-finder, S. Bekman, *ML Engineering*, compute/accelerator/README.md; H200
shares the H100's compute die).

A100: **0.75, calibrated on one published component measurement**, the forward
pass of one layer of Korthikanti et al.'s 22B model (2022, Table 4: 7.7 ms, TP 8,
micro-batch 4, no recomputation) — the way ``NVLS_EFFICIENCY`` is calibrated on
one nccl-tests point. mamf-finder's 267.9 / 312 = 0.86 is the *fastest* of 100
iterations of the best of thousands of shapes on one idle GPU with a 2023 cuBLAS;
priced at it, the model is 7–12 % faster than *every* Table 4 figure — forward and
backward, with and without sequence parallelism and recomputation — while the
differences between the experiments (what SP saves, what full or selective
recomputation adds) match within 0.3 ms: the memory-bound kernels and the TP
collectives are right, the tensor-core rate of the runs' GEMMs is not. The check is
the other nine Table 4 figures (within 2.2 %, ``tests/simulation/training``) and
the whole-run table (docs/simulation.md, "Training fidelity"), whose 22B row is
therefore not independent of this constant. Other cards: 0.80
(``DEFAULT_MATMUL_EFFICIENCY``)."""
DEFAULT_MATMUL_EFFICIENCY = 0.80

_MAMF = ("S. Bekman, *ML Engineering*, compute/accelerator/README.md, \"Maximum Achievable "
         "Matmul FLOPS comparison table\" (mamf-finder, mean of 100 iterations)")
MATMUL_EFFICIENCY_BY_PRECISION: dict[str, dict[str, float]] = {
    "h100-sxm5-80gb": {"fp8": 1402.6 / 1979},
    "h800-sxm5-80gb": {"fp8": 1402.6 / 1979},
    "h200-sxm-141gb": {"fp8": 1453.4 / 1979},
    "b200-sxm-180gb": {"bf16": 1745.0 / 2250, "fp8": 3432.5 / 4500},
    "gb200-186gb": {"bf16": 1822.0 / 2500, "fp8": 3615.6 / 5000},
    "gb300-288gb": {"bf16": 1769.0 / 2250, "fp8": 3353.3 / 4500},
}
"""The achieved fraction of each precision's own dense peak, where it differs from
``matmul_efficiency`` (the BF16 figure): the MAMF table's measured maximum for that
accelerator and dtype (``_MAMF``): H100 SXM FP8 1,402.6 of 1,979 (0.709, below BF16's
0.80: the FP8 main loop is twice as fast, the rest of a tile's work is not), H200
1,453.4; B200 BF16 1,745 of 2,250, FP8 3,432.5 of 4,500; GB200 1,822 of 2,500 and
3,615.6 of 5,000; GB300 the table's B300 SXM row (1,769 / 3,353.3 of 2,250 / 4,500,
"same as B200, newer torch/cuda"). FP4: no MAMF measurement is published; an NVFP4 GEMM
runs at :data:`~simulation.training.recipes.FP4_OVER_FP8` = 1.81× the card's FP8 rate
on a card with the B300's 3× FP4 / FP8 peak ratio (Transformer Engine's GEMM profiling
tutorial, measured on a B300), transferred to the others' peak ratio and FP8 efficiency
by :func:`~simulation.training.recipes.fp4_over_fp8` (GB200: 1.445×; docs/training.md),
set by :func:`system_for_accelerator`."""

FLASH_EFFICIENCY: dict[str, float] = {
    "a100-sxm-80gb": 0.73,
    "a100-sxm-40gb": 0.73,
    "h100-sxm5-80gb": 335.0 / 989.5,
    "h200-sxm-141gb": 335.0 / 989.5,
    "h800-sxm5-80gb": 335.0 / 989.5,
    "b200-sxm-180gb": 1613.0 / 1.3 / 2250,
    "gb200-186gb": 1613.0 / 1.3 / 2250,
    "gb300-288gb": 1613.0 / 1.3 / 2250,
}
"""Blackwell: cuDNN 9.13's fused attention, the kernel Transformer Engine runs there,
derived from FlashAttention-4's comparison (Zadouri, Dao et al. 2026, "FlashAttention-4:
Algorithm and Kernel Pipelining Co-Design for Asymmetric Hardware Scaling": up to
1,613 TFLOP/s BF16 forward on a B200, "up to 1.3× over cuDNN 9.13"): 1,613 / 1.3 of
2,250 = 0.55 — the exponential units and shared memory did not double with the
tensor cores. GB200 / GB300: the same fraction of their peak.

FlashAttention-2's measured rate ÷ dense BF16 peak, head dim 128, causal,
long sequences: H100 SXM 335 TFLOP/s forward at 16k tokens (Shah et al. 2024,
FlashAttention-3, Fig. "Attention forward speed, head dim 128 (H100 80GB SXM5)",
the FlashAttention-2 bars; FLOPs counted on the causal half); A100 the "up to 73 %
of the theoretical maximum" of Dao 2023 (FlashAttention-2, abstract). The
attention kernel keeps softmax, masking and rescaling in the same loop as its
two small-k GEMMs, so it runs well below a large GEMM — on Hopper FA-2 does not
use the wgmma/TMA path at all. Other cards: ``matmul_efficiency``."""

FLASH_BWD_TFLOPS_PER_SM = 518.0 / 132
"""The attention backward's rate per SM where it is bound by shared-memory traffic:
cuDNN's fused-attention backward on an H100 SXM5 (132 SMs), head dim 128, 8k tokens,
518 TFLOP/s (Shah et al. 2024, FlashAttention-3, Fig. "Attention backward speed, head
dim 128 (H100 80GB SXM5)", the cuDNN bars; FA-3 561, FA-2 318).

Why per SM: the backward runs five GEMMs per tile (it recomputes S and P, then dV, dP,
dS, dK, dQ), whose operands cycle through shared memory, so it moves far more shared-
memory bytes per FLOP than the forward. From Hopper to Blackwell the tensor cores
doubled (BF16 1 → 2.25 PFLOP/s) while "both the SFU count and shared memory bandwidth
remain[ed] unchanged", which makes the Blackwell backward bound by "the shared-memory
traffic during the BWD computation" (the FlashAttention-4 authors' Together AI blog
post, "FlashAttention-4", 2026; Zadouri, Dao et al., arXiv 2603.05451). A kernel bound
by shared memory runs at SMEM bandwidth ÷ its bytes per FLOP, which scales with the SM
count (and the clock), not with the tensor cores: so the Hopper measurement per SM,
× the card's SMs. Cards in
:data:`FLASH_BWD_SMEM_BOUND` only; Hopper itself keeps its measured kernel rate
(:data:`FLASH_EFFICIENCY`)."""

FLASH_BWD_SMEM_BOUND = ("b200-sxm-180gb", "gb200-186gb", "gb300-288gb")
"""Cards whose attention backward is priced as shared-memory bound
(:data:`FLASH_BWD_TFLOPS_PER_SM`): Blackwell (5th-generation tensor cores, 2.25× Hopper's
MMA rate per SM-clock over the same shared memory)."""


def flash_bwd_efficiency(slug: str, sms: int, bf16_tflops: float) -> float:
    """Fraction of the BF16 peak the attention backward reaches (0: the forward's).

    Shared-memory bound cards (:data:`FLASH_BWD_SMEM_BOUND`): 518/132 TFLOP/s per SM
    × SMs, over the BF16 peak. A B200 (148 SMs, 2,250 TFLOP/s) and an H100-class
    card with as many SMs reach the same backward rate:

    >>> round(flash_bwd_efficiency("b200-sxm-180gb", 148, 2250) * 2250, 1)
    580.8
    >>> flash_bwd_efficiency("h100-sxm5-80gb", 132, 989.5)
    0.0
    """
    if slug not in FLASH_BWD_SMEM_BOUND or sms <= 0 or bf16_tflops <= 0:
        return 0.0
    return min(FLASH_BWD_TFLOPS_PER_SM * sms / bf16_tflops, 1.0)


FLASH_HEAD_DIM_RATE_FWD: dict[int, float] = {64: 388.0 / 539.0, 128: 1.0, 256: 509.0 / 539.0}
"""The attention forward's rate at head dim d over its rate at head dim 128 (the dim
:data:`FLASH_EFFICIENCY` was measured at): cuDNN's fused attention on an H100 SXM5, causal,
16k tokens — 388 TFLOP/s at head dim 64, 539 at 128, 509 at 256 (Shah et al. 2024,
FlashAttention-3, Fig. "Attention forward speed, head dim 64 / 128 / 256 (H100 80GB SXM5)",
the cuDNN bars, panels (b), (d), (f)). cuDNN because it is the kernel Transformer Engine
runs on Hopper and Blackwell when both it and FlashAttention qualify
(``transformer_engine/pytorch/attention/dot_product_attention/utils.py``: "Disabling
FlashAttention to give FusedAttention preference on Hopper+"), and the only one that
runs a learnable-sink softmax (GPT-OSS; below). Why a smaller head is slower per FLOP:
each score element costs one exponential and one online-softmax rescale whatever d is,
while its GEMM work is 4·d FLOPs, so at d = 64 the non-matmul units carry twice the load
per FLOP. Between the three measured dims :func:`flash_head_dim_factor` interpolates
linearly; outside them it holds the end value. Blackwell has no published per-head-dim
measurement of its cuDNN kernel: the Hopper ratio is applied there too (an assumption,
and a generous one: FlashAttention-4's paper finds Blackwell's exponential units, not its
tensor cores, the forward's bound already at d = 128)."""

FLASH_HEAD_DIM_RATE_BWD: dict[int, float] = {64: 432.0 / 518.0, 128: 1.0}
"""The attention backward's rate at head dim d over its rate at 128: cuDNN on an H100
SXM5, 8k tokens, 432 TFLOP/s at head dim 64 and 518 at 128 (Shah et al. 2024,
FlashAttention-3, Fig. "Attention backward speed, head dim 64 / 128 (H100 80GB SXM5)",
the cuDNN bars; 518 is :data:`FLASH_BWD_TFLOPS_PER_SM`'s figure). No backward figure above
128 is used: larger heads keep 128's rate. Applied to the Blackwell backward
(:func:`flash_bwd_efficiency`) as well, by the same assumption as the forward's."""


FLASH_HEAD_DIM_CARDS = ("h100-sxm5-80gb", "h200-sxm-141gb", "h800-sxm5-80gb",
                        "b200-sxm-180gb", "gb200-186gb", "gb300-288gb")
"""Cards whose attention rate is scaled by head dim (:data:`FLASH_HEAD_DIM_RATE_FWD`): the
Hopper and Blackwell parts, where Transformer Engine runs cuDNN's kernel. Others (A100:
FlashAttention-2's "up to 73 %", Dao 2023) keep their figure at every head dim."""


def flash_head_dim_factor(d: float, table: Mapping[int, float]) -> float:
    """The attention kernel's rate at head dim ``d`` over its rate at 128 (``table``:
    :data:`FLASH_HEAD_DIM_RATE_FWD` or :data:`FLASH_HEAD_DIM_RATE_BWD`): linear between the
    measured dims, the end value outside them.

    >>> round(flash_head_dim_factor(64, FLASH_HEAD_DIM_RATE_FWD) * 539, 1)  # the figure
    388.0
    >>> flash_head_dim_factor(128, FLASH_HEAD_DIM_RATE_FWD)
    1.0
    >>> round(flash_head_dim_factor(96, FLASH_HEAD_DIM_RATE_FWD), 4)  # halfway 64 → 128
    0.8599
    >>> round(flash_head_dim_factor(32, FLASH_HEAD_DIM_RATE_BWD) * 518, 1)  # held at 64's
    432.0
    >>> flash_head_dim_factor(192, FLASH_HEAD_DIM_RATE_BWD)  # held at 128's
    1.0
    """
    dims = sorted(table)
    if d <= dims[0]:
        return table[dims[0]]
    if d >= dims[-1]:
        return table[dims[-1]]
    for lo, hi in zip(dims, dims[1:], strict=False):
        if lo <= d <= hi:
            return table[lo] + (table[hi] - table[lo]) * (d - lo) / (hi - lo)
    return 1.0  # unreachable: d lies between two measured dims


GEMM_STORE_OVERLAP: dict[str, bool] = {
    "h100-sxm5-80gb": False,
    "h200-sxm-141gb": False,
    "h800-sxm5-80gb": False,
    "b200-sxm-180gb": True,
    "gb200-186gb": True,
    "gb300-288gb": True,
}
"""Cards whose GEMM kernels hide the C store behind the next tile's main loop
(:mod:`simulation.training.gemm`, "Epilogue"). Blackwell: True — its kernels keep the
accumulators in tensor memory, double-buffered, and MAMF's best shapes need it: B300
BF16 1,769 TFLOP/s at 12,288 × 18,432 × 1,024 (a 453 MB BF16 C, 63 µs at 7.2 TB/s, of
262 µs) and GB200 FP8 3,615.6 at 19,456 × 5,120 × 1,536 would need main loops faster
than the peak with the store exposed (``_MAMF``). Hopper: False — DeepGEMM's FP8
GEMMs on an H800 (deepseek-ai/DeepGEMM README at 55ab91f, M = 4,096: 1,426 TFLOP/s at
K = 16,384, 751 at K = 512; CUTLASS 3.6's persistent kernels 1.1–1.3× slower on the same
shapes) lose per tile the time of its C store, as the model prices it with no constant
fitted to the curve's shape (:mod:`.gemm`; ``tests/simulation/training/test_gemm_shape.py``:
within 7.2 % on the dense rows, 3.3 % on the contiguous grouped ones). A100 (CUTLASS 2.x-style
one-tile-per-block kernels): False."""

MAMF_SHAPE: dict[str, dict[str, tuple[float, float, float, float]]] = {
    "h100-sxm5-80gb": {"bf16": (6144, 2816, 17920, 3.35), "fp8": (1024, 9216, 14336, 3.35)},
    "h800-sxm5-80gb": {"bf16": (6144, 2816, 17920, 3.35), "fp8": (1024, 9216, 14336, 3.35)},
    "h200-sxm-141gb": {"bf16": (6144, 2816, 17920, 3.35), "fp8": (1280, 4096, 12032, 4.8)},
}
"""The shape (M, N, K) MAMF's rate was measured at and the measuring card's HBM TB/s,
where the C store is exposed (``GEMM_STORE_OVERLAP`` False): the tensor cores' main-loop
rate is the measured one plus the store's share at that shape
(:func:`~simulation.training.gemm.mma_efficiency`; C in the input dtype, as mamf-finder
allocates it). H100 BF16 792.1 at 6,144 × 2,816 × 17,920 (*ML Engineering*,
compute/accelerator/README.md before commit e695968, "CUDA-12.1"; H200 and H800 share it,
measured on an H100), H100 FP8 1,402.6 at 1,024 × 9,216 × 14,336, H200 FP8 1,453.4 at
1,280 × 4,096 × 12,032 (``_MAMF``)."""

HOST_LINK_GBPS: dict[str, float] = {
    "a100-sxm-80gb": 32.0,
    "a100-sxm-40gb": 32.0,
    "gb200-186gb": 225.0,
    "gb300-288gb": 225.0,
}
"""GB/s per direction between one card and host memory when every card of a server streams
at once (``SystemSpec.host_link_gbps``, what CPU activation offloading copies over; under
data parallelism all cards offload in step). Grace-Blackwell: one Grace CPU serves two
GPUs over NVLink-C2C, "900 GB/s" bidirectional (NVIDIA Blackwell architecture technical
brief; GB200 NVL72 and GB300 NVL72 datasheets), 450 GB/s each way shared by the two: 225
per card (the Grace's LPDDR5X, "up to 512 GB/s" per the Grace datasheets, would allow
256). A100: PCIe Gen 4 x16, "64 GB/s" bidirectional (NVIDIA A100 datasheet), 32 each
way; every other card PCIe Gen 5 x16, 64 GB/s each way (NVIDIA H100 and HGX B200
datasheets, "128 GB/s"): :data:`DEFAULT_HOST_LINK_GBPS`. Peak figures: no measured copy
rate found."""
DEFAULT_HOST_LINK_GBPS = 64.0

SM_COUNT: dict[str, int] = {
    "a100-sxm-80gb": 108,
    "a100-sxm-40gb": 108,
    "h100-sxm5-80gb": 132,
    "h200-sxm-141gb": 132,
    "h800-sxm5-80gb": 132,
    "b200-sxm-180gb": 148,
    "gb200-186gb": 148,
    "gb300-288gb": 160,
}
"""Streaming multiprocessors (the GEMM wave size, :mod:`simulation.training.gemm`):
NVIDIA A100 Tensor Core GPU Architecture whitepaper (108 SMs), NVIDIA H100
Tensor Core GPU Architecture whitepaper (132 SMs on the SXM5 part; the H800 is
the same die with NVLink cut to 400 GB/s), NVIDIA Blackwell: B200 148 SMs (two
dies of 74), Blackwell Ultra (GB300) 160 SMs (NVIDIA Technical Blog, "Inside
NVIDIA Blackwell Ultra", 2025). Other cards: 0 (``SystemSpec.sm_count``: no wave
quantization, overridable)."""

BLOCK_SCALED_MMA: dict[str, bool] = {
    "b200-sxm-180gb": True,
    "gb200-186gb": True,
    "gb300-288gb": True,
}
"""Cards whose tensor cores apply per-block scale factors inside the MMA (5th
generation tensor cores, ``tcgen05.mma`` with MX / NVF4 kinds: NVIDIA Blackwell
architecture technical brief; PTX ISA 8.7 "block scaling"), so MXFP8 runs at the
FP8 rate. A card with a dense FP4 peak in the catalogue has them too. Hopper
(``wgmma``) has none: block-scaled FP8 there is DeepSeek-V3's software recipe
(``fp8_recipe="block"``)."""


def default_clock_power(points: int = 9) -> list[list[float]]:
    """Dynamic power vs clock, both as fractions of the maximum.

    CMOS dynamic power is P = C·V²·f (Weste & Harris, *CMOS VLSI Design*, §5.1);
    along a GPU's DVFS table the voltage falls roughly linearly with the clock
    down to a floor, V/V_max ≈ 0.6 + 0.4·f (the shape of the A100/H100 V–f
    curves measured by Zeus, You et al., NSDI 2023, fig. 2, and the ~0.7 V at
    minimum clock reported by nvidia-smi). So P_dyn/P_dyn,max = f·(0.6 + 0.4 f)².

    >>> [round(p, 3) for _, p in default_clock_power(3)]
    [0.32, 0.608, 1.0]
    """
    lo = 0.5
    out = []
    for i in range(points):
        f = lo + (1 - lo) * i / (points - 1)
        out.append([round(f, 6), f * (0.6 + 0.4 * f) ** 2])
    return out


@dataclass(frozen=True)
class SystemSpec:
    """Accelerators, their fabrics and their power (see the module docstring)."""

    accelerator: str
    peak_tflops: dict[str, float]
    hbm_gib: float
    hbm_tbps: float
    tdp_w: float
    idle_w: float
    cards: int
    cards_per_server: int = 8
    scale_up_domain: int = 8
    scale_up_gbps: float = 2400.0
    scale_up_technology: str = "nvlink"
    scale_up_topology: str = "switch"
    scale_up_dims: tuple[int, ...] = ()
    scale_up_latency_us: float = 0.5
    scale_out_gbps: float = 400.0
    scale_out_technology: str = "infiniband"
    scale_out_latency_us: float = 3.0
    matmul_efficiency: float = DEFAULT_MATMUL_EFFICIENCY
    sm_count: int = 0
    memory_efficiency: float = 0.90
    flash_efficiency: float = 0.0
    """Fraction of the BF16 peak a flash-attention kernel reaches (0: matmul_efficiency)."""
    flash_bwd_efficiency: float = 0.0
    """Fraction of the BF16 peak the flash-attention backward reaches (0: the forward's
    ``flash_efficiency``; Blackwell: shared-memory bound, :func:`flash_bwd_efficiency`)."""
    gemm_store_overlap: bool = False
    """GEMM kernels hide their C store behind the next tile (Hopper); False: the
    store follows the main loop (:data:`GEMM_STORE_OVERLAP`)."""
    server_static_w: float = 1500.0
    network_w_per_card: float = 50.0
    pue: float = 1.1
    price_per_card_hour: float = 2.0
    clock_power: tuple[tuple[float, float], ...] = field(
        default_factory=lambda: tuple((f, p) for f, p in default_clock_power())
    )
    precision_efficiency: dict[str, float] = field(default_factory=dict)
    """Fraction of a precision's own peak its GEMMs reach, where not ``matmul_efficiency``
    (:data:`MATMUL_EFFICIENCY_BY_PRECISION`)."""
    block_scaled_mma: bool = False
    """Tensor cores that apply block scales (MXFP8 / NVFP4; :data:`BLOCK_SCALED_MMA`)."""
    memory_sm_activity: float = 0.25
    """Share of the card's dynamic power range (tdp − idle) the SMs, L2 and crossbar
    draw at full clock while a memory-bound op streams HBM; the HBM's own power is
    priced from its bytes (:mod:`.energy`). **Assumption** (no per-class figure found)."""
    comm_activity: float = 0.2
    """Share of the dynamic range drawn during exposed communication (links, copy
    engines, polling SMs). **Assumption** (:mod:`.energy`)."""
    host_link_gbps: float = DEFAULT_HOST_LINK_GBPS
    """GB/s per direction between a card and host memory (:data:`HOST_LINK_GBPS`): what
    CPU activation offloading (``Execution.cpu_offload_layers``) copies over."""
    comm_sms: int = 20
    """SMs a scale-out collective's kernels hold while it overlaps compute: the
    overlapped compute runs on the other ``sm_count − comm_sms`` (DeepSeek-V3
    technical report §3.2.2 / §3.5.1: "only 20 SMs are sufficient to fully utilize
    the bandwidths of IB and NVLink", "we allocate 20 out of the 132 SMs"; Dubey et
    al. 2024 §3.3.3 list "using extra GPU cycles for communication" among NCCL's
    costs for FSDP and PP). No effect when ``sm_count`` is 0."""

    def peak(self, precision: str) -> float:
        """Dense TFLOP/s at ``precision`` (fp16 falls back to bf16); 0 if absent."""
        if precision == "fp16":
            return self.peak_tflops.get("fp16", self.peak_tflops.get("bf16", 0.0))
        return self.peak_tflops.get(precision, 0.0)

    def efficiency(self, precision: str) -> float:
        """Achieved fraction of ``precision``'s peak in a wave of GEMM tiles (fp16 = bf16)."""
        key = "bf16" if precision == "fp16" else precision
        return self.precision_efficiency.get(key, self.matmul_efficiency)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (round-trips through :meth:`from_dict`)."""
        out = asdict(self)
        out["scale_up_dims"] = list(self.scale_up_dims)
        out["clock_power"] = [list(p) for p in self.clock_power]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str = "system.") -> SystemSpec:
        """Validate every field; errors name it (``system.hbm_gib``)."""
        if not isinstance(data, Mapping):
            raise TrainingInputError(path.rstrip("."), "must be an object")
        names = {f.name for f in fields(cls)}
        check_keys(data, names, path)
        for key in ("accelerator", "peak_tflops", "hbm_gib", "hbm_tbps", "tdp_w", "idle_w",
                    "cards"):
            if key not in data:
                raise TrainingInputError(f"{path}{key}", "required")
        acc = data["accelerator"]
        if not isinstance(acc, str) or not acc:
            raise TrainingInputError(f"{path}accelerator", "a non-empty slug")
        peaks_raw = data["peak_tflops"]
        if not isinstance(peaks_raw, Mapping) or not peaks_raw:
            raise TrainingInputError(f"{path}peak_tflops", "an object {precision: TFLOP/s}")
        peaks = {}
        for k, v in peaks_raw.items():
            choice(k, f"{path}peak_tflops", PRECISIONS)
            if v is not None:
                peaks[str(k)] = number(v, f"{path}peak_tflops.{k}", open_low=True, high=1e6)
        kw: dict[str, Any] = {"accelerator": acc, "peak_tflops": peaks}
        for f in fields(cls):
            if f.name in kw or f.name not in data:
                continue
            v, where = data[f.name], f"{path}{f.name}"
            if f.name in ("cards", "cards_per_server", "scale_up_domain"):
                kw[f.name] = integer(v, where, high=1 << 24)
            elif f.name in ("sm_count", "comm_sms"):
                kw[f.name] = integer(v, where, low=0, high=1 << 16)
            elif f.name == "scale_up_dims":
                if not isinstance(v, list | tuple):
                    raise TrainingInputError(where, "a list of torus dimensions")
                kw[f.name] = tuple(integer(d, f"{where}[{i}]", low=2) for i, d in enumerate(v))
            elif f.name in ("gemm_store_overlap", "block_scaled_mma"):
                if not isinstance(v, bool):
                    raise TrainingInputError(where, "true or false")
                kw[f.name] = v
            elif f.name == "scale_up_topology":
                kw[f.name] = choice(v, where, ("switch", "torus"))
            elif f.name in ("scale_up_technology", "scale_out_technology"):
                if not isinstance(v, str):
                    raise TrainingInputError(where, "a technology name")
                kw[f.name] = v
            elif f.name == "precision_efficiency":
                if not isinstance(v, Mapping):
                    raise TrainingInputError(where, "an object {precision: fraction}")
                kw[f.name] = {str(choice(k, where, PRECISIONS)): number(
                    e, f"{where}.{k}", open_low=True, high=1.0) for k, e in v.items()}
            elif f.name == "clock_power":
                kw[f.name] = _curve(v, where)
            elif f.name in ("matmul_efficiency", "memory_efficiency"):
                kw[f.name] = number(v, where, open_low=True, high=1.0)
            elif f.name in ("flash_efficiency", "flash_bwd_efficiency", "memory_sm_activity",
                            "comm_activity"):
                kw[f.name] = number(v, where, low=0.0, high=1.0)
            elif f.name == "pue":
                kw[f.name] = number(v, where, low=1.0, high=5.0)
            else:
                kw[f.name] = number(v, where, open_low=f.name.endswith(("gbps", "tbps", "gib")))
        spec = cls(**kw)
        if spec.idle_w > spec.tdp_w:
            raise TrainingInputError(f"{path}idle_w", f"above the TDP ({spec.tdp_w} W)")
        if spec.scale_up_topology == "torus":
            if not spec.scale_up_dims or math.prod(spec.scale_up_dims) != spec.scale_up_domain:
                raise TrainingInputError(
                    f"{path}scale_up_dims", "a torus whose product is scale_up_domain"
                )
        if spec.scale_up_domain % spec.cards_per_server and spec.scale_up_domain > 1:
            if spec.cards_per_server % spec.scale_up_domain:
                raise TrainingInputError(
                    f"{path}scale_up_domain", "a multiple or divisor of cards_per_server"
                )
        return spec


def with_scale_up_domain(system: SystemSpec, domain: int, where: str) -> SystemSpec:
    """``system`` with ``domain`` cards per scale-up (NVLink) domain, 0 = unchanged.

    The same cards and links, grouped differently: e.g. a GB200 NVL72 rack run as one
    72-card domain or as 8-card islands. Refused (on ``where``) when the fabric is a
    torus (its domain is its shape) or the domain is neither a multiple nor a divisor
    of ``cards_per_server`` (a server is never split between domains).

    >>> s = SystemSpec("x", {"bf16": 1.0}, 80, 2.0, 700, 70, 576)
    >>> with_scale_up_domain(s, 72, "nvlink_domain").scale_up_domain
    72
    >>> try:
    ...     with_scale_up_domain(s, 12, "nvlink_domain")
    ... except TrainingInputError as err:
    ...     print(err.field, err.reason[:50])
    nvlink_domain 12 is neither a multiple nor a divisor of the 8 ca
    """
    if not domain or domain == system.scale_up_domain:
        return system
    if system.scale_up_topology == "torus":
        raise TrainingInputError(where, f"the scale-up fabric is a torus of "
                                 f"{system.scale_up_domain} cards: only {system.scale_up_domain}")
    per = system.cards_per_server
    if domain < 1 or (domain % per and per % domain):
        raise TrainingInputError(where, f"{domain} is neither a multiple nor a divisor of the "
                                 f"{per} cards per server (allowed: a divisor of {per} or a "
                                 f"multiple of it)")
    return replace(system, scale_up_domain=int(domain))


def _curve(value: Any, where: str) -> tuple[tuple[float, float], ...]:
    if not isinstance(value, list | tuple) or len(value) < 2:
        raise TrainingInputError(where, "at least two [clock fraction, power fraction] points")
    pts = []
    for i, p in enumerate(value):
        if not isinstance(p, list | tuple) or len(p) != 2:
            raise TrainingInputError(f"{where}[{i}]", "a pair [clock, power]")
        pts.append((number(p[0], f"{where}[{i}][0]", open_low=True, high=1.0),
                    number(p[1], f"{where}[{i}][1]", open_low=True, high=1.0)))
    pts.sort()
    if pts[-1][0] != 1.0:
        raise TrainingInputError(where, "the curve must end at clock 1.0 (the maximum)")
    for a, b in zip(pts, pts[1:], strict=False):
        if b[0] == a[0] or b[1] < a[1]:
            raise TrainingInputError(where, "clocks distinct and power non-decreasing")
    return tuple(pts)


def system_for_accelerator(figures: Mapping[str, Any], cards: int, **overrides: Any) -> SystemSpec:
    """A hypothetical system of NVLink domains, one 400G NIC per card.

    ``figures`` is an accelerator row of the twin's catalogue
    (``twin/hardware/fixtures/catalogue.json``: slug, bf16_tflops, fp8_tflops,
    fp4_tflops (dense, Blackwell), fp32_tflops, tf32_tflops, hbm_gib, hbm_tbps,
    tdp_w, idle_w, scaleup_gbps bidirectional GB/s, nvlink_domain_cards: the cards
    of one NVLink domain, 72 on an NVL72 rack, 8 when absent). ``overrides``
    replace any field.

    >>> a100 = {"slug": "a100-sxm-80gb", "bf16_tflops": 312, "fp8_tflops": None,
    ...         "fp32_tflops": 19.5, "tf32_tflops": 156, "hbm_gib": 80, "hbm_tbps": 2.039,
    ...         "tdp_w": 400, "idle_w": 55, "scaleup_gbps": 600}
    >>> s = system_for_accelerator(a100, 64)
    >>> s.scale_up_gbps, s.peak("fp8"), s.peak("fp32"), round(s.matmul_efficiency, 3)
    (2400.0, 0.0, 156.0, 0.75)
    """
    slug = str(figures.get("slug", "custom"))
    peaks: dict[str, float] = {}
    # FP32 training runs its matmuls on TF32 tensor cores where the card has them
    fp32 = figures.get("tf32_tflops") or figures.get("fp32_tflops")
    for key, val in (("fp32", fp32), ("bf16", figures.get("bf16_tflops")),
                     ("fp8", figures.get("fp8_tflops")), ("fp4", figures.get("fp4_tflops"))):
        if val:
            peaks[key] = float(val)
    if "bf16" not in peaks:
        raise TrainingInputError("accelerator", f"{slug} has no BF16/FP16 peak in the catalogue")
    vendor_tech = "hccs" if "ascend" in slug else "nvlink"
    bf16_eff = MATMUL_EFFICIENCY.get(slug, MATMUL_EFFICIENCY_BY_PRECISION.get(slug, {}).get(
        "bf16", DEFAULT_MATMUL_EFFICIENCY))
    precision_eff = dict(MATMUL_EFFICIENCY_BY_PRECISION.get(slug, {}))
    if "fp4" in peaks and "fp8" in peaks and "fp4" not in precision_eff:
        # NVFP4 at the B300's measured 1.81x the FP8 rate, transferred to this card's FP4
        # / FP8 peak ratio (:func:`~simulation.training.recipes.fp4_over_fp8`)
        e8 = precision_eff.get("fp8", bf16_eff)
        precision_eff["fp4"] = (fp4_over_fp8(e8, peaks["fp4"] / peaks["fp8"]) * e8
                                * peaks["fp8"] / peaks["fp4"])
    overlap = GEMM_STORE_OVERLAP.get(slug, False)
    hbm_eff = 0.90  # SystemSpec.memory_efficiency's default
    for key, (m, n, k, tbps) in ({} if overlap else MAMF_SHAPE.get(slug, {})).items():
        # the measured rate includes the exposed C store: the main loop's is higher
        # (C in the input dtype, as mamf-finder allocates it: 2 B for BF16, 1 B for FP8)
        if key == "bf16":
            bf16_eff = mma_efficiency(bf16_eff, peaks[key] * 1e12, tbps * 1e12 * hbm_eff,
                                      m, n, k, 2.0)
        elif key in peaks:
            precision_eff[key] = mma_efficiency(precision_eff.get(key, bf16_eff),
                                                peaks[key] * 1e12, tbps * 1e12 * hbm_eff,
                                                m, n, k, 1.0)
    data: dict[str, Any] = {
        "accelerator": slug,
        "peak_tflops": peaks,
        "hbm_gib": float(figures["hbm_gib"]),
        "hbm_tbps": float(figures["hbm_tbps"]),
        "tdp_w": float(figures["tdp_w"]),
        "idle_w": float(figures.get("idle_w") or 0.1 * float(figures["tdp_w"])),
        "cards": cards,
        "scale_up_gbps": float(figures.get("scaleup_gbps") or 0) * 8 / 2 or 800.0,
        "scale_up_technology": vendor_tech,
        "matmul_efficiency": bf16_eff,
        "precision_efficiency": precision_eff,
        "sm_count": SM_COUNT.get(slug, 0),
        "flash_efficiency": FLASH_EFFICIENCY.get(slug, 0.0),
        "flash_bwd_efficiency": flash_bwd_efficiency(slug, SM_COUNT.get(slug, 0),
                                                     peaks["bf16"]),
        "gemm_store_overlap": overlap,
        "block_scaled_mma": BLOCK_SCALED_MMA.get(slug, "fp4" in peaks),
        "scale_up_domain": int(figures.get("nvlink_domain_cards") or 8),
        "server_static_w": 1500.0 if float(figures["tdp_w"]) <= 500 else 2500.0,
        "host_link_gbps": float(figures.get("host_link_gbps")
                                or HOST_LINK_GBPS.get(slug, DEFAULT_HOST_LINK_GBPS)),
    }
    data.update(overrides)
    if "clock_power" in data:
        data["clock_power"] = [list(p) for p in data["clock_power"]]
    return SystemSpec.from_dict(data, path="")
