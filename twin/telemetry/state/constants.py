"""Names the live state, its writers and its readers share: events, levels, health."""
from __future__ import annotations

__all__ = [
    "ALERT_EVENT",
    "HEALTH_CODES",
    "HEALTH_NAMES",
    "LEVELS",
    "REMEDIATION_EVENT",
    "STATS",
    "TICK_EVENT",
    "group_name",
]

TICK_EVENT = "telemetry.tick"
ALERT_EVENT = "alert.event"
REMEDIATION_EVENT = "remediation.event"
LEVELS = ("cluster", "supernode", "rack")
STATS = ("mean", "min", "max", "sum", "count")
HEALTH_NAMES = ("unknown", "ok", "warning", "critical", "stale")
HEALTH_CODES = {name: code for code, name in enumerate(HEALTH_NAMES)}


def group_name(cluster_id: int) -> str:
    """The Channels group that receives a cluster's ticks and alert events."""
    return f"telemetry.cluster.{int(cluster_id)}"
