"""Benchmark: a batch through the stream against a batch applied at once, and a
minute's rows by the ORM against COPY — the two costs behind live_million's cuts.

Usage (PostgreSQL for the COPY half; the cluster is built once and kept)::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/twin_bench REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python benchmarks/ingest_paths.py
    # options: --cards 1048576 --chunk 65536 --repeat 3

In this process, nothing else running, on the ``live-million`` cluster (or
``--cards`` of seed-512 supernodes):

1. **Per batch**, CPU of this process and of Redis (``INFO cpu``): the stream path
   (``enqueue`` with the payload, then ``drain``: what the web process and a worker
   do) against ``TELEMETRY_APPLY_ON_INGEST`` (``enqueue`` takes the sequence number,
   the batch is written here). Baseline: the stream path.
2. **A finished minute** of a cluster past ``TELEMETRY_PERSIST_CARDS_MAX`` (its
   rack, supernode and cluster rows): ``TelemetryMinute.objects.bulk_create`` (what
   ``persist_minute`` did) against ``minutes.insert_minutes`` (COPY on PostgreSQL).
   Baseline: the ORM.
3. **A tick shard's rollups** (131,072 cards, racks and supernodes, 26 metrics):
   each level reduced from the cards (``reduce_groups``, what the shards did)
   against ``reduce_levels`` (supernodes from the racks, racks summed in float32).
   Baseline: level by level.
4. **The Redis command packer** (batches applied at once, in this one thread):
   redis-py's default, hiredis's (copies every value into one string a command),
   against the Python packer the twin uses (``config.command_packer``: large values
   sent as they are). Baseline: hiredis's. (Live, in the threaded web process, the
   difference is larger: ``live_million``'s card-samples per web CPU-second.)
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.settings")
os.environ.setdefault("TWIN_SECRET_KEY", "benchmark-only")
os.environ["TWIN_TELEMETRY_PREFIX"] = f"twbench{uuid.uuid4().hex[:6]}"

from benchmarks.seedcluster import ensure_cluster, setup  # noqa: E402

CLUSTER = "live-million"


def batches(cluster_id: int, chunk: int) -> list[Any]:
    """One simulated reading of every card, as columnar batches of ``chunk`` cards."""
    import numpy as np

    from twin.telemetry import state
    from twin.telemetry.ingest import Batch
    from twin.telemetry.simulator import Simulator

    lay = state.layout(cluster_id)
    sim = Simulator(lay.tdp_w, lay.idle_w, lay.hbm_gib, lay.server_ids, fault_rate=0)
    values, _ = sim.step(1.0)
    values = np.where(np.isfinite(values), values, 0).astype("<f4")
    now = time.time()
    return [Batch(cluster_id=cluster_id, version=lay.version, ts=now,
                  metric_idx=np.arange(values.shape[0], dtype=np.uint8),
                  values=values[:, s:s + chunk], start=s)
            for s in range(0, lay.n, chunk)]


def redis_cpu() -> float:
    from twin.telemetry import state

    info = state.redis_client().info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def use_packer(python: bool) -> None:
    """Make the process's Redis client anew with redis-py's Python command packer
    (``config.command_packer``, the twin's) or with its default (hiredis's)."""
    from twin.telemetry import config

    config._client = None
    config.command_packer = _PACKERS[python]  # type: ignore[assignment]


def _hiredis_packer() -> None:
    return None  # redis-py then picks hiredis's packer


_PACKERS: dict[bool, Any] = {}


def per_batch(cluster_id: int, chunk: int, apply_on_ingest: bool,
              python_packer: bool = True) -> tuple[float, float]:
    """(this process, Redis) CPU seconds per batch for one reading of every card."""
    from django.conf import settings

    from twin.telemetry import keys, processing, state
    from twin.telemetry.enqueue import drainers, enqueue

    settings.TELEMETRY_APPLY_ON_INGEST = apply_on_ingest
    use_packer(python_packer)
    todo = batches(cluster_id, chunk)
    state.redis_client().set(keys.tick_gate(cluster_id), 1, px=600_000)  # no ticks here
    cpu, rcpu = time.process_time(), redis_cpu()
    for b in todo:
        assert enqueue(b, agent_id=None, seq=None).status in ("queued", "applied")
    for slot in range(drainers()):  # what the workers' drains do (nothing when applied)
        processing.drain(slot, max_seconds=60)
    return ((time.process_time() - cpu) / len(todo), (redis_cpu() - rcpu) / len(todo))


def minute_rows(cluster_id: int, minute: int) -> list[Any]:
    """The rack, supernode and cluster rows of one minute (random values)."""
    import numpy as np

    from twin.telemetry import state

    lay = state.layout(cluster_id)
    rng = np.random.default_rng(minute)
    stamp = dt.datetime.fromtimestamp(minute * 60, tz=dt.UTC)
    rows = []
    for level in ("rack", "supernode", "cluster"):
        for gid in lay.groups[level].ids:
            v = rng.uniform(0, 100, 26).astype("<f4").tobytes()
            rows.append((cluster_id, level, int(gid), stamp, 40, v, v, 30_000.0))
    return rows


def write_minute(rows: list[Any], orm: bool) -> tuple[float, float]:
    """(wall, CPU) seconds to insert ``rows``."""
    from twin.telemetry.models import TelemetryMinute
    from twin.telemetry.processing.minutes import insert_minutes

    wall, cpu = time.perf_counter(), time.process_time()
    if orm:
        TelemetryMinute.objects.bulk_create(
            [TelemetryMinute(cluster_id=c, level=lv, object_id=o, minute=m, samples=n,
                             mean=mean, max=mx, draw_w=d)
             for c, lv, o, m, n, mean, mx, d in rows], batch_size=2000, ignore_conflicts=True)
    else:
        insert_minutes(rows)
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cards", type=int, default=1_048_576)
    parser.add_argument("--chunk", type=int, default=65_536, help="cards per batch")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    setup()
    from django.conf import settings
    from django.db import connection

    from twin.telemetry import state
    from twin.telemetry.models import TelemetryMinute

    settings.TELEMETRY_AUTO_DRAIN = False
    cluster = ensure_cluster(CLUSTER if args.cards == 1_048_576 else f"paths-{args.cards}",
                             args.cards)
    cid = cluster.pk
    state.layout(cid)
    from twin.telemetry import config

    _PACKERS.update({True: config.command_packer, False: _hiredis_packer})
    per_batch(cid, args.chunk, False)  # (warm: the state blobs, the layout, the scripts)
    runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    hiredis: list[tuple[float, float]] = []
    for _ in range(args.repeat):
        for applied in (False, True):
            runs[applied].append(per_batch(cid, args.chunk, applied))
        hiredis.append(per_batch(cid, args.chunk, True, python_packer=False))
    use_packer(True)
    n = len(batches(cid, args.chunk))
    print(f"{args.cards:,} cards, {n} batches of ≤ {args.chunk:,} cards; machine: "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    total = {}
    for applied, label in ((False, "through the stream (enqueue + drain)"),
                           (True, "applied at once (TELEMETRY_APPLY_ON_INGEST)")):
        me = statistics.median(c for c, _ in runs[applied]) * 1000
        rd = statistics.median(r for _, r in runs[applied]) * 1000
        total[applied] = me + rd
        print(f"batch  {label:42s} {me:6.1f} ms this process + {rd:5.1f} ms Redis "
              f"= {me + rd:6.1f} ms CPU a batch (median of {args.repeat})")
    print(f"batch  ratio stream / applied at once: {total[False] / total[True]:.2f}x")
    me = statistics.median(c for c, _ in hiredis) * 1000
    rd = statistics.median(r for _, r in hiredis) * 1000
    print(f"batch  {'applied at once, hiredis command packer':42s} {me:6.1f} ms this process + "
          f"{rd:5.1f} ms Redis = {me + rd:6.1f} ms CPU a batch (median of {args.repeat})")
    print(f"batch  ratio hiredis packer / Python packer (applied at once): "
          f"{(me + rd) / total[True]:.2f}x")

    base = int(time.time() // 60) - 10_000
    times: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for k in range(args.repeat):
        for orm in (True, False):
            rows = minute_rows(cid, base + 2 * k + int(orm))
            times[orm].append(write_minute(rows, orm))
    TelemetryMinute.objects.filter(cluster_id=cid, minute__lt=dt.datetime.fromtimestamp(
        (base + 2 * args.repeat + 1) * 60, tz=dt.UTC)).delete()
    for orm, label in ((True, "ORM bulk_create"), (False, f"insert_minutes ({connection.vendor})")):
        wall = statistics.median(w for w, _ in times[orm])
        cpu = statistics.median(c for _, c in times[orm])
        print(f"minute {label:42s} {len(rows):,} rows: {wall * 1000:7.0f} ms wall, "
              f"{cpu * 1000:7.0f} ms CPU (median of {args.repeat})")
    ratio = (statistics.median(c for _, c in times[True])
             / statistics.median(c for _, c in times[False]))
    print(f"minute ratio ORM / insert_minutes (CPU): {ratio:.2f}x")
    rollups(cid, args.repeat)


def rollups(cluster_id: int, repeat: int) -> None:
    """Part 3: one tick shard's rollups, level by level against nested."""
    import numpy as np

    from twin.telemetry import state
    from twin.telemetry.processing import shards
    from twin.telemetry.processing.aggregate import reduce_groups, reduce_levels

    lay = state.layout(cluster_id)
    start, end = (shards.plan(lay) or [(0, lay.n)])[0]
    sub = shards.shard_layout(lay, start, end)
    rng = np.random.default_rng(1)
    values = rng.uniform(0, 700, (26, end - start)).astype(np.float32)
    values[:, rng.random(end - start) < 0.05] = np.nan
    levels = ("rack", "supernode")

    def each() -> dict[str, np.ndarray]:
        return {lv: reduce_groups(values, sub.groups[lv]) for lv in levels}

    def nested() -> dict[str, np.ndarray]:
        return reduce_levels(values, sub.groups, levels)

    took = {}
    for name, fn in (("each level from the cards", each), ("reduce_levels", nested)):
        fn()
        samples = []
        for _ in range(max(repeat, 5)):
            t = time.process_time()
            fn()
            samples.append(time.process_time() - t)
        took[name] = statistics.median(samples)
        print(f"rollup {name:42s} {end - start:,} cards: {took[name] * 1000:6.1f} ms CPU")
    a, b = each(), nested()
    worst = max(float(np.nanmax(np.abs(a[lv] - b[lv]) / np.maximum(np.abs(a[lv]), 1e-9)))
                for lv in levels)
    print(f"rollup ratio level by level / reduce_levels: "
          f"{took['each level from the cards'] / took['reduce_levels']:.2f}x "
          f"(largest relative difference {worst:.1e})")


if __name__ == "__main__":
    main()
