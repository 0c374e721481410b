"""One filterset per facility model, used by the REST API and by the admin changelists."""
from __future__ import annotations

import django_filters as df

from twin.core.filtersets import IdFilter, SearchFilterSet, TwinFilterSet, UtcDateTimeFilter
from twin.facility.choices import (
    CoolingKindChoices,
    ElementStatusChoices,
    PowerKindChoices,
    RackClassChoices,
    RedundancyChoices,
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
    "CapEventFilterSet",
    "CappingPolicyFilterSet",
    "CoolingElementFilterSet",
    "PlantMinuteFilterSet",
    "PowerElementFilterSet",
    "RackFacilityFilterSet",
    "RedfishBindingFilterSet",
    "RedfishSourceFilterSet",
    "SiteFilterSet",
]


class SiteFilterSet(SearchFilterSet):
    search_fields = ("name", "location")

    class Meta:
        model = Site
        fields = ["cluster", "name"]


class PowerElementFilterSet(SearchFilterSet):
    search_fields = ("key", "name")
    kind = df.MultipleChoiceFilter(choices=PowerKindChoices.choices())
    redundancy = df.MultipleChoiceFilter(choices=RedundancyChoices.choices())
    status = df.MultipleChoiceFilter(choices=ElementStatusChoices.choices())
    cluster = IdFilter(field_name="site__cluster")

    class Meta:
        model = PowerElement
        fields = ["site", "parent", "key"]


class CoolingElementFilterSet(SearchFilterSet):
    search_fields = ("key", "name")
    kind = df.MultipleChoiceFilter(choices=CoolingKindChoices.choices())
    redundancy = df.MultipleChoiceFilter(choices=RedundancyChoices.choices())
    status = df.MultipleChoiceFilter(choices=ElementStatusChoices.choices())
    cluster = IdFilter(field_name="site__cluster")

    class Meta:
        model = CoolingElement
        fields = ["site", "parent", "key"]


class RackFacilityFilterSet(SearchFilterSet):
    search_fields = ("rack__name",)
    rack_class = df.MultipleChoiceFilter(choices=RackClassChoices.choices())
    cluster = IdFilter(field_name="site__cluster")

    class Meta:
        model = RackFacility
        fields = ["site", "rack", "power_element", "cooling_element", "air_element"]


class CappingPolicyFilterSet(SearchFilterSet):
    search_fields = ("cluster__name",)

    class Meta:
        model = CappingPolicy
        fields = ["cluster", "mode", "policy"]


class CapEventFilterSet(SearchFilterSet):
    search_fields = ("binding",)

    class Meta:
        model = CapEvent
        fields = ["cluster", "mode", "policy"]


class PlantMinuteFilterSet(TwinFilterSet):
    """``?cluster=&since=&until=``: one cluster's plant minutes (``cluster`` required,
    so a page never mixes clusters), ``since`` inclusive, ``until`` exclusive."""

    cluster = IdFilter(field_name="cluster", required=True)
    since = UtcDateTimeFilter(field_name="minute", lookup_expr="gte")
    until = UtcDateTimeFilter(field_name="minute", lookup_expr="lt")

    class Meta:
        model = PlantMinute
        fields = ["cluster"]


class RedfishSourceFilterSet(SearchFilterSet):
    search_fields = ("name", "base_url")

    class Meta:
        model = RedfishSource
        fields = ["site", "enabled"]


class RedfishBindingFilterSet(SearchFilterSet):
    search_fields = ("uri",)

    class Meta:
        model = RedfishBinding
        fields = ["source", "cooling_element", "power_element"]
