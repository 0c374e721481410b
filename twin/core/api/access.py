"""Per-cluster access in the API bases (the rules are in ``twin.core.access``).

A viewset declares the path from its model to the cluster, once::

    class RackViewSet(TwinModelViewSet):
        cluster_field = "cluster"            # servers: "rack__cluster", clusters: "pk"

and :class:`ClusterScopedMixin` (a base of ``TwinModelViewSet``; put it first among
the bases of any other viewset) does the rest:

* the queryset loses other tenants' rows: they are absent from lists and a detail
  URL answers 404, as for an object that does not exist;
* a write to an object (PUT, PATCH, DELETE, any POST action on a detail URL) in a
  cluster the user may see but not change answers 403 (``cluster_write`` is the
  level a write needs: ``change``, or ``see`` for objects that only read their
  cluster, such as scenario runs);
* a reference in a body (``"rack": 7``) to an object of an unseen cluster is a 400
  "does not exist", the same answer as for a missing one: the serializer's related
  field only offers what the user sees; an object created or moved into a cluster
  the user may see but not change answers 403 and is not kept (the write's
  transaction rolls back);
* a restricted user cannot create a cluster (403), nor build or replace one
  (``refuse_new_cluster``): a new cluster would be outside their grants.
"""
from __future__ import annotations

from typing import Any

from django.db.models import Model, QuerySet
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.permissions import SAFE_METHODS

from twin.core.access import CHANGE, SEE, ClusterAccess, access_for

__all__ = ["ClusterScopedMixin", "cluster_of", "require_visible", "scope_related_fields"]

_CLUSTER_ITSELF = ("pk", "id")


def cluster_of(obj: Model, path: str) -> Any:
    """The cluster id of ``obj`` along ``path`` (one query, or none for a cluster)."""
    if path in _CLUSTER_ITSELF:
        return obj.pk
    return type(obj)._default_manager.filter(pk=obj.pk).values_list(path, flat=True).first()


def require_visible(request: Any, cluster_id: Any) -> None:
    """For a view that takes a cluster id in its URL: 404 for a cluster the user may not
    see, the answer for one that does not exist."""
    holder = getattr(request, "_request", request)
    if not access_for(getattr(request, "user", None), holder).can_see(cluster_id):
        raise NotFound(f"no cluster {cluster_id}")


def scope_related_fields(fields: dict[str, Any], path: str, access: ClusterAccess,
                         level: str = SEE) -> None:
    """Limit the related field that leads to the cluster (the first step of ``path``)
    to what ``access`` allows: another tenant's object then reads as missing."""
    if not access.restricted or path in _CLUSTER_ITSELF:
        return
    head, _, rest = path.partition("__")
    field = fields.get(head)
    queryset = getattr(field, "queryset", None)
    if field is None or getattr(field, "read_only", False) or queryset is None:
        return
    field.queryset = access.filter(queryset, rest or "pk", level)


class ClusterScopedMixin:
    """Filters the queryset and checks writes by the user's cluster grants."""

    #: The path from the model to its cluster (``None``: not per cluster).
    cluster_field: str | None = None
    #: The level a write to an object needs in its cluster.
    cluster_write: str = CHANGE

    request: Any

    @property
    def cluster_access(self) -> ClusterAccess:
        request = getattr(self.request, "_request", self.request)  # Django's, under DRF's
        return access_for(getattr(self.request, "user", None), request)

    def get_queryset(self) -> QuerySet[Any]:
        queryset = super().get_queryset()  # type: ignore[misc]
        if self.cluster_field is None:
            return queryset
        return self.cluster_access.filter(queryset, self.cluster_field)

    def get_object(self) -> Model:
        obj = super().get_object()  # type: ignore[misc]
        if self.cluster_field is not None and self.request.method not in SAFE_METHODS:
            self.check_cluster_write(obj)
        return obj

    def get_serializer(self, *args: Any, **kwargs: Any) -> Any:
        serializer = super().get_serializer(*args, **kwargs)  # type: ignore[misc]
        access = self.cluster_access
        if (self.cluster_field is not None and access.restricted
                and self.request.method not in SAFE_METHODS and hasattr(serializer, "fields")):
            scope_related_fields(serializer.fields, self.cluster_field, access)
        return serializer

    def check_cluster_write(self, obj: Model) -> None:
        """403 unless the user may write objects of ``obj``'s cluster."""
        if self.cluster_field is None:
            return
        access = self.cluster_access
        if not access.restricted:
            return
        cluster = cluster_of(obj, self.cluster_field)
        if not access.allows(cluster, self.cluster_write):
            raise PermissionDenied(f"You may see cluster {cluster} but not change it; ask an "
                                   f"administrator for a 'change' grant.")

    def check_cluster_create(self) -> None:
        """403 for a restricted user creating a cluster (it would be outside their grants)."""
        if self.cluster_field in _CLUSTER_ITSELF:
            self.refuse_new_cluster()

    def refuse_new_cluster(self) -> None:
        """403 for a restricted user: for any view that makes a cluster (a build)."""
        if self.cluster_access.restricted:
            raise PermissionDenied("Your access is limited to some clusters: an administrator "
                                   "creates new clusters and grants them to you.")
