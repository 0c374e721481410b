"""Per-cluster access in the admin (the rules are in ``twin.core.access``).

A ``TwinModelAdmin`` declares the path from its model to the cluster, as the API's
viewset does (``cluster_field = "rack__cluster"``), and this mixin:

* leaves other tenants' rows out of the changelist, the search and the change page
  (Django then answers an unknown object: "… doesn't exist. Perhaps it was deleted?");
* shows an object of a cluster the user may see but not change read-only (no save,
  no delete), and refuses a bulk action that would delete one;
* offers in the form's cluster field (or the field leading to it: a server's rack)
  only what the user may change, so nothing is created or moved elsewhere;
* hides "add" on the clusters themselves from a restricted user.
"""
from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import models
from django.http import HttpRequest

from twin.core.access import CHANGE, access_for

__all__ = ["ClusterScopedAdminMixin"]

_CLUSTER_ITSELF = ("pk", "id")


def _cluster_id(obj: models.Model, path: str) -> Any:
    if path in _CLUSTER_ITSELF:
        return obj.pk
    return type(obj)._default_manager.filter(pk=obj.pk).values_list(path, flat=True).first()


class ClusterScopedAdminMixin:
    #: The path from the model to its cluster (``None``: not per cluster).
    cluster_field: str | None = None

    def get_queryset(self, request: HttpRequest) -> models.QuerySet[Any]:
        queryset = super().get_queryset(request)  # type: ignore[misc]
        if self.cluster_field is None:
            return queryset
        return access_for(request.user, request).filter(queryset, self.cluster_field)

    def _may_change(self, request: HttpRequest, obj: models.Model | None) -> bool:
        if self.cluster_field is None or obj is None or obj.pk is None:
            return True
        access = access_for(request.user, request)
        return not access.restricted or access.can_change(_cluster_id(obj, self.cluster_field))

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(super().has_change_permission(request, obj)  # type: ignore[misc]
                    and self._may_change(request, obj))

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(super().has_delete_permission(request, obj)  # type: ignore[misc]
                    and self._may_change(request, obj))

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        allowed = bool(super().has_add_permission(request, *args))  # type: ignore[misc]
        if self.cluster_field in _CLUSTER_ITSELF and \
                access_for(request.user, request).restricted:
            return False
        return allowed

    def delete_queryset(self, request: HttpRequest, queryset: models.QuerySet[Any]) -> None:
        if self.cluster_field is not None:
            access = access_for(request.user, request)
            if access.restricted and queryset.exclude(
                    pk__in=access.filter(queryset, self.cluster_field, CHANGE)
                    .values("pk")).exists():
                raise PermissionDenied("some of the selected objects are in clusters you may "
                                       "see but not change")
        super().delete_queryset(request, queryset)  # type: ignore[misc]

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest,
                                 **kwargs: Any) -> Any:
        field = super().formfield_for_foreignkey(db_field, request, **kwargs)  # type: ignore[misc]
        path = self.cluster_field
        if path is None or path in _CLUSTER_ITSELF or field is None:
            return field
        head, _, rest = path.partition("__")
        access = access_for(request.user, request)
        if db_field.name == head and access.restricted:
            field.queryset = access.filter(field.queryset, rest or "pk", CHANGE)
        return field
