"""Admin of accelerator cards: up to a million rows, so every choice here is bounded.

Foreign keys are raw-id or autocomplete widgets (a ``<select>`` of 131,072
servers would not render), sorting is limited to indexed columns, and the
list's count is estimated past ten thousand rows (``LargeTablePaginator``).
"""
from __future__ import annotations

from django.contrib import admin
from django.db.models import Q

from twin.core.admin.badges import badge
from twin.core.admin.base import (
    TwinModelAdmin,
    admin_link,
    changelist_link,
    watts,
)
from twin.hardware.admin.actions import status_actions
from twin.hardware.admin.power import BudgetedAdminMixin
from twin.hardware.admin.racks import rack_power_line
from twin.hardware.choices import CardStatusChoices
from twin.hardware.filtersets import CardFilterSet
from twin.hardware.models import Card, Link

__all__ = ["CardAdmin"]


@admin.register(Card)
class CardAdmin(BudgetedAdminMixin, TwinModelAdmin):
    cluster_field = "supernode__cluster"
    filterset_class = CardFilterSet
    filterset_sidebar = ("status", "accelerator", "cluster", "supernode", "rack", "server")
    search_fields = CardFilterSet.search_fields
    search_help_text = "Part of a serial number."
    list_display = ("serial", "supernode_link", "server_link", "accelerator", "index",
                    "coordinates", "slot", "status_badge")
    list_select_related = ("supernode__cluster", "server", "accelerator")
    sortable_by = ("serial", "index", "slot", "status_badge")
    ordering = ("id",)
    raw_id_fields = ("server",)
    autocomplete_fields = ("supernode",)
    actions = status_actions(CardStatusChoices)
    readonly_fields = ("rack", "tdp", "rack_power", "links")
    fieldsets = (
        (None, {"fields": ("serial", "uuid", "status", "accelerator")}),
        ("Place", {"fields": ("supernode", "index", ("x", "y", "z"), "server", "slot")}),
        ("Power and wiring (computed)", {"fields": ("tdp", "rack", "rack_power", "links")}),
    )

    @admin.display(description="Supernode", ordering="supernode__index")
    def supernode_link(self, obj: Card) -> str:
        return admin_link(obj.supernode)

    @admin.display(description="Server", ordering="server__name")
    def server_link(self, obj: Card) -> str:
        return admin_link(obj.server)

    @admin.display(description="x, y, z")
    def coordinates(self, obj: Card) -> str:
        if obj.x is None and obj.y is None and obj.z is None:
            return "—"
        return ", ".join("·" if v is None else str(v) for v in (obj.x, obj.y, obj.z))

    @admin.display(description="Status", ordering="status")
    def status_badge(self, obj: Card) -> str:
        return badge(CardStatusChoices, obj.status)

    # --- change form ----------------------------------------------------------
    @admin.display(description="Rack")
    def rack(self, obj: Card) -> str:
        return admin_link(obj.server.rack) if obj.pk else "—"

    @admin.display(description="TDP")
    def tdp(self, obj: Card) -> str:
        return watts(obj.accelerator.tdp_w) if obj.pk else "—"

    @admin.display(description="Rack draw")
    def rack_power(self, obj: Card) -> str:
        return rack_power_line(obj.server.rack_id) if obj.pk else "—"

    @admin.display(description="Links")
    def links(self, obj: Card) -> str:
        if not obj.pk:
            return "—"
        n = Link.objects.filter(Q(a_card=obj) | Q(b_card=obj)).count()
        return changelist_link(Link, f"{n:,}", card=obj.pk)
