"""Memory per card: weights, gradients, optimizer states, activations.

**States** (Rajbhandari et al. 2020, ZeRO, §3: mixed-precision Adam keeps 2 + 2
+ 12 bytes per parameter — 16-bit weights, 16-bit gradients, FP32 master
weights, momentum and variance). FP32 training: 4 + 4 + 8. FP8 (Micikevicius et
al. 2022): matmul inputs cast on the fly, states as BF16. A card holds
P/(tp·pp) of the dense parameters (experts: /(tp·pp·ep)); ZeRO shards over the
dp ranks: stage 1 the optimizer states (= Megatron's distributed optimizer),
stage 2 also gradients, stage 3 also weights.

>>> round(state_bytes(7.5e9, 1, "bf16") / 7.5e9)            # ZeRO paper Fig. 1, baseline
16
>>> round(state_bytes(7.5e9, 64, "bf16", zero=1) / 1e9, 1)   # Pos: 4Ψ + 12Ψ/Nd = 31.4 GB
31.4

**Activations** of one layer for one micro-batch of b sequences
(Korthikanti et al. 2022, eqs. 1–5, 16-bit activations):

    no parallelism          s·b·h·(34 + 5·a·s/h)
    tensor parallel         s·b·h·(10 + 24/t + 5·a·s/(h·t))
    tensor + sequence par.  s·b·h·(34/t + 5·a·s/(h·t))
    + selective recompute   drop the 5·a·s/(h·t) term (also what FlashAttention does)
    full recompute          2·s·b·h  (only the layer input; /t with SP)

>>> sbh = 2048 * 12288
>>> layer_activation_bytes(2048, 1, 12288, 96, tp=8, sp=True, recompute="selective") / sbh
4.25

Pipeline (Narayanan 2021 §2.2; Korthikanti §4.2.3): with 1F1B the first stage
holds p micro-batches in flight, so a card stores L/p layers × p micro-batches
= L layers' activations for one micro-batch; interleaving adds the factor
(1 + (p−1)/(p·v)); GPipe holds all m micro-batches.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import numpy.typing as npt

__all__ = ["STATE_BYTES", "layer_activation_bytes", "state_bytes"]

STATE_BYTES = {  # (weights, gradients, optimizer) bytes per parameter
    "fp32": (4.0, 4.0, 8.0),
    "bf16": (2.0, 2.0, 12.0),
    "fp16": (2.0, 2.0, 12.0),
    "fp8": (2.0, 2.0, 12.0),
}

A = TypeVar("A", float, npt.NDArray[np.float64])


def state_bytes(params: float, dp: int, precision: str, zero: int = 0) -> float:
    """Weights + gradients + optimizer bytes of ``params`` on one card, ZeRO over dp."""
    w, g, o = STATE_BYTES[precision]
    return (w / (dp if zero >= 3 else 1) + g / (dp if zero >= 2 else 1)
            + o / (dp if zero >= 1 else 1)) * params


def layer_activation_bytes(s: float, b: A, h: float, a: float, *, tp: A,
                           sp: bool | npt.NDArray[np.bool_],
                           recompute: str | npt.NDArray[np.str_] = "none",
                           flash: bool | npt.NDArray[np.bool_] = False) -> A:
    """Bytes one layer keeps for the backward pass of one micro-batch (see above)."""
    sbh = s * b * h
    core = 5 * a * s / (h * tp)
    base = np.where(sp, 34 / tp, 10 + 24 / tp)
    sel = np.logical_or(np.asarray(recompute) == "selective", flash)
    per = base + np.where(sel, 0.0, core)
    full = np.where(sp, 2 / tp, 2.0)
    out = sbh * np.where(np.asarray(recompute) == "full", full, per)
    return out if isinstance(out, np.ndarray) and out.ndim else float(out)  # type: ignore[return-value]
