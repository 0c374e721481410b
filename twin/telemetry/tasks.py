"""Celery tasks of telemetry: thin shims around ``processing``, ``scrape``, ``notify``
and ``retention``.

The beat schedule (``CELERY_BEAT_SCHEDULE`` in settings) runs ``tick_all``
every second (stale cards are noticed even when nothing arrives, and a stream
whose kick was lost is drained), ``scrape_due`` and ``poll_redfish`` (facility
readings over Redfish, each source at its own interval) every 5 s, ``notify_alerts``
every ``TWIN_ALERTS_BEAT_S`` and ``cleanup`` hourly. The work is done by the
functions these call; what they queue next reaches them as ``FOLLOW_UPS``
(processing) or a callable (scrape), so nothing imports this module but Celery,
the ingest views and callers of the tasks.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from celery import current_task, shared_task
from django.conf import settings

from twin.core.unavailable import OUTAGE_ERRORS
from twin.telemetry.notify import DeliveryFailed
from twin.telemetry.processing.follow_ups import FollowUps

if TYPE_CHECKING:
    from twin.telemetry.enqueue import EnqueueResult

__all__ = [
    "FOLLOW_UPS",
    "after_enqueue",
    "cleanup",
    "dispatch",
    "drain",
    "heal",
    "notify_alerts",
    "watch_agents",
    "persist_minute",
    "poll_redfish",
    "scrape_due",
    "scrape_target",
    "tick_all",
    "tick_cluster",
    "tick_shard",
    "write_history",
]


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


def after_enqueue(result: EnqueueResult, cluster_id: int) -> None:
    """What follows an ``enqueue.enqueue``: the drain of the slot its script claimed,
    or, for a batch applied at once (``TELEMETRY_APPLY_ON_INGEST``), a tick."""
    if result.kicked >= 0:
        dispatch(drain, result.kicked)
    if result.status == "applied":
        from twin.telemetry.processing import schedule_trailing_tick

        schedule_trailing_tick(cluster_id, FOLLOW_UPS)


FOLLOW_UPS = FollowUps(
    drain=lambda slot: dispatch(drain, slot),
    tick=lambda cluster_id, countdown: dispatch(tick_cluster, cluster_id, countdown=countdown),
    tick_shard=lambda cluster_id, round_id, shard: dispatch(tick_shard, cluster_id, round_id,
                                                            shard),
    persist_minute=lambda cluster_id, version, minute: dispatch(
        persist_minute, cluster_id, version, minute),
    write_history=lambda cluster_id, version, now: dispatch(
        write_history, cluster_id, version, now),
    heal=lambda cluster_id, failures: dispatch(heal, cluster_id, failures),
    notify=lambda: _request_notify(),
)
"""The processing follow-ups as Celery tasks (see ``processing.follow_ups``)."""


@shared_task(name="twin.telemetry.drain", ignore_result=True, acks_late=False)
def drain(slot: int) -> dict[str, int]:
    from twin.telemetry import processing

    return processing.drain(int(slot), follow_ups=FOLLOW_UPS)


@shared_task(name="twin.telemetry.tick_cluster", ignore_result=True, acks_late=False)
def tick_cluster(cluster_id: int, attempt: int = 0) -> int | None:
    """A trailing tick; retried while another tick holds the gate."""
    from twin.telemetry import processing

    seq = processing.tick(int(cluster_id), follow_ups=FOLLOW_UPS)
    if seq is None and attempt < 5:
        dispatch(tick_cluster, cluster_id, attempt + 1,
                 countdown=processing.retry_wait_s(cluster_id))
    return seq


@shared_task(name="twin.telemetry.tick_shard", ignore_result=True, acks_late=False)
def tick_shard(cluster_id: int, round_id: str, shard: int) -> int | None:
    """One shard of a sharded tick round (``processing.shards``); the round's last
    shard publishes the tick (its seq is returned)."""
    from twin.telemetry.processing import shards

    return shards.run_shard(int(cluster_id), str(round_id), int(shard), follow_ups=FOLLOW_UPS)


@shared_task(name="twin.telemetry.tick_all", ignore_result=True, acks_late=False)
def tick_all() -> int:
    """Tick every cluster with live state that has not ticked for ``TELEMETRY_IDLE_TICK_S``
    (so stale cards are found when nothing arrives)."""
    from twin.telemetry import processing

    return processing.tick_idle(FOLLOW_UPS)


@shared_task(name="twin.telemetry.heal", ignore_result=True, acks_late=True,
             reject_on_worker_lost=True)
def heal(cluster_id: int, failures: list[dict[str, Any]]) -> list[int]:
    """Self-healing of new card failures (``processing.failures.handle_failures``):
    safe to run twice — a repeat finds each failure's remediation and writes nothing."""
    from twin.telemetry.processing.failures import handle_failures

    return handle_failures(failures)


@shared_task(name="twin.telemetry.persist_minute", ignore_result=True)
def persist_minute(cluster_id: int, version: str, minute: int) -> int:
    from twin.telemetry import processing

    return processing.persist_minute(int(cluster_id), version, int(minute))


@shared_task(name="twin.telemetry.write_history", ignore_result=True)
def write_history(cluster_id: int, version: str, now: float) -> int:
    """One step of every card's samples to VictoriaMetrics, off the tick."""
    from twin.telemetry import victoria

    return victoria.write_from_state(int(cluster_id), version, float(now))


@shared_task(name="twin.telemetry.scrape_due")
def scrape_due() -> int:
    """Start a scrape of every enabled target whose interval has passed."""
    from twin.telemetry import scrape

    return scrape.start_due(lambda target_id: dispatch(scrape_target, target_id))


@shared_task(name="twin.telemetry.poll_redfish")
def poll_redfish() -> dict[str, Any]:
    """Poll every Redfish source whose interval has passed (``twin.facility.redfish``)."""
    from twin.facility import redfish
    from twin.telemetry.config import conf, redis_client

    results = redfish.poll_due(redis_client(), conf().prefix)
    return {"sources": len(results), "stored": sum(x.stored for x in results),
            "refused": sum(x.refused for x in results),
            "errors": sum(len(x.errors) for x in results)}


@shared_task(name="twin.telemetry.scrape_target")
def scrape_target(target_id: int) -> dict[str, Any]:
    """Pull one Prometheus endpoint and ingest what it exposes."""
    from twin.telemetry import scrape

    return scrape.scrape(target_id, after_enqueue)


def _request_notify() -> bool:
    from twin.telemetry import notify

    return notify.request_delivery(lambda: dispatch(notify_alerts))


@shared_task(name="twin.telemetry.notify_alerts", ignore_result=True, acks_late=False,
             autoretry_for=(DeliveryFailed, *OUTAGE_ERRORS), retry_backoff=2,
             retry_backoff_max=120, retry_jitter=False, max_retries=8)
def notify_alerts() -> dict[str, int]:
    """Push firing and resolved alerts to the configured Alertmanagers and webhooks
    (``notify.deliver``); a receiver that fails is retried with exponential
    backoff (2, 4, 8 … s, at most 2 min), and beat runs this every
    ``TWIN_ALERTS_BEAT_S`` for whatever is still undelivered."""
    from twin.telemetry import notify

    return notify.deliver()


@shared_task(name="twin.telemetry.watch_agents", ignore_result=True, acks_late=False)
def watch_agents() -> dict[str, int]:
    """Alerts naming the agents silent after a rotation of their token
    (``agent_watch.check_agents``)."""
    from twin.telemetry import agent_watch

    return agent_watch.check_agents()


@shared_task(name="twin.telemetry.cleanup")
def cleanup() -> dict[str, int]:
    """Delete 1-minute history past ``TELEMETRY_RETENTION_DAYS`` and closed alerts
    past ``TELEMETRY_ALERT_RETENTION_DAYS``."""
    from twin.telemetry import retention

    return retention.cleanup()
