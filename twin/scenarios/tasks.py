"""Celery tasks of the scenario runs, and the worker-startup hook: thin shims
over :mod:`twin.scenarios.runner`, which never imports this module.

``run_scenario`` (and ``run_part``, one part of a split run: see
:mod:`twin.scenarios.sweeps`) acknowledges late and is rejected (requeued)
when its worker process dies, so the message is never silently lost; the redelivered task
finds the run still ``running`` and fails it with that reason
(:func:`twin.scenarios.runner.execute`). The soft time limit ends a run with a
clear error; the hard one kills it, and then the same redelivery (or the
reaper) ends it. ``reap_scenarios`` runs on Celery beat
(``CELERY_BEAT_SCHEDULE["scenarios-reap"]``) and fails running runs whose
heartbeat went silent. When a worker starts, it fails the runs an earlier
life of it (same node name) left ``running``. :func:`enqueue_run` is what the
API hands :func:`~twin.scenarios.runner.submit` to send the task on commit.
"""
from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from celery.signals import worker_ready

from twin.scenarios import runner

__all__ = ["enqueue_part", "enqueue_run", "fail_runs_of_restarted_worker", "reap_scenarios",
           "run_part", "run_scenario"]

log = logging.getLogger(__name__)

_LIMIT = runner.time_limit_s()


@shared_task(bind=True, name="twin.scenarios.run", acks_late=True, reject_on_worker_lost=True,
             time_limit=_LIMIT, soft_time_limit=max(_LIMIT - 15, 1))
def run_scenario(self: Any, run_id: int) -> str | None:
    """Run scenario ``run_id``; returns its final status."""
    run = runner.execute(run_id, worker=self.request.hostname or "",
                         task_id=self.request.id or "", enqueue_part=enqueue_part)
    return run.status if run is not None else None


@shared_task(bind=True, name="twin.scenarios.run_part", acks_late=True,
             reject_on_worker_lost=True, time_limit=_LIMIT,
             soft_time_limit=max(_LIMIT - 15, 1))
def run_part(self: Any, part_id: int) -> str | None:
    """Run part ``part_id`` of a split run (a sweep); returns its final status."""
    part = runner.execute_part(part_id, worker=self.request.hostname or "",
                               task_id=self.request.id or "")
    return part.status if part is not None else None


def enqueue_part(part_id: int) -> None:
    """Send ``run_part`` for a part row; if the broker refuses, the part — and so
    its run — fails with what to check."""
    runner.SWEEPS.parts.enqueue(part_id, run_part.apply_async)


def enqueue_run(run_id: int) -> None:
    """Send ``run_scenario`` for a committed run; if the broker refuses, the run
    fails with what to check."""
    runner.JOBS.enqueue(run_id, run_scenario.apply_async)


@shared_task(name="twin.scenarios.reap")
def reap_scenarios() -> list[int]:
    """Fail running runs whose worker is gone (see ``runner.reap``); send again the
    queued runs and parts whose message was lost, or fail them past the limit
    (``runner.reap_queued``)."""
    queued = runner.reap_queued(run_scenario.apply_async, run_part.apply_async)
    return sorted(set(runner.reap()) | set(queued["failed"]))


@worker_ready.connect
def fail_runs_of_restarted_worker(sender: Any = None, **kwargs: Any) -> None:
    """On worker start: the runs and the parts this node name left ``running``
    cannot finish."""
    runner.JOBS.on_worker_ready(sender)
    runner.SWEEPS.on_worker_ready(sender)
