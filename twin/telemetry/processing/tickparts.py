"""What the whole-cluster tick (``ticks``) and the sharded tick (``shards``) share.

The tick number (``next_seq``), the reading of the cards' state from the raw
blobs (``CardsRead``: one code path for the whole cluster and for a shard's
slice, so both see the same freshness, staleness and ages), the ingest lag
that staleness allows for (``ingest_lag_s``), the utilisation EWMA and the
publication of alert transitions.

Why staleness allows for the ingest lag: a card is judged silent from the time
of its last *applied* reading, and readings wait on the ingest stream until a
drainer applies them. When the drainers fall behind (an agent starting, a
burst, a machine too small for its cluster: the million-card run on 2 cores),
every card whose batch is still waiting would look silent though its agent
is talking, and rack after rack of ``rack_silent`` alerts opened and closed as
the backlog moved (13,648 in one benchmark run). So a card is stale only when
silent past ``stale_after_s`` *plus* the ingest lag: the age of the oldest batch
still waiting — readings we hold but have not applied are not silence — or,
when the stream was full and the ingest path refused batches as "busy" (HTTP
503, the agent retries), the time since the first refusal of that episode
(``keys.ingest_refused``, set by ``enqueue``) — readings we refused are not
silence either; whichever is longer, capped at
``TELEMETRY_LAG_ALLOWANCE_MAX_S`` (``TWIN_TELEMETRY_LAG_ALLOWANCE_S``, 60 s; 0
judges silence by the clock alone), so a backlog that never drains cannot hide
a dead agent for long. The stream is one for every cluster, so one cluster's backlog
widens every cluster's allowance: the price of one ``XRANGE`` per tick instead
of a scan of the backlog.
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

__all__ = ["EWMA_TAU_S", "UTIL", "CardsRead", "clock", "data_ts", "ewma_alpha", "ingest_lag_s",
           "next_ewma", "next_seq", "publish_alerts", "queue_lag_probe", "read_cards",
           "stream_age_s"]

clock = time.time
"""The ticks' clock (their ``now``); tests replace it to step through alert damping."""

UTIL = METRIC_INDEX["gpu_util"]
EWMA_TAU_S = 60.0

def stream_age_s(server_time: Any, oldest: Any) -> float:
    """Age of the oldest entry of a stream, from ``TIME`` and ``XRANGE … COUNT 1``
    answered by the same Redis: both on the server's clock, so neither the
    workers' clocks nor a test's ``clock`` enter it. 0 for an empty stream."""
    if not oldest:
        return 0.0
    return max(_seconds(server_time) - int(oldest[0][0].split(b"-")[0]) / 1000.0, 0.0)


def _seconds(server_time: Any) -> float:
    """Redis ``TIME`` (seconds, microseconds) as seconds."""
    seconds, micros = server_time
    return float(seconds) + float(micros) / 1e6


def queue_lag_probe(pipe: Any) -> None:
    """Queue the three commands ``ingest_lag_s`` reads on ``pipe`` (so the lag costs
    no round trip of its own)."""
    pipe.time()
    pipe.xrange(keys.stream(), count=1)
    pipe.get(keys.ingest_refused())


def ingest_lag_s(server_time: Any, oldest: Any, refused_ms: Any = None) -> float:
    """The ingest lag staleness allows for (the answers of ``queue_lag_probe``): the
    oldest waiting batch's age or the time since the ingest path began refusing
    batches, the longer, capped at ``conf().lag_allowance_max_s``."""
    lag = stream_age_s(server_time, oldest)
    if refused_ms:
        lag = max(lag, _seconds(server_time) - int(refused_ms) / 1000.0)
    return min(max(lag, 0.0), conf().lag_allowance_max_s)

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
               ewma_raw: bytes | None, n: int, now: float, lag_s: float = 0.0) -> CardsRead:
    """Decode the raw blobs (or slices) of ``n`` cards; a blob of the wrong size
    counts as missing, as a fresh layout's state does. A card is fresh when its
    last reading is at most ``stale_after_s + lag_s`` old (``lag_s``: the ingest
    lag, see the module docstring)."""
    values = np.empty((N_METRICS, n), dtype=np.float32)
    for i in range(N_METRICS):
        raw = metrics[i]
        values[i] = np.frombuffer(raw, dtype="<f4") if raw and len(raw) == 4 * n else np.nan
    seen = (np.frombuffer(seen_raw, dtype="<f8") if seen_raw and len(seen_raw) == 8 * n
            else np.full(n, np.nan))
    old_health = (np.frombuffer(health_raw, dtype=np.uint8).copy()
                  if health_raw and len(health_raw) == n else None)
    ewma = (np.frombuffer(ewma_raw, dtype="<f4").astype(np.float64)
            if ewma_raw and len(ewma_raw) == 4 * n else np.full(n, np.nan))
    reported = np.isfinite(seen)
    age = np.where(reported, now - seen, np.nan)
    fresh = reported & (age <= conf().stale_after_s + lag_s)
    stale = reported & ~fresh
    return CardsRead(values=values, seen=seen, old_health=old_health, ewma=ewma,
                     reported=reported, fresh=fresh, stale=stale, age=age,
                     # (every card fresh, the usual case: the same array, not a copy)
                     fresh_values=values if fresh.all() else np.where(fresh, values, np.nan))


def data_ts(seen: np.ndarray) -> float | None:
    """The newest sample time in the state a tick read (None: no card has reported):
    the tick event's ``data_ts``. A batch whose readings are all at ``ts`` is in a
    tick's state once that tick's ``data_ts >= ts`` (agents' batches come in order),
    so a client can tell how far the view lags the cards, and the serving benchmark
    measures the live lag per batch from it (POST → the first tick that read it)."""
    if not len(seen) or not np.isfinite(seen).any():
        return None
    return float(np.nanmax(seen))


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
