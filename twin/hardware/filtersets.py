"""One filterset per model, used by the REST API and by the admin changelists."""
from __future__ import annotations

import django_filters as df
from django.db.models import Q, QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field

from twin.core.choices import JobStatusChoices
from twin.core.filtersets import IdFilter, RelatedKeyFilter, SearchFilterSet, TwinFilterSet
from twin.hardware.choices import (
    CardStatusChoices,
    CoolingChoices,
    DeviceKindChoices,
    DeviceStatusChoices,
    FabricChoices,
    LinkKindChoices,
    LinkStatusChoices,
)
from twin.hardware.models import (
    AcceleratorType,
    ApiToken,
    Card,
    Cluster,
    ClusterBuild,
    ClusterGrant,
    Link,
    NetworkDevice,
    Rack,
    Server,
    SuperNode,
)

__all__ = [
    "AcceleratorTypeFilterSet",
    "ApiTokenFilterSet",
    "CardFilterSet",
    "ClusterBuildFilterSet",
    "ClusterFilterSet",
    "ClusterGrantFilterSet",
    "LinkFilterSet",
    "NetworkDeviceFilterSet",
    "RackFilterSet",
    "ServerFilterSet",
    "SuperNodeFilterSet",
]


class AcceleratorTypeFilterSet(SearchFilterSet):
    search_fields = ("name", "vendor", "slug")

    class Meta:
        model = AcceleratorType
        fields = ["vendor", "slug"]


class ClusterFilterSet(SearchFilterSet):
    search_fields = ("name", "description", "preset")

    class Meta:
        model = Cluster
        fields = ["name", "preset"]


class SuperNodeFilterSet(SearchFilterSet):
    fabric = df.MultipleChoiceFilter(choices=FabricChoices.choices())

    class Meta:
        model = SuperNode
        fields = ["cluster", "fabric", "index"]


class RackFilterSet(SearchFilterSet):
    cooling = df.ChoiceFilter(choices=CoolingChoices.choices())
    over_budget = df.BooleanFilter(method="filter_over_budget", label="Over budget")

    class Meta:
        model = Rack
        fields = ["cluster", "supernode", "row", "cooling"]

    @extend_schema_field(OpenApiTypes.BOOL)
    def filter_over_budget(self, queryset: QuerySet, name: str, value: bool | None) -> QuerySet:
        if value is None:
            return queryset
        cluster = self.form.cleaned_data.get("cluster")
        racks = Rack.objects.filter(cluster=cluster) if cluster is not None else Rack.objects.all()
        over = racks.draw_by_rack().over_budget_ids()
        return queryset.filter(pk__in=over) if value else queryset.exclude(pk__in=over)


class ServerFilterSet(SearchFilterSet):
    search_fields = ("name", "hostname")
    cluster = IdFilter(field_name="rack__cluster")

    class Meta:
        model = Server
        fields = ["rack", "supernode", "hostname"]


class CardFilterSet(SearchFilterSet):
    search_fields = ("serial",)
    cluster = IdFilter(field_name="supernode__cluster")
    rack = IdFilter(field_name="server__rack")
    status = df.MultipleChoiceFilter(choices=CardStatusChoices.choices())
    accelerator = RelatedKeyFilter(field_name="accelerator__slug", label="Accelerator (slug)")

    class Meta:
        model = Card
        fields = ["supernode", "server", "serial", "uuid", "index", "x", "y", "z"]


class NetworkDeviceFilterSet(SearchFilterSet):
    search_fields = ("name", "model")
    kind = df.MultipleChoiceFilter(choices=DeviceKindChoices.choices())
    status = df.MultipleChoiceFilter(choices=DeviceStatusChoices.choices())

    class Meta:
        model = NetworkDevice
        fields = ["cluster", "rack", "server"]


class LinkFilterSet(TwinFilterSet):
    kind = df.MultipleChoiceFilter(choices=LinkKindChoices.choices())
    status = df.MultipleChoiceFilter(choices=LinkStatusChoices.choices())
    card = IdFilter(method="filter_card", label="Card at either end")
    device = IdFilter(method="filter_device", label="Device at either end")
    q = df.CharFilter(method="search", label="Card serial or device name at either end")

    class Meta:
        model = Link
        fields = ["cluster", "kind", "status"]

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        """Exact serial or device name: the ends are resolved first (two indexed
        look-ups), so five million links are searched through their end indexes
        instead of a join on every row."""
        value = value.strip()
        if not value:
            return queryset
        cards = list(Card.objects.filter(serial=value).values_list("pk", flat=True)[:1000])
        devices = list(
            NetworkDevice.objects.filter(name=value).values_list("pk", flat=True)[:1000]
        )
        return queryset.filter(
            Q(a_card__in=cards) | Q(b_card__in=cards)
            | Q(a_device__in=devices) | Q(b_device__in=devices)
        )

    def filter_card(self, queryset: QuerySet, name: str, value: int) -> QuerySet:
        return queryset.filter(Q(a_card=value) | Q(b_card=value))

    def filter_device(self, queryset: QuerySet, name: str, value: int) -> QuerySet:
        return queryset.filter(Q(a_device=value) | Q(b_device=value))


class ClusterBuildFilterSet(TwinFilterSet):
    status = df.MultipleChoiceFilter(choices=JobStatusChoices.choices())

    class Meta:
        model = ClusterBuild
        fields = ["preset", "status", "cluster"]


class ClusterGrantFilterSet(SearchFilterSet):
    """Grants (admin only: there is no grant API)."""

    search_fields = ("user__username", "cluster__name")

    class Meta:
        model = ClusterGrant
        fields = ["user", "cluster", "level"]


class ApiTokenFilterSet(SearchFilterSet):
    """Named API tokens (admin only: ``/api/tokens/`` lists the caller's own)."""

    search_fields = ("name", "prefix", "user__username")

    class Meta:
        model = ApiToken
        fields = ["user", "revoked", "see_only"]
