"""The write side of the live state: what Celery workers do with the stream.

``drain(slot)`` consumes the ingest stream through a consumer group (so any
number of workers share it; each entry is acknowledged and deleted once
applied, and entries of a worker that died are reclaimed after a minute).
``apply_entry`` writes one batch into the columnar state with SETRANGE per
contiguous run of cards — a 65,536-card columnar batch is one command per
metric. ``tick(cluster)`` runs at most ``MAX_TICK_HZ`` times a second per
cluster (a Redis gate shared by all workers): it reads the whole state once,
computes the rollups, evaluates the health rules, updates each card's health,
samples the state for the 1-minute history and publishes ``telemetry.tick``.

Kicks: the ingest script claims one of ``TELEMETRY_DRAINERS`` drain slots when
it enqueues and a free slot exists, and the view then starts ``drain(slot)``.
A drainer releases its slot *before* its last, empty read, so an entry added
at any moment is either seen by a running drainer or claims a free slot: no
entry waits for the beat task (which kicks anyway, as a safety net). A drain
runs at most ``TELEMETRY_DRAIN_MAX_S`` and then hands over to a fresh task, so
a stream under constant load never starves the worker's other tasks.
"""
from __future__ import annotations

import datetime as dt
import logging
import math
import os
import socket
import time
from typing import Any

import msgpack
import numpy as np
import redis
from django.conf import settings
from django.db import IntegrityError

from twin.telemetry import bridge, state
from twin.telemetry.alerts import EvalInput, Rule, evaluate
from twin.telemetry.ingest import drainers, kick_key, stream_bytes_key, stream_key
from twin.telemetry.metrics import HISTORY_METRICS, METRIC_INDEX, N_METRICS
from twin.telemetry.state import HEALTH_CODES, Layout, keys

__all__ = [
    "GROUP",
    "apply_entry",
    "drain",
    "ensure_group",
    "ensure_state",
    "persist_minute",
    "tick",
]

log = logging.getLogger(__name__)

GROUP = "workers"
READ_COUNT = 4
RECLAIM_IDLE_MS = 60_000
NAN32 = np.array([np.nan], dtype="<f4").tobytes()
HISTORY_IDX = [METRIC_INDEX[k] for k in HISTORY_METRICS]
UTIL = METRIC_INDEX["gpu_util"]
POWER = METRIC_INDEX["power_w"]
EWMA_TAU_S = 60.0

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
_tick_cost: dict[int, float] = {}


def _setting(name: str, default: Any) -> Any:
    return getattr(settings, name, default)


# --------------------------------------------------------------------------
# applying batches
# --------------------------------------------------------------------------

def ensure_state(lay: Layout) -> None:
    """Create the cluster's state blobs (NaN-filled) if they do not exist yet."""
    marker = (lay.cluster_id, lay.version)
    if marker in _initialized:
        return
    r = state.redis_client()
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


class _Writes:
    """The writes of one batch: SETRANGE per run of cards, or, for a column
    with many holes (NaN: no reading, keep the old value), read the covering
    span once, merge, and write it back whole — 3 commands instead of hundreds.

    The merge reads and writes in two pipelines, so a concurrent write of the
    *same cards' same metric* between them can be overwritten by an equally
    recent value; different cards or metrics never interfere.
    """

    def __init__(self) -> None:
        self.direct: list[tuple[str, int, bytes]] = []
        self.merges: list[tuple[str, int, np.ndarray, np.ndarray, str]] = []

    def add(self, key: str, start: int | None, ords: np.ndarray | None, values: np.ndarray,
            dtype: str) -> None:
        itemsize = np.dtype(dtype).itemsize
        finite = np.isfinite(values)
        if start is not None and finite.all():
            self.direct.append((key, start * itemsize, values.astype(dtype).tobytes()))
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
                self.direct.append((key, int(o[a]) * itemsize, v[a:b].tobytes()))
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
            pipe.setrange(key, lo * np.dtype(dtype).itemsize, span.tobytes())
        pipe.execute()
        return len(self.direct) + 2 * len(self.merges)


def _history_slot_ready(r: redis.Redis, lay: Layout, bucket: int) -> int | None:
    """The ring slot for ``bucket`` once it holds that bucket (None: too old)."""
    c = state.conf()
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
    cluster_id = int(d["c"])
    lay = state.layout(cluster_id)
    if lay.version != d["v"]:
        log.info("dropping a batch for cluster %s: layout %s replaced by %s", cluster_id,
                 d["v"], lay.version)
        return None
    ensure_state(lay)
    midx = np.frombuffer(d["m"], dtype=np.uint8)
    x = np.frombuffer(d["x"], dtype="<f4").reshape(len(midx), -1)
    k = x.shape[1]
    start = d["s"]
    ords = None if start is not None else np.frombuffer(d["o"], dtype="<i4").astype(np.int64)
    ts = float(d["t"])
    card_ts = np.frombuffer(d["tc"], dtype="<f8") if d.get("tc") else None
    r = state.redis_client()
    writes = _Writes()
    for row, i in enumerate(midx):
        writes.add(keys.metric(cluster_id, lay.version, int(i)), start, ords, x[row], "<f4")
    reported = np.isfinite(x).any(axis=0) if len(midx) else np.zeros(k, bool)
    times = card_ts if card_ts is not None else np.full(k, ts)
    writes.add(keys.seen(cluster_id, lay.version), start, ords,
               np.where(reported, times, np.nan), "<f8")
    hist_rows = [(row, int(i)) for row, i in enumerate(midx) if int(i) in HISTORY_IDX]
    if hist_rows:
        step = state.conf().history_step_s
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


# --------------------------------------------------------------------------
# draining the stream
# --------------------------------------------------------------------------

def ensure_group(r: redis.Redis) -> None:
    try:
        r.xgroup_create(stream_key(), GROUP, id="0", mkstream=True)
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
        try:
            cluster_id = apply_entry(payload)
        except Exception:  # noqa: BLE001 - a poison entry must not block the stream
            log.exception("telemetry entry %s could not be applied; dropped", entry_id)
            r.incr(f"{state.conf().prefix}:ingest:errors")
            continue
        if cluster_id is not None:
            dirty.add(cluster_id)
            done += 1
    if ids:
        pipe = r.pipeline(transaction=False)
        pipe.xack(stream_key(), GROUP, *ids)
        pipe.xdel(stream_key(), *ids)
        pipe.decrby(stream_bytes_key(), size)
        pipe.execute()
    return done


def _read(r: redis.Redis, consumer: str) -> list[tuple[bytes, dict[bytes, bytes]]]:
    try:
        resp = r.xreadgroup(GROUP, consumer, {stream_key(): ">"}, count=READ_COUNT)
    except redis.ResponseError as exc:
        if "NOGROUP" not in str(exc):
            raise
        ensure_group(r)
        resp = r.xreadgroup(GROUP, consumer, {stream_key(): ">"}, count=READ_COUNT)
    return resp[0][1] if resp else []


def drain(slot: int, max_seconds: float | None = None) -> dict[str, int]:
    """Consume the stream until it is empty or the time is up (see the module doc)."""
    from twin.telemetry import tasks

    r = state.redis_client()
    ensure_group(r)
    consumer = _consumer()
    max_seconds = float(_setting("TELEMETRY_DRAIN_MAX_S", 2.0) if max_seconds is None
                        else max_seconds)
    deadline = time.monotonic() + max_seconds
    kick = kick_key(slot)
    dirty: set[int] = set()
    stats = {"entries": 0, "ticks": 0}
    try:
        _, claimed, *_ = r.xautoclaim(stream_key(), GROUP, consumer,
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
        for cluster_id in list(dirty):
            if tick(cluster_id) is not None:
                stats["ticks"] += 1
                dirty.discard(cluster_id)
        if time.monotonic() > deadline:
            r.delete(kick)
            if r.set(kick, 1, nx=True, px=60_000):
                tasks.dispatch(tasks.drain, slot)
            break
    for cluster_id in dirty:
        schedule_trailing_tick(cluster_id)
    return stats


def schedule_trailing_tick(cluster_id: int) -> None:
    """Make sure a tick follows the last batch even when the gate was closed."""
    from twin.telemetry import tasks

    r = state.redis_client()
    if r.set(f"{keys.base(cluster_id)}:trailing", 1, nx=True, px=400):
        wait = max(r.pttl(_gate_key(cluster_id)), 0) / 1000.0
        tasks.dispatch(tasks.tick_cluster, cluster_id, countdown=wait + 0.02)


def kick_idle_stream() -> bool:
    """Safety net (beat): start a drain if entries wait and no drain slot is held."""
    from twin.telemetry import tasks

    r = state.redis_client()
    if not r.exists(stream_key()) or r.xlen(stream_key()) == 0:
        return False
    for slot in range(drainers()):
        if r.set(kick_key(slot), 1, nx=True, px=60_000):
            tasks.dispatch(tasks.drain, slot)
            return True
    return False


# --------------------------------------------------------------------------
# tick: rollups, health, alerts, history sampling, publish
# --------------------------------------------------------------------------

def _gate_key(cluster_id: int) -> str:
    return f"{keys.base(cluster_id)}:tickgate"


def last_tick_key(cluster_id: int) -> str:
    return f"{keys.base(cluster_id)}:lasttick"


def tick(cluster_id: int, *, force: bool = False) -> int | None:
    """Run one tick unless one ran within the last 1/MAX_TICK_HZ s (returns its seq)."""
    r = state.redis_client()
    # At most MAX_TICK_HZ; a tick that takes longer than that (a huge cluster) waits
    # as long again, so ticks never use more than half a worker.
    gate_ms = int(max(state.conf().tick_min_s, 2 * _tick_cost.get(cluster_id, 0.0)) * 1000)
    if not r.set(_gate_key(cluster_id), 1, nx=True, px=gate_ms) and not force:
        return None
    lock = f"{keys.base(cluster_id)}:ticklock"
    if not r.set(lock, os.getpid(), nx=True, px=120_000):
        return None
    started = time.monotonic()
    try:
        return _tick(r, cluster_id)
    finally:
        r.delete(lock)
        _tick_cost[cluster_id] = time.monotonic() - started


def _reduce(values: np.ndarray, index: state.GroupIndex) -> np.ndarray:
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


def _tick(r: redis.Redis, cluster_id: int) -> int | None:
    from twin.telemetry.models import Alert

    lay = state.layout(cluster_id)
    ensure_state(lay)
    n = lay.n
    ver = lay.version
    c = state.conf()
    sbase = keys.state(cluster_id, ver)
    pipe = r.pipeline(transaction=False)
    for i in range(N_METRICS):
        pipe.get(keys.metric(cluster_id, ver, i))
    pipe.get(keys.seen(cluster_id, ver))
    pipe.get(keys.health(cluster_id, ver))
    pipe.get(f"{sbase}:alerts")
    pipe.get(f"{sbase}:ewma")
    pipe.get(f"{sbase}:health_db")
    raw = pipe.execute()
    now = time.time()
    values = np.full((N_METRICS, n), np.nan, dtype=np.float32)
    for i in range(N_METRICS):
        if raw[i] and len(raw[i]) == 4 * n:
            values[i] = np.frombuffer(raw[i], dtype="<f4")
    seen = (np.frombuffer(raw[N_METRICS], dtype="<f8") if raw[N_METRICS]
            and len(raw[N_METRICS]) == 8 * n else np.full(n, np.nan))
    # What the CardHealth table reflects (it may lag the live health: see below).
    health_raw = raw[N_METRICS + 4]
    old_health = (np.frombuffer(health_raw, dtype=np.uint8).copy()
                  if health_raw and len(health_raw) == n else np.zeros(n, np.uint8))
    alert_state, ewma_raw = raw[N_METRICS + 2], raw[N_METRICS + 3]
    reported = np.isfinite(seen)
    age = np.where(reported, now - seen, np.nan)
    fresh = reported & (age <= c.stale_after_s)
    stale = reported & ~fresh
    fresh_values = np.where(fresh, values, np.nan)

    # Rollups per level.
    rollups: dict[str, np.ndarray] = {}
    reporting: dict[str, np.ndarray] = {}
    if n:
        for level, index in lay.groups.items():
            rollups[level] = _reduce(fresh_values, index)  # (N_METRICS, 5, G)
            fr = fresh[index.perm] if index.perm is not None else fresh
            reporting[level] = np.add.reduceat(fr.astype(np.int32), index.starts).astype(
                np.int32)
    racks = lay.groups["rack"]
    if n:
        power = rollups["rack"][POWER]
        rack_draw = np.where(power[4] > 0, power[3] + racks.static_w, np.nan)
    else:
        rack_draw = np.zeros(0)

    # Utilization EWMA (for the sudden-drop rule).
    ewma = (np.frombuffer(ewma_raw, dtype="<f4").astype(np.float64)
            if ewma_raw and len(ewma_raw) == 4 * n else np.full(n, np.nan))
    last_ts_raw = r.get(f"{sbase}:ewma_ts")
    dt_s = min(max(now - float(last_ts_raw), 0.0), 10.0) if last_ts_raw else 1.0
    alpha = 1.0 - math.exp(-dt_s / EWMA_TAU_S)
    util = fresh_values[UTIL].astype(np.float64)

    # Alerts and health.
    def subject_of(rule: Rule, pos: int) -> dict[str, Any]:
        if rule.level == "cluster":
            return {"subject": f"cluster:{cluster_id}",
                    "label": f"cluster {lay.groups['cluster'].names[0]}"}
        if rule.level == "rack":
            rid = int(racks.ids[pos])
            return {"subject": f"rack:{rid}", "rack_id": rid, "label": f"rack {racks.names[pos]}",
                    "threshold": float(racks.budget_w[pos])}
        card_id = int(lay.card_ids[pos])
        rack_pos = int(racks.of_card[pos])
        sn = lay.groups["supernode"]
        out: dict[str, Any] = {
            "subject": f"card:{card_id}", "card_id": card_id,
            "rack_id": int(racks.ids[rack_pos]),
            "supernode_id": int(sn.ids[sn.of_card[pos]]), "label": f"card {card_id}"}
        if rule.key == "card_power":
            out["threshold"] = float(lay.tdp_w[pos]) * rule.threshold
        return out

    def load_open() -> list[tuple[str, str, int]]:
        return list(Alert.objects.filter(cluster_id=cluster_id, ended__isnull=True)
                    .values_list("rule", "subject", "id"))

    card_pos = {int(cid): k for k, cid in enumerate(lay.card_ids)} if not alert_state else {}

    def position_of(level: str, subject: str) -> int | None:
        kind, _, ident = subject.partition(":")
        if level == "cluster" and kind == "cluster":
            return 0
        if level == "rack" and kind == "rack":
            try:
                return racks.position(int(ident))
            except KeyError:
                return None
        if kind == "card":
            return card_pos.get(int(ident))
        return None

    inp = EvalInput(now=now, values=fresh_values, fresh=fresh, stale=stale, age_s=age,
                    tdp_w=lay.tdp_w.astype(np.float64), util_ewma=ewma,
                    rack_draw_w=rack_draw, rack_budget_w=racks.budget_w,
                    rack_of=racks.of_card)
    try:
        new_state, transitions, card_alerts = evaluate(
            inp, alert_state, subject_of=subject_of, cluster_id=cluster_id,
            load_open=load_open, position_of=position_of)
    except IntegrityError:
        # The damping state and the database disagree (Redis was flushed while
        # alerts were open): rebuild the state from the database next tick.
        log.warning("alert state of cluster %s rebuilt from the database", cluster_id)
        r.delete(f"{sbase}:alerts")
        new_state, transitions, card_alerts = alert_state or b"", [], {}

    ewma = np.where(np.isfinite(util), np.where(np.isfinite(ewma), ewma + alpha * (util - ewma),
                                                util), ewma)
    health = np.where(reported, HEALTH_CODES["ok"], HEALTH_CODES["unknown"]).astype(np.uint8)
    rank = {"warning": HEALTH_CODES["warning"], "critical": HEALTH_CODES["critical"]}
    for o, active in card_alerts.items():
        worst = max(rank.get(sev, 0) for _, sev in active)
        if worst and health[o] != HEALTH_CODES["unknown"]:
            health[o] = max(int(health[o]), worst)
    health[stale] = HEALTH_CODES["stale"]

    seq = int(r.incr(keys.seq(cluster_id)))
    pipe = r.pipeline(transaction=False)
    for level, stats in rollups.items():
        for i in range(N_METRICS):
            pipe.set(keys.rollup(cluster_id, ver, level, i), stats[i].tobytes())
        pipe.set(keys.rollup(cluster_id, ver, level, "meta"), msgpack.packb(
            {"seq": seq, "ts": now, "reporting": reporting[level].tobytes()}))
    pipe.set(keys.health(cluster_id, ver), health.tobytes())
    pipe.set(f"{sbase}:alerts", new_state)
    pipe.set(f"{sbase}:ewma", ewma.astype("<f4").tobytes())
    pipe.set(f"{sbase}:ewma_ts", repr(now))
    pipe.set(last_tick_key(cluster_id), repr(now))
    pipe.execute()

    synced = _sync_card_health(lay, old_health, health, card_alerts, transitions, now)
    r.set(f"{sbase}:health_db", synced.tobytes())
    _sample_minute(r, lay, fresh_values, now)

    group = state.group_name(cluster_id)
    bridge.group_send(group, {"type": state.TICK_EVENT, "cluster": cluster_id, "seq": seq,
                              "ts": now, "layout": ver})
    if transitions:
        _publish_alerts(cluster_id, transitions)
    return seq


def _publish_alerts(cluster_id: int, transitions: list[Any]) -> None:
    from twin.telemetry.models import Alert

    ids = [t.alert_id for t in transitions[:200] if t.alert_id]
    rows = {a.pk: a for a in Alert.objects.filter(pk__in=ids).select_related("acknowledged_by")}
    for t in transitions[:200]:
        alert = rows.get(t.alert_id)
        if alert is None:
            continue
        bridge.group_send(state.group_name(cluster_id), {
            "type": state.ALERT_EVENT, "cluster": cluster_id, "event": t.event,
            "alert": alert.as_event()})


HEALTH_SYNC_PER_TICK = 5000
"""Card health rows written per tick: a mass event (a rack of cards going stale and
back) is caught up over a few ticks instead of stalling one."""


def _sync_card_health(lay: Layout, old: np.ndarray, new: np.ndarray,
                      card_alerts: dict[int, list[tuple[str, str]]], transitions: list[Any],
                      now: float) -> np.ndarray:
    """Bring ``CardHealth`` rows (non-OK cards only) toward the live health; returns
    the health the table now reflects."""
    from twin.telemetry.models import CardHealth

    diff = np.flatnonzero(old != new)
    changed = set(diff[:HEALTH_SYNC_PER_TICK].tolist())
    synced = old.copy()
    synced[list(changed)] = new[list(changed)]
    touched = {t.position for t in transitions if t.rule.level == "card"} - changed
    touched = {o for o in touched if int(synced[o]) == int(new[o])}
    if not changed and not touched:
        return synced
    stamp = dt.datetime.fromtimestamp(now, tz=dt.UTC)
    bad = {HEALTH_CODES["warning"], HEALTH_CODES["critical"], HEALTH_CODES["stale"]}
    names = state.HEALTH_NAMES
    gone = [int(lay.card_ids[o]) for o in changed if int(new[o]) not in bad]
    if gone:
        for i in range(0, len(gone), 2000):
            CardHealth.objects.filter(card_id__in=gone[i:i + 2000]).delete()

    def reasons(o: int) -> str:
        active = sorted(rule for rule, _ in card_alerts.get(o, []))
        if int(new[o]) == HEALTH_CODES["stale"] and "stale" not in active:
            active.append("stale")
        return ",".join(active)[:300]

    upsert = [CardHealth(card_id=int(lay.card_ids[o]), cluster_id=lay.cluster_id,
                         status=names[int(new[o])], reasons=reasons(o), since=stamp)
              for o in sorted(changed) if int(new[o]) in bad]
    if upsert:
        CardHealth.objects.bulk_create(upsert, batch_size=2000, update_conflicts=True,
                                       unique_fields=["card"],
                                       update_fields=["status", "reasons", "since"])
    for o in touched:
        if int(new[o]) in bad:
            CardHealth.objects.filter(card_id=int(lay.card_ids[o])).update(reasons=reasons(o))
    return synced


# --------------------------------------------------------------------------
# 1-minute history
# --------------------------------------------------------------------------

def _sample_minute(r: redis.Redis, lay: Layout, fresh_values: np.ndarray, now: float) -> None:
    """Every ``TELEMETRY_MINUTE_SAMPLE_S`` add the fresh state to the minute's
    accumulators; when the minute changes, hand the finished one to a task."""
    from twin.telemetry import tasks

    every = float(_setting("TELEMETRY_MINUTE_SAMPLE_S", 5.0))
    acc = f"{keys.state(lay.cluster_id, lay.version)}:acc"
    minute = int(now // 60)
    last = r.get(f"{acc}:last")
    if last is not None and now - float(last) < every:
        return
    current = r.get(f"{acc}:minute")
    if current is not None and int(current) != minute:
        done = f"{acc}:{int(current)}"
        pipe = r.pipeline(transaction=True)
        for part in ("sum", "max", "cnt"):
            pipe.rename(f"{acc}:{part}", f"{done}:{part}")
            pipe.expire(f"{done}:{part}", 3600)
        try:
            pipe.execute()
            if not tasks.dispatch(tasks.persist_minute, lay.cluster_id, lay.version,
                                  int(current)):
                persist_minute(lay.cluster_id, lay.version, int(current))
        except redis.ResponseError:
            log.warning("minute accumulators of cluster %s were incomplete", lay.cluster_id)
    n = lay.n
    raw_sum, raw_max, raw_cnt = r.mget(f"{acc}:sum", f"{acc}:max", f"{acc}:cnt")
    size = N_METRICS * n
    total = (np.frombuffer(raw_sum, "<f4").reshape(N_METRICS, n).copy()
             if raw_sum and len(raw_sum) == 4 * size else np.zeros((N_METRICS, n), np.float32))
    vmax = (np.frombuffer(raw_max, "<f4").reshape(N_METRICS, n).copy()
            if raw_max and len(raw_max) == 4 * size
            else np.full((N_METRICS, n), np.nan, np.float32))
    cnt = (np.frombuffer(raw_cnt, "<u2").reshape(N_METRICS, n).copy()
           if raw_cnt and len(raw_cnt) == 2 * size else np.zeros((N_METRICS, n), np.uint16))
    finite = np.isfinite(fresh_values)
    total += np.where(finite, fresh_values, 0)
    vmax = np.fmax(vmax, fresh_values)
    cnt += finite.astype(np.uint16)
    pipe = r.pipeline(transaction=False)
    pipe.set(f"{acc}:sum", total.astype("<f4").tobytes(), ex=600)
    pipe.set(f"{acc}:max", vmax.astype("<f4").tobytes(), ex=600)
    pipe.set(f"{acc}:cnt", cnt.astype("<u2").tobytes(), ex=600)
    pipe.set(f"{acc}:minute", minute, ex=600)
    pipe.set(f"{acc}:last", repr(now), ex=600)
    pipe.execute()


def persist_minute(cluster_id: int, version: str, minute: int) -> int:
    """Write one finished minute (cards, racks, supernodes, cluster) to the database."""
    from twin.telemetry.models import TelemetryMinute

    r = state.redis_client()
    lay = state.layout(cluster_id)
    if lay.version != version:
        return 0
    base = f"{keys.state(cluster_id, version)}:acc:{minute}"
    raw_sum, raw_max, raw_cnt = r.mget(f"{base}:sum", f"{base}:max", f"{base}:cnt")
    n = lay.n
    if not (raw_sum and raw_max and raw_cnt) or len(raw_sum) != 4 * N_METRICS * n:
        return 0
    total = np.frombuffer(raw_sum, "<f4").reshape(N_METRICS, n)
    vmax = np.frombuffer(raw_max, "<f4").reshape(N_METRICS, n)
    cnt = np.frombuffer(raw_cnt, "<u2").reshape(N_METRICS, n).astype(np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(cnt > 0, total / np.maximum(cnt, 1), np.nan).astype(np.float32)
    stamp = dt.datetime.fromtimestamp(minute * 60, tz=dt.UTC)
    rows: list[TelemetryMinute] = []
    any_card = (cnt > 0).any(axis=0)
    samples = cnt.max(axis=0)
    if n <= int(_setting("TELEMETRY_PERSIST_CARDS_MAX", 8_192)):
        for o in np.flatnonzero(any_card):
            rows.append(TelemetryMinute(
                cluster_id=cluster_id, level="card", object_id=int(lay.card_ids[o]),
                minute=stamp, samples=int(samples[o]), mean=mean[:, o].tobytes(),
                max=vmax[:, o].tobytes()))
    for level, index in lay.groups.items():
        if not n:
            break
        gmean = _reduce(mean, index)[:, 0, :]  # mean over cards of the card means
        gmax = _reduce(vmax, index)[:, 2, :]
        power = _reduce(mean[POWER], index)
        gsamples = np.add.reduceat((samples[index.perm] if index.perm is not None
                                    else samples).astype(np.int64), index.starts)
        for g, gid in enumerate(index.ids):
            if power[4, g] == 0 and not np.isfinite(gmean[:, g]).any():
                continue
            draw = float(power[3, g] + index.static_w[g]) if power[4, g] > 0 else None
            rows.append(TelemetryMinute(
                cluster_id=cluster_id, level=level, object_id=int(gid), minute=stamp,
                samples=int(gsamples[g]), mean=gmean[:, g].astype("<f4").tobytes(),
                max=gmax[:, g].astype("<f4").tobytes(), draw_w=draw))
    TelemetryMinute.objects.bulk_create(rows, batch_size=2000, ignore_conflicts=True)
    r.delete(f"{base}:sum", f"{base}:max", f"{base}:cnt")
    return len(rows)
