"""The 1-minute history: accumulate samples of the state, write finished minutes.

Every ``TELEMETRY_MINUTE_SAMPLE_S`` a tick adds the fresh state to the
current minute's accumulators in Redis; when the minute changes, the finished
one is renamed aside and written to ``TelemetryMinute`` rows (cards, racks,
supernodes, the cluster) by ``persist_minute``.

Two kinds of accumulator, by cluster size. Up to ``TELEMETRY_PERSIST_CARDS_MAX``
cards (8,192) every card keeps its own (sum, max, count per metric: card rows,
and group rows as the mean of their cards' means). A larger cluster keeps no
card rows, so it accumulates per *group* instead (``by_group``), from the
rollups the tick computes anyway: per rack, supernode and the cluster the sum,
count and max of every metric, the card-samples, and the draw. At a million
cards the per-card accumulators were a 272 MB read-modify-write every 5 s and a
272 MB read a minute — ≈ 42 % of the sharded tick's CPU under live load and
29 % of the workers' (``docs/benchmarks.md``, live_million); the group ones are
≈ 1/40 of that. A group's minute mean is then the mean of all its readings in
the minute rather than the mean of its cards' means: the same when every card
reports in every sample, weighted by readings when some miss samples.
"""
from __future__ import annotations

import datetime as dt
import logging

import numpy as np
import redis
from django.conf import settings

from twin.telemetry import keys
from twin.telemetry.config import redis_client
from twin.telemetry.metrics import METRIC_INDEX, N_METRICS
from twin.telemetry.processing.aggregate import reduce_groups, reduce_levels, reporting_counts
from twin.telemetry.processing.follow_ups import NO_FOLLOW_UPS, FollowUps
from twin.telemetry.state import Layout, layout

__all__ = ["GROUP_LEVELS", "POWER", "Row", "add_group_samples", "add_minute_sample", "by_group",
           "finish_minute_sample", "hand_on_minute", "insert_minutes", "minute_due",
           "minute_parts",
           "persist_minute", "sample_minute"]

log = logging.getLogger(__name__)

POWER = METRIC_INDEX["power_w"]

Row = tuple[int, str, int, dt.datetime, int, bytes, bytes, float | None]
"""A ``TelemetryMinute`` row: cluster, level, object id, minute, samples, mean, max, draw."""

_COLUMNS = "cluster_id, level, object_id, minute, samples, mean, max, draw_w"


GROUP_LEVELS = ("rack", "supernode", "cluster")
"""The levels a group accumulator is kept for (``by_group``)."""

_W = 3 * N_METRICS + 3
"""A group accumulator's row (float64): sum, count and max of every metric, then the
card-samples, the summed draw of the samples with a power reading, and how many."""
_SUM, _CNT, _MAX = (slice(k * N_METRICS, (k + 1) * N_METRICS) for k in range(3))
_CARDS, _DRAW, _DRAW_N = 3 * N_METRICS, 3 * N_METRICS + 1, 3 * N_METRICS + 2


def by_group(lay: Layout) -> bool:
    """Whether ``lay``'s minute history accumulates per group: it has more cards
    than ``TELEMETRY_PERSIST_CARDS_MAX``, so no card rows are written."""
    return lay.n > int(getattr(settings, "TELEMETRY_PERSIST_CARDS_MAX", 8_192))


def minute_parts(lay: Layout) -> tuple[str, ...]:
    """The accumulators a finished minute of ``lay`` keeps (``keys.minute_acc`` parts)."""
    return tuple(f"g.{level}" for level in GROUP_LEVELS) if by_group(lay) else keys.MINUTE_PARTS


def sample_minute(r: redis.Redis, lay: Layout, fresh_values: np.ndarray, now: float,
                  follow_ups: FollowUps = NO_FOLLOW_UPS,
                  rollups: dict[str, np.ndarray] | None = None,
                  reporting: dict[str, np.ndarray] | None = None) -> None:
    """Every ``TELEMETRY_MINUTE_SAMPLE_S`` add the fresh state to the minute's
    accumulators; when the minute changes, hand the finished one to
    ``follow_ups.persist_minute`` (or write it here when that queues nothing).

    A cluster kept ``by_group`` adds the tick's ``rollups`` and ``reporting``
    (per level, as the tick computes them; computed here when not given)."""
    if not minute_due(r, lay, now, follow_ups):
        return
    if by_group(lay):
        if rollups is None or reporting is None:
            rollups = reduce_levels(fresh_values, lay.groups, GROUP_LEVELS)
            fresh = np.isfinite(fresh_values).any(axis=0)
            reporting = {lv: reporting_counts(fresh, lay.groups[lv]) for lv in GROUP_LEVELS}
        add_group_samples(r, lay, {lv: (0, rollups[lv], reporting[lv]) for lv in GROUP_LEVELS})
    else:
        add_minute_sample(r, lay, 0, lay.n, fresh_values)
    finish_minute_sample(r, lay, now)


def minute_due(r: redis.Redis, lay: Layout, now: float,
               follow_ups: FollowUps = NO_FOLLOW_UPS) -> bool:
    """Whether a sample is due at ``now``; if so and the minute changed, the finished
    minute is set aside and handed on first (once per tick, sharded or not)."""
    every = float(getattr(settings, "TELEMETRY_MINUTE_SAMPLE_S", 5.0))
    cid, ver = lay.cluster_id, lay.version
    last = r.get(keys.minute_acc(cid, ver, "last"))
    if last is not None and now - float(last) < every:
        return False
    current = r.get(keys.minute_acc(cid, ver, "minute"))
    if current is not None and int(current) != int(now // 60):
        pipe = r.pipeline(transaction=True)
        for part in minute_parts(lay):
            done = keys.minute_acc(cid, ver, part, int(current))
            pipe.rename(keys.minute_acc(cid, ver, part), done)
            pipe.expire(done, 3600)
        try:
            pipe.execute()
            hand_on_minute(lay.cluster_id, lay.version, int(current), follow_ups)
        except redis.ResponseError:
            log.warning("minute accumulators of cluster %s were incomplete", lay.cluster_id)
    return True


def hand_on_minute(cluster_id: int, version: str, minute: int,
                   follow_ups: FollowUps = NO_FOLLOW_UPS) -> None:
    """A finished minute's database write: queued (``follow_ups.persist_minute``), or
    done here when that queues nothing."""
    if not follow_ups.persist_minute(cluster_id, version, minute):
        persist_minute(cluster_id, version, minute)


def add_minute_sample(r: redis.Redis, lay: Layout, start: int, end: int,
                      fresh_values: np.ndarray) -> None:
    """Add the fresh values of cards ``start:end`` (``fresh_values`` is that slice)
    to the minute's accumulators, which are (N_METRICS, n) row-major: the whole
    blob for the whole cluster, one GETRANGE/SETRANGE per metric row for a slice."""
    cid, ver, n = lay.cluster_id, lay.version, lay.n
    m = end - start
    parts = [(keys.minute_acc(cid, ver, p), w) for p, w in zip(
        keys.MINUTE_PARTS, (4, 4, 2), strict=True)]
    whole = start == 0 and end == n
    if whole:
        raws = [[raw] for raw in r.mget([k for k, _ in parts])]
    else:
        pipe = r.pipeline(transaction=False)
        for key, w in parts:
            for i in range(N_METRICS):
                pipe.getrange(key, (i * n + start) * w, (i * n + end) * w - 1)
        flat = pipe.execute()
        raws = [flat[j * N_METRICS:(j + 1) * N_METRICS] for j in range(len(parts))]

    def read(rows: list[bytes | None], dtype: str, w: int, fill: float) -> np.ndarray:
        if whole:
            raw = rows[0]
            if raw and len(raw) == w * N_METRICS * m:
                return np.frombuffer(raw, dtype).reshape(N_METRICS, m).copy()
            return np.full((N_METRICS, m), fill, dtype)
        out = np.full((N_METRICS, m), fill, dtype)
        for i, raw in enumerate(rows):
            # (a missing blob, or one created by another shard's SETRANGE: zeros)
            if raw and len(raw) == w * m:
                out[i] = np.frombuffer(raw, dtype)
        return out

    total = read(raws[0], "<f4", 4, 0.0)
    vmax = read(raws[1], "<f4", 4, np.nan)
    cnt = read(raws[2], "<u2", 2, 0)
    finite = np.isfinite(fresh_values)
    vmax = np.where(cnt > 0, vmax, np.nan).astype("<f4")  # zero padding is no maximum
    total += np.where(finite, fresh_values, 0)
    vmax = np.fmax(vmax, fresh_values)
    cnt += finite.astype(np.uint16)
    pipe = r.pipeline(transaction=False)
    for (key, w), arr in zip(parts, (total.astype("<f4"), vmax.astype("<f4"),
                                     cnt.astype("<u2")), strict=True):
        if whole:
            pipe.set(key, arr.tobytes(), ex=600)
        else:
            for i in range(N_METRICS):
                pipe.setrange(key, (i * n + start) * w, arr[i].tobytes())
    pipe.execute()


def add_group_samples(r: redis.Redis, lay: Layout,
                      parts: dict[str, tuple[int, np.ndarray, np.ndarray]]) -> None:
    """Add one sample to the group accumulators of a ``by_group`` cluster: for each
    level, ``(g0, stats, reporting)`` — the rollup of groups ``g0:g0 + G``
    (``reduce_groups``: (N_METRICS, 5, G)) and their reporting cards. The
    accumulator is (groups, ``_W``) float64, group-major, so a shard's groups are
    one GETRANGE and one SETRANGE (a missing blob reads as zeros: nothing yet)."""
    cid, ver = lay.cluster_id, lay.version
    row = 8 * _W
    pipe = r.pipeline(transaction=False)
    for level, (g0, stats, _) in parts.items():
        pipe.getrange(keys.minute_acc(cid, ver, f"g.{level}"), row * g0,
                      row * (g0 + stats.shape[-1]) - 1)
    raws = pipe.execute()
    pipe = r.pipeline(transaction=False)
    for (level, (g0, stats, reporting)), raw in zip(parts.items(), raws, strict=True):
        g = stats.shape[-1]
        acc = np.zeros((g, _W), "<f8")
        if raw and len(raw) == row * g:
            acc[:] = np.frombuffer(raw, "<f8").reshape(g, _W)
        count = stats[:, 4, :].T.astype(np.float64)  # (G, N_METRICS)
        vmax = np.where(acc[:, _CNT] > 0, acc[:, _MAX], np.nan)  # zero padding: no maximum
        acc[:, _SUM] += np.where(count > 0, stats[:, 3, :].T, 0.0)
        acc[:, _CNT] += count
        acc[:, _MAX] = np.fmax(vmax, stats[:, 2, :].T)
        acc[:, _CARDS] += reporting
        power = stats[POWER]
        acc[:, _DRAW] += np.where(power[4] > 0, power[3], 0.0)
        acc[:, _DRAW_N] += power[4] > 0
        pipe.setrange(keys.minute_acc(cid, ver, f"g.{level}"), row * g0, acc.tobytes())
    pipe.execute()


def finish_minute_sample(r: redis.Redis, lay: Layout, now: float) -> None:
    """Mark the sample at ``now`` taken (after every card's values were added)."""
    cid, ver = lay.cluster_id, lay.version
    pipe = r.pipeline(transaction=False)
    for part in minute_parts(lay):
        pipe.expire(keys.minute_acc(cid, ver, part), 600)
    pipe.set(keys.minute_acc(cid, ver, "minute"), int(now // 60), ex=600)
    pipe.set(keys.minute_acc(cid, ver, "last"), repr(now), ex=600)
    pipe.execute()


def persist_minute(cluster_id: int, version: str, minute: int) -> int:
    """Write one finished minute (cards, racks, supernodes, cluster) to the database,
    and the plant's minute (``PlantMinute``, when the cluster has a facility)."""
    r = redis_client()
    from twin.telemetry.processing.plant import persist_plant_minute  # (it imports this)

    persist_plant_minute(r, cluster_id, minute)
    lay = layout(cluster_id)
    if lay.version != version:
        return 0
    if by_group(lay):
        return _persist_groups(r, lay, minute)
    done = [keys.minute_acc(cluster_id, version, p, minute) for p in keys.MINUTE_PARTS]
    raw_sum, raw_max, raw_cnt = r.mget(done)
    n = lay.n
    if not (raw_sum and raw_max and raw_cnt) or len(raw_sum) != 4 * N_METRICS * n:
        return 0
    total = np.frombuffer(raw_sum, "<f4").reshape(N_METRICS, n)
    vmax = np.frombuffer(raw_max, "<f4").reshape(N_METRICS, n)
    cnt = np.frombuffer(raw_cnt, "<u2").reshape(N_METRICS, n).astype(np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(cnt > 0, total / np.maximum(cnt, 1), np.nan).astype(np.float32)
    stamp = dt.datetime.fromtimestamp(minute * 60, tz=dt.UTC)
    rows: list[Row] = []
    any_card = (cnt > 0).any(axis=0)
    samples = cnt.max(axis=0)
    if n <= int(getattr(settings, "TELEMETRY_PERSIST_CARDS_MAX", 8_192)):
        for o in np.flatnonzero(any_card):
            rows.append((cluster_id, "card", int(lay.card_ids[o]), stamp, int(samples[o]),
                         mean[:, o].tobytes(), vmax[:, o].tobytes(), None))
    for level, index in lay.groups.items():
        if not n:
            break
        gmean = reduce_groups(mean, index)[:, 0, :]  # mean over cards of the card means
        gmax = reduce_groups(vmax, index)[:, 2, :]
        power = reduce_groups(mean[POWER], index)
        gsamples = np.add.reduceat((samples[index.perm] if index.perm is not None
                                    else samples).astype(np.int64), index.starts)
        for g, gid in enumerate(index.ids):
            if power[4, g] == 0 and not np.isfinite(gmean[:, g]).any():
                continue
            draw = float(power[3, g] + index.static_w[g]) if power[4, g] > 0 else None
            rows.append((cluster_id, level, int(gid), stamp, int(gsamples[g]),
                         gmean[:, g].astype("<f4").tobytes(),
                         gmax[:, g].astype("<f4").tobytes(), draw))
    insert_minutes(rows)
    r.delete(*done)
    return len(rows)



def _persist_groups(r: redis.Redis, lay: Layout, minute: int) -> int:
    """``persist_minute`` of a ``by_group`` cluster: group rows from the group
    accumulators (the mean of all readings, the max, the card-samples, the draw)."""
    cid, ver = lay.cluster_id, lay.version
    done = [keys.minute_acc(cid, ver, f"g.{level}", minute) for level in GROUP_LEVELS]
    stamp = dt.datetime.fromtimestamp(minute * 60, tz=dt.UTC)
    rows: list[Row] = []
    for level, raw in zip(GROUP_LEVELS, r.mget(done), strict=True):
        index = lay.groups[level]
        if not raw or len(raw) != 8 * _W * len(index.ids):
            continue
        acc = np.frombuffer(raw, "<f8").reshape(len(index.ids), _W)
        cnt = acc[:, _CNT]
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(cnt > 0, acc[:, _SUM] / np.maximum(cnt, 1), np.nan)
            draw = acc[:, _DRAW] / acc[:, _DRAW_N] + index.static_w
        vmax = np.where(cnt > 0, acc[:, _MAX], np.nan)
        means, maxes = mean.astype("<f4"), vmax.astype("<f4")
        for g in np.flatnonzero((cnt > 0).any(axis=1)):
            rows.append((cid, level, int(index.ids[g]), stamp, int(acc[g, _CARDS]),
                         means[g].tobytes(), maxes[g].tobytes(),
                         float(draw[g]) if acc[g, _DRAW_N] > 0 else None))
    insert_minutes(rows)
    r.delete(*done)
    return len(rows)


def insert_minutes(rows: list[Row]) -> None:
    """Insert minute rows, skipping any already there (a minute written twice).

    On PostgreSQL by COPY into a temporary table and one INSERT … ON CONFLICT DO
    NOTHING: a million-card cluster's minute is ≈ 28,700 group rows, which the
    ORM's ``bulk_create`` took 3.1 s of a worker's CPU to write (this: 0.1 s;
    ``benchmarks/ingest_paths.py``) — once a minute, the slow tick rounds of
    ``live_million``."""
    from django.db import connection, transaction

    from twin.telemetry.models import TelemetryMinute

    if not rows:
        return
    if connection.vendor != "postgresql":
        TelemetryMinute.objects.bulk_create(
            [TelemetryMinute(cluster_id=c, level=lv, object_id=o, minute=m, samples=n,
                             mean=mean, max=mx, draw_w=d)
             for c, lv, o, m, n, mean, mx, d in rows], batch_size=2000, ignore_conflicts=True)
        return
    table = connection.ops.quote_name(TelemetryMinute._meta.db_table)
    with transaction.atomic(), connection.cursor() as cursor:
        # (ON COMMIT DROP happens at the outermost commit: inside a longer transaction
        # the table of an earlier call is still there)
        cursor.execute("DROP TABLE IF EXISTS pg_temp.twin_minute_load")
        cursor.execute("CREATE TEMP TABLE twin_minute_load (cluster_id bigint, "
                       "level varchar(10), object_id bigint, minute timestamptz, "
                       "samples integer, mean bytea, max bytea, draw_w double precision) "
                       "ON COMMIT DROP")
        with cursor.cursor.copy(f"COPY twin_minute_load ({_COLUMNS}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        cursor.execute(f"INSERT INTO {table} ({_COLUMNS}) SELECT {_COLUMNS} "
                       f"FROM twin_minute_load ON CONFLICT DO NOTHING")
