"""Jobs on the twin over the REST API.

``POST /api/jobs/`` ``{"cluster", "name", "tenant", "cards" | "share_milli", "accelerator",
"qos", "priority", "gang", "duration_s", "policy"}`` validates the job (400 per field),
then places it at once on the cluster's free capacity (``twin.jobs.scheduler``) and
answers **201** with the job: ``running`` with its cards, placement quality and
predicted AllReduce time, or ``queued`` with the reason it does not fit.
``POST /api/jobs/<id>/cancel/`` releases its cards (409 once it has finished) and
places queued jobs that now fit. ``DELETE`` of a running job is refused (409: cancel it
first). Reads need a login; submit needs ``jobs.add_job`` (operators), cancel
``jobs.change_job`` or being the submitter.

``GET /api/jobs/allocations/`` lists allocations (filters ``cluster``, ``job``,
``card``, ``server``, ``tenant``); ``GET /api/clusters/<id>/allocations/`` gives a
cluster's as parallel arrays for the dashboard. ``POST /api/jobs/traces/`` uploads a
trace (multipart: ``name``, ``format``, ``jobs`` file, optional ``nodes`` file; at
most ``TWIN_TRACE_MAX_BYTES``, else 413), parsed row by row: any bad row is a 400 with
line numbers per file, and nothing is stored.

``GET /api/jobs/remediations/`` lists self-healing's remediations (filters
``cluster``, ``card``, ``job``, ``state``, ``cause``), ``GET …/<id>/`` one with its
proposal; ``POST …/<id>/apply/`` applies a proposed one (the jobs move to their spare
cards, the alert closes as remediated) and ``POST …/<id>/reject/`` (``{"reason"}``)
declines it — both need ``jobs.change_remediation`` (operators) and answer 409 once
it was decided. ``POST /api/jobs/<id>/checkpoint/`` records that a job finished a
checkpoint now (``{"at"}`` for another time): the restart point self-healing prices.
"""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Prefetch
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.filters import OrderingFilter
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from twin.core.api.access import ClusterScopedMixin
from twin.core.api.filters import TwinFilterBackend
from twin.core.api.pagination import IdCursorPagination
from twin.core.api.permissions import TwinModelPermissions
from twin.core.api.schema import error_response
from twin.core.api.viewsets import TwinModelViewSet
from twin.hardware.models import Cluster
from twin.jobs.api.serializers import (
    AllocationSerializer,
    CheckpointSerializer,
    ClusterAllocationsSerializer,
    JobSerializer,
    RemediationDecisionSerializer,
    RemediationSerializer,
    TraceSerializer,
    TraceUploadSerializer,
)
from twin.jobs.choices import JobStateChoices
from twin.jobs.filtersets import (
    AllocationFilterSet,
    JobFilterSet,
    RemediationFilterSet,
    TraceFilterSet,
)
from twin.jobs.models import Allocation, Job, Remediation, Trace

__all__ = ["AllocationViewSet", "ClusterAllocationsViewSet", "JobPermissions", "JobViewSet",
           "RemediationPermissions", "RemediationViewSet", "TraceViewSet",
           "cluster_allocations"]


class JobPermissions(TwinModelPermissions):
    """Reads: logged in. Submit: ``jobs.add_job``. Cancel or record a checkpoint: the
    submitter, or ``jobs.change_job``. Delete (a finished job): ``jobs.delete_job``."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if getattr(view, "action", None) in ("cancel", "checkpoint"):
            return bool(request.user and request.user.is_authenticated)
        return super().has_permission(request, view)

    def has_object_permission(self, request: Request, view: Any, obj: Any) -> bool:
        if getattr(view, "action", None) in ("cancel", "checkpoint"):
            user = request.user
            return bool(obj.submitted_by_id == user.pk or user.has_perm("jobs.change_job"))
        return True


class JobViewSet(TwinModelViewSet):
    """Jobs: submit (placed at once, or queued), list, read, cancel, delete a finished one."""

    queryset = Job.objects.select_related("submitted_by", "accelerator").prefetch_related(
        Prefetch("allocations", queryset=Allocation.objects.only("id", "job_id", "card_id")))
    cluster_field = "cluster"
    serializer_class = JobSerializer
    filterset_class = JobFilterSet
    permission_classes = [JobPermissions]
    http_method_names = ["get", "post", "delete", "head", "options"]
    ordering_fields = ["id", "name", "tenant", "cards", "priority", "state", "created"]

    def perform_create(self, serializer: Any) -> None:
        from twin.jobs.scheduler import submit

        job = serializer._cleaned_instance
        submit(job, self.request.user, serializer.validated_data.get("policy") or None)
        serializer.instance = job
        self._read_back(serializer)

    @extend_schema(request=None, responses={
        200: JobSerializer, 409: error_response("The job already finished: nothing to cancel.")})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: Any = None) -> Response:
        """Cancel a queued or running job: its cards are released, queued jobs retried."""
        from twin.jobs.scheduler import cancel

        job = self.get_object()
        if not cancel(job):
            return Response({"detail": f"job {job} already {job.state}; nothing to cancel"},
                            status=status.HTTP_409_CONFLICT)
        return Response(self.get_serializer(self.get_queryset().get(pk=job.pk)).data)

    @extend_schema(request=CheckpointSerializer, responses={
        200: JobSerializer, 409: error_response("The job is not running.")})
    @action(detail=True, methods=["post"])
    def checkpoint(self, request: Request, pk: Any = None) -> Response:
        """Record that the running job finished a checkpoint (now, or at ``at``): the
        restart point and lost work self-healing prices after a failure."""
        from django.utils import timezone

        job = self.get_object()
        body = CheckpointSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        at = body.validated_data.get("at") or timezone.now()
        if job.state != JobStateChoices.RUNNING:
            return Response({"detail": f"job {job} is {job.state}: only a running job "
                                       f"checkpoints"}, status=status.HTTP_409_CONFLICT)
        if job.started and at < job.started:
            raise serializers.ValidationError({"at": "Before the job started."})
        Job.objects.filter(pk=job.pk).update(last_checkpoint_at=at, last_updated=timezone.now())
        return Response(self.get_serializer(self.get_queryset().get(pk=job.pk)).data)


class RemediationPermissions(TwinModelPermissions):
    """Reads: logged in. Apply / reject: ``jobs.change_remediation`` (operators)."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if getattr(view, "action", None) in ("apply", "reject"):
            user = request.user
            return bool(user and user.is_authenticated
                        and user.has_perm("jobs.change_remediation"))
        return super().has_permission(request, view)


class RemediationViewSet(ClusterScopedMixin, viewsets.ReadOnlyModelViewSet):
    """Self-healing's audit trail: what failed, why, what was proposed and done."""

    queryset = Remediation.objects.select_related("applied_by").prefetch_related("jobs")
    cluster_field = "cluster"
    serializer_class = RemediationSerializer
    filterset_class = RemediationFilterSet
    filter_backends = [TwinFilterBackend]
    pagination_class = IdCursorPagination
    permission_classes = [RemediationPermissions]

    def _decided(self, rem: Remediation) -> Response:
        rem = self.get_queryset().get(pk=rem.pk)
        return Response(self.get_serializer(rem).data)

    @extend_schema(request=None, responses={
        200: RemediationSerializer,
        409: error_response("It was already applied, rejected or failed.")})
    @action(detail=True, methods=["post"])
    def apply(self, request: Request, pk: Any = None) -> Response:
        """Apply a proposed remediation (answers the remediation: applied, or failed
        with the reason when a spare was taken meanwhile)."""
        from django.core.exceptions import ValidationError

        from twin.jobs import healing

        rem = self.get_object()
        try:
            healing.apply(rem, user=request.user)
        except ValidationError as exc:
            return Response({"detail": "; ".join(exc.messages)}, status=status.HTTP_409_CONFLICT)
        return self._decided(rem)

    @extend_schema(request=RemediationDecisionSerializer, responses={
        200: RemediationSerializer,
        409: error_response("It was already applied, rejected or failed.")})
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: Any = None) -> Response:
        """Decline a proposed remediation: nothing moves, the card stays out of service."""
        from django.core.exceptions import ValidationError

        from twin.jobs import healing

        rem = self.get_object()
        body = RemediationDecisionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            healing.reject(rem, user=request.user, reason=body.validated_data.get("reason", ""))
        except ValidationError as exc:
            return Response({"detail": "; ".join(exc.messages)}, status=status.HTTP_409_CONFLICT)
        return self._decided(rem)


class AllocationViewSet(ClusterScopedMixin, viewsets.ReadOnlyModelViewSet):
    """Allocations: which job holds which card, its share and virtual function."""

    queryset = Allocation.objects.select_related("job", "card")
    cluster_field = "job__cluster"
    serializer_class = AllocationSerializer
    filterset_class = AllocationFilterSet
    filter_backends = [TwinFilterBackend]
    pagination_class = IdCursorPagination


def cluster_allocations(cluster: Cluster) -> dict[str, Any]:
    """A cluster's running allocations as parallel arrays, and its running jobs."""
    rows = list(Allocation.objects.filter(job__cluster=cluster,
                                          job__state=JobStateChoices.RUNNING)
                .order_by("card_id", "job_id")
                .values_list("card_id", "job_id", "share_milli", "vf_index"))
    jobs = list(Job.objects.filter(cluster=cluster, state=JobStateChoices.RUNNING)
                .order_by("id").values("id", "name", "tenant", "cards", "share_milli",
                                       "placement"))
    return {"cluster": cluster.pk,
            "card": [r[0] for r in rows], "job": [r[1] for r in rows],
            "share_milli": [r[2] for r in rows], "vf_index": [r[3] for r in rows],
            "jobs": jobs, "tenants": sorted({j["tenant"] for j in jobs})}


class ClusterAllocationsViewSet(ClusterScopedMixin, viewsets.GenericViewSet):
    """``/api/clusters/<id>/allocations/``: an action on the hardware API's clusters."""

    queryset = Cluster.objects.all()
    cluster_field = "pk"

    @extend_schema(responses=ClusterAllocationsSerializer, filters=False)
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def allocations(self, request: Request, pk: str | None = None) -> Response:
        """Which running job holds each card (parallel arrays, sorted by card id)."""
        return Response(cluster_allocations(self.get_object()))


class TracePermissions(TwinModelPermissions):
    """Upload: ``jobs.add_trace``; delete: ``jobs.delete_trace``."""


class TraceViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin,
                   mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """Uploaded traces (parsed, stored compressed) that scheduling runs replay."""

    queryset = Trace.objects.select_related("uploaded_by").defer("nodes", "workload")
    serializer_class = TraceSerializer
    filterset_class = TraceFilterSet
    filter_backends = [TwinFilterBackend, OrderingFilter]
    ordering_fields = ["id", "name", "created", "job_count"]
    permission_classes = [TracePermissions]
    parser_classes = [MultiPartParser]

    def get_serializer_class(self) -> type[serializers.Serializer]:
        return TraceUploadSerializer if self.action == "create" else TraceSerializer

    @extend_schema(request={"multipart/form-data": TraceUploadSerializer},
                   responses={201: TraceSerializer,
                              413: error_response("The upload is over TWIN_TRACE_MAX_BYTES.")})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Upload and parse a trace; 400 with line numbers per file if any row is bad."""
        from twin.jobs.traces import TraceUploadError, store_trace

        limit = int(settings.TWIN_TRACE_MAX_BYTES)
        try:
            size = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            size = 0
        if size > limit:
            return Response({"detail": f"The upload is {size:,} bytes; traces may be at most "
                                       f"{limit:,} bytes (TWIN_TRACE_MAX_BYTES).",
                             "limit": limit}, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
        incoming = self.get_serializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        files = [data["jobs"], *([data["nodes"]] if data.get("nodes") else [])]
        total = sum(f.size for f in files)
        if total > limit:
            return Response({"detail": f"The files hold {total:,} bytes; traces may be at most "
                                       f"{limit:,} bytes.", "limit": limit},
                            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
        try:
            with transaction.atomic():
                trace = store_trace(data["name"], data["format"], data["jobs"],
                                    data.get("nodes"), request.user, total)
        except TraceUploadError as exc:
            raise serializers.ValidationError(exc.errors) from exc
        body = TraceSerializer(trace, context=self.get_serializer_context()).data
        return Response(body, status=status.HTTP_201_CREATED)
