"""Per-group statistics of per-card values, for the rollups and the minute history."""
from __future__ import annotations

import numpy as np

from twin.telemetry.state import GroupIndex

__all__ = ["reduce_groups"]


def reduce_groups(values: np.ndarray, index: GroupIndex) -> np.ndarray:
    """(…, n) → (…, 5, groups): mean, min, max, sum, count of the finite values."""
    v = values[..., index.perm] if index.perm is not None else values
    finite = np.isfinite(v)
    starts = index.starts
    count = np.add.reduceat(finite, starts, axis=-1).astype(np.float32)
    total = np.add.reduceat(np.where(finite, v, 0.0), starts, axis=-1, dtype=np.float64)
    vmin = np.fmin.reduceat(v, starts, axis=-1)
    vmax = np.fmax.reduceat(v, starts, axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return np.stack([mean, vmin, vmax, total, count], axis=-2).astype(np.float32)
