"""Benchmark: convert the million-card cluster from the database, then run a scenario on it.

Usage::

    psql -h 127.0.0.1 -U postgres -c 'CREATE DATABASE twin_scen_bench'
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/twin_scen_bench \\
    REDIS_URL=redis://127.0.0.1:6379/0 .venv/bin/python benchmarks/scenario_inputs.py

It migrates, builds the ``million`` preset as ``million-scen`` unless that
cluster exists (``--rebuild`` forces it), ``VACUUM ANALYZE``s on PostgreSQL,
then measures:

1. ``twin.scenarios.inputs.cluster_input`` — the model → ``ClusterSpec``
   converter (claim: well under a second at 1,048,576 cards): queries, and
   wall time over ``--repeat`` runs (min / median / max), and the ratio
   against the naive way measured in the same run: streaming every link row
   of the cluster into Python (what a converter that rebuilds the wiring row
   by row must read at least);
2. a ``topology`` scenario on the cluster through the same code path the
   API and the Celery task use (``runner.submit`` + ``runner.execute``, in
   this process): validation time (the request's share) and run time, with
   the key figures of the result.

``--drop`` deletes the cluster afterwards.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.settings")
os.environ.setdefault("TWIN_ALLOW_INSECURE_KEY", "1")

NAME = "million-scen"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="million")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--drop", action="store_true")
    parser.add_argument("--skip-run", action="store_true", help="Only time the converter.")
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from twin.hardware.builder import build_cluster, delete_cluster
    from twin.hardware.models import Card, Cluster, Link
    from twin.scenarios.inputs import cluster_input
    from twin.scenarios.runner import execute, submit

    call_command("migrate", verbosity=0)
    cluster = Cluster.objects.filter(name=NAME).first()
    if cluster is None or args.rebuild:
        t0 = time.perf_counter()
        built = build_cluster(args.preset, name=NAME, replace=True)
        print(f"built {built['cards']:,} cards, {built['links']:,} links in "
              f"{time.perf_counter() - t0:.1f} s")
        cluster = Cluster.objects.get(pk=built["cluster_id"])
        if connection.vendor == "postgresql":
            with connection.cursor() as cur:
                for table in ("hardware_supernode", "hardware_server", "hardware_card",
                              "hardware_networkdevice", "hardware_link"):
                    cur.execute(f"VACUUM ANALYZE {table}")
    cards = Card.objects.filter(supernode__cluster=cluster).count()
    print(f"cluster {cluster.name!r}: {cards:,} cards on {connection.vendor}")

    with CaptureQueriesContext(connection) as queries:
        info = cluster_input(cluster)
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        info = cluster_input(cluster)
        times.append(time.perf_counter() - t0)
    print(f"cluster_input: {len(queries.captured_queries)} queries; wall min / median / max "
          f"{min(times) * 1e3:.0f} / {statistics.median(times) * 1e3:.0f} / "
          f"{max(times) * 1e3:.0f} ms over {args.repeat} runs")
    t0 = time.perf_counter()
    naive_rows = sum(1 for _ in Link.objects.filter(cluster=cluster).values_list(
        "a_card_id", "a_device_id", "b_card_id", "b_device_id").iterator(chunk_size=50_000))
    naive = time.perf_counter() - t0
    print(f"naive baseline: stream {naive_rows:,} link rows into Python {naive * 1e3:,.0f} ms; "
          f"cluster_input is {naive / statistics.median(times):,.0f}x faster")
    net = info.spec.network
    print(f"  spec: {info.spec.n_supernodes:,} supernodes in {len(info.spec.supernodes)} "
          f"group(s), {info.spec.n_cards:,} cards, access {net.access.cards_per_switch} "
          f"cards/server, {net.aggregation.nics_per_switch} NICs/server, "
          f"{len(net.core)} core tiers of radix {net.core[0].radix}" if net else "")

    if not args.skip_run:
        t0 = time.perf_counter()
        run = submit("topology", {}, cluster, None, refresh=True, enqueue=False)
        validated = time.perf_counter() - t0
        t0 = time.perf_counter()
        run = execute(run.pk, worker="benchmark")
        ran = time.perf_counter() - t0
        assert run is not None
        result = run.result or {}
        print(f"topology scenario: validate {validated:.2f} s (the request), run {ran:.2f} s "
              f"(the worker) → {run.status}")
        if result:
            print(f"  avg_hops {result['avg_hops']:.6f} (= {result['avg_hops_exact']}), "
                  f"diameter {result['diameter_hops']}, method {result['method']}, "
                  f"bisection {result['bisection_links']:,} links, latency max "
                  f"{result['latency_ns']['max']:,.0f} ns")
        else:
            print(f"  error: {run.error}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MiB")
    if args.drop:
        delete_cluster(cluster.pk)
        print(f"deleted {NAME!r}")


if __name__ == "__main__":
    main()
