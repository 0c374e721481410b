"""What the telemetry benchmarks share: Django set up on the benchmark's database,
and a cluster of ``cards`` seed-512 cards under a name of the benchmark's own
(rebuilt when its card count differs), so a rerun reuses the last build."""
from __future__ import annotations

import sys
import warnings
from typing import Any

__all__ = ["ensure_cluster", "setup"]


def setup() -> None:
    """Django set up and migrated (the benchmark's own database)."""
    warnings.filterwarnings("ignore", message="No directory at")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def ensure_cluster(name: str, cards: int) -> Any:
    """The cluster ``name`` with ``cards`` cards (seed-512 supernodes), built if missing."""
    from twin.hardware.builder import build_cluster, delete_cluster
    from twin.hardware.models import Card, Cluster

    if cards % 512:
        sys.exit("--cards must be a multiple of 512 (seed-512 supernodes)")
    cluster = Cluster.objects.filter(name=name).first()
    if cluster and Card.objects.filter(supernode__cluster=cluster).count() != cards:
        delete_cluster(cluster.pk)
        cluster = None
    if cluster is None:
        print(f"building {cards:,} cards …", flush=True)
        build_cluster("seed-512", name=name, supernodes=cards // 512)
        cluster = Cluster.objects.get(name=name)
    return cluster
