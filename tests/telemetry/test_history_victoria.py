"""Long-term history in a real VictoriaMetrics (``twin.telemetry.victoria``).

Each test starts Debian's ``victoria-metrics`` on a free port with an empty
storage directory; samples go in through the real ingestion endpoint and the
worker's code (``drain_now()`` and a tick), and come out of
``GET /api/telemetry/history/`` in the database path's shape. Skipped only when the
binary is not installed (``scripts/test`` installs Debian's package).
"""
from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator

import numpy as np
import pytest

from tests.conftest import ARTIFACTS
from tests.telemetry.conftest import batches_url, drain_now
from twin.core.localnet import free_port, stop_process, wait_http
from twin.telemetry import keys, state, victoria
from twin.telemetry.api.serializers import MinuteSerializer
from twin.telemetry.metrics import METRIC_INDEX, METRIC_KEYS
from twin.telemetry.models import TelemetryMinute
from twin.telemetry.processing import ensure_state, ticks
from twin.telemetry.processing.minutes import sample_minute

VICTORIA = shutil.which("victoria-metrics")
needs_victoria = pytest.mark.skipif(
    VICTORIA is None, reason="the victoria-metrics binary is not installed "
                             "(apt-get install victoria-metrics)")

HISTORY = "/api/telemetry/history/"


@pytest.fixture
def victoria_url(tmp_path, settings) -> Iterator[tuple[str, subprocess.Popen]]:
    """A real VictoriaMetrics on a free port, empty, that the twin writes to and reads from."""
    port = free_port()
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / "victoria-metrics.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [VICTORIA, f"-httpListenAddr=127.0.0.1:{port}", f"-storageDataPath={tmp_path / 'vm'}",
         "-retentionPeriod=1", "-search.latencyOffset=0s", "-search.disableCache"],
        stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/health", proc)
        settings.TWIN_VICTORIA_URL = url
        settings.TWIN_VICTORIA_STEP_S = 3600  # one write per send() (it opens the gate)
        yield url, proc
    finally:
        stop_process(proc)
        log.close()


def flush(url: str) -> None:
    """Make what was imported searchable now (VictoriaMetrics buffers about a second)."""
    with urllib.request.urlopen(f"{url}/internal/force_flush", timeout=10) as resp:
        resp.read()


def send(agent: dict, seq: int, util: list[float], power: list[float]) -> None:
    """One columnar batch through the real ingest endpoint, applied and ticked by the
    worker's code: one write to VictoriaMetrics (by the drain's tick or, if the tick
    gate held that back, by a forced one)."""
    cid = agent["cluster"].pk
    state.redis_client().delete(keys.victoria_gate(cid))
    doc = {"seq": seq, "cards": {"ids": [c.pk for c in agent["cards"]]},
           "columns": {"gpu_util": util, "power_w": power}}
    answer = agent["client"].post(batches_url(cid), json.dumps(doc),
                                  content_type="application/json")
    assert answer.status_code == 202, answer.content
    drain_now()
    ticks.tick(cid, force=True)


def not_near_a_minute_boundary() -> None:
    """Both sends of a test land in one minute (so one row holds both)."""
    if time.time() % 60 > 50:
        time.sleep(61 - time.time() % 60)


@needs_victoria
def test_samples_from_the_ingest_path_come_back_as_minutes_of_card_rack_and_cluster(
        agent, victoria_url, admin_client_api):
    url, _ = victoria_url
    cid = agent["cluster"].pk
    ids = [c.pk for c in agent["cards"]]
    rack = agent["rack"].pk
    not_near_a_minute_boundary()
    send(agent, 1, [10.0 * (i + 1) for i in range(8)], [300.0 + i for i in range(8)])
    send(agent, 2, [30.0 * (i % 3) for i in range(8)], [500.0 + i for i in range(8)])
    stats = state.redis_client().hgetall(keys.victoria_stats(cid))
    assert int(stats[b"writes"]) == 2 and int(stats[b"samples"]) == 2 * 2 * 8
    assert b"failures" not in stats
    flush(url)
    # An hour: one row a minute (a longer window has coarser rows, tested below).
    until = {"since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 3600)),
             "until": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 120))}

    card = admin_client_api.get(HISTORY, {"cluster": cid, "level": "card",
                                          "object_id": ids[3], **until})
    assert card.status_code == 200, card.content
    body = card.json()
    assert body["count"] == 1
    row = body["results"][0]
    assert set(row) == set(MinuteSerializer.Meta.fields)
    assert set(row["mean"]) == set(METRIC_KEYS) and set(row["max"]) == set(METRIC_KEYS)
    assert row["mean"]["gpu_util"] == pytest.approx((40.0 + 0.0) / 2)
    assert row["max"]["gpu_util"] == 40.0
    assert row["mean"]["power_w"] == pytest.approx((303.0 + 503.0) / 2)
    assert row["mean"]["gpu_temp_c"] is None and row["samples"] == 2
    assert row["draw_w"] is None and row["level"] == "card" and row["object_id"] == ids[3]
    assert row["minute"].endswith(":00Z")
    assert time.time() - 120 < time.mktime(time.strptime(row["minute"], "%Y-%m-%dT%H:%M:%SZ")) \
        - time.timezone <= time.time()

    util = np.array([[10.0 * (i + 1) for i in range(8)], [30.0 * (i % 3) for i in range(8)]])
    power = np.array([[300.0 + i for i in range(8)], [500.0 + i for i in range(8)]])
    racks = state.layout(cid).groups["rack"]
    static = float(racks.static_w[racks.position(rack)])
    groups = (("rack", rack), ("cluster", cid), ("supernode", agent["supernode"].pk))
    for level, object_id in groups:
        answer = admin_client_api.get(HISTORY, {"cluster": cid, "level": level,
                                                "object_id": object_id, **until})
        assert answer.status_code == 200, answer.content
        (group,) = answer.json()["results"]
        assert group["mean"]["gpu_util"] == pytest.approx(util.mean(axis=0).mean(), abs=1e-3)
        assert group["max"]["gpu_util"] == util.max()
        assert group["samples"] == 8 * 2
        assert group["draw_w"] == pytest.approx(power.mean(axis=0).sum() + static, abs=1e-2)
    # level=cluster needs no object_id: it is the cluster.
    answer = admin_client_api.get(HISTORY, {"cluster": cid, "level": "cluster", **until})
    assert answer.json()["count"] == 1
    # A window before the samples is empty.
    assert admin_client_api.get(HISTORY, {"cluster": cid, "level": "card", "object_id": ids[0],
                                          "until": "2020-01-01T00:00:00Z"}).json()["count"] == 0


@needs_victoria
def test_the_victoria_path_names_the_filters_it_needs(agent, victoria_url, admin_client_api):
    answer = admin_client_api.get(HISTORY, {"level": "card"})
    assert answer.status_code == 400
    assert set(answer.json()) == {"cluster", "object_id"}
    answer = admin_client_api.get(HISTORY, {"cluster": agent["cluster"].pk, "level": "moon"})
    assert answer.status_code == 400 and "level" in answer.json()
    answer = admin_client_api.get(HISTORY, {"cluster": 999_999, "level": "rack",
                                            "object_id": 1})
    assert answer.status_code == 404


@needs_victoria
def test_victoria_away_is_a_503_for_reads_and_a_counted_failure_for_writes(
        agent, victoria_url, admin_client_api):
    _, proc = victoria_url
    cid = agent["cluster"].pk
    stop_process(proc)
    answer = admin_client_api.get(HISTORY, {"cluster": cid, "level": "card",
                                            "object_id": agent["cards"][0].pk})
    assert answer.status_code == 503, answer.content
    assert answer["Retry-After"] == "2"
    assert "VictoriaMetrics" in answer.json()["detail"]
    # The tick goes on; the failed write is counted.
    send(agent, 1, [50.0] * 8, [400.0] * 8)
    stats = state.redis_client().hgetall(keys.victoria_stats(cid))
    assert int(stats[b"failures"]) == 1 and b"writes" not in stats
    assert stats[b"last_error"]


def test_without_victoria_the_history_is_the_database(tiny_cluster, settings,
                                                      admin_client_api):
    """Unset ``TWIN_VICTORIA_URL``: the endpoint lists ``TelemetryMinute`` rows, as before,
    and the tick writes nothing anywhere else."""
    settings.TWIN_VICTORIA_URL = ""
    cid = tiny_cluster["cluster"].pk
    lay = state.layout(cid)
    ensure_state(lay)
    r = state.redis_client()
    values = np.full((len(METRIC_INDEX), 8), np.nan, np.float32)
    values[METRIC_INDEX["gpu_util"]] = 70.0
    minute = int(time.time() // 60) - 2
    sample_minute(r, lay, values, minute * 60 + 1.0)
    sample_minute(r, lay, values, minute * 60 + 61.0)
    assert victoria.write_tick(r, lay, values, time.time()) is None
    card = tiny_cluster["cards"][0].pk
    answer = admin_client_api.get(HISTORY, {"cluster": cid, "level": "card", "object_id": card})
    assert answer.status_code == 200
    (row,) = answer.json()["results"]
    assert row["id"] == TelemetryMinute.objects.get(level="card", object_id=card).pk
    assert row["mean"]["gpu_util"] == 70.0
    assert not r.exists(keys.victoria_stats(cid))


@needs_victoria
def test_a_tick_with_a_queue_hands_the_write_to_the_write_history_task(
        agent, victoria_url, admin_client_api):
    """With a queue the tick only queues ``write_history``; the task reads the fresh
    values back from the live state and writes them stamped with the tick's time."""
    from twin.telemetry import tasks
    from twin.telemetry.processing.follow_ups import FollowUps

    url, _ = victoria_url
    cid = agent["cluster"].pk
    ids = [c.pk for c in agent["cards"]]
    queued: list[tuple[int, str, float]] = []
    follow_ups = FollowUps(write_history=lambda *a: queued.append(a) or True)
    state.redis_client().set(keys.victoria_gate(cid), 1)  # the drain's own tick: no step
    answer = agent["client"].post(batches_url(cid), json.dumps(
        {"seq": 1, "cards": {"ids": ids}, "columns": {"gpu_util": [60.0] * 8}}),
        content_type="application/json")
    assert answer.status_code == 202
    drain_now()
    state.redis_client().delete(keys.victoria_gate(cid))
    ticks.tick(cid, force=True, follow_ups=follow_ups)
    assert len(queued) == 1 and queued[0][:2] == (cid, state.layout(cid).version)
    assert not state.redis_client().exists(keys.victoria_stats(cid))  # nothing written yet
    assert tasks.write_history(*queued[0]) == 8  # the task body, as the worker runs it
    flush(url)
    until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(queued[0][2] + 120))
    rows = admin_client_api.get(HISTORY, {"cluster": cid, "level": "rack",
                                          "object_id": agent["rack"].pk, "until": until}).json()
    assert rows["count"] == 1 and rows["results"][0]["mean"]["gpu_util"] == 60.0
    assert rows["results"][0]["samples"] == 8
    # A layout that changed since the tick: nothing is written.
    assert tasks.write_history(cid, "gone", queued[0][2]) == 0


@needs_victoria
def test_cards_reporting_different_metric_sets_go_out_as_csv_and_text_and_all_come_back(
        tiny_cluster, victoria_url, monkeypatch):
    """The writer groups cards by the set of metrics they report: a set held by at
    least ``SMALL_GROUP`` cards is one CSV request, a rarer set exposition text. Here
    5 cards report utilization and power (CSV), 2 only utilization (text), 1 nothing;
    every value comes back per card, and the rack's group series aggregate all 7."""
    url, _ = victoria_url
    monkeypatch.setattr(victoria, "SMALL_GROUP", 3)
    cid = tiny_cluster["cluster"].pk
    lay = state.layout(cid)
    values = np.full((len(METRIC_KEYS), lay.n), np.nan, np.float32)
    util, power = METRIC_INDEX["gpu_util"], METRIC_INDEX["power_w"]
    values[util, :7] = np.arange(7) * 10.0 + 5.0
    values[power, :5] = np.arange(5) * 100.0 + 250.0
    parts, text_rows = victoria.csv_parts(values)
    assert [(cols, rows.tolist()) for cols, rows in parts] == [([util, power], [0, 1, 2, 3, 4])]
    assert text_rows.tolist() == [5, 6]
    not_near_a_minute_boundary()
    now = time.time()
    assert victoria.write_samples(lay, values, now) == 5 * 2 + 2
    flush(url)
    since = dt.datetime.fromtimestamp(now - 600, tz=dt.UTC)
    until = dt.datetime.fromtimestamp(now + 120, tz=dt.UTC)
    for k in range(8):
        rows = victoria.query_history(cid, "card", int(lay.card_ids[k]), since, until)
        if k == 7:
            assert rows == []
            continue
        (row,) = rows
        assert row["mean"]["gpu_util"] == pytest.approx(k * 10.0 + 5.0)
        assert row["mean"]["power_w"] == (pytest.approx(k * 100.0 + 250.0) if k < 5 else None)
        assert row["samples"] == 1
    rack = int(lay.groups["rack"].ids[0])
    static = float(lay.groups["rack"].static_w[0])
    (row,) = victoria.query_history(cid, "rack", rack, since, until, static_w=static)
    assert row["mean"]["gpu_util"] == pytest.approx(np.arange(7).mean() * 10.0 + 5.0)
    assert row["max"]["gpu_util"] == pytest.approx(65.0)
    assert row["max"]["power_w"] == pytest.approx(650.0)
    assert row["samples"] == 7  # the cards that reported anything
    assert row["draw_w"] == pytest.approx((np.arange(5) * 100.0 + 250.0).sum() + static)


@needs_victoria
def test_a_window_past_25_hours_has_coarser_rows_at_most_1500(tiny_cluster, victoria_url):
    """A chart needs no more rows than ``MAX_POINTS``: 24 h is 1,440 one-minute rows,
    a week is 7-minute rows (each the mean and max of its 7 minutes)."""
    url, _ = victoria_url
    cid = tiny_cluster["cluster"].pk
    lay = state.layout(cid)
    day = dt.timedelta(days=1)
    until = dt.datetime.fromtimestamp(time.time() // 420 * 420 - 420, tz=dt.UTC)
    assert victoria.history_step(until - day, until) == 60
    assert victoria.history_step(until - 7 * day, until) == 420
    values = np.full((len(METRIC_KEYS), lay.n), np.nan, np.float32)
    util = METRIC_INDEX["gpu_util"]
    start = until.timestamp() - 420  # the last 7-minute row: a sample in two of its minutes
    for at, v in ((start + 30, 20.0), (start + 250, 60.0)):
        values[util] = v
        victoria.write_samples(lay, values, at)
    flush(url)
    card = int(lay.card_ids[0])
    (row,) = victoria.query_history(cid, "card", card, until - 7 * day, until)
    assert row["minute"] == dt.datetime.fromtimestamp(start, tz=dt.UTC).isoformat().replace(
        "+00:00", "Z")
    assert row["mean"]["gpu_util"] == pytest.approx(40.0) and row["max"]["gpu_util"] == 60.0
    assert row["samples"] == 2
    minute_rows = victoria.query_history(cid, "card", card, until - day, until)
    assert [r["mean"]["gpu_util"] for r in minute_rows] == [20.0, 60.0]


def test_one_page_holds_a_day_of_minutes(tiny_cluster, settings, admin_client_api):
    """``limit`` goes to 1,500 on the history (1,000 elsewhere): a chart's day in one
    request, not two that each compute the window again."""
    settings.TWIN_VICTORIA_URL = ""
    cid = tiny_cluster["cluster"].pk
    card = tiny_cluster["cards"][0].pk
    base = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    blob = np.zeros(len(METRIC_KEYS), "<f4").tobytes()
    TelemetryMinute.objects.bulk_create(
        TelemetryMinute(cluster_id=cid, level="card", object_id=card,
                        minute=base + dt.timedelta(minutes=i), samples=1, mean=blob, max=blob)
        for i in range(1_440))
    answer = admin_client_api.get(HISTORY, {"cluster": cid, "level": "card", "object_id": card,
                                            "limit": 1_500})
    assert answer.status_code == 200
    assert answer.json()["count"] == 1_440 and len(answer.json()["results"]) == 1_440
    # Past the documented maximum: a 400 on ``limit`` (it was silently capped).
    over = admin_client_api.get(HISTORY, {"cluster": cid, "limit": 1_501})
    assert over.status_code == 400 and "limit" in over.json()
