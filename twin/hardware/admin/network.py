"""Admin of network devices and links (five million links at full scale).

A link's ends are raw-id widgets (cards and devices are too many for a
``<select>``); its list joins the four end tables for the page shown only, and
its change form shows what each end is and which link kinds the compatibility
map (``COMPATIBLE_ENDPOINTS``) allows between them.
"""
from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from twin.core.admin.badges import badge
from twin.core.admin.base import (
    TwinModelAdmin,
    admin_link,
    changelist_link,
    count_subquery,
)
from twin.hardware.admin.actions import status_actions
from twin.hardware.admin.power import BudgetedAdminMixin
from twin.hardware.admin.racks import rack_power_line
from twin.hardware.choices import DeviceKindChoices, LinkKindChoices, LinkStatusChoices
from twin.hardware.constants import CARD_ENDPOINT, allowed_link_kinds
from twin.hardware.filtersets import LinkFilterSet, NetworkDeviceFilterSet
from twin.hardware.models import Link, NetworkDevice

__all__ = ["LinkAdmin", "NetworkDeviceAdmin"]


@admin.register(NetworkDevice)
class NetworkDeviceAdmin(BudgetedAdminMixin, TwinModelAdmin):
    cluster_field = "cluster"
    filterset_class = NetworkDeviceFilterSet
    filterset_sidebar = ("kind", "cluster", "rack", "server")
    search_fields = NetworkDeviceFilterSet.search_fields
    list_display = ("name", "kind_badge", "tier", "cluster_link", "rack_link", "server_link",
                    "model", "ports", "port_gbps", "latency_ns", "power_w", "link_count")
    list_select_related = ("cluster", "rack", "server")
    ordering = ("id",)
    autocomplete_fields = ("cluster", "rack")
    raw_id_fields = ("server",)
    readonly_fields = ("tier", "rack_power", "link_count")
    fieldsets = (
        (None, {"fields": ("cluster", "kind", "name", "model")}),
        ("Place", {"fields": ("rack", "server"),
                   "description": "A device inside a server sits in that server's rack."}),
        ("Ports and power", {"fields": ("ports", "port_gbps", "latency_ns", "power_w")}),
        ("File system (appliances only)", {"fields": ("capacity_tb", ("read_gb_per_s",
                                                                      "write_gb_per_s"))}),
        ("Computed", {"fields": ("tier", "rack_power", "link_count")}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).annotate(
            links_a_n=count_subquery(Link.objects.all(), "a_device"),
            links_b_n=count_subquery(Link.objects.all(), "b_device"),
        )

    @admin.display(description="Kind", ordering="kind")
    def kind_badge(self, obj: NetworkDevice) -> str:
        return badge(DeviceKindChoices, obj.kind)

    @admin.display(description="Cluster", ordering="cluster__name")
    def cluster_link(self, obj: NetworkDevice) -> str:
        return admin_link(obj.cluster)

    @admin.display(description="Rack", ordering="rack__name")
    def rack_link(self, obj: NetworkDevice) -> str:
        return admin_link(obj.rack, obj.rack.name) if obj.rack_id else "—"

    @admin.display(description="Server", ordering="server__name")
    def server_link(self, obj: NetworkDevice) -> str:
        return admin_link(obj.server) if obj.server_id else "—"

    @admin.display(description="Tier")
    def tier(self, obj: NetworkDevice) -> str:
        return obj.tier or "—"

    @admin.display(description="Links")
    def link_count(self, obj: NetworkDevice) -> str:
        if not obj.pk:
            return "—"
        n = getattr(obj, "links_a_n", 0) + getattr(obj, "links_b_n", 0)
        return changelist_link(Link, f"{n:,}", device=obj.pk)

    @admin.display(description="Its rack")
    def rack_power(self, obj: NetworkDevice) -> str:
        return rack_power_line(obj.rack_id) if obj.pk and obj.rack_id else "—"


def _end(link: Link, side: str) -> str:
    card = getattr(link, f"{side}_card") if getattr(link, f"{side}_card_id") else None
    if card is not None:
        return admin_link(card, f"{card} (card)")
    device = getattr(link, f"{side}_device") if getattr(link, f"{side}_device_id") else None
    if device is not None:
        return admin_link(device, f"{device} ({DeviceKindChoices.label(device.kind)})")
    return "—"


def _end_kind(link: Link, side: str) -> str:
    kind = link.end_kind(side)
    if kind is None:
        return "—"
    return "Accelerator card" if kind == CARD_ENDPOINT else DeviceKindChoices.label(kind)


@admin.register(Link)
class LinkAdmin(TwinModelAdmin):
    cluster_field = "cluster"
    filterset_class = LinkFilterSet
    filterset_sidebar = ("kind", "status", "cluster", "card", "device")
    search_fields = ("a_card__serial", "b_card__serial", "a_device__name", "b_device__name")
    search_help_text = "Exact card serial or device name at either end."
    list_display = ("id", "a_end", "b_end", "kind_badge", "bandwidth_gbps", "latency_ns",
                    "status_badge", "cluster_link")
    list_select_related = ("cluster", "a_card", "b_card", "a_device", "b_device")
    sortable_by = ("id", "kind_badge", "status_badge")
    ordering = ("id",)
    raw_id_fields = ("a_card", "a_device", "b_card", "b_device")
    autocomplete_fields = ("cluster",)
    actions = status_actions(LinkStatusChoices)
    readonly_fields = ("a_end_kind", "b_end_kind", "allowed_kinds")
    fieldsets = (
        (None, {"fields": ("cluster", "kind", "status")}),
        ("End A (a card or a device)", {"fields": ("a_card", "a_device", "a_end_kind")}),
        ("End B (a card or a device)", {"fields": ("b_card", "b_device", "b_end_kind")}),
        ("Figures", {"fields": ("bandwidth_gbps", "latency_ns", "allowed_kinds")}),
    )

    @admin.display(description="End A")
    def a_end(self, obj: Link) -> str:
        return _end(obj, "a")

    @admin.display(description="End B")
    def b_end(self, obj: Link) -> str:
        return _end(obj, "b")

    @admin.display(description="Kind", ordering="kind")
    def kind_badge(self, obj: Link) -> str:
        return badge(LinkKindChoices, obj.kind)

    @admin.display(description="Status", ordering="status")
    def status_badge(self, obj: Link) -> str:
        return badge(LinkStatusChoices, obj.status)

    @admin.display(description="Cluster", ordering="cluster__name")
    def cluster_link(self, obj: Link) -> str:
        return admin_link(obj.cluster)

    @admin.display(description="End A is")
    def a_end_kind(self, obj: Link) -> str:
        return _end_kind(obj, "a") if obj.pk else "—"

    @admin.display(description="End B is")
    def b_end_kind(self, obj: Link) -> str:
        return _end_kind(obj, "b") if obj.pk else "—"

    @admin.display(description="Kinds allowed between these ends")
    def allowed_kinds(self, obj: Link) -> str:
        if not obj.pk:
            return "—"
        allowed = allowed_link_kinds(obj.end_kind("a") or "", obj.end_kind("b") or "")
        return ", ".join(LinkKindChoices.label(k) for k in sorted(allowed)) or "none"
