"""Celery tasks of the jobs on the twin: thin shims over :mod:`twin.jobs.scheduler`.

``finish_jobs`` runs on Celery beat (``CELERY_BEAT_SCHEDULE["jobs-finish"]``):
running jobs past their expected duration complete, release their cards, and
the queued jobs that now fit are placed.
"""
from __future__ import annotations

from celery import shared_task

from twin.jobs import scheduler

__all__ = ["finish_jobs"]


@shared_task(name="twin.jobs.finish_due", acks_late=True, time_limit=120, soft_time_limit=100)
def finish_jobs() -> list[int]:
    """Complete the jobs past their expected duration (see ``scheduler.finish_due``)."""
    return scheduler.finish_due()
