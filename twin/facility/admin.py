"""Admin of the facility: sites, power and cooling elements, racks' places.

Saves follow the same rules as the API (the models' ``clean()``: chain rules and
the rating rule, refused on the field at fault). The changelists filter with the
API's filtersets.
"""
from __future__ import annotations

from django.contrib import admin

from twin.core.admin.base import TwinModelAdmin
from twin.facility.filtersets import (
    CoolingElementFilterSet,
    PowerElementFilterSet,
    RackFacilityFilterSet,
    SiteFilterSet,
)
from twin.facility.models import CoolingElement, PowerElement, RackFacility, Site

__all__ = ["CoolingElementAdmin", "PowerElementAdmin", "RackFacilityAdmin", "SiteAdmin"]


@admin.register(Site)
class SiteAdmin(TwinModelAdmin):
    filterset_class = SiteFilterSet
    search_fields = SiteFilterSet.search_fields
    list_display = ("name", "cluster", "location", "dry_bulb_c", "wet_bulb_c", "contract_kw")
    raw_id_fields = ("cluster",)


@admin.register(PowerElement)
class PowerElementAdmin(TwinModelAdmin):
    filterset_class = PowerElementFilterSet
    filterset_sidebar = ("kind", "redundancy")
    search_fields = PowerElementFilterSet.search_fields
    list_display = ("key", "kind", "site", "parent", "rating_kw", "units", "redundancy")
    raw_id_fields = ("site", "parent")


@admin.register(CoolingElement)
class CoolingElementAdmin(TwinModelAdmin):
    filterset_class = CoolingElementFilterSet
    filterset_sidebar = ("kind", "redundancy")
    search_fields = CoolingElementFilterSet.search_fields
    list_display = ("key", "kind", "site", "parent", "capacity_kw", "units", "redundancy",
                    "design_flow_kg_s", "approach_c", "pump_kw", "fan_kw")
    raw_id_fields = ("site", "parent")


@admin.register(RackFacility)
class RackFacilityAdmin(TwinModelAdmin):
    filterset_class = RackFacilityFilterSet
    filterset_sidebar = ("rack_class",)
    search_fields = RackFacilityFilterSet.search_fields
    list_display = ("rack", "rack_class", "liquid_fraction", "power_element", "cooling_element",
                    "air_element")
    list_select_related = ("rack", "power_element", "cooling_element", "air_element")
    raw_id_fields = ("rack", "site", "power_element", "cooling_element", "air_element")
