"""Celery tasks of the hardware app, and the worker-startup hook: thin shims
over :mod:`twin.hardware.runner` (cluster builds requested over the API),
which never imports this module.

``run_cluster_build`` acknowledges late and is rejected (requeued) when its
worker process dies; the redelivered task finds the build still ``running``
and fails it with that reason. ``reap_builds`` runs on Celery beat
(``CELERY_BEAT_SCHEDULE["builds-reap"]``) and fails running builds whose
heartbeat went silent or that ran past ``TWIN_BUILD_TIME_LIMIT_S``; a worker
that starts fails the builds an earlier life of it (same node name) left
``running``. :func:`enqueue_build` is what the API calls on commit.
"""
from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from celery.signals import worker_ready

from twin.hardware import runner

__all__ = ["enqueue_build", "fail_builds_of_restarted_worker", "reap_builds",
           "run_cluster_build"]

log = logging.getLogger(__name__)

_LIMIT = runner.time_limit_s()


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True,
             time_limit=_LIMIT, soft_time_limit=max(_LIMIT - 30, 1))
def run_cluster_build(self: Any, build_id: int) -> dict[str, Any] | None:
    """Run the build recorded in ``ClusterBuild`` ``build_id``; returns its result."""
    build = runner.execute(build_id, worker=self.request.hostname or "",
                           task_id=self.request.id or "")
    return build.result if build is not None else None


def enqueue_build(build_id: int) -> None:
    """Send ``run_cluster_build`` for a committed build; if the broker refuses,
    the build fails with what to check."""
    runner.JOBS.enqueue(build_id, run_cluster_build.apply_async)


@shared_task(name="twin.hardware.reap_builds")
def reap_builds() -> list[int]:
    """Fail running builds whose worker is gone (see ``runner.reap``); send again the
    queued builds whose message was lost, or fail them past the limit."""
    queued = runner.JOBS.reap_queued(run_cluster_build.apply_async)
    return sorted(set(runner.reap()) | set(queued["failed"]))


@worker_ready.connect
def fail_builds_of_restarted_worker(sender: Any = None, **kwargs: Any) -> None:
    """On worker start: the builds this node name left ``running`` cannot finish."""
    runner.JOBS.on_worker_ready(sender)
