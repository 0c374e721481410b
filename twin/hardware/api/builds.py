"""Cluster builds over the API: validate now, build in a Celery worker.

``POST /api/builds/`` checks the request with the builder's ``check_build``
(the same checks ``manage.py build_cluster`` runs: unknown preset, name taken
without ``replace``, a preset that cannot fit its racks' budget) and answers
400 on the field at fault *before* anything is written or queued. A valid
request becomes a ``ClusterBuild`` row, and the task is queued only once that
row is committed (``transaction.on_commit``, through
:func:`twin.hardware.tasks.enqueue_build`), so a worker never looks for a row
that is not there yet. The client polls ``GET /api/builds/<id>/``; the worker
runs it as a job (``twin.hardware.runner``), so a build whose worker dies ends
``failed``. With the task queue (Redis) away the answer is 503 + ``Retry-After``
and nothing is written (checked first); should it vanish between that check and
the commit, the build is kept ``failed`` and the 503 names it.

The builder and the task are imported when first used: the API must load
(and its schema generate) on a checkout where the builder is being changed.
"""
from __future__ import annotations

from typing import Any

from django.db import transaction
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.exceptions import PermissionDenied
from rest_framework.filters import OrderingFilter
from rest_framework.request import Request
from rest_framework.response import Response

from twin.core.api.access import ClusterScopedMixin
from twin.core.api.filters import TwinFilterBackend
from twin.core.api.permissions import TwinModelPermissions, TwinReadOnlyPermissions
from twin.core.choices import JobStatusChoices
from twin.core.unavailable import RETRY_AFTER_S, check_broker
from twin.hardware.api.serializers import (
    BuildRequestSerializer,
    ClusterBuildSerializer,
    PresetSerializer,
)
from twin.hardware.filtersets import ClusterBuildFilterSet
from twin.hardware.models import ClusterBuild

__all__ = ["BuildPermissions", "ClusterBuildViewSet", "PresetViewSet", "preset_info"]


class BuildPermissions(TwinModelPermissions):
    """Requesting a build creates a cluster, so it needs ``hardware.add_cluster``."""

    perms_map = {**TwinModelPermissions.perms_map, "POST": ["hardware.add_cluster"]}


def _check_may_replace(request: Request, name: str) -> None:
    """Replacing a cluster deletes it with everything in it: that needs the delete
    permission (``twin.core.deletion``'s rule; an operator may build, not replace)."""
    from twin.hardware.models import Cluster

    if Cluster.objects.filter(name=name).exists() and \
            not request.user.has_perm("hardware.delete_cluster"):
        raise PermissionDenied(f"Replacing cluster {name!r} deletes it: that needs "
                               f"hardware.delete_cluster (a hardware admin).")


def preset_info(key: str, preset: Any) -> dict[str, Any]:
    """Name, description, default build parameters and planned counts of a preset.

    The preset type belongs to the builder; this reads it defensively
    (``getattr`` with fallbacks) so a renamed attribute there degrades one
    field of this listing instead of breaking the API.
    """
    name = str(getattr(preset, "name", key) or key)
    plan: dict[str, Any] | None = None
    try:
        plan = _jsonable(preset.plan().summary())
    except Exception:  # noqa: BLE001 - the listing must not fail on one preset
        plan = None
    return {
        "name": name,
        "description": str(getattr(preset, "description", "") or ""),
        "defaults": {
            "name": getattr(preset, "default_name", "") or name,
            "supernodes": getattr(preset, "default_supernodes", None),
            "rack_budget_w": getattr(preset, "rack_budget_w", None),
            "replace": False,
        },
        "plan": plan,
        "notes": [str(note) for note in getattr(preset, "notes", ()) or ()],
    }


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


class PresetViewSet(viewsets.ViewSet):
    """Cluster presets a build can start from (read-only: other methods are 405)."""

    permission_classes = [TwinReadOnlyPermissions]
    http_method_names = ["get", "head", "options"]

    @extend_schema(responses=PresetSerializer(many=True))
    def list(self, request: Request) -> Response:
        from twin.hardware.presets import PRESETS

        return Response([preset_info(key, preset) for key, preset in PRESETS.items()])


class ClusterBuildViewSet(ClusterScopedMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                          mixins.CreateModelMixin, viewsets.GenericViewSet):
    """Builds requested over the API and how far they got."""

    queryset = ClusterBuild.objects.select_related("created_by")
    cluster_field = "cluster"
    serializer_class = ClusterBuildSerializer
    filterset_class = ClusterBuildFilterSet
    filter_backends = [TwinFilterBackend, OrderingFilter]
    ordering_fields = ["id", "created", "status", "preset"]
    permission_classes = [BuildPermissions]

    def get_serializer_class(self) -> type[serializers.Serializer]:
        if self.action == "create":
            return BuildRequestSerializer
        return ClusterBuildSerializer

    @extend_schema(request=BuildRequestSerializer,
                   responses={202: ClusterBuildSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Check the request now (400 on the field at fault), build in the background (202)."""
        from twin.hardware.builder import BuildError, check_build
        from twin.hardware.presets import PRESETS
        from twin.hardware.tasks import enqueue_build

        self.refuse_new_cluster()  # per-cluster access: a new cluster is outside the grants
        incoming = self.get_serializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        options = {key: data[key] for key in ("name", "supernodes", "rack_budget_w")
                   if data.get(key) is not None}
        if data["replace"]:
            _check_may_replace(request, data.get("name")
                               or getattr(PRESETS[data["preset"]], "default_name", "")
                               or data["preset"])
        try:
            check_build(data["preset"], replace=data["replace"], **options)
        except BuildError as exc:
            field = getattr(exc, "field", None) or "non_field_errors"
            message = getattr(exc, "message", None) or str(exc)
            raise serializers.ValidationError({field: [message]}) from exc

        check_broker()
        with transaction.atomic():
            build = ClusterBuild.objects.create(
                preset=data["preset"],
                name=data.get("name")
                or getattr(PRESETS[data["preset"]], "default_name", "") or data["preset"],
                params={**options, "replace": data["replace"]},
                created_by=request.user if request.user.is_authenticated else None,
            )
            transaction.on_commit(lambda: enqueue_build(build.pk))
        build.refresh_from_db()
        body = ClusterBuildSerializer(build, context=self.get_serializer_context()).data
        location = request.build_absolute_uri(reverse("api:clusterbuild-detail",
                                                      args=[build.pk]))
        if build.status == JobStatusChoices.FAILED:  # the task could not be sent on commit
            return Response(
                {"detail": f"the build could not be queued ({build.error}); it is kept as "
                           f"failed build #{build.pk}: request it again shortly",
                 "build": body},
                status=status.HTTP_503_SERVICE_UNAVAILABLE,
                headers={"Location": location, "Retry-After": str(RETRY_AFTER_S)})
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": location})
