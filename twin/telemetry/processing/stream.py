"""Draining the ingest stream: a consumer group shared by every worker.

``drain(slot)`` consumes the stream through a consumer group (so any number
of workers share it; each entry is acknowledged and deleted once applied, and
entries of a worker that died are reclaimed after a minute), ticking the
clusters it touched.

Kicks: the ingest script claims one of ``TELEMETRY_DRAINERS`` drain slots when
it enqueues and a free slot exists, and the view then starts ``drain(slot)``.
A drainer releases its slot *before* its last, empty read, so an entry added
at any moment is either seen by a running drainer or claims a free slot: no
entry waits for the beat task (which kicks anyway, as a safety net). A drain
runs at most ``TELEMETRY_DRAIN_MAX_S`` and then hands over to a fresh one
(``follow_ups.drain``), so a stream under constant load never starves the
worker's other tasks. It hands over at once when a cluster it touched is in a
sharded tick round (``shards``): the round's shard tasks, queued before the
fresh drain, then run first, on this process too.
"""
from __future__ import annotations

import logging
import os
import socket
import time

import msgpack
import redis
from django.conf import settings

from twin.telemetry import keys, trace
from twin.telemetry.config import redis_client
from twin.telemetry.enqueue import drainers
from twin.telemetry.processing.apply import apply_entry
from twin.telemetry.processing.follow_ups import NO_FOLLOW_UPS, FollowUps
from twin.telemetry.processing.shards import round_running
from twin.telemetry.processing.ticks import tick

__all__ = ["GROUP", "drain", "ensure_group", "kick_idle_stream", "schedule_trailing_tick"]

log = logging.getLogger(__name__)

GROUP = "workers"
READ_COUNT = 4
RECLAIM_IDLE_MS = 60_000


def ensure_group(r: redis.Redis) -> None:
    try:
        r.xgroup_create(keys.stream(), GROUP, id="0", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


def _consumer() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def _process(r: redis.Redis, entries: list[tuple[bytes, dict[bytes, bytes]]],
             dirty: set[int]) -> int:
    done = 0
    size = 0
    ids = []
    for entry_id, fields in entries:
        ids.append(entry_id)
        payload = fields.get(b"p") if fields else None
        if not payload:
            continue
        size += len(payload)
        span = trace.Span("apply")
        try:
            cluster_id = apply_entry(payload)
        except Exception:  # noqa: BLE001 - a poison entry must not block the stream
            log.exception("telemetry entry %s could not be applied; dropped", entry_id)
            r.incr(keys.ingest_errors())
            continue
        span.mark("apply")
        if trace.enabled():
            # queued: from the XADD (the entry id is Redis's clock in ms) to the apply
            queued_ms = span.at * 1e3 - int(entry_id.split(b"-")[0])
            span.finish(r, cluster=cluster_id, queued_ms=round(queued_ms, 3),
                        batch_ts=msgpack.unpackb(payload, raw=False).get("t"))
        if cluster_id is not None:
            dirty.add(cluster_id)
            done += 1
    if ids:
        pipe = r.pipeline(transaction=False)
        pipe.xack(keys.stream(), GROUP, *ids)
        pipe.xdel(keys.stream(), *ids)
        pipe.decrby(keys.stream_bytes(), size)
        pipe.execute()
    return done


def _read(r: redis.Redis, consumer: str) -> list[tuple[bytes, dict[bytes, bytes]]]:
    try:
        resp = r.xreadgroup(GROUP, consumer, {keys.stream(): ">"}, count=READ_COUNT)
    except redis.ResponseError as exc:
        if "NOGROUP" not in str(exc):
            raise
        ensure_group(r)
        resp = r.xreadgroup(GROUP, consumer, {keys.stream(): ">"}, count=READ_COUNT)
    return resp[0][1] if resp else []


def drain(slot: int, max_seconds: float | None = None,
          follow_ups: FollowUps = NO_FOLLOW_UPS) -> dict[str, int]:
    """Consume the stream until it is empty or the time is up (see the module doc);
    a drain that runs out of time hands over through ``follow_ups.drain``."""
    r = redis_client()
    ensure_group(r)
    consumer = _consumer()
    max_seconds = float(getattr(settings, "TELEMETRY_DRAIN_MAX_S", 2.0) if max_seconds is None
                        else max_seconds)
    deadline = time.monotonic() + max_seconds
    kick = keys.drain_kick(slot)
    dirty: set[int] = set()
    stats = {"entries": 0, "ticks": 0}
    try:
        _, claimed, *_ = r.xautoclaim(keys.stream(), GROUP, consumer,
                                      min_idle_time=RECLAIM_IDLE_MS, start_id="0-0", count=50)
        if claimed:
            stats["entries"] += _process(r, [c for c in claimed if c and c[1]], dirty)
    except redis.ResponseError as exc:
        if "NOGROUP" not in str(exc):
            raise
    while True:
        r.pexpire(kick, 60_000)
        entries = _read(r, consumer)
        if not entries:
            r.delete(kick)  # release first, then look once more (see the module doc)
            entries = _read(r, consumer)
            if not entries:
                break
            r.set(kick, 1, nx=True, px=60_000)
        stats["entries"] += _process(r, entries, dirty)
        rounds = False
        for cluster_id in list(dirty):
            seq = tick(cluster_id, follow_ups=follow_ups)
            if seq is not None:
                stats["ticks"] += 1
                dirty.discard(cluster_id)
            rounds = rounds or seq == 0 or (seq is None and round_running(r, cluster_id))
        if time.monotonic() > deadline or rounds:
            r.delete(kick)
            # (another kick took the slot: a drain of it is queued already)
            handed = follow_ups.drain(slot) if r.set(kick, 1, nx=True, px=60_000) else True
            if handed or time.monotonic() > deadline:
                break
    for cluster_id in dirty:
        schedule_trailing_tick(cluster_id, follow_ups)
    return stats


def schedule_trailing_tick(cluster_id: int, follow_ups: FollowUps = NO_FOLLOW_UPS) -> None:
    """Make sure a tick follows the last batch even when the gate was closed."""
    r = redis_client()
    if r.set(keys.trailing(cluster_id), 1, nx=True, px=400):
        wait = max(r.pttl(keys.tick_gate(cluster_id)), 0) / 1000.0
        follow_ups.tick(cluster_id, wait + 0.02)


def kick_idle_stream(follow_ups: FollowUps = NO_FOLLOW_UPS) -> bool:
    """Safety net (beat): start a drain if entries wait and no drain slot is held."""
    r = redis_client()
    if not r.exists(keys.stream()) or r.xlen(keys.stream()) == 0:
        return False
    for slot in range(drainers()):
        if r.set(keys.drain_kick(slot), 1, nx=True, px=60_000):
            follow_ups.drain(slot)
            return True
    return False
