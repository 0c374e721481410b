"""Time of one GEMM from its shape: tile and wave quantization, and the roofline.

A GEMM C[m×n] = A[m×k]·B[k×n] (``batch`` independent ones for attention) is
computed by a GPU in output tiles, one tile per SM at a time (NVIDIA,
"Matrix Multiplication Background User's Guide", Deep Learning Performance
docs, §"Dimension quantization effects"):

* **tile quantization** — m and n are padded to whole tiles (256 × 128 in the
  guide's example, the largest CUTLASS/cuBLAS tile of A100/H100 tensor cores;
  both orientations are tried, the better kept, as the library's heuristics do);
* **wave quantization** — the tiles run in waves of ``sms`` (108 SMs on an A100,
  132 on an H100 SXM); a partial last wave costs a full one.

So the tensor cores do ``waves × sms × tile_m × tile_n × k × 2`` FLOPs of work
for the 2·m·n·k·batch useful ones, at the card's MMA rate inside a wave (peak ×
``SystemSpec.matmul_efficiency``: H100 the best large GEMM measured by
mamf-finder, whose shapes fill their waves, so the two factors do not double
count; A100 calibrated on Korthikanti et al.'s per-layer times, see
:data:`simulation.training.system.MATMUL_EFFICIENCY`).
A GEMM of exactly one wave of tiles, one tile more, and GPT-3's QKV
projection under TP 8 (m = 2,048 tokens, n = 3·12,288/8, 288 tiles = 2.67 waves):

>>> one = lambda m, n: round(float(wave_efficiency(
...     np.array([m]), np.array([n]), np.array([1.0]), 108)[0]), 3)
>>> one(108 * 256.0, 128.0), one(109 * 256.0, 128.0), one(2048.0, 4608.0)
(1.0, 0.505, 0.889)

**Roofline** (Williams et al., CACM 2009): a GEMM also reads A and B and writes
C once (``elem`` bytes each); time = max(work / achievable FLOP/s, bytes /
achievable HBM B/s). Small-k batched GEMMs (attention scores with k = h/a =
128) are memory-bound on an A100: 2·s²·d FLOPs against 2·s² bytes written.

>>> t = gemm_time(np.array([2048.0]), np.array([2048.0]), np.array([128.0]),
...               np.array([12.0]), 2.0, 312e12 * 0.86, 2.039e12 * 0.9, 108)
>>> round(float(t[0]) * 1e6)     # 12 score matrices of 2048² in BF16: 113 MB moved
62
>>> round(2 * 2048**2 * 128 * 12 / (312e12 * 0.86) * 1e6)   # the FLOPs alone
48

**Epilogue** (NVIDIA CUTLASS, ``media/docs/efficient_gemm.md``): a GEMM kernel
streams A and B through shared memory while the tensor cores work (the reads
overlap the MMAs), but writes its C tile only after its main loop: every tile
then pays a fixed cost, its C tile stored at the SM's share of the HBM rate,
that a short k loop cannot amortise (``store_overlap=False``): the C store
adds m·n·c / HBM to the time instead of hiding behind it (c the bytes of a C
element, :func:`out_elem`: 16-bit for FP8/FP4 inputs). For k ≪ peak/HBM that
is a large share: the store costs peak/(k·HBM) of the main loop, 146/k on an
A100 in BF16 (16 % for the 22B model's projection GEMM, k = 768 under TP 8).

Hopper measures so too. DeepGEMM's FP8 GEMMs on an H800 SXM5 (deepseek-ai/DeepGEMM
``README.md`` at commit 55ab91f, "Normal GEMMs for dense models", M = 4,096, BF16
out) fall from 1,426 TFLOP/s at K = 16,384 to 1,168 at K = 2,048 and 751 at
K = 512, and by the table's speedup column (1.3× at K = 16,384, 1.1× at K = 512)
the warp-specialized persistent CUTLASS 3.6 kernels it compares with fall alike. The
fixed cost per 128 × 256 tile that fits those two ends, about 2.9 µs, is the
tile's 64 KiB BF16 store at 3.0 TB/s / 132 SMs. Priced so, with no constant
fitted to the curve's shape (the main-loop rate taken at its K = 16,384 end,
:func:`mma_efficiency`; ``tests/simulation/training/test_gemm_shape.py``), the five
other dense rows are within 7.2 % (mean 3.5 % over six) and the four contiguous
grouped-GEMM rows within 3.3 %, where the overlapped roofline is 81 % optimistic
at K = 512.

Blackwell's kernels (accumulators in tensor memory, double-buffered) do hide the
store: the MAMF best shapes of B300 BF16 (12,288 × 18,432 × 1,024) and GB200 FP8
(19,456 × 5,120 × 1,536) could not reach their measured rate with it exposed
(:data:`simulation.training.system.GEMM_STORE_OVERLAP`).

>>> t = gemm_time(np.array([2048.0]), np.array([2048.0]), np.array([128.0]),
...               np.array([12.0]), 2.0, 312e12 * 0.86, 2.039e12 * 0.9, 108,
...               store_overlap=False)
>>> round(float(t[0]) * 1e6)     # 51 µs of MMAs (15 waves), then 101 MB of scores stored
106

A measured whole-GEMM rate (MAMF's best shape) includes that store where it is
exposed; the tensor cores' own rate in the main loop (:func:`mma_efficiency`) is
higher by the store's share at that shape, so the measured shape keeps its
measured rate. H100 FP8, 1,402.6 TFLOP/s at 1,024 × 9,216 × 14,336 (FP8 out):

>>> round(mma_efficiency(1402.6 / 1979, 1979e12, 3.35e12 * 0.9, 1024, 9216, 14336, 1.0), 4)
0.7204
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["TILES", "gemm_time", "mma_efficiency", "out_elem", "wave_efficiency"]

F64 = npt.NDArray[np.float64]
TILES = ((256.0, 128.0), (128.0, 256.0))
"""Output tiles (rows × columns) tried: the Matrix Multiplication guide's 256×128."""


def _work_factor(m: F64, n: F64, batch: F64, sms: int) -> F64:
    """Padded work / useful work, the best of the tiles (≥ 1)."""
    best: F64 | None = None
    for tm, tn in TILES:
        tiles = np.ceil(m / tm) * np.ceil(n / tn) * batch
        waves = np.ceil(tiles / sms) if sms > 0 else tiles / 1.0
        done = (waves * sms if sms > 0 else tiles) * tm * tn
        f = done / np.maximum(m * n * batch, 1.0)
        best = f if best is None else np.minimum(best, f)
    assert best is not None
    out: F64 = np.maximum(best, 1.0)
    return out


def wave_efficiency(m: F64, n: F64, batch: F64, sms: int) -> F64:
    """Useful work / work of the padded tiles in full waves (0 < e ≤ 1).

    ``sms`` = 0 turns quantization off (a card whose SM count is not known).
    """
    if sms <= 0:
        return np.ones_like(np.asarray(m, dtype=np.float64))
    out: F64 = 1.0 / _work_factor(m, n, batch, sms)
    return out


def out_elem(elem: float | F64) -> F64:
    """Bytes of a C element: the operands' own, but 16-bit for FP8/FP4 inputs.

    Transformer Engine's FP8 GEMMs write their output in the activations' BF16
    (``transformer_engine.pytorch`` ``Linear``: FP8 inputs, high-precision output),
    as DeepGEMM's do ("BF16 output", README); FP32 GEMMs write FP32.

    >>> out_elem(np.array([4.0, 2.0, 1.0, 0.5])).tolist()
    [4.0, 2.0, 2.0, 2.0]
    """
    out: F64 = np.maximum(np.asarray(elem, dtype=np.float64), 2.0)
    return out


def mma_efficiency(measured: float, peak_flops: float, bytes_s: float, m: float, n: float,
                   k: float, c_elem: float) -> float:
    """The tensor cores' fraction of peak in the main loop, from a measured GEMM rate.

    ``measured`` is the whole GEMM's fraction of ``peak_flops`` at m×n×k (C of
    ``c_elem`` bytes, stored after the main loop: module docstring, "Epilogue"):
    t = 2mnk / (measured·peak), of which m·n·c / ``bytes_s`` is the store, so the
    main loop runs at measured · t / (t − store). The measured shape's waves are
    taken as full (the MAMF convention of :data:`~simulation.training.system.MATMUL_EFFICIENCY`).
    """
    t = 2.0 * m * n * k / (measured * peak_flops)
    store = m * n * c_elem / bytes_s
    return measured * t / (t - store)


def gemm_time(m: F64, n: F64, k: F64, batch: F64, elem: float | F64, flops_s: F64 | float,
              bytes_s: float, sms: int, *, store_overlap: bool = True) -> F64:
    """Seconds for ``batch`` GEMMs of m×n×k: max(quantized compute, HBM traffic).

    ``elem`` bytes per A / B element; C is written at :func:`out_elem`.
    ``store_overlap=False``: the C store is not hidden (module docstring,
    "Epilogue"): max(compute, A + B reads) + C bytes / HBM.
    """
    useful = 2.0 * m * n * k * batch
    compute = useful / (wave_efficiency(m, n, batch, sms) * flops_s)
    c_bytes = out_elem(elem) * batch * m * n
    reads = elem * batch * (m * k + k * n)
    if store_overlap:
        out: F64 = np.maximum(compute, (reads + c_bytes) / bytes_s)
        return out
    stored: F64 = np.maximum(compute, reads / bytes_s) + c_bytes / bytes_s
    return stored
