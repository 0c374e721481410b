"""The cluster summary: counts and power of one cluster in about ten SQL aggregates.

It must stay around a second on the ``million`` preset (1,048,576 cards,
millions of links), so nothing here iterates rows in Python: every figure is a
``COUNT``/``SUM`` grouped by at most a handful of keys.

Power is the rack draw of ``twin.hardware.models.racks``: IT power is Σ rack
draws. PUE is the plant model's, computed from the components at that draw
(``pue_source: "plant"``, answered by the facility app on ``signals.plant_pue``),
and facility power IT × it; a cluster without a built plant falls back to Σ rack
draw × that rack's stored PUE (``pue_source: "nameplate"``). The per-rack draws are
``Rack.objects.draw_by_rack()`` (one grouped pass over the parts), from which a
single query takes IT, facility and the over-budget count.
``Rack.objects.with_power()`` gives the same figures rack by rack (correlated
subqueries: right for a page of racks, ~3× slower for all 26,000 at once).
"""
from __future__ import annotations

from typing import Any

from django.db.models import Avg, Count, Max, Min, Sum

from twin.hardware.choices import (
    CardStatusChoices,
    DeviceKindChoices,
    LinkKindChoices,
    LinkStatusChoices,
)
from twin.hardware.models import Card, Cluster, Link, NetworkDevice, Rack, Server, SuperNode

__all__ = ["OVER_BUDGET_NAMES", "cluster_summary", "rack_power_totals"]

OVER_BUDGET_NAMES = 5  # how many over-budget rack names the summary lists


def _counts_by(queryset: Any, field: str, keys: list[str]) -> dict[str, int]:
    """``{key: count}`` for every key of a choice set, zeros included."""
    rows = queryset.order_by().values_list(field).annotate(n=Count("pk"))
    found = dict(rows)
    return {key: int(found.get(key, 0)) for key in keys} | {
        key: int(n) for key, n in found.items() if key not in keys
    }


def rack_power_totals(cluster_id: int) -> dict[str, Any]:
    """IT power, facility power (Σ draw × PUE) and over-budget racks of a cluster.

    The rack draws are summed in SQL (``draw_by_rack().totals()``) and never leave
    the database; only the totals and up to ``OVER_BUDGET_NAMES`` names come back.
    """
    totals = Rack.objects.filter(cluster_id=cluster_id).draw_by_rack().totals(
        worst=OVER_BUDGET_NAMES)
    return {
        "it_w": totals.it_w,
        "facility_w": totals.facility_w,
        "over_count": totals.over.count,
        "over_names": [rack.name for rack in totals.over.racks],
    }


def cluster_summary(cluster: Cluster) -> dict[str, Any]:
    """Counts, IT and facility power, budget and over-budget racks of ``cluster``."""
    cid = cluster.pk
    racks = Rack.objects.filter(cluster_id=cid)
    cards = Card.objects.filter(supernode__cluster_id=cid)
    devices = NetworkDevice.objects.filter(cluster_id=cid)
    links = Link.objects.filter(cluster_id=cid)

    rack_totals = racks.order_by().aggregate(n=Count("pk"), budget=Sum("power_budget_w"))
    cards_by_status = _counts_by(cards, "status", CardStatusChoices.values())
    devices_by_kind = _counts_by(devices, "kind", DeviceKindChoices.values())
    link_groups = dict(
        ((kind, status), n)
        for kind, status, n in links.order_by()
        .values_list("kind", "status")
        .annotate(n=Count("pk"))
    )
    links_by_kind = {k: 0 for k in LinkKindChoices.values()}
    links_by_status = {s: 0 for s in LinkStatusChoices.values()}
    for (kind, status), n in link_groups.items():
        links_by_kind[kind] = links_by_kind.get(kind, 0) + n
        links_by_status[status] = links_by_status.get(status, 0) + n

    power = rack_power_totals(cid)
    it_w, facility_w = power["it_w"], power["facility_w"]
    pue, pue_source = (round(facility_w / it_w, 4) if it_w else None), "nameplate"
    from twin.hardware.signals import plant_pue

    computed = next((v for _, v in plant_pue.send(Cluster, cluster_id=cid)
                     if isinstance(v, float)), None)
    if computed is not None and it_w:
        pue, pue_source = round(computed, 4), "plant"
        facility_w = it_w * computed
    budget_w = int(rack_totals["budget"] or 0)
    servers = Server.objects.filter(rack__cluster_id=cid).count()

    per_supernode = (
        SuperNode.objects.filter(cluster_id=cid)
        .annotate(n=Count("racks"))
        .aggregate(count=Count("pk"), min=Min("n"), max=Max("n"), avg=Avg("n"))
    )

    return {
        "cluster": cid,
        "name": cluster.name,
        "counts": {
            "supernodes": int(per_supernode["count"] or 0),
            "racks": int(rack_totals["n"] or 0),
            "servers": servers,
            "cards": sum(cards_by_status.values()),
            "devices": sum(devices_by_kind.values()),
            "links": sum(link_groups.values()),
            "cards_by_status": cards_by_status,
            "devices_by_kind": devices_by_kind,
            "links_by_kind": links_by_kind,
            "links_by_status": links_by_status,
        },
        "power": {
            "it_w": it_w,
            "facility_w": round(facility_w, 3),
            "pue": pue,
            "pue_source": pue_source,
            "budget_w": budget_w,
            "utilization": round(it_w / budget_w, 4) if budget_w else None,
            "racks_over_budget": {"count": power["over_count"],
                                  "names": power["over_names"]},
        },
        "racks_per_supernode": {
            "min": per_supernode["min"],
            "max": per_supernode["max"],
            "avg": round(float(per_supernode["avg"]), 3)
            if per_supernode["avg"] is not None else None,
            "network_racks": racks.filter(supernode__isnull=True).count(),
        },
    }
