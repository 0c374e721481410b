"""Long-term history in VictoriaMetrics, when ``TWIN_VICTORIA_URL`` is set.

The database keeps per-minute history for clusters of at most
``TELEMETRY_PERSIST_CARDS_MAX`` (8,192) cards: a million cards would be a
million rows a minute. VictoriaMetrics is a time-series store built for that, so
with it configured:

* **Writing** (:func:`write_tick`, called by every tick): at most once every
  ``TWIN_VICTORIA_STEP_S`` per cluster (a Redis gate shared by the workers) the tick
  queues the ``write_history`` task (``FollowUps.write_history``), so a big cluster's
  write — seconds for 65,536 cards — never holds the tick up; that task
  (:func:`write_from_state`) reads the live state back from Redis, keeps the values
  fresh at the tick's time, and sends every finite one in one POST to
  ``/api/v1/import/prometheus``, stamped with the tick's time (the values may be up
  to the queue's delay newer). Without a queue (tests, a shell) the tick writes its
  own fresh values inline. One series per card and metric::

      twin_card{cluster="1",supernode="3",rack="12",card="4711",metric="power_w"} 512.3 1764…000

  The POST has a ``TWIN_VICTORIA_TIMEOUT_S`` timeout; a failure is logged and
  counted (``keys.victoria_stats``), never raised: the tick goes on, the samples of
  that step are lost (the live state and the database history do not depend on it).
* **Reading** (:func:`query_history`, behind ``GET /api/telemetry/history/``): the
  same rows as the database's ``TelemetryMinute`` (mean and max of every metric
  per minute, ``samples``, ``draw_w``) computed by ``/api/v1/query_range`` with a
  60 s step over a ``[1m]`` window, for a card, a rack, a supernode or the whole
  cluster, with no cap on the number of cards. As in the database a rack's mean is
  the mean over its cards of the card means, its max the max of the card maxima,
  and ``draw_w`` the sum of the card mean powers plus the rack's static draw.
  VictoriaMetrics away → :class:`~twin.core.unavailable.ServiceUnavailable` (503 +
  ``Retry-After``), as for Redis away.

The database history keeps being written as before (it is the embedded default
and what the admin shows); only the endpoint's source changes.
"""
from __future__ import annotations

import datetime as dt
import http.client
import json
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import redis
from django.conf import settings

from twin.core.unavailable import ServiceUnavailable
from twin.telemetry import keys
from twin.telemetry.config import conf, redis_client
from twin.telemetry.metrics import METRIC_INDEX, METRIC_KEYS, N_METRICS
from twin.telemetry.processing.follow_ups import NO_FOLLOW_UPS, FollowUps
from twin.telemetry.state import Layout, layout

__all__ = ["SERIES", "VictoriaUnavailable", "enabled", "query_history", "series_text",
           "write_from_state", "write_samples", "write_tick"]

log = logging.getLogger(__name__)

SERIES = "twin_card"
"""The one metric name; ``metric=`` says which of ``METRIC_KEYS`` a series holds."""

STEP_S = 60
"""The history's rows are minutes, as in the database."""

_prefixes: dict[tuple[int, str], list[str]] = {}
_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="victoria")


class VictoriaUnavailable(ServiceUnavailable):
    """503: VictoriaMetrics did not answer (or answered 5xx) within the timeout."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"VictoriaMetrics (the long-term history, TWIN_VICTORIA_URL) is not "
                         f"reachable: {reason}. Retry in a few seconds.",
                         service="victoriametrics")


def enabled() -> bool:
    """Whether the history lives in VictoriaMetrics (``TWIN_VICTORIA_URL`` set)."""
    return bool(getattr(settings, "TWIN_VICTORIA_URL", ""))


def _card_prefixes(lay: Layout) -> list[str]:
    """``twin_card{cluster=…,supernode=…,rack=…,card=…,metric="`` per card ordinal,
    built once per layout version."""
    key = (lay.cluster_id, lay.version)
    cached = _prefixes.get(key)
    if cached is None:
        sn = lay.groups["supernode"]
        rk = lay.groups["rack"]
        sn_ids = sn.ids[sn.of_card].tolist()
        rk_ids = rk.ids[rk.of_card].tolist()
        cached = [f'{SERIES}{{cluster="{lay.cluster_id}",supernode="{s}",rack="{r}",'
                  f'card="{c}",metric="'
                  for s, r, c in zip(sn_ids, rk_ids, lay.card_ids.tolist(), strict=True)]
        for old in [k for k in _prefixes if k[0] == lay.cluster_id]:
            del _prefixes[old]
        _prefixes[key] = cached
    return cached


def series_text(lay: Layout, values: np.ndarray, now: float) -> tuple[bytes, int]:
    """The Prometheus exposition text of every finite value of ``values``
    (``(N_METRICS, n_cards)``) at time ``now``, and how many samples it holds."""
    prefixes = _card_prefixes(lay)
    stamp = f" {int(now * 1000)}\n"
    lines: list[str] = []
    for i, key in enumerate(METRIC_KEYS):
        row = values[i]
        idx = np.flatnonzero(np.isfinite(row))
        if not len(idx):
            continue
        tail = f'{key}"}} '
        vals = np.round(row[idx].astype(np.float64), 4).tolist()
        lines.extend([prefixes[k] + tail + repr(v) + stamp
                      for k, v in zip(idx.tolist(), vals, strict=True)])
    return "".join(lines).encode(), len(lines)


def _post(path: str, body: bytes, timeout: float) -> None:
    request = urllib.request.Request(settings.TWIN_VICTORIA_URL + path, data=body,
                                     method="POST",
                                     headers={"Content-Type": "text/plain"})
    with urllib.request.urlopen(request, timeout=timeout) as resp:
        resp.read()


def write_samples(lay: Layout, values: np.ndarray, now: float) -> int:
    """Send one step of every card's values to VictoriaMetrics (raises on failure);
    returns the number of samples sent."""
    body, count = series_text(lay, values, now)
    if count:
        _post("/api/v1/import/prometheus", body, settings.TWIN_VICTORIA_TIMEOUT_S)
    return count


def write_tick(r: redis.Redis, lay: Layout, fresh_values: np.ndarray, now: float,
               follow_ups: FollowUps = NO_FOLLOW_UPS) -> int | None:
    """From the tick: if this cluster's step is due, queue its write
    (``follow_ups.write_history``) or, when that queues nothing, write the fresh
    values here. None when no step is due, VictoriaMetrics is not configured or the
    write was queued; else the samples written (0 on a failure, which is logged and
    counted in ``keys.victoria_stats``, never raised)."""
    if not enabled() or not lay.n:
        return None
    step_ms = max(int(settings.TWIN_VICTORIA_STEP_S * 1000), 1)
    if not r.set(keys.victoria_gate(lay.cluster_id), 1, nx=True, px=step_ms):
        return None
    if follow_ups.write_history(lay.cluster_id, lay.version, now):
        return None
    return _write_counted(r, lay, fresh_values, now)


def write_from_state(cluster_id: int, version: str, now: float) -> int:
    """The ``write_history`` task: the cards' values fresh at ``now`` read from the
    live state, written as :func:`write_tick` would (0 when the layout changed)."""
    if not enabled():
        return 0
    r = redis_client()
    lay = layout(cluster_id)
    if lay.version != version or not lay.n:
        return 0
    n = lay.n
    pipe = r.pipeline(transaction=False)
    for i in range(N_METRICS):
        pipe.get(keys.metric(cluster_id, version, i))
    pipe.get(keys.seen(cluster_id, version))
    raw = pipe.execute()
    values = np.full((N_METRICS, n), np.nan, dtype=np.float32)
    for i in range(N_METRICS):
        if raw[i] and len(raw[i]) == 4 * n:
            values[i] = np.frombuffer(raw[i], dtype="<f4")
    seen = (np.frombuffer(raw[N_METRICS], dtype="<f8") if raw[N_METRICS]
            and len(raw[N_METRICS]) == 8 * n else np.full(n, np.nan))
    with np.errstate(invalid="ignore"):
        fresh = np.isfinite(seen) & (now - seen <= conf().stale_after_s)
    return _write_counted(r, lay, np.where(fresh, values, np.nan), now)


def _write_counted(r: redis.Redis, lay: Layout, fresh_values: np.ndarray, now: float) -> int:
    started = time.monotonic()
    stats = keys.victoria_stats(lay.cluster_id)
    try:
        count = write_samples(lay, fresh_values, now)
    except (OSError, http.client.HTTPException) as exc:
        log.warning("cluster %s: history write to VictoriaMetrics failed: %s",
                    lay.cluster_id, exc)
        pipe = r.pipeline(transaction=False)
        pipe.hincrby(stats, "failures", 1)
        pipe.hset(stats, "last_error", f"{type(exc).__name__}: {exc}"[:300])
        pipe.execute()
        return 0
    pipe = r.pipeline(transaction=False)
    pipe.hincrby(stats, "writes", 1)
    pipe.hincrby(stats, "samples", count)
    pipe.hset(stats, "last_s", repr(time.monotonic() - started))
    pipe.execute()
    return count


def _query_range(query: str, start: int, end: int) -> list[dict[str, Any]]:
    params = urllib.parse.urlencode({"query": query, "start": start, "end": end,
                                     "step": f"{STEP_S}s"}).encode()
    request = urllib.request.Request(settings.TWIN_VICTORIA_URL + "/api/v1/query_range",
                                     data=params, method="POST", headers={
                                         "Content-Type": "application/x-www-form-urlencoded"})
    try:
        with urllib.request.urlopen(request, timeout=settings.TWIN_VICTORIA_TIMEOUT_S) as resp:
            body = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        if exc.code >= 500:
            raise VictoriaUnavailable(f"HTTP {exc.code}") from exc
        raise RuntimeError(f"VictoriaMetrics refused {query!r}: HTTP {exc.code} "
                           f"{exc.read()[:300]!r}") from exc
    except (OSError, http.client.HTTPException) as exc:
        raise VictoriaUnavailable(str(getattr(exc, "reason", exc))) from exc
    return list(body["data"]["result"])


def _selector(cluster_id: int, level: str, object_id: int, metric: str | None = None) -> str:
    labels = [f'cluster="{cluster_id}"']
    if level != "cluster":
        labels.append(f'{level}="{object_id}"')
    if metric:
        labels.append(f'metric="{metric}"')
    return f"{SERIES}{{{','.join(labels)}}}"


def query_history(cluster_id: int, level: str, object_id: int, since: dt.datetime,
                  until: dt.datetime, static_w: float | None = None) -> list[dict[str, Any]]:
    """The minute rows of one card, rack, supernode or the cluster in
    ``[since, until)``, shaped like ``MinuteSerializer`` (``id`` is None: the rows
    are computed, not stored), oldest first. ``static_w``: the group's static draw
    added to ``draw_w`` (racks and up)."""
    first = int(since.timestamp()) // STEP_S
    last = -(-int(until.timestamp()) // STEP_S) - 1  # the last minute starting before until
    if last < first:
        return []
    # A point at t covers (t − 60 s, t]: the minute m is the point at (m + 1) × 60.
    start, end = (first + 1) * STEP_S, (last + 1) * STEP_S
    sel = _selector(cluster_id, level, object_id)
    queries = {
        "mean": f"avg by (metric) (avg_over_time({sel}[1m]))",
        "max": f"max by (metric) (max_over_time({sel}[1m]))",
        "samples": f"sum(max by (card) (count_over_time({sel}[1m])))",
    }
    if level != "card":
        power = _selector(cluster_id, level, object_id, "power_w")
        queries["draw"] = f"sum(avg_over_time({power}[1m]))"
    answers = dict(zip(queries, _pool.map(lambda q: _query_range(q, start, end),
                                          queries.values()), strict=True))

    # Vectorised: ~75,000 values a day of one object (Python per value cost ~0.4 s).
    def points(series: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        pairs = series["values"]
        at = np.fromiter((int(p[0]) for p in pairs), np.int64, len(pairs)) // STEP_S - 1 - first
        vals = np.array([p[1] for p in pairs], dtype=np.float64)
        inside = (at >= 0) & (at < size)
        return at[inside], vals[inside]

    size = last - first + 1
    grids = {part: np.full((size, len(METRIC_KEYS)), np.nan) for part in ("mean", "max")}
    present = np.zeros(size, bool)
    for part, grid in grids.items():
        for series in answers[part]:
            col = METRIC_INDEX.get(series["metric"].get("metric", ""))
            if col is None:
                continue
            at, vals = points(series)
            grid[at, col] = vals
            present[at] = True
    samples = np.zeros(size, np.int64)
    for series in answers["samples"]:
        at, vals = points(series)
        samples[at] = vals.astype(np.int64)
    draw = np.full(size, np.nan)
    for series in answers.get("draw", []):
        at, vals = points(series)
        draw[at] = vals + (static_w or 0.0)
    present |= samples > 0
    out: list[dict[str, Any]] = []
    keys_ = list(METRIC_KEYS)
    for part in grids:
        grids[part] = np.round(grids[part], 4)
    means, maxes = grids["mean"].tolist(), grids["max"].tolist()
    for i in np.flatnonzero(present).tolist():
        stamp = dt.datetime.fromtimestamp((first + i) * STEP_S, tz=dt.UTC)
        out.append({
            "id": None, "cluster": cluster_id, "level": level, "object_id": object_id,
            "minute": stamp.isoformat().replace("+00:00", "Z"),
            "samples": int(samples[i]),
            "draw_w": None if draw[i] != draw[i] else float(draw[i]),
            "mean": dict(zip(keys_, [None if v != v else v for v in means[i]], strict=True)),
            "max": dict(zip(keys_, [None if v != v else v for v in maxes[i]], strict=True))})
    return out
