"""The tick: rollups, health, alerts, history sampling and the ``telemetry.tick`` event.

``tick(cluster)`` runs at most ``MAX_TICK_HZ`` times a second per cluster (a
Redis gate shared by all workers): it reads the whole state once, computes
the rollups, evaluates the health rules (``health``), writes the live state
back and publishes ``telemetry.tick`` to the cluster's Channels group at once;
only then (the stages that wait on the database and the history stores, which
no live frame reads) it writes the alert rows the rules opened or closed
(``health.commit_alerts``: decided before the event, committed after it; a
failed commit is retried by the next tick), updates each card's health row,
hands new card failures to self-healing (``failures``), samples the state for
the 1-minute history (``minutes``), sends every card's samples to
VictoriaMetrics once a ``TWIN_VICTORIA_STEP_S`` when it is configured
(``victoria``), and publishes the alert transitions.

The tick's ``seq`` only grows, across worker *and* Redis restarts (clients keep
the newest ``seq`` they applied and drop anything not newer): each tick takes
``max(last + 1, now in epoch milliseconds)`` (:func:`next_seq`), so a Redis
that lost the counter resumes above every number it handed out before — as
long as the workers' clocks do not go back. Ticks are at most ``MAX_TICK_HZ``
per cluster, so numbers are usually the tick's time in ms; only their order
means anything.

A cluster larger than ``TELEMETRY_TICK_SHARD_CARDS`` ticks in shards instead
(``shards``): ``tick`` then starts a round whose shard tasks run on several
worker processes, and the last one to finish publishes the tick.
"""
from __future__ import annotations

import os

import msgpack
import numpy as np
import redis

from twin.telemetry import bridge, keys, trace, victoria
from twin.telemetry.config import conf, redis_client
from twin.telemetry.metrics import N_METRICS
from twin.telemetry.processing import shards, tickparts
from twin.telemetry.processing.aggregate import reduce_levels, reporting_counts
from twin.telemetry.processing.apply import ensure_state
from twin.telemetry.processing.failures import detect_failures, handle_failures
from twin.telemetry.processing.follow_ups import NO_FOLLOW_UPS, FollowUps
from twin.telemetry.processing.health import (
    card_health,
    commit_alerts,
    decide_alerts,
    sync_card_health,
)
from twin.telemetry.processing.minutes import POWER, sample_minute
from twin.telemetry.processing.plant import record_minute, step_capping, step_plant
from twin.telemetry.processing.tickparts import (
    data_ts,
    ewma_alpha,
    next_ewma,
    next_seq,
    publish_alerts,
    read_cards,
)
from twin.telemetry.state import TICK_EVENT, Layout, group_name, layout

__all__ = ["gate_ms", "next_seq", "retry_wait_s", "tick"]

_tick_cost: dict[int, float] = {}


def tick(cluster_id: int, *, force: bool = False,
         follow_ups: FollowUps = NO_FOLLOW_UPS) -> int | None:
    """Run one tick unless one ran within the last 1/MAX_TICK_HZ s (returns its seq).

    A finished minute of history is handed to ``follow_ups.persist_minute``
    (written here when that queues nothing). A sharded cluster (``shards``)
    starts a round instead: its seq when the round ran here (``follow_ups``
    queue no shard tasks), else 0 (the round's last shard publishes it).
    """
    r = redis_client()
    if not r.set(keys.tick_gate(cluster_id), 1, nx=True, px=gate_ms(cluster_id)) and not force:
        return None
    lay = layout(cluster_id)
    bounds = shards.plan(lay)
    if bounds:
        _tick_cost.pop(cluster_id, None)  # (a whole tick's cost says nothing about rounds)
        return shards.start_round(r, lay, bounds, follow_ups)
    shards.round_cost.pop(cluster_id, None)
    lock = keys.tick_lock(cluster_id)
    if not r.set(lock, os.getpid(), nx=True, px=120_000):
        return None
    span = trace.Span("tick", cluster=cluster_id, n=lay.n)
    seq = None
    try:
        seq = _tick(r, lay, follow_ups, span)
        return seq
    finally:
        wall, cpu = span.wall_s, span.cpu_s
        _tick_cost[cluster_id] = cpu
        pipe = r.pipeline(transaction=False)
        pipe.delete(lock)
        # For the twin's own /metrics, whichever worker ticked (twin.telemetry.monitoring).
        stats = keys.tick_stats(cluster_id)
        pipe.hincrby(stats, "count", 1)
        pipe.hincrbyfloat(stats, "sum", wall)
        pipe.hincrbyfloat(stats, "cpu_sum", cpu)
        pipe.hset(stats, mapping={"last": repr(wall), "cpu_last": repr(cpu)})
        pipe.execute()
        span.finish(r, seq=seq)


def gate_ms(cluster_id: int) -> int:
    """How long the tick gate stays closed after a tick of ``cluster_id`` starts (ms).

    At most ``MAX_TICK_HZ``; a tick that costs more than half of that (a huge
    cluster) waits twice its cost, so ticks never use more than half a core. The
    cost is the last tick's *CPU* time (of its thread), not its wall time: on a
    machine whose cores are busy with something else (a crowd of web readers) a
    tick's wall time is mostly waiting for a core, and a gate that grew with it
    held back the next batch's tick for that long again: the live view fell
    further behind exactly when the machine was busiest (``benchmarks/serving.py``:
    tick p50 1.1 s with 100 readers). A sharded round is gated on CPU time too:
    its critical path (start, slowest shard, merge: ``shards.round_cpu``), once,
    not twice — it spreads over several processes, and rounds never overlap (the
    lock).
    """
    cost = max(2 * _tick_cost.get(cluster_id, 0.0), shards.round_cost.get(cluster_id, 0.0))
    return int(max(conf().tick_min_s, cost) * 1000)


def retry_wait_s(cluster_id: int) -> float:
    """Seconds until the tick gate of ``cluster_id`` opens (at least 0.05): when a
    gated trailing tick should try again."""
    return max(redis_client().pttl(keys.tick_gate(cluster_id)), 50) / 1000.0


def _tick(r: redis.Redis, lay: Layout, follow_ups: FollowUps, span: trace.Span) -> int | None:
    cluster_id = lay.cluster_id
    ensure_state(lay)
    n = lay.n
    ver = lay.version
    pipe = r.pipeline(transaction=False)
    for i in range(N_METRICS):
        pipe.get(keys.metric(cluster_id, ver, i))
    pipe.get(keys.seen(cluster_id, ver))
    pipe.get(keys.health(cluster_id, ver))
    pipe.get(keys.alerts(cluster_id, ver))
    pipe.get(keys.ewma(cluster_id, ver))
    pipe.get(keys.health_db(cluster_id, ver))
    pipe.get(keys.ewma_ts(cluster_id, ver))
    tickparts.queue_lag_probe(pipe)
    raw = pipe.execute()
    now = tickparts.clock()
    lag = tickparts.ingest_lag_s(*raw[N_METRICS + 6:N_METRICS + 9])
    # (old_health: what the CardHealth table reflects; it may lag the live health)
    cards = read_cards(raw[:N_METRICS], raw[N_METRICS], raw[N_METRICS + 4],
                       raw[N_METRICS + 3], n, now, lag)
    alert_state = raw[N_METRICS + 2]
    span.mark("read")
    fresh, stale, fresh_values = cards.fresh, cards.stale, cards.fresh_values

    # Rollups per level.
    rollups: dict[str, np.ndarray] = {}
    reporting: dict[str, np.ndarray] = {}
    if n:
        rollups = reduce_levels(fresh_values, lay.groups)  # (N_METRICS, 5, G) per level
        reporting = {level: reporting_counts(fresh, index) for level, index in lay.groups.items()}
    racks = lay.groups["rack"]
    if n:
        power = rollups["rack"][POWER]
        rack_draw = np.where(power[4] > 0, power[3] + racks.static_w, np.nan)
    else:
        rack_draw = np.zeros(0)
    span.mark("rollups")

    # Utilization EWMA (for the sudden-drop rule).
    alpha = ewma_alpha(raw[N_METRICS + 5], now)

    # Alerts and health.
    plant = step_plant(r, lay, rollups, now)  # the physical twin (None: no facility)
    span.mark("plant")
    caps = step_capping(r, lay, fresh_values[POWER], plant, now) if n else None  # (None: off)
    span.mark("capping")
    record_minute(r, lay, plant, caps, now)  # the plant's minute history
    span.mark("plant_minute")
    decided = decide_alerts(
        lay, cluster_id, now=now, fresh_values=fresh_values, fresh=fresh, stale=stale,
        age=cards.age, util_ewma=cards.ewma, rack_draw=rack_draw, alert_state=alert_state,
        plant=plant)
    card_alerts = decided.card_alerts
    ewma = next_ewma(cards.ewma, fresh_values, alpha)
    health = card_health(cards.reported, stale, card_alerts)
    span.mark("alerts")

    seq = next_seq(r, cluster_id, now)
    pipe = r.pipeline(transaction=False)
    for level, stats in rollups.items():
        for i in range(N_METRICS):
            pipe.set(keys.rollup(cluster_id, ver, level, i), stats[i].tobytes())
        pipe.set(keys.rollup(cluster_id, ver, level, "meta"), msgpack.packb(
            {"seq": seq, "ts": now, "reporting": reporting[level].tobytes()}))
    pipe.set(keys.health(cluster_id, ver), health.tobytes())
    pipe.set(keys.alerts(cluster_id, ver), decided.packed())  # (with the writes to do)
    pipe.set(keys.ewma(cluster_id, ver), ewma.astype("<f4").tobytes())
    pipe.set(keys.ewma_ts(cluster_id, ver), repr(now))
    pipe.set(keys.last_tick(cluster_id), repr(now))
    pipe.execute()
    span.mark("write")

    # The event goes out as soon as the live state a client reads is in Redis: the
    # stages below only write the database (alert rows, CardHealth rows, self-healing's
    # runs), the minute history and VictoriaMetrics, which wait on a shared PostgreSQL
    # under load (the slowest ticks of ``benchmarks/serving.py`` waited 0.6-1.2 s on
    # the alert rows' commit) and which no frame reads. What they change clients
    # learn by their own events (alerts, remediations).
    group = group_name(cluster_id)
    newest = data_ts(cards.seen)
    span.fields.update(now=now, data_ts=newest)
    bridge.group_send(group, {"type": TICK_EVENT, "cluster": cluster_id, "seq": seq,
                              "ts": now, "layout": ver, "data_ts": newest})
    span.mark("send")

    # (before self-healing, which looks the failures' alerts up)
    transitions = commit_alerts(r, cluster_id, [(keys.alerts(cluster_id, ver), decided.ops,
                                                 None)])
    span.mark("alerts_db")
    synced = sync_card_health(lay, cards.old_health, health, card_alerts,
                              decided.transitions, now)
    r.set(keys.health_db(cluster_id, ver), synced.tobytes())
    span.mark("health_db")
    failures = [f.to_dict() for f in detect_failures(
        r, lay, cluster_id, fresh_values=fresh_values, stale=stale, age=cards.age,
        seen=cards.seen, card_alerts=card_alerts)]
    if failures and not follow_ups.heal(cluster_id, failures):
        handle_failures(failures)
    span.mark("failures")
    sample_minute(r, lay, fresh_values, now, follow_ups, rollups, reporting)
    span.mark("minute")
    victoria.write_tick(r, lay, fresh_values, now, follow_ups)
    span.mark("victoria")
    if transitions:  # (after the CardHealth rows, which an alert's reader may look up)
        publish_alerts(cluster_id, [(t.event, t.alert_id) for t in transitions])
        follow_ups.notify()
        span.mark("alerts_out")
    return seq
