"""What the whole-cluster tick (``ticks``) and the sharded tick (``shards``) share.

The tick number (``next_seq``), the reading of the cards' state from the raw
blobs (``CardsRead``: one code path for the whole cluster and for a shard's
slice, so both see the same freshness, staleness and ages), the utilisation
EWMA and the publication of alert transitions.
"""
from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import redis

from twin.telemetry import bridge, keys
from twin.telemetry.config import conf
from twin.telemetry.metrics import METRIC_INDEX, N_METRICS
from twin.telemetry.state import ALERT_EVENT, group_name

__all__ = ["EWMA_TAU_S", "UTIL", "CardsRead", "clock", "ewma_alpha", "next_ewma", "next_seq",
           "publish_alerts", "read_cards"]

clock = time.time
"""The ticks' clock (their ``now``); tests replace it to step through alert damping."""

UTIL = METRIC_INDEX["gpu_util"]
EWMA_TAU_S = 60.0

_NEXT_SEQ = """
local last = tonumber(redis.call('GET', KEYS[1]) or '0')
local seq = math.max(last + 1, tonumber(ARGV[1]))
redis.call('SET', KEYS[1], string.format('%d', seq))
return seq
"""
_seq_scripts: dict[int, Any] = {}


def next_seq(r: redis.Redis, cluster_id: int, now: float) -> int:
    """The next tick number of ``cluster_id``: above the last one and at least
    ``now`` in epoch milliseconds (see ``ticks``), atomically."""
    script = _seq_scripts.get(id(r))
    if script is None:
        script = _seq_scripts[id(r)] = r.register_script(_NEXT_SEQ)
    return int(script(keys=[keys.seq(cluster_id)], args=[int(now * 1000)]))


@dataclass
class CardsRead:
    """The state of ``n`` cards (the cluster, or one shard's slice) at ``now``."""

    values: np.ndarray  # (N_METRICS, n) float32, latest values (NaN: none)
    seen: np.ndarray  # (n,) float64, last sample time (NaN: never)
    old_health: np.ndarray | None  # (n,) uint8, what the CardHealth table reflects (None:
    # not known — ``keys.health_db`` is gone — so the sync reads the table)
    ewma: np.ndarray  # (n,) float64, utilisation average (NaN: none yet)
    reported: np.ndarray
    fresh: np.ndarray
    stale: np.ndarray
    age: np.ndarray
    fresh_values: np.ndarray  # values, NaN unless fresh


def read_cards(metrics: list[bytes | None], seen_raw: bytes | None, health_raw: bytes | None,
               ewma_raw: bytes | None, n: int, now: float) -> CardsRead:
    """Decode the raw blobs (or slices) of ``n`` cards; a blob of the wrong size
    counts as missing, as a fresh layout's state does."""
    values = np.full((N_METRICS, n), np.nan, dtype=np.float32)
    for i in range(N_METRICS):
        raw = metrics[i]
        if raw and len(raw) == 4 * n:
            values[i] = np.frombuffer(raw, dtype="<f4")
    seen = (np.frombuffer(seen_raw, dtype="<f8") if seen_raw and len(seen_raw) == 8 * n
            else np.full(n, np.nan))
    old_health = (np.frombuffer(health_raw, dtype=np.uint8).copy()
                  if health_raw and len(health_raw) == n else None)
    ewma = (np.frombuffer(ewma_raw, dtype="<f4").astype(np.float64)
            if ewma_raw and len(ewma_raw) == 4 * n else np.full(n, np.nan))
    reported = np.isfinite(seen)
    age = np.where(reported, now - seen, np.nan)
    fresh = reported & (age <= conf().stale_after_s)
    stale = reported & ~fresh
    return CardsRead(values=values, seen=seen, old_health=old_health, ewma=ewma,
                     reported=reported, fresh=fresh, stale=stale, age=age,
                     fresh_values=np.where(fresh, values, np.nan))


def ewma_alpha(last_ts_raw: bytes | None, now: float) -> float:
    """The EWMA's weight of this tick's reading, from the time since the last update."""
    dt_s = min(max(now - float(last_ts_raw), 0.0), 10.0) if last_ts_raw else 1.0
    return 1.0 - math.exp(-dt_s / EWMA_TAU_S)


def next_ewma(ewma: np.ndarray, fresh_values: np.ndarray, alpha: float) -> np.ndarray:
    """The utilisation EWMA after this tick (cards without a fresh reading keep theirs)."""
    util = fresh_values[UTIL].astype(np.float64)
    return np.where(np.isfinite(util), np.where(np.isfinite(ewma), ewma + alpha * (util - ewma),
                                                util), ewma)


def publish_alerts(cluster_id: int, transitions: Iterable[tuple[str, int | None]]) -> None:
    """Send ``(event, alert id)`` transitions (at most 200) to the cluster's group."""
    from twin.telemetry.models import Alert

    pairs = [(e, a) for e, a in transitions][:200]
    ids = [a for _, a in pairs if a]
    rows = {a.pk: a for a in Alert.objects.filter(pk__in=ids).select_related("acknowledged_by")}
    for event, alert_id in pairs:
        alert = rows.get(alert_id) if alert_id else None
        if alert is None:
            continue
        bridge.group_send(group_name(cluster_id), {
            "type": ALERT_EVENT, "cluster": cluster_id, "event": event,
            "alert": alert.as_event()})
