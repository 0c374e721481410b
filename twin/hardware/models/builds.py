"""Cluster builds requested over the API and run by a Celery worker."""
from django.conf import settings
from django.db import models

from twin.core.choices import JobStatusChoices

__all__ = ["ClusterBuild"]


class ClusterBuild(models.Model):
    """One request to build a preset: its parameters, progress and outcome."""

    preset = models.CharField(max_length=50)
    name = models.CharField(max_length=100)
    params = models.JSONField(default=dict)
    status = models.CharField(max_length=10, choices=JobStatusChoices.choices(),
                              default=JobStatusChoices.QUEUED, db_index=True)
    progress = models.FloatField(default=0.0)
    message = models.CharField(max_length=200, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    cluster = models.ForeignKey("hardware.Cluster", on_delete=models.SET_NULL, null=True,
                                blank=True, related_name="builds")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                   null=True, blank=True, related_name="cluster_builds")
    task_id = models.CharField(max_length=64, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.preset} → {self.name} ({self.status})"
