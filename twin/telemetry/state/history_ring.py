"""The history ring: the last buckets of ``HISTORY_METRICS`` per card (sparklines)."""
from __future__ import annotations

import time

import numpy as np

from twin.telemetry import keys
from twin.telemetry.config import conf, redis_client
from twin.telemetry.metrics import HISTORY_METRICS
from twin.telemetry.state.blobs import as_float, metric_index
from twin.telemetry.state.layouts import layout

__all__ = ["history"]


def history(cluster_id: int, card_id: int, metric: str,
            n: int = 60) -> list[tuple[float, float | None]]:
    """The card's last ``n`` history buckets of ``metric``, oldest first."""
    i = metric_index(metric)
    if metric not in HISTORY_METRICS:
        raise KeyError(f"no history is kept for {metric!r}; kept: {', '.join(HISTORY_METRICS)}")
    lay = layout(cluster_id)
    ords = lay.ordinals([card_id])
    if ords[0] < 0:
        raise KeyError(f"card {card_id} is not in cluster {cluster_id}")
    k = int(ords[0])
    c = conf()
    r = redis_client()
    buckets = {int(s): int(b) for s, b in
               r.hgetall(keys.history_buckets(cluster_id, lay.version)).items()}
    now_bucket = int(time.time() // c.history_step_s)
    live = sorted(((b, s) for s, b in buckets.items()
                   if now_bucket - b < c.history_len), reverse=True)[: max(int(n), 0)]
    live.reverse()
    if not live:
        return []
    pipe = r.pipeline(transaction=False)
    for _, slot in live:
        pipe.getrange(keys.history(cluster_id, lay.version, i, slot), k * 4, k * 4 + 3)
    out = []
    for (bucket, _), raw in zip(live, pipe.execute(), strict=True):
        value = as_float(np.frombuffer(raw, np.float32)[0]) if len(raw) == 4 else None
        out.append((bucket * c.history_step_s, value))
    return out
