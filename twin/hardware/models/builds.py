"""Cluster builds requested over the API and run by a Celery worker.

Status, progress, outcome, worker and heartbeat are the fields of every job
(:class:`twin.core.jobs.Job`), moved by the one runner
(``twin.hardware.runner``), so a build whose worker dies ends failed.
"""
from django.conf import settings
from django.db import models

from twin.core.jobs import Job
from twin.core.validators import printable

__all__ = ["ClusterBuild"]


class ClusterBuild(Job):
    """One request to build a preset: its parameters, progress and outcome."""

    preset = models.CharField(max_length=50)
    name = models.CharField(max_length=100, validators=[printable])
    params = models.JSONField(default=dict)
    cluster = models.ForeignKey("hardware.Cluster", on_delete=models.SET_NULL, null=True,
                                blank=True, related_name="builds")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                   null=True, blank=True, related_name="cluster_builds")

    def __str__(self) -> str:
        return f"{self.preset} → {self.name} ({self.status})"
