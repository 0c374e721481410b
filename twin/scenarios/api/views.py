"""Scenario runs over the REST API (``/api/scenarios/``), and the route between two cards.

``POST /api/scenarios/`` ``{"kind": ..., "cluster": <id>?, "params": {...},
"refresh": false}`` validates everything now — the kind's ``prepare``, which
converts the cluster and checks the parameters against the topology — and
answers

* **202 Accepted** with the queued run (``Location``: its URL) — the task is
  sent once the row is committed;
* **201 Created** with a run that is already ``succeeded``: an earlier run
  with the same inputs (same kind, parameters and converted cluster) had the
  result, which is reused (``cached_from``); ``"refresh": true`` recomputes;
* **400** with per-field errors, keys being dotted paths
  (``{"params.dims[0]": ["every dimension must be ≥ 2, got 1"]}``,
  ``{"kind": [...]}``, ``{"cluster": [...]}``) — nothing written or queued;
* **429** ``{"detail", "limit", "active"}`` when the user already has
  ``TWIN_SCENARIO_MAX_ACTIVE_PER_USER`` runs queued or running — nothing written;
* **503** + ``Retry-After`` when the task queue (Redis) is not reachable: checked
  before anything is written, so nothing is created and the client simply
  retries the same request. Should the broker vanish between that check and
  the commit, the run is kept ``failed`` with its parameters and the 503 names
  it (``run``) — a 202 "queued" is only ever answered for a run whose task was
  sent.

``GET /api/scenarios/`` lists runs (filters ``kind``, ``status``, ``cluster``,
``created_by``, ``cached``, ``created_after``/``created_before``; without
``result`` and ``inputs``, which the detail has). ``GET /api/scenarios/<id>/``
gives status, progress and result. ``POST /api/scenarios/<id>/cancel/``
cancels a queued or running run (its creator or a user with
``scenarios.change_scenariorun``); 409 if it already finished.
``GET /api/scenarios/kinds/`` describes every kind's parameters (name, type,
label, help, default, choices, bounds) and chart, so a client builds its form
from what ``prepare`` accepts instead of a copy of it.

``GET /api/clusters/<id>/route/`` answers a route now, in the request, with the
same conversion and search as the ``route`` kind (see ``route``).
"""
from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ErrorDetail
from rest_framework.filters import OrderingFilter
from rest_framework.request import Request
from rest_framework.response import Response

from simulation.snapshot import LiveSnapshot
from twin.core.access import SEE
from twin.core.api.access import ClusterScopedMixin
from twin.core.api.filters import TwinFilterBackend
from twin.core.api.permissions import TwinModelPermissions
from twin.core.api.schema import error_response
from twin.core.choices import JobStatusChoices
from twin.core.unavailable import RETRY_AFTER_S, check_broker
from twin.hardware.models import Cluster
from twin.scenarios.api.route import RouteSerializer, cluster_route
from twin.scenarios.filtersets import ScenarioRunFilterSet
from twin.scenarios.kinds import (
    FIELD_TYPES,
    REGISTRY,
    ScenarioInputError,
    describe_kinds,
    get_kind,
)
from twin.scenarios.models import ScenarioRun

__all__ = [
    "ClusterRouteViewSet",
    "ScenarioKindSerializer",
    "ScenarioPermissions",
    "ScenarioRequestSerializer",
    "ScenarioRunListSerializer",
    "ScenarioRunSerializer",
    "ScenarioRunViewSet",
]


def input_error(exc: ScenarioInputError) -> serializers.ValidationError:
    """The 400 of a kind's refusal, its fields that name nothing stored coded
    ``does_not_exist`` (so 404 on a read, 409 on a write: twin.core.api.exceptions)."""
    return serializers.ValidationError({
        field: [ErrorDetail(message, code="does_not_exist" if field in exc.missing
                            else "invalid") for message in messages]
        for field, messages in exc.errors.items()})


class ScenarioRunListSerializer(serializers.ModelSerializer):
    """A run without its (possibly large) inputs and result."""

    url = serializers.HyperlinkedIdentityField(view_name="api:scenariorun-detail")
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True,
                                              allow_null=True)
    cached = serializers.SerializerMethodField()
    duration_s = serializers.FloatField(read_only=True, allow_null=True,
                                        help_text="Seconds from start to finish; null until "
                                                  "it finished.")
    websocket = serializers.SerializerMethodField()

    class Meta:
        model = ScenarioRun
        fields = [
            "id", "url", "kind", "cluster", "params", "status", "progress", "message",
            "error", "error_field", "cached", "cached_from", "created_by", "task_id",
            "worker", "created", "started", "finished", "duration_s", "websocket",
        ]
        read_only_fields = fields

    def get_cached(self, run: ScenarioRun) -> bool:
        return run.cached_from_id is not None

    def get_websocket(self, run: ScenarioRun) -> str:
        return f"/ws/scenarios/{run.pk}/"


class ScenarioRunSerializer(ScenarioRunListSerializer):
    """A run with what the simulation ran on and what it found."""

    rows = serializers.SerializerMethodField(
        help_text="The result as the kind summarises it: [label, value] pairs (what "
                  "run_scenario prints and the dashboard's table shows); null until it "
                  "succeeded.")

    snapshot = serializers.SerializerMethodField(
        help_text="The live state the run was forked from, summarised (when it was taken, "
                  "whether there was live telemetry, what was down, jobs, cards reporting, "
                  "its digest); null when it read none. The whole snapshot: "
                  "GET /api/scenarios/<id>/snapshot/.")

    class Meta(ScenarioRunListSerializer.Meta):
        fields = [*ScenarioRunListSerializer.Meta.fields, "params_hash", "inputs", "result",
                  "rows", "snapshot"]
        read_only_fields = fields

    @extend_schema_field(serializers.DictField(allow_null=True))
    def get_snapshot(self, run: ScenarioRun) -> dict[str, Any] | None:
        if not run.snapshot:
            return None
        return LiveSnapshot.from_dict(run.snapshot).summary()

    @extend_schema_field(serializers.ListField(child=serializers.ListField(
        child=serializers.CharField()), allow_null=True))
    def get_rows(self, run: ScenarioRun) -> list[list[str]] | None:
        if run.status != JobStatusChoices.SUCCEEDED or not run.result:
            return None
        return [list(row) for row in get_kind(run.kind).rows(run.result)]


class ScenarioRequestSerializer(serializers.Serializer):
    """What ``POST /api/scenarios/`` accepts (the kind validates ``params``)."""

    kind = serializers.ChoiceField(choices=list(REGISTRY), error_messages={
        "invalid_choice": f"unknown kind '{{input}}' (choose from {', '.join(sorted(REGISTRY))})"},
                                   help_text="The kind of simulation (GET /api/scenarios/kinds/ "
                                             "describes each one's parameters).")
    cluster = serializers.PrimaryKeyRelatedField(
        queryset=Cluster.objects.all(), required=False, allow_null=True,
        help_text="Run on this cluster's model instead of a family in params.")
    params = serializers.DictField(required=False, default=dict,
                                   help_text="Kind parameters (an object; omitted: {}); see "
                                             "README 'Scenario runs'.")
    refresh = serializers.BooleanField(default=False,
                                       help_text="Recompute even if a cached result exists.")
    fork = serializers.BooleanField(
        default=False, help_text="Fork now: freeze the cluster's live state (cards, servers and "
                                 "links down, running jobs and the queue, readings per card "
                                 "and rack) into the run's input, stored with the run. Needs "
                                 "a cluster; one without live telemetry forks its inventory "
                                 "(the result's fork.note says so).")
    fork_from = serializers.PrimaryKeyRelatedField(
        queryset=ScenarioRun.objects.only("id", "cluster_id", "snapshot"), required=False,
        allow_null=True, help_text="Reuse the live state stored with this earlier run (same "
                                   "cluster): the same snapshot and seed give the same answer.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("fork") and attrs.get("fork_from") is not None:
            raise serializers.ValidationError(
                {"fork_from": ["give either fork (freeze now) or fork_from (an earlier "
                               "run's snapshot), not both"]})
        return attrs


class KindFieldSerializer(serializers.Serializer):
    """One parameter of a kind (``twin.scenarios.kinds.FieldSpec``)."""

    name = serializers.CharField()
    type = serializers.CharField(help_text=f"One of: {', '.join(FIELD_TYPES)}.")
    label = serializers.CharField()
    help = serializers.CharField()
    required = serializers.BooleanField()
    default = serializers.JSONField(allow_null=True)
    choices = serializers.ListField(child=serializers.CharField(), allow_null=True)
    min = serializers.FloatField(allow_null=True, help_text="Inclusive (per list element).")
    max = serializers.FloatField(allow_null=True, help_text="Inclusive (per list element).")
    needs_cluster = serializers.BooleanField(help_text="Only with a cluster.")
    advanced = serializers.BooleanField(help_text="Simulation node/link numbers.")


class KindChartSerializer(serializers.Serializer):
    """Which rows of the result to plot: ``result[series][i][x]`` against ``[y]``."""

    series = serializers.CharField()
    x = serializers.CharField()
    y = serializers.CharField()
    log_x = serializers.BooleanField()
    x_label = serializers.CharField()
    y_label = serializers.CharField()


class ScenarioKindSerializer(serializers.Serializer):
    """A scenario kind as ``GET /api/scenarios/kinds/`` describes it."""

    name = serializers.CharField()
    label = serializers.CharField()
    description = serializers.CharField()
    fields = KindFieldSerializer(many=True)
    chart = KindChartSerializer(allow_null=True)


class ScenarioPermissions(TwinModelPermissions):
    """Reads: logged in. Start: ``scenarios.add_scenariorun``. Cancel: the run's
    creator, or ``scenarios.change_scenariorun``."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if getattr(view, "action", None) == "cancel":
            return bool(request.user and request.user.is_authenticated)
        return super().has_permission(request, view)

    def has_object_permission(self, request: Request, view: Any, obj: Any) -> bool:
        if getattr(view, "action", None) == "cancel":
            user = request.user
            return bool(obj.created_by_id == user.pk
                        or user.has_perm("scenarios.change_scenariorun"))
        return True


class ScenarioRunViewSet(ClusterScopedMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                         mixins.CreateModelMixin, viewsets.GenericViewSet):
    """Scenario runs: start one, follow it, cancel it."""

    queryset = ScenarioRun.objects.select_related("created_by")
    cluster_field = "cluster"
    #: A run only reads its cluster: following or cancelling one needs "see".
    cluster_write = SEE
    serializer_class = ScenarioRunSerializer
    filterset_class = ScenarioRunFilterSet
    filter_backends = [TwinFilterBackend, OrderingFilter]
    ordering_fields = ["id", "created", "status", "kind", "finished"]
    permission_classes = [ScenarioPermissions]

    def get_queryset(self) -> Any:
        qs = super().get_queryset()
        if self.action == "list":
            qs = qs.defer("result", "inputs", "snapshot")
        return qs

    def get_serializer_class(self) -> type[serializers.Serializer]:
        if self.action == "create":
            return ScenarioRequestSerializer
        if self.action == "list":
            return ScenarioRunListSerializer
        return ScenarioRunSerializer

    def _body(self, run: ScenarioRun) -> dict[str, Any]:
        return ScenarioRunSerializer(run, context=self.get_serializer_context()).data

    @extend_schema(request=ScenarioRequestSerializer,
                   responses={202: ScenarioRunSerializer, 201: ScenarioRunSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Validate now (400 per field), run in a worker (202) or reuse a result (201)."""
        from twin.scenarios.runner import TooManyActiveRuns, submit
        from twin.scenarios.tasks import enqueue_run

        incoming = self.get_serializer(data=request.data)
        runs = incoming.fields["fork_from"]  # another tenant's run reads as missing
        runs.queryset = self.cluster_access.filter(runs.queryset, "cluster")
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        fork = data.get("fork_from") or data["fork"]
        try:
            run = submit(data["kind"], data.get("params"), data.get("cluster"), request.user,
                         refresh=data["refresh"], enqueue=enqueue_run,
                         before_queue=check_broker, fork=fork)
        except ScenarioInputError as exc:
            raise input_error(exc) from exc
        except TooManyActiveRuns as exc:
            return Response({"detail": str(exc), "limit": exc.limit, "active": exc.active},
                            status=status.HTTP_429_TOO_MANY_REQUESTS)
        run.refresh_from_db()  # the task was sent on commit, or the run failed then
        location = request.build_absolute_uri(reverse("api:scenariorun-detail", args=[run.pk]))
        if run.status == JobStatusChoices.FAILED:
            return Response(
                {"detail": f"the run could not be queued ({run.error}); it is kept as failed "
                           f"run #{run.pk} with its parameters: submit it again shortly",
                 "run": self._body(run)},
                status=status.HTTP_503_SERVICE_UNAVAILABLE,
                headers={"Location": location, "Retry-After": str(RETRY_AFTER_S)})
        code = (status.HTTP_201_CREATED if run.status == JobStatusChoices.SUCCEEDED
                else status.HTTP_202_ACCEPTED)
        return Response(self._body(run), status=code, headers={"Location": location})

    @extend_schema(responses=ScenarioKindSerializer(many=True), filters=False)
    @action(detail=False, methods=["get"], filter_backends=[], pagination_class=None)
    def kinds(self, request: Request) -> Response:
        """The kinds and their parameters, to build a form from (readable by any reader)."""
        return Response(describe_kinds())

    @extend_schema(responses={200: OpenApiTypes.OBJECT, 404: error_response(
        "No such run, or the run stores no snapshot.")}, filters=False)
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def snapshot(self, request: Request, pk: Any = None) -> Response:
        """The live state the run was forked from, whole (``LiveSnapshot.to_dict``:
        ids run-length packed, per-card readings as base64 float32)."""
        run = self.get_object()
        if not run.snapshot:
            return Response({"detail": f"run #{run.pk} was not forked from a live state"},
                            status=status.HTTP_404_NOT_FOUND)
        return Response(run.snapshot)

    @extend_schema(request=None, responses={
        200: ScenarioRunSerializer,
        409: error_response("The run already finished: nothing to cancel.")})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: Any = None) -> Response:
        """Cancel a queued or running run (409 once it has finished)."""
        from twin.scenarios.runner import cancel

        run = self.get_object()
        if not cancel(run.pk):
            run.refresh_from_db()
            return Response({"detail": f"run #{run.pk} already {run.status}; nothing to cancel"},
                            status=status.HTTP_409_CONFLICT)
        run.refresh_from_db()
        return Response(self._body(run))


class ClusterRouteViewSet(ClusterScopedMixin, viewsets.GenericViewSet):
    """``/api/clusters/<id>/route/``: an action on the hardware API's clusters, served
    here because it runs the scenarios' converter and search."""

    queryset = Cluster.objects.all()
    cluster_field = "pk"

    @extend_schema(
        responses=RouteSerializer, filters=False,
        parameters=[
            OpenApiParameter("src", {"type": "string", "minLength": 1}, required=True,
                             description="Card id or serial."),
            OpenApiParameter("dst", {"type": "string", "minLength": 1}, required=True,
                             description="Card id or serial."),
            OpenApiParameter("by", str, enum=["hops", "latency"],
                             description="Fewest hops (default) or lowest latency."),
        ],
    )
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def route(self, request: Request, pk: str | None = None) -> Response:
        """The route between two cards on the simulated topology of this cluster
        (400 per field for a missing, unknown or other-cluster card or a bad ``by``)."""
        params = request.query_params
        try:
            body = cluster_route(self.get_object(), params.get("src"), params.get("dst"),
                                 params.get("by"))
        except ScenarioInputError as exc:
            raise input_error(exc) from exc
        return Response(body)
