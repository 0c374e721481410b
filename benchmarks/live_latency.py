"""Benchmark: ingest-to-websocket latency, 65,536 cards at 1 Hz, 50 browsers.

Usage (SQLite + embedded Redis, or PostgreSQL + Redis from the environment)::

    .venv/bin/python benchmarks/live_latency.py                  # 60 s, the issue's load
    .venv/bin/python benchmarks/live_latency.py --no-deflate     # uvicorn without compression
    .venv/bin/python benchmarks/live_latency.py --duration 120 --json out.json
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/twin_bench \\
    REDIS_URL=redis://127.0.0.1:6379/0 .venv/bin/python benchmarks/live_latency.py

The whole path, with real processes (nothing in-process or simulated between
the agent's POST and the browser's socket):

    agent ──HTTP POST (columnar msgpack)──▶ uvicorn (twin.asgi) ──XADD──▶ Redis stream
      ──▶ celery worker (drain, apply, tick: rollups, health, alerts)
      ──group_send telemetry.tick──▶ uvicorn consumers ──frame──▶ 50 websocket clients

* **Cluster**: ``seed-512`` × 128 supernodes = 65,536 H100 cards in 1,664
  racks (built once into the benchmark database — SQLite ``var/live-bench.sqlite3``
  unless ``DATABASE_URL`` is set — and reused by later runs).
* **Agent** (own process): every second, one columnar batch of all 65,536
  cards (26 metrics as little-endian float32 columns, ≈ 6.8 MB; the simulated
  agent's default) from ``twin.telemetry.simulator`` — realistic correlated
  values with its default fault injection, so alerts open and close as they
  would. ``--chunk`` splits each second's cards over several POSTs (latency
  then runs from the first POST of the second).
* **Clients** (own process, asyncio + ``websockets``): 50 browsers, each
  logged in through the real ``/login/`` form, each following three views as
  a dashboard does: the cluster floor map of ``power_w`` (1,664 rack values),
  a supernode's 512 cards of ``gpu_util`` (50 different supernodes), and the
  cluster view of the *marker* metric below.
* **Server**: one uvicorn process, one Celery worker (``--concurrency 2``) and
  Celery beat, as ``scripts/demo`` runs them, on a private queue, telemetry key
  prefix and channel prefix, so a running demo does not interfere. uvicorn
  negotiates permessage-deflate as browsers ask for it; ``--no-deflate`` turns
  it off (``--ws-per-message-deflate false``).

How latency is measured: the agent writes the start time of each second's
send (seconds since the run started) into one metric of every card it sends,
``allreduce_latency_us`` (a metric no health rule reads, aggregated per rack
as the maximum, so a rack's value *is* the newest batch's marker once that
batch is in the state — a mean would lag while a card that went silent still
counts as fresh, up to the 5 s stale limit). For each second and each client,
the latency is the time from the start of the POST to the arrival of the first
frame in which every rack shows that second's marker (or a newer one). So it
includes the HTTP request, the queue, the worker, the tick, the channel layer,
the consumer's frame build and the websocket write — and any wait the ≤ 2 Hz
limits impose. It is split in three at the tick that published the batch
(the frame's ``ts`` is the tick's start, and a raw channel in the clients'
process joins the cluster's group to time the tick event): POST start → tick
start, tick start → tick event, tick event → frame at the client.

The first ``--warmup`` seconds (default 15) are not measured: when an agent
starts, every card's health goes from unknown to ok and the workers sync that
to the database over the first ticks (some ticks then take ~0.5 s).

Baseline, same run: a raw channel-layer round trip — ``group_send`` from a
sync thread through the same Celery→Channels bridge the worker uses, to 50
channels received in the clients' event loop — measured idle (before the
agent starts) and under load (throughout the run).

Target: p99 < 500 ms. Exit status 0 only when it is met and no
second went missing.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import secrets
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.cookiejar import CookieJar
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.stats import pct  # noqa: E402
from twin.core.localnet import (  # noqa: E402
    free_port,
    stop_process,
    wait_celery,
    wait_http,
    worker_queues,
)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.settings")
os.environ.setdefault("TWIN_ALLOW_INSECURE_KEY", "1")

MARKER = "allreduce_latency_us"
TARGET_P99_MS = 500.0
BENCH_USER = "live-bench"


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

def summary_ms(values: list[float]) -> dict[str, float]:
    ms = [v * 1000.0 for v in values]
    if not ms:
        return {"n": 0}
    return {"n": len(ms), "p50": round(pct(ms, 50), 1), "p90": round(pct(ms, 90), 1),
            "p99": round(pct(ms, 99), 1), "max": round(max(ms), 1),
            "mean": round(statistics.fmean(ms), 1)}


def login(base: str, username: str, password: str) -> str:
    """The real login form: GET for the CSRF token, POST; returns the session id."""
    jar = CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with opener.open(f"{base}/login/", timeout=30) as response:
        html = response.read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    if not token:
        raise RuntimeError("the login page has no CSRF token")
    body = urllib.parse.urlencode({"username": username, "password": password,
                                   "csrfmiddlewaretoken": token.group(1), "next": "/login/"})
    request = urllib.request.Request(f"{base}/login/", data=body.encode(),
                                     headers={"Referer": f"{base}/login/"})
    try:
        opener.open(request, timeout=30).close()
    except urllib.error.HTTPError as exc:
        if exc.code >= 500 and exc.code != 503:
            raise
    cookies = {c.name: c.value for c in jar}
    if "sessionid" not in cookies:
        raise RuntimeError(f"login as {username} failed")
    return cookies["sessionid"]


def setup_django() -> None:
    import django

    django.setup()


# --------------------------------------------------------------------------
# role: agent
# --------------------------------------------------------------------------

def run_agent(args: argparse.Namespace) -> None:
    """POST one columnar batch of every card per 1/hz s; print the send log (and the
    CPU time used) as JSON."""
    setup_django()
    import numpy as np

    from twin.hardware.models import Card
    from twin.telemetry.client import AgentClient
    from twin.telemetry.metrics import METRIC_INDEX, METRICS
    from twin.telemetry.simulator import Simulator

    client = AgentClient(args.url, args.token)
    layout = client.layout(args.cluster).body
    card_ids = np.array(layout["card_ids"], dtype=np.int64)
    rows = dict((r[0], r[1:]) for r in Card.objects.filter(
        supernode__cluster_id=args.cluster).values_list(
        "id", "accelerator__tdp_w", "accelerator__idle_w", "accelerator__hbm_gib",
        "server_id").iterator(chunk_size=20000))
    meta = np.array([rows[int(c)] for c in card_ids], dtype=np.float64)
    sim = Simulator(meta[:, 0], meta[:, 1], meta[:, 2], meta[:, 3].astype(np.int64),
                    seed=7)
    marker = METRIC_INDEX[MARKER]
    n = len(card_ids)
    chunk = args.chunk or n
    period = 1.0 / args.hz
    log: list[dict[str, Any]] = []
    seq = 0
    stop = {"flag": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(flag=True))
    next_at = time.monotonic()
    deadline = time.monotonic() + args.duration
    while time.monotonic() < deadline and not stop["flag"]:
        values, _ = sim.step(period)
        # One marker per interval: the interval's samples are "in" when every
        # rack shows it, whatever the number of POSTs that carried them.
        interval_start = time.time()
        for start in range(0, n, chunk):
            end = min(start + chunk, n)
            seq += 1
            sent = time.time()
            block = values[:, start:end].astype("<f4")
            mark = block[marker]
            block[marker] = np.where(np.isfinite(mark), np.float32(interval_start - args.t0),
                                     np.nan)
            doc = {"seq": seq, "ts": sent,
                   "cards": {"range": [start, end - start], "layout": layout["layout"]},
                   "columns": {m.key: block[m.index].tobytes() for m in METRICS
                               if np.isfinite(block[m.index]).any()}}
            answer = client.send_with_retry(lambda doc=doc: client.post_batch(args.cluster, doc))
            log.append({"seq": seq, "sent": sent, "interval": interval_start,
                        "marker": round(interval_start - args.t0, 6),
                        "start": start, "end": end, "status": answer.status,
                        "post_s": time.time() - sent,
                        "accepted": answer.body.get("accepted")})
        next_at += period
        pause = next_at - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        else:
            next_at = time.monotonic()
    client.close()
    json.dump({"log": log, "cpu_s": time.process_time()}, sys.stdout)


# --------------------------------------------------------------------------
# role: clients
# --------------------------------------------------------------------------

def run_clients(args: argparse.Namespace) -> None:
    """50 websocket clients + the channel-layer baseline; results to --out as JSON."""
    setup_django()
    asyncio.run(_clients(args))


async def _clients(args: argparse.Namespace) -> None:
    import websockets
    from channels.layers import get_channel_layer

    from twin.telemetry import bridge

    base = args.url
    ws_url = base.replace("http://", "ws://") + f"/ws/clusters/{args.cluster}/"
    supernodes = [int(s) for s in args.supernodes.split(",")]
    records: list[list[Any]] = []  # marker frames: client, t, seq, min, max, nulls, tick ts
    counts = {"frames": 0, "bytes": 0, "snapshots": 0, "alerts": 0, "errors": 0}
    per_view_times: dict[tuple[int, str], list[float]] = {}
    sessions = [await asyncio.to_thread(login, base, BENCH_USER, args.password)
                for _ in range(args.clients)]

    async def client(i: int, ready: asyncio.Event, stop: asyncio.Event) -> None:
        async with websockets.connect(ws_url, origin=base, max_size=2 ** 26,
                                      additional_headers={"Cookie":
                                                          f"sessionid={sessions[i]}"}) as ws:
            subs = [{"view": "cluster", "metric": "power_w"},
                    {"view": "supernode", "id": supernodes[i % len(supernodes)],
                     "metric": "gpu_util"},
                    {"view": "cluster", "metric": MARKER}]
            for sub in subs:
                await ws.send(json.dumps({"action": "subscribe", **sub}))
            got = 0
            while got < len(subs):
                message = json.loads(await ws.recv())
                got += message["type"] == "snapshot"
            ready.set()
            while not stop.is_set():
                try:
                    text = await asyncio.wait_for(ws.recv(), 0.5)
                except TimeoutError:
                    continue
                now = time.time()
                counts["bytes"] += len(text)
                # Parse only what is measured: 50 clients share this one process, and
                # decoding every frame would delay the next client's (a browser has
                # one socket and a core of its own).
                head = text[:160]
                kind = head[9:head.index('"', 9)]
                if kind in ("frame", "snapshot"):
                    counts["frames" if kind == "frame" else "snapshots"] += 1
                    view = head[head.index('"view"'):head.index(',"seq"')]  # view, id, metric
                    per_view_times.setdefault((i, view), []).append(now)
                    if f'"metric":"{MARKER}"' in head:
                        message = json.loads(text)
                        vals = [v for v in message["values"] if v is not None]
                        records.append([i, now, message["seq"], min(vals) if vals else None,
                                        max(vals) if vals else None,
                                        len(message["values"]) - len(vals), message["ts"]])
                elif kind == "alerts":
                    counts["alerts"] += text.count('"event":')
                elif kind == "error":
                    counts["errors"] += 1

    # Baseline receivers: raw channels in a group, fed from a sync thread by the bridge.
    layer = get_channel_layer()
    group = f"bench.baseline.{secrets.token_hex(4)}"
    channels = [await layer.new_channel() for _ in range(args.clients)]
    for ch in channels:
        await layer.group_add(group, ch)
    baseline: dict[str, list[float]] = {"idle": [], "load": []}
    phase = {"name": "idle"}

    async def receiver(ch: str) -> None:
        while True:
            message = await layer.receive(ch)
            baseline[message["phase"]].append(time.time() - message["sent"])

    receivers = [asyncio.create_task(receiver(ch)) for ch in channels]
    # A raw member of the cluster's telemetry group, as a consumer is: when each
    # tick event arrives here splits the latency between worker and consumer.
    from twin.telemetry import state

    tick_seen: dict[int, float] = {}
    tick_channel = await layer.new_channel()
    await layer.group_add(state.group_name(args.cluster), tick_channel)

    async def tick_receiver() -> None:
        while True:
            message = await layer.receive(tick_channel)
            if message.get("type") == state.TICK_EVENT:
                tick_seen.setdefault(int(message["seq"]), time.time())

    receivers.append(asyncio.create_task(tick_receiver()))
    ping_stop = threading.Event()

    def pinger() -> None:
        while not ping_stop.is_set():
            bridge.group_send(group, {"type": "bench.ping", "sent": time.time(),
                                      "phase": phase["name"]})
            ping_stop.wait(0.1 if phase["name"] == "idle" else 0.25)

    stop = asyncio.Event()
    readies = [asyncio.Event() for _ in range(args.clients)]
    tasks = [asyncio.create_task(client(i, readies[i], stop)) for i in range(args.clients)]
    for ev in readies:
        await asyncio.wait_for(ev.wait(), 120)
    thread = threading.Thread(target=pinger, daemon=True)
    thread.start()
    await asyncio.sleep(args.baseline_s)
    phase["name"] = "load"
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)  # the orchestrator says stop
    ping_stop.set()
    thread.join()
    stop.set()
    await asyncio.gather(*tasks)
    for task in receivers:
        task.cancel()
    for ch in channels:
        await layer.group_discard(group, ch)
    await layer.group_discard(state.group_name(args.cluster), tick_channel)
    rates = []
    for times in per_view_times.values():
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        if gaps:
            rates.append(min(gaps))
    Path(args.out).write_text(json.dumps({
        "records": records, "counts": counts, "baseline": baseline, "ticks": tick_seen,
        "min_gap_s": min(rates) if rates else None,
    }))


# --------------------------------------------------------------------------
# orchestrator
# --------------------------------------------------------------------------

def ensure_cluster(cards: int) -> tuple[int, list[int], int]:
    from twin.hardware.builder import build_cluster
    from twin.hardware.models import Card, Cluster, SuperNode

    if cards % 512:
        raise SystemExit("--cards must be a multiple of 512 (seed-512 supernodes)")
    name = f"live-bench-{cards}"
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None or Card.objects.filter(supernode__cluster=cluster).count() != cards:
        print(f"building {name}: seed-512 × {cards // 512} supernodes …", flush=True)
        started = time.perf_counter()
        build_cluster("seed-512", name=name, supernodes=cards // 512, replace=True)
        print(f"  built in {time.perf_counter() - started:.1f} s", flush=True)
        cluster = Cluster.objects.get(name=name)
    supernodes = list(SuperNode.objects.filter(cluster=cluster).values_list("pk", flat=True))
    from twin.hardware.models import Rack

    racks = Rack.objects.filter(cluster=cluster, servers__isnull=False).distinct().count()
    return cluster.pk, supernodes, racks


def start(cmd: list[str], log: Path, env: dict[str, str], **kw: Any) -> subprocess.Popen:
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=open(log, "w"),  # noqa: SIM115
                            stderr=subprocess.STDOUT, **kw)


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its live descendants (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
    total, stack = 0.0, [pid]
    while stack:
        current = stack.pop()
        total += times.get(current, 0.0)
        stack.extend(child for child, parent in parents.items() if parent == current)
    return total


def analyse(sends: list[dict[str, Any]], records: list[list[Any]], clients: int,
            warmup_s: float, ticks: dict[str, float]) -> dict[str, Any]:
    """Per (interval, client): time from the interval's first POST to the first frame
    showing all its cards' samples.

    Also splits it in three at the tick that published the batch (the frame's
    ``ts`` is the tick's start): POST start → tick start (HTTP, stream, worker
    apply, the tick gate); tick start → the tick event delivered to a raw
    channel of the group (the tick's rollups, rules and writes, ``group_send``);
    tick event → frame received (the consumer's frame build, the websocket, the
    client's JSON parse).
    """
    by_client: dict[int, list[tuple[float, float, float, float | None]]] = {
        c: [] for c in range(clients)}
    for client, t, seq, low, _high, _nulls, tick_ts in records:
        if low is not None:
            by_client[client].append((t, low, tick_ts, ticks.get(str(seq))))
    for frames in by_client.values():
        frames.sort()
    latencies: list[float] = []
    to_tick: list[float] = []
    tick_work: list[float] = []
    event_to_client: list[float] = []
    missing = 0
    missed: set[float] = set()
    first = min((s["sent"] for s in sends), default=0.0)
    intervals: dict[float, dict[str, Any]] = {}
    for s in sends:
        entry = intervals.setdefault(s["interval"], {"sent": s["interval"],
                                                      "marker": s["marker"], "ok": True})
        entry["ok"] &= s["status"] == 202
    measured = [i for i in intervals.values() if i["ok"] and i["sent"] - first >= warmup_s]
    per_interval = []
    for send in measured:
        firsts = []
        for frames in by_client.values():
            hit = next(((t, ts, seen) for t, low, ts, seen in frames if t >= send["sent"]
                        and low >= send["marker"] - 0.002), None)
            if hit is None:
                missing += 1
                missed.add(round(send["sent"] - first, 3))
                continue
            t, ts, seen = hit
            firsts.append((t, ts))
            latencies.append(t - send["sent"])
            to_tick.append(ts - send["sent"])
            if seen is not None:
                tick_work.append(seen - ts)
                event_to_client.append(t - seen)
        if firsts:
            per_interval.append([round(send["sent"] - first, 3),
                                 round(1000 * (min(ts for _, ts in firsts) - send["sent"]), 1),
                                 round(1000 * (max(t for t, _ in firsts) - send["sent"]), 1)])
    return {"batches": len(measured), "missing": missing, "missed_at_s": sorted(missed),
            "per_interval": per_interval,
            "latency": summary_ms(latencies),
            "post_to_tick": summary_ms(to_tick), "tick_work": summary_ms(tick_work),
            "event_to_client": summary_ms(event_to_client)}


def orchestrate(args: argparse.Namespace) -> int:
    from benchmarks.seedcluster import isolate, setup

    run_id = isolate("live", services=True)
    setup()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.db import connection

    from twin.celery import app
    from twin.telemetry import state
    from twin.telemetry.models import TelemetryAgent

    cluster_id, supernodes, racks = ensure_cluster(args.cards)
    password = secrets.token_urlsafe(16)
    user, _ = User.objects.get_or_create(username=BENCH_USER)
    user.set_password(password)
    user.save()
    from twin.hardware.models import Cluster

    agent, token = TelemetryAgent.issue(Cluster.objects.get(pk=cluster_id),
                                        f"live-bench-{run_id}")
    connection.close()

    logs = Path(settings.VAR_DIR) / "log"
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    queue = os.environ["TWIN_CELERY_QUEUE"]
    procs: list[subprocess.Popen] = []
    db = connection.vendor
    print(f"run {run_id}: {args.cards:,} cards in {racks:,} racks, {args.clients} clients, "
          f"{args.hz:g} Hz, {args.duration:g} s (+{args.warmup:g} s warm-up), {db}, "
          f"Redis {settings.REDIS_URL}", flush=True)
    try:
        web = [sys.executable, "-m", "uvicorn", "twin.asgi:application", "--host", "127.0.0.1",
               "--port", str(port), "--lifespan", "off", "--log-level", "warning",
               "--no-access-log"]
        if not args.deflate:
            web += ["--ws-per-message-deflate", "false"]
        procs.append(start(web, logs / "live-bench-web.log", env))
        procs.append(start([sys.executable, "-m", "celery", "-A", "twin", "worker", "-Q",
                            worker_queues(queue),
                            "--concurrency", str(args.concurrency), "-l", "warning",
                            "--without-gossip", "--without-mingle", "-n", f"{queue}@%h"],
                           logs / "live-bench-worker.log", env))
        if args.beat:  # as scripts/demo runs it: the 1 s safety-net tick
            procs.append(start([sys.executable, "-m", "celery", "-A", "twin", "beat", "-l",
                                "warning", "-s", str(logs / f"live-bench-beat-{run_id}")],
                               logs / "live-bench-beat.log", env))
        wait_http(f"{base}/login/", procs[0])
        wait_celery(app, queue, procs[1], str(logs / "live-bench-worker.log"))
        out = Path(logs / f"live-bench-clients-{run_id}.json")
        t0 = time.time()
        common = [sys.executable, __file__, "--url", base, "--cluster", str(cluster_id)]
        clients = subprocess.Popen(
            [*common, "--role", "clients", "--clients", str(args.clients), "--out", str(out),
             "--password", password, "--supernodes", ",".join(map(str, supernodes)),
             "--baseline-s", str(args.baseline_s)],
            cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(clients)
        line = clients.stdout.readline() if clients.stdout else ""
        if line.strip() != "ready":
            raise RuntimeError(f"the clients did not start: {line!r}")
        print(f"{args.clients} clients connected and subscribed; idle baseline done; "
              "agent starts", flush=True)
        agent_proc = subprocess.Popen(
            [*common, "--role", "agent", "--token", token, "--hz", str(args.hz),
             "--duration", str(args.duration + args.warmup), "--t0", repr(t0),
             "--chunk", str(args.chunk)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        procs.append(agent_proc)
        roles = {"web": procs[0], "worker": procs[1], "clients": clients, "agent": agent_proc}
        cpu_before = {name: cpu_seconds(p.pid) for name, p in roles.items()}
        started = time.monotonic()
        agent_out, _ = agent_proc.communicate(timeout=args.duration + args.warmup + 600)
        elapsed = time.monotonic() - started
        cpu_share = {name: round((cpu_seconds(p.pid) - cpu_before[name]) / elapsed, 2)
                     for name, p in roles.items() if name != "agent"}
        agent_result = json.loads(agent_out)
        sends = agent_result["log"]
        cpu_share["agent"] = round(agent_result["cpu_s"] / elapsed, 2)
        time.sleep(3.0)  # the last batch's frames
        assert clients.stdin is not None
        clients.stdin.write("stop\n")
        clients.stdin.flush()
        clients.wait(timeout=120)
        result = json.loads(out.read_text())
        out.unlink()
    finally:
        for proc in reversed(procs):
            stop_process(proc)
        r = state.redis_client()
        for pattern in (f"{os.environ['TWIN_TELEMETRY_PREFIX']}:*",
                        f"{os.environ['TWIN_CHANNEL_PREFIX']}*"):
            keys = list(r.scan_iter(match=pattern, count=1000))
            for i in range(0, len(keys), 500):
                r.unlink(*keys[i:i + 500])
        agent.delete()
        for leftover in logs.glob(f"live-bench-beat-{run_id}*"):
            leftover.unlink()

    analysis = analyse(sends, result["records"], args.clients, args.warmup, result["ticks"])
    first = min((s["sent"] for s in sends), default=0.0)
    posts = [s["post_s"] for s in sends if s["sent"] - first >= args.warmup]
    statuses: dict[int, int] = {}
    for s in sends:
        statuses[s["status"]] = statuses.get(s["status"], 0) + 1
    report = {
        "run": run_id, "database": db, "cards": args.cards, "racks": racks,
        "clients": args.clients, "hz": args.hz, "duration_s": args.duration,
        "warmup_s": args.warmup, "beat": args.beat, "ws_deflate": args.deflate,
        "post_statuses": statuses,
        "ingest_to_websocket_ms": analysis["latency"],
        "post_start_to_tick_ms": analysis["post_to_tick"],
        "tick_start_to_tick_event_ms": analysis["tick_work"],
        "tick_event_to_client_ms": analysis["event_to_client"],
        "batches": analysis["batches"],
        "missing": analysis["missing"], "missed_intervals_at_s": analysis["missed_at_s"],
        "post_ms": summary_ms(posts),
        "baseline_group_send_idle_ms": summary_ms(result["baseline"]["idle"]),
        "baseline_group_send_load_ms": summary_ms(result["baseline"]["load"]),
        "client_counts": result["counts"],
        "cpu_cores_used": cpu_share,
        "per_interval_s_tick_ms_last_client_ms": analysis["per_interval"],
        "post_log": [[round(x["sent"] - first, 3), round(1000 * x["post_s"], 1), x["status"]]
                     for x in sends],
        "min_gap_between_frames_of_a_view_s": result["min_gap_s"],
    }
    lat = analysis["latency"]
    print(json.dumps(report, indent=2))
    ok = bool(lat.get("n")) and lat["p99"] < TARGET_P99_MS and analysis["missing"] == 0
    print(f"\ningest → websocket: p50 {lat.get('p50')} ms, p99 {lat.get('p99')} ms over "
          f"{lat.get('n')} (batch, client) pairs — target p99 < {TARGET_P99_MS:g} ms: "
          f"{'met' if ok else 'NOT met'}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cards", type=int, default=65_536)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--hz", type=float, default=1.0)
    parser.add_argument("--duration", type=float, default=60.0, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=15.0, help="seconds not measured")
    parser.add_argument("--baseline-s", type=float, default=5.0,
                        help="idle channel-layer baseline before the agent starts")
    parser.add_argument("--concurrency", type=int, default=2, help="Celery worker processes")
    parser.add_argument("--no-beat", dest="beat", action="store_false",
                        help="do not run celery beat (its tick_all is the 1 s safety net)")
    parser.add_argument("--no-deflate", dest="deflate", action="store_false",
                        help="uvicorn without permessage-deflate (browsers ask for it)")
    parser.add_argument("--chunk", type=int, default=0,
                        help="cards per POST (default: all cards in one batch)")
    parser.add_argument("--json", default="", help="also write the report here")
    # internal: the child roles
    parser.add_argument("--role", choices=("agent", "clients"), default=None,
                        help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--cluster", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--token", help=argparse.SUPPRESS)
    parser.add_argument("--password", help=argparse.SUPPRESS)
    parser.add_argument("--supernodes", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--t0", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "agent":
        run_agent(args)
        return 0
    if args.role == "clients":
        run_clients(args)
        return 0
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
