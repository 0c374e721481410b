"""Serializers of the facility.

Writes run the models' ``full_clean()`` (``ValidatedModelSerializer``), so the chain
rules answer 400 on the field at fault, the rating rule 409 (code ``over_budget``: a
conflict with the stored load). A write that would take an element over its usable
rating is refused unless the body says
``"allow_over_budget": true`` (as for a rack's budget) — then saved, and
``over_capacity`` lists the elements it took over.
"""
from __future__ import annotations

from typing import Any

from django.db import models
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from twin.core.api.serializers import AllowOverBudgetSerializer, ValidatedModelSerializer
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
    "CapEventSerializer",
    "CappingPolicySerializer",
    "CoolingElementSerializer",
    "CduRacksSerializer",
    "ElementLoadSerializer",
    "PlantMinuteSerializer",
    "PlantSummarySerializer",
    "PowerElementSerializer",
    "RackFacilitySerializer",
    "RedfishBindingSerializer",
    "RedfishSourceSerializer",
    "SiteSerializer",
]


class _OverCapacity(serializers.Serializer):
    chain = serializers.ChoiceField(choices=["power", "cooling"])
    id = serializers.IntegerField()
    key = serializers.CharField()
    kind = serializers.CharField()
    load_kw = serializers.FloatField(help_text="What it carries after this write (kW).")
    usable_kw = serializers.FloatField()


class RatedSerializer(AllowOverBudgetSerializer):
    """A write that may take elements over their rating: refused unless allowed."""

    allow_over_budget = serializers.BooleanField(
        required=False, default=False,
        help_text="Not stored: set it on a write to save even if that takes elements over "
                  "their usable rating (refused with 409 otherwise); over_capacity then lists "
                  "them.")
    over_capacity = serializers.SerializerMethodField(
        help_text="The elements this write took over their rating because allow_over_budget "
                  "was set; null otherwise.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = super().validate(attrs)
        self._over = self._cleaned_instance.over_capacity
        return attrs

    @extend_schema_field(_OverCapacity(many=True, allow_null=True))
    def get_over_capacity(self, obj: models.Model) -> list[dict[str, Any]] | None:
        return getattr(self, "_over", None)


class SiteSerializer(ValidatedModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:facility-site-detail")
    plant_url = serializers.HyperlinkedIdentityField(view_name="api:facility-site-plant")

    class Meta:
        model = Site
        fields = ["id", "url", "display", "cluster", "name", "location", "dry_bulb_c",
                  "wet_bulb_c", "contract_kw", "weather", "plant_url", "created",
                  "last_updated"]


ELEMENT_FIELDS = ["id", "url", "display", "site", "key", "name", "kind", "parent", "units",
                  "redundancy", "status"]


class PowerElementSerializer(RatedSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:facility-power-detail")

    class Meta:
        model = PowerElement
        fields = [*ELEMENT_FIELDS, "rating_kw", "efficiency", "created", "last_updated",
                  "allow_over_budget", "over_capacity"]


class CoolingElementSerializer(RatedSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:facility-cooling-detail")

    class Meta:
        model = CoolingElement
        fields = [*ELEMENT_FIELDS, "capacity_kw", "design_flow_kg_s", "approach_c",
                  "supply_setpoint_c", "pump_kw", "fan_kw", "volume_l", "created",
                  "last_updated", "allow_over_budget", "over_capacity"]


class RackFacilitySerializer(RatedSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:facility-rack-detail")

    class Meta:
        model = RackFacility
        fields = ["id", "url", "display", "rack", "site", "rack_class", "liquid_fraction",
                  "power_element", "cooling_element", "air_element", "created",
                  "last_updated", "allow_over_budget", "over_capacity"]


class ElementLoadSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    key = serializers.CharField()
    kind = serializers.CharField()
    usable_kw = serializers.FloatField(help_text="Per-unit rating × units its redundancy "
                                                 "lets carry the load.")
    load_kw = serializers.FloatField(help_text="Power delivered / heat taken at nameplate.")
    input_kw = serializers.FloatField(help_text="Power drawn from its parent (losses "
                                                "included) / heat handed to it.")
    headroom_kw = serializers.FloatField()
    utilization = serializers.FloatField(allow_null=True)


class PlantSummarySerializer(serializers.Serializer):
    site = serializers.IntegerField()
    it_kw = serializers.FloatField(help_text="Σ nameplate draw of the site's racks.")
    contract_kw = serializers.FloatField(allow_null=True)
    feed_kw = serializers.FloatField(help_text="Σ drawn by the feeds (IT + conversion "
                                               "losses, at nameplate).")
    over_capacity = serializers.IntegerField(help_text="Elements over their usable rating.")
    power = ElementLoadSerializer(many=True)
    cooling = ElementLoadSerializer(many=True)


class CduRacksSerializer(serializers.Serializer):
    """``GET /api/facility/sites/<id>/cdus/``: each CDU and the racks it cools, columnar."""

    site = serializers.IntegerField()
    id = serializers.ListField(child=serializers.IntegerField())
    key = serializers.ListField(child=serializers.CharField(),
                                help_text="The what-if's cdu_trip target.")
    racks = serializers.ListField(child=serializers.ListField(child=serializers.IntegerField()),
                                  help_text="Per CDU, the ids of the racks on its loop.")


class CappingPolicySerializer(ValidatedModelSerializer):
    """A cluster's live capping policy: ``mode`` off/propose/apply, ``policy``
    uniform/priority/thermal (unknown values: 400 on the field)."""

    class Meta:
        model = CappingPolicy
        fields = ["id", "cluster", "mode", "policy", "created", "last_updated"]
        read_only_fields = ["created", "last_updated"]


class CapEventSerializer(serializers.ModelSerializer):
    """One change of the binding limits (live capping's audit trail)."""

    class Meta:
        model = CapEvent
        fields = ["id", "cluster", "tick_ts", "mode", "policy", "binding", "cards_capped",
                  "capped_w", "throughput_lost", "summary", "created"]
        read_only_fields = fields


class _CduMinute(serializers.Serializer):
    key = serializers.CharField()
    load_fraction = serializers.FloatField(allow_null=True, help_text="Mean heat / planned "
                                           "capacity over the minute.")
    load_fraction_max = serializers.FloatField(allow_null=True)
    supply_c = serializers.FloatField(allow_null=True, help_text="Mean TCS supply (°C).")
    supply_c_max = serializers.FloatField(allow_null=True)


class _FeedMinute(serializers.Serializer):
    key = serializers.CharField()
    headroom_w = serializers.FloatField(allow_null=True, help_text="Least headroom (W).")
    load_fraction_max = serializers.FloatField(allow_null=True)


class PlantMinuteSerializer(serializers.ModelSerializer):
    """One minute of a cluster's live plant (``twin.facility.history``)."""

    cdus = _CduMinute(many=True, read_only=True)
    feeds = _FeedMinute(many=True, read_only=True)

    class Meta:
        model = PlantMinute
        fields = ["id", "cluster", "minute", "samples", "pue", "it_w", "facility_w",
                  "feed_headroom_w", "cdus", "feeds", "caps_binding", "cards_capped"]
        read_only_fields = fields


class RedfishSourceSerializer(ValidatedModelSerializer):
    """A Redfish service the poller reads (``twin.facility.redfish``). The password is
    never sent nor stored: ``password_env`` names the poller's environment variable."""

    class Meta:
        model = RedfishSource
        fields = ["id", "site", "name", "base_url", "username", "password_env", "interval_s",
                  "timeout_s", "enabled", "last_polled", "last_error", "created",
                  "last_updated"]
        read_only_fields = ["last_polled", "last_error", "created", "last_updated"]


class RedfishBindingSerializer(ValidatedModelSerializer):
    """A CDU (``cooling_element``) or a feed, PDU, busway or power shelf
    (``power_element``) ↔ the CoolingUnit or PowerDistribution resource that measures it."""

    class Meta:
        model = RedfishBinding
        fields = ["id", "source", "cooling_element", "power_element", "uri", "created",
                  "last_updated"]
        read_only_fields = ["created", "last_updated"]
