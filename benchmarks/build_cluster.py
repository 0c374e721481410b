"""Benchmark: build the ``million`` preset into PostgreSQL, against a raw COPY.

Usage (PostgreSQL only; SQLite is refused)::

    psql -h 127.0.0.1 -U postgres -c 'CREATE DATABASE twin_bench'
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/twin_bench \\
    REDIS_URL=redis://127.0.0.1:6379/0 .venv/bin/python benchmarks/build_cluster.py

What it measures, in one run:

1. **COPY baselines** (each in a child process, so its memory does not
   count towards the build's peak RSS): the exact rows the builder writes
   for ``million`` are first generated to binary COPY files (not timed),
   then streamed with psycopg ``cursor.copy()`` into the *real* tables —
   same indexes, unique and check constraints — and rolled back. Twice:
   with PostgreSQL's row-by-row foreign-key triggers (what a plain COPY
   into these tables costs; checked with ``SET CONSTRAINTS ALL IMMEDIATE``)
   and with them off (``session_replication_role = replica``: the floor,
   what PostgreSQL needs just to store and index the rows). The ratio
   target is judged against the floor, the stricter of the two.
2. ``VACUUM ANALYZE`` of the hardware tables (the rolled-back rows leave
   dead tuples), then **the build**: ``build_cluster("million")`` end to
   end — validation, planning, id reservation, row generation, COPY,
   constraint checks, commit. Wall time, peak RSS (``getrusage``), rows/s,
   and the ratio build / COPY.
3. **API pages**: ``GET /api/cards/?cluster=<id>&limit=100`` through DRF's
   ``APIClient`` (in-process, force-authenticated superuser): the first
   page and following ``next`` cursors, then cursors at random depths of
   the million cards; p50/p95 over ~50 pages.

Targets: build ≤ 120 s and ≤ 2× the COPY baseline; page p50 < 50 ms.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.settings")
os.environ.setdefault("TWIN_ALLOW_INSECURE_KEY", "1")

BENCH_NAME = "million-bench"
TABLES = ("hardware_supernode", "hardware_rack", "hardware_server", "hardware_card",
          "hardware_networkdevice", "hardware_link")


def require_postgres() -> None:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        sys.exit("benchmarks/build_cluster.py measures PostgreSQL COPY: set DATABASE_URL="
                 "postgres://… (SQLite is not benchmarked; it is for the small demo).")


def setup() -> None:
    require_postgres()
    # the API is timed in-process: no collected static files needed
    warnings.filterwarnings("ignore", message="No directory at")
    import django

    django.setup()


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def vacuum() -> None:
    from django.db import connection

    with connection.cursor() as cur:
        for table in TABLES:
            cur.execute(f"VACUUM ANALYZE {table}")


def drop_bench_clusters() -> None:
    from django.db import transaction

    from twin.hardware.builder import delete_cluster
    from twin.hardware.models import Cluster

    for pk in Cluster.objects.filter(name__in=[BENCH_NAME, "copy-baseline"]).values_list(
            "pk", flat=True):
        with transaction.atomic():
            delete_cluster(pk)


# --------------------------------------------------------------------------
# 1. the COPY baseline (child process)
# --------------------------------------------------------------------------

def copy_baseline(preset: str, fk_triggers: bool = True) -> dict[str, float]:
    """Generate the preset's rows to files (untimed), then time COPY of them."""
    from django.db import connection, transaction
    from django.utils import timezone

    from twin.hardware.builder import Generator, IdBases, plan_build
    from twin.hardware.builder.columns import Block
    from twin.hardware.builder.plan import catalogue_tdp
    from twin.hardware.builder.postgres import (
        PG_HEADER,
        PG_TRAILER,
        PostgresWriter,
        pack_binary,
        pg_kind,
    )
    from twin.hardware.builder.writer import fill_defaults, model_fields, table_models
    from twin.hardware.models import Cluster
    from twin.hardware.presets import get_preset

    accelerator_id, tdp = catalogue_tdp(get_preset(preset))
    plan = plan_build(preset, card_tdp_w=tdp)
    workdir = Path(tempfile.mkdtemp(prefix="twin-copy-"))
    files: list[tuple[str, Path]] = []
    size = 0
    result: dict[str, float] = {}
    try:
        with transaction.atomic():
            cluster = Cluster.objects.create(name="copy-baseline", preset=preset)
            writer = PostgresWriter(lambda rows, table: None)
            ids = IdBases(**{t: writer.reserve(t, n) for t, n in (
                ("supernode", plan.supernodes), ("rack", plan.racks),
                ("server", plan.servers), ("card", plan.cards), ("device", plan.devices),
                ("link", plan.links))})
            gen = Generator(plan, cluster.pk, "copy-baseline", accelerator_id, ids,
                            timezone.now())
            t0 = time.perf_counter()
            for table, blocks, _count in gen.tables():
                model = table_models()[table]
                fields = model_fields(model)
                kinds = [(f.column, pg_kind(f.db_type(connection))) for f in fields]
                cols = ", ".join(connection.ops.quote_name(f.column) for f in fields)
                sql = (f"COPY {model._meta.db_table} ({cols}) FROM STDIN (FORMAT BINARY)")
                path = workdir / f"{table}.bin"
                with path.open("wb") as out:
                    out.write(PG_HEADER)
                    for block in blocks():
                        out.write(pack_binary(kinds, Block(table, block.n,
                                                           fill_defaults(model, block.values))))
                    out.write(PG_TRAILER)
                size += path.stat().st_size
                files.append((sql, path))
            result["generate_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            with connection.cursor() as cur:
                if not fk_triggers:
                    cur.execute("SET LOCAL session_replication_role = replica")
                for sql, path in files:
                    t_table = time.perf_counter()
                    with cur.cursor.copy(sql) as copy, path.open("rb") as src:
                        while chunk := src.read(8 << 20):
                            copy.write(chunk)
                    result[f"copy_{path.stem}_s"] = time.perf_counter() - t_table
                t_fk = time.perf_counter()
                cur.execute("SET CONSTRAINTS ALL IMMEDIATE")
                result["fk_check_s"] = time.perf_counter() - t_fk
            result["copy_s"] = time.perf_counter() - t0
            transaction.set_rollback(True)
    finally:
        for _sql, path in files:
            path.unlink(missing_ok=True)
        workdir.rmdir()
    result["bytes"] = size
    result["rows"] = plan.rows + 1
    return result


# --------------------------------------------------------------------------
# 3. API pages
# --------------------------------------------------------------------------

def time_pages(cluster_id: int, follow: int = 10, deep: int = 40) -> dict[str, object]:
    from django.contrib.auth.models import User
    from rest_framework.test import APIClient

    from twin.hardware.models import Card

    user, _ = User.objects.get_or_create(username="bench", defaults={"is_superuser": True,
                                                                     "is_staff": True})
    client = APIClient()
    client.force_authenticate(user)
    url = f"/api/cards/?cluster={cluster_id}&limit=100"
    t0 = time.perf_counter()
    first = client.get(url)
    cold = (time.perf_counter() - t0) * 1e3
    if first.status_code == 404:
        return {"error": "/api/cards/ is not routed yet"}
    timings: list[float] = []
    next_url: str | None = url
    for _ in range(follow):
        t0 = time.perf_counter()
        resp = client.get(next_url)
        timings.append((time.perf_counter() - t0) * 1e3)
        assert resp.status_code == 200, resp.content[:300]
        assert len(resp.json()["results"]) == 100
        next_url = resp.json()["next"]
    ids = Card.objects.filter(supernode__cluster_id=cluster_id)
    lo = ids.order_by("id").values_list("id", flat=True).first()
    hi = ids.order_by("-id").values_list("id", flat=True).first()
    rng = random.Random(2)
    deep_timings: list[float] = []
    for _ in range(deep):
        position = rng.randint(lo, hi - 200)
        cursor = base64.b64encode(urlencode({"p": str(position)}).encode()).decode()
        t0 = time.perf_counter()
        resp = client.get(url, {"cursor": cursor})
        deep_timings.append((time.perf_counter() - t0) * 1e3)
        assert resp.status_code == 200, resp.content[:300]
        assert resp.json()["results"][0]["id"] == position + 1
    everything = timings + deep_timings

    def pct(values: list[float], q: float) -> float:
        return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]

    return {
        "pages": len(everything),
        "cold_first_request_ms": round(cold, 1),
        "first_page_ms": round(timings[0], 1),
        "p50_ms": round(statistics.median(everything), 1),
        "p95_ms": round(pct(everything, 95), 1),
        "follow_p50_ms": round(statistics.median(timings), 1),
        "deep_p50_ms": round(statistics.median(deep_timings), 1),
        "max_ms": round(max(everything), 1),
    }


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="million")
    parser.add_argument("--copy-baseline", choices=["triggers", "no-triggers"],
                        help="(internal) run only a COPY baseline and print JSON")
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--skip-api", action="store_true")
    parser.add_argument("--drop", action="store_true",
                        help="delete the built cluster at the end (default: keep it)")
    args = parser.parse_args()
    setup()
    if args.copy_baseline:
        print(json.dumps(copy_baseline(args.preset, args.copy_baseline == "triggers")))
        return

    from django.core.management import call_command
    from django.db import connection

    from twin.hardware.builder import build_cluster, delete_cluster

    call_command("migrate", verbosity=0)
    with connection.cursor() as cur:
        cur.execute("SELECT version()")
        pg_version = cur.fetchone()[0].split(" on ")[0]
        settings = {}
        for name in ("shared_buffers", "max_wal_size", "synchronous_commit", "wal_level"):
            cur.execute(f"SHOW {name}")
            settings[name] = cur.fetchone()[0]
    print(f"{pg_version}; {settings}; {os.cpu_count()} CPUs", flush=True)
    drop_bench_clusters()
    vacuum()

    baselines: dict[str, dict[str, float]] = {}
    if not args.skip_baseline:
        for mode in ("no-triggers", "triggers"):
            print(f"COPY baseline, FK {mode} (child process) …", flush=True)
            child = subprocess.run(
                [sys.executable, __file__, "--copy-baseline", mode, "--preset", args.preset],
                capture_output=True, text=True, check=False)
            if child.returncode:
                sys.exit(f"COPY baseline failed:\n{child.stderr}")
            b = baselines[mode] = json.loads(child.stdout.strip().splitlines()[-1])
            print(f"  generated {b['bytes'] / 2**20:,.0f} MiB of binary COPY data in "
                  f"{b['generate_s']:.1f} s (not timed)")
            print(f"  COPY {b['rows']:,} rows: {b['copy_s']:.1f} s (FK checks "
                  f"{b['fk_check_s']:.1f} s; "
                  + ", ".join(f"{k[5:-2]} {v:.1f} s" for k, v in b.items()
                              if k.startswith("copy_") and k != "copy_s") + ")", flush=True)
            vacuum()
    baseline = baselines.get("no-triggers")

    print(f"build_cluster({args.preset!r}) …", flush=True)
    marks: list[tuple[float, str]] = []
    t0 = time.perf_counter()

    def progress(fraction: float, message: str) -> None:
        if not marks or marks[-1][1].split(":")[0] != message.split(":")[0]:
            marks.append((time.perf_counter() - t0, message))

    result = build_cluster(args.preset, name=BENCH_NAME, progress=progress)
    wall = time.perf_counter() - t0
    rss = peak_rss_mib()
    rows = result["rows"]
    phases = [(marks[i][1].split(":")[0], (marks[i + 1][0] if i + 1 < len(marks) else wall)
               - marks[i][0]) for i in range(len(marks))]
    print(f"  {result['cards']:,} cards, {result['servers']:,} servers, "
          f"{result['racks']:,} racks ({result['racks_per_supernode']} per supernode), "
          f"{result['devices']:,} devices, {result['links']:,} links; "
          f"fullest rack {result['max_rack_w']:,} W of {result['rack_budget_w']:,} W")
    print(f"  wall {wall:.1f} s, {rows / wall:,.0f} rows/s, peak RSS {rss:,.0f} MiB")
    print("  phases: " + ", ".join(f"{name} {sec:.1f} s" for name, sec in phases if sec >= 0.05))
    for mode, b in baselines.items():
        print(f"  ratio build / COPY (FK {mode}) = {wall:.1f} / {b['copy_s']:.1f} = "
              f"{wall / b['copy_s']:.2f}×")
    verdict = [f"build ≤ 120 s: {'yes' if wall <= 120 else 'NO'}"]
    if baseline:
        verdict.append(f"≤ 2× COPY (FK triggers off, the stricter floor): "
                       f"{'yes' if wall <= 2 * baseline['copy_s'] else 'NO'}")

    if not args.skip_api:
        pages = time_pages(result["cluster_id"])
        print(f"  API /api/cards/?cluster=…&limit=100: {pages}")
        if "p50_ms" in pages:
            verdict.append(f"page p50 < 50 ms: {'yes' if pages['p50_ms'] < 50 else 'NO'}")
    print("targets: " + "; ".join(verdict))
    if args.drop:
        from django.db import transaction

        with transaction.atomic():
            delete_cluster(result["cluster_id"])


if __name__ == "__main__":
    main()
