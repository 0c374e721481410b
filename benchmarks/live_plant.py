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

``--million NAME`` (issue 24: one step of the million-card plant adds <= 50 ms on one
core to a 1 s tick) measures instead, on the built ``million`` preset named ``NAME``
(built with its facility if missing: setup, not timed), in CPU time
(``time.process_time``, one process, numpy single-threaded):

* **the whole live-plant addition**: ``step_live`` (Redis state in, the engine's step,
  every element's load against its rating, readings, drift slots, the publish) plus
  the plant's alert rules (``decide_plant_alerts``, then ``commit_alerts``: coolant
  supply and flow per rack, CDU load, feed headroom and feed units out, model drift,
  leaks) — median of
  ``--ticks``;
* **every rated element's load**, vectorised (``FacilityReading.loads`` + ``_rated``'s
  columns) against the per-element loop it replaced (``FacilityReading.elements``'
  dicts, a dict per element, rounded per value: :func:`_rated_loop` below), on the same
  step, in the same run: the ratio.
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core (the budget)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

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


def _rated_loop(reading, model) -> list[dict]:
    """The per-element loop ``twin.facility.live._rated`` was before it was vectorised
    (kept here as the benchmark's baseline): the engine's per-element dicts, one more
    dict per rated element, each value rounded in Python."""
    from twin.facility.live import _round

    elements = reading.elements(model)
    out = [{"key": p["key"], "kind": e.kind, "chain": "power", "load_w": p["input_w"],
            "rating_w": p["planned_w"], "available_w": p["available_w"],
            "headroom_w": p["headroom_w"], "load_fraction": p["load_fraction"]}
           for p, e in zip(elements["power"], model.plant.power, strict=True)]
    measured = {str(c["key"]): c for c in elements["cdus"]}
    for c in elements["cooling"]:
        m = measured.get(str(c["key"]), c)
        heat = float(m["heat_w"])
        limit = min(float(c["capacity_w"]), float(c["available_w"]))
        out.append({"key": c["key"], "kind": c["kind"], "chain": "cooling", "load_w": heat,
                    "rating_w": c["capacity_w"], "available_w": c["available_w"],
                    "headroom_w": limit - heat,
                    "load_fraction": heat / limit if limit > 0 else float("inf")})
    return [_round(x) for x in out]


def million(name: str, ticks: int) -> None:
    import numpy as np

    from simulation.facility.thermal import Conditions
    from twin.facility import live
    from twin.hardware.builder import build_cluster
    from twin.hardware.models import Cluster
    from twin.telemetry import state
    from twin.telemetry.processing.health import commit_alerts, decide_plant_alerts

    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        t0 = time.perf_counter()
        cluster = Cluster.objects.get(pk=build_cluster("million", name=name)["cluster_id"])
        print(f"built {name!r} in {time.perf_counter() - t0:.0f} s (setup, not timed)")
    cid = cluster.pk
    lay = state.layout(cid)
    rk = lay.groups["rack"]
    plant = live.live_plant(cid, lay.version, rk.ids)
    assert plant is not None, "the cluster has no facility"
    model = plant.model
    print(f"\nmillion-card plant {name!r}: {lay.n:,} cards, {len(rk.ids):,} racks, "
          f"{len(plant.cdu_keys):,} CDUs, {len(model.plant.cooling):,} cooling and "
          f"{len(model.plant.power):,} power elements")
    r = state.redis_client()
    prefix = state.conf().prefix
    rng = np.random.default_rng(0)
    rack_w = np.asarray(rk.static_w, float) + rng.uniform(0.6, 0.9, len(rk.ids)) * np.asarray(
        rk.budget_w, float)
    card_w = np.full(len(rk.ids), 600.0)
    alerts_key = f"{prefix}:bench:c{cid}:plant-alerts"
    steps, rules, whole = [], [], []
    now = time.time()
    for k in range(ticks + 1):
        now += 1.0
        t0 = time.process_time()
        summary = live.step_live(r, prefix, cid, lay.version, rk.ids, rack_w, card_w, now)
        t1 = time.process_time()
        assert summary is not None
        decided = decide_plant_alerts(lay, now=now, plant=summary,
                                      alert_state=r.get(alerts_key))
        r.set(alerts_key, decided.packed())
        commit_alerts(r, cid, [(alerts_key, decided.ops, None)])
        t2 = time.process_time()
        if k:  # the first step settles the plant (a new state): not a tick's cost
            steps.append(t1 - t0)
            rules.append(t2 - t1)
            whole.append(t2 - t0)
    r.delete(alerts_key)
    plant_w = model.plant.racks.budget_w * rng.uniform(0.6, 0.9, len(model.plant.racks))
    reading = model.step(model.settle(plant_w, Conditions.of(model.plant)).thermal, plant_w,
                         1.0)
    vec, loop = [], []
    for _ in range(ticks):
        t0 = time.process_time()
        live._rated(plant, reading.loads(model), [], [])
        vec.append(time.process_time() - t0)
        t0 = time.process_time()
        _rated_loop(reading, model)
        loop.append(time.process_time() - t0)
    new = live.rated_rows(live._rated(plant, reading.loads(model), [], []))
    old = _rated_loop(reading, model)
    assert [e["key"] for e in new] == [e["key"] for e in old]
    worst = max(abs((a["headroom_w"] or 0.0) - (b["headroom_w"] or 0.0))
                for a, b in zip(new, old, strict=True))
    med = {n: statistics.median(x) * 1e3 for n, x in
           (("step", steps), ("rules", rules), ("whole", whole), ("vec", vec), ("loop", loop))}
    print(f"  CPU ms (process_time), medians of {ticks}:")
    print(f"  step_live (step, loads, rated, readings, drift, publish): {med['step']:.1f} ms")
    print(f"  the plant's alert rules:                                  {med['rules']:.1f} ms")
    print(f"  whole live-plant addition:                                {med['whole']:.1f} ms "
          f"(target <= 50 ms: {'met' if med['whole'] <= 50 else 'NOT met'})")
    print(f"  rated, vectorised: {med['vec']:.2f} ms; per-element loop (baseline, same run): "
          f"{med['loop']:.1f} ms; ratio {med['loop'] / med['vec']:.1f}x "
          f"({len(new):,} elements, max |headroom difference| {worst:.2g} W)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--supernodes", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--ticks", type=int, default=20)
    parser.add_argument("--million", metavar="NAME",
                        help="measure the million-card plant of the cluster NAME instead")
    args = parser.parse_args()

    import django

    django.setup()
    from django.conf import settings

    settings.TELEMETRY_AUTO_DRAIN = False
    if args.million:
        million(args.million, args.ticks)
        return
    for n in args.supernodes:
        run(n, args.ticks)


if __name__ == "__main__":
    main()
