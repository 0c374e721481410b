"""The Celery application: simulations, cluster builds and telemetry run here.

Late acks plus ``reject_on_worker_lost`` mean a task whose worker dies is not
silently lost; each task records its own failure so nothing stays ``running``.

:class:`Consumer` (``CELERY_WORKER_CONSUMER``) keeps a worker alive through a
broker loss (a Redis restart): see its docstring.
"""
import logging
import os
from typing import Any

from celery import Celery
from celery.signals import beat_init, celeryd_init, worker_process_init
from celery.worker.consumer import Consumer as CeleryConsumer

from twin.core import collector

__all__ = ["Consumer", "app", "embedded_broker", "freeze_startup_objects", "worker_priority"]

log = logging.getLogger(__name__)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.settings")

app = Celery("twin")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


class Consumer(CeleryConsumer):
    """The worker's consumer, surviving the loss of a Redis broker.

    When the connection drops, Celery (5.7) first *collects* the connection —
    which detaches its transport from the connection's settings — and then
    closes it; closing the channel makes kombu's Redis transport restore the
    messages this worker holds unacknowledged, through a new client built from
    those detached settings: ``AttributeError: 'NoneType' object has no
    attribute 'hostname'``, which Celery treats as unrecoverable, and the
    worker exits (issue 11). Here the restore is skipped instead: the messages
    stay in Redis's unacked set (kombu requeues them after the visibility
    timeout if they are never acknowledged) and the tasks running them go on —
    which is what a job wants: restoring them at once would deliver a running
    scenario a second time, and the job runner would fail it as lost.

    A task that finishes after the reconnect acknowledges its message on the
    old, closed channel, which fails the same way; each task's strategy counts
    that ``AttributeError`` among the connection errors, so the ack is logged
    as impossible ("Couldn't ack") instead of ending the worker.
    """

    def update_strategies(self) -> None:
        saved = self.connection_errors
        self.connection_errors = (*saved, AttributeError)  # read by each task's strategy
        try:
            super().update_strategies()
        finally:
            self.connection_errors = saved

    def on_connection_error_after_connected(self, exc: Any) -> None:
        connection = self.connection
        channel = getattr(connection, "_default_channel", None) if connection else None
        if channel is not None:
            channel.do_restore = False
        try:
            super().on_connection_error_after_connected(exc)
        except AttributeError:  # the same detached transport, elsewhere in the close
            log.warning("ignored an error closing the lost broker connection", exc_info=True)


@celeryd_init.connect
@beat_init.connect
def embedded_broker(**_: Any) -> None:
    """A worker or beat with ``REDIS_URL`` unset: see that the embedded Redis runs
    (``twin.embedded``; reading the settings starts nothing)."""
    from twin.embedded import ensure_for_process

    ensure_for_process()


@celeryd_init.connect
def worker_priority(**_: Any) -> None:
    """The worker's CPU priority from ``TWIN_WORKER_NICE`` (``twin.core.priority``),
    set in the main process before its pool forks, so every pool process has it;
    ``scripts/demo`` and docker-compose give it to the telemetry worker."""
    from django.conf import settings

    from twin.core.priority import apply_nice, worker_nice

    nice = worker_nice({"TWIN_WORKER_NICE": settings.TWIN_WORKER_NICE})
    if nice is not None:
        apply_nice(nice, "the Celery worker")


@worker_process_init.connect
def freeze_startup_objects(**_: Any) -> None:
    """A worker process's start-up objects out of the collector's sight
    (``twin.core.collector``): a full collection had walked them all, 100–150 ms in a
    telemetry worker of the million-card cluster, stalling the tick shard it ran."""
    collector.freeze_startup_objects()
