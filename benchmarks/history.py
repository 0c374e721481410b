"""Benchmark: long-term history in VictoriaMetrics against the database path.

Usage (SQLite + the embedded Redis by default; needs Debian's ``victoria-metrics``)::

    .venv/bin/python benchmarks/history.py                      # 8,192 cards, every 10 s
    .venv/bin/python benchmarks/history.py --cards 65536 --step-s 10 --steps 5
    .venv/bin/python benchmarks/history.py --cards 1048576 --step-s 60 --steps 3

It starts its own ``victoria-metrics`` (free port, temporary storage) and uses a
private Redis namespace. The layout is synthetic (``--cards`` cards, 8 per server,
40 per rack, 512 per supernode) and built in this process, not read from hardware
rows: what is timed is the history code, not the cluster builder. One ``Cluster``
row (``history-bench``) is created for the database rows' foreign key, and one
superuser (``history-bench``) for the endpoint's requests; both are removed after.

1. **Writes** (samples = card × metric values, all 26 metrics finite, plus the group
   series of every rack, supernode and the cluster):
   * VictoriaMetrics: ``victoria.write_samples`` — what the ``write_history`` task does
     once every ``--step-s`` — for ``--steps`` steps after a first one that creates
     the series (timed and printed apart: a one-off per card). "Kept up" means one
     step's write took less than the step; the margin is step / slowest write. The
     same step is split into what this process spends encoding (per sample) and what
     VictoriaMetrics takes to ingest the encoded requests (samples/s). Baseline: the
     exposition text (one line a sample, what the writer sent before) of the same
     values for the first 65,536 cards at most, encoded and ingested in this run.
   * the database path: ``minutes.sample_minute`` across a minute boundary, which
     writes the finished minute with ``persist_minute`` (``TelemetryMinute`` rows:
     cards up to ``TELEMETRY_PERSIST_CARDS_MAX``, racks, supernodes, the cluster):
     samples/s of card values stored. ``persist_minute`` looks the layout up by
     cluster id, so the benchmark hands it the synthetic one.
2. **24 h queries** for one card and one rack (40 cards), p50 and p99 over
   ``--repeats``, of ``victoria.query_history`` and of the endpoint
   (``GET /api/telemetry/history/?…&limit=1500``, one page: the whole day), each
   against the database path for the same object in the same run
   (``MinuteSerializer`` over the ``TelemetryMinute`` rows, and the same endpoint
   with ``TWIN_VICTORIA_URL`` unset). The day is loaded into both first: the queried
   rack's 40 cards, every metric, every ``--step-s`` (VictoriaMetrics: the cards' and
   the rack's series; the database: 1,440 minutes of card and group rows). Only that
   rack has a day of history: a day of every card of a big cluster would be
   millions of series × 8,640 points; the rest of the cluster has the ``--steps``
   written above (its series exist, so the index is the full cluster's). Ratio:
   database p99 / VictoriaMetrics p99.
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
import urllib.parse
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

from benchmarks.stats import pct  # noqa: E402
from twin.core.collector import freeze_startup_objects  # noqa: E402
from twin.core.localnet import free_port, stop_process, wait_http  # noqa: E402
from twin.telemetry import victoria  # noqa: E402
from twin.telemetry.metrics import METRIC_KEYS, N_METRICS  # noqa: E402
from twin.telemetry.processing import minutes  # noqa: E402
from twin.telemetry.state import GroupIndex, Layout, redis_client  # noqa: E402

PER_RACK, PER_SERVER, PER_SN = 40, 8, 512
BASELINE_CARDS = 65_536
DAY_MIN = 24 * 60


def group(level: str, of: np.ndarray, static_w: float = 0.0) -> GroupIndex:
    """A ``GroupIndex`` for cards already sorted by group (as the layout orders them)."""
    ids, starts, counts = np.unique(of, return_index=True, return_counts=True)
    return GroupIndex(level=level, ids=ids.astype(np.int64), names=[str(i) for i in ids],
                      of_card=np.searchsorted(ids, of).astype(np.int32), perm=None,
                      starts=starts.astype(np.int64), cards=counts.astype(np.int32),
                      budget_w=np.full(len(ids), 40_000.0),
                      static_w=np.full(len(ids), static_w))


def synthetic_layout(cluster_id: int, n: int, version: str = "bench") -> Layout:
    k = np.arange(n, dtype=np.int64)
    card_ids = 10_000_000 + k
    return Layout(
        cluster_id=cluster_id, version=version, fingerprint=version, card_ids=card_ids,
        server_ids=k // PER_SERVER, slots=(k % PER_SERVER).astype(np.int64),
        tdp_w=np.full(n, 700, np.float32), idle_w=np.full(n, 90, np.float32),
        hbm_gib=np.full(n, 80, np.float32),
        groups={"cluster": group("cluster", np.full(n, cluster_id)),
                "supernode": group("supernode", 1_000 + k // PER_SN),
                "rack": group("rack", 100_000 + k // PER_RACK, static_w=7_540.0)},
        probe=(n, int(card_ids[-1])))


def readings(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.uniform(1, 100, (N_METRICS, n)).astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cards", type=int, default=8_192)
    ap.add_argument("--step-s", type=int, default=10, help="seconds between writes")
    ap.add_argument("--steps", type=int, default=5, help="write steps (and minutes) timed")
    ap.add_argument("--repeats", type=int, default=200, help="queries per percentile")
    args = ap.parse_args()
    binary = shutil.which("victoria-metrics")
    if binary is None:
        sys.exit("error: victoria-metrics is not installed (apt-get install victoria-metrics)")

    call_command("migrate", verbosity=0)
    from django.contrib.auth import get_user_model

    from twin.hardware.models import Cluster
    from twin.telemetry.api.serializers import MinuteSerializer
    from twin.telemetry.models import TelemetryMinute

    cluster, _ = Cluster.objects.get_or_create(name="history-bench")
    cid = cluster.pk
    TelemetryMinute.objects.filter(cluster_id=cid).delete()
    user_model = get_user_model()
    user_model.objects.filter(username="history-bench").delete()
    user = user_model.objects.create_superuser("history-bench", password=uuid.uuid4().hex)
    lay = synthetic_layout(cid, args.cards)
    minutes.layout = lambda _cid: lay  # persist_minute looks the layout up by id
    rng = np.random.default_rng(7)
    r = redis_client()

    tmp = tempfile.mkdtemp(prefix="vm-bench-")
    port = free_port()
    proc = subprocess.Popen([binary, f"-httpListenAddr=127.0.0.1:{port}",
                             f"-storageDataPath={tmp}", "-retentionPeriod=1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_http(f"http://127.0.0.1:{port}/health", proc)
        settings.TWIN_VICTORIA_URL = f"http://127.0.0.1:{port}"
        settings.TWIN_VICTORIA_TIMEOUT_S = 900.0
        run(args, lay, rng, r, MinuteSerializer, TelemetryMinute, user, proc.pid)
    finally:
        stop_process(proc)
        shutil.rmtree(tmp, ignore_errors=True)
        TelemetryMinute.objects.filter(cluster_id=cid).delete()
        user.delete()
        for key in r.scan_iter(match=f"{os.environ['TWIN_TELEMETRY_PREFIX']}:*"):
            r.delete(key)


def rss_mib(pid: int) -> float:
    """The resident memory of a process (VictoriaMetrics), from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def encoded(lay: Layout, values: np.ndarray, now: float) -> tuple[list[tuple[str, bytes]], int]:
    """What ``write_samples`` sends for one step, encoded but not sent: (path, body)
    per request, and the card samples."""
    tables = victoria._layout_tables(lay)
    extra = f"extra_label=cluster={lay.cluster_id}"
    out: list[tuple[str, bytes]] = []
    count = 0
    kinds = [("card", values, [victoria.SERIES + k for k in METRIC_KEYS])]
    kinds += [(lv, v, victoria.GROUP_NAMES)
              for lv, v in victoria.group_values(lay, values).items()]
    for level, matrix, names in kinds:
        parts, _ = victoria.csv_parts(matrix)
        for cols, rows in parts:
            fmt = victoria.csv_format(victoria._layout_tables(lay)[level].labels,
                                      [names[c] for c in cols])
            out.append((f"/api/v1/import/csv?{urllib.parse.urlencode({'format': fmt})}&{extra}",
                        victoria.csv_body(tables[level], matrix, cols, rows, now)))
            count += len(rows) * len(cols) if level == "card" else 0
    return out, count


def run(args: argparse.Namespace, lay: Layout, rng: np.random.Generator, r, serializer,
        minute_model, user, vm_pid: int) -> None:
    n, cid, every = lay.n, lay.cluster_id, args.step_s
    per_step = n * N_METRICS
    print(f"history benchmark: {n:,} cards × {N_METRICS} metrics every {every} s "
          f"({per_step:,} card samples a step = {per_step / every:,.0f} samples/s), "
          f"{args.steps} steps; machine: {os.cpu_count()} cores, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    # 1. Writes.
    now = time.time()
    base = now - 3_600
    t0 = time.perf_counter()
    victoria.write_samples(lay, readings(rng, n), base - every)
    first_s = time.perf_counter() - t0
    print(f"write  VictoriaMetrics: first step (creates {per_step:,} card series) "
          f"{first_s:,.1f} s, not counted below; VictoriaMetrics RSS {rss_mib(vm_pid):,.0f} MiB")
    vm_s: list[float] = []
    for step in range(args.steps):
        values = readings(rng, n)
        t0 = time.perf_counter()
        victoria.write_samples(lay, values, base + every * step)
        vm_s.append(time.perf_counter() - t0)
    worst = max(vm_s)
    verdict = "kept up" if worst < every else "NOT kept up"
    print(f"write  VictoriaMetrics: {statistics.mean(vm_s):,.2f} s a step (max {worst:,.2f} s "
          f"of {len(vm_s)}) for a {every} s step: {verdict}, margin {every / worst:.2f}x "
          f"(step / slowest write); {per_step / statistics.mean(vm_s):,.0f} samples/s; "
          f"RSS {rss_mib(vm_pid):,.0f} MiB; steps {', '.join(f'{x:.2f}' for x in vm_s)} s")

    # Where a step goes: encoding here, ingesting there; against the exposition text.
    values = readings(rng, n)
    stamp = base + every * args.steps
    t0 = time.perf_counter()
    requests, count = encoded(lay, values, stamp)
    enc_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for path, body in requests:
        victoria._post(path, body, 900.0)
    ingest_s = time.perf_counter() - t0
    size = sum(len(b) for _, b in requests)
    m = min(n, BASELINE_CARDS)
    sub = np.arange(m)
    t0 = time.perf_counter()
    text, text_count = victoria.series_text(lay, values, stamp + every, "card", sub)
    text_enc_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    victoria._post("/api/v1/import/prometheus", text, 900.0)
    text_ingest_s = time.perf_counter() - t0
    print(f"write  CSV (now):   encode {enc_s / count * 1e9:,.0f} ns a card sample "
          f"({enc_s:,.2f} s, {size / 1e6:,.0f} MB incl. group series), VictoriaMetrics ingest "
          f"{count / ingest_s:,.0f} card samples/s ({ingest_s:,.2f} s, one request at a time)")
    print(f"write  text (before, {m:,} cards): encode {text_enc_s / text_count * 1e9:,.0f} ns "
          f"a sample ({len(text) / 1e6:,.0f} MB), ingest {text_count / text_ingest_s:,.0f} "
          f"samples/s; ratio CSV / text: encode {text_enc_s / text_count / (enc_s / count):.2f}x"
          f" faster, ingest {count / ingest_s / (text_count / text_ingest_s):.2f}x faster")

    db_s: list[float] = []
    base_minute = int(now // 60) - 2 * DAY_MIN
    for step in range(min(args.steps, 3)):
        m_ = base_minute + step
        r.delete(minutes.keys.minute_acc(cid, lay.version, "last"))
        t0 = time.perf_counter()
        minutes.sample_minute(r, lay, readings(rng, n), m_ * 60 + 1.0)
        db_s.append(time.perf_counter() - t0)
    db_rate = per_step / statistics.mean(db_s[1:] or db_s)  # the first wrote nothing
    print(f"write  database path: {db_rate:>12,.0f} samples/s "
          f"({statistics.mean(db_s[1:] or db_s) * 1000:,.0f} ms a minute of {n:,} cards); "
          f"ratio VictoriaMetrics / database {per_step / statistics.mean(vm_s) / db_rate:.2f}x")
    if n > int(getattr(settings, "TELEMETRY_PERSIST_CARDS_MAX", 8_192)):
        print("       (the database path keeps no card rows past TELEMETRY_PERSIST_CARDS_MAX: "
              "its figure is racks, supernodes and the cluster only)")

    # 2. A day of one rack (40 cards) in both stores, then 24 h queries.
    query_benchmark(args, lay, r, serializer, minute_model, user, now)


def query_benchmark(args: argparse.Namespace, lay: Layout, r, serializer, minute_model,
                    user, now: float) -> None:
    from django.test import Client

    cid, every = lay.cluster_id, args.step_s
    rack_lay = synthetic_layout(cid, PER_RACK, "bench-rack")
    tables = victoria._layout_tables(rack_lay)
    end_minute = int(now // 60)
    first = end_minute - DAY_MIN
    per_min = 60 // every
    day = np.random.default_rng(11).uniform(1, 100, (DAY_MIN, N_METRICS, PER_RACK)).astype(
        np.float32)
    cols = list(range(N_METRICS))
    card_fmt = victoria.csv_format(tables["card"].labels,
                                   [victoria.SERIES + k for k in METRIC_KEYS])
    rack_fmt = victoria.csv_format(tables["rack"].labels, victoria.GROUP_NAMES)
    extra = f"extra_label=cluster={cid}"
    t0 = time.perf_counter()
    cards, racks = [], []
    for i in range(DAY_MIN):
        for j in range(per_min):
            at = (first + i) * 60 + j * every + 1.0
            values = day[i] + j  # a different value at every step of the minute
            cards.append(victoria.csv_body(tables["card"], values, cols,
                                           np.arange(PER_RACK), at))
            grouped = victoria.group_values(rack_lay, values)["rack"]
            racks.append(victoria.csv_body(tables["rack"], grouped,
                                           list(range(len(grouped))), np.arange(1), at))
        if i % 60 == 59:
            victoria._post(f"/api/v1/import/csv?{urllib.parse.urlencode({'format': card_fmt})}"
                           f"&{extra}", b"".join(cards), 900.0)
            victoria._post(f"/api/v1/import/csv?{urllib.parse.urlencode({'format': rack_fmt})}"
                           f"&{extra}", b"".join(racks), 900.0)
            cards, racks = [], []
    with urllib.request.urlopen(
            f"{settings.TWIN_VICTORIA_URL}/internal/force_flush", timeout=60) as resp:
        resp.read()
    print(f"load   a day of one rack (40 cards every {every} s, "
          f"{DAY_MIN * per_min * PER_RACK * N_METRICS:,} card samples) into VictoriaMetrics: "
          f"{time.perf_counter() - t0:.1f} s")
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
    # As in the web process (twin/asgi.py): what exists before the requests is frozen
    # out of the collector's sight. Here that includes this benchmark's own data (the
    # synthetic layouts, the loaded day), which a web process does not hold; left in
    # sight, a full collection walking it took 94–168 ms inside a request.
    freeze_startup_objects()
    client = Client()
    client.force_login(user)
    url = settings.TWIN_VICTORIA_URL
    window = {"cluster": cid, "since": since.isoformat().replace("+00:00", "Z"),
              "until": until.isoformat().replace("+00:00", "Z"), "limit": 1500}
    card = int(rack_lay.card_ids[5])
    rack = int(rack_lay.groups["rack"].ids[0])
    for level, object_id in (("card", card), ("rack", rack)):
        vm_t: list[float] = []
        db_t: list[float] = []
        vm_api: list[float] = []
        db_api: list[float] = []
        vm_rows = db_rows = 0
        params = {**window, "level": level, "object_id": object_id}
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
            settings.TWIN_VICTORIA_URL = url
            t0 = time.perf_counter()
            answer = client.get("/api/telemetry/history/", params)
            vm_api.append(time.perf_counter() - t0)
            assert answer.status_code == 200 and len(answer.json()["results"]) == vm_rows
            settings.TWIN_VICTORIA_URL = ""
            t0 = time.perf_counter()
            answer = client.get("/api/telemetry/history/", params)
            db_api.append(time.perf_counter() - t0)
            assert answer.status_code == 200 and len(answer.json()["results"]) == db_rows
            settings.TWIN_VICTORIA_URL = url
        for what, vm, db in (("query_history / serializer", vm_t, db_t),
                             ("endpoint (one page)", vm_api, db_api)):
            print(f"query  24 h of a {level}, {what}: VictoriaMetrics p50 "
                  f"{pct(vm, 50) * 1000:,.1f} ms p99 {pct(vm, 99) * 1000:,.1f} ms "
                  f"({vm_rows} rows); database p50 {pct(db, 50) * 1000:,.1f} ms p99 "
                  f"{pct(db, 99) * 1000:,.1f} ms ({db_rows} rows); ratio database / "
                  f"VictoriaMetrics p99 {pct(db, 99) / pct(vm, 99):.2f}x "
                  f"({args.repeats} queries)")


if __name__ == "__main__":
    main()
