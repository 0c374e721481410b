"""Per-cluster grants: who may see or change which cluster (``twin.core.access``).

A user with no grant row keeps access to every cluster; one row limits the user to
the clusters granted. The core asks through the provider registered in
``HardwareConfig.ready()`` (:func:`grants_of`), so it never imports this model.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import models

from twin.core.access import CHANGE, SEE

__all__ = ["ClusterGrant", "grants_of"]


class ClusterGrant(models.Model):
    LEVELS = ((SEE, "See"), (CHANGE, "See and change"))

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="cluster_grants")
    cluster = models.ForeignKey("hardware.Cluster", on_delete=models.CASCADE,
                                related_name="grants")
    level = models.CharField(max_length=10, choices=LEVELS, default=SEE,
                             help_text="See: read its data; change: also write it (within "
                                       "what the user's role allows).")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["user", "cluster"]
        constraints = [
            models.UniqueConstraint(fields=["user", "cluster"], name="clustergrant_unique"),
            models.CheckConstraint(condition=models.Q(level__in=[SEE, CHANGE]),
                                   name="clustergrant_level_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.user} → {self.cluster} ({self.level})"


def grants_of(user: Any) -> Iterable[tuple[int, str]]:
    """The provider of ``twin.core.access``: the user's ``(cluster_id, level)`` rows."""
    return list(ClusterGrant.objects.filter(user_id=user.pk).values_list("cluster_id", "level"))
