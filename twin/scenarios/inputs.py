"""The cluster model → the simulation's ``ClusterSpec``: moved to
:mod:`twin.hardware.topology` so the jobs app (a layer below the scenarios) prices
placements with the same conversion; re-exported here for the scenario kinds."""
from typing import Any

from django.db.models import Count

from twin.hardware.topology import (
    CORE_KINDS,
    SCALE_UP_TECHNOLOGY,
    ClusterInput,
    ConversionError,
    ScaleUp,
    card_node,
    cluster_input,
    fabric_spec,
)

__all__ = [
    "CORE_KINDS",
    "SCALE_UP_TECHNOLOGY",
    "ClusterInput",
    "ConversionError",
    "ScaleUp",
    "card_node",
    "cluster_input",
    "fabric_spec",
    "resilience_cluster",
]


def resilience_cluster(cluster: Any) -> dict[str, Any]:
    """What the resilience kind reads of a cluster, in two aggregate queries: its cards,
    cards per server (the most common) and accelerator type (the most common, with its HBM)."""
    from twin.hardware.models import Card, Server

    by_type = list(Card.objects.filter(supernode__cluster_id=cluster.pk).order_by()
                   .values("accelerator__slug", "accelerator__hbm_gib")
                   .annotate(n=Count("id")).order_by("-n"))
    per_server = (Server.objects.filter(rack__cluster_id=cluster.pk).order_by()
                  .values("cards_per_server").annotate(n=Count("id")).order_by("-n").first())
    if not by_type:
        raise ConversionError("cluster", f"cluster {cluster.name!r} has no cards")
    return {"cards": sum(row["n"] for row in by_type),
            "accelerator": by_type[0]["accelerator__slug"],
            "hbm_gib": float(by_type[0]["accelerator__hbm_gib"]),
            "cards_per_server": int(per_server["cards_per_server"]) if per_server else 8}
