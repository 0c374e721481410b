"""Benchmark: the web server under a crowd of dashboard readers (issue 22, item 2).

Usage (PostgreSQL + Redis from the environment, else SQLite + the embedded Redis)::

    .venv/bin/python benchmarks/serving.py                      # 20 s per step
    .venv/bin/python benchmarks/serving.py --duration 10 --workers 1   # one process
    .venv/bin/python benchmarks/serving.py --clients 10,50,100 --json out.json

What runs (real processes, as ``scripts/demo`` runs them, on a private Celery
queue, telemetry key prefix, channel prefix and cache prefix so a demo on the
same Redis is untouched):

* **Server**: ``manage.py serve --workers N`` (uvicorn processes, each with its
  database pool), one Celery worker for both queues (``--concurrency 2``) and beat.
* **Cluster**: the demo's, ``seed-512`` × 8 supernodes = 4,096 cards, built once
  as ``serving-bench`` and kept.
* **Telemetry**: an agent thread posts one columnar batch of all 4,096 cards a
  second (``twin.telemetry.simulator``), so the live state, ticks and alerts are
  real while the readers read.
* **Readers**: one asyncio process-thread of keep-alive HTTP/1.1 connections
  (a minimal client: urllib threads would spend the cores the server needs),
  each looping over the four endpoints a dashboard reads: the cluster summary
  (``/api/clusters/<id>/summary/``), a page of cards (``/api/cards/?cluster=``),
  the live cluster state (``/api/telemetry/clusters/<id>/``) and the open alerts
  (``/api/telemetry/alerts/?cluster=&active=true``), with a token.

CPU per request (first, the agent paused): the web processes' user + system CPU
seconds (``/proc/<pid>/stat`` of the server and its children) over ``--cpu-requests``
requests of ``/healthz/`` and of each read, less their idle rate; and ``cores`` ÷ the
mix's figure, the most req/s the server could answer with every core to itself. On a
shared machine this is the figure to compare, not req/s (``--cpu-only``: just this).
The web processes run at ``--web-nice`` (default 10, as ``scripts/demo`` runs them), the
Celery worker at ``--worker-nice`` (``TWIN_WORKER_NICE``; default: as started).

Steps: for each client count (10, 50, 100) first the *baseline* — ``/healthz/``
(it touches the database and Redis, nothing else) served by the same server at
the same concurrency — then the four endpoints mixed; each for ``--duration`` s
after a 2 s warm-up. Printed per step: requests/s, p50, p99, errors by kind, and
the mix's req/s as a fraction of the baseline's.

Live tick: for every batch the agent posts, the time from the POST's start to the
first ``telemetry.tick`` event (received on a raw channel of the cluster's group,
as a browser's consumer receives it) of a tick that read the state after the batch
was applied (the event's ``data_ts`` at least the batch's ``ts``): what the live view
lags behind the cards while the crowd reads. Also printed: the old figure (the first
tick started after the POST's 202, labelled), the CPU time per tick (the ticking
thread's, from ``keys.tick_stats``: independent of the machine's load) and, with
``TWIN_TELEMETRY_TRACE`` on in the stack (the default; ``--no-trace``), each stage of
ingest, apply and tick and each batch's lag in consecutive pieces. The web processes
run with ``TWIN_WEB_THREADS`` (``--web-threads``, default 4, as ``scripts/demo``).

Target (issue 22): >= 300 req/s at 100 clients with p99 <= 1 s and no errors,
live tick p99 < 500 ms. Exit status 0 only when met.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
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

CLUSTER = "serving-bench"
TARGET_RPS, TARGET_P99_S, TARGET_TICK_P99_S = 300.0, 1.0, 0.5

__all__ = ["Stack", "agent_loop", "endpoints", "http_load", "prepare", "private_env",
           "summary", "tick_listener"]


def private_env(tag: str) -> dict[str, str]:
    """Queue, key, channel and cache prefixes of this run only; set in this process
    too (before Django starts) so the benchmark's own clients use them."""
    private = {"TWIN_CELERY_QUEUE": f"bench-{tag}", "TWIN_TELEMETRY_PREFIX": f"bench{tag}",
               "TWIN_CHANNEL_PREFIX": f"bench{tag}", "TWIN_CACHE_PREFIX": f"bench{tag}",
               "TWIN_LOG_LEVEL": "ERROR"}
    os.environ.update(private)
    return {**os.environ, **private}


def prepare(cluster_name: str = CLUSTER) -> dict[str, Any]:
    """Django up; the cluster (built once), a superuser token, an agent token."""
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    from twin.hardware.models import Cluster
    from twin.telemetry.models import TelemetryAgent

    call_command("migrate", "--noinput", verbosity=0)
    if not Cluster.objects.filter(name=cluster_name).exists():
        print(f"building {cluster_name} (seed-512 × 8 supernodes, once)", flush=True)
        call_command("build_cluster", preset="seed-512", supernodes=8, name=cluster_name,
                     verbosity=0)
    cluster = Cluster.objects.get(name=cluster_name)
    user, _ = User.objects.get_or_create(username="serving-bench",
                                         defaults={"is_superuser": True, "is_staff": True})
    token, _ = Token.objects.get_or_create(user=user)
    TelemetryAgent.objects.filter(cluster=cluster, name__startswith="bench-").delete()
    _, agent_token = TelemetryAgent.issue(cluster, f"bench-{uuid.uuid4().hex[:6]}")
    return {"cluster": cluster.pk, "token": token.key, "agent_token": agent_token}


class Stack:
    """The server (``manage.py serve``), a Celery worker on both queues and beat."""

    def __init__(self, env: dict[str, str], workers: int, logdir: Path,
                 redis_url: str | None = None, web_nice: int = 0,
                 worker_nice: int | None = None) -> None:
        self.env = dict(env, TWIN_WEB_WORKERS=str(workers), TWIN_WEB_NICE=str(web_nice))
        self.worker_nice = worker_nice
        if redis_url:
            self.env["REDIS_URL"] = redis_url
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.logdir = logdir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def _start(self, name: str, argv: list[str],
               env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = open(self.logdir / f"{name}.log", "ab")  # noqa: SIM115 - kept by the process
        proc = subprocess.Popen(argv, cwd=ROOT, env=env or self.env, stdout=log,
                                stderr=subprocess.STDOUT)
        log.close()
        self.procs[name] = proc
        return proc

    def start_web(self) -> None:
        web = self._start("web", [sys.executable, "manage.py", "serve", "--port",
                                  str(self.port), "--log-level", "warning"])
        wait_http(f"{self.base}/healthz/", web, timeout=120)

    def start_worker(self) -> None:
        from twin.celery import app

        queue = self.env["TWIN_CELERY_QUEUE"]
        worker = self._start("worker", [
            sys.executable, "-m", "celery", "-A", "twin", "worker", "-Q", worker_queues(queue),
            "-n", f"{queue}@%h", "--concurrency", "2", "-l", "warning", "--without-gossip",
            "--without-mingle"], env=(None if self.worker_nice is None else
                                     dict(self.env, TWIN_WORKER_NICE=str(self.worker_nice))))
        wait_celery(app, queue, worker, str(self.logdir / "worker.log"))

    def worker_nice_now(self) -> int | None:
        """The nice value the worker runs at (it may not get a higher priority)."""
        proc = self.procs.get("worker")
        return None if proc is None else os.getpriority(os.PRIO_PROCESS, proc.pid)

    def start_beat(self) -> None:
        self._start("beat", [sys.executable, "-m", "celery", "-A", "twin", "beat", "-l",
                             "warning", "-s", str(self.logdir / "celerybeat-schedule")])

    def start(self) -> Stack:
        self.start_web()
        self.start_worker()
        self.start_beat()
        return self

    def stop(self) -> None:
        for proc in self.procs.values():
            stop_process(proc)


def endpoints(cluster: int) -> list[str]:
    """What a dashboard reads: summary, a page of cards, live state, open alerts."""
    return [f"/api/clusters/{cluster}/summary/", f"/api/cards/?cluster={cluster}&limit=100",
            f"/api/telemetry/clusters/{cluster}/",
            f"/api/telemetry/alerts/?cluster={cluster}&active=true"]


async def _get(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str,
               headers: bytes) -> int:
    """One GET on a keep-alive connection; the status (the body is read and dropped)."""
    writer.write(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers +
                 b"\r\n")
    await writer.drain()
    line = await reader.readline()
    if not line:
        raise ConnectionResetError("the server closed the connection")
    status = int(line.split()[1])
    length, chunked = 0, False
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            break
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    if chunked:
        while True:
            size = int((await reader.readline()).strip(), 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    elif length:
        await reader.readexactly(length)
    return status


async def http_load(port: int, paths: list[str], clients: int, duration: float,
                    token: str | None = None, warmup: float = 2.0) -> dict[str, Any]:
    """``clients`` keep-alive connections looping over ``paths`` for ``warmup`` +
    ``duration`` s; latencies and errors of the measured part."""
    headers = f"Authorization: Token {token}\r\n".encode() if token else b""
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    start = time.monotonic()
    measure_from, stop_at = start + warmup, start + warmup + duration

    async def client(i: int) -> None:
        conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        n = i
        while time.monotonic() < stop_at:
            path = paths[n % len(paths)]
            n += 1
            t0 = time.monotonic()
            try:
                if conn is None:
                    conn = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
                status = await asyncio.wait_for(_get(*conn, path, headers), 30)
                kind = None if status == 200 else f"HTTP {status}"
            except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError,
                    IndexError) as exc:
                kind = type(exc).__name__
                if conn is not None:
                    conn[1].close()
                conn = None
            t1 = time.monotonic()
            if t0 >= measure_from and t1 <= stop_at:
                if kind:
                    errors[kind] += 1
                else:
                    latencies.append(t1 - t0)
            if kind:
                await asyncio.sleep(0.1)
        if conn is not None:
            conn[1].close()

    await asyncio.gather(*(client(i) for i in range(clients)))
    return {"clients": clients, "ok": len(latencies), "errors": dict(errors),
            "rps": len(latencies) / duration, "p50_s": pct(latencies, 50),
            "p99_s": pct(latencies, 99)}


def _load_here(port: int, paths: list[str], clients: int, duration: float,
               token: str | None = None) -> dict[str, Any]:
    return asyncio.run(http_load(port, paths, clients, duration, token))


class Readers:
    """Where the readers' load runs: a process of its own (the default), or this one
    (``--readers-in-process``, as until 2026-12-05).

    Why a process of its own: the readers are a busy asyncio loop that takes about a
    core, and the agent's thread (its POST, so the batch's start) and the tick
    listener's thread (the event's arrival) of this process wait for the interpreter
    lock behind it: the tick figure then measured the load generator's own lock as
    well as the server (the "tick" piece of each batch's lag, start of the tick →
    its event here, up to 0.8 s longer than the tick itself). A browser follows the
    live state on its own machine."""

    def __init__(self, separate: bool) -> None:
        import concurrent.futures
        import multiprocessing

        self.pool = (concurrent.futures.ProcessPoolExecutor(
            1, mp_context=multiprocessing.get_context("spawn")) if separate else None)

    def load(self, port: int, paths: list[str], clients: int, duration: float,
             token: str | None = None) -> dict[str, Any]:
        if self.pool is None:
            return _load_here(port, paths, clients, duration, token)
        return self.pool.submit(_load_here, port, paths, clients, duration, token).result()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()


def agent_loop(base: str, cluster: int, token: str, stop: threading.Event,
               log: list[dict[str, Any]], hz: float = 1.0,
               pause: threading.Event | None = None) -> None:
    """Post one columnar batch of every card per 1/hz s (the simulated agent's way);
    each POST's start, end and status go to ``log``. While ``pause`` is set nothing is
    posted (the CPU-per-request phase counts the readers' CPU alone)."""
    import numpy as np

    from twin.hardware.models import Card
    from twin.telemetry.client import AgentClient
    from twin.telemetry.metrics import METRICS
    from twin.telemetry.simulator import Simulator

    client = AgentClient(base, token)
    layout = client.layout(cluster).body
    rows = dict((r[0], r[1:]) for r in Card.objects.filter(supernode__cluster_id=cluster)
                .values_list("id", "accelerator__tdp_w", "accelerator__idle_w",
                             "accelerator__hbm_gib", "server_id"))
    meta = np.array([rows[int(c)] for c in layout["card_ids"]], dtype=np.float64)
    sim = Simulator(meta[:, 0], meta[:, 1], meta[:, 2], meta[:, 3].astype(np.int64), seed=7)
    n, seq, period = len(meta), 0, 1.0 / hz
    next_at = time.monotonic()
    while not stop.is_set():
        if pause is not None and pause.is_set():
            next_at = time.monotonic() + period
            stop.wait(period)
            continue
        values, _ = sim.step(period)
        seq += 1
        block = values.astype("<f4")
        doc = {"seq": seq, "ts": time.time(), "cards": {"range": [0, n],
                                                         "layout": layout["layout"]},
               "columns": {m.key: block[m.index].tobytes() for m in METRICS
                           if np.isfinite(block[m.index]).any()}}
        sent = time.time()
        try:
            status = client.post_batch(cluster, doc).status
        except OSError as exc:
            status = type(exc).__name__
            client.close()
        log.append({"seq": seq, "ts": doc["ts"], "sent": sent, "done": time.time(),
                    "status": status})
        next_at += period
        stop.wait(max(0.0, next_at - time.monotonic()))
    client.close()


def tick_listener(cluster: int, stop: threading.Event,
                  ticks: list[tuple[float, float, float | None]]) -> None:
    """(tick's ``now``, arrival here, newest sample time it read: ``data_ts``) of every
    tick event of the cluster's group."""
    from channels.layers import get_channel_layer

    from twin.telemetry import state

    async def listen() -> None:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(state.group_name(cluster), channel)
        # One receive at a time, never cancelled: a receive cancelled by a timeout
        # (``wait_for(receive, 1.0)``, as here until 2026-12-06) makes channels_redis
        # drop the messages it had buffered for the channel (``receive``'s
        # CancelledError branch deletes ``receive_buffer[channel]``), so an event
        # arriving as the wait ran out was lost and its batch matched to the next
        # tick, ~1 s later: the lag's p99 in most runs. A browser's consumer never
        # cancels its receive.
        waiting: asyncio.Task[dict[str, Any]] | None = None
        while not stop.is_set():
            if waiting is None:
                waiting = asyncio.ensure_future(layer.receive(channel))
            done, _ = await asyncio.wait({waiting}, timeout=1.0)
            if not done:
                continue  # (checks ``stop``; the same receive keeps waiting)
            task, waiting = waiting, None
            try:
                message = task.result()
            except Exception:  # noqa: BLE001 - Redis away (the soak restarts it): retry
                await asyncio.sleep(0.5)
                try:
                    await layer.group_add(state.group_name(cluster), channel)
                except Exception:  # noqa: BLE001
                    pass
                continue
            if message.get("type") == state.TICK_EVENT:
                newest = message.get("data_ts")
                ticks.append((float(message["ts"]), time.time(),
                              None if newest is None else float(newest)))
        if waiting is not None:
            waiting.cancel()

    asyncio.run(listen())


def tick_lags(batches: list[dict[str, Any]], ticks: list[tuple[float, float, float | None]],
              since: float = 0.0) -> list[float]:
    """The live tick figure. Per accepted batch: the agent's POST start → arrival of
    the first tick event that *read the state after the batch was applied*: whose
    ``data_ts`` (the newest sample time in the state it read) is at least the batch's
    ``ts`` (batches with no such tick yet are left out). What the live view lags
    behind the cards."""
    arrivals = sorted((seen, newest) for _, seen, newest in ticks if newest is not None)
    lags = []
    for batch in batches:
        if batch["status"] != 202 or batch["sent"] < since:
            continue
        after = next((seen for seen, newest in arrivals
                      if newest >= batch["ts"] and seen >= batch["sent"]), None)
        if after is not None:
            lags.append(after - batch["sent"])
    return lags


def tick_lags_started(batches: list[dict[str, Any]],
                      ticks: list[tuple[float, float, float | None]],
                      since: float = 0.0) -> list[float]:
    """The figure printed before 2026-12-05 (kept for comparison, labelled "old"): POST
    start → arrival of the first tick whose ``now`` is after the POST was *accepted*.
    Such a tick may have read the state before the batch was applied (the batch still
    waited on the stream), so this can be shorter than the lag the view shows."""
    arrivals = sorted((ts, seen) for ts, seen, _ in ticks)
    lags = []
    for batch in batches:
        if batch["status"] != 202 or batch["sent"] < since:
            continue
        after = next((seen for ts, seen in arrivals if ts >= batch["done"]), None)
        if after is not None:
            lags.append(after - batch["sent"])
    return lags


def lag_stages(batches: list[dict[str, Any]], ticks: list[tuple[float, float, float | None]],
               records: list[dict[str, Any]], since: float = 0.0) -> dict[str, list[float]]:
    """Where each batch's lag goes, from the trace (``TWIN_TELEMETRY_TRACE``), four
    consecutive pieces that add up to the lag: to apply (POST start → its apply
    started: the web request, the stream and the drain task's queue), apply, gate
    (apply done → the start of the first tick that read it: the tick gate, the lock
    and the trailing tick's countdown), tick (that tick's start → its event here); and
    post (POST start → the 202, part of "to apply": the web process's share), deliver
    (part of "tick": the tick's event sent → here: Redis, the channel layer and this
    process's listener thread, not the tick's own work).
    Seconds, per batch that has every piece."""
    applies = {r["batch_ts"]: r for r in records if r["kind"] == "apply" and r.get("batch_ts")}
    starts = sorted((r["data_ts"], r["at"], _sent_s(r)) for r in records
                    if r["kind"] == "tick" and r.get("data_ts") is not None)
    arrivals = sorted((seen, newest) for _, seen, newest in ticks if newest is not None)
    out: dict[str, list[float]] = {k: [] for k in ("to apply", "apply", "gate", "tick",
                                                   "post", "deliver")}
    for batch in batches:
        ap = applies.get(batch.get("ts"))
        if batch["status"] != 202 or batch["sent"] < since or ap is None:
            continue
        applied = ap["at"] + ap["wall_ms"] / 1e3
        first = next(((at, sent) for newest, at, sent in sorted(starts, key=lambda x: x[1])
                      if newest >= batch["ts"] and at >= applied), None)
        start = None if first is None else first[0]
        seen = next((seen for seen, newest in arrivals
                     if newest >= batch["ts"] and seen >= batch["sent"]), None)
        if start is None or seen is None:
            continue
        out["to apply"].append(ap["at"] - batch["sent"])
        out["apply"].append(ap["wall_ms"] / 1e3)
        out["gate"].append(start - applied)
        out["tick"].append(seen - start)
        out["post"].append(batch["done"] - batch["sent"])
        assert first is not None
        out["deliver"].append(seen - (first[0] + first[1]))
    return out


def _sent_s(record: dict[str, Any]) -> float:
    """Seconds from a tick's start to the end of its ``send`` stage (the stages are
    consecutive; the stages after it do not delay the event)."""
    total = 0.0
    for stage, (wall_ms, _cpu) in record.get("stages", {}).items():
        total += wall_ms / 1e3
        if stage == "send":
            break
    return total


def stage_table(records: list[dict[str, Any]], kind: str) -> list[tuple[str, float, float,
                                                                          float, float]]:
    """Per stage of ``kind``'s records (and the whole): (name, wall p50, wall p99, CPU
    p50, CPU p99), milliseconds."""
    rows = [r for r in records if r["kind"] == kind]
    names: list[str] = []
    for r in rows:
        names += [k for k in r["stages"] if k not in names]
    out = []
    for name in names:
        wall = [r["stages"][name][0] for r in rows if name in r["stages"]]
        cpu = [r["stages"][name][1] for r in rows if name in r["stages"]]
        out.append((name, pct(wall, 50), pct(wall, 99), pct(cpu, 50), pct(cpu, 99)))
    wall = [r["wall_ms"] for r in rows]
    cpu = [r["cpu_ms"] for r in rows]
    out.append(("(whole)", pct(wall, 50), pct(wall, 99), pct(cpu, 50), pct(cpu, 99)))
    return out


def process_tree(pid: int) -> list[int]:
    """``pid`` and every descendant (from /proc's ``children`` lists, Linux)."""
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as handle:
                    todo.extend(int(c) for c in handle.read().split())
        except OSError:
            continue
    return out


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds the processes have used so far (/proc/<pid>/stat)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                fields = handle.read().rpartition(")")[2].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return total / tick


async def http_count(port: int, path: str, clients: int, n: int,
                     token: str | None = None) -> dict[str, Any]:
    """Exactly ``n`` GETs of ``path`` over ``clients`` keep-alive connections;
    the statuses counted."""
    headers = f"Authorization: Token {token}\r\n".encode() if token else b""
    statuses: Counter[int] = Counter()
    left = [n]

    async def client() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while left[0] > 0:
                left[0] -= 1
                statuses[await asyncio.wait_for(_get(reader, writer, path, headers), 30)] += 1
        finally:
            writer.close()

    await asyncio.gather(*(client() for _ in range(clients)))
    return dict(statuses)


def cpu_per_request(port: int, web_pid: int, paths: list[str], n: int, clients: int,
                    token: str | None) -> dict[str, dict[str, Any]]:
    """CPU seconds the web processes (the server and its children) spend per request
    of each path: their user + system time over ``n`` requests, less what they spend
    idle over as long (measured just before), divided by ``n``. Wall-clock req/s on a
    machine shared with other work measures the neighbours; this does not. 10 warm-up
    requests first (caches filled, connections pooled)."""
    out = {}
    for path in paths:
        asyncio.run(http_count(port, path, min(clients, 10), 10, token))
        pids = process_tree(web_pid)
        idle0, t0 = cpu_seconds(pids), time.monotonic()
        time.sleep(1.0)
        idle_rate = (cpu_seconds(pids) - idle0) / (time.monotonic() - t0)
        c0, t0 = cpu_seconds(pids), time.monotonic()
        statuses = asyncio.run(http_count(port, path, clients, n, token))
        elapsed = time.monotonic() - t0
        used = cpu_seconds(process_tree(web_pid)) - c0 - idle_rate * elapsed
        out[path] = {"n": n, "cpu_s": used, "cpu_per_request_s": used / n,
                     "statuses": statuses, "idle_cpu_rate": idle_rate}
    return out


def summary(step: dict[str, Any]) -> str:
    errors = ", ".join(f"{k} {v}" for k, v in step["errors"].items()) or "none"
    return (f"{step['rps']:7.1f} req/s  p50 {step['p50_s'] * 1000:7.1f} ms  "
            f"p99 {step['p99_s'] * 1000:7.1f} ms  errors: {errors}")


def cpu_phase(stack: Stack, cluster: int, token: str, args: argparse.Namespace,
              pause: threading.Event) -> dict[str, Any]:
    """CPU per request of /healthz/ and each of the four reads, the agent paused (its
    batches are the web processes' other work); printed with the req/s it implies
    when every core serves (cores / CPU per request of the mix)."""
    pause.set()
    time.sleep(1.5)  # a POST under way finishes
    try:
        base = cpu_per_request(stack.port, stack.procs["web"].pid, ["/healthz/"],
                               args.cpu_requests, args.cpu_clients, None)
        reads = cpu_per_request(stack.port, stack.procs["web"].pid, endpoints(cluster),
                                args.cpu_requests, args.cpu_clients, token)
    finally:
        pause.clear()
    cores = os.cpu_count() or 1
    mix = sum(r["cpu_per_request_s"] for r in reads.values()) / len(reads)
    print(f"CPU per request of the web processes ({args.cpu_requests} requests each, "
          f"{args.cpu_clients} connections, agent paused):")
    for path, r in {**base, **reads}.items():
        bad = {k: v for k, v in r["statuses"].items() if k != 200}
        print(f"  {r['cpu_per_request_s'] * 1000:7.2f} ms  {path}"
              + (f"  (non-200: {bad})" if bad else ""))
    print(f"  {mix * 1000:7.2f} ms  the four reads mixed -> at most {cores / mix:.0f} req/s "
          f"on {cores} cores (cores / CPU per request)")
    return {"endpoints": {**base, **reads}, "mix_cpu_per_request_s": mix,
            "implied_rps": cores / mix, "cores": cores}


def tick_stats(cluster: int) -> dict[str, float]:
    """The cluster's tick counters (``keys.tick_stats``: count, wall and CPU seconds)."""
    from twin.telemetry import keys
    from twin.telemetry.config import redis_client

    raw = redis_client().hgetall(keys.tick_stats(cluster))
    return {k.decode(): float(v) for k, v in raw.items()
            if k in (b"count", b"sum", b"cpu_sum")}


def tick_report(cluster: int, batches: list[dict[str, Any]],
                ticks: list[tuple[float, float, float | None]], since: float,
                stats_from: dict[str, float], traced: bool) -> dict[str, Any]:
    """The live tick while the crowd read: the lag per batch (and the old figure), the
    CPU per tick (the ticking thread's, whatever the load) and, traced, the stages."""
    lags = tick_lags(batches, ticks, since)
    old = tick_lags_started(batches, ticks, since)
    stats = tick_stats(cluster)
    n = stats.get("count", 0) - stats_from.get("count", 0)
    out: dict[str, Any] = {
        "n": len(lags), "p50_s": pct(lags, 50), "p99_s": pct(lags, 99),
        "old_figure": {"n": len(old), "p50_s": pct(old, 50), "p99_s": pct(old, 99)},
        "batches": len(batches), "refused": sum(1 for b in batches if b["status"] != 202),
        "ticks": n,
        "wall_per_tick_s": (stats.get("sum", 0) - stats_from.get("sum", 0)) / n if n else None,
        "cpu_per_tick_s": ((stats.get("cpu_sum", 0) - stats_from.get("cpu_sum", 0)) / n
                           if n else None)}
    print(f"live tick while reading: POST -> first tick event that read the batch p50 "
          f"{out['p50_s'] * 1000:.0f} ms, p99 {out['p99_s'] * 1000:.0f} ms over {len(lags)} "
          f"batches ({out['refused']} of {len(batches)} refused)")
    print(f"  (old figure, POST -> first tick started after the POST's 202: p50 "
          f"{out['old_figure']['p50_s'] * 1000:.0f} ms, p99 "
          f"{out['old_figure']['p99_s'] * 1000:.0f} ms)")
    if n:
        print(f"  {n:.0f} ticks: wall {out['wall_per_tick_s'] * 1000:.1f} ms, CPU "
              f"{out['cpu_per_tick_s'] * 1000:.1f} ms per tick (mean; the ticking thread)")
    if traced:
        from twin.telemetry import trace
        from twin.telemetry.config import redis_client

        records = [r for r in trace.read(redis_client()) if r["at"] >= since - 5]
        out["stages"] = {}
        for kind in ("ingest", "apply", "tick"):
            table = stage_table([r for r in records if r["at"] >= since], kind)
            out["stages"][kind] = table
            print(f"  {kind} stages, ms (wall p50 / p99, CPU p50 / p99):")
            for name, w50, w99, c50, c99 in table:
                print(f"    {name:13s} {w50:8.1f} {w99:8.1f}   {c50:7.1f} {c99:7.1f}")
        parts = lag_stages(batches, ticks, records, since)
        out["lag_stages"] = {k: {"p50_s": pct(v, 50), "p99_s": pct(v, 99)}
                             for k, v in parts.items()}
        print(f"  each batch's lag, ms (p50 / p99 over {len(parts['tick'])} batches): "
              + ", ".join(f"{k} {pct(v, 50) * 1000:.0f} / {pct(v, 99) * 1000:.0f}"
                          for k, v in parts.items()))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per step")
    parser.add_argument("--clients", default="10,50,100")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="web processes (default: one per core)")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--web-nice", type=int, default=10,
                        help="the web processes' nice value (TWIN_WEB_NICE; the demo's 10)")
    parser.add_argument("--cpu-requests", type=int, default=300,
                        help="requests per endpoint for the CPU-per-request figure (0: none)")
    parser.add_argument("--cpu-clients", type=int, default=10,
                        help="concurrent connections while measuring CPU per request")
    parser.add_argument("--cpu-only", action="store_true",
                        help="only the CPU-per-request figure (no req/s steps, no target)")
    parser.add_argument("--web-threads", type=int, default=4,
                        help="TWIN_WEB_THREADS: requests per web process run at once, the "
                             "agents' batches excepted (0: no limit; the demo's 4)")
    parser.add_argument("--worker-nice", type=int, default=None,
                        help="the Celery worker's nice value (TWIN_WORKER_NICE, e.g. -5: "
                             "the tick ahead of everything at nice 0; needs CAP_SYS_NICE; "
                             "default: as started)")
    parser.add_argument("--readers-in-process", action="store_true",
                        help="run the readers' load in this process, beside the agent and "
                             "the tick listener (as until 2026-12-05; default: a process "
                             "of its own)")
    parser.add_argument("--no-trace", action="store_true",
                        help="run without TWIN_TELEMETRY_TRACE (no per-stage breakdown)")
    args = parser.parse_args()

    tag = uuid.uuid4().hex[:6]
    env = private_env(tag)
    if not args.no_trace:
        env["TWIN_TELEMETRY_TRACE"] = "1"
    env["TWIN_WEB_THREADS"] = str(args.web_threads)
    ready = prepare()
    cluster, token = ready["cluster"], ready["token"]
    logdir = Path(tempfile.mkdtemp(prefix="serving-bench-"))
    stack = Stack(env, args.workers, logdir, web_nice=args.web_nice,
                  worker_nice=args.worker_nice)
    readers = Readers(separate=not args.readers_in_process)
    stop, pause = threading.Event(), threading.Event()
    batches: list[dict[str, Any]] = []
    ticks: list[tuple[float, float, float | None]] = []
    results: dict[str, Any] = {"workers": args.workers, "web_nice": args.web_nice,
                               "worker_nice": args.worker_nice,
                               "readers": ("this process" if args.readers_in_process
                                           else "a process of their own"),
                               "web_threads": args.web_threads,
                               "cores": os.cpu_count(),
                               "load_before": os.getloadavg(), "steps": []}
    try:
        stack.start()
        threads = [threading.Thread(target=agent_loop, daemon=True,
                                    args=(stack.base, cluster, ready["agent_token"], stop,
                                          batches, 1.0, pause)),
                   threading.Thread(target=tick_listener, daemon=True,
                                    args=(cluster, stop, ticks))]
        for thread in threads:
            thread.start()
        time.sleep(5)  # the first ticks (every card's health goes unknown -> ok)
        results["worker_nice"] = stack.worker_nice_now()
        print(f"server: manage.py serve --workers {args.workers} --nice {args.web_nice} "
              f"(TWIN_WEB_THREADS={args.web_threads}), Celery worker at nice "
              f"{results['worker_nice']}, readers in {results['readers']}, on "
              f"{os.cpu_count()} cores; "
              f"load average before: {results['load_before'][0]:.2f}  (logs in {logdir})")
        if args.cpu_requests:
            results["cpu"] = cpu_phase(stack, cluster, token, args, pause)
        measured_from = time.time()
        stats_from = tick_stats(cluster)
        for clients in ([] if args.cpu_only else [int(c) for c in args.clients.split(",")]):
            base = readers.load(stack.port, ["/healthz/"], clients, args.duration)
            mix = readers.load(stack.port, endpoints(cluster), clients, args.duration, token)
            ratio = mix["rps"] / base["rps"] if base["rps"] else float("nan")
            load = os.getloadavg()[0]
            results["steps"].append({"clients": clients, "baseline": base, "mix": mix,
                                     "ratio": ratio, "load": load})
            print(f"{clients:4d} clients  /healthz/  {summary(base)}")
            print(f"{clients:4d} clients  4 reads    {summary(mix)}  = {ratio:.2f} × /healthz/"
                  f"  (load average {load:.1f})")
        if args.cpu_only:
            if args.json:
                Path(args.json).write_text(json.dumps(results, indent=2))
            return 0
        time.sleep(3)  # the last batches' ticks arrive
        results["tick"] = tick_report(cluster, batches, ticks, measured_from, stats_from,
                                      not args.no_trace)
    finally:
        stop.set()
        stack.stop()
        readers.close()
    results["load_after"] = os.getloadavg()
    last = results["steps"][-1]
    met = (last["clients"] >= 100 and last["mix"]["rps"] >= TARGET_RPS
           and last["mix"]["p99_s"] <= TARGET_P99_S and not last["mix"]["errors"]
           and results["tick"]["p99_s"] < TARGET_TICK_P99_S)
    results["target_met"] = met
    print(f"target (>= {TARGET_RPS:.0f} req/s at 100 clients, p99 <= {TARGET_P99_S:.0f} s, "
          f"0 errors, tick p99 < {TARGET_TICK_P99_S * 1000:.0f} ms): "
          f"{'met' if met else 'NOT met'}; load average after: {results['load_after'][0]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
