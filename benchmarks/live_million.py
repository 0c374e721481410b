"""Benchmark: the million-card cluster live at 1 Hz — sharded ticks across worker processes.

Usage (SQLite is fine; the cluster is built once, ≈ 75 s, and kept as ``live-million``)::

    TWIN_SQLITE_PATH=var/million.sqlite3 REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python benchmarks/live_million.py
    # options: --cards 1048576 --chunk 65536 --clients 4 --workers 2 --web-workers 1
    #          --shard-cards 131072 --hz 1 --duration 40 --warmup 20 --ticks-only-duration 30
    #          --baseline-ticks 3 --apply-on-ingest --max-tick-hz 1 --web-nice 10 --json out.json

In one run:

1. **Baseline, in this process, nothing else running**: the whole state filled
   with one reading of every card, then the **unsharded tick**
   (``TELEMETRY_TICK_SHARD_CARDS = 0``: one process reads the 1M-card cluster,
   rollups, rules, health) timed ``--baseline-ticks`` times; then the **sharded
   round run inline** (the same shards one after the other in this process) —
   the CPU a round costs in total, so the per-process rate in cards/s.
2. **Ticks only**: the same worker processes, no ingest — this process keeps every
   card fresh (one SET of the ``seen`` blob a second) and asks for a tick every
   50 ms, so the workers run nothing but sharded rounds, as fast as the tick gate
   (≤ 2 Hz; a round starts no sooner than the last one's time after it) lets them.
3. **Live**: real subprocesses — ``uvicorn`` (``--web-workers`` processes) and one
   ``celery worker`` with ``--workers`` prefork processes (drains and shard tasks
   share them) — with ``TWIN_TICK_SHARD_CARDS=--shard-cards``. ``--clients``
   agent threads post every card once a second in supernode-range batches of
   ``--chunk`` cards (columnar msgpack, fresh ``ts`` each second). After
   ``--warmup`` s (each worker process first builds the 1M-card layout, ≈ 5 s of CPU),
   for ``--duration`` s: every round's time (round start → ``telemetry.tick``
   published, from ``keys.tick_stats``), ticks per second achieved, card-samples
   accepted per second, the stream backlog, the CPU of each process, Redis and the
   machine, and the alerts
   opened and closed (silence while ingest lags). The phase starts from cards that
   have not reported yet (the ticks-only phase's made-up freshness is dropped).

``--apply-on-ingest`` has the web process write the batches into the state
(``TWIN_TELEMETRY_APPLY_ON_INGEST=1``, no stream), ``--max-tick-hz`` caps the rounds,
``--web-nice 10`` runs uvicorn at a lower CPU priority than the workers (the rounds are
bound by their latency, the ingest only by its throughput: on shared cores the
rounds should get a core first; ``docker-compose.million.yml`` does the same with
``cpu_shares``).

Target (issue 15 item 6): 1 Hz with the cluster tick ≤ 500 ms (every round: the p99),
the ingest keeping up.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import seedcluster  # noqa: E402
from benchmarks.seedcluster import ensure_cluster, setup  # noqa: E402
from benchmarks.stats import pct  # noqa: E402

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.settings")
os.environ.setdefault("TWIN_ALLOW_INSECURE_KEY", "1")
PREFIX = f"twbench{uuid.uuid4().hex[:6]}"
os.environ["TWIN_TELEMETRY_PREFIX"] = PREFIX
CLUSTER = "live-million"


def readings(cluster_id: int, chunk: int) -> tuple[Any, list[tuple[int, dict[str, bytes]]]]:
    """One simulated reading of every card, as float32 columns per ``chunk`` cards."""
    import numpy as np

    from twin.telemetry import state
    from twin.telemetry.metrics import METRICS
    from twin.telemetry.simulator import Simulator

    lay = state.layout(cluster_id)
    sim = Simulator(lay.tdp_w, lay.idle_w, lay.hbm_gib, lay.server_ids, fault_rate=0)
    values, _ = sim.step(1.0)
    values = np.where(np.isfinite(values), values, 0).astype("<f4")
    out = []
    for start in range(0, lay.n, chunk):
        end = min(start + chunk, lay.n)
        out.append((start, {m.key: values[m.index, start:end].tobytes() for m in METRICS}))
    return lay, out


def fill(cluster_id: int, lay: Any, chunks: list[tuple[int, dict[str, bytes]]]) -> None:
    """Apply one reading of every card in this process (enqueue + drain, no Celery)."""
    import numpy as np

    from twin.telemetry import processing
    from twin.telemetry.enqueue import drainers, enqueue
    from twin.telemetry.ingest import Batch
    from twin.telemetry.metrics import METRICS

    now = time.time()
    for start, cols in chunks:
        cards = len(next(iter(cols.values()))) // 4
        batch = Batch(cluster_id=cluster_id, version=lay.version, ts=now,
                      metric_idx=np.array([m.index for m in METRICS], np.uint8),
                      values=np.stack([np.frombuffer(cols[m.key], "<f4") for m in METRICS]),
                      ordinals=np.arange(start, start + cards, dtype=np.int32))
        enqueue(batch, agent_id=None, seq=None)
        for slot in range(drainers()):
            processing.drain(slot, max_seconds=60)


def baseline(cluster_id: int, lay: Any, chunks: list[tuple[int, dict[str, bytes]]],
             ticks: int, shard_cards: int) -> dict[str, Any]:
    """Whole-cluster ticks and inline sharded rounds, in this process (CPU time too)."""
    from django.conf import settings

    from twin.telemetry import keys, processing, state
    from twin.telemetry.processing import shards

    settings.TELEMETRY_AUTO_DRAIN = False
    r = state.redis_client()
    out: dict[str, Any] = {"whole_s": [], "whole_cpu_s": [], "round_s": [], "round_cpu_s": []}
    for mode in ("whole", "round"):
        settings.TELEMETRY_TICK_SHARD_CARDS = 0 if mode == "whole" else shard_cards
        for _ in range(ticks + 1):  # the first of each kind warms caches (layout, plan)
            r.set(keys.tick_gate(cluster_id), 1, px=600_000)  # the drains do not tick
            fill(cluster_id, lay, chunks)
            r.delete(keys.tick_gate(cluster_id))
            # Both kinds take a minute-history sample (live: one tick in 5 does).
            r.delete(keys.minute_acc(cluster_id, lay.version, "last"))
            t, c = time.perf_counter(), time.process_time()
            assert processing.tick(cluster_id, force=True) is not None
            out[f"{mode}_s"].append(time.perf_counter() - t)
            out[f"{mode}_cpu_s"].append(time.process_time() - c)
        for k in (f"{mode}_s", f"{mode}_cpu_s"):
            out[k] = out[k][1:]
    out["shards"] = len(shards.plan(lay))
    settings.TELEMETRY_AUTO_DRAIN = True
    return out


def start_services(queue: str, workers: int, web_workers: int, shard_cards: int,
                   apply_on_ingest: bool, max_tick_hz: float,
                   web_nice: int) -> tuple[str, list[subprocess.Popen]]:
    return seedcluster.start_services(
        queue, workers, web_workers,
        {"TWIN_TELEMETRY_PREFIX": PREFIX, "TWIN_TICK_SHARD_CARDS": str(shard_cards),
         "TWIN_TELEMETRY_APPLY_ON_INGEST": "1" if apply_on_ingest else "0",
         "TWIN_TELEMETRY_MAX_TICK_HZ": repr(max_tick_hz)},
        log_prefix="million-", web_nice=web_nice)


def cpu_seconds(procs: list[Any]) -> dict[int, float]:
    """CPU seconds (user + system) of each process and its children, by pid."""
    out: dict[int, float] = {}
    for p in procs:
        for q in [p, *p.children(recursive=True)]:
            try:
                t = q.cpu_times()
                out[q.pid] = t.user + t.system
            except Exception:  # noqa: BLE001 - a process that ended
                continue
    return out


def cpu_around(r: Any) -> dict[str, float]:
    """CPU seconds so far of Redis (INFO cpu), this process, and the whole machine."""
    import psutil

    info = r.info("cpu")
    t = psutil.cpu_times()
    mine = psutil.Process().cpu_times()
    return {"redis": float(info["used_cpu_user"]) + float(info["used_cpu_sys"]),
            "benchmark": mine.user + mine.system,
            "machine": t.user + t.nice + t.system + t.irq + t.softirq + t.steal}


def live(base: str, cluster_id: int, lay: Any, chunks: list[tuple[int, dict[str, bytes]]],
         tokens: list[str], warmup: float, duration: float,
         procs: dict[str, Any], ticks_only: bool = False, hz: float = 1.0) -> dict[str, Any]:
    """Rounds, ingest and CPU while agents post every card each second — or, with
    ``ticks_only``, while this process only keeps every card fresh (one SET of the
    ``seen`` blob a second) and asks for a tick every 50 ms, so the workers do
    nothing but sharded rounds."""
    import msgpack
    import numpy as np
    from django.db.models import Count
    from django.utils import timezone as dj_timezone

    from twin.telemetry import keys, processing, state, tasks
    from twin.telemetry.client import AgentClient
    from twin.telemetry.models import Alert

    r = state.redis_client()
    stop = threading.Event()
    measuring = threading.Event()
    mine = [[c for k, c in enumerate(chunks) if k % len(tokens) == t] for t in range(len(tokens))]
    results: list[dict[str, Any]] = []

    def agent(t: int) -> None:
        client = AgentClient(base, tokens[t], timeout=120)
        seq, accepted, busy, errors, late, lat = 0, 0, 0, 0, 0, []
        next_at = time.time()
        while not stop.is_set():
            wait = next_at - time.time()
            if wait > 0:
                time.sleep(wait)
            else:
                late += 1
            next_at += 1.0 / hz
            for start, cols in mine[t]:
                seq += 1
                cards = len(next(iter(cols.values()))) // 4
                body = msgpack.packb({"seq": seq, "ts": time.time(), "cards": {
                    "range": [start, cards], "layout": lay.version}, "columns": cols})
                while True:
                    t0 = time.perf_counter()
                    answer = client.post_raw_batch(cluster_id, body)
                    if measuring.is_set():
                        lat.append(time.perf_counter() - t0)
                    if answer.status != 503 or stop.is_set():
                        break
                    busy += 1
                    time.sleep(0.05)
                if measuring.is_set():
                    if answer.status == 202:
                        accepted += int(answer.body["accepted"])
                    else:
                        errors += 1
        client.close()
        results.append({"accepted": accepted, "busy": busy, "errors": errors, "late": late,
                        "lat": lat})

    rounds: list[tuple[float, float, int]] = []  # (when, round seconds, shards)
    shard_costs: list[tuple[float, float, float]] = []  # per round: cpu, wall, slowest wall
    # per round: second of the minute seen, round, shards' CPU, wall summed, slowest (ms)
    detail: list[tuple[float, int, int, int, int]] = []
    backlog: list[tuple[int, int]] = []

    def poll() -> None:
        stats = keys.tick_stats(cluster_id)
        last_count = None
        next_backlog = 0.0
        while not stop.is_set():
            count, cost, shards, s_cpu, s_wall, s_max = r.hmget(
                stats, "count", "last", "shards", "last_shard_cpu", "last_shard_wall",
                "last_shard_wall_max")
            if count is not None:
                c = int(count)
                if last_count is not None and c != last_count and measuring.is_set():
                    rounds.append((time.time(), float(cost), int(shards or 0)))
                    if s_cpu:
                        shard_costs.append((float(s_cpu), float(s_wall), float(s_max)))
                        detail.append((round(time.time() % 60, 1), round(1000 * float(cost)),
                                       round(1000 * float(s_cpu)), round(1000 * float(s_wall)),
                                       round(1000 * float(s_max))))
                    if c - last_count > 1:  # (only the last of several is seen)
                        rounds.extend([(time.time(), float("nan"), 0)] * (c - last_count - 1))
                last_count = c
            if measuring.is_set() and time.monotonic() >= next_backlog:
                info = r.xinfo_groups(keys.stream())
                lag = sum(int(g.get("lag") or 0) for g in info)
                pending = sum(int(g.get("pending") or 0) for g in info)
                backlog.append((lag, pending))
                next_backlog = time.monotonic() + 0.5
            time.sleep(0.01)

    def ticker() -> None:
        seen_key = keys.seen(cluster_id, lay.version)
        fresh_at = 0.0
        while not stop.is_set():
            if time.time() >= fresh_at:
                r.set(seen_key, np.full(lay.n, time.time(), "<f8").tobytes())
                fresh_at = time.time() + 1.0
            processing.tick(cluster_id, follow_ups=tasks.FOLLOW_UPS)
            time.sleep(0.05)
        results.append({"accepted": 0, "busy": 0, "errors": 0, "late": 0, "lat": []})

    if not ticks_only:
        # Start from a twin no card has reported to yet: the ticks-only phase's
        # made-up freshness would otherwise end in a burst of silent racks.
        r.set(keys.seen(cluster_id, lay.version), np.full(lay.n, np.nan, "<f8").tobytes())
    threads = ([threading.Thread(target=ticker)] if ticks_only else
               [threading.Thread(target=agent, args=(t,)) for t in range(len(tokens))])
    poller = threading.Thread(target=poll)
    for th in (*threads, poller):
        th.start()
    time.sleep(warmup)
    cpu0 = {name: cpu_seconds(ps) for name, ps in procs.items()}
    around0 = cpu_around(r)
    seq0 = state.frame_seq(cluster_id)
    alerts_since = dj_timezone.now()
    measuring.set()
    t_wall0 = time.time()
    t0 = time.perf_counter()
    time.sleep(duration)
    measuring.clear()
    elapsed = time.perf_counter() - t0
    cpu1 = {name: cpu_seconds(ps) for name, ps in procs.items()}
    around = {k: (v - around0[k]) / elapsed for k, v in cpu_around(r).items()}
    stop.set()
    for th in (*threads, poller):
        th.join()
    t_stop = time.perf_counter()
    while True:
        length = r.xlen(keys.stream())
        pending = r.xpending(keys.stream(), processing.GROUP)["pending"]
        if (length == 0 and pending == 0) or time.perf_counter() - t_stop > 120:
            break
        time.sleep(0.05)
    tail = time.perf_counter() - t_stop
    # Alert churn while measuring (racks going silent and back when ingest lags).
    opened = dict(Alert.objects.filter(cluster_id=cluster_id, started__gte=alerts_since)
                  .values_list("rule").annotate(n=Count("id")).order_by())
    closed = Alert.objects.filter(cluster_id=cluster_id, ended__gte=alerts_since).count()
    cpu = {name: {pid: cpu1[name].get(pid, 0.0) - cpu0[name].get(pid, 0.0)
                  for pid in cpu1[name]} for name in procs}
    lat = [v for x in results for v in x["lat"]]
    times = [c for _, c, _ in rounds if c == c]
    return {
        "elapsed_s": elapsed, "rounds": len(rounds), "rounds_timed": len(times),
        "ticks_per_s": len(rounds) / elapsed, "round_p50_ms": 1000 * pct(times, 50),
        "round_p99_ms": 1000 * pct(times, 99), "round_max_ms": 1000 * max(times, default=0),
        "round_p90_ms": 1000 * pct(times, 90),
        # (seconds into the measured window, round ms): when the slow ones came
        "round_times": [(round(w - t_wall0, 2), round(1000 * c)) for w, c, _ in rounds
                        if c == c],
        # (second of the minute, round ms, shards' CPU ms, wall summed, slowest shard)
        "round_detail": detail,
        "shards": max((s for *_, s in rounds), default=0),
        "shard_cpu_s": statistics.median([c for c, _, _ in shard_costs]) if shard_costs
        else float("nan"),
        "shard_wall_s": statistics.median([w for _, w, _ in shard_costs]) if shard_costs
        else float("nan"),
        "shard_slowest_s": statistics.median([m for *_, m in shard_costs]) if shard_costs
        else float("nan"),
        "seq_advanced": state.frame_seq(cluster_id) - seq0 > 0,
        "accepted": sum(x["accepted"] for x in results),
        "accepted_per_s": sum(x["accepted"] for x in results) / elapsed,
        "busy": sum(x["busy"] for x in results), "errors": sum(x["errors"] for x in results),
        "late_seconds": sum(x["late"] for x in results),
        "post_p50_ms": 1000 * pct(lat, 50), "post_p99_ms": 1000 * pct(lat, 99),
        "backlog_max_entries": max((b for b, _ in backlog), default=0),
        "backlog_mean_entries": statistics.fmean([b for b, _ in backlog]) if backlog else 0,
        "drain_tail_s": tail,
        "alerts_opened": opened, "alerts_closed": closed,
        "cpu_cores": {name: sum(v.values()) / elapsed for name, v in cpu.items()},
        # Redis, this process (the agents or the ticker, and the poller) and the whole
        # machine (all cores busy, by /proc/stat), in cores over the measured window.
        "cpu_around": around,
        "cpu_by_process": {name: sorted((round(s / elapsed, 2) for s in v.values() if s > 0.05),
                                        reverse=True) for name, v in cpu.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cards", type=int, default=1_048_576)
    parser.add_argument("--chunk", type=int, default=65_536, help="cards per POST")
    parser.add_argument("--clients", type=int, default=4, help="agent threads (tokens)")
    parser.add_argument("--workers", type=int, default=2, help="Celery worker processes")
    parser.add_argument("--web-workers", type=int, default=1, help="uvicorn processes")
    parser.add_argument("--shard-cards", type=int, default=131_072)
    parser.add_argument("--hz", type=float, default=1.0, help="readings per card per second")
    parser.add_argument("--max-tick-hz", type=float, default=2.0,
                        help="TWIN_TELEMETRY_MAX_TICK_HZ of the services (rounds a second, "
                             "at most)")
    parser.add_argument("--apply-on-ingest", action="store_true",
                        help="TWIN_TELEMETRY_APPLY_ON_INGEST=1: the web process writes each "
                             "batch into the state (no stream, no drains)")
    parser.add_argument("--web-nice", type=int, default=0,
                        help="nice value of the uvicorn processes: with 10 the workers' "
                             "rounds get the cores first when both want them (what "
                             "docker-compose.million.yml's cpu_shares does)")
    parser.add_argument("--duration", type=float, default=40.0)
    parser.add_argument("--warmup", type=float, default=15.0)
    parser.add_argument("--baseline-ticks", type=int, default=3)
    parser.add_argument("--ticks-only-duration", type=float, default=20.0,
                        help="seconds of rounds with no ingest (cards kept fresh directly)")
    parser.add_argument("--json", type=str, default="")
    args = parser.parse_args()

    import psutil

    setup()
    from twin.telemetry import state
    from twin.telemetry.models import TelemetryAgent

    cluster = ensure_cluster(CLUSTER, args.cards)
    cid = cluster.pk
    queue = f"twbench-{uuid.uuid4().hex[:6]}"
    procs: list[subprocess.Popen] = []
    try:
        lay, chunks = readings(cid, args.chunk)
        print(f"{lay.n:,} cards, {len(chunks)} batches of ≤ {args.chunk:,} cards "
              f"({len(chunks[0][1]) * 4 * args.chunk / 1e6:.1f} MB) per second", flush=True)
        print("baseline (in this process) …", flush=True)
        base_fig = baseline(cid, lay, chunks, args.baseline_ticks, args.shard_cards)
        whole = statistics.median(base_fig["whole_s"])
        whole_cpu = statistics.median(base_fig["whole_cpu_s"])
        rnd = statistics.median(base_fig["round_s"])
        rnd_cpu = statistics.median(base_fig["round_cpu_s"])
        tokens = [TelemetryAgent.issue(cluster, f"million-{k}-{PREFIX}")[1]
                  for k in range(args.clients)]
        base_url, procs = start_services(queue, args.workers, args.web_workers,
                                         args.shard_cards, args.apply_on_ingest,
                                         args.max_tick_hz, args.web_nice)
        watched = {"web": [psutil.Process(procs[0].pid)],
                   "worker": [psutil.Process(procs[1].pid)]}
        print("ticks only …", flush=True)
        only = live(base_url, cid, lay, chunks, tokens, args.warmup, args.ticks_only_duration,
                    watched, ticks_only=True)
        print("live …", flush=True)
        fig = live(base_url, cid, lay, chunks, tokens, args.warmup, args.duration, watched,
                   hz=args.hz)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        r = state.redis_client()
        batch = []
        for key in r.scan_iter(match=f"{PREFIX}:*", count=1000):
            batch.append(key)
            if len(batch) >= 500:
                r.unlink(*batch)
                batch = []
        if batch:
            r.unlink(*batch)

    load = os.getloadavg()
    n = lay.n
    print()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} "
          f"{load[2]:.2f} (1/5/15 min, after the run)")
    print(f"shards: {base_fig['shards']} of ≤ {args.shard_cards:,} cards; "
          f"{args.workers} worker processes, {args.web_workers} web process(es), "
          f"{args.clients} agent threads; batches "
          f"{'applied by the web process' if args.apply_on_ingest else 'through the stream'}"
          f"; ≤ {args.max_tick_hz:g} rounds a second; web processes at nice {args.web_nice}")
    print()
    print("in this process, nothing else running (median of "
          f"{args.baseline_ticks}):")
    print(f"  unsharded tick (baseline)    {1000 * whole:8.0f} ms wall, "
          f"{1000 * whole_cpu:6.0f} ms CPU  → {n / whole_cpu:,.0f} cards/s per process")
    print(f"  sharded round, run inline    {1000 * rnd:8.0f} ms wall, "
          f"{1000 * rnd_cpu:6.0f} ms CPU  → {n / rnd_cpu:,.0f} cards/s per process "
          f"(ratio {rnd_cpu / whole_cpu:.2f} × the unsharded CPU)")
    print()
    print(f"ticks only ({args.workers} worker processes, no ingest; cards kept fresh), "
          f"{only['elapsed_s']:.0f} s measured after {args.warmup:g} s of warm-up:")
    print(f"  cluster tick (round start → publish)  p50 {only['round_p50_ms']:.0f} ms, "
          f"p99 {only['round_p99_ms']:.0f} ms, max {only['round_max_ms']:.0f} ms "
          f"({only['rounds_timed']} timed of {only['rounds']})")
    print(f"  ratio p50 round / unsharded tick      {only['round_p50_ms'] / 1000 / whole:.2f}")
    print(f"  ticks per second achieved             {only['ticks_per_s']:.2f}")
    print(f"  shards of a round, in the workers     CPU {only['shard_cpu_s']:.2f} s, wall "
          f"{only['shard_wall_s']:.2f} s summed (slowest {only['shard_slowest_s']:.2f} s) → "
          f"{n / only['shard_cpu_s']:,.0f} cards per worker CPU-second (median round)")
    print(f"  worker processes CPU                  {only['cpu_cores']['worker']:.2f} cores "
          f"(per process: {only['cpu_by_process']['worker']}) → "
          f"{n * only['ticks_per_s'] / max(only['cpu_cores']['worker'], 1e-9):,.0f} "
          f"cards ticked per worker CPU-second")
    print()
    print(f"live, {fig['elapsed_s']:.0f} s measured after {args.warmup:g} s of warm-up:")
    print(f"  cluster tick (round start → publish)  p50 {fig['round_p50_ms']:.0f} ms, "
          f"p90 {fig['round_p90_ms']:.0f} ms, p99 {fig['round_p99_ms']:.0f} ms, "
          f"max {fig['round_max_ms']:.0f} ms "
          f"({fig['rounds_timed']} timed of {fig['rounds']})")
    print(f"  ratio p50 live round / unsharded tick  {fig['round_p50_ms'] / 1000 / whole:.2f}")
    print(f"  ticks per second achieved             {fig['ticks_per_s']:.2f}")
    print(f"  shards of a round, in the workers     CPU {fig['shard_cpu_s']:.2f} s, wall "
          f"{fig['shard_wall_s']:.2f} s summed (slowest {fig['shard_slowest_s']:.2f} s)")
    print(f"  card-samples accepted                 {fig['accepted_per_s']:,.0f}/s "
          f"(offered {n * args.hz:,.0f}/s; {fig['busy']} × 503, {fig['errors']} errors, "
          f"{fig['late_seconds']} late agent seconds)")
    print(f"  per web process                       "
          f"{fig['accepted_per_s'] / args.web_workers:,.0f} card-samples/s; CPU "
          f"{fig['cpu_cores']['web']:.2f} cores → "
          f"{fig['accepted_per_s'] / max(fig['cpu_cores']['web'], 1e-9):,.0f} "
          f"card-samples per web CPU-second")
    print(f"  worker processes CPU                  {fig['cpu_cores']['worker']:.2f} cores "
          f"(per process: {fig['cpu_by_process']['worker']})")
    around = fig["cpu_around"]
    print(f"  Redis / agents (this process) CPU     {around['redis']:.2f} / "
          f"{around['benchmark']:.2f} cores; the machine {around['machine']:.2f} of "
          f"{os.cpu_count()} cores busy")
    print(f"  POST p50 / p99                        {fig['post_p50_ms']:.0f} / "
          f"{fig['post_p99_ms']:.0f} ms")
    print(f"  stream backlog (entries not read)     max {fig['backlog_max_entries']}, mean "
          f"{fig['backlog_mean_entries']:.1f}; drain tail after the load "
          f"{fig['drain_tail_s']:.1f} s")
    opened = ", ".join(f"{n:,} {rule}" for rule, n in sorted(fig["alerts_opened"].items()))
    print(f"  alerts opened / closed while measuring {opened or 'none'} / "
          f"{fig['alerts_closed']:,}")
    met = (args.hz >= 1 and fig["ticks_per_s"] >= 0.95 and fig["round_p99_ms"] <= 500
           and fig["accepted_per_s"] >= 0.95 * n * args.hz)  # and the ingest keeps up
    print(f"  target 1 Hz with tick ≤ 500 ms        {'met' if met else 'NOT met'}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "baseline": base_fig,
                                               "ticks_only": only, "live": fig,
                                               "load": load}, indent=2))


if __name__ == "__main__":
    main()
