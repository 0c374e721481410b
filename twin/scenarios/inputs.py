"""The cluster model → the simulation's ``ClusterSpec``: moved to
:mod:`twin.hardware.topology` so the jobs app (a layer below the scenarios) prices
placements with the same conversion; re-exported here for the scenario kinds."""
from typing import Any

from django.db.models import Count, Sum

from twin.hardware.choices import DeviceKindChoices as D
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
    """What the resilience kind reads of a cluster, in four aggregate queries: its cards,
    cards per server (the most common), accelerator type (the most common, with its HBM),
    the storage of its servers (the most common host memory and NVMe) and its parallel
    file system (Σ over its ``storage`` devices; None without one)."""
    from twin.hardware.models import Card, NetworkDevice, Server

    by_type = list(Card.objects.filter(supernode__cluster_id=cluster.pk).order_by()
                   .values("accelerator__slug", "accelerator__hbm_gib")
                   .annotate(n=Count("id")).order_by("-n"))
    servers = Server.objects.filter(rack__cluster_id=cluster.pk).order_by()
    per_server = (servers.values("cards_per_server").annotate(n=Count("id"))
                  .order_by("-n").first())
    if not by_type:
        raise ConversionError("cluster", f"cluster {cluster.name!r} has no cards")
    storage = (servers.values("memory_gib", "nvme_tb", "nvme_read_gb_per_s",
                              "nvme_write_gb_per_s").annotate(n=Count("id"))
               .order_by("-n").first())
    pfs = NetworkDevice.objects.filter(cluster_id=cluster.pk, kind=D.STORAGE).aggregate(
        appliances=Count("id"), capacity_tb=Sum("capacity_tb"),
        read_gb_per_s=Sum("read_gb_per_s"), write_gb_per_s=Sum("write_gb_per_s"))
    return {"cards": sum(row["n"] for row in by_type),
            "accelerator": by_type[0]["accelerator__slug"],
            "hbm_gib": float(by_type[0]["accelerator__hbm_gib"]),
            "cards_per_server": int(per_server["cards_per_server"]) if per_server else 8,
            "server_storage": None if storage is None else {
                "memory_gib": int(storage["memory_gib"]),
                "nvme_tb": float(storage["nvme_tb"]),
                "nvme_read_gb_per_s": float(storage["nvme_read_gb_per_s"]),
                "nvme_write_gb_per_s": float(storage["nvme_write_gb_per_s"])},
            "pfs": None if not pfs["appliances"] else {
                "appliances": int(pfs["appliances"]),
                "capacity_tb": float(pfs["capacity_tb"] or 0),
                "read_gb_per_s": float(pfs["read_gb_per_s"] or 0),
                "write_gb_per_s": float(pfs["write_gb_per_s"] or 0)}}
