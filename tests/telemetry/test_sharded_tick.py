"""The sharded tick (``processing.shards``) against the whole-cluster tick.

Two identical clusters (the builder's seed-512 preset, 3 supernodes of 512 cards,
13 racks each) get the same readings at the same (fake) times; one ticks whole
(``TELEMETRY_TICK_SHARD_CARDS = 0``), the other in 3 shards of one supernode. Every
read-side output must agree: rollups of every level and metric, card health, the
CardHealth rows, the alerts opened and closed (rule, subject position, times,
values), the failures handed to self-healing, the minute accumulators, and the
tick seq must grow the same way.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tests.telemetry.conftest import drain_now, wait_for
from twin.telemetry import keys, processing, state
from twin.telemetry.enqueue import enqueue
from twin.telemetry.ingest import Batch
from twin.telemetry.metrics import METRIC_INDEX, METRICS
from twin.telemetry.models import Alert, CardHealth, TelemetryMinute
from twin.telemetry.processing import minutes, shards, tickparts
from twin.telemetry.processing.follow_ups import FollowUps

SN = 512


@pytest.fixture
def twins(db) -> dict[str, Any]:
    from twin.hardware.builder import build_cluster

    a = build_cluster("seed-512", name="shard-whole", supernodes=3)["cluster_id"]
    b = build_cluster("seed-512", name="shard-split", supernodes=3)["cluster_id"]
    return {"whole": a, "split": b}


@pytest.fixture
def fake_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    now = [time.time() - 120.0]
    monkeypatch.setattr(tickparts, "clock", lambda: now[0])
    yield now


def _mode(settings: Any, sharded: bool) -> None:
    settings.TELEMETRY_TICK_SHARD_CARDS = SN if sharded else 0


def _batch(cid: int, values: dict[str, np.ndarray], ts: float, ords: np.ndarray) -> Batch:
    """A batch of ``values`` (full-cluster arrays) for the cards ``ords``."""
    lay = state.layout(cid)
    keys_ = list(values)
    return Batch(cluster_id=cid, version=lay.version, ts=ts,
                 metric_idx=np.array([METRIC_INDEX[k] for k in keys_], np.uint8),
                 values=np.array([values[k][ords] for k in keys_], np.float32),
                 ordinals=ords.astype(np.int32))


def _put(cid: int, values: dict[str, np.ndarray], ts: float, ords: np.ndarray) -> None:
    assert enqueue(_batch(cid, values, ts, ords), agent_id=None, seq=None).status == "queued"
    # Close the gate so the drain applies without ticking: the test ticks itself.
    state.redis_client().set(keys.tick_gate(cid), 1, px=60_000)
    drain_now()


def _all_report_and_tick(twins: dict[str, int], settings: Any, ts: float) -> None:
    """Every card of both twins reports at ``ts``; each twin ticks once, in its mode."""
    n = 3 * SN
    for name, cid in twins.items():
        _mode(settings, name == "split")
        _put(cid, {"gpu_util": np.full(n, 50.0)}, ts, np.arange(n))
        assert processing.tick(cid, force=True)


def _snapshot(cid: int) -> dict[str, Any]:
    lay = state.layout(cid)
    out: dict[str, Any] = {"health": state.health(cid).tolist()}
    for level in ("cluster", "supernode", "rack"):
        for m in METRICS:
            roll = state.rollup(cid, level, m.key)
            for stat in ("mean", "min", "max", "count", "reporting", "cards"):
                out[f"{level}.{m.key}.{stat}"] = np.asarray(roll[stat]).tolist()
            out[f"{level}.{m.key}.sum"] = np.asarray(roll["sum"], np.float64)
            out[f"{level}.ts"] = roll["ts"]
    pos = {int(c): k for k, c in enumerate(lay.card_ids)}
    racks = {int(r): k for k, r in enumerate(lay.groups["rack"].ids)}

    def where(a: Alert) -> tuple[str, int]:
        if a.card_id:
            return ("card", pos[a.card_id])
        if a.rack_id:
            return ("rack", racks[a.rack_id])
        return ("cluster", 0)

    out["alerts"] = sorted(
        (a.rule, a.severity, *where(a), a.started.timestamp(),
         a.ended.timestamp() if a.ended else None, a.value)
        for a in Alert.objects.filter(cluster_id=cid))
    out["card_health"] = sorted((pos[h.card_id], h.status, h.reasons)
                                for h in CardHealth.objects.filter(cluster_id=cid))
    r = state.redis_client()
    if minutes.by_group(lay):  # float64 sums, added per shard first: compared to rounding
        out["minute~"] = [np.frombuffer(r.get(keys.minute_acc(cid, lay.version, p)) or b"",
                                        "<f8") for p in minutes.minute_parts(lay)]
    else:
        out["minute"] = [r.get(keys.minute_acc(cid, lay.version, p)) for p in keys.MINUTE_PARTS]
    groups = {level: {int(g): k for k, g in enumerate(lay.groups[level].ids)}
              for level in ("cluster", "supernode", "rack")}
    rows = sorted(
        (m.minute.timestamp(), m.level, pos[m.object_id] if m.level == "card"
         else groups[m.level][m.object_id], m.samples, m.draw_w, m.mean, m.max)
        for m in TelemetryMinute.objects.filter(cluster_id=cid))
    out["minute_rows"] = [row[:4] for row in rows]
    out["minute_values~"] = [np.frombuffer(bytes(m) + bytes(x), "<f4").astype(np.float64)
                             for *_, m, x in rows] + [[row[4] or np.nan for row in rows]]
    return out


def _assert_same(whole: dict[str, Any], split: dict[str, Any]) -> None:
    assert whole.keys() == split.keys()
    for key, value in whole.items():
        if key.endswith(".sum"):  # added per shard first: equal to float32 rounding
            np.testing.assert_allclose(split[key], value, rtol=1e-6, err_msg=key)
        elif key.endswith("~"):
            assert len(split[key]) == len(value), key
            for a, b in zip(split[key], value, strict=True):
                np.testing.assert_allclose(a, b, rtol=1e-6, err_msg=key)
        elif "." in key and not key.endswith(".ts"):  # rollup statistics (NaN = NaN)
            np.testing.assert_array_equal(split[key], value, err_msg=key)
        else:
            assert split[key] == value, key


@pytest.mark.parametrize("by_group", [False, True], ids=["card-minutes", "group-minutes"])
def test_a_sharded_tick_gives_what_the_whole_cluster_tick_gives(twins, fake_clock, settings,
                                                                by_group):
    settings.TELEMETRY_MINUTE_SAMPLE_S = 5.0
    # Past TELEMETRY_PERSIST_CARDS_MAX the minute history accumulates per group.
    settings.TELEMETRY_PERSIST_CARDS_MAX = 1_000 if by_group else 8_192
    healed: dict[str, list[tuple[int, str]]] = {"whole": [], "split": []}
    n = 3 * SN
    rng = np.random.default_rng(7)
    base = {
        "gpu_util": rng.uniform(60, 95, n), "power_w": rng.uniform(300, 650, n),
        "gpu_temp_c": rng.uniform(40, 80, n), "mem_temp_c": rng.uniform(40, 80, n),
        "xid_errors": np.zeros(n), "ecc_errors": np.zeros(n),
        "link_latency_ns": rng.uniform(100, 150, n),
    }
    hot = base["gpu_temp_c"].copy()
    hot[[3, 600, 1500]] = 95.0  # gpu_temp and gpu_temp_critical, in every shard
    xid = base["xid_errors"].copy()
    xid[[700]] = 79.0  # fallen off the bus: an alert and a failure
    power = base["power_w"].copy()
    power[1024:1024 + 40] = 1_150.0  # card_power, and the rack over its 40 kW budget
    base["gpu_util"][[10, 1100]] = 90.0
    util = base["gpu_util"].copy()
    util[[10, 1100]] = 5.0  # a sudden utilisation drop
    everyone = np.arange(n)
    not_one = np.delete(everyone, [520])  # one card of shard 1 goes silent
    not_sn2 = np.delete(np.arange(2 * SN), [520])  # then all of shard 2's supernode too
    start = fake_clock[0]
    # (time offset, readings, cards reporting)
    script: list[tuple[float, dict[str, np.ndarray], np.ndarray]] = [
        (0, base, everyone), (1, base, everyone),
        (2, {**base, "gpu_temp_c": hot, "xid_errors": xid, "power_w": power, "gpu_util": util},
         everyone),
        (5, {**base, "gpu_temp_c": hot, "xid_errors": xid, "power_w": power, "gpu_util": util},
         everyone),
        (8, {**base, "gpu_temp_c": hot, "xid_errors": xid, "power_w": power}, not_one),
        (12, base, not_one), (16, base, not_sn2), (19, base, not_sn2), (23, base, not_sn2),
        (40, base, everyone), (62, base, everyone),
    ]
    seqs: dict[str, list[int]] = {"whole": [], "split": []}
    for offset, values, ords in script:
        fake_clock[0] = start + offset
        for name, cid in twins.items():
            _mode(settings, name == "split")
            _put(cid, values, start + offset, ords)
            follow = FollowUps(heal=lambda c, fs, name=name: healed[name].extend(
                (state.layout(c).ordinals([f["card"]])[0], f["cause"]) for f in fs) or True)
            seq = processing.tick(cid, force=True, follow_ups=follow)
            assert seq and seq > (seqs[name][-1] if seqs[name] else 0)
            seqs[name].append(seq)
        _assert_same(_snapshot(twins["whole"]), _snapshot(twins["split"]))
    # The split cluster really ticked in shards, and the script exercised every kind.
    lay = state.layout(twins["split"])
    _mode(settings, True)
    assert shards.plan(lay) == [(0, SN), (SN, 2 * SN), (2 * SN, 3 * SN)]
    assert state.redis_client().hget(keys.tick_stats(twins["split"]), "shards") == b"3"
    _mode(settings, False)
    assert shards.plan(state.layout(twins["whole"])) == []
    rules = {a.rule for a in Alert.objects.filter(cluster_id=twins["split"])}
    assert {"gpu_temp", "gpu_temp_critical", "xid", "card_power", "rack_power", "util_drop",
            "stale", "rack_silent"} <= rules
    assert Alert.objects.filter(cluster_id=twins["split"], ended__isnull=False).exists()
    assert healed["whole"] == healed["split"] and (700, "xid79") in healed["split"]
    written = TelemetryMinute.objects.filter(cluster_id=twins["split"])
    assert written.filter(level="rack").exists()  # the script crossed a minute
    assert written.filter(level="card").exists() is not by_group


@pytest.mark.parametrize("queued", [True, False], ids=["queued", "inline"])
def test_a_finished_minute_is_written_after_the_round_s_shards(twins, fake_clock, settings,
                                                              queued):
    """Queued before the shards, the minute's database write held a worker process
    while the round's shards waited for the rest: it comes after them — as a task
    (``queued``) or, with nothing to queue to, written here once they ran."""
    cid, n = twins["split"], 3 * SN
    _mode(settings, True)
    settings.TELEMETRY_MINUTE_SAMPLE_S = 5.0
    start = fake_clock[0] = (int(fake_clock[0] // 60) + 1) * 60 - 10.0  # 10 s before a minute
    order: list[Any] = []

    def persist(c: int, version: str, minute: int) -> bool:
        order.append(("persist", minute))
        if queued:
            return True
        assert not TelemetryMinute.objects.filter(cluster_id=cid).exists()  # not yet written
        return False

    def shard(c: int, round_id: str, k: int) -> bool:  # "queued": run at once, here
        order.append(("shard", k))
        shards.run_shard(c, round_id, k)
        return True

    follow = FollowUps(tick_shard=shard, persist_minute=persist)
    for offset in (0, 12):  # a sample in the first minute, then one in the next
        fake_clock[0] = start + offset
        _put(cid, {"gpu_util": np.full(n, 50.0)}, start + offset, np.arange(n))
        order.clear()
        assert processing.tick(cid, force=True, follow_ups=follow) is not None
    finished = int(start // 60)
    assert order == [("shard", 0), ("shard", 1), ("shard", 2), ("persist", finished)]
    rows = TelemetryMinute.objects.filter(cluster_id=cid, level="cluster")
    assert rows.exists() is not queued  # inline: written by the tick, after its shards


def test_a_round_that_fails_to_start_raises_its_own_error_and_frees_the_lock(
        twins, fake_clock, settings, monkeypatch):
    """A failure before the minute was looked at is reported as itself (not as the
    deferred minute write's bookkeeping), and the next round can start."""
    cid = twins["split"]
    _mode(settings, True)

    def broken(*_args: Any) -> None:
        raise RuntimeError("Redis went away")

    monkeypatch.setattr(shards, "_ensure_shard_state", broken)
    with pytest.raises(RuntimeError, match="Redis went away"):
        processing.tick(cid, force=True)
    assert not state.redis_client().exists(keys.tick_lock(cid))


def test_a_silent_cluster_is_one_alert_when_sharded(twins, fake_clock, settings):
    """The cluster rule runs at the merge, on what the round's start saw of all cards."""
    start = fake_clock[0]
    _all_report_and_tick(twins, settings, start)
    fake_clock[0] = start + 30
    for name, cid in twins.items():
        _mode(settings, name == "split")
        assert processing.tick(cid, force=True)
    whole, split = _snapshot(twins["whole"]), _snapshot(twins["split"])
    _assert_same(whole, split)
    assert [a[0] for a in split["alerts"]] == ["cluster_silent"]
    assert set(split["health"]) == {state.HEALTH_CODES["stale"]}


def test_a_round_writes_its_alerts_after_its_event_and_retries_a_failed_commit(
        twins, fake_clock, settings, monkeypatch):
    """The merge sends the tick event before it writes the round's alert rows (every
    shard's, in one transaction); a commit that fails leaves them in the shards'
    states, and the next round writes them with the time they opened."""
    import datetime as dt

    from django.db import OperationalError

    from twin.telemetry import bridge
    from twin.telemetry.state import ALERT_EVENT, TICK_EVENT

    cid, n = twins["split"], 3 * SN
    _mode(settings, True)
    sent: list[tuple[str, Any]] = []
    real_send, real_insert = bridge.group_send, Alert.objects.bulk_create
    down = [True]

    def record(group: str, message: dict[str, Any]) -> bool:
        if message["type"] == TICK_EVENT:
            sent.append((TICK_EVENT, Alert.objects.filter(cluster_id=cid).count()))
        elif message["type"] == ALERT_EVENT:
            sent.append((message["event"], message["alert"]["subject"]))
        return real_send(group, message)

    def insert(objs: Any, *args: Any, **kwargs: Any) -> Any:
        if down[0]:
            raise OperationalError("server closed the connection unexpectedly")
        return real_insert(objs, *args, **kwargs)

    monkeypatch.setattr(bridge, "group_send", record)
    monkeypatch.setattr(Alert.objects, "bulk_create", insert)
    xid = np.zeros(n)
    xid[[3, 700, 1500]] = 79.0  # an XID alert in every shard (it opens at once)
    card_ids = state.layout(cid).card_ids
    subjects = sorted(f"card:{int(card_ids[o])}" for o in (3, 700, 1500))
    opened_at = fake_clock[0]
    _put(cid, {"xid_errors": xid, "gpu_util": np.full(n, 50.0)}, opened_at, np.arange(n))
    assert processing.tick(cid, force=True)  # the commit fails: the round still publishes
    assert sent == [(TICK_EVENT, 0)] and not Alert.objects.exists()
    health = state.health(cid)
    assert (health[[3, 700, 1500]] == state.HEALTH_CODES["critical"]).all()

    down[0] = False
    sent.clear()
    fake_clock[0] += 1.0
    _put(cid, {"xid_errors": xid, "gpu_util": np.full(n, 50.0)}, fake_clock[0], np.arange(n))
    assert processing.tick(cid, force=True)
    rows = Alert.objects.filter(cluster_id=cid, rule="xid")
    assert sorted(rows.values_list("subject", flat=True)) == subjects  # none twice
    assert {a.started for a in rows} == {dt.datetime.fromtimestamp(opened_at, tz=dt.UTC)}
    assert sent[0] == (TICK_EVENT, 0)  # the event went out before the rows were written
    assert sorted(sent[1:]) == [("opened", s) for s in subjects]


def test_a_round_with_a_failed_shard_publishes_nothing_and_the_next_one_does(
        twins, fake_clock, settings, monkeypatch):
    cid = twins["split"]
    _mode(settings, True)
    n = 3 * SN
    _put(cid, {"gpu_util": np.full(n, 50.0)}, fake_clock[0], np.arange(n))
    before = state.frame_seq(cid)
    real = shards._shard_tick
    calls = {"n": 0}

    def flaky(*args: Any, **kwargs: Any) -> dict[str, Any]:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("worker lost its Redis connection")
        return real(*args, **kwargs)

    monkeypatch.setattr(shards, "_shard_tick", flaky)
    assert processing.tick(cid, force=True) == 0  # round ran, published nothing
    assert state.frame_seq(cid) == before
    assert not state.redis_client().exists(keys.tick_lock(cid))  # released for the next
    seq = processing.tick(cid, force=True)
    assert seq and seq > before and state.frame_seq(cid) == seq
    assert state.rollup(cid, "cluster", "gpu_util")["count"].tolist() == [n]


def test_shards_run_as_celery_tasks_on_the_worker(celery_worker, transactional_db, settings):
    """A real worker runs the shard tasks of a round started here (the round carries
    its bounds, so the worker's own settings do not matter); the last one publishes
    one tick with every level's rollup."""
    from twin.hardware.builder import build_cluster
    from twin.telemetry import tasks

    cid = build_cluster("seed-512", name="shard-celery", supernodes=3)["cluster_id"]
    n = 3 * SN
    lay = state.layout(cid)
    batch = Batch(cluster_id=cid, version=lay.version, ts=time.time(),
                  metric_idx=np.array([METRIC_INDEX["power_w"]], np.uint8),
                  values=np.full((1, n), 400.0, np.float32),
                  ordinals=np.arange(n, dtype=np.int32))
    result = enqueue(batch, agent_id=None, seq=None)
    assert result.status == "queued" and result.kicked >= 0
    assert tasks.dispatch(tasks.drain, result.kicked)  # as the ingest view does
    r = state.redis_client()
    wait_for(lambda: state.rollup(cid, "cluster", "power_w")["count"].tolist() == [n], 30,
             "the worker's own (whole-cluster) tick")
    _mode(settings, True)
    before = state.frame_seq(cid)
    # 0: the round started and its shards went to the worker (None: a tick was running).
    wait_for(lambda: processing.tick(cid, force=True, follow_ups=tasks.FOLLOW_UPS) == 0, 10,
             "a round to start")
    wait_for(lambda: r.hget(keys.tick_stats(cid), "shards") == b"3", 30, "the sharded round")
    assert state.frame_seq(cid) > before
    roll = state.rollup(cid, "cluster", "power_w")
    assert roll["count"].tolist() == [n] and roll["sum"][0] == pytest.approx(400.0 * n)
    assert roll["seq"] == state.frame_seq(cid)
    racks = state.rollup(cid, "rack", "power_w")
    assert int(racks["count"].sum()) == n and racks["reporting"].sum() == n
    assert (state.health(cid) == state.HEALTH_CODES["ok"]).all()
    assert not r.exists(keys.tick_lock(cid))


def test_readings_waiting_on_the_stream_are_not_silence(twins, fake_clock, settings):
    """Staleness allows for the ingest lag (``tickparts`` docstring), sharded or not:
    a card whose reading is older than ``stale_after_s`` is not stale while a batch
    that old still waits to be applied, and is once the stream has drained."""
    from twin.telemetry.config import conf

    start = fake_clock[0]
    n = 3 * SN
    half = np.arange(0, n, 2)
    _all_report_and_tick(twins, settings, start)
    for cid in twins.values():  # half the cards' next readings, still on the stream
        waiting = _batch(cid, {"gpu_util": np.full(n, 55.0)}, start + 1.0, half)
        assert enqueue(waiting, agent_id=None, seq=None).status == "queued"
    r = state.redis_client()
    server_time = r.time()
    time.sleep(1.5)  # the oldest waiting batch is now >= 1.5 s old on Redis's clock
    assert tickparts.ingest_lag_s(r.time(), r.xrange(keys.stream(), count=1)) >= 1.5
    assert tickparts.stream_age_s(server_time, []) == 0.0
    fake_clock[0] = start + conf().stale_after_s + 1.0  # silent 1 s past the threshold
    for name, cid in twins.items():
        _mode(settings, name == "split")
        assert processing.tick(cid, force=True)
        assert set(state.health(cid).tolist()) == {state.HEALTH_CODES["ok"]}, name
        assert not Alert.objects.filter(cluster_id=cid).exists(), name
    drain_now()  # the batch applied: half the cards are fresh, the other half silent
    for name, cid in twins.items():
        _mode(settings, name == "split")
        assert processing.tick(cid, force=True)
        health = state.health(cid)
        assert (health[half] == state.HEALTH_CODES["ok"]).all(), name
        assert (np.delete(health, half) == state.HEALTH_CODES["stale"]).all(), name
    _assert_same(_snapshot(twins["whole"]), _snapshot(twins["split"]))


def test_the_lag_allowance_is_capped(settings):
    from twin.telemetry.config import conf

    now = 1_000_000.0
    old = [(f"{int((now - 3600) * 1000)}-0".encode(), {})]
    assert tickparts.stream_age_s((int(now), 0), old) == pytest.approx(3600.0)
    assert conf().lag_allowance_max_s == 60.0  # the default
    assert tickparts.ingest_lag_s((int(now), 0), old) == conf().lag_allowance_max_s
    assert tickparts.ingest_lag_s((int(now), 500_000), []) == 0.0
    refused = str(int((now - 7) * 1000)).encode()
    assert tickparts.ingest_lag_s((int(now), 0), [], refused) == pytest.approx(7.0)
    settings.TELEMETRY_LAG_ALLOWANCE_MAX_S = 0  # silence by the clock alone
    assert tickparts.ingest_lag_s((int(now), 0), old, refused) == 0.0


def test_readings_refused_as_busy_are_not_silence(twins, fake_clock, settings):
    """While the ingest path refuses batches (the stream is full, the agents get 503
    and retry), the cards whose readings it refused are not stale; once the refusal
    episode is over they are judged as usual."""
    from twin.telemetry.config import conf

    start = fake_clock[0]
    n = 3 * SN
    _all_report_and_tick(twins, settings, start)
    settings.TELEMETRY_MAX_BACKLOG = 0  # full: every batch is refused
    for cid in twins.values():
        refused = _batch(cid, {"gpu_util": np.full(n, 55.0)}, start + 1.0, np.arange(n))
        assert enqueue(refused, agent_id=None, seq=None).status == "busy"
    r = state.redis_client()
    time.sleep(1.5)  # refusing for >= 1.5 s on Redis's clock, nothing on the stream
    assert r.xlen(keys.stream()) == 0
    assert 1.5 <= tickparts.ingest_lag_s(r.time(), [], r.get(keys.ingest_refused())) < 10
    fake_clock[0] = start + conf().stale_after_s + 1.0
    for name, cid in twins.items():
        _mode(settings, name == "split")
        assert processing.tick(cid, force=True)
        assert set(state.health(cid).tolist()) == {state.HEALTH_CODES["ok"]}, name
        assert not Alert.objects.filter(cluster_id=cid).exists(), name
    r.delete(keys.ingest_refused())  # the episode over (it expires stale_after_s after)
    for name, cid in twins.items():
        _mode(settings, name == "split")
        assert processing.tick(cid, force=True)
        assert set(state.health(cid).tolist()) == {state.HEALTH_CODES["stale"]}, name
    _assert_same(_snapshot(twins["whole"]), _snapshot(twins["split"]))


def test_the_round_gate_follows_its_cpu_time_not_its_wall_time(twins, fake_clock, settings,
                                                               monkeypatch):
    """As the whole tick's gate (``test_tick_trace``): a round that waits for a core
    (here: for the interpreter lock, held by a busy thread) takes longer in wall time
    than in CPU time, and the gate after it is its CPU time on the critical path
    (start + slowest shard + merge), not its wall time."""
    from tests.telemetry.test_tick_trace import tick_beside_a_busy_thread
    from twin.telemetry.processing import ticks

    settings.TELEMETRY_MAX_TICK_HZ = 1000  # (the floor out of the way: 1 ms)
    cid = twins["split"]
    _mode(settings, True)
    n = 3 * SN
    _put(cid, {"gpu_util": np.full(n, 50.0)}, fake_clock[0], np.arange(n))
    stats = tick_beside_a_busy_thread(cid)
    assert stats["shards"] == 3
    wall, cpu = stats["last"], stats["cpu_last"]
    assert cpu < wall, "the round waited for the lock"
    assert stats["last_shard_cpu"] / 3 <= cpu  # at least the slowest shard
    assert stats["cpu_sum"] == pytest.approx(cpu)
    assert shards.round_cost[cid] == pytest.approx(cpu)
    assert ticks.gate_ms(cid) == int(max(0.001, cpu) * 1000)
    assert ticks.gate_ms(cid) < int(wall * 1000)
    # Another process learns the cost from the stats at its round's start (seen
    # here as the shards of the next round start).
    shards.round_cost.clear()
    _put(cid, {"gpu_util": np.full(n, 60.0)}, fake_clock[0] + 1, np.arange(n))
    real = shards.run_shard
    seen: list[float] = []

    def spy(*args: Any, **kwargs: Any) -> int | None:
        seen.append(shards.round_cost[cid])
        return real(*args, **kwargs)

    monkeypatch.setattr(shards, "run_shard", spy)
    assert processing.tick(cid, force=True)
    assert seen and seen[0] == pytest.approx(cpu)
