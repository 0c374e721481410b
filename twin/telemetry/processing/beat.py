"""What the beat runs every second: a safety-net drain and ticks of idle clusters."""
from __future__ import annotations

import time

from django.conf import settings

from twin.telemetry import keys
from twin.telemetry.config import redis_client
from twin.telemetry.processing.follow_ups import NO_FOLLOW_UPS, FollowUps
from twin.telemetry.processing.stream import kick_idle_stream
from twin.telemetry.processing.ticks import tick
from twin.telemetry.state import forget_cluster

__all__ = ["tick_idle"]


def tick_idle(follow_ups: FollowUps = NO_FOLLOW_UPS) -> int:
    """Tick every cluster with live state that has not ticked for ``TELEMETRY_IDLE_TICK_S``
    (so stale cards are found when nothing arrives); forget the state of deleted
    clusters; start a drain if entries wait with no drain running. Returns how many
    clusters ticked."""
    from twin.hardware.models import Cluster

    kick_idle_stream(follow_ups)
    r = redis_client()
    ids = sorted(int(x) for x in r.smembers(keys.clusters()))
    existing = set(Cluster.objects.filter(pk__in=ids).values_list("pk", flat=True))
    # Only clusters without a recent tick: a cluster receiving data ticks from
    # its drains, and a beat tick at a random phase would only close the gate
    # just before a batch lands (adding up to 0.5 s to its latency).
    idle_after = float(getattr(settings, "TELEMETRY_IDLE_TICK_S", 2.0))
    last = r.mget([keys.last_tick(c) for c in ids]) if ids else []
    now = time.time()
    ticked = 0
    for cluster_id, raw in zip(ids, last, strict=True):
        if cluster_id not in existing:
            forget_cluster(cluster_id)
            continue
        if raw is not None and now - float(raw) < idle_after:
            continue
        if tick(cluster_id, follow_ups=follow_ups) is not None:
            ticked += 1
    return ticked
