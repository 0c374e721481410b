"""The sharded tick: one large cluster's tick spread over several worker processes.

One process ticks a 65,536-card cluster in ~40-115 ms (``docs/benchmarks.md``),
so a million cards cannot tick once a second on one core. A cluster of more
than ``TELEMETRY_TICK_SHARD_CARDS`` cards (default 131,072; 0 turns sharding
off) is cut into shards: contiguous ranges of card ordinals that start where a
supernode *and* a rack start (``plan``). Ordinals are ordered by supernode, then
rack (``state.layouts``), so every rack and supernode lies in one shard, and its
rollup is a contiguous slice of the level's rollup blob. Smaller clusters take
the whole-cluster tick of ``ticks`` unchanged.

A tick is then a *round*:

1. ``start_round`` (whoever passes the tick gate, as for any tick) takes the tick
   lock for the round, fixes the round's ``now``, reads the ``seen`` blob once to
   decide whether the whole cluster is silent (the one input a shard cannot see
   from its own cards), decides whether a minute-history sample is due (setting a
   finished minute aside, as ``minutes.sample_minute`` does), and queues one
   ``tick_shard`` task per shard (``follow_ups.tick_shard``; with nothing to
   queue it runs them here, one after the other).
2. ``run_shard`` reads only its slice of every blob (GETRANGE), computes the
   rack and supernode rollups of its cards, decides the card and rack rules with its
   own damping state (``keys.shard_alerts``; the alert rows to write go to the
   merge in its part and stay in that state until written), derives and syncs its
   cards' health,
   hands its new failures to self-healing, adds its slice to the minute
   accumulators, writes its slices back (SETRANGE) and leaves its partial
   cluster statistics (count, sum, min, max per metric) and reporting counts
   under ``keys.tick_part``. It then decrements the round's counter.
3. The shard that takes the counter to 0 merges (``_merge``): the cluster rollup
   from the partials, the cluster rules, the physical twin — the plant stepped
   once on every rack's power as the shards wrote it, then the plant's rules
   (``alerts.PLANT_RULES``: coolant supply and flow per rack, CDU load, feed
   headroom; the shards leave them out) and live power capping on the cards'
   power the shards handed over (only when the round's start found the
   cluster's capping policy on) — the next ``seq``, the rollup ``meta`` of
   every level, the VictoriaMetrics step, and the one ``telemetry.tick`` event —
   so readers see the same keys and formats as after an unsharded tick. Then it
   writes the alert rows of the whole round (every shard's, the cluster and plant
   rules') in one transaction and publishes them (``health.commit_alerts``; a
   failure leaves them in the states, and the next round writes them). It
   records the round's wall time (start → publish, ``last``) and its CPU time
   (``cpu_last``, see below) in ``keys.tick_stats`` and releases the lock.

The tick gate (``ticks.tick``) keeps rounds at ≤ ``MAX_TICK_HZ`` and starts one
no sooner than the last round's *CPU* time after the previous start, as the whole
tick's gate follows its CPU time, never its wall time (on a loaded machine a wall
time is mostly waiting for a core, and a gate that grew with it held the next
tick back exactly when the machine was busiest). A round's CPU time is its
critical path: the start's, the slowest shard's and the merge's (each its own
thread's ``time.thread_time``), what the round takes with a core per shard. A
whole tick waits twice its CPU time: it holds one process; a round is spread over
several, and two rounds never overlap (the lock), so it waits its CPU time once.

What differs from the whole-cluster tick, by design: readers may see some
racks' rollups of round *N+1* next to others of round *N* until the round's
``meta`` (and ``seq``) is written; ``HEALTH_SYNC_PER_TICK`` and
``MAX_OPEN_PER_TICK`` bound each shard rather than the cluster; a card failure
whose alert opened this round reaches self-healing one round later (the shard
looks its alert row up before the merge has written it; ``failures``); the cluster
sum is added per shard first (float64, so it agrees with the unsharded sum to
float32 rounding). A round whose shard failed or whose layout changed under it
publishes nothing (the next round does); a lost shard task holds the lock for
``ROUND_LOCK_MS`` at most.
"""
from __future__ import annotations

import logging
import time
import uuid
from dataclasses import replace
from typing import Any

import msgpack
import numpy as np
import redis
from django.conf import settings

from twin.facility import capping_live
from twin.telemetry import alerts, bridge, keys, victoria
from twin.telemetry.alerts import PLANT_RULES, RULES, Decision, EvalInput, Rule
from twin.telemetry.config import conf, redis_client
from twin.telemetry.metrics import N_METRICS
from twin.telemetry.processing import tickparts
from twin.telemetry.processing.aggregate import reduce_levels_and_all, reporting_counts
from twin.telemetry.processing.apply import ensure_state
from twin.telemetry.processing.failures import detect_failures, handle_failures
from twin.telemetry.processing.follow_ups import NO_FOLLOW_UPS, FollowUps
from twin.telemetry.processing.health import (
    card_health,
    commit_alerts,
    decide_alerts,
    decide_plant_alerts,
    sync_card_health,
    table_health,
)
from twin.telemetry.processing.minutes import (
    POWER,
    add_group_samples,
    add_minute_sample,
    by_group,
    finish_minute_sample,
    hand_on_minute,
    minute_due,
)
from twin.telemetry.processing.plant import record_minute, step_capping, step_plant
from twin.telemetry.processing.tickparts import (
    ewma_alpha,
    next_ewma,
    next_seq,
    publish_alerts,
    read_cards,
)
from twin.telemetry.state import TICK_EVENT, GroupIndex, Layout, group_name, layout

__all__ = ["DEFAULT_SHARD_CARDS", "ROUND_LOCK_MS", "plan", "round_cost", "round_cpu",
           "round_running",
           "run_shard", "shard_cards", "shard_layout", "start_round"]

log = logging.getLogger(__name__)

DEFAULT_SHARD_CARDS = 131_072
"""Cards per tick shard unless ``TELEMETRY_TICK_SHARD_CARDS`` says otherwise: 256
seed-512 supernodes, ≈ 0.05-0.16 s of CPU per shard (``docs/benchmarks.md``,
live_million)."""

ROUND_LOCK_MS = 30_000
"""How long a round holds the tick lock at most (a shard task lost with its worker)."""

STATE_TTL_S = 300
"""How long a shard's, the cluster rules' and the plant rules' damping states outlive
their last round (a cluster that stopped ticking in shards)."""

SHARD_LEVELS = ("supernode", "rack")
CARD_RULES = frozenset({"card", "rack"})
CLUSTER_RULES = frozenset({"cluster"})
SHARD_RULE_KEYS = frozenset(r.key for r in RULES if r.level in CARD_RULES) - PLANT_RULES
"""What a shard runs: its cards' card and rack rules, less the plant's (the merge's)."""

round_cost: dict[int, float] = {}
"""CPU time (critical path) of each cluster's last round seen by this process (for the
tick gate)."""

_plans: dict[int, tuple[Layout, int, list[tuple[int, int]]]] = {}
_subs: dict[tuple[int, int], tuple[Layout, Layout]] = {}
_initialized: set[tuple[int, str, int]] = set()

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def shard_cards() -> int:
    """Cards per shard (``TELEMETRY_TICK_SHARD_CARDS``; 0 or less: never shard)."""
    return int(getattr(settings, "TELEMETRY_TICK_SHARD_CARDS", DEFAULT_SHARD_CARDS) or 0)


def plan(lay: Layout) -> list[tuple[int, int]]:
    """The shards of ``lay`` as ``(start, end)`` ordinal ranges; empty when the
    cluster ticks whole (small enough, sharding off, or racks not contiguous).

    Each shard holds at most ``shard_cards()`` cards unless one supernode alone is
    larger, and ends where a supernode and a rack both start.
    """
    per = shard_cards()
    n = lay.n
    if per <= 0 or n <= per:
        return []
    cached = _plans.get(lay.cluster_id)
    if cached and cached[0] is lay and cached[1] == per:
        return cached[2]
    racks, sns = lay.groups["rack"], lay.groups["supernode"]
    bounds = [0]
    if racks.perm is None and sns.perm is None:
        cuts = np.intersect1d(sns.starts[1:], racks.starts[1:])
        while n - bounds[-1] > per:
            last = bounds[-1]
            after = cuts[cuts > last]
            if not len(after):
                break
            within = after[after <= last + per]
            bounds.append(int(within[-1] if len(within) else after[0]))
    bounds.append(n)
    out = list(zip(bounds[:-1], bounds[1:], strict=True)) if len(bounds) > 2 else []
    _plans[lay.cluster_id] = (lay, per, out)
    return out


def round_running(r: redis.Redis, cluster_id: int) -> bool:
    """Whether a sharded tick round of ``cluster_id`` is in progress (its shard tasks
    are queued or running): a drain then yields its process to them."""
    raw = r.get(keys.tick_lock(cluster_id))
    # (a round's lock holds its 16-hex-digit id; a whole-cluster tick's, a pid)
    return bool(raw) and len(raw) == 16


def _slice_index(index: GroupIndex, start: int, end: int) -> GroupIndex:
    g0, g1 = int(index.of_card[start]), int(index.of_card[end - 1]) + 1
    return GroupIndex(level=index.level, ids=index.ids[g0:g1], names=index.names[g0:g1],
                      of_card=index.of_card[start:end] - g0, perm=None,
                      starts=index.starts[g0:g1] - start, cards=index.cards[g0:g1],
                      budget_w=index.budget_w[g0:g1], static_w=index.static_w[g0:g1])


def shard_layout(lay: Layout, start: int, end: int) -> Layout:
    """The cards ``start:end`` of ``lay`` as a layout of their own (ordinals from 0,
    racks and supernodes sliced, the cluster as one group): what the health rules,
    the health sync and failure detection take, unchanged."""
    cached = _subs.get((lay.cluster_id, start))
    if cached and cached[0] is lay and cached[1].n == end - start:
        return cached[1]
    m = end - start
    whole = lay.groups["cluster"]
    racks = _slice_index(lay.groups["rack"], start, end)
    groups = {
        "cluster": GroupIndex(level="cluster", ids=whole.ids, names=whole.names,
                              of_card=np.zeros(m, np.int32), perm=None,
                              starts=np.zeros(1, np.int64), cards=np.array([m], np.int32),
                              budget_w=np.array([racks.budget_w.sum()]),
                              static_w=np.array([racks.static_w.sum()])),
        "supernode": _slice_index(lay.groups["supernode"], start, end),
        "rack": racks,
    }
    sub = Layout(cluster_id=lay.cluster_id, version=lay.version, fingerprint=lay.fingerprint,
                 card_ids=lay.card_ids[start:end], server_ids=lay.server_ids[start:end],
                 slots=lay.slots[start:end], tdp_w=lay.tdp_w[start:end],
                 idle_w=lay.idle_w[start:end], hbm_gib=lay.hbm_gib[start:end], groups=groups,
                 probe=lay.probe, gen=lay.gen)
    _subs[(lay.cluster_id, start)] = (lay, sub)
    return sub


def _ensure_shard_state(r: redis.Redis, lay: Layout) -> None:
    """Full-size blobs for what shards write in slices (a slice written into a
    missing key would pad the rest with zeros, which read as values)."""
    marker = (lay.cluster_id, lay.version, lay.n)
    if marker in _initialized:
        return
    cid, ver = lay.cluster_id, lay.version
    pipe = r.pipeline(transaction=False)
    pipe.set(keys.ewma(cid, ver), np.full(lay.n, np.nan, "<f4").tobytes(), nx=True)
    for level in SHARD_LEVELS:
        nan = np.full((5, len(lay.groups[level].ids)), np.nan, "<f4").tobytes()
        for i in range(N_METRICS):
            pipe.set(keys.rollup(cid, ver, level, i), nan, nx=True)
    pipe.execute()
    _initialized.add(marker)


def start_round(r: redis.Redis, lay: Layout, bounds: list[tuple[int, int]],
                follow_ups: FollowUps = NO_FOLLOW_UPS) -> int | None:
    """Start a sharded tick of ``lay`` (the caller passed the tick gate): None when
    a round is still running, the seq when the shards ran here, else 0."""
    cid, ver = lay.cluster_id, lay.version
    round_id = uuid.uuid4().hex[:16]
    if not r.set(keys.tick_lock(cid), round_id, nx=True, px=ROUND_LOCK_MS):
        return None
    started, cpu0 = time.time(), time.thread_time()
    finished: list[tuple[int, str, int]] = []  # a finished minute, written after the shards
    try:
        ensure_state(lay)
        _ensure_shard_state(r, lay)
        if not r.exists(keys.health_db(cid, ver)):  # shards read it in slices
            r.set(keys.health_db(cid, ver), table_health(lay).tobytes(), nx=True)
        now = tickparts.clock()
        pipe = r.pipeline(transaction=False)
        pipe.get(keys.seen(cid, ver))
        pipe.hget(keys.tick_stats(cid), "cpu_last")
        tickparts.queue_lag_probe(pipe)
        seen_raw, last_cost, *probe = pipe.execute()
        lag = tickparts.ingest_lag_s(*probe)
        if last_cost:
            round_cost[cid] = float(last_cost)
        max_seen = float("nan")
        if seen_raw and len(seen_raw) == 8 * lay.n:
            max_seen = float(np.fmax.reduce(np.frombuffer(seen_raw, "<f8")))
        any_reported = bool(np.isfinite(max_seen))
        any_fresh = any_reported and now - max_seen <= conf().stale_after_s + lag
        # A finished minute is written after this round's shards are queued, not
        # before: queued first, its write (≈ 0.1 s of CPU, ≈ 0.45 s of PostgreSQL at a
        # million cards) held a worker process while the round's 8 shards waited for
        # the other one — the slowest round of every minute (docs/benchmarks.md).
        sample = minute_due(r, lay, now, replace(
            follow_ups, persist_minute=lambda *job: finished.append(job) is None))
        capping = capping_live.capping_on(cid)  # the shards then hand over card power
        pipe = r.pipeline(transaction=False)
        pipe.delete(keys.tick_round(cid))
        pipe.hset(keys.tick_round(cid), mapping={
            "id": round_id, "version": ver, "shards": len(bounds), "now": repr(now),
            "bounds": ",".join(str(b) for b, _ in bounds) + f",{bounds[-1][1]}",
            "started": repr(started), "sample": int(sample),
            "silent": int(any_reported and not any_fresh), "any_fresh": int(any_fresh),
            "any_reported": int(any_reported), "max_seen": repr(max_seen), "lag": repr(lag),
            "capping": int(capping), "start_cpu": repr(time.thread_time() - cpu0)})
        pipe.expire(keys.tick_round(cid), 3600)
        pipe.set(keys.tick_pending(cid, round_id), len(bounds), ex=120)
        # The unsharded tick's damping state goes stale while shards keep their own:
        # should this cluster tick whole again, it rebuilds from the database.
        pipe.delete(keys.alerts(cid, ver))
        pipe.execute()
    except Exception:
        _release(r, cid, round_id)
        _persist(finished, follow_ups)
        raise
    seq: int | None = 0
    for k in range(len(bounds)):
        if not follow_ups.tick_shard(cid, round_id, k):
            out = run_shard(cid, round_id, k, follow_ups)
            if out is not None:
                seq = out
    _persist(finished, follow_ups)
    return seq


def _persist(finished: list[tuple[int, str, int]], follow_ups: FollowUps) -> None:
    for cluster_id, version, minute in finished:
        hand_on_minute(cluster_id, version, minute, follow_ups)


def run_shard(cluster_id: int, round_id: str, shard: int,
              follow_ups: FollowUps = NO_FOLLOW_UPS) -> int | None:
    """Tick shard ``shard`` of round ``round_id``; the seq if this shard was the
    round's last and published it, else None."""
    r = redis_client()
    rnd = {k.decode(): v.decode() for k, v in r.hgetall(keys.tick_round(cluster_id)).items()}
    if rnd.get("id") != round_id:
        return None  # a round given up (its lock expired) or replaced
    part: dict[str, Any] = {"round": round_id}
    wall, cpu = time.perf_counter(), time.thread_time()
    try:
        lay = layout(cluster_id)
        # The round's bounds, not this process's plan: settings may differ by process.
        cuts = [int(b) for b in rnd["bounds"].split(",")]
        bounds = list(zip(cuts[:-1], cuts[1:], strict=True))
        if lay.version != rnd["version"] or cuts[-1] != lay.n:
            part["skip"] = "the layout changed during the round"
        else:
            part.update(_shard_tick(r, lay, shard, bounds, rnd, follow_ups))
    except Exception:
        log.exception("tick shard %s of cluster %s failed", shard, cluster_id)
        part["skip"] = "failed"
    part["wall"], part["cpu"] = time.perf_counter() - wall, time.thread_time() - cpu
    pipe = r.pipeline(transaction=False)
    pipe.set(keys.tick_part(cluster_id, round_id, shard), msgpack.packb(part), ex=120)
    pipe.decr(keys.tick_pending(cluster_id, round_id))
    left = pipe.execute()[1]
    if int(left) != 0:
        return None
    return _merge(r, cluster_id, round_id, rnd, follow_ups)


def _shard_tick(r: redis.Redis, lay: Layout, shard: int, bounds: list[tuple[int, int]],
                rnd: dict[str, str], follow_ups: FollowUps) -> dict[str, Any]:
    cid, ver = lay.cluster_id, lay.version
    start, end = bounds[shard]
    shards = len(bounds)
    m = end - start
    sub = shard_layout(lay, start, end)
    now = float(rnd["now"])
    state_key = keys.shard_alerts(cid, ver, shard, shards)
    pipe = r.pipeline(transaction=False)
    for i in range(N_METRICS):
        pipe.getrange(keys.metric(cid, ver, i), 4 * start, 4 * end - 1)
    pipe.getrange(keys.seen(cid, ver), 8 * start, 8 * end - 1)
    pipe.getrange(keys.health_db(cid, ver), start, end - 1)
    pipe.getrange(keys.ewma(cid, ver), 4 * start, 4 * end - 1)
    pipe.get(state_key)
    pipe.get(keys.ewma_ts(cid, ver))
    raw = pipe.execute()
    cards = read_cards(raw[:N_METRICS], raw[N_METRICS], raw[N_METRICS + 1],
                       raw[N_METRICS + 2], m, now, float(rnd.get("lag", 0.0)))
    fresh, stale, fresh_values = cards.fresh, cards.stale, cards.fresh_values

    rollups, (count, total, vmin, vmax) = reduce_levels_and_all(fresh_values, sub.groups,
                                                                SHARD_LEVELS)
    reporting = {level: reporting_counts(fresh, sub.groups[level]) for level in SHARD_LEVELS}
    racks = sub.groups["rack"]
    power = rollups["rack"][POWER]
    rack_draw = np.where(power[4] > 0, power[3] + racks.static_w, np.nan)
    alpha = ewma_alpha(raw[N_METRICS + 4], now)
    decided = decide_alerts(
        sub, cid, now=now, fresh_values=fresh_values, fresh=fresh, stale=stale,
        age=cards.age, util_ewma=cards.ewma, rack_draw=rack_draw,
        alert_state=raw[N_METRICS + 3], levels=CARD_RULES,
        cluster_silent=bool(int(rnd["silent"])), rule_keys=SHARD_RULE_KEYS)
    card_alerts = decided.card_alerts
    ewma = next_ewma(cards.ewma, fresh_values, alpha)
    health = card_health(cards.reported, stale, card_alerts)

    pipe = r.pipeline(transaction=False)
    for level in SHARD_LEVELS:
        groups = len(lay.groups[level].ids)
        g0 = int(lay.groups[level].of_card[start])
        for i in range(N_METRICS):
            stats = rollups[level][i]  # (5, groups of the shard), the blob is (5, groups)
            key = keys.rollup(cid, ver, level, i)
            for j in range(5):
                pipe.setrange(key, 4 * (j * groups + g0), stats[j].tobytes())
    pipe.setrange(keys.health(cid, ver), start, health.tobytes())
    pipe.set(state_key, decided.packed(), ex=STATE_TTL_S)  # (its alert writes: the merge's)
    pipe.setrange(keys.ewma(cid, ver), 4 * start, ewma.astype("<f4").tobytes())
    pipe.execute()

    synced = sync_card_health(sub, cards.old_health, health, card_alerts, decided.transitions,
                              now)
    r.setrange(keys.health_db(cid, ver), start, synced.tobytes())
    failures = [f.to_dict() for f in detect_failures(
        r, sub, cid, fresh_values=fresh_values, stale=stale, age=cards.age, seen=cards.seen,
        card_alerts=card_alerts, key=keys.shard_failing(cid, ver, shard, shards))]
    if failures and not follow_ups.heal(cid, failures):
        handle_failures(failures)
    if int(rnd["sample"]) and by_group(lay):
        add_group_samples(r, lay, {
            level: (int(lay.groups[level].of_card[start]), rollups[level], reporting[level])
            for level in SHARD_LEVELS})
    elif int(rnd["sample"]):
        add_minute_sample(r, lay, start, end, fresh_values)

    out = {  # (this shard's part of the cluster statistics, from its supernodes')
        "count": count.astype("<f8").tobytes(),
        "sum": total.astype("<f8").tobytes(),
        "min": vmin.astype("<f4").tobytes(),
        "max": vmax.astype("<f4").tobytes(),
        "fresh": int(fresh.sum()),
        "reporting": {level: reporting[level].tobytes() for level in SHARD_LEVELS},
        "ops": decided.ops,  # (the merge writes them, after the tick's event)
    }
    if int(rnd.get("capping", 0)):  # the merge caps: its cards' fresh power (NaN: none)
        out["power"] = fresh_values[POWER].astype("<f4").tobytes()
    return out


def _merge(r: redis.Redis, cid: int, round_id: str, rnd: dict[str, str],
           follow_ups: FollowUps) -> int | None:
    """The round's last shard: cluster rollup and rules, seq, meta, the tick event."""
    cpu0 = time.thread_time()
    shards = int(rnd["shards"])
    ver = rnd["version"]
    published = False
    parts: list[dict[str, Any]] = []
    try:
        raw_parts = r.mget([keys.tick_part(cid, round_id, k) for k in range(shards)])
        parts = [msgpack.unpackb(p) if p else {"skip": "missing"} for p in raw_parts]
        bad = [p.get("skip") for p in parts if p.get("skip") or p.get("round") != round_id]
        lay = layout(cid)
        if bad or lay.version != ver:
            log.warning("tick round of cluster %s published nothing: %s", cid,
                        bad[0] if bad else "the layout changed")
            return None
        now = float(rnd["now"])
        count = np.sum([np.frombuffer(p["count"], "<f8") for p in parts], axis=0)
        total = np.sum([np.frombuffer(p["sum"], "<f8") for p in parts], axis=0)
        vmin = np.fmin.reduce([np.frombuffer(p["min"], "<f4") for p in parts], axis=0)
        vmax = np.fmax.reduce([np.frombuffer(p["max"], "<f4") for p in parts], axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
        cluster = np.stack([mean, vmin, vmax, total, count], axis=-1).astype("<f4")  # (M, 5)
        ckey, pkey = keys.shard_alerts(cid, ver, "c", shards), keys.shard_alerts(
            cid, ver, "p", shards)
        decided = {ckey: _cluster_rules(r, lay, rnd, now, ckey)}
        plant = _step_plant(r, lay, now)  # the physical twin (None: no facility)
        if plant is not None:
            decided[pkey] = decide_plant_alerts(lay, now=now, plant=plant,
                                                alert_state=r.get(pkey))
        caps = _step_capping(r, lay, rnd, parts, plant, now)
        record_minute(r, lay, plant, caps, now)

        seq = next_seq(r, cid, now)
        pipe = r.pipeline(transaction=False)
        for i in range(N_METRICS):
            pipe.set(keys.rollup(cid, ver, "cluster", i), cluster[i].tobytes())
        reporting = {level: b"".join(p["reporting"][level] for p in parts)
                     for level in SHARD_LEVELS}
        reporting["cluster"] = np.array([sum(p["fresh"] for p in parts)], np.int32).tobytes()
        for level in ("cluster", *SHARD_LEVELS):
            pipe.set(keys.rollup(cid, ver, level, "meta"), msgpack.packb(
                {"seq": seq, "ts": now, "reporting": reporting[level]}))
        for key, d in decided.items():  # (with their alert writes, done after the event)
            pipe.set(key, d.packed(), ex=STATE_TTL_S)
        pipe.set(keys.ewma_ts(cid, ver), repr(now))
        pipe.set(keys.last_tick(cid), repr(now))
        pipe.execute()
        if int(rnd["sample"]):
            if by_group(lay):
                fresh = np.array([sum(p["fresh"] for p in parts)], np.int32)
                add_group_samples(r, lay, {"cluster": (0, cluster[:, :, None], fresh)})
            finish_minute_sample(r, lay, now)
        if victoria.enabled() and lay.n:
            step_ms = max(int(settings.TWIN_VICTORIA_STEP_S * 1000), 1)
            if (r.set(keys.victoria_gate(cid), 1, nx=True, px=step_ms)
                    and not follow_ups.write_history(cid, ver, now)):
                victoria.write_from_state(cid, ver, now)
        bridge.group_send(group_name(cid), {"type": TICK_EVENT, "cluster": cid, "seq": seq,
                                            "ts": now, "layout": ver})
        # The round's alert rows, every shard's and the merge's, in one transaction once
        # the event is out (a commit waits on PostgreSQL; no frame reads the rows). A
        # failure leaves each state holding its writes: the next round retries them.
        transitions = commit_alerts(r, cid, [
            *((keys.shard_alerts(cid, ver, k, shards), p.get("ops") or [], STATE_TTL_S)
              for k, p in enumerate(parts)),
            *((key, d.ops, STATE_TTL_S) for key, d in decided.items())])
        if transitions:
            publish_alerts(cid, [(t.event, t.alert_id) for t in transitions])
            follow_ups.notify()
        published = True
        return seq
    finally:
        pipe = r.pipeline(transaction=False)
        if published:  # the round's wall time, start → publish, and its CPU time
            wall = time.time() - float(rnd["started"])
            cpu = round_cost[cid] = round_cpu(rnd, parts, time.thread_time() - cpu0)
            stats = keys.tick_stats(cid)
            pipe.hincrby(stats, "count", 1)
            pipe.hincrbyfloat(stats, "sum", wall)
            pipe.hincrbyfloat(stats, "cpu_sum", cpu)
            # What the shards cost (seconds, summed over shards; the slowest one's wall
            # time): the per-process rate of ``benchmarks/live_million.py``.
            pipe.hset(stats, mapping={
                "last": repr(wall), "cpu_last": repr(cpu), "shards": shards,
                "last_shard_cpu": repr(sum(p.get("cpu", 0.0) for p in parts)),
                "last_shard_wall": repr(sum(p.get("wall", 0.0) for p in parts)),
                "last_shard_wall_max": repr(max(p.get("wall", 0.0) for p in parts))})
        pipe.delete(keys.tick_pending(cid, round_id),
                    *[keys.tick_part(cid, round_id, k) for k in range(shards)])
        pipe.execute()
        _release(r, cid, round_id)


def round_cpu(rnd: dict[str, str], parts: list[dict[str, Any]], merge_cpu: float) -> float:
    """A round's CPU time on its critical path (s): the start's, the slowest shard's
    and the merge's, each the CPU time of the thread that ran it — the round's wall
    time on idle cores, whatever the machine's load (the tick gate's cost)."""
    slowest = max((float(p.get("cpu", 0.0)) for p in parts), default=0.0)
    return float(rnd.get("start_cpu", 0.0)) + slowest + merge_cpu


def _step_plant(r: redis.Redis, lay: Layout, now: float) -> dict[str, Any] | None:
    """The physical twin on the whole cluster's rack power, as the shards wrote it: the
    same input as a whole tick's (``processing.plant.step_plant``); its summary for the
    plant's rules and capping (None: no facility)."""
    racks = len(lay.groups["rack"].ids)
    raw = r.get(keys.rollup(lay.cluster_id, lay.version, "rack", POWER))
    if raw is None or len(raw) != 5 * racks * 4:
        return None
    power = np.frombuffer(raw, "<f4").reshape(5, racks).astype(np.float64)
    return step_plant(r, lay, {"rack": {POWER: power}}, now)


def _step_capping(r: redis.Redis, lay: Layout, rnd: dict[str, str],
                  parts: list[dict[str, Any]], plant: dict[str, Any] | None,
                  now: float) -> dict[str, Any] | None:
    """Live capping on the whole cluster, as a whole tick does it, from the cards'
    power the shards handed over (in card order: the shards are contiguous). A round
    that started with capping off carries no power: the caps are cleared (a policy
    turned on since takes the next round)."""
    if not lay.n:
        return None
    if not int(rnd.get("capping", 0)) or any("power" not in p for p in parts):
        capping_live.clear_caps(r, conf().prefix, lay.cluster_id)
        return None
    card_w = np.frombuffer(b"".join(p["power"] for p in parts), "<f4")
    if card_w.shape[0] != lay.n:
        return None
    return step_capping(r, lay, card_w, plant, now)


def _cluster_rules(r: redis.Redis, lay: Layout, rnd: dict[str, str],
                   now: float, key: str) -> Decision:
    """The cluster-level rules, on what the round's start saw of the whole cluster
    (their damping state at ``key``); decided, not written."""
    from twin.telemetry.models import Alert

    cid = lay.cluster_id
    any_fresh = bool(int(rnd["any_fresh"]))
    any_reported = bool(int(rnd["any_reported"]))
    max_seen = float(rnd["max_seen"])
    # One pseudo-card that is fresh if any card is, and reported if any card did:
    # the cluster rules read nothing else (``alerts._signal``).
    inp = EvalInput(now=now, values=np.full((N_METRICS, 1), np.nan, np.float32),
                    fresh=np.array([any_fresh]),
                    stale=np.array([any_reported and not any_fresh]),
                    age_s=np.array([now - max_seen]), tdp_w=np.full(1, np.nan),
                    util_ewma=np.full(1, np.nan), rack_draw_w=np.zeros(0),
                    rack_budget_w=np.zeros(0))
    name = lay.groups["cluster"].names[0]

    def subject_of(rule: Rule, pos: int) -> dict[str, Any]:
        return {"subject": f"cluster:{cid}", "label": f"cluster {name}"}

    def load_open() -> list[tuple[str, str, int]]:
        return list(Alert.objects.filter(cluster_id=cid, ended__isnull=True, level="cluster")
                    .values_list("rule", "subject", "id"))

    def position_of(level: str, subject: str) -> int | None:
        return 0 if level == "cluster" and subject.startswith("cluster:") else None

    return alerts.decide(inp, r.get(key), subject_of=subject_of, cluster_id=cid,
                         load_open=load_open, position_of=position_of, levels=CLUSTER_RULES)


def _release(r: redis.Redis, cid: int, round_id: str) -> None:
    r.eval(_RELEASE, 1, keys.tick_lock(cid), round_id)
