"""Benchmark: the ``facility`` scenario kind, 24 h at 1 s on the demo cluster (issue 24
item 5: <= 10 s), through the kind, against the engine computing every step.

Usage (PostgreSQL; a scratch database)::

    psql -h 127.0.0.1 -U postgres -c 'CREATE DATABASE twin_bench'
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/twin_bench \\
    REDIS_URL=redis://127.0.0.1:6379/0 PYTHONPATH=. .venv/bin/python \\
        benchmarks/facility_kind.py [--preset demo] [--baseline-hours 1]

Phases, one process, one core (numpy single-threaded):

1. ``build_cluster`` of the preset (its facility is built by the build hook). The
   plant is simulated as built: the benchmark edits no row (an earlier version
   repaired design flows and the chiller's place before timing; a plant that the
   engine refuses now stops the benchmark with the engine's message).
2. ``FacilityKind.prepare`` (the plant from its rows, every field checked), timed on
   its own and reported, not counted in the target.
3. **Timed, the target**: ``FacilityKind.run`` alone (the plant read again, the
   engine's what-if) of a 24 h run at 1 s steps with the events of
   ``benchmarks/thermal.py`` (a pump trip, a 6 h hot day +6 °C, a 10 min CDU trip, a
   1 h +15 % surge, a lost feed unit, a lost tower cell) and capping on — what the
   worker does. The same run with capping off is timed too (where the cost is: see
   docs/benchmarks.md).
4. **Baseline, same run**: the same engine on the same plant computing every step
   (``skip_quiescent=False``) for ``--baseline-hours``, scaled to 24 h; the engine's
   own run (quiescent skips and closed-form relaxations) over the same hours, and the
   largest deviation of its temperature series from the baseline's (the accuracy the
   shortcuts cost).

Prints wall and CPU time (``time.process_time``: the honest figure on a shared
machine), the ratio, the steps computed, the relaxations jumped and the target check.
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.settings")
os.environ.setdefault("TWIN_DEBUG", "1")

TARGET_S = 10.0
HOUR = 3600.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="demo")
    parser.add_argument("--baseline-hours", type=float, default=1.0)
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command
    from django.db.models import Q

    from simulation.facility.whatif import WhatIfInput, run
    from twin.facility.models import CoolingElement, PowerElement
    from twin.facility.plant import plant_for_cluster
    from twin.hardware.builder import build_cluster
    from twin.hardware.models import Cluster
    from twin.scenarios.kinds import get_kind

    call_command("migrate", verbosity=0)
    started = time.perf_counter()
    built = build_cluster(args.preset, name=f"facility-kind-bench-{args.preset}", replace=True)
    build_s = time.perf_counter() - started
    cluster = Cluster.objects.get(pk=built["cluster_id"])
    els = CoolingElement.objects.filter(site__cluster=cluster)
    cdus = list(els.filter(kind="cdu").order_by("pk").values_list("key", flat=True))
    tower = els.filter(Q(kind="cooling_tower") | Q(kind="dry_cooler")).order_by("pk").first()
    feed = PowerElement.objects.filter(site__cluster=cluster, kind="feed").order_by("pk").first()
    assert cdus and tower is not None and feed is not None, "the preset built no facility"
    events = [
        {"at_s": 1 * HOUR, "kind": "pump_trip", "target": cdus[0]},
        {"at_s": 2 * HOUR, "kind": "hot_day", "value": 6.0, "duration_s": 6 * HOUR},
        {"at_s": 4 * HOUR, "kind": "cdu_trip", "target": cdus[-1], "duration_s": 600.0},
        {"at_s": 10 * HOUR, "kind": "load_surge", "value": 1.15, "duration_s": HOUR},
        {"at_s": 14 * HOUR, "kind": "feed_loss", "target": feed.key},
        {"at_s": 18 * HOUR, "kind": "cooling_loss", "target": tower.key},
    ]
    kind = get_kind("facility")
    params = {"horizon_s": 24 * HOUR, "dt_s": 1.0, "capping": True, "events": events}

    started = time.perf_counter()
    inputs = kind.prepare(params, cluster)
    prepare_s = time.perf_counter() - started
    started, cpu0 = time.perf_counter(), time.process_time()
    result = kind.run(inputs, lambda share, message: None)
    run_s, run_cpu = time.perf_counter() - started, time.process_time() - cpu0

    started = time.perf_counter()
    uncapped = kind.run(kind.prepare({**params, "capping": False}, cluster),
                        lambda share, message: None)
    uncapped_s = time.perf_counter() - started

    plant = plant_for_cluster(cluster)
    hours = args.baseline_hours
    base_inp = WhatIfInput.from_dict({**inputs["whatif"], "horizon_s": hours * HOUR,
                                      "events": [e for e in inputs["whatif"]["events"]
                                                 if e["at_s"] < hours * HOUR]})
    started, cpu0 = time.perf_counter(), time.process_time()
    every = run(plant, base_inp, skip_quiescent=False)
    baseline_s = (time.perf_counter() - started) * 24.0 / hours
    baseline_cpu = (time.process_time() - cpu0) * 24.0 / hours
    fast = run(plant, base_inp)
    deviation = max(max(abs(a - b) for a, b in zip(fast.series[k], every.series[k],
                                                     strict=True))
                    for k in ("max_card_c", "mean_card_c", "max_rack_return_c",
                              "max_cdu_supply_c", "facility_supply_c"))

    first = result["first_at_limit"][0] if result["first_at_limit"] else None
    print(f"preset {args.preset}: {inputs['racks']} racks on {len(cdus)} CDUs, "
          f"{inputs['whatif']['cards_per_rack']} cards a rack (build {build_s:.1f} s)")
    print(f"kind.run, 24 h at 1 s: {run_s:.2f} s wall, {run_cpu:.2f} s CPU "
          f"({result['steps_computed']:,} of {result['steps']:,} steps computed, "
          f"{result.get('relaxations_jumped', 0)} relaxations in closed form); kind.prepare "
          f"before it (not in the target): {prepare_s * 1e3:.0f} ms")
    print(f"the same with capping off: {uncapped_s:.2f} s ({uncapped['steps_computed']:,} "
          f"steps computed)")
    print(f"baseline, every step ({hours:g} h scaled to 24 h): {baseline_s:.1f} s wall, "
          f"{baseline_cpu:.1f} s CPU; ratio {baseline_s / run_s:.1f}x wall, "
          f"{baseline_cpu / run_cpu:.1f}x CPU")
    print(f"over those {hours:g} h the engine's run ({fast.steps_computed:,} steps computed) "
          f"deviates from every step by at most {deviation:.2e} K")
    print(f"mean PUE {result['energy']['mean_pue']:.3f}; racks at their limit "
          f"{result['racks_at_limit']} of {result['racks_total']}"
          + (f"; first {first['rack']} at {first['time_to_limit_s']:.0f} s" if first else ""))
    print(f"target: kind.run <= {TARGET_S:g} s: {'met' if run_s <= TARGET_S else 'NOT met'}")


if __name__ == "__main__":
    main()
