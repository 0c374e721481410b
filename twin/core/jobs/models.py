"""The abstract job row every background job model derives from.

A job is a row a worker owns while it runs: what state it is in, how far it
got, its outcome (``result`` or ``error``), which worker holds it and when that
worker last showed a sign of life. The fields are the ones
:class:`~twin.core.jobs.runner.JobRunner` reads and writes, so a concrete
model (``ScenarioRun``, ``ClusterBuild``) adds only what it is *about* (its
parameters, the cluster it concerns).

Status changes are compare-and-set updates (``filter(status=…).update(…)``)
made by the runner, never read-modify-write saves: a cancelled job stays
cancelled even when its worker finishes a moment later.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from twin.core.choices import JobStatusChoices

__all__ = ["Job"]


class Job(models.Model):
    """Status, progress and outcome of one background job, and who runs it.

    ``created_by``'s reverse name defaults to ``<app>_<model>_jobs``; a model
    that had a name of its own before (``user.scenario_runs``) redeclares the
    field to keep it.
    """

    status = models.CharField(max_length=10, choices=JobStatusChoices.choices(),
                              default=JobStatusChoices.QUEUED, db_index=True)
    progress = models.FloatField(default=0.0)
    message = models.CharField(max_length=200, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    error_field = models.CharField(max_length=200, blank=True,
                                   help_text="The input a failed run blames, if any.")
    task_id = models.CharField(max_length=64, blank=True)
    sent = models.DateTimeField(null=True, blank=True,
                                help_text="When its task was last sent to the broker (a queued "
                                          "job nobody took is sent again: the queued reaper).")
    worker = models.CharField(max_length=200, blank=True,
                              help_text="Worker (or command) that ran it.")
    heartbeat = models.DateTimeField(null=True, blank=True,
                                     help_text="Last sign of life while running.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                   null=True, blank=True,
                                   related_name="%(app_label)s_%(class)s_jobs")
    created = models.DateTimeField(auto_now_add=True, db_index=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-created", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(progress__gte=0) & Q(progress__lte=1),
                                   name="%(app_label)s_%(class)s_progress_0_1"),
        ]

    @property
    def is_final(self) -> bool:
        return self.status in JobStatusChoices.FINAL

    @property
    def duration_s(self) -> float | None:
        """Seconds from start to finish (None until both are known)."""
        if self.started and self.finished:
            return max((self.finished - self.started).total_seconds(), 0.0)
        return None
