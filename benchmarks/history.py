"""Benchmark: long-term history in VictoriaMetrics against the database path.

Usage (SQLite + the embedded Redis by default; needs Debian's ``victoria-metrics``)::

    .venv/bin/python benchmarks/history.py                  # 8,192 cards, 30 query repeats
    .venv/bin/python benchmarks/history.py --cards 65536 --steps 3

It starts its own ``victoria-metrics`` (free port, temporary storage) and uses a
private Redis namespace. The layout is synthetic (``--cards`` cards, 8 per server,
32 per rack, 512 per supernode) and built in this process, not read from hardware
rows: what is timed is the history code, not the cluster builder. One ``Cluster``
row (``history-bench``) is created for the database rows' foreign key.

1. **Writes** (samples = card × metric values, all 26 metrics finite):
   * VictoriaMetrics: ``victoria.write_samples`` — what a tick does once every
     ``TWIN_VICTORIA_STEP_S`` — for ``--steps`` steps after a first one that creates
     the series (timed and printed apart: a one-off per card): samples/s, and how
     long one step takes (the issue's targets: 65,536 cards every 10 s = 170,394 samples/s;
     1,048,576 cards every 60 s = 454,383 samples/s);
   * the database path: ``minutes.sample_minute`` across a minute boundary, which
     writes the finished minute with ``persist_minute`` (``TelemetryMinute`` rows:
     cards up to ``TELEMETRY_PERSIST_CARDS_MAX``, racks, supernodes, the cluster), for
     ``--steps`` minutes: samples/s of card values stored. ``persist_minute`` looks the
     layout up by cluster id, so the benchmark hands it the synthetic one.
   Ratio: VictoriaMetrics / database.
2. **24 h queries** for one card and one rack (32 cards), at 1-minute resolution, p50
   and p99 over ``--repeats``: ``victoria.query_history`` (what the endpoint calls)
   against ``MinuteSerializer`` over the ``TelemetryMinute`` rows of the same
   object (what the database path serialises; without the endpoint's 100-row pages,
   so both produce the whole day). The day is loaded into both first: the queried
   rack's 32 cards, every metric, every minute (VictoriaMetrics: 1.2 M samples; the
   database: 1,440 × 34 rows). Ratio: database p99 / VictoriaMetrics p99.
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.settings")
os.environ.setdefault("TWIN_ALLOW_INSECURE_KEY", "1")
os.environ["TWIN_TELEMETRY_PREFIX"] = f"twbench{uuid.uuid4().hex[:6]}"

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from twin.core.localnet import free_port, stop_process, wait_http  # noqa: E402
from twin.telemetry import victoria  # noqa: E402
from twin.telemetry.metrics import N_METRICS  # noqa: E402
from twin.telemetry.processing import minutes  # noqa: E402
from twin.telemetry.state import GroupIndex, Layout, redis_client  # noqa: E402

PER_RACK, PER_SERVER, PER_SN = 32, 8, 512
DAY_MIN = 24 * 60


def group(level: str, of: np.ndarray, static_w: float = 0.0) -> GroupIndex:
    """A ``GroupIndex`` for cards already sorted by group (as the layout orders them)."""
    ids, starts, counts = np.unique(of, return_index=True, return_counts=True)
    return GroupIndex(level=level, ids=ids.astype(np.int64), names=[str(i) for i in ids],
                      of_card=np.searchsorted(ids, of).astype(np.int32), perm=None,
                      starts=starts.astype(np.int64), cards=counts.astype(np.int32),
                      budget_w=np.full(len(ids), 40_000.0),
                      static_w=np.full(len(ids), static_w))


def synthetic_layout(cluster_id: int, n: int) -> Layout:
    k = np.arange(n, dtype=np.int64)
    card_ids = 10_000_000 + k
    return Layout(
        cluster_id=cluster_id, version="bench", fingerprint="bench", card_ids=card_ids,
        server_ids=k // PER_SERVER, slots=(k % PER_SERVER).astype(np.int64),
        tdp_w=np.full(n, 700, np.float32), idle_w=np.full(n, 90, np.float32),
        hbm_gib=np.full(n, 80, np.float32),
        groups={"cluster": group("cluster", np.full(n, cluster_id)),
                "supernode": group("supernode", 1_000 + k // PER_SN),
                "rack": group("rack", 100_000 + k // PER_RACK, static_w=7_540.0)},
        probe=(n, int(card_ids[-1])))


def readings(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.uniform(1, 100, (N_METRICS, n)).astype(np.float32)


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cards", type=int, default=8_192)
    ap.add_argument("--steps", type=int, default=5, help="write steps (and minutes) timed")
    ap.add_argument("--repeats", type=int, default=30, help="queries per percentile")
    args = ap.parse_args()
    binary = shutil.which("victoria-metrics")
    if binary is None:
        sys.exit("error: victoria-metrics is not installed (apt-get install victoria-metrics)")

    call_command("migrate", verbosity=0)
    from twin.hardware.models import Cluster
    from twin.telemetry.api.serializers import MinuteSerializer
    from twin.telemetry.models import TelemetryMinute

    cluster, _ = Cluster.objects.get_or_create(name="history-bench")
    cid = cluster.pk
    TelemetryMinute.objects.filter(cluster_id=cid).delete()
    lay = synthetic_layout(cid, args.cards)
    minutes.layout = lambda _cid: lay  # persist_minute looks the layout up by id
    rng = np.random.default_rng(7)
    r = redis_client()

    tmp = tempfile.mkdtemp(prefix="vm-bench-")
    port = free_port()
    proc = subprocess.Popen([binary, f"-httpListenAddr=127.0.0.1:{port}",
                             f"-storageDataPath={tmp}", "-retentionPeriod=1",
                             "-search.latencyOffset=0s", "-search.disableCache"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_http(f"http://127.0.0.1:{port}/health", proc)
        settings.TWIN_VICTORIA_URL = f"http://127.0.0.1:{port}"
        settings.TWIN_VICTORIA_TIMEOUT_S = 120.0
        run(args, lay, rng, r, MinuteSerializer, TelemetryMinute)
    finally:
        stop_process(proc)
        shutil.rmtree(tmp, ignore_errors=True)
        TelemetryMinute.objects.filter(cluster_id=cid).delete()
        for key in r.scan_iter(match=f"{os.environ['TWIN_TELEMETRY_PREFIX']}:*"):
            r.delete(key)


def run(args: argparse.Namespace, lay: Layout, rng: np.random.Generator, r, serializer,
        minute_model) -> None:
    n, cid = lay.n, lay.cluster_id
    print(f"history benchmark: {n:,} cards × {N_METRICS} metrics, {args.steps} steps; "
          f"machine: {os.cpu_count()} cores")

    # 1. Writes.
    now = time.time()
    vm_s: list[float] = []
    t0 = time.perf_counter()
    victoria.write_samples(lay, readings(rng, n), now - 3_610)
    first_s = time.perf_counter() - t0
    for step in range(args.steps):
        values = readings(rng, n)
        t0 = time.perf_counter()
        victoria.write_samples(lay, values, now - 3_600 + 10 * step)
        vm_s.append(time.perf_counter() - t0)
    vm_rate = n * N_METRICS / statistics.mean(vm_s)
    db_s: list[float] = []
    base_minute = int(now // 60) - 2 * DAY_MIN
    for step in range(args.steps):
        m = base_minute + step
        values = readings(rng, n)
        r.delete(minutes.keys.minute_acc(cid, lay.version, "last"))
        t0 = time.perf_counter()
        minutes.sample_minute(r, lay, values, m * 60 + 1.0)
        db_s.append(time.perf_counter() - t0)
    db_rate = n * N_METRICS / statistics.mean(db_s[1:] or db_s)  # the first wrote nothing
    print(f"write  VictoriaMetrics: first step (creates {n * N_METRICS:,} series) "
          f"{first_s * 1000:,.0f} ms, not counted below")
    print(f"write  VictoriaMetrics: {vm_rate:>12,.0f} samples/s "
          f"({statistics.mean(vm_s) * 1000:,.0f} ms a step of {n:,} cards, mean of {len(vm_s)};"
          f" max {max(vm_s) * 1000:,.0f} ms)")
    print(f"write  database path:   {db_rate:>12,.0f} samples/s "
          f"({statistics.mean(db_s[1:] or db_s) * 1000:,.0f} ms a minute of {n:,} cards)")
    print(f"write  ratio VictoriaMetrics / database: {vm_rate / db_rate:.2f}x")
    if n > int(getattr(settings, "TELEMETRY_PERSIST_CARDS_MAX", 8_192)):
        print("       (the database path keeps no card rows past TELEMETRY_PERSIST_CARDS_MAX: "
              "its figure is racks, supernodes and the cluster only)")
    for cards, every in ((65_536, 10), (1_048_576, 60)):
        need = cards * N_METRICS / every
        verdict = "kept up" if vm_rate >= need else "NOT kept up"
        print(f"       {cards:>9,} cards every {every} s need {need:>9,.0f} samples/s: "
              f"{verdict} at this rate by one writer process"
              f"{'' if cards == n else ' (extrapolated from this run)'}")

    # 2. A day of one rack (32 cards) in both stores, then 24 h queries.
    rack_lay = synthetic_layout(cid, PER_RACK)
    end_minute = int(now // 60)
    first = end_minute - DAY_MIN
    day = np.random.default_rng(11).uniform(1, 100, (DAY_MIN, N_METRICS, PER_RACK)).astype(
        np.float32)
    t0 = time.perf_counter()
    for start in range(0, DAY_MIN, 120):
        body = b"".join(victoria.series_text(rack_lay, day[i], (first + i) * 60 + 30.0)[0]
                        for i in range(start, min(start + 120, DAY_MIN)))
        victoria._post("/api/v1/import/prometheus", body, 120.0)
    with urllib.request.urlopen(
            f"{settings.TWIN_VICTORIA_URL}/internal/force_flush", timeout=60) as resp:
        resp.read()
    print(f"load   a day of one rack into VictoriaMetrics: {time.perf_counter() - t0:.1f} s")
    minutes.layout = lambda _cid: rack_lay
    t0 = time.perf_counter()
    r.delete(*[minutes.keys.minute_acc(cid, rack_lay.version, p)
               for p in (*minutes.keys.MINUTE_PARTS, "minute", "last")])
    for i in range(DAY_MIN + 1):
        values = day[min(i, DAY_MIN - 1)]
        r.delete(minutes.keys.minute_acc(cid, rack_lay.version, "last"))
        minutes.sample_minute(r, rack_lay, values, (first + i) * 60 + 30.0)
    print(f"load   a day of one rack into the database: {time.perf_counter() - t0:.1f} s "
          f"({minute_model.objects.filter(cluster_id=cid).count():,} rows)")

    since = dt.datetime.fromtimestamp(first * 60, tz=dt.UTC)
    until = dt.datetime.fromtimestamp(end_minute * 60, tz=dt.UTC)
    card = int(rack_lay.card_ids[5])
    rack = int(rack_lay.groups["rack"].ids[0])
    for level, object_id in (("card", card), ("rack", rack)):
        vm_t: list[float] = []
        db_t: list[float] = []
        vm_rows = db_rows = 0
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            vm_rows = len(victoria.query_history(cid, level, object_id, since, until,
                                                 static_w=7_540.0))
            vm_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            qs = minute_model.objects.filter(cluster_id=cid, level=level, object_id=object_id,
                                             minute__gte=since, minute__lt=until)
            db_rows = len(serializer(qs, many=True).data)
            db_t.append(time.perf_counter() - t0)
        print(f"query  24 h of a {level}: VictoriaMetrics p50 {pct(vm_t, 50) * 1000:,.0f} ms "
              f"p99 {pct(vm_t, 99) * 1000:,.0f} ms ({vm_rows} rows); database p50 "
              f"{pct(db_t, 50) * 1000:,.0f} ms p99 {pct(db_t, 99) * 1000:,.0f} ms "
              f"({db_rows} rows); ratio database / VictoriaMetrics p99 "
              f"{pct(db_t, 99) / pct(vm_t, 99):.2f}x")


if __name__ == "__main__":
    main()
