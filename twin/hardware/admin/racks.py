"""Admin of racks and servers: where the 40 kW power budget is seen and kept.

Rack draw, utilisation, headroom and facility power come from
``Rack.objects.with_power()`` — SQL annotations, sortable like columns — and
server draw from correlated sums of the same terms (``server_draw_expression``);
nothing loops over cards in Python. Saves that add draw follow the budget rule
of ``twin.hardware.models.racks``, with an "Allow over budget" checkbox
(``power.BudgetedAdminMixin``).
"""
from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from twin.core.admin.badges import COLOUR_HEX, badge
from twin.core.admin.base import (
    TwinInlineMixin,
    TwinModelAdmin,
    admin_link,
    changelist_link,
    count_subquery,
    watts,
)
from twin.hardware.admin.actions import set_rack_budget
from twin.hardware.admin.power import (
    BudgetedAdminMixin,
    CardsInServerFormSet,
    DevicesInRackFormSet,
    DevicesInServerFormSet,
    ServersInRackFormSet,
)
from twin.hardware.choices import CoolingChoices
from twin.hardware.filtersets import RackFilterSet, ServerFilterSet
from twin.hardware.models import Card, NetworkDevice, Rack, Server
from twin.hardware.models.racks import server_draw_expression

__all__ = ["RackAdmin", "ServerAdmin", "rack_power_line", "utilisation_badge"]


def utilisation_badge(utilization: float | None) -> str:
    """Draw / budget as a percentage, red over 100 %, orange over 90 %."""
    if utilization is None:
        return "—"
    colour = "red" if utilization > 1 else "orange" if utilization > 0.9 else "green"
    return format_html(
        '<span class="twin-badge" style="background:{};color:#fff;padding:1px 7px;'
        'border-radius:8px">{} %</span>', COLOUR_HEX[colour], f"{utilization * 100:.1f}",
    )


def rack_power_line(rack_id: int) -> str:
    """"r0: 7,485 W of 40,000 W (18.7 %); headroom 32,515 W" — one annotated query."""
    rack = Rack.objects.with_power().get(pk=rack_id)
    return format_html(
        "{}: {} of {} ({}); headroom {}", admin_link(rack, rack.name), watts(rack.power_w),
        watts(rack.power_budget_w), utilisation_badge(rack.utilization), watts(rack.headroom_w),
    )


# --- inlines ---------------------------------------------------------------
class ServerInline(TwinInlineMixin, admin.TabularInline):
    model = Server
    formset = ServersInRackFormSet
    fields = ("name", "position", "hostname", "supernode", "cards_per_server", "overhead_w",
              "nic_count", "nic_gbps", "draw")
    readonly_fields = ("draw",)
    autocomplete_fields = ("supernode",)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).annotate(draw_w=server_draw_expression())

    @admin.display(description="Draw")
    def draw(self, obj: Server) -> str:
        value = getattr(obj, "draw_w", None)
        return watts(value) if obj.pk else "—"


class RackDeviceInline(TwinInlineMixin, admin.TabularInline):
    """Rack-mounted switches; NICs and PCIe switches show under their server."""

    model = NetworkDevice
    fk_name = "rack"
    formset = DevicesInRackFormSet
    verbose_name = "rack-mounted network device"
    verbose_name_plural = "rack-mounted network devices"
    fields = ("kind", "name", "model", "ports", "port_gbps", "latency_ns", "power_w",
              "capacity_tb", "read_gb_per_s", "write_gb_per_s")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).filter(server__isnull=True)


class CardInline(TwinInlineMixin, admin.TabularInline):
    model = Card
    formset = CardsInServerFormSet
    fields = ("slot", "index", "x", "y", "z", "serial", "accelerator", "status", "supernode")
    raw_id_fields = ("supernode",)
    ordering = ("slot",)

    def get_formset(self, request: HttpRequest, obj: Server | None = None, **kwargs: Any) -> Any:
        formset = super().get_formset(request, obj, **kwargs)
        # New cards default to the server's supernode and to its cards' accelerator.
        if obj is not None and obj.supernode_id:
            formset.form.base_fields["supernode"].initial = obj.supernode_id
        if obj is not None and obj.pk:
            accelerator = obj.cards.values_list("accelerator", flat=True).first()
            if accelerator:
                formset.form.base_fields["accelerator"].initial = accelerator
        return formset


class ServerDeviceInline(TwinInlineMixin, admin.TabularInline):
    model = NetworkDevice
    fk_name = "server"
    formset = DevicesInServerFormSet
    verbose_name = "built-in network device"
    verbose_name_plural = "built-in network devices (PCIe switches, smart NICs)"
    fields = ("kind", "name", "model", "ports", "port_gbps", "latency_ns", "power_w")


# --- racks -------------------------------------------------------------------
@admin.register(Rack)
class RackAdmin(BudgetedAdminMixin, TwinModelAdmin):
    cluster_field = "cluster"
    filterset_class = RackFilterSet
    filterset_sidebar = ("over_budget", "cooling", "cluster", "supernode")
    search_fields = RackFilterSet.search_fields
    list_display = ("name", "cluster_link", "supernode_link", "row", "slot", "cooling_badge",
                    "draw", "budget", "utilisation", "headroom", "facility", "server_count")
    list_select_related = ("cluster", "supernode")
    autocomplete_fields = ("cluster", "supernode")
    actions = (set_rack_budget,)
    inlines = (ServerInline, RackDeviceInline)
    readonly_fields = ("draw", "utilisation", "headroom", "facility", "server_count")
    fieldsets = (
        (None, {"fields": ("cluster", "supernode", "name", ("row", "slot"))}),
        ("Power and cooling", {"fields": ("power_budget_w", "cooling", "pue")}),
        ("Current draw (nameplate, computed in SQL)", {
            "fields": ("draw", "utilisation", "headroom", "facility", "server_count"),
        }),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # select_related here (not only list_select_related, which Django then skips):
        # autocomplete shows "cluster / name" for 20 rows at a time too.
        return super().get_queryset(request).select_related(
            "cluster", "supernode").with_power().annotate(
            servers_n=count_subquery(Server.objects.all(), "rack")
        )

    @admin.display(description="Cluster", ordering="cluster__name")
    def cluster_link(self, obj: Rack) -> str:
        return admin_link(obj.cluster)

    @admin.display(description="Supernode", ordering="supernode__index")
    def supernode_link(self, obj: Rack) -> str:
        return admin_link(obj.supernode, obj.supernode.name) if obj.supernode_id else "—"

    @admin.display(description="Cooling", ordering="cooling")
    def cooling_badge(self, obj: Rack) -> str:
        return badge(CoolingChoices, obj.cooling)

    @admin.display(description="Draw", ordering="power_w")
    def draw(self, obj: Rack) -> str:
        return watts(getattr(obj, "power_w", None)) if obj.pk else "—"

    @admin.display(description="Budget", ordering="power_budget_w")
    def budget(self, obj: Rack) -> str:
        return watts(obj.power_budget_w)

    @admin.display(description="Utilisation", ordering="utilization")
    def utilisation(self, obj: Rack) -> str:
        return utilisation_badge(getattr(obj, "utilization", None)) if obj.pk else "—"

    @admin.display(description="Headroom", ordering="headroom_w")
    def headroom(self, obj: Rack) -> str:
        return watts(getattr(obj, "headroom_w", None)) if obj.pk else "—"

    @admin.display(description="Facility (× PUE)", ordering="facility_w")
    def facility(self, obj: Rack) -> str:
        return watts(getattr(obj, "facility_w", None)) if obj.pk else "—"

    @admin.display(description="Servers", ordering="servers_n")
    def server_count(self, obj: Rack) -> str:
        if not obj.pk:
            return "—"
        return changelist_link(Server, f"{getattr(obj, 'servers_n', 0):,}", rack=obj.pk)


# --- servers -----------------------------------------------------------------
@admin.register(Server)
class ServerAdmin(BudgetedAdminMixin, TwinModelAdmin):
    cluster_field = "rack__cluster"
    filterset_class = ServerFilterSet
    filterset_sidebar = ("cluster", "rack", "supernode")
    search_fields = ServerFilterSet.search_fields
    list_display = ("name", "rack_link", "supernode_link", "hostname", "position",
                    "card_count", "cards_per_server", "overhead_w", "draw")
    list_select_related = ("rack", "supernode")
    autocomplete_fields = ("rack", "supernode")
    ordering = ("id",)
    inlines = (CardInline, ServerDeviceInline)
    readonly_fields = ("draw", "card_count", "rack_power")
    fieldsets = (
        (None, {"fields": ("rack", "supernode", "name", "position", "hostname")}),
        ("Hardware", {"fields": ("cards_per_server", "overhead_w", ("nic_count", "nic_gbps"),
                                  "vf_limit")}),
        ("Storage", {"fields": ("memory_gib", "nvme_tb",
                                ("nvme_read_gb_per_s", "nvme_write_gb_per_s"))}),
        ("Power (computed in SQL)", {"fields": ("draw", "card_count", "rack_power")}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).annotate(
            cards_n=count_subquery(Card.objects.all(), "server"),
            draw_w=server_draw_expression(),
        )

    @admin.display(description="Rack", ordering="rack__name")
    def rack_link(self, obj: Server) -> str:
        return admin_link(obj.rack, obj.rack.name)

    @admin.display(description="Supernode", ordering="supernode__index")
    def supernode_link(self, obj: Server) -> str:
        return admin_link(obj.supernode, obj.supernode.name) if obj.supernode_id else "—"

    @admin.display(description="Cards", ordering="cards_n")
    def card_count(self, obj: Server) -> str:
        if not obj.pk:
            return "—"
        return changelist_link(Card, f"{getattr(obj, 'cards_n', 0):,}", server=obj.pk)

    @admin.display(description="Draw", ordering="draw_w")
    def draw(self, obj: Server) -> str:
        return watts(getattr(obj, "draw_w", None)) if obj.pk else "—"

    @admin.display(description="Its rack")
    def rack_power(self, obj: Server) -> str:
        if not obj.pk:
            return "—"
        return rack_power_line(obj.rack_id)
