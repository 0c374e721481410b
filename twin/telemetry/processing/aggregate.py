"""Per-group statistics of per-card values, for the rollups and the minute history.

A tick reduces every metric of every card to rack, supernode and cluster
statistics. Done level by level from the cards, that is three passes over
(26 × cards) arrays, most of the sharded tick's CPU (``docs/benchmarks.md``,
live_million). Racks nest in supernodes and supernodes in the cluster, so
``reduce_levels`` reduces the cards once, to the finest level, and each coarser
level from the finer one's count, sum, min and max — exact for count, min and
max, and for the sum a float64 sum of float64 sums. Small groups (racks) are
summed in float32 (faster than float64 and, over at most ``F32_SUM_MAX`` values of a
few significant digits, within float32 rounding of it; a shard's rollups take 1.76×
less CPU, ``benchmarks/ingest_paths.py``); larger groups in float64 (a sequential
float32 sum over a million cards would drift by percents).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from twin.telemetry.state import GroupIndex

__all__ = ["F32_SUM_MAX", "reduce_groups", "reduce_levels", "reduce_levels_and_all",
           "reporting_counts"]

F32_SUM_MAX = 256
"""Groups of at most this many cards are summed in float32."""

_Parts = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # count, sum, min, max


def reduce_groups(values: np.ndarray, index: GroupIndex) -> np.ndarray:
    """(…, n) → (…, 5, groups): mean, min, max, sum, count of the finite values."""
    return _stack(_from_cards(values, index))


def reporting_counts(fresh: np.ndarray, index: GroupIndex) -> np.ndarray:
    """How many of each group's cards are fresh (``fresh``: bool per card), int32."""
    fr = fresh[index.perm] if index.perm is not None else fresh
    return np.add.reduceat(fr, index.starts, dtype=np.int32)


def reduce_levels(values: np.ndarray, groups: Mapping[str, GroupIndex],
                  levels: Iterable[str] | None = None) -> dict[str, np.ndarray]:
    """``reduce_groups`` of ``values`` for each of ``levels`` (default: all of
    ``groups``), coarser levels from finer ones where they nest.

    A level nests in the next finer one when neither has a permutation and each
    of its groups starts where a finer group starts (the layouts order cards by
    supernode, then rack, so racks → supernodes → the cluster do)."""
    return reduce_levels_and_all(values, groups, levels)[0]


def reduce_levels_and_all(values: np.ndarray, groups: Mapping[str, GroupIndex],
                          levels: Iterable[str] | None = None
                          ) -> tuple[dict[str, np.ndarray], _Parts]:
    """``reduce_levels``, and the count, sum (float64), min and max over all the
    cards (``(…,)`` each), from the coarsest level's: what a tick shard adds to the
    cluster's statistics without another pass over its cards."""
    wanted = list(groups if levels is None else levels)
    order = sorted(wanted, key=lambda lv: -len(groups[lv].starts))  # finest first
    out: dict[str, np.ndarray] = {}
    finer: tuple[GroupIndex, _Parts] | None = None
    for level in order:
        index = groups[level]
        parts = _from_finer(index, *finer) if finer else None
        if parts is None:
            parts = _from_cards(values, index)
        out[level] = _stack(parts)
        finer = (index, parts)
    if finer is None:
        raise ValueError("reduce_levels_and_all needs at least one level")
    count, total, vmin, vmax = finer[1]
    count, total = count.sum(axis=-1, dtype=np.float64), total.sum(axis=-1)
    vmin, vmax = np.fmin.reduce(vmin, axis=-1), np.fmax.reduce(vmax, axis=-1)
    return {level: out[level] for level in wanted}, (count, total, vmin, vmax)


def _from_cards(values: np.ndarray, index: GroupIndex) -> _Parts:
    v = values[..., index.perm] if index.perm is not None else values
    starts = index.starts
    finite = np.isfinite(v)
    count = np.add.reduceat(finite, starts, axis=-1, dtype=np.int32)
    n = v.shape[-1]
    largest = int(np.diff(starts, append=n).max()) if len(starts) else 0
    small = v.dtype == np.float32 and largest <= F32_SUM_MAX
    zeroed = np.where(finite, v, v.dtype.type(0))
    total = np.add.reduceat(zeroed, starts, axis=-1,
                            dtype=np.float32 if small else np.float64).astype(np.float64)
    vmin = np.fmin.reduceat(v, starts, axis=-1)
    vmax = np.fmax.reduceat(v, starts, axis=-1)
    return count, total, vmin, vmax


def _from_finer(index: GroupIndex, finer: GroupIndex, parts: _Parts) -> _Parts | None:
    if index.perm is not None or finer.perm is not None or not len(finer.starts):
        return None
    at = np.searchsorted(finer.starts, index.starts)
    if (at >= len(finer.starts)).any() or not np.array_equal(finer.starts[at], index.starts):
        return None
    count, total, vmin, vmax = parts
    return (np.add.reduceat(count, at, axis=-1), np.add.reduceat(total, at, axis=-1),
            np.fmin.reduceat(vmin, at, axis=-1), np.fmax.reduceat(vmax, at, axis=-1))


def _stack(parts: _Parts) -> np.ndarray:
    count, total, vmin, vmax = parts
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return np.stack([mean, vmin, vmax, total, count], axis=-2).astype(np.float32)
