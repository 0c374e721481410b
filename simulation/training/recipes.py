"""Precision recipes: which ops run in which dtype, and what the low-precision casts cost.

A *recipe* is the precision of the GEMMs (``Execution.precision``) plus, for FP8,
how the scaling factors are found (``Execution.fp8_recipe``). Whatever the recipe,
some ops stay in 16 bits (Transformer Engine, NVIDIA, "Using FP8 with Transformer
Engine": only ``te.Linear``-family GEMMs run under ``fp8_autocast``):

* the **attention core** (FlashAttention / cuDNN fused attention: BF16 — the
  FP8 attention of cuDNN is not used by the published training recipes);
* the **output layer and the loss** (Megatron-Core's ``output_layer`` is a plain
  ``ColumnParallelLinear``, outside TE; NVIDIA's NVFP4 recipe, "Pretraining Large
  Language Models with NVFP4", 2025, §4, also keeps the first and last layers in
  higher precision) and the **MoE router** (FP32 logits);
* every **memory-bound op** (norms, activations, RoPE, residual adds, dropout,
  the optimizer): they move the same 16-bit tensors whatever the GEMMs do.

So FP8 speeds up only the projection and MLP GEMMs, and it adds work: every
GEMM input is **cast** to FP8 before the GEMM, and because Hopper's FP8 MMA takes
only the "TN" layout, the cast also writes a transposed copy for the data- and
weight-gradient GEMMs (TE's fused ``cast_transpose``). Bytes per element of a
cast GEMM input (read the 16-bit tensor, write what the GEMMs read):

=============  ==========================================================  =====
recipe         passes                                                       B/el
=============  ==========================================================  =====
``delayed``    one fused cast + transpose + amax (scale from the amax       4
               history of earlier steps: TE ``DelayedScaling``): read 2,
               write 1 + 1
``current``    an amax pass first (the scale of *this* tensor: TE           6
               ``Float8CurrentScaling``, NeMo's "FP8-CS"), then the cast:
               read 2 + 2, write 1 + 1
``block``      1×128 activation / 128×128 weight tiles (DeepSeek-V3          4.0625
               report §3.3.2): the tile's amax is local to the cast
               kernel, one pass; FP32 scales 4 B per 128 elements, twice
``mx``         MXFP8 (OCP Microscaling v1.0: 32-element blocks, E8M0         4.0625
               scales): one pass, 1 B scale per 32 elements, rowwise and
               columnwise copies; the scales are applied by Blackwell's
               tensor cores (block-scaled MMA), so only Blackwell offers it
``nvfp4``      NVFP4 (16-element blocks, E4M3 scales + a per-tensor FP32     5.125
               scale; NVIDIA 2025, arXiv 2509.25149): the
               per-tensor scale is 6·448 / amax of *this* tensor, so as
               for ``current`` an amax pass runs first (read 2; the amax
               of the Hadamard-transformed copy is taken in the same
               read), then the cast: read 2, write 0.5 + 0.5 + scales
               1/16 + 1/16; the random Hadamard transform of the
               weight-gradient inputs (16×16) is fused in the cast
=============  ==========================================================  =====

NVFP4's 2-D (16×16) weight scaling changes where a weight's scales sit, not
the bytes; its stochastic rounding of the gradients is done in the cast kernel.
Weights are cast once per step (TE caches the FP8 weight over the micro-batches
of gradient accumulation, ``is_first_microbatch``) at the same bytes per element.
Each cast is one more kernel on the stream (``current``: two), priced with the
kernel gap of :mod:`.core`.

**GEMM rate by recipe** (the kernel alone, the casts priced above): Transformer Engine's
GEMM profiling tutorial (NVIDIA/TransformerEngine ``docs/examples/gemm_profiling/
gemm_profiling.rst``, "Autocast vs Pre-quantized", measured on a B300 SXM6: the 12 GEMMs
of a layer of hidden 4,096, MLP 16,384, 15,872 tokens, inputs quantized before the timed
loop) gives 24 layers in 163.493 ms with per-tensor FP8 (``FP8Current``), 171.869 ms with
MXFP8 and 90.337 ms with NVFP4. So an MXFP8 GEMM runs at 163.493 / 171.869 = 0.951 of a
per-tensor FP8 one (the block-scaled MMA and its scale loads), and NVFP4 at 163.493 /
90.337 = 1.81× per-tensor FP8 — not the 2× (B200, GB200) or 3× (B300) of the datasheets'
peaks. Measured on a B300 only: the MXFP8 ratio is applied to B200 and GB200 as well (an
assumption, docs/training.md); the NVFP4 one is transferred to their 2× peak ratio by
:func:`fp4_over_fp8`. (:data:`MX_GEMM_RATE`, :data:`FP4_OVER_FP8`.)

>>> round(MX_GEMM_RATE, 3), round(FP4_OVER_FP8, 2)
(0.951, 1.81)
>>> cast_bytes("delayed"), cast_bytes("current"), cast_bytes("nvfp4")
(4.0, 6.0, 5.125)
>>> gemm_dtype("fp8", "output"), gemm_dtype("fp8", "mlp"), gemm_dtype("bf16", "mlp")
('bf16', 'fp8', 'bf16')
"""

from __future__ import annotations

__all__ = ["CAST_BYTES", "CAST_KERNELS", "FP4_OVER_FP8", "FP8_RECIPES", "GEMM_RATE",
           "LOW_PRECISIONS", "MX_GEMM_RATE", "cast_bytes", "fp4_over_fp8", "gemm_dtype",
           "recipe_name"]

FP8_RECIPES = ("delayed", "current", "block", "mx")
"""Ways to find FP8 scaling factors (``Execution.fp8_recipe``); FP4 is NVFP4 only."""
LOW_PRECISIONS = ("fp8", "fp4")
"""Precisions whose GEMM inputs are cast (the others run the GEMMs on the 16/32-bit
tensors the ops already hold)."""

CAST_BYTES: dict[str, float] = {
    "delayed": 2.0 + 1.0 + 1.0,
    "current": 2.0 + 2.0 + 1.0 + 1.0,
    "block": 2.0 + 1.0 + 1.0 + 2 * 4.0 / 128,
    "mx": 2.0 + 1.0 + 1.0 + 2 * 1.0 / 32,
    "nvfp4": 2.0 + 2.0 + 0.5 + 0.5 + 2 * 1.0 / 16,
}
"""HBM bytes per element of one cast GEMM input (module docstring table)."""
CAST_KERNELS: dict[str, float] = {"delayed": 1.0, "current": 2.0, "block": 1.0, "mx": 1.0,
                                  "nvfp4": 2.0}
"""Kernels launched per cast tensor (``current``, ``nvfp4``: amax, then cast)."""

_TE_B300_MS = {"fp8_current": 163.493, "mxfp8": 171.869, "nvfp4": 90.337}
"""Transformer Engine's GEMM profiling tutorial, B300, pre-quantized: the 24 layers' GEMM
milliseconds per recipe (module docstring, "GEMM rate by recipe")."""
MX_GEMM_RATE = _TE_B300_MS["fp8_current"] / _TE_B300_MS["mxfp8"]
"""An MXFP8 GEMM's rate over a per-tensor FP8 GEMM's of the same shape (0.951)."""
FP4_OVER_FP8 = _TE_B300_MS["fp8_current"] / _TE_B300_MS["nvfp4"]
"""An NVFP4 GEMM's rate over a per-tensor FP8 GEMM's on the B300 (1.81); other parts take it
through their FP4 / FP8 peak ratio (:func:`fp4_over_fp8`)."""
_TE_B300_FP8_EFFICIENCY = 3353.3 / 4500
"""The FP8 GEMM's achieved fraction of the B300's dense FP8 peak: MAMF's B300 SXM row,
3,353.3 of 4,500 TFLOP/s (``system.MATMUL_EFFICIENCY_BY_PRECISION``, the GB300 entry)."""
_B300_FP4_OVER_FP8_PEAK = 3.0
"""The B300's dense NVFP4 peak over its dense FP8 peak: 13.5 / 4.5 PFLOP/s (NVIDIA HGX
B300 datasheet; GB300 NVL72: 15 / 5)."""


def fp4_over_fp8(fp8_efficiency: float, peak_ratio: float) -> float:
    """An NVFP4 GEMM's rate over an FP8 GEMM's of the same shape, on a card whose FP8 GEMM
    reaches ``fp8_efficiency`` of its FP8 peak and whose FP4 peak is ``peak_ratio`` × it.

    Why not 1.81 everywhere: the B300 measurement (:data:`FP4_OVER_FP8`) is of a card with
    a 3× FP4 peak; B200 / GB200 have 2× (datasheets) with the same SM design otherwise.
    A GEMM's time, in units of its FLOPs at the FP8 peak, is the tensor cores' main loop
    (1 at FP8, 1/r at FP4) plus the rest — prologue, epilogue, scale-factor loads, stalls:
    1/e − 1 at FP8 (MAMF's efficiency e). On the B300 the measured 1.81× gives the FP4
    GEMM's rest as k = (t8/1.81 − 1/3)/(t8 − 1) times the FP8 one's (t8 = 1/e, e = 0.745):
    1.19 (NVFP4's scale per 16 elements, against none for per-tensor FP8). Taking that k
    (and each card's own e and r), an NVFP4 GEMM runs at t8 / (1/r + k·(t8 − 1)) times the
    FP8 one: the measured 1.81 where r = 3 and e = 0.745 (GB300), 1.445 on a GB200 (r = 2,
    e = 0.723), instead of 1.81 for both.

    >>> round(fp4_over_fp8(_TE_B300_FP8_EFFICIENCY, 3.0), 4) == round(FP4_OVER_FP8, 4)
    True
    >>> round(fp4_over_fp8(3615.6 / 5000, 2.0), 3)   # GB200 (MAMF FP8; 10 / 5 PFLOP/s)
    1.445
    >>> fp4_over_fp8(1.0, 2.0)   # a GEMM that is all main loop runs at the peak ratio
    2.0
    """
    t8_ref = 1.0 / _TE_B300_FP8_EFFICIENCY
    k = (t8_ref / FP4_OVER_FP8 - 1.0 / _B300_FP4_OVER_FP8_PEAK) / (t8_ref - 1.0)
    t8 = 1.0 / fp8_efficiency
    return t8 / (1.0 / peak_ratio + k * (t8 - 1.0))


GEMM_RATE: dict[str, float] = {"mx": MX_GEMM_RATE}
"""Rate of a recipe's GEMM kernel over its precision's measured rate (others 1)."""

_SIXTEEN_BIT_OPS = ("attention", "output", "router")


def recipe_name(precision: str, fp8_recipe: str) -> str:
    """The cast recipe of a run: ``nvfp4`` for FP4, the FP8 recipe for FP8, else ``none``."""
    if precision == "fp4":
        return "nvfp4"
    if precision == "fp8":
        return fp8_recipe
    return "none"


def cast_bytes(recipe: str) -> float:
    """Bytes per element of a cast GEMM input under ``recipe`` (0 for ``none``)."""
    return CAST_BYTES.get(recipe, 0.0)


def gemm_dtype(precision: str, op: str) -> str:
    """The dtype op ``op`` runs in under ``precision`` (module docstring).

    ``op``: ``qkv``, ``proj``, ``mlp`` (low precision when chosen), ``attention``,
    ``output``, ``router`` (16-bit whatever the recipe; FP32 training stays FP32).
    """
    if precision in LOW_PRECISIONS and op in _SIXTEEN_BIT_OPS:
        return "bf16"
    return precision
