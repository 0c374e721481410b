"""REST API views of the hardware model: one viewset per model, the cluster summary,
its floor and the geometry of a supernode or rack.

The writes, ETags and the deletion rule (409 with what is inside unless
``?cascade=true``) come from ``twin.core.api.viewsets.TwinModelViewSet``; the
rack locks taken by the serializers (see ``twin.hardware.api.serializers``)
hold until the row is committed. Builds and presets live in
``twin.hardware.api.builds``.
"""
from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from twin.core.aggregates import CachedListMixin, cached
from twin.core.api.filters import TwinFilterBackend
from twin.core.api.pagination import IdCursorPagination
from twin.core.api.viewsets import TwinModelViewSet
from twin.hardware.api import geometry as geo
from twin.hardware.api.serializers import (
    AcceleratorTypeSerializer,
    CardSerializer,
    ClusterSerializer,
    ClusterSummarySerializer,
    LinkSerializer,
    NetworkDeviceSerializer,
    RackSerializer,
    ServerSerializer,
    SuperNodeSerializer,
)
from twin.hardware.api.summary import cluster_summary
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

__all__ = [
    "AcceleratorTypeViewSet",
    "CardViewSet",
    "ClusterViewSet",
    "LinkViewSet",
    "NetworkDeviceViewSet",
    "RackViewSet",
    "ServerViewSet",
    "SuperNodeViewSet",
]


class AcceleratorTypeViewSet(TwinModelViewSet):
    """The accelerator catalogue (spec-sheet figures every model reads)."""

    queryset = AcceleratorType.objects.all()
    serializer_class = AcceleratorTypeSerializer
    filterset_class = AcceleratorTypeFilterSet
    ordering_fields = ["id", "name", "vendor", "tdp_w", "bf16_tflops", "hbm_gib"]


class ClusterViewSet(TwinModelViewSet):
    """Clusters. DELETE of one that holds anything needs ``?cascade=true&confirm=<name>``
    (it may be live); the cascade is set-based (``Cluster.delete_with_contents``)."""

    queryset = Cluster.objects.all()
    cluster_field = "pk"
    serializer_class = ClusterSerializer
    filterset_class = ClusterFilterSet

    @extend_schema(responses=ClusterSummarySerializer, filters=False)
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def summary(self, request: Request, pk: str | None = None) -> Response:
        """Counts, IT power, facility power (Σ rack draw × PUE) and racks over budget.

        Cached in Redis until the next committed write to the inventory
        (``twin.core.aggregates``): every dashboard asks for it."""
        cluster = self.get_object()
        return Response(cached(("inventory", "facility"), f"summary:{cluster.pk}",
                               lambda: cluster_summary(cluster)))

    @extend_schema(responses=geo.FloorSerializer, filters=False)
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def floor(self, request: Request, pk: str | None = None) -> Response:
        """Every rack and supernode as parallel arrays, and the network tiers
        (a handful of aggregate queries, whatever the size; see ``twin.hardware.api.geometry``)."""
        return Response(geo.floor(self.get_object()))

    @extend_schema(responses=geo.SwitchesSerializer, filters=False)
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def switches(self, request: Request, pk: str | None = None) -> Response:
        """The fabric switches (leaf, spine, core): id, name, kind, rack; the floor
        draws each as a marker whose right-click asks the what-if engine about its
        failure (one query; see ``twin.hardware.api.geometry.switches``)."""
        return Response(geo.switches(self.get_object()))


class SuperNodeViewSet(TwinModelViewSet):
    queryset = SuperNode.objects.select_related("cluster")
    cluster_field = "cluster"
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
    cluster_field = "cluster"
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
    cluster_field = "rack__cluster"
    serializer_class = ServerSerializer
    filterset_class = ServerFilterSet
    ordering_fields = ["id", "name", "position", "hostname", "rack", "overhead_w"]


class CardViewSet(CachedListMixin, TwinModelViewSet):
    """Cards: cursor-paginated on ``id`` (no COUNT, constant time at any depth).

    Measured on PostgreSQL with 1,048,576 cards: ``?cluster=<id>&limit=100``
    (a join on ``supernode.cluster_id``) plans as a walk of the card primary
    key with a memoized supernode lookup, 0.5 ms of SQL, ~17 ms per request;
    for a small cluster among many the planner starts from the supernode
    index instead. Either way no full scan and no COUNT.

    A page is cached (per user and query) until the next write to the inventory
    (``twin.core.aggregates``): every dashboard reads the same first pages, and
    serialising 100 cards costs far more than the SQL.
    """

    cache_domains = ("inventory",)

    queryset = Card.objects.select_related("supernode", "server")
    cluster_field = "supernode__cluster"
    serializer_class = CardSerializer
    filterset_class = CardFilterSet
    pagination_class = IdCursorPagination
    filter_backends = [TwinFilterBackend]


class NetworkDeviceViewSet(TwinModelViewSet):
    queryset = NetworkDevice.objects.all()
    cluster_field = "cluster"
    serializer_class = NetworkDeviceSerializer
    filterset_class = NetworkDeviceFilterSet
    ordering_fields = ["id", "name", "kind", "power_w", "rack"]


class LinkViewSet(TwinModelViewSet):
    """Links: cursor-paginated on ``id``; ``a_kind``/``b_kind`` name what each end is."""

    queryset = Link.objects.select_related("a_card", "a_device", "b_card", "b_device")
    cluster_field = "cluster"
    serializer_class = LinkSerializer
    filterset_class = LinkFilterSet
    pagination_class = IdCursorPagination
    filter_backends = [TwinFilterBackend]
