"""Applying a stream entry: one batch written into the columnar live state.

``apply_entry`` writes one batch with SETRANGE per contiguous run of cards — a
65,536-card columnar batch is one command per metric — plus the card's last
seen time and, for ``HISTORY_METRICS``, the history ring slot of its bucket.
"""
from __future__ import annotations

import logging
import time

import msgpack
import numpy as np
import redis

from twin.telemetry import keys
from twin.telemetry.config import conf, redis_client
from twin.telemetry.ingest import Batch
from twin.telemetry.metrics import HISTORY_METRICS, METRIC_INDEX, N_METRICS
from twin.telemetry.state import Layout, layout

__all__ = ["HISTORY_IDX", "MAX_RUNS", "apply_arrays", "apply_batch", "apply_entry",
           "ensure_state"]

log = logging.getLogger(__name__)

NAN32 = np.array([np.nan], dtype="<f4").tobytes()
HISTORY_IDX = [METRIC_INDEX[k] for k in HISTORY_METRICS]

_ROTATE = """
local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '-1')
local b = tonumber(ARGV[2])
if cur == b then return 1 end
if cur > b then return 0 end
local blob = string.rep(ARGV[4], tonumber(ARGV[3]))
for i = 2, #KEYS do redis.call('SET', KEYS[i], blob) end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
"""

_initialized: set[tuple[int, str]] = set()
_bucket_cache: dict[tuple[int, str, int], int] = {}


def ensure_state(lay: Layout) -> None:
    """Create the cluster's state blobs (NaN-filled) if they do not exist yet."""
    marker = (lay.cluster_id, lay.version)
    if marker in _initialized:
        return
    r = redis_client()
    n = lay.n
    pipe = r.pipeline(transaction=False)
    nan32 = np.full(n, np.nan, dtype="<f4").tobytes()
    for i in range(N_METRICS):
        pipe.set(keys.metric(lay.cluster_id, lay.version, i), nan32, nx=True)
    pipe.set(keys.seen(lay.cluster_id, lay.version), np.full(n, np.nan, "<f8").tobytes(),
             nx=True)
    pipe.set(keys.health(lay.cluster_id, lay.version), bytes(n), nx=True)
    pipe.sadd(keys.clusters(), lay.cluster_id)
    pipe.execute()
    _initialized.add(marker)


MAX_RUNS = 16
"""Above this many separate runs of cards in one column, a write merges instead."""


def _view(values: np.ndarray, dtype: str) -> memoryview:
    """The bytes of ``values`` as ``dtype``, without a copy when they already are:
    the Redis client (``config.command_packer``) sends a memoryview as it is."""
    return memoryview(np.ascontiguousarray(values, dtype=dtype)).cast("B")


class _Writes:
    """The writes of one batch: SETRANGE per run of cards, or, for a column
    with many holes (NaN: no reading, keep the old value), read the covering
    span once, merge, and write it back whole — 3 commands instead of hundreds.

    The merge reads and writes in two pipelines, so a concurrent write of the
    *same cards' same metric* between them can be overwritten by an equally
    recent value; different cards or metrics never interfere.
    """

    def __init__(self) -> None:
        self.direct: list[tuple[str, int, memoryview]] = []
        self.merges: list[tuple[str, int, np.ndarray, np.ndarray, str]] = []

    def add(self, key: str, start: int | None, ords: np.ndarray | None, values: np.ndarray,
            dtype: str) -> None:
        itemsize = np.dtype(dtype).itemsize
        finite = np.isfinite(values)
        if start is not None and finite.all():
            self.direct.append((key, start * itemsize, _view(values, dtype)))
            return
        sel = np.flatnonzero(finite)
        if not len(sel):
            return
        o = (start + sel) if start is not None else ords[sel]  # type: ignore[index]
        v = values[sel].astype(dtype)
        breaks = np.flatnonzero(np.diff(o) != 1) + 1
        if len(breaks) < MAX_RUNS:
            bounds = np.concatenate([[0], breaks, [len(o)]])
            for a, b in zip(bounds[:-1], bounds[1:], strict=True):
                self.direct.append((key, int(o[a]) * itemsize, _view(v[a:b], dtype)))
            return
        self.merges.append((key, int(o[0]), o - o[0], v, dtype))

    def execute(self, r: redis.Redis) -> int:
        olds: list[bytes] = []
        if self.merges:
            pipe = r.pipeline(transaction=False)
            for key, lo, rel, _v, dtype in self.merges:
                size = np.dtype(dtype).itemsize
                pipe.getrange(key, lo * size, (lo + int(rel[-1]) + 1) * size - 1)
            olds = pipe.execute()
        pipe = r.pipeline(transaction=False)
        for key, offset, data in self.direct:
            pipe.setrange(key, offset, data)
        for (key, lo, rel, v, dtype), old in zip(self.merges, olds, strict=True):
            span = np.full(int(rel[-1]) + 1, np.nan, dtype=dtype)
            got = np.frombuffer(old or b"", dtype=dtype)[: len(span)]
            span[: len(got)] = got
            span[rel] = v
            pipe.setrange(key, lo * np.dtype(dtype).itemsize, _view(span, dtype))
        pipe.execute()
        return len(self.direct) + 2 * len(self.merges)


def _history_slot_ready(r: redis.Redis, lay: Layout, bucket: int) -> int | None:
    """The ring slot for ``bucket`` once it holds that bucket (None: too old)."""
    c = conf()
    slot = bucket % c.history_len
    cache_key = (lay.cluster_id, lay.version, slot)
    if _bucket_cache.get(cache_key) == bucket:
        return slot
    if bucket <= int(time.time() // c.history_step_s) - c.history_len:
        return None
    script = r.register_script(_ROTATE)
    ok = script(keys=[keys.history_buckets(lay.cluster_id, lay.version),
                      *[keys.history(lay.cluster_id, lay.version, i, slot)
                        for i in HISTORY_IDX]],
                args=[slot, bucket, lay.n, NAN32])
    if int(ok):
        _bucket_cache[cache_key] = bucket
        return slot
    return None


def apply_entry(payload: bytes) -> int | None:
    """Write one stream entry into the live state; returns its cluster id
    (None when the layout changed since it was enqueued: its ordinals are void)."""
    d = msgpack.unpackb(payload, raw=False)
    midx = np.frombuffer(d["m"], dtype=np.uint8)
    return apply_arrays(
        int(d["c"]), d["v"], float(d["t"]), midx,
        np.frombuffer(d["x"], dtype="<f4").reshape(len(midx), -1), d["s"],
        None if d["s"] is not None else np.frombuffer(d["o"], dtype="<i4").astype(np.int64),
        np.frombuffer(d["tc"], dtype="<f8") if d.get("tc") else None)


def apply_batch(batch: Batch) -> int | None:
    """Write a parsed batch into the live state at once, without the stream
    (``TELEMETRY_APPLY_ON_INGEST``, ``enqueue.enqueue``): as ``apply_entry``."""
    return apply_arrays(
        batch.cluster_id, batch.version, batch.ts, batch.metric_idx.astype(np.uint8),
        np.asarray(batch.values, dtype="<f4"), batch.start,
        None if batch.start is not None or batch.ordinals is None
        else batch.ordinals.astype(np.int64), batch.card_ts)


def apply_arrays(cluster_id: int, version: str, ts: float, midx: np.ndarray, x: np.ndarray,
                 start: int | None, ords: np.ndarray | None,
                 card_ts: np.ndarray | None) -> int | None:
    """Write the values ``x`` (one row per metric of ``midx``) of the cards ``start …``
    (or ``ords``) into the live state; returns the cluster id, or None when the
    layout changed since they were parsed (their ordinals are void)."""
    lay = layout(cluster_id)
    if lay.version != version:
        log.info("dropping a batch for cluster %s: layout %s replaced by %s", cluster_id,
                 version, lay.version)
        return None
    ensure_state(lay)
    k = x.shape[1]
    r = redis_client()
    writes = _Writes()
    for row, i in enumerate(midx):
        writes.add(keys.metric(cluster_id, lay.version, int(i)), start, ords, x[row], "<f4")
    reported = np.isfinite(x).any(axis=0) if len(midx) else np.zeros(k, bool)
    times = card_ts if card_ts is not None else np.full(k, ts)
    writes.add(keys.seen(cluster_id, lay.version), start, ords,
               np.where(reported, times, np.nan), "<f8")
    hist_rows = [(row, int(i)) for row, i in enumerate(midx) if int(i) in HISTORY_IDX]
    if hist_rows:
        step = conf().history_step_s
        buckets = (times // step).astype(np.int64)
        for bucket in np.unique(buckets[reported]):
            slot = _history_slot_ready(r, lay, int(bucket))
            if slot is None:
                continue
            in_bucket = buckets == bucket
            for row, i in hist_rows:
                writes.add(keys.history(cluster_id, lay.version, i, slot), start, ords,
                           np.where(in_bucket, x[row], np.nan), "<f4")
    writes.execute(r)
    return cluster_id
