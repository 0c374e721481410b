"""Celery tasks of telemetry: drain the stream, tick, scrape, persist, clean up.

The beat schedule (``CELERY_BEAT_SCHEDULE`` in settings) runs ``tick_all``
every second (stale cards are noticed even when nothing arrives, and a stream
whose kick was lost is drained), ``scrape_due`` every 5 s and ``cleanup``
hourly.
"""
from __future__ import annotations

import datetime as dt
import logging
import time
import urllib.error
import urllib.request
from typing import Any

from celery import current_task, shared_task
from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

__all__ = [
    "cleanup",
    "dispatch",
    "drain",
    "persist_minute",
    "scrape_due",
    "scrape_target",
    "tick_all",
    "tick_cluster",
]

log = logging.getLogger(__name__)
MAX_SCRAPE_BYTES = 32 * 1024 * 1024


def dispatch(task: Any, *args: Any, countdown: float | None = None) -> bool:
    """Queue a follow-up task (drain, trailing tick, minute persist) unless
    ``TELEMETRY_AUTO_DRAIN`` is off — then the caller's owner drains and ticks
    itself (tests without a worker, the benchmark's in-process baseline)."""
    if not getattr(settings, "TELEMETRY_AUTO_DRAIN", True):
        return False
    # Inside a task, follow-ups stay on the queue that task came from (a worker
    # started with -Q serves that queue, whatever the default queue is).
    queue = None
    request = getattr(current_task, "request", None) if current_task else None
    info = getattr(request, "delivery_info", None) or {}
    if isinstance(info, dict):
        queue = info.get("routing_key") or None
    task.apply_async(args, countdown=countdown, queue=queue)
    return True


@shared_task(name="twin.telemetry.drain", ignore_result=True, acks_late=False)
def drain(slot: int) -> dict[str, int]:
    from twin.telemetry import processing

    return processing.drain(int(slot))


@shared_task(name="twin.telemetry.tick_cluster", ignore_result=True, acks_late=False)
def tick_cluster(cluster_id: int, attempt: int = 0) -> int | None:
    """A trailing tick; retried while another tick holds the gate."""
    from twin.telemetry import processing, state

    seq = processing.tick(int(cluster_id))
    if seq is None and attempt < 5:
        wait = max(state.redis_client().pttl(processing._gate_key(cluster_id)), 50) / 1000.0
        dispatch(tick_cluster, cluster_id, attempt + 1, countdown=wait)
    return seq


@shared_task(name="twin.telemetry.tick_all", ignore_result=True, acks_late=False)
def tick_all() -> int:
    """Tick every cluster with live state that has not ticked for ``TELEMETRY_IDLE_TICK_S``
    (so stale cards are found when nothing arrives)."""
    from twin.hardware.models import Cluster
    from twin.telemetry import processing, state

    processing.kick_idle_stream()
    r = state.redis_client()
    ids = sorted(int(x) for x in r.smembers(state.keys.clusters()))
    existing = set(Cluster.objects.filter(pk__in=ids).values_list("pk", flat=True))
    # Only clusters without a recent tick: a cluster receiving data ticks from
    # its drains, and a beat tick at a random phase would only close the gate
    # just before a batch lands (adding up to 0.5 s to its latency).
    idle_after = float(getattr(settings, "TELEMETRY_IDLE_TICK_S", 2.0))
    last = r.mget([processing.last_tick_key(c) for c in ids]) if ids else []
    now = time.time()
    ticked = 0
    for cluster_id, raw in zip(ids, last, strict=True):
        if cluster_id not in existing:
            state.forget_cluster(cluster_id)
            continue
        if raw is not None and now - float(raw) < idle_after:
            continue
        if processing.tick(cluster_id) is not None:
            ticked += 1
    return ticked


@shared_task(name="twin.telemetry.persist_minute", ignore_result=True)
def persist_minute(cluster_id: int, version: str, minute: int) -> int:
    from twin.telemetry import processing

    return processing.persist_minute(int(cluster_id), version, int(minute))


@shared_task(name="twin.telemetry.scrape_due")
def scrape_due() -> int:
    """Start a scrape of every enabled target whose interval has passed."""
    from twin.telemetry.models import ScrapeTarget

    now = timezone.now()
    due = []
    for target in ScrapeTarget.objects.filter(enabled=True).only("pk", "interval_s",
                                                                 "last_scraped"):
        if target.last_scraped is None or (
                now - target.last_scraped).total_seconds() >= target.interval_s - 0.5:
            due.append(target.pk)
    # Mark them first so a slow scrape is not started twice by the next beat.
    ScrapeTarget.objects.filter(pk__in=due).update(last_scraped=now)
    for pk in due:
        dispatch(scrape_target, pk)
    return len(due)


@shared_task(name="twin.telemetry.scrape_target")
def scrape_target(target_id: int) -> dict[str, Any]:
    """Pull one Prometheus endpoint and ingest what it exposes."""
    from twin.telemetry import ingest, prometheus, state
    from twin.telemetry.choices import ScrapeStatusChoices as Status
    from twin.telemetry.models import ScrapeTarget, TelemetryAgent

    target = ScrapeTarget.objects.filter(pk=target_id).first()
    if target is None:
        return {"status": "gone"}
    started = time.monotonic()
    try:
        request = urllib.request.Request(target.endpoint, headers={
            "Accept": "text/plain;version=0.0.4", "User-Agent": "supercluster-twin-scraper"})
        with urllib.request.urlopen(request, timeout=target.timeout_s) as response:
            body = response.read(MAX_SCRAPE_BYTES + 1)
        if len(body) > MAX_SCRAPE_BYTES:
            raise ValueError(f"the exposition is larger than {MAX_SCRAPE_BYTES} bytes")
        text = body.decode("utf-8")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        ScrapeTarget.objects.filter(pk=target_id).update(
            last_status=Status.ERROR, last_error=str(exc)[:2000], last_accepted=0,
            last_rejected=0, last_duration_ms=(time.monotonic() - started) * 1000)
        return {"status": "error", "error": str(exc)}
    samples, broken, n_broken = prometheus.parse_exposition(text)
    lay = state.layout(target.cluster_id)
    batch = prometheus.batch_from_exposition(samples, lay)
    result = ingest.enqueue(batch, agent_id=None, seq=None)
    if result.kicked >= 0:
        dispatch(drain, result.kicked)
    accepted = batch.accepted_cards() if result.status == "queued" else 0
    status = Status.OK if not (n_broken or batch.rejected_total) else Status.PARTIAL
    error = ""
    if result.status == "busy":
        status, error = Status.ERROR, "the ingest stream is full (workers behind)"
    elif broken or batch.rejected:
        error = "; ".join(f"line {b['line']}: {b['reason']}" for b in broken[:5])
        error += "; ".join(f"{x.get('card', '')} {x['reason']}" for x in batch.rejected[:5])
    ScrapeTarget.objects.filter(pk=target_id).update(
        last_status=status, last_error=error[:2000], last_accepted=accepted,
        last_rejected=batch.rejected_total + n_broken,
        last_duration_ms=(time.monotonic() - started) * 1000)
    if target.agent_id:
        TelemetryAgent.objects.filter(pk=target.agent_id).update(
            last_seen=timezone.now(), batches=F("batches") + 1, samples=F("samples") + accepted,
            rejected=F("rejected") + batch.rejected_total)
    return {"status": status, "accepted": accepted, "rejected": batch.rejected_total,
            "broken_lines": n_broken}


@shared_task(name="twin.telemetry.cleanup")
def cleanup() -> dict[str, int]:
    """Delete 1-minute history past ``TELEMETRY_RETENTION_DAYS`` and closed alerts
    past ``TELEMETRY_ALERT_RETENTION_DAYS``."""
    from twin.telemetry.models import Alert, TelemetryMinute

    now = timezone.now()
    keep = dt.timedelta(days=float(getattr(settings, "TELEMETRY_RETENTION_DAYS", 7)))
    keep_alerts = dt.timedelta(days=float(getattr(settings, "TELEMETRY_ALERT_RETENTION_DAYS",
                                                  90)))
    minutes, _ = TelemetryMinute.objects.filter(minute__lt=now - keep).delete()
    alerts, _ = Alert.objects.filter(Q(ended__lt=now - keep_alerts)).delete()
    return {"minutes": minutes, "alerts": alerts}
