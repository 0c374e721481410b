"""Pulling Prometheus endpoints (DCGM exporters): which targets are due, one scrape.

The Celery tasks ``scrape_due`` and ``scrape_target`` (``twin.telemetry.tasks``)
call these; what to queue (a scrape per due target, a drain of what a scrape
enqueued) is passed in, so this module does not import the tasks.
"""
from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from django.db.models import F
from django.utils import timezone

__all__ = ["MAX_SCRAPE_BYTES", "scrape", "start_due"]

MAX_SCRAPE_BYTES = 32 * 1024 * 1024


def start_due(start_scrape: Callable[[int], Any]) -> int:
    """Start a scrape of every enabled target whose interval has passed
    (``start_scrape(target_id)``); returns how many."""
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
        start_scrape(pk)
    return len(due)


def scrape(target_id: int, after_enqueue: Callable[[Any, int], Any]) -> dict[str, Any]:
    """Pull one Prometheus endpoint and ingest what it exposes; ``after_enqueue(result,
    cluster_id)`` starts what the enqueue asks for (``tasks.after_enqueue``)."""
    from twin.telemetry import enqueue, prometheus, state
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
    result = enqueue.enqueue(batch, agent_id=None, seq=None)
    after_enqueue(result, target.cluster_id)
    accepted = batch.accepted_cards() if result.status in ("queued", "applied") else 0
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
