"""Reading the columnar state: metric positions, byte spans of blobs, rounding.

Each state array is one Redis string per metric (see ``twin.telemetry.keys``);
these helpers read whole arrays or just the span that covers a few cards.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import redis

from twin.telemetry.metrics import METRIC_INDEX, METRIC_KEYS
from twin.telemetry.state.layouts import Layout

__all__ = ["as_float", "metric_index", "ordinals_of", "pick", "read_span", "read_spans"]


def metric_index(metric: str) -> int:
    try:
        return METRIC_INDEX[metric]
    except KeyError:
        raise KeyError(f"unknown metric {metric!r}; known: {', '.join(METRIC_KEYS)}") from None


def read_span(r: redis.Redis, key: str, ords: np.ndarray | None, itemsize: int,
              dtype: Any, n: int, fill: Any) -> np.ndarray:
    return read_spans(r, [key], ords, itemsize, dtype, n, fill)[0]


def read_spans(r: redis.Redis, key_list: list[str], ords: np.ndarray | None, itemsize: int,
               dtype: Any, n: int, fill: Any) -> list[np.ndarray]:
    """Read whole blobs (``ords`` None) or just the cards at ``ords`` (−1: missing).

    For a few cards we fetch the byte span that covers them (GETRANGE), so a
    rack view of 40 cards moves 160 bytes, not the whole cluster's array.
    """
    pipe = r.pipeline(transaction=False)
    if ords is None:
        for key in key_list:
            pipe.get(key)
        out = []
        for raw in pipe.execute():
            arr = np.full(n, fill, dtype=dtype)
            if raw:
                got = np.frombuffer(raw, dtype=dtype)[:n]
                arr[: len(got)] = got
            out.append(arr)
        return out
    valid = ords >= 0
    if not valid.any():
        return [np.full(len(ords), fill, dtype=dtype) for _ in key_list]
    lo, hi = int(ords[valid].min()), int(ords[valid].max())
    for key in key_list:
        pipe.getrange(key, lo * itemsize, (hi + 1) * itemsize - 1)
    out = []
    for raw in pipe.execute():
        arr = np.full(len(ords), fill, dtype=dtype)
        span = np.frombuffer(raw or b"", dtype=dtype)
        idx = ords - lo
        ok = valid & (idx < len(span))
        arr[ok] = span[idx[ok]]
        out.append(arr)
    return out


def ordinals_of(lay: Layout, card_ids: Any) -> np.ndarray | None:
    """Ordinals of ``card_ids`` in ``lay`` (None: every card, in ordinal order)."""
    return None if card_ids is None else lay.ordinals(card_ids)


def as_float(value: float) -> float | None:
    """A float32 reading as JSON: rounded, None for NaN (no reading)."""
    return None if value != value else round(float(value), 4)


def pick(raw: bytes, dtype: Any, positions: np.ndarray, fill: Any) -> np.ndarray:
    """Values at ``positions`` of a byte span (``fill`` past its end: never written)."""
    span = np.frombuffer(raw, dtype=dtype)
    out = np.full(len(positions), fill, dtype=span.dtype)
    inside = positions < len(span)
    out[inside] = span[positions[inside]]
    return out
