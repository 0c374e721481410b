"""The columnar live state: layout, latest values, history, rollups, ticks, minutes."""
from __future__ import annotations

import datetime as dt
import time

import numpy as np
import pytest

from tests.api.conftest import add_supernodes
from tests.telemetry.conftest import drain_now
from twin.telemetry import keys, processing, state, tasks
from twin.telemetry.enqueue import enqueue
from twin.telemetry.ingest import Batch
from twin.telemetry.metrics import METRIC_INDEX
from twin.telemetry.models import CardHealth, TelemetryMinute
from twin.telemetry.processing import minutes
from twin.telemetry.processing.minutes import sample_minute


@pytest.fixture
def wide(tiny_cluster):
    """Five supernodes of 8 cards, each in its own rack and server."""
    extra = add_supernodes(tiny_cluster, 1, 4)
    return {**tiny_cluster, "all_cards": list(tiny_cluster["cards"]) + extra}


def put(cluster_id: int, values: dict[str, list[float] | np.ndarray], ts: float | None = None,
        cards: list[int] | None = None) -> None:
    """Enqueue and apply one batch (the same path as the endpoint, minus HTTP)."""
    lay = state.layout(cluster_id)
    ords = (np.arange(lay.n) if cards is None else lay.ordinals(cards)).astype(np.int32)
    keys = list(values)
    matrix = np.array([np.asarray(values[k], dtype=np.float32) for k in keys])
    batch = Batch(cluster_id=cluster_id, version=lay.version, ts=ts or time.time(),
                  metric_idx=np.array([METRIC_INDEX[k] for k in keys], np.uint8),
                  values=matrix, ordinals=ords)
    assert enqueue(batch, agent_id=None, seq=None).status == "queued"
    drain_now()


def test_a_card_added_behind_the_signals_is_probed_for_beside_the_caller(
        wide, transactional_db, monkeypatch, django_assert_num_queries):
    """``bulk_create`` sends no signal, so only the periodic probe of the cards finds
    the new one. The probe runs in a thread: the caller gets its cached layout at
    once (no query: at a million cards the probe is 0.1–0.3 s); the next call after
    the probe rebuilds."""
    import uuid

    from twin.hardware.models import Card
    from twin.telemetry.state import layouts

    cid = wide["cluster"].pk
    lay = state.layout(cid)
    last = wide["all_cards"][-1]
    extra = Card.objects.bulk_create([Card(
        supernode=last.supernode, server=last.server, accelerator=last.accelerator, index=8,
        slot=8, x=0, y=0, z=2, serial="BEHIND-THE-SIGNALS", uuid=uuid.uuid4())])[0]
    assert state.layout(cid) is lay  # nothing told anyone yet
    monkeypatch.setattr(layouts, "LAYOUT_PROBE_S", 0.0)
    with django_assert_num_queries(0):
        assert state.layout(cid) is lay  # the probe started, the caller did not wait
    layouts._probing[cid].join(timeout=30)
    rebuilt = state.layout(cid)
    assert rebuilt.n == lay.n + 1 and rebuilt.card_ids[-1] == extra.pk
    monkeypatch.setattr(layouts, "LAYOUT_PROBE_S", 3600.0)
    assert state.layout(cid) is rebuilt


def test_one_process_of_the_deployment_probes_an_interval(wide, transactional_db):
    from twin.telemetry.state import layouts

    cid = wide["cluster"].pk
    lay = state.layout(cid)
    lay.built_at = time.monotonic() - 3600  # the interval is up
    assert state.layout(cid) is lay
    layouts._probing.pop(cid).join(timeout=30)
    ttl = state.redis_client().pttl(keys.layout_probe(cid))
    assert 0 < ttl <= layouts.LAYOUT_PROBE_S * 1000
    # Another process whose interval is up too: the deployment's probe is taken.
    lay.built_at = time.monotonic() - 3600
    assert state.layout(cid) is lay and cid not in layouts._probing


def test_the_probe_interval_grows_with_the_cluster_past_65536_cards():
    from twin.telemetry.state.layouts import LAYOUT_PROBE_S, probe_interval

    assert probe_interval(40) == probe_interval(65_536) == LAYOUT_PROBE_S
    assert probe_interval(1_048_576) == 16 * LAYOUT_PROBE_S  # 8 minutes


def test_the_layout_orders_cards_by_supernode_rack_server_and_slot(wide):
    cid = wide["cluster"].pk
    lay = state.layout(cid)
    assert lay.n == 40
    expected = [c.pk for c in sorted(wide["all_cards"], key=lambda c: (c.supernode.index,
                                                                        c.slot))]
    assert lay.card_ids.tolist() == expected
    assert lay.ordinals([expected[9], 12345678]).tolist() == [9, -1]
    racks = lay.groups["rack"]
    assert racks.names == ["r0", "r1", "r2", "r3", "r4"] and racks.cards.tolist() == [8] * 5
    assert lay.members("rack", int(racks.ids[2])).tolist() == list(range(16, 24))
    assert lay.members("cluster", cid).tolist() == list(range(40))
    assert racks.budget_w.tolist() == [40_000.0] * 5
    # r0 holds the tiny server (1,800 W), its PCIe switch (60 W) and NIC (25 W).
    assert racks.static_w[0] == 1_885.0 and racks.static_w[1] == 1_800.0
    with pytest.raises(KeyError, match="no rack"):
        lay.members("rack", 999_999)


def test_latest_values_card_state_and_unknown_cards(tiny_cluster):
    cid = tiny_cluster["cluster"].pk
    ids = [c.pk for c in tiny_cluster["cards"]]
    before = state.latest(cid, "gpu_util")
    assert before.shape == (8,) and np.isnan(before).all()
    put(cid, {"gpu_util": [10, 20, 30, 40, 50, 60, 70, 80],
              "power_w": [100] * 8}, cards=ids)
    np.testing.assert_array_equal(state.latest(cid, "gpu_util", [ids[3], ids[0], -5]),
                                  np.array([40, 10, np.nan], np.float32))
    many = state.latest_many(cid, ["gpu_util", "power_w"], ids[6:])
    assert many["gpu_util"].tolist() == [70, 80] and many["power_w"].tolist() == [100, 100]
    card = state.card_state(cid, ids[2])
    assert card["metrics"]["gpu_util"] == 30 and card["metrics"]["gpu_temp_c"] is None
    assert card["stale"] is False and 0 <= card["age_s"] < 5
    assert card["health"] == "ok"  # the drain ticked after applying the batch
    with pytest.raises(KeyError, match="not in cluster"):
        state.card_state(cid, 10**9)
    with pytest.raises(KeyError, match="unknown metric"):
        state.latest(cid, "warp_drive")


def test_history_keeps_one_value_per_bucket(tiny_cluster):
    cid = tiny_cluster["cluster"].pk
    c0 = tiny_cluster["cards"][0].pk
    now = time.time()
    for age, util in ((3, 30.0), (2, 20.0), (1, 10.0)):
        put(cid, {"gpu_util": [util]}, ts=now - age, cards=[c0])
    points = state.history(cid, c0, "gpu_util", 10)
    assert [v for _, v in points] == [30.0, 20.0, 10.0]
    assert [t for t, _ in points] == [float(int(now - a)) for a in (3, 2, 1)]
    assert state.history(cid, c0, "gpu_util", 2) == points[1:]
    with pytest.raises(KeyError, match="no history"):
        state.history(cid, c0, "pcie_replay", 5)


def test_a_tick_rolls_up_racks_supernodes_and_the_cluster(wide):
    cid = wide["cluster"].pk
    lay = state.layout(cid)
    power = np.arange(40, dtype=np.float32) * 10 + 300  # 300 … 690 W
    util = np.full(40, 50.0, np.float32)
    util[8:16] = np.nan  # rack r1 reports power only
    put(cid, {"power_w": power, "gpu_util": util})
    first = state.frame_seq(cid)
    assert first > 0  # the drain ticked once it had applied the batch
    assert processing.tick(cid) is None  # gated: at most 2 ticks a second
    second = processing.tick(cid, force=True)
    assert second > first and state.frame_seq(cid) == second
    rack = state.rollup(cid, "rack", "power_w")
    assert rack["seq"] == second and rack["names"][0] == "r0"
    assert rack["mean"][0] == pytest.approx(335) and rack["min"][0] == 300
    assert rack["max"][4] == 690 and rack["sum"][1] == pytest.approx(sum(range(380, 460, 10)))
    assert rack["count"].tolist() == [8] * 5 and rack["reporting"].tolist() == [8] * 5
    assert rack["draw_w"][0] == pytest.approx(rack["sum"][0] + 1_885)
    assert rack["budget_w"][0] == 40_000
    util_racks = state.rollup(cid, "rack", "gpu_util")
    assert util_racks["count"].tolist() == [8, 0, 8, 8, 8]
    assert np.isnan(util_racks["mean"][1]) and util_racks["mean"][0] == 50
    cluster = state.rollup(cid, "cluster", "power_w")
    assert cluster["ids"].tolist() == [cid] and cluster["sum"][0] == pytest.approx(power.sum())
    assert cluster["budget_w"][0] == 200_000
    sn = state.rollup(cid, "supernode", "power_w")
    assert len(sn["ids"]) == 5 and sn["max"].tolist() == [370, 450, 530, 610, 690]
    summary = state.summary(cid)
    assert summary["reporting"] == 40 and summary["health"]["ok"] == 40
    assert summary["power_draw_w"] == pytest.approx(power.sum() + 1_885 + 4 * 1_800, rel=1e-6)
    assert lay.version == state.layout(cid).version


def test_a_silent_card_turns_stale_with_an_alert_and_a_health_row(tiny_cluster, settings):
    settings.TELEMETRY_THRESHOLDS = {"stale": {"min_s": 0.0}}
    cid = tiny_cluster["cluster"].pk
    ids = [c.pk for c in tiny_cluster["cards"]]
    put(cid, {"gpu_util": [50] * 7}, cards=ids[:7])
    put(cid, {"gpu_util": [50]}, ts=time.time() - 30, cards=ids[7:])
    processing.tick(cid, force=True)
    health = state.health(cid, ids)
    assert [state.HEALTH_NAMES[h] for h in health] == ["ok"] * 7 + ["stale"]
    row = CardHealth.objects.get(card_id=ids[7])
    assert row.status == "stale" and row.reasons == "stale"
    from twin.telemetry.models import Alert

    alert = Alert.objects.get(rule="stale")
    assert alert.card_id == ids[7] and alert.ended is None
    assert state.card_state(cid, ids[7])["stale"] is True
    put(cid, {"gpu_util": [55]}, cards=ids[7:])
    processing.tick(cid, force=True)
    assert state.health(cid, ids[7:])[0] == state.HEALTH_CODES["ok"]
    assert not CardHealth.objects.filter(card_id=ids[7]).exists()
    alert.refresh_from_db()
    assert alert.ended is not None


def test_hardware_edits_keep_the_state_unless_the_card_order_changes(tiny_cluster):
    cid = tiny_cluster["cluster"].pk
    ids = [c.pk for c in tiny_cluster["cards"]]
    put(cid, {"gpu_util": [1, 2, 3, 4, 5, 6, 7, 8]}, cards=ids)
    version = state.layout(cid).version
    rack = tiny_cluster["rack"]
    rack.power_budget_w = 30_000
    rack.save()  # signal: layouts rebuilt, same card order
    lay = state.layout(cid)
    assert lay.version == version and lay.groups["rack"].budget_w[0] == 30_000
    assert state.latest(cid, "gpu_util", ids).tolist() == [1, 2, 3, 4, 5, 6, 7, 8]
    tiny_cluster["cards"][7].delete()  # the order changed: fresh state
    lay = state.layout(cid)
    assert lay.version != version and lay.n == 7
    assert np.isnan(state.latest(cid, "gpu_util")).all()


def test_minutes_are_persisted_with_card_and_group_means_and_retention(tiny_cluster,
                                                                       settings):
    cid = tiny_cluster["cluster"].pk
    lay = state.layout(cid)
    processing.ensure_state(lay)
    r = state.redis_client()
    values = np.full((len(METRIC_INDEX), 8), np.nan, np.float32)
    minute = int(time.time() // 60) - 2
    t0 = minute * 60 + 1.0
    for step, util in enumerate((40.0, 60.0)):
        values[METRIC_INDEX["gpu_util"]] = util
        values[METRIC_INDEX["power_w"]] = 400 + util
        sample_minute(r, lay, values, t0 + 10 * step)
    sample_minute(r, lay, values, t0 + 61)  # next minute: the first is written
    rows = TelemetryMinute.objects.filter(cluster_id=cid)
    assert sorted(set(rows.values_list("level", flat=True))) == ["card", "cluster", "rack",
                                                                 "supernode"]
    card = rows.get(level="card", object_id=tiny_cluster["cards"][0].pk)
    assert card.samples == 2 and card.mean_values()["gpu_util"] == 50.0
    assert card.max_values()["gpu_util"] == 60.0 and card.mean_values()["gpu_temp_c"] is None
    rack = rows.get(level="rack")
    assert rack.draw_w == pytest.approx(8 * 450 + 1_885)
    assert card.minute.timestamp() == minute * 60
    kept = rows.count()
    assert tasks.cleanup()["minutes"] == 0  # within the 7-day retention
    settings.TELEMETRY_RETENTION_DAYS = 0
    assert tasks.cleanup()["minutes"] == kept
    assert not TelemetryMinute.objects.exists()


def test_a_large_cluster_keeps_group_minutes_from_group_accumulators(tiny_cluster, settings):
    """Past ``TELEMETRY_PERSIST_CARDS_MAX`` no card rows are written and the minute
    accumulates per group: a group's mean is the mean of all its readings in the
    minute, its draw the mean over samples of its cards' summed power (+ static)."""
    settings.TELEMETRY_PERSIST_CARDS_MAX = 4  # the 8-card cluster counts as large
    cid = tiny_cluster["cluster"].pk
    lay = state.layout(cid)
    assert minutes.by_group(lay)
    processing.ensure_state(lay)
    r = state.redis_client()
    minute = int(time.time() // 60) - 2
    t0 = minute * 60 + 1.0
    values = np.full((len(METRIC_INDEX), 8), np.nan, np.float32)
    values[METRIC_INDEX["gpu_util"]] = 40.0
    values[METRIC_INDEX["power_w"]] = 440.0
    sample_minute(r, lay, values, t0)  # every card
    values[:, 4:] = np.nan  # then only the first four
    values[METRIC_INDEX["gpu_util"], :4] = 60.0
    values[METRIC_INDEX["power_w"], :4] = 460.0
    sample_minute(r, lay, values, t0 + 10)
    assert not r.exists(keys.minute_acc(cid, lay.version, "sum"))  # no per-card blobs
    sample_minute(r, lay, values, t0 + 61)  # next minute: the first is written
    rows = TelemetryMinute.objects.filter(cluster_id=cid, minute__lt=dt.datetime.fromtimestamp(
        (minute + 1) * 60, tz=dt.UTC))
    assert sorted(rows.values_list("level", flat=True)) == ["cluster", "rack", "supernode"]
    for row in rows:
        assert row.samples == 8 + 4
        assert row.mean_values()["gpu_util"] == pytest.approx((8 * 40 + 4 * 60) / 12)
        assert row.max_values()["gpu_util"] == 60.0 and row.mean_values()["gpu_temp_c"] is None
    static = lay.groups["rack"].static_w[0]
    assert rows.get(level="rack").draw_w == pytest.approx((8 * 440 + 4 * 460) / 2 + static)
    # The finished minute's accumulators are gone; the new minute's hold one sample.
    assert not r.keys(keys.minute_acc(cid, lay.version, "g.*", minute))


def test_minute_rows_written_twice_are_kept_once(tiny_cluster):
    """``insert_minutes`` (COPY on PostgreSQL, the ORM elsewhere) skips rows already
    there: a finished minute handed over twice is not an error, the first one stays."""
    cid = tiny_cluster["cluster"].pk
    stamp = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
    mean = np.full(len(METRIC_INDEX), np.nan, "<f4")
    mean[METRIC_INDEX["gpu_util"]] = 50.0
    first = [(cid, "rack", 7, stamp, 40, mean.tobytes(), mean.tobytes(), 12_345.5),
             (cid, "cluster", cid, stamp, 40, mean.tobytes(), mean.tobytes(), None)]
    minutes.insert_minutes(first)
    again = [(cid, "rack", 7, stamp, 1, (mean * 2).tobytes(), mean.tobytes(), 1.0),
             (cid, "rack", 8, stamp, 3, mean.tobytes(), mean.tobytes(), None)]
    minutes.insert_minutes(again)
    rows = {(m.level, m.object_id): m for m in TelemetryMinute.objects.filter(cluster_id=cid)}
    assert set(rows) == {("rack", 7), ("cluster", cid), ("rack", 8)}
    kept = rows[("rack", 7)]
    assert (kept.samples, kept.draw_w, kept.mean_values()["gpu_util"]) == (40, 12_345.5, 50.0)
    assert kept.minute == stamp and rows[("cluster", cid)].draw_w is None


def test_a_column_with_many_holes_keeps_the_old_values_in_them(wide):
    cid = wide["cluster"].pk
    put(cid, {"gpu_util": np.arange(40, dtype=np.float32)})
    holes = np.where(np.arange(40) % 2 == 0, 99.0, np.nan).astype(np.float32)
    assert (np.diff(np.flatnonzero(np.isfinite(holes))) != 1).sum() >= processing.MAX_RUNS
    put(cid, {"gpu_util": holes})  # 20 runs of one card: one merged write, not 20
    got = state.latest(cid, "gpu_util")
    expected = np.where(np.arange(40) % 2 == 0, 99.0, np.arange(40))
    np.testing.assert_array_equal(got, expected.astype(np.float32))
    seen = state.last_seen(cid)
    assert np.isfinite(seen).all()


def test_the_beat_tick_only_ticks_idle_clusters(tiny_cluster):
    cid = tiny_cluster["cluster"].pk
    put(cid, {"gpu_util": [50] * 8})  # the drain ticks once
    first = state.frame_seq(cid)
    assert first > 0
    assert tasks.tick_all() == 0 and state.frame_seq(cid) == first  # ticked just now: left alone
    state.redis_client().set(keys.last_tick(cid), repr(time.time() - 10))
    state.redis_client().delete(keys.tick_gate(cid))
    assert tasks.tick_all() == 1 and state.frame_seq(cid) > first


@pytest.mark.parametrize("hz", [2.0, 1.0])
def test_ticks_are_at_most_max_tick_hz_a_second(tiny_cluster, settings, hz):
    """``TELEMETRY_MAX_TICK_HZ``: the gate after a tick is open again after 1/hz s."""
    settings.TELEMETRY_MAX_TICK_HZ = hz
    cid = tiny_cluster["cluster"].pk
    put(cid, {"gpu_util": [50] * 8})
    r = state.redis_client()
    r.delete(keys.tick_gate(cid))
    assert processing.tick(cid) is not None
    assert processing.tick(cid) is None  # gated
    assert r.pttl(keys.tick_gate(cid)) == pytest.approx(1000 / hz, abs=100)


def test_the_tick_seq_never_goes_back_when_redis_loses_its_counter(tiny_cluster):
    """A Redis restarted without persistence has lost the tick counter: the next
    tick must still be numbered above every frame clients were sent before."""
    cid = tiny_cluster["cluster"].pk
    put(cid, {"gpu_util": [50] * 8})
    before = state.frame_seq(cid)
    later = processing.tick(cid, force=True)
    assert later > before
    state.redis_client().delete(keys.seq(cid))  # what the restarted Redis no longer has
    after_restart = processing.tick(cid, force=True)
    assert after_restart > later
    assert state.frame_seq(cid) == after_restart


def test_silence_is_reported_at_the_highest_level_where_it_is_total(wide, settings):
    from twin.telemetry.alerts import rules
    from twin.telemetry.models import Alert

    settings.TELEMETRY_THRESHOLDS = {r.key: {"min_s": 0.0} for r in rules()}
    cid = wide["cluster"].pk
    lay = state.layout(cid)
    old = time.time() - 30
    put(cid, {"gpu_util": [50] * 40})
    put(cid, {"gpu_util": [50] * 9}, ts=old, cards=lay.card_ids[8:17].tolist())  # r1 + 1
    processing.tick(cid, force=True)
    open_ = sorted(Alert.objects.filter(ended__isnull=True).values_list("rule", "subject"))
    r1 = int(lay.groups["rack"].ids[1])
    assert open_ == [("rack_silent", f"rack:{r1}"), ("stale", f"card:{lay.card_ids[16]}")]
    assert (state.health(cid)[8:17] == state.HEALTH_CODES["stale"]).all()
    # Everything silent: one cluster alert, no new rack or card alerts.
    put(cid, {"gpu_util": [50] * 40}, ts=old)
    processing.tick(cid, force=True)
    new = Alert.objects.filter(ended__isnull=True).exclude(rule__in=["rack_silent", "stale"])
    assert list(new.values_list("rule", "severity", "subject")) == [
        ("cluster_silent", "critical", f"cluster:{cid}")]
    assert Alert.objects.filter(rule="rack_silent").count() == 1
    put(cid, {"gpu_util": [50] * 40})
    processing.tick(cid, force=True)
    assert not Alert.objects.filter(ended__isnull=True).exists()
