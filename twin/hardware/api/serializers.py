"""Serializers of the hardware model.

Every writable serializer derives from ``twin.core.api.serializers.ValidatedModelSerializer``,
which runs the model's ``full_clean()``, so the invariants of the models' ``clean()``
(rack power budget, torus dimensions, link compatibility) answer an API client
exactly as they answer an admin user.

Writes that add draw to racks (cards, servers, devices, a raised TDP) or lower
a budget go through :class:`BudgetedSerializer`: refused with HTTP 409 naming the
racks they would take over budget, unless the body says
``"allow_over_budget": true`` — then saved, and ``racks_over_budget`` in the
response lists those racks. The models lock the racks their check reads
(``twin.hardware.models.racks.BudgetedWrite``), and the views run validation
and save in one ``transaction.atomic()`` block, so two concurrent adds cannot
both squeeze under one budget.
"""
from __future__ import annotations

from typing import Any

from django.db import models
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from twin.core.api.serializers import AllowOverBudgetSerializer, ValidatedModelSerializer
from twin.hardware.choices import CardStatusChoices, DeviceKindChoices
from twin.hardware.constants import CARD_ENDPOINT
from twin.hardware.models import (
    AcceleratorType,
    Card,
    Cluster,
    ClusterBuild,
    Link,
    NetworkDevice,
    Rack,
    Server,
    SuperNode,
)

__all__ = [
    "ENDPOINT_KINDS",
    "AcceleratorTypeSerializer",
    "BudgetedSerializer",
    "BuildRequestSerializer",
    "CardSerializer",
    "ClusterBuildSerializer",
    "ClusterSerializer",
    "ClusterSummarySerializer",
    "LinkSerializer",
    "NetworkDeviceSerializer",
    "OverBudgetSerializer",
    "PresetSerializer",
    "RackSerializer",
    "ServerSerializer",
    "SuperNodeSerializer",
]

# What may sit at a link end: a card or a network device of some kind.
ENDPOINT_KINDS = [CARD_ENDPOINT, *DeviceKindChoices.values()]


class _Overload(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    cluster = serializers.CharField()
    draw_w = serializers.IntegerField(help_text="Its draw after this write (W).")
    budget_w = serializers.IntegerField()


class OverBudgetSerializer(serializers.Serializer):
    count = serializers.IntegerField(help_text="Racks this write took over budget.")
    racks = _Overload(many=True, help_text="The worst few, most watts over first.")


class BudgetedSerializer(AllowOverBudgetSerializer):
    """A write that may add draw to racks: refused over budget unless explicitly allowed."""

    # Readable too (false unless this response is the write that set it), so that a
    # PUT of every writable field as read still works.
    allow_over_budget = serializers.BooleanField(
        required=False, default=False,
        help_text="Not stored: set it on a write to save even if that takes racks over "
                  "their power budget (refused with 409 otherwise); racks_over_budget then "
                  "lists them.",
    )
    racks_over_budget = serializers.SerializerMethodField(
        help_text="The racks this write took over budget because allow_over_budget was set; "
                  "null otherwise.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = super().validate(attrs)
        self._over_budget = self._cleaned_instance.over_budget
        return attrs

    @extend_schema_field(OverBudgetSerializer(allow_null=True))
    def get_racks_over_budget(self, obj: models.Model) -> dict[str, Any] | None:
        over = getattr(self, "_over_budget", None)
        return over.as_dict() if over is not None else None


# --- catalogue, clusters ------------------------------------------------------


class AcceleratorTypeSerializer(BudgetedSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:acceleratortype-detail")

    class Meta:
        model = AcceleratorType
        fields = [
            "id", "url", "display", "slug", "name", "vendor", "fp32_tflops", "tf32_tflops",
            "bf16_tflops", "fp8_tflops", "fp4_tflops", "hbm_gib", "hbm_tbps", "tdp_w", "idle_w",
            "scaleup_links", "scaleup_gbps", "nvlink_domain_cards", "source", "notes", "created",
            "last_updated", "allow_over_budget", "racks_over_budget",
        ]
        # The model's clean() refuses negative optional figures (no constraint says so).
        extra_kwargs = {name: {"min_value": 0.0}
                        for name in ("fp32_tflops", "tf32_tflops", "fp8_tflops", "fp4_tflops")}


class ClusterSerializer(ValidatedModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:cluster-detail")
    summary_url = serializers.HyperlinkedIdentityField(view_name="api:cluster-summary")

    class Meta:
        model = Cluster
        fields = ["id", "url", "display", "name", "description", "preset", "self_healing",
                  "summary_url", "created", "last_updated"]


class SuperNodeSerializer(ValidatedModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:supernode-detail")

    class Meta:
        model = SuperNode
        fields = [
            "id", "url", "display", "cluster", "name", "index", "fabric", "card_count",
            "dim_x", "dim_y", "dim_z", "link_gbps", "link_latency_ns", "switch_latency_ns",
            "in_switch_reduction", "created", "last_updated",
        ]


# --- racks, servers, cards, devices -----------------------------------------


class RackSerializer(BudgetedSerializer):
    """A rack with its draw computed in SQL (``Rack.objects.with_power()``)."""

    url = serializers.HyperlinkedIdentityField(view_name="api:rack-detail")
    power_w = serializers.IntegerField(read_only=True, help_text="Nameplate draw (W).")
    utilization = serializers.FloatField(read_only=True, help_text="Draw / budget.")
    facility_w = serializers.FloatField(read_only=True, help_text="Draw × PUE (W).")
    headroom_w = serializers.IntegerField(read_only=True, help_text="Budget − draw (W).")

    class Meta:
        model = Rack
        fields = [
            "id", "url", "display", "cluster", "supernode", "name", "row", "slot",
            "power_budget_w", "cooling", "pue", "power_w", "utilization", "facility_w",
            "headroom_w", "created", "last_updated", "allow_over_budget", "racks_over_budget",
        ]



class ServerSerializer(BudgetedSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:server-detail")

    class Meta:
        model = Server
        fields = [
            "id", "url", "display", "rack", "supernode", "name", "position", "hostname",
            "cards_per_server", "overhead_w", "nic_count", "nic_gbps", "vf_limit", "memory_gib",
            "nvme_tb", "nvme_read_gb_per_s", "nvme_write_gb_per_s", "created",
            "last_updated", "allow_over_budget", "racks_over_budget",
        ]




class CardSerializer(BudgetedSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:card-detail")
    cluster = serializers.IntegerField(source="supernode.cluster_id", read_only=True)
    rack = serializers.IntegerField(source="server.rack_id", read_only=True)

    class Meta:
        model = Card
        fields = [
            "id", "url", "display", "cluster", "supernode", "server", "rack", "accelerator",
            "index", "slot", "x", "y", "z", "serial", "uuid", "status", "created",
            "last_updated", "allow_over_budget", "racks_over_budget",
        ]




class NetworkDeviceSerializer(BudgetedSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:networkdevice-detail")
    tier = serializers.CharField(read_only=True,
                                 help_text="access / aggregation / core / storage.")

    class Meta:
        model = NetworkDevice
        fields = [
            "id", "url", "display", "cluster", "rack", "server", "kind", "status", "tier", "name",
            "model", "ports", "port_gbps", "latency_ns", "power_w", "capacity_tb",
            "read_gb_per_s", "write_gb_per_s", "created", "last_updated",
            "allow_over_budget", "racks_over_budget",
        ]




class LinkSerializer(ValidatedModelSerializer):
    """A link; ``a_kind``/``b_kind`` say what sits at each end (``card`` or a device kind)."""

    url = serializers.HyperlinkedIdentityField(view_name="api:link-detail")
    a_kind = serializers.SerializerMethodField()
    b_kind = serializers.SerializerMethodField()

    class Meta:
        model = Link
        fields = [
            "id", "url", "display", "cluster", "a_card", "a_device", "a_kind", "b_card",
            "b_device", "b_kind", "kind", "bandwidth_gbps", "latency_ns", "status", "created",
            "last_updated",
        ]

    @extend_schema_field(serializers.ChoiceField(choices=ENDPOINT_KINDS, allow_null=True))
    def get_a_kind(self, obj: Link) -> str | None:
        return obj.end_kind("a")

    @extend_schema_field(serializers.ChoiceField(choices=ENDPOINT_KINDS, allow_null=True))
    def get_b_kind(self, obj: Link) -> str | None:
        return obj.end_kind("b")


# --- builds, presets, summary ------------------------------------------------


class ClusterBuildSerializer(serializers.ModelSerializer):
    """A build request and how far it got (read-only: builds are made by POSTing a request)."""

    url = serializers.HyperlinkedIdentityField(view_name="api:clusterbuild-detail")
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True,
                                              allow_null=True)

    class Meta:
        model = ClusterBuild
        fields = [
            "id", "url", "preset", "name", "params", "status", "progress", "message",
            "result", "error", "cluster", "created_by", "task_id", "worker", "heartbeat",
            "created", "started", "finished",
        ]
        read_only_fields = fields


class BuildRequestSerializer(serializers.Serializer):
    """What ``POST /api/builds/`` accepts; the builder's ``check_build`` validates it."""

    preset = serializers.ChoiceField(choices=(), help_text="A name from /api/presets/.")
    name = serializers.CharField(max_length=100, required=False,
                                 help_text="Cluster name (default: the preset's).")
    # No bounds here: the builder's check says what would fit instead.
    supernodes = serializers.IntegerField(
        required=False, min_value=1, help_text="Default: the preset's.",
        error_messages={"min_value": "Supernodes must be a whole number ≥ 1."})
    rack_budget_w = serializers.IntegerField(
        required=False, min_value=1, help_text="Per-rack budget in W (default 40,000).",
        error_messages={"min_value": "The rack budget must be positive (at least 1 W)."})
    replace = serializers.BooleanField(default=False,
                                       help_text="Replace a cluster of the same name.")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from twin.hardware.presets import PRESETS

        super().__init__(*args, **kwargs)
        self.fields["preset"].choices = list(PRESETS)
        self.fields["preset"].error_messages["invalid_choice"] = (
            f"Unknown preset '{{input}}'; choose one of: {', '.join(sorted(PRESETS))}.")


class _PresetDefaults(serializers.Serializer):
    name = serializers.CharField(help_text="Cluster name.")
    supernodes = serializers.IntegerField(allow_null=True)
    rack_budget_w = serializers.IntegerField(allow_null=True)
    replace = serializers.BooleanField()


class PresetSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    defaults = _PresetDefaults(help_text="Parameters a build uses unless the request sets them.")
    plan = serializers.DictField(
        allow_null=True,
        help_text="Counts of a default build: cards, racks, racks_per_supernode, power…",
    )
    notes = serializers.ListField(child=serializers.CharField())


class _CountByKey(serializers.DictField):
    child = serializers.IntegerField()


class _RacksOverBudget(serializers.Serializer):
    count = serializers.IntegerField()
    names = serializers.ListField(child=serializers.CharField(),
                                  help_text="The first few, worst first.")


class _RacksPerSupernode(serializers.Serializer):
    min = serializers.IntegerField(allow_null=True)
    max = serializers.IntegerField(allow_null=True)
    avg = serializers.FloatField(allow_null=True)
    network_racks = serializers.IntegerField(help_text="Racks not tied to a supernode.")


class _SummaryCounts(serializers.Serializer):
    supernodes = serializers.IntegerField()
    racks = serializers.IntegerField()
    servers = serializers.IntegerField()
    cards = serializers.IntegerField()
    devices = serializers.IntegerField()
    links = serializers.IntegerField()
    cards_by_status = _CountByKey(help_text=f"Keys: {', '.join(CardStatusChoices.values())}.")
    devices_by_kind = _CountByKey()
    links_by_kind = _CountByKey()
    links_by_status = _CountByKey()


class _SummaryPower(serializers.Serializer):
    it_w = serializers.IntegerField(help_text="Σ rack nameplate draw (W).")
    facility_w = serializers.FloatField(help_text="it_w × the plant's PUE, or Σ rack draw × "
                                                  "rack PUE without a plant (W).")
    pue = serializers.FloatField(allow_null=True, help_text="facility_w / it_w.")
    pue_source = serializers.ChoiceField(
        choices=["plant", "nameplate"],
        help_text="plant: computed by the plant model from its components at the "
                  "nameplate draw; nameplate: the racks' stored PUE (no plant built).")
    budget_w = serializers.IntegerField(help_text="Σ rack power budgets (W).")
    utilization = serializers.FloatField(allow_null=True, help_text="it_w / budget_w.")
    racks_over_budget = _RacksOverBudget()


class ClusterSummarySerializer(serializers.Serializer):
    """Shape of ``GET /api/clusters/<id>/summary/`` (for the schema)."""

    cluster = serializers.IntegerField()
    name = serializers.CharField()
    counts = _SummaryCounts()
    power = _SummaryPower()
    racks_per_supernode = _RacksPerSupernode()
