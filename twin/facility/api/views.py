"""REST API views of the facility: one viewset per model, and each site's plant.

Writes, ETags and the deletion rule (409 with what is inside unless
``?cascade=true``) come from ``TwinModelViewSet``; the site lock taken by the
models' ``full_clean()`` (``twin.facility.models.chain.RatedWrite``) holds until
the row is committed.
"""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from twin.core.api.access import ClusterScopedMixin
from twin.core.api.filters import TwinFilterBackend
from twin.core.api.pagination import HistoryPagination, IdCursorPagination
from twin.core.api.viewsets import TwinModelViewSet
from twin.facility.api.serializers import (
    CapEventSerializer,
    CappingPolicySerializer,
    CduRacksSerializer,
    CoolingElementSerializer,
    PlantMinuteSerializer,
    PlantSummarySerializer,
    PowerElementSerializer,
    RackFacilitySerializer,
    RedfishBindingSerializer,
    RedfishSourceSerializer,
    SiteSerializer,
)
from twin.facility.capacity import ChainLoads, site_loads
from twin.facility.choices import CoolingKindChoices, PowerKindChoices
from twin.facility.filtersets import (
    CapEventFilterSet,
    CappingPolicyFilterSet,
    CoolingElementFilterSet,
    PlantMinuteFilterSet,
    PowerElementFilterSet,
    RackFacilityFilterSet,
    RedfishBindingFilterSet,
    RedfishSourceFilterSet,
    SiteFilterSet,
)
from twin.facility.models import (
    CapEvent,
    CappingPolicy,
    CoolingElement,
    PlantMinute,
    PowerElement,
    RackFacility,
    RedfishBinding,
    RedfishSource,
    Site,
)

__all__ = [
    "CapEventViewSet",
    "CappingPolicyViewSet",
    "CoolingElementViewSet",
    "PlantHistoryViewSet",
    "PowerElementViewSet",
    "RackFacilityViewSet",
    "RedfishBindingViewSet",
    "RedfishSourceViewSet",
    "SiteViewSet",
    "cdu_racks",
    "plant_summary",
]


def _elements(chain: ChainLoads) -> list[dict[str, Any]]:
    headroom = chain.headroom_kw()
    return [{"id": int(pk), "key": key, "kind": kind, "usable_kw": round(float(u), 3),
             "load_kw": round(float(load), 3), "input_kw": round(float(i), 3),
             "headroom_kw": round(float(h), 3),
             "utilization": round(float(load / u), 4) if u > 0 else None}
            for pk, key, kind, u, load, i, h in zip(
                chain.ids, chain.keys, chain.kinds, chain.usable_kw, chain.load_kw,
                chain.input_kw, headroom, strict=True)]


def plant_summary(site: Site) -> dict[str, Any]:
    """Every element's load, usable rating and headroom from the racks' nameplate draw."""
    loads = site_loads(site.pk)
    feeds = [i for i, k in enumerate(loads.power.kinds) if k == PowerKindChoices.FEED]
    over = int((loads.power.load_kw > loads.power.usable_kw + 1e-6).sum()
               + (loads.cooling.load_kw > loads.cooling.usable_kw + 1e-6).sum())
    return {"site": site.pk, "it_kw": round(loads.it_kw, 3), "contract_kw": site.contract_kw,
            "feed_kw": round(float(loads.power.input_kw[feeds].sum()), 3),
            "over_capacity": over, "power": _elements(loads.power),
            "cooling": _elements(loads.cooling)}


def cdu_racks(site: Site) -> dict[str, Any]:
    """The site's CDUs (key order) and, per CDU, the racks on its loop (a rack's cooling
    element is the CDU or a technology-cooling loop below it): where the floor draws a
    CDU marker (over its racks) and what the what-if's ``cdu_trip`` names (the key).
    Two queries whatever the size: the site's cooling elements, then the racks'
    (element, rack) pairs; each element's CDU is found by walking up its parents."""
    elements = {pk: (parent, kind, key) for pk, parent, kind, key in
                CoolingElement.objects.filter(site=site)
                .values_list("id", "parent_id", "kind", "key")}

    def cdu_of(pk: int | None) -> int | None:
        seen = 0
        while pk is not None and pk in elements and seen < len(elements):
            if elements[pk][1] == CoolingKindChoices.CDU:
                return pk
            pk, seen = elements[pk][0], seen + 1
        return None

    cdus = sorted((key, pk) for pk, (_, kind, key) in elements.items()
                  if kind == CoolingKindChoices.CDU)
    racks: dict[int, list[int]] = {pk: [] for _, pk in cdus}
    for element, rack in (RackFacility.objects.filter(site=site).order_by("rack_id")
                          .values_list("cooling_element_id", "rack_id")):
        at = cdu_of(element)
        if at is not None:
            racks[at].append(rack)
    return {"site": site.pk, "id": [pk for _, pk in cdus], "key": [k for k, _ in cdus],
            "racks": [racks[pk] for _, pk in cdus]}


class SiteViewSet(TwinModelViewSet):
    """A cluster's site. DELETE of one with a plant needs ``?cascade=true``."""

    queryset = Site.objects.select_related("cluster")
    cluster_field = "cluster"
    serializer_class = SiteSerializer
    filterset_class = SiteFilterSet

    @extend_schema(responses=PlantSummarySerializer, filters=False)
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def plant(self, request: Request, pk: str | None = None) -> Response:
        """Load, usable rating and headroom of every power and cooling element, from the
        racks' nameplate draw (one grouped pass over the parts; no live readings)."""
        return Response(plant_summary(self.get_object()))

    @extend_schema(responses=CduRacksSerializer, filters=False)
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def cdus(self, request: Request, pk: str | None = None) -> Response:
        """Each CDU (id, key) and the racks on its loop (see :func:`cdu_racks`)."""
        return Response(cdu_racks(self.get_object()))


class PowerElementViewSet(TwinModelViewSet):
    queryset = PowerElement.objects.all()
    cluster_field = "site__cluster"
    serializer_class = PowerElementSerializer
    filterset_class = PowerElementFilterSet
    ordering_fields = ["id", "key", "kind", "rating_kw", "units"]


class CoolingElementViewSet(TwinModelViewSet):
    queryset = CoolingElement.objects.all()
    cluster_field = "site__cluster"
    serializer_class = CoolingElementSerializer
    filterset_class = CoolingElementFilterSet
    ordering_fields = ["id", "key", "kind", "capacity_kw", "units"]


class RackFacilityViewSet(TwinModelViewSet):
    """Each rack's place in the plant: its power element, cooling element(s) and class."""

    queryset = RackFacility.objects.select_related("rack")
    cluster_field = "site__cluster"
    serializer_class = RackFacilitySerializer
    filterset_class = RackFacilityFilterSet
    ordering_fields = ["id", "rack", "rack_class"]


class CappingPolicyViewSet(TwinModelViewSet):
    """Live power capping per cluster (``twin.facility.capping_live``): off (the
    default), propose or apply, and how a cut is shared."""

    queryset = CappingPolicy.objects.all()
    cluster_field = "cluster"
    serializer_class = CappingPolicySerializer
    filterset_class = CappingPolicyFilterSet
    ordering_fields = ["id", "cluster", "mode"]


class CapEventViewSet(ClusterScopedMixin, viewsets.ReadOnlyModelViewSet):
    """Live capping's audit trail: a row each time the binding set of limits changes."""

    queryset = CapEvent.objects.all()
    cluster_field = "cluster"
    serializer_class = CapEventSerializer
    filterset_class = CapEventFilterSet
    filter_backends = [TwinFilterBackend]
    pagination_class = IdCursorPagination


class PlantHistoryViewSet(ClusterScopedMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    """The live plant's minute history (``PlantMinute``, one row per cluster and minute,
    oldest first): PUE, IT and facility power, per CDU load and supply temperature, per
    feed headroom, limits binding the caps. ``cluster`` is required; ``since``/``until``
    bound the minutes; pages of up to 1,500 rows (a day of minutes in one request)."""

    queryset = PlantMinute.objects.order_by("minute", "id")
    cluster_field = "cluster"
    serializer_class = PlantMinuteSerializer
    filterset_class = PlantMinuteFilterSet
    filter_backends = [TwinFilterBackend]
    pagination_class = HistoryPagination


class RedfishSourceViewSet(TwinModelViewSet):
    """Redfish services the poller reads facility readings from, per site."""

    queryset = RedfishSource.objects.all()
    cluster_field = "site__cluster"
    serializer_class = RedfishSourceSerializer
    filterset_class = RedfishSourceFilterSet
    ordering_fields = ["id", "name", "site"]


class RedfishBindingViewSet(TwinModelViewSet):
    """Which Redfish resource measures which CDU or power element."""

    queryset = RedfishBinding.objects.all()
    cluster_field = "source__site__cluster"
    serializer_class = RedfishBindingSerializer
    filterset_class = RedfishBindingFilterSet
    ordering_fields = ["id", "source", "uri"]
