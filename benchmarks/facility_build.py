"""Benchmark: build a cluster's facility, against building its hardware, in one run.

Usage (PostgreSQL; a scratch database)::

    psql -h 127.0.0.1 -U postgres -c 'CREATE DATABASE twin_bench'
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/twin_bench \\
    REDIS_URL=redis://127.0.0.1:6379/0 .venv/bin/python benchmarks/facility_build.py \\
        [--preset seed-512] [--supernodes 256]

Phases, same process, same database:

1. **baseline**: ``build_cluster`` of the preset *without* the facility hook (the
   hardware alone: plan, COPY, constraint checks, commit);
2. ``build_facility`` on that cluster: the draw pass, sizing, bulk writes of the
   elements and of one place per rack;
3. ``plant_for_cluster``: the rows as the engine's ``Plant`` (arrays by values_list);
4. one rating-rule check as an API write runs it (``full_clean()`` in a transaction)
   of a PDU (its power chain, the racks under its feed) and of a CDU (its cooling
   chain: the racks under the tower plant, i.e. all of them).

Prints each time, the facility's rows, and the ratios facility / hardware build and
rule check / facility build. Target: the facility adds <= 25 % to a build.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.settings")
os.environ.setdefault("TWIN_DEBUG", "1")

TARGET = 0.25


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="seed-512")
    parser.add_argument("--supernodes", type=int, default=256)
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection, transaction

    from twin.facility.builder import build_facility
    from twin.facility.models import CoolingElement, PowerElement, RackFacility
    from twin.facility.plant import plant_for_cluster
    from twin.hardware.builder import build_cluster
    from twin.hardware.models import Cluster
    from twin.hardware.signals import cluster_built

    if connection.vendor != "postgresql":
        sys.exit("PostgreSQL only: set DATABASE_URL to a scratch PostgreSQL database.")
    call_command("migrate", verbosity=0)
    name = f"facility-bench-{args.supernodes}"

    assert cluster_built.disconnect(dispatch_uid="twin.facility.build")
    started = time.perf_counter()
    hw = build_cluster(args.preset, supernodes=args.supernodes, name=name, replace=True)
    hardware_s = time.perf_counter() - started
    cluster = Cluster.objects.get(pk=hw["cluster_id"])

    started = time.perf_counter()
    facility = build_facility(cluster)
    facility_s = time.perf_counter() - started

    started = time.perf_counter()
    plant = plant_for_cluster(cluster)
    plant_s = time.perf_counter() - started

    checks = {}
    for model, kind in ((PowerElement, "pdu"), (CoolingElement, "cdu")):
        element = model.objects.filter(site_id=facility["site_id"], kind=kind).first()
        assert element is not None
        started = time.perf_counter()
        with transaction.atomic():
            element.name = "checked"
            element.full_clean()
            transaction.set_rollback(True)
        checks[kind] = time.perf_counter() - started

    elements = sum(facility["elements"].values())
    places = RackFacility.objects.filter(site_id=facility["site_id"]).count()
    print(f"cluster: {hw['cards']:,} cards in {hw['racks']:,} racks ({args.preset} × "
          f"{args.supernodes})")
    print(f"baseline  hardware build            {hardware_s:8.2f} s")
    print(f"facility  build_facility            {facility_s:8.2f} s  ({elements:,} elements, "
          f"{places:,} rack places)")
    print(f"plant     plant_for_cluster         {plant_s:8.2f} s  ({len(plant.racks):,} racks "
          f"as arrays)")
    for kind, seconds in checks.items():
        print(f"rule      one {kind} write check       {seconds:8.2f} s")
    ratio = facility_s / hardware_s
    print(f"ratio facility / hardware build: {ratio:.3f} (target <= {TARGET}: "
          f"{'met' if ratio <= TARGET else 'MISSED'}); PDU check / CDU check: "
          f"{checks['pdu'] / checks['cdu']:.3f}")


if __name__ == "__main__":
    main()
