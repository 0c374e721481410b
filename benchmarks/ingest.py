"""Benchmark: sustained telemetry ingest through the real endpoint and Celery workers.

Usage (any backend; the defaults are SQLite + the embedded Redis)::

    .venv/bin/python benchmarks/ingest.py                       # 65,536 cards, 20 s
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/twin_bench \\
    REDIS_URL=redis://127.0.0.1:6379/0 .venv/bin/python benchmarks/ingest.py --seconds 30

One card-sample = one card's full metric vector (26 float32 values). In one run:

1. **Setup** (not timed): a cluster of ``--cards`` H100s (``seed-512`` supernodes,
   built once and kept as ``ingest-bench``), one agent (token) per client, a
   private Redis namespace and Celery queue, then real subprocesses: ``uvicorn
   twin.asgi:application`` (one process) and ``celery worker`` (``--workers``
   prefork processes draining the stream through its consumer group).
2. **Throughput**: ``--clients`` threads POST columnar msgpack batches (float32
   columns over a slice of the layout, ``--chunk`` cards each, every metric) over
   keep-alive connections for ``--seconds``. Counted: card-samples accepted
   (202) per second at the endpoint, and end to end — until the workers have
   applied everything (stream empty, nothing pending) — which is the figure
   that counts. 503 answers (backpressure) are retried and reported.
3. **Baseline**: the same batches written by one process straight into Redis
   with pipelined SETRANGE of the 26 columns (what the worker's apply does,
   minus HTTP, validation, the stream and the workers): card-samples/s and the
   ratio ours / baseline.
4. **Where the time goes**: each stage of one batch timed in this process
   (decode, validate, stream entry, enqueue script, apply, tick).
5. **Ingest → tick latency** at 1 Hz: all cards in one batch per second, each
   carrying its sequence number in ``pcie_replay``; a Channels subscriber takes
   the time of the first ``telemetry.tick`` whose cluster rollup contains it.
   p50/p99 over ``--latency-seconds`` (all batches printed; the first two,
   a new agent's warm-up, are left out of the percentiles). (The websocket fan-out to browsers is
   measured by ``benchmarks/live_latency.py``.)

Target: ≥ 1,000,000 card-samples/s with the columnar format.
"""
from __future__ import annotations

import argparse
import asyncio
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

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.settings")
os.environ.setdefault("TWIN_ALLOW_INSECURE_KEY", "1")
PREFIX = f"twbench{uuid.uuid4().hex[:6]}"
os.environ["TWIN_TELEMETRY_PREFIX"] = PREFIX
CLUSTER = "ingest-bench"
WARMUP_BATCHES = 2  # the latency phase's first batches (a new agent, cold caches)


def start_services(queue: str, workers: int,
                   web_workers: int = 1) -> tuple[str, list[subprocess.Popen]]:
    return seedcluster.start_services(queue, workers, web_workers,
                                      {"TWIN_TELEMETRY_PREFIX": PREFIX})


def batches(cluster_id: int, chunk: int) -> tuple[Any, list[tuple[int, dict[str, Any]]]]:
    import numpy as np

    from twin.telemetry import state
    from twin.telemetry.metrics import METRICS
    from twin.telemetry.simulator import Simulator

    lay = state.layout(cluster_id)
    sim = Simulator(lay.tdp_w, lay.idle_w, lay.hbm_gib, lay.server_ids, fault_rate=0)
    values, _ = sim.step(1.0)
    values = np.where(np.isfinite(values), values, 0).astype("<f4")  # every metric, every card
    out = []
    for start in range(0, lay.n, chunk):
        end = min(start + chunk, lay.n)
        out.append((start, {m.key: values[m.index, start:end].tobytes() for m in METRICS}))
    return lay, out


def splice_seq(rest: bytes, seq: int) -> bytes:
    """msgpack of {"seq": seq, **rest} from the packed 3-entry map ``rest`` (no re-pack
    of megabytes per request)."""
    assert rest[0] == 0x83
    return b"\x84\xa3seq\xcf" + seq.to_bytes(8, "big") + rest[1:]


def throughput(base: str, cluster_id: int, tokens: list[str], lay: Any,
               chunks: list[tuple[int, dict[str, Any]]], seconds: float) -> dict[str, Any]:
    import msgpack

    from twin.telemetry import keys, processing, state
    from twin.telemetry.client import AgentClient

    bodies = [(msgpack.packb({"ts": time.time(), "cards": {"range": [start, len(
        next(iter(cols.values()))) // 4], "layout": lay.version}, "columns": cols}),
        len(next(iter(cols.values()))) // 4) for start, cols in chunks]
    stop = threading.Event()
    results: list[dict[str, Any]] = []

    def client_loop(token: str, offset: int) -> None:
        client = AgentClient(base, token, timeout=120)
        seq, accepted, busy, errors, lat = 0, 0, 0, 0, []
        i = offset
        while not stop.is_set():
            rest, cards = bodies[i % len(bodies)]
            i += 1
            seq += 1
            body = splice_seq(rest, seq)
            while True:
                t = time.perf_counter()
                answer = client.post_raw_batch(cluster_id, body)
                lat.append(time.perf_counter() - t)
                if answer.status != 503:
                    break
                busy += 1
                time.sleep(0.05)
            if answer.status == 202:
                accepted += int(answer.body["accepted"])
            else:
                errors += 1
        client.close()
        results.append({"accepted": accepted, "busy": busy, "errors": errors, "lat": lat})

    threads = [threading.Thread(target=client_loop, args=(tok, k)) for k, tok in
               enumerate(tokens)]
    t0 = time.perf_counter()
    for th in threads:
        th.start()
    time.sleep(seconds)
    stop.set()
    for th in threads:
        th.join()
    t_load = time.perf_counter()
    r = state.redis_client()
    while True:
        length = r.xlen(keys.stream())
        pending = r.xpending(keys.stream(), processing.GROUP)["pending"]
        if length == 0 and pending == 0:
            break
        time.sleep(0.01)
    t_done = time.perf_counter()
    accepted = sum(x["accepted"] for x in results)
    lat = sorted(v for x in results for v in x["lat"])
    return {
        "accepted": accepted, "posts": len(lat), "busy": sum(x["busy"] for x in results),
        "errors": sum(x["errors"] for x in results),
        "endpoint_rate": accepted / (t_load - t0), "e2e_rate": accepted / (t_done - t0),
        "drain_tail_s": t_done - t_load, "post_p50_ms": 1000 * lat[len(lat) // 2],
        "post_p99_ms": 1000 * lat[min(len(lat) - 1, int(len(lat) * 0.99))],
    }


def baseline(chunks: list[tuple[int, dict[str, Any]]], seconds: float) -> float:
    """The same columns written straight into Redis with pipelined SETRANGE."""
    from twin.telemetry import state

    r = state.redis_client()
    keys = [f"{PREFIX}:raw:{i}" for i in range(26)]
    done = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for start, cols in chunks:
            pipe = r.pipeline(transaction=False)
            for key, data in zip(keys, cols.values(), strict=True):
                pipe.setrange(key, start * 4, data)
            pipe.execute()
            done += len(next(iter(cols.values()))) // 4
    rate = done / (time.perf_counter() - t0)
    r.delete(*keys)
    return rate


def stages(cluster_id: int, lay: Any, chunks: list[tuple[int, dict[str, Any]]]) -> list[tuple]:
    """Each stage of one batch, timed in this process (median of 5)."""
    import msgpack
    from django.conf import settings

    from twin.telemetry import enqueue, ingest, processing, state

    settings.TELEMETRY_AUTO_DRAIN = False
    start, cols = chunks[0]
    cards = len(next(iter(cols.values()))) // 4
    body = msgpack.packb({"seq": 1, "ts": time.time(),
                          "cards": {"range": [start, cards], "layout": lay.version},
                          "columns": cols})
    out = []

    def timed(label: str, fn: Any) -> Any:
        runs, value = [], None
        for _ in range(5):
            t = time.perf_counter()
            value = fn()
            runs.append(time.perf_counter() - t)
        out.append((label, 1000 * statistics.median(runs)))
        return value

    doc = timed("msgpack decode", lambda: ingest.decode_document(body, "application/msgpack"))
    batch = timed("validate (ranges, layout)", lambda: ingest.parse_native(doc, lay))
    payload = timed("stream entry (msgpack)", lambda: batch.payload(None))
    r = state.redis_client()
    script = r.register_script(enqueue._ENQUEUE)
    stream = f"{PREFIX}:stage-stream"
    timed("enqueue script + XADD", lambda: script(
        keys=[stream, "-", f"{PREFIX}:stage-bytes", f"{PREFIX}:stage-kick"],
        args=["", "", 10**9, payload, 60000, "1", 10**12]))
    timed("worker: read entry (XRANGE)", lambda: r.xrange(stream, count=1))
    r.delete(stream, f"{PREFIX}:stage-bytes", f"{PREFIX}:stage-kick")
    timed("worker: apply (SETRANGE)", lambda: processing.apply_entry(payload))
    timed("worker: tick (whole cluster)", lambda: processing.tick(cluster_id, force=True))
    settings.TELEMETRY_AUTO_DRAIN = True
    return [(label, ms, cards) for label, ms in out]


def tick_latency(base: str, cluster_id: int, token: str, lay: Any, seconds: float) -> dict:
    import msgpack
    import numpy as np
    from channels.layers import get_channel_layer

    from twin.telemetry import state
    from twin.telemetry.client import AgentClient
    from twin.telemetry.metrics import METRICS
    from twin.telemetry.simulator import Simulator

    layer = get_channel_layer()
    sent: dict[int, float] = {}
    seen: dict[int, float] = {}
    stop = threading.Event()

    channel_box: list[str] = []
    ready = threading.Event()

    def listen() -> None:
        async def run() -> None:
            channel = await layer.new_channel()
            channel_box.append(channel)
            await layer.group_add(state.group_name(cluster_id), channel)
            ready.set()
            while True:
                # No timeout: cancelling a pending receive can drop a message.
                msg = await layer.receive(channel)
                got = time.time()
                if msg.get("type") == "bench.stop":
                    break
                if msg.get("type") != state.TICK_EVENT:
                    continue
                roll = await asyncio.to_thread(state.rollup, cluster_id, "cluster",
                                               "pcie_replay")
                if roll["seq"] != msg["seq"] or not np.isfinite(roll["max"][0]):
                    continue
                top = int(roll["max"][0])
                for seq in list(sent):
                    if seq <= top and seq not in seen:
                        seen[seq] = got
            await layer.group_discard(state.group_name(cluster_id), channel)

        asyncio.run(run())

    listener = threading.Thread(target=listen)
    listener.start()
    ready.wait(10)
    sim = Simulator(lay.tdp_w, lay.idle_w, lay.hbm_gib, lay.server_ids, fault_rate=0)
    client = AgentClient(base, token, timeout=60)
    index = METRICS[[m.key for m in METRICS].index("pcie_replay")].index
    t_end = time.monotonic() + seconds
    seq = 10_000_000
    while time.monotonic() < t_end:
        tick_start = time.monotonic()
        values, _ = sim.step(1.0)
        seq += 1
        values[index] = seq
        doc = {"seq": seq, "ts": time.time(), "cards": {"range": [0, lay.n],
                                                        "layout": lay.version},
               "columns": {m.key: values[m.index].astype("<f4").tobytes() for m in METRICS
                           if np.isfinite(values[m.index]).all()}}
        body = msgpack.packb(doc)
        sent[seq] = time.time()
        client.post_raw_batch(cluster_id, body)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - tick_start)))
    time.sleep(2.0)
    stop.set()
    asyncio.run(layer.send(channel_box[0], {"type": "bench.stop"}))
    listener.join()
    client.close()
    ordered = [1000 * (seen[s] - sent[s]) for s in sorted(sent) if s in seen]
    print("ingest → tick per batch (ms):", " ".join(f"{v:.0f}" for v in ordered), flush=True)
    lat = sorted(ordered[WARMUP_BATCHES:])
    if not lat:
        return {"samples": 0}
    return {"samples": len(lat), "missed": len(sent) - len(ordered),
            "p50_ms": lat[len(lat) // 2], "p99_ms": lat[min(len(lat) - 1, int(len(lat) * .99))],
            "max_ms": lat[-1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cards", type=int, default=65_536)
    parser.add_argument("--chunk", type=int, default=65_536, help="cards per POST")
    parser.add_argument("--clients", type=int, default=3, help="concurrent POST streams")
    parser.add_argument("--workers", type=int, default=1, help="Celery worker processes")
    parser.add_argument("--web-workers", type=int, default=1, help="uvicorn processes")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--latency-seconds", type=float, default=20.0)
    args = parser.parse_args()
    setup()
    from django.conf import settings

    from twin.telemetry import state
    from twin.telemetry.models import TelemetryAgent

    cluster = ensure_cluster(CLUSTER, args.cards)
    TelemetryAgent.objects.filter(cluster=cluster).delete()
    tokens = [TelemetryAgent.issue(cluster, f"bench-{k}")[1] for k in range(args.clients + 1)]
    lay, chunks = batches(cluster.pk, args.chunk)
    queue = f"ingest-bench-{uuid.uuid4().hex[:6]}"
    db = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    print(f"ingest benchmark: {lay.n:,} cards, {args.chunk:,} cards per POST, {args.clients} "
          f"clients, {args.web_workers} web + {args.workers} worker process(es), "
          f"{os.cpu_count()} CPUs, {db}, Redis "
          f"{settings.REDIS_URL}", flush=True)
    base, procs = start_services(queue, args.workers, args.web_workers)
    try:
        # warm up: layouts in the server and worker, state blobs, first tick
        throughput(base, cluster.pk, tokens[:1], lay, chunks[:1], 2.0)
        result = throughput(base, cluster.pk, tokens[: args.clients], lay, chunks,
                            args.seconds)
        raw = baseline(chunks, min(args.seconds, 10.0))
        latency = tick_latency(base, cluster.pk, tokens[-1], lay, args.latency_seconds)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
    table = stages(cluster.pk, lay, chunks)
    r = state.redis_client()
    leftovers = list(r.scan_iter(match=f"{PREFIX}:*", count=1000))
    for i in range(0, len(leftovers), 500):
        r.unlink(*leftovers[i:i + 500])

    print()
    print(f"posts                      {result['posts']:,} ({result['busy']} answered 503 and "
          f"retried, {result['errors']} errors)")
    print(f"card-samples accepted      {result['accepted']:,} in {args.seconds:g} s")
    print(f"endpoint rate              {result['endpoint_rate']:,.0f} card-samples/s")
    print(f"end-to-end rate            {result['e2e_rate']:,.0f} card-samples/s (applied by "
          f"the workers; drain tail {result['drain_tail_s']:.2f} s)")
    print(f"POST latency               p50 {result['post_p50_ms']:.0f} ms, "
          f"p99 {result['post_p99_ms']:.0f} ms")
    print(f"raw Redis pipeline         {raw:,.0f} card-samples/s (one process, SETRANGE)")
    print(f"ratio end-to-end / raw     {result['e2e_rate'] / raw:.2f}")
    target = "met" if result["e2e_rate"] >= 1_000_000 else "NOT met"
    print(f"target ≥ 1,000,000/s       {target}")
    if latency.get("samples"):
        print(f"ingest → tick at 1 Hz      p50 {latency['p50_ms']:.0f} ms, p99 "
              f"{latency['p99_ms']:.0f} ms, max {latency['max_ms']:.0f} ms over "
              f"{latency['samples']} batches of {lay.n:,} cards ({latency['missed']} unseen)")
    print()
    print("where the time goes (one batch, in this process, median of 5):")
    for label, ms, cards in table:
        print(f"  {label:30s} {ms:8.2f} ms  ({cards / ms * 1000:,.0f} card-samples/s)")


if __name__ == "__main__":
    main()
