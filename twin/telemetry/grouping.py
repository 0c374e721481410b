"""Alerts grouped by rule and place: a rack of 40 cards dropping utilisation is one
group of 40, not 40 lines.

``group_alerts(alerts, by)`` aggregates any alert queryset (already filtered:
cluster, active, severity …) in the database, one ``GROUP BY``, into groups of
the same rule and severity in the same rack (``by="rack"``, card and rack
alerts) or supernode (``by="supernode"``); alerts of the whole cluster form a
group per rule. Most severe first, then the largest. ``GET
/api/telemetry/alerts/groups/`` serves it, so the dashboard shows every open
alert of a million-card cluster without fetching them.
"""
from __future__ import annotations

from typing import Any

from django.db.models import Count, Max, Min, QuerySet

from twin.telemetry.choices import SeverityChoices

__all__ = ["BY", "group_alerts"]

BY = ("rack", "supernode")


def group_alerts(alerts: QuerySet, by: str = "rack") -> list[dict[str, Any]]:
    """Groups of ``alerts`` (see the module): ``rule``, ``severity``, ``scope``
    (rack, supernode or cluster), ``rack``/``rack_name``, ``supernode``/
    ``supernode_name``, ``count``, ``cards`` (distinct cards), ``oldest``,
    ``newest`` (start times), ``latest_alert`` and its ``message``."""
    if by not in BY:
        raise ValueError(f"by must be one of {', '.join(BY)}")
    fields = ["rule", "severity", "rack_id", "rack__name"] if by == "rack" else [
        "rule", "severity", "supernode_id", "supernode__name"]
    rows = list(alerts.order_by().values(*fields).annotate(
        count=Count("id"), cards=Count("card_id", distinct=True), oldest=Min("started"),
        newest=Max("started"), latest_alert=Max("id")))
    from twin.telemetry.models import Alert

    messages = dict(Alert.objects.filter(pk__in=[r["latest_alert"] for r in rows])
                    .values_list("id", "message"))
    out = []
    for row in rows:
        place = row.get(f"{by}_id")
        out.append({
            "rule": row["rule"], "severity": row["severity"],
            "scope": by if place is not None else "cluster",
            "rack": row.get("rack_id"), "rack_name": row.get("rack__name"),
            "supernode": row.get("supernode_id"), "supernode_name": row.get("supernode__name"),
            "count": row["count"], "cards": row["cards"], "oldest": row["oldest"],
            "newest": row["newest"], "latest_alert": row["latest_alert"],
            "message": messages.get(row["latest_alert"], ""),
        })
    rank = SeverityChoices.RANK
    out.sort(key=lambda g: (-rank.get(g["severity"], 0), -g["count"], g["rule"],
                            g["rack"] or g["supernode"] or 0))
    return out
