"""Servers: the unit that sits in a rack and carries cards."""
from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q, Sum

from twin.core.models import TimestampedModel

__all__ = ["Server"]


class Server(TimestampedModel):
    """A host in a rack. ``overhead_w`` is everything but the cards: CPUs, memory,
    fans, drives and on-board NICs. NICs and PCIe switches modelled as network
    devices add their own ``power_w``."""

    rack = models.ForeignKey("hardware.Rack", on_delete=models.PROTECT, related_name="servers")
    supernode = models.ForeignKey(
        "hardware.SuperNode",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="servers",
    )
    name = models.CharField(max_length=100)
    position = models.PositiveSmallIntegerField(default=0, help_text="Slot within the rack.")
    hostname = models.CharField(max_length=100, blank=True, db_index=True,
                                help_text="Host name telemetry agents report.")
    cards_per_server = models.PositiveSmallIntegerField(default=8)
    overhead_w = models.PositiveIntegerField(
        "Overhead (W)", default=1800, help_text="CPU, memory, NIC and fan draw besides cards."
    )
    nic_count = models.PositiveSmallIntegerField("NICs", default=2)
    nic_gbps = models.PositiveIntegerField("NIC speed (Gb/s)", default=400)

    class Meta:
        ordering = ["rack", "position"]
        constraints = [
            models.UniqueConstraint(fields=["rack", "name"], name="server_unique_name_in_rack"),
            models.CheckConstraint(condition=Q(cards_per_server__gt=0),
                                   name="server_cards_positive"),
        ]

    def __str__(self) -> str:
        return self.name

    def own_draw_w(self) -> int:
        """This server's draw: overhead + its cards' TDP + its built-in devices."""
        from twin.hardware.models.cards import Card
        from twin.hardware.models.network import NetworkDevice

        if not self.pk:
            return int(self.overhead_w or 0)
        cards = Card.objects.filter(server_id=self.pk).aggregate(w=Sum("accelerator__tdp_w"))["w"]
        devices = NetworkDevice.objects.filter(server_id=self.pk).aggregate(w=Sum("power_w"))["w"]
        return int(self.overhead_w or 0) + int(cards or 0) + int(devices or 0)

    def clean(self) -> None:
        from twin.hardware.models.racks import rack_draw_w

        errors: dict[str, str] = {}
        if self.rack_id and self.supernode_id:
            if self.supernode.cluster_id != self.rack.cluster_id:
                errors["supernode"] = "The supernode and the rack belong to different clusters."
        if self.pk and self.cards_per_server is not None:
            installed = self.cards.count()
            if installed > self.cards_per_server:
                errors["cards_per_server"] = (
                    f"{installed} cards are installed; remove cards before lowering this."
                )
        if self.rack_id and self.overhead_w is not None:
            rest = rack_draw_w(self.rack_id, exclude_server=self.pk)
            mine = self.own_draw_w()
            budget = self.rack.power_budget_w
            # Refuse only what adds draw (see Card.clean).
            if rest + mine > budget and rest + mine > rack_draw_w(self.rack_id):
                moved = not self.pk or type(self).objects.filter(pk=self.pk).exclude(
                    rack_id=self.rack_id).exists()
                field = "rack" if moved else "overhead_w"
                errors[field] = (
                    f"Rack {self.rack.name} would draw {rest + mine:,} W, over its "
                    f"{budget:,} W budget (this server: {mine:,} W; headroom: "
                    f"{max(budget - rest, 0):,} W). Choose a rack with more headroom "
                    f"or raise its budget."
                )
        if errors:
            raise ValidationError(errors)
