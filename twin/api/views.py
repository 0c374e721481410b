"""REST API views: one viewset per hardware model, the cluster summary, presets and tokens.

Every write runs in one ``transaction.atomic()`` block that spans validation
and save, so the rack locks taken by the serializers (see
``twin.api.serializers``) hold until the row is committed, and a write that
fails half-way leaves nothing behind. Builds live in ``twin.api.builds``.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Model, ProtectedError, RestrictedError
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import status, viewsets
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.filters import OrderingFilter
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request
from rest_framework.response import Response

from twin.api import geometry as geo
from twin.api.filters import TwinFilterBackend
from twin.api.pagination import IdCursorPagination
from twin.api.route import RouteSerializer, cluster_route
from twin.api.serializers import (
    AcceleratorTypeSerializer,
    CardSerializer,
    ClusterSerializer,
    ClusterSummarySerializer,
    LinkSerializer,
    NetworkDeviceSerializer,
    RackSerializer,
    ServerSerializer,
    SuperNodeSerializer,
    TokenSerializer,
)
from twin.api.summary import cluster_summary
from twin.hardware.filtersets import (
    AcceleratorTypeFilterSet,
    CardFilterSet,
    ClusterFilterSet,
    LinkFilterSet,
    NetworkDeviceFilterSet,
    RackFilterSet,
    ServerFilterSet,
    SuperNodeFilterSet,
)
from twin.hardware.models import (
    AcceleratorType,
    Card,
    Cluster,
    Link,
    NetworkDevice,
    Rack,
    Server,
    SuperNode,
)
from twin.scenarios.kinds import ScenarioInputError

__all__ = [
    "AcceleratorTypeViewSet",
    "Conflict",
    "PreconditionFailed",
    "CardViewSet",
    "ClusterViewSet",
    "LinkViewSet",
    "NetworkDeviceViewSet",
    "RackViewSet",
    "ServerViewSet",
    "SuperNodeViewSet",
    "TokenView",
    "TwinModelViewSet",
    "row_etag",
]


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state of the data."
    default_code = "conflict"


class PreconditionFailed(APIException):
    status_code = status.HTTP_412_PRECONDITION_FAILED
    default_detail = "The object changed since you read it."
    default_code = "precondition_failed"


def row_etag(obj: Model) -> str:
    """A strong ETag of the stored row: a hash of its concrete column values.

    Computed fields (a rack's draw) are left out on purpose: a card added to a
    rack must not make an edit of that rack's name fail.
    """
    values = "\x1f".join(str(getattr(obj, f.attname)) for f in obj._meta.concrete_fields)
    return '"' + hashlib.sha256(values.encode()).hexdigest()[:32] + '"'


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__


class TwinModelViewSet(viewsets.ModelViewSet):
    """CRUD with atomic writes, a fresh read-back, 409 for conflicts, and ETags.

    After a create or update the object is read back through ``get_queryset()``
    so the response carries the same computed fields (e.g. a rack's
    ``power_w``) as a GET would. A detail GET carries an ``ETag``; a write that
    sends ``If-Match`` with an older one gets 412 instead of silently
    overwriting someone else's edit (after NetBox's viewsets).
    """

    filter_backends = [TwinFilterBackend, OrderingFilter]
    ordering_fields: list[str] = ["id", "name", "created", "last_updated"]

    def _atomic(self, write: Callable[..., Response], request: Request, *args: Any,
                **kwargs: Any) -> Response:
        try:
            with transaction.atomic():
                return write(request, *args, **kwargs)
        except (ProtectedError, RestrictedError) as exc:  # subclasses of IntegrityError
            blocking = exc.protected_objects if isinstance(exc, ProtectedError) else \
                exc.restricted_objects
            kinds = sorted({str(obj._meta.verbose_name_plural) for obj in blocking})
            raise Conflict(f"Cannot delete: {', '.join(kinds)} still refer to it; "
                           f"delete or move them first.") from exc
        except IntegrityError as exc:
            # Only a race reaches here (validation checks uniqueness first).
            raise Conflict(f"Conflicts with existing data: {_first_line(exc)}") from exc

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self._atomic(super().create, request, *args, **kwargs)

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self._atomic(super().update, request, *args, **kwargs)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self._atomic(super().destroy, request, *args, **kwargs)

    def get_object(self) -> Model:
        obj = super().get_object()
        if_match = self.request.headers.get("If-Match")
        if if_match and self.request.method not in SAFE_METHODS:
            wanted = {tag.strip().removeprefix("W/") for tag in if_match.split(",")}
            if "*" not in wanted and row_etag(obj) not in wanted:
                raise PreconditionFailed(
                    f"{obj._meta.verbose_name.capitalize()} {obj} changed since you read it "
                    f"(ETag {row_etag(obj)}); GET it again and reapply your change."
                )
        return obj

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        obj = self.get_object()
        response = Response(self.get_serializer(obj).data)
        response["ETag"] = row_etag(obj)
        return response

    def finalize_response(self, request: Request, response: Response, *args: Any,
                          **kwargs: Any) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        instance = getattr(self, "_written", None)
        if instance is not None and response.status_code in (200, 201):
            response["ETag"] = row_etag(instance)
        return response

    def _read_back(self, serializer: Any) -> None:
        serializer.instance = self.get_queryset().get(pk=serializer.instance.pk)
        self._written = serializer.instance

    def perform_create(self, serializer: Any) -> None:
        serializer.save()
        self._read_back(serializer)

    def perform_update(self, serializer: Any) -> None:
        serializer.save()
        self._read_back(serializer)


class AcceleratorTypeViewSet(TwinModelViewSet):
    """The accelerator catalogue (spec-sheet figures every model reads)."""

    queryset = AcceleratorType.objects.all()
    serializer_class = AcceleratorTypeSerializer
    filterset_class = AcceleratorTypeFilterSet
    ordering_fields = ["id", "name", "vendor", "tdp_w", "bf16_tflops", "hbm_gib"]

    def perform_destroy(self, instance: AcceleratorType) -> None:
        # Checked first: Django's ProtectedError would load every protecting card.
        cards = Card.objects.filter(accelerator=instance)
        if cards.exists():
            raise Conflict(f"Cannot delete {instance}: cards of this type exist "
                           f"(e.g. {cards.values_list('serial', flat=True).first()}). "
                           f"Delete or re-type them first.")
        super().perform_destroy(instance)


class ClusterViewSet(TwinModelViewSet):
    queryset = Cluster.objects.all()
    serializer_class = ClusterSerializer
    filterset_class = ClusterFilterSet

    def perform_destroy(self, instance: Cluster) -> None:
        """Delete with set-based SQL: ``Model.delete()`` would load every card
        of a million-card cluster into Python to cascade."""
        from twin.hardware.builder import BuildError, delete_cluster

        try:
            delete_cluster(instance.pk)
        except BuildError as exc:
            raise Conflict(exc.message) from exc

    @extend_schema(responses=ClusterSummarySerializer, filters=False)
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def summary(self, request: Request, pk: str | None = None) -> Response:
        """Counts, IT power, facility power (Σ rack draw × PUE) and racks over budget."""
        return Response(cluster_summary(self.get_object()))

    @extend_schema(responses=geo.FloorSerializer, filters=False)
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def floor(self, request: Request, pk: str | None = None) -> Response:
        """Every rack and supernode as parallel arrays, and the network tiers
        (a handful of aggregate queries, whatever the size; see ``twin.api.geometry``)."""
        return Response(geo.floor(self.get_object()))

    @extend_schema(
        responses=RouteSerializer, filters=False,
        parameters=[
            OpenApiParameter("src", str, required=True, description="Card id or serial."),
            OpenApiParameter("dst", str, required=True, description="Card id or serial."),
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
            raise ValidationError(exc.errors) from exc
        return Response(body)


class SuperNodeViewSet(TwinModelViewSet):
    queryset = SuperNode.objects.select_related("cluster")
    serializer_class = SuperNodeSerializer
    filterset_class = SuperNodeFilterSet
    ordering_fields = ["id", "name", "index", "card_count", "cluster"]

    @extend_schema(responses=geo.SupernodeGeometrySerializer, filters=False)
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def geometry(self, request: Request, pk: str | None = None) -> Response:
        """Its cards by index (coordinates, rack, server, status) and the links
        between two of them, ``wrap`` marking torus wrap-around links."""
        return Response(geo.supernode_geometry(self.get_object()))


class RackViewSet(TwinModelViewSet):
    """Racks with ``power_w``, ``utilization``, ``facility_w``, ``headroom_w`` from SQL."""

    queryset = Rack.objects.select_related("cluster").with_power()
    serializer_class = RackSerializer
    filterset_class = RackFilterSet
    ordering_fields = ["id", "name", "row", "slot", "power_budget_w", "power_w",
                       "utilization", "headroom_w", "facility_w"]

    @extend_schema(responses=geo.RackGeometrySerializer, filters=False)
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def geometry(self, request: Request, pk: str | None = None) -> Response:
        """Its servers by position with their cards, its devices and its draw."""
        return Response(geo.rack_geometry(self.get_object()))


class ServerViewSet(TwinModelViewSet):
    queryset = Server.objects.all()
    serializer_class = ServerSerializer
    filterset_class = ServerFilterSet
    ordering_fields = ["id", "name", "position", "hostname", "rack", "overhead_w"]


class CardViewSet(TwinModelViewSet):
    """Cards: cursor-paginated on ``id`` (no COUNT, constant time at any depth).

    Measured on PostgreSQL with 1,048,576 cards: ``?cluster=<id>&limit=100``
    (a join on ``supernode.cluster_id``) plans as a walk of the card primary
    key with a memoized supernode lookup, 0.5 ms of SQL, ~17 ms per request;
    for a small cluster among many the planner starts from the supernode
    index instead. Either way no full scan and no COUNT.
    """

    queryset = Card.objects.select_related("supernode", "server")
    serializer_class = CardSerializer
    filterset_class = CardFilterSet
    pagination_class = IdCursorPagination
    filter_backends = [TwinFilterBackend]


class NetworkDeviceViewSet(TwinModelViewSet):
    queryset = NetworkDevice.objects.all()
    serializer_class = NetworkDeviceSerializer
    filterset_class = NetworkDeviceFilterSet
    ordering_fields = ["id", "name", "kind", "power_w", "rack"]


class LinkViewSet(TwinModelViewSet):
    """Links: cursor-paginated on ``id``; ``a_kind``/``b_kind`` name what each end is."""

    queryset = Link.objects.select_related("a_card", "a_device", "b_card", "b_device")
    serializer_class = LinkSerializer
    filterset_class = LinkFilterSet
    pagination_class = IdCursorPagination
    filter_backends = [TwinFilterBackend]


@extend_schema_view(
    post=extend_schema(request=AuthTokenSerializer, responses=TokenSerializer,
                       summary="Exchange a username and password for an API token"),
)
class TokenView(ObtainAuthToken):
    """``POST {username, password}`` → ``{token}`` for scripts (``Authorization: Token …``)."""
