"""Benchmark: what the live plant adds to a telemetry tick, against the tick without it.

Usage (PostgreSQL and Redis; a scratch database and Redis db)::

    psql -h 127.0.0.1 -U postgres -c 'CREATE DATABASE twin_bench'
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/twin_bench \\
    REDIS_URL=redis://127.0.0.1:6379/0 PYTHONPATH=. .venv/bin/python \\
        benchmarks/live_plant.py [--supernodes 8 64] [--ticks 20]

Per cluster size (``demo`` preset = seed-512 supernodes; the builder gives each its
facility), same process, same Redis:

1. one batch of every card's power, applied through the real ingest queue;
2. **baseline**: ``--ticks`` forced ticks with the plant turned off for the cluster
   (``twin.facility.live``'s cache says "no facility": what a cluster without a
   facility costs);
3. ``--ticks`` forced ticks with the plant (the first compiles it: reported apart);
4. ``--ticks`` forced ticks with live power capping on (``apply``, uniform: the
   controller holds racks, power elements, the contract and card thermal limits;
   ``twin.facility.capping_live``), against the ticks with the plant and capping off;
5. the plant step alone (``step_live``: Redis state read, engine step, publish).

Prints the median tick with and without, the added milliseconds and the ratio, and the
compile time. Target: the plant adds <= 50 ms to a tick of a cluster the size of the
million-card preset's unsharded tick shard (131,072 cards), and under 10 % at the demo.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.settings")
os.environ.setdefault("TWIN_DEBUG", "1")
os.environ.setdefault("TWIN_TELEMETRY_PREFIX", "twbenchplant")


def _ticks(cid: int, n: int) -> list[float]:
    from twin.telemetry import processing

    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        processing.tick(cid, force=True)
        out.append(time.perf_counter() - t0)
    return out


def run(supernodes: int, ticks: int) -> None:
    import numpy as np

    from twin.facility import live
    from twin.hardware.builder import build_cluster
    from twin.telemetry import processing, state
    from twin.telemetry.enqueue import drainers, enqueue
    from twin.telemetry.ingest import Batch
    from twin.telemetry.metrics import METRIC_INDEX

    name = f"bench-plant-{supernodes}-{int(time.time())}"  # (a scratch database: left there)
    t0 = time.perf_counter()
    built = build_cluster("demo", supernodes=supernodes, name=name)
    cid = built["cluster_id"]
    print(f"\n{supernodes} supernodes: built in {time.perf_counter() - t0:.1f} s")
    lay = state.layout(cid)
    rng = np.random.default_rng(0)
    power = rng.uniform(500, 700, lay.n).astype(np.float32)
    batch = Batch(cluster_id=cid, version=lay.version, ts=time.time(),
                  metric_idx=np.array([METRIC_INDEX["power_w"]], np.uint8),
                  values=power[None, :], ordinals=np.arange(lay.n, dtype=np.int32))
    enqueue(batch, agent_id=None, seq=None)
    for slot in range(drainers()):
        processing.drain(slot)
    racks = len(lay.groups["rack"].ids)
    print(f"  {lay.n:,} cards, {racks:,} racks with cards")

    # the plant off (a cluster without a facility), for as long as the run lasts
    live._cache[cid] = (lay.version, (), float("inf"), None)
    base = _ticks(cid, ticks)
    live._cache.pop(cid, None)
    t0 = time.perf_counter()
    live.live_plant(cid, lay.version, lay.groups["rack"].ids)
    compile_s = time.perf_counter() - t0
    with_plant = _ticks(cid, ticks)
    summary = state.plant_summary(cid)
    assert summary is not None, "the plant did not step"
    from twin.facility.models import CappingPolicy

    policy = CappingPolicy.objects.create(cluster_id=cid, mode="apply", policy="uniform")
    with_caps = _ticks(cid, ticks)
    policy.delete()
    from twin.facility.capping_live import read_caps

    caps = read_caps(state.redis_client(), state.conf().prefix, cid)
    assert caps is not None and len(caps["caps_w"]) == lay.n, "capping did not run"
    r = state.redis_client()
    rk = lay.groups["rack"]
    steps = []
    for _ in range(ticks):
        t0 = time.perf_counter()
        live.step_live(r, state.conf().prefix, cid, lay.version, rk.ids,
                       np.asarray(rk.static_w, float) + 8 * 600.0, np.full(racks, 600.0),
                       time.time())
        steps.append(time.perf_counter() - t0)
    b, w, s, c = (statistics.median(x) * 1e3 for x in (base, with_plant, steps, with_caps))
    print(f"  plant compiled (rows -> Plant -> model) once per layout: {compile_s * 1e3:.0f} ms")
    print(f"  tick without the plant (baseline): {b:.1f} ms median of {ticks}")
    print(f"  tick with the plant:               {w:.1f} ms")
    print(f"  added: {w - b:+.1f} ms per tick, ratio {w / b:.3f}; plant step alone "
          f"{s:.1f} ms")
    print(f"  tick with the plant and capping:   {c:.1f} ms: capping adds {c - w:+.1f} ms, "
          f"ratio {c / w:.3f} against the plant's tick ({c / b:.3f} against the baseline)")
    print(f"  PUE now {summary['pue']}, {len(summary['cdus'])} CDUs, "
          f"{len(summary['feeds'])} feeds")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--supernodes", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--ticks", type=int, default=20)
    args = parser.parse_args()

    import django

    django.setup()
    from django.conf import settings

    settings.TELEMETRY_AUTO_DRAIN = False
    for n in args.supernodes:
        run(n, args.ticks)


if __name__ == "__main__":
    main()
