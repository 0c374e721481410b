"""Admin of the facility: sites, power and cooling elements, racks' places.

Saves follow the same rules as the API (the models' ``clean()``: chain rules and
the rating rule, refused on the field at fault); an "Allow over budget" checkbox
saves anyway, as for racks, and a warning names the elements now over their rating.
The changelists filter with the API's filtersets.
"""
from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest

from twin.core.admin.base import TwinModelAdmin, TwinModelForm
from twin.core.filtersets import IdFilter
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
    "CapEventAdmin",
    "CappingPolicyAdmin",
    "CoolingElementAdmin",
    "PlantMinuteAdmin",
    "PowerElementAdmin",
    "RackFacilityAdmin",
    "RatedAdmin",
    "RatedForm",
    "RedfishBindingAdmin",
    "RedfishSourceAdmin",
    "SiteAdmin",
]


class RatedForm(TwinModelForm):
    """A change form whose save may be allowed to take elements over their rating."""

    allow_over_budget = forms.BooleanField(
        label="Allow over budget", required=False,
        help_text="Save even if this takes power or cooling elements over their usable "
                  "rating; they are listed after saving.")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        # Read by the model's clean(), which runs after this.
        self.instance.allow_over_budget = bool(cleaned.get("allow_over_budget"))
        return cleaned


class RatedAdmin(TwinModelAdmin):
    form = RatedForm

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if obj.over_capacity:
            named = ", ".join(f"{o['key']} ({o['load_kw']:,.1f} of {o['usable_kw']:,.1f} kW)"
                              for o in obj.over_capacity)
            self.message_user(request, f"Saved over rating: {named}.", messages.WARNING)


@admin.register(Site)
class SiteAdmin(TwinModelAdmin):
    cluster_field = "cluster"
    filterset_class = SiteFilterSet
    search_fields = SiteFilterSet.search_fields
    list_display = ("name", "cluster", "location", "dry_bulb_c", "wet_bulb_c", "contract_kw")
    raw_id_fields = ("cluster",)


@admin.register(PowerElement)
class PowerElementAdmin(RatedAdmin):
    cluster_field = "site__cluster"
    filterset_class = PowerElementFilterSet
    filterset_sidebar = ("kind", "redundancy", "status")
    search_fields = PowerElementFilterSet.search_fields
    list_display = ("key", "kind", "site", "parent", "rating_kw", "units", "redundancy",
                    "status", "units_failed")
    raw_id_fields = ("site", "parent")


@admin.register(CoolingElement)
class CoolingElementAdmin(RatedAdmin):
    cluster_field = "site__cluster"
    filterset_class = CoolingElementFilterSet
    filterset_sidebar = ("kind", "redundancy", "status")
    search_fields = CoolingElementFilterSet.search_fields
    list_display = ("key", "kind", "site", "parent", "capacity_kw", "units", "redundancy",
                    "status", "units_failed", "design_flow_kg_s", "approach_c", "pump_kw",
                    "fan_kw")
    raw_id_fields = ("site", "parent")


@admin.register(RackFacility)
class RackFacilityAdmin(RatedAdmin):
    cluster_field = "site__cluster"
    filterset_class = RackFacilityFilterSet
    filterset_sidebar = ("rack_class",)
    search_fields = RackFacilityFilterSet.search_fields
    list_display = ("rack", "rack_class", "liquid_fraction", "power_element", "cooling_element",
                    "air_element")
    list_select_related = ("rack", "power_element", "cooling_element", "air_element")
    raw_id_fields = ("rack", "site", "power_element", "cooling_element", "air_element")


@admin.register(CappingPolicy)
class CappingPolicyAdmin(TwinModelAdmin):
    """Live power capping per cluster (off, propose, apply)."""

    cluster_field = "cluster"
    filterset_class = CappingPolicyFilterSet
    filterset_sidebar = ("mode", "policy")
    list_display = ("cluster", "mode", "policy", "last_updated")
    raw_id_fields = ("cluster",)


@admin.register(CapEvent)
class CapEventAdmin(TwinModelAdmin):
    """Live capping's audit trail, read-only (the live tick writes it)."""

    cluster_field = "cluster"
    filterset_class = CapEventFilterSet
    filterset_sidebar = ("mode", "policy")
    list_display = ("id", "cluster", "mode", "policy", "binding", "cards_capped",
                    "throughput_lost", "created")
    readonly_fields = ("cluster", "tick_ts", "mode", "policy", "binding", "summary",
                       "cards_capped", "capped_w", "throughput_lost", "created",
                       "last_updated")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False if obj is not None else super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # an audit trail


@admin.register(RedfishSource)
class RedfishSourceAdmin(TwinModelAdmin):
    """Redfish services the poller reads (``twin.facility.redfish``)."""

    cluster_field = "site__cluster"
    filterset_class = RedfishSourceFilterSet
    filterset_sidebar = ("enabled",)
    list_display = ("name", "site", "base_url", "interval_s", "enabled", "last_polled",
                    "values_refused", "last_error")
    readonly_fields = ("last_polled", "last_error", "values_refused")
    raw_id_fields = ("site",)


@admin.register(RedfishBinding)
class RedfishBindingAdmin(TwinModelAdmin):
    """Facility element ↔ Redfish resource."""

    cluster_field = "source__site__cluster"
    filterset_class = RedfishBindingFilterSet
    list_display = ("uri", "source", "cooling_element", "power_element")
    list_select_related = ("source", "cooling_element", "power_element")
    raw_id_fields = ("source", "cooling_element", "power_element")


class PlantMinuteAdminFilterSet(PlantMinuteFilterSet):
    """The API's filterset with ``cluster`` optional: the changelist lists every cluster
    the user may see until one is picked."""

    cluster = IdFilter(field_name="cluster", required=False)

    class Meta(PlantMinuteFilterSet.Meta):
        pass


@admin.register(PlantMinute)
class PlantMinuteAdmin(TwinModelAdmin):
    """The live plant's minute history, read-only (``twin.facility.history`` writes it)."""

    cluster_field = "cluster"
    filterset_class = PlantMinuteAdminFilterSet
    filterset_sidebar = ("cluster",)
    date_hierarchy = "minute"
    list_display = ("minute", "cluster", "samples", "pue", "it_w", "facility_w",
                    "feed_headroom_w", "caps_binding", "cards_capped")
    list_select_related = ("cluster",)
    readonly_fields = ("cluster", "minute", "samples", "pue", "it_w", "facility_w",
                       "feed_headroom_w", "cdus", "feeds", "caps_binding", "cards_capped")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False if obj is not None else super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # history goes with the retention task
