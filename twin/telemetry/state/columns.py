"""The latest-state columns: each metric's latest value, last-seen time and health per card."""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np

from twin.telemetry import keys
from twin.telemetry.config import conf, redis_client
from twin.telemetry.metrics import METRIC_KEYS, N_METRICS
from twin.telemetry.state.blobs import (
    as_float,
    metric_index,
    ordinals_of,
    pick,
    read_span,
    read_spans,
)
from twin.telemetry.state.constants import HEALTH_CODES, HEALTH_NAMES
from twin.telemetry.state.layouts import Layout, layout

__all__ = ["CardSpans", "card_spans", "card_state", "health", "last_seen", "latest",
           "latest_many"]


def latest(cluster_id: int, metric: str, card_ids: Any = None) -> np.ndarray:
    """Latest float32 values of one metric (see ``twin.telemetry.state``)."""
    return latest_many(cluster_id, [metric], card_ids)[metric]


def latest_many(cluster_id: int, metrics: list[str] | tuple[str, ...],
                card_ids: Any = None) -> dict[str, np.ndarray]:
    """Latest float32 values of several metrics in one round trip."""
    lay = layout(cluster_id)
    idx = [metric_index(m) for m in metrics]
    arrays = read_spans(redis_client(),
                        [keys.metric(cluster_id, lay.version, i) for i in idx],
                        ordinals_of(lay, card_ids), 4, np.float32, lay.n, np.nan)
    return dict(zip(metrics, arrays, strict=True))


def last_seen(cluster_id: int, card_ids: Any = None) -> np.ndarray:
    """float64 Unix time of each card's last sample (NaN: never)."""
    lay = layout(cluster_id)
    return read_span(redis_client(), keys.seen(cluster_id, lay.version),
                     ordinals_of(lay, card_ids), 8, np.float64, lay.n, np.nan)


def health(cluster_id: int, card_ids: Any = None) -> np.ndarray:
    """uint8 health code per card (index into ``HEALTH_NAMES``)."""
    lay = layout(cluster_id)
    return read_span(redis_client(), keys.health(cluster_id, lay.version),
                     ordinals_of(lay, card_ids), 1, np.uint8, lay.n, HEALTH_CODES["unknown"])


def card_state(cluster_id: int, card_id: int) -> dict[str, Any]:
    """Everything live about one card (see ``twin.telemetry.state``)."""
    lay = layout(cluster_id)
    ords = lay.ordinals([card_id])
    if ords[0] < 0:
        raise KeyError(f"card {card_id} is not in cluster {cluster_id}")
    k = int(ords[0])
    r = redis_client()
    pipe = r.pipeline(transaction=False)
    for i in range(N_METRICS):
        pipe.getrange(keys.metric(cluster_id, lay.version, i), k * 4, k * 4 + 3)
    pipe.getrange(keys.seen(cluster_id, lay.version), k * 8, k * 8 + 7)
    pipe.getrange(keys.health(cluster_id, lay.version), k, k)
    raw = pipe.execute()
    values = {}
    for i, key in enumerate(METRIC_KEYS):
        b = raw[i]
        values[key] = as_float(np.frombuffer(b, np.float32)[0]) if len(b) == 4 else None
    seen_b, health_b = raw[N_METRICS], raw[N_METRICS + 1]
    ts = float(np.frombuffer(seen_b, np.float64)[0]) if len(seen_b) == 8 else float("nan")
    code = health_b[0] if health_b else HEALTH_CODES["unknown"]
    now = time.time()
    reported = ts == ts
    return {
        "card": int(card_id), "ordinal": k,
        "ts": ts if reported else None,
        "age_s": round(now - ts, 3) if reported else None,
        "stale": bool(reported and now - ts > conf().stale_after_s),
        "health": HEALTH_NAMES[code] if code < len(HEALTH_NAMES) else "unknown",
        "metrics": values,
    }


@dataclass(frozen=True)
class CardSpans:
    """What ``card_spans`` read: per request the values and health codes of its
    cards, and the last tick (``seq``, ``ts``) they are at least as new as."""

    seq: int
    ts: float | None
    values: list[np.ndarray]
    health: list[np.ndarray]


def card_spans(lay: Layout, requests: Sequence[tuple[str, np.ndarray]]) -> CardSpans:
    """Latest values of groups of cards, one metric each, and their health, in
    **one** Redis round trip however many groups (the live views of supernodes
    and racks).

    ``requests`` are ``(metric, ordinals)`` with ordinals of ``lay`` sorted
    ascending. Reads the last tick's meta first (its seq and time: the values
    read after it are at least that new), then for each request the byte span
    of the metric's float32 array that covers its cards (a supernode is
    contiguous in the layout, a rack nearly so) and the same span of the
    health codes. Cards past the end of a span (never written) read NaN and
    ``unknown``.
    """
    cluster_id = lay.cluster_id
    pipe = redis_client().pipeline(transaction=False)
    pipe.get(keys.rollup(cluster_id, lay.version, "cluster", "meta"))
    for metric, ordinals in requests:
        lo, hi = int(ordinals[0]), int(ordinals[-1])
        pipe.getrange(keys.metric(cluster_id, lay.version, metric_index(metric)), lo * 4,
                      hi * 4 + 3)
        pipe.getrange(keys.health(cluster_id, lay.version), lo, hi)
    raw = pipe.execute()
    meta = msgpack.unpackb(raw[0]) if raw[0] else {}
    values, codes = [], []
    for j, (_, ordinals) in enumerate(requests):
        positions = ordinals - int(ordinals[0])
        values.append(pick(raw[1 + 2 * j] or b"", "<f4", positions, np.nan))
        codes.append(pick(raw[2 + 2 * j] or b"", np.uint8, positions, HEALTH_CODES["unknown"]))
    return CardSpans(seq=int(meta.get("seq", 0)), ts=meta.get("ts"), values=values,
                     health=codes)
