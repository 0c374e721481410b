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

**Epilogue** (NVIDIA CUTLASS, ``media/docs/efficient_gemm.md``): an Ampere
GEMM kernel (CUTLASS 2.x / cuBLAS 11 ``ampere_*gemm`` kernels: one output tile
per thread block, not persistent) streams A and B through shared memory while
the tensor cores work (the reads overlap the MMAs), but writes its C tile only
after its main loop, and with one 256×128 block per SM nothing else runs on
the SM meanwhile: every wave ends with all SMs storing their tiles at once, so
the C store adds m·n·elem / HBM to the time instead of hiding behind it. For k
≪ peak/HBM that is a large share: the store costs peak/(k·HBM) of the main
loop, 146/k on an A100 (16 % for the 22B model's projection GEMM, k = 768
under TP 8). Hopper's warp-specialized persistent kernels (CUTLASS 3.x
``KernelTmaWarpSpecializedPingpong``/``Cooperative``, cuBLAS 12 on sm90) run
one tile's epilogue while the next tile's main loop proceeds
(``SystemSpec.gemm_store_overlap``):

>>> t = gemm_time(np.array([2048.0]), np.array([2048.0]), np.array([128.0]),
...               np.array([12.0]), 2.0, 312e12 * 0.86, 2.039e12 * 0.9, 108,
...               store_overlap=False)
>>> round(float(t[0]) * 1e6)     # 51 µs of MMAs (15 waves), then 101 MB of scores stored
106
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["TILES", "gemm_time", "wave_efficiency"]

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


def gemm_time(m: F64, n: F64, k: F64, batch: F64, elem: float | F64, flops_s: F64 | float,
              bytes_s: float, sms: int, *, store_overlap: bool = True) -> F64:
    """Seconds for ``batch`` GEMMs of m×n×k: max(quantized compute, HBM traffic).

    ``store_overlap=False``: the C store is not hidden (module docstring,
    "Epilogue"): max(compute, A + B reads) + C bytes / HBM.
    """
    useful = 2.0 * m * n * k * batch
    compute = useful / (wave_efficiency(m, n, batch, sms) * flops_s)
    if store_overlap:
        traffic = elem * batch * (m * k + k * n + m * n) / bytes_s
        out: F64 = np.maximum(compute, traffic)
        return out
    reads = elem * batch * (m * k + k * n) / bytes_s
    stored: F64 = np.maximum(compute, reads) + elem * batch * m * n / bytes_s
    return stored
