"""Cluster grants in the admin (``twin.core.access``): who sees which cluster.

Only a user whose own access is unrestricted (a superuser, or a user without grant
rows) may add, change or delete grants: a restricted user who could would delete
their own last row and so regain every cluster (no rows means no restriction). A
restricted user sees the grants of the clusters they may see, read-only.
"""
from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from twin.core.access import access_for
from twin.core.admin.base import TwinModelAdmin
from twin.hardware.filtersets import ClusterGrantFilterSet
from twin.hardware.models import ClusterGrant

__all__ = ["ClusterGrantAdmin"]


@admin.register(ClusterGrant)
class ClusterGrantAdmin(TwinModelAdmin):
    cluster_field = "cluster"
    filterset_class = ClusterGrantFilterSet
    filterset_sidebar = ("level",)
    search_fields = ClusterGrantFilterSet.search_fields
    list_display = ("user", "cluster", "level", "created")
    list_select_related = ("user", "cluster")
    autocomplete_fields = ("cluster",)
    raw_id_fields = ("user",)

    def _unrestricted(self, request: HttpRequest) -> bool:
        return not access_for(request.user, request).restricted

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return super().has_add_permission(request, *args) and self._unrestricted(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_change_permission(request, obj) and self._unrestricted(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_delete_permission(request, obj) and self._unrestricted(request)
