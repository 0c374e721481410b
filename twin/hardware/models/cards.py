"""Accelerator cards: the unit of compute, telemetry and failure."""
from __future__ import annotations

import uuid

from django.core.exceptions import ValidationError
from django.db import models

from twin.core.models import TimestampedModel
from twin.hardware.choices import CardStatusChoices

__all__ = ["Card"]


class Card(TimestampedModel):
    """One accelerator. ``serial`` and ``uuid`` are what telemetry matches on
    (DCGM's ``UUID`` label is ``GPU-<uuid>``)."""

    supernode = models.ForeignKey(
        "hardware.SuperNode", on_delete=models.CASCADE, related_name="cards"
    )
    server = models.ForeignKey("hardware.Server", on_delete=models.CASCADE, related_name="cards")
    accelerator = models.ForeignKey(
        "hardware.AcceleratorType", on_delete=models.PROTECT, related_name="cards"
    )
    index = models.PositiveIntegerField(help_text="Index of the card in its supernode.")
    slot = models.PositiveSmallIntegerField(default=0, help_text="Slot in its server (GPU index).")
    x = models.PositiveSmallIntegerField(null=True, blank=True)
    y = models.PositiveSmallIntegerField(null=True, blank=True)
    z = models.PositiveSmallIntegerField(null=True, blank=True)
    serial = models.CharField(max_length=64, unique=True)
    uuid = models.UUIDField(default=uuid.uuid4, unique=True)
    status = models.CharField(
        max_length=12, choices=CardStatusChoices.choices(), default=CardStatusChoices.OK,
        db_index=True,
    )

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["supernode", "index"], name="card_unique_index"),
            models.UniqueConstraint(fields=["server", "slot"], name="card_unique_slot"),
        ]

    def __str__(self) -> str:
        return self.serial

    def clean(self) -> None:
        from twin.hardware.models.racks import rack_draw_w

        errors: dict[str, str] = {}
        supernode = self.supernode if self.supernode_id else None
        server = self.server if self.server_id else None
        if supernode is not None:
            if self.index is not None and self.index >= supernode.card_count:
                errors["index"] = (
                    f"Supernode {supernode.name} holds {supernode.card_count} cards "
                    f"(indices 0–{supernode.card_count - 1})."
                )
            for axis, size in zip("xyz", supernode.dims, strict=True):
                value = getattr(self, axis)
                if value is not None and value >= size:
                    errors[axis] = f"Coordinate {axis}={value} is outside 0–{size - 1}."
        if server is not None:
            if supernode is not None and server.supernode_id not in (None, supernode.pk):
                errors["server"] = "The server belongs to another supernode."
            if self.slot is not None and self.slot >= server.cards_per_server:
                errors["slot"] = f"Server {server.name} has slots 0–{server.cards_per_server - 1}."
            if self.accelerator_id:
                rack = server.rack
                rest = rack_draw_w(rack.pk, exclude_card=self.pk)
                total = rest + self.accelerator.tdp_w
                # Refuse only what adds draw: a rack already over budget (a corrected
                # TDP, a bulk write) must still let its cards be marked failed.
                if total > rack.power_budget_w and total > rack_draw_w(rack.pk):
                    errors["server"] = (
                        f"Rack {rack.name} would draw {total:,} W, over its "
                        f"{rack.power_budget_w:,} W budget (this card: "
                        f"{self.accelerator.tdp_w} W; headroom: "
                        f"{max(rack.power_budget_w - rest, 0):,} W). Choose a server in a rack "
                        f"with headroom, or raise the rack's budget."
                    )
        if errors:
            raise ValidationError(errors)
