"""Background jobs: the abstract job row and the one runner every job model uses.

``models.Job`` holds what a job is (status, progress, outcome, worker,
heartbeat); ``runner.JobRunner`` moves it through its life with
compare-and-set updates. An app with jobs derives its model from ``Job``,
makes one ``JobRunner`` for it in its own ``runner.py`` and keeps its
``tasks.py`` as thin Celery shims over that runner.
"""
from twin.core.jobs.models import Job
from twin.core.jobs.runner import Cancelled, JobError, JobRunner, Outcome, Reporter, Send

__all__ = ["Cancelled", "Job", "JobError", "JobRunner", "Outcome", "Reporter", "Send"]
