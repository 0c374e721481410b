"""Accelerator cards: the unit of compute, telemetry and failure."""
from __future__ import annotations

import uuid
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models

from twin.core.deletion import GuardedDeletion
from twin.core.models import TimestampedModel
from twin.core.validators import printable
from twin.hardware.choices import CardStatusChoices
from twin.hardware.models.racks import BudgetedWrite, Parts, Rack

__all__ = ["Card"]


class Card(GuardedDeletion, BudgetedWrite, TimestampedModel):
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
    serial = models.CharField(max_length=64, unique=True, validators=[printable])
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

    def deletion_contents(self) -> dict[str, models.QuerySet]:
        from twin.hardware.models import links_touching

        return {"links": links_touching(cards=type(self).objects.filter(pk=self.pk))}

    def lock_for_budget(self) -> None:
        if not self.server_id:
            return
        server = self.server
        racks = Rack.objects.filter(pk=server.rack_id).lock()
        if server.rack_id in racks:
            server.rack = racks[server.rack_id]
        if self.accelerator_id:
            # Read after the rack lock: a TDP raised meanwhile (which locks every rack)
            # is then the one this card is checked with.
            self.accelerator = type(self.accelerator).objects.get(pk=self.accelerator_id)

    def clean(self) -> None:
        errors: dict[str, Any] = {}
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
                self.check_budget(errors, lambda: server.rack.check_added_draw(
                    self.accelerator.tdp_w, excluding=Parts.of(cards=[self.pk]), field="server",
                    what="this card", allow=self.allow_over_budget,
                    advice="Choose a server in a rack with headroom, or raise the rack's budget.",
                ))
        if errors:
            raise ValidationError(errors)
