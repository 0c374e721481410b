"""Pipeline bubble: the standard model, and the seeds' formula beside it.

With p stages and m micro-batches per step, GPipe (Huang et al. 2019) and
1F1B (PipeDream-Flush; Narayanan et al. 2021 §2.2.1) both idle each stage for
(p − 1) micro-batch slots out of m + p − 1, so

    bubble time / ideal time = (p − 1) / m,   utilisation = m / (m + p − 1);

interleaving v model chunks per stage (Narayanan et al. 2021 §2.2.2) divides
the bubble by v: (p − 1) / (v·m).

The seeds' sample (seed 000, ``pipeline_parallelism_simulation``) instead
computes 0.65 · (1 − 1/(p·m)) · p, which *multiplies* a utilisation by the
stage count: 8 stages, 4 micro-batches gives 503.75 % ("92 %" in its comment).
The correct figure for that case is 4/11 = 36.4 %:

>>> round(articles_utilisation(8, 4) * 100, 2), round(utilisation(8, 4) * 100, 1)
(503.75, 36.4)
>>> bubble_fraction(8, 32), bubble_fraction(8, 32, 4)
(0.21875, 0.0546875)
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import numpy.typing as npt

__all__ = ["articles_utilisation", "bubble_fraction", "utilisation"]

A = TypeVar("A", float, npt.NDArray[np.float64])


def bubble_fraction(p: A, m: A, v: A | int = 1) -> A:
    """Bubble time over ideal compute time: (p − 1) / (v·m) (Narayanan et al. 2021)."""
    return (p - 1) / (v * m)


def utilisation(p: A, m: A, v: A | int = 1) -> A:
    """Share of the step a stage computes: 1 / (1 + bubble fraction)."""
    return 1.0 / (1.0 + bubble_fraction(p, m, v))


def articles_utilisation(stages: float, micro_batches: float, base: float = 0.65) -> float:
    """The seeds' (wrong) formula, kept to show it: base·(1 − 1/(p·m))·p."""
    return base * (1 - 1 / (stages * micro_batches)) * stages
