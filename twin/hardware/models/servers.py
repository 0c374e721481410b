"""Servers: the unit that sits in a rack and carries cards."""
from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone

from twin.core.bounds import bounded
from twin.core.deletion import GuardedDeletion
from twin.core.models import TimestampedModel
from twin.hardware.constants import (
    DEFAULT_VFS_PER_SERVER,
    MAX_CARDS_PER_SERVER,
    MAX_LINK_GBPS,
    MAX_NICS_PER_SERVER,
    MAX_SERVER_OVERHEAD_W,
    MAX_VFS_PER_SERVER,
)
from twin.hardware.models.racks import BudgetedWrite, Parts, Rack, carried_w

__all__ = ["Server"]


class Server(GuardedDeletion, BudgetedWrite, TimestampedModel):
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
    cards_per_server = models.PositiveSmallIntegerField(
        default=8, validators=bounded(1, MAX_CARDS_PER_SERVER, "cards"))
    overhead_w = models.PositiveIntegerField(
        "Overhead (W)", default=1800, help_text="CPU, memory, NIC and fan draw besides cards.",
        validators=bounded(0, MAX_SERVER_OVERHEAD_W, "W"),
    )
    nic_count = models.PositiveSmallIntegerField(
        "NICs", default=2, validators=bounded(0, MAX_NICS_PER_SERVER, "NICs"))
    nic_gbps = models.PositiveIntegerField("NIC speed (Gb/s)", default=400,
                                           validators=bounded(0, MAX_LINK_GBPS, "Gb/s"))
    vf_limit = models.PositiveSmallIntegerField(
        "Tenant slots (SR-IOV VFs)", default=DEFAULT_VFS_PER_SERVER,
        help_text="Jobs that may share this server at once: each gets one SR-IOV virtual "
                  "function of its NICs (twin.jobs).",
        validators=bounded(1, MAX_VFS_PER_SERVER, "VFs"))

    class Meta:
        ordering = ["rack", "position"]
        constraints = [
            models.UniqueConstraint(fields=["rack", "name"], name="server_unique_name_in_rack"),
            models.CheckConstraint(condition=Q(cards_per_server__gt=0),
                                   name="server_cards_positive"),
            models.CheckConstraint(
                condition=Q(cards_per_server__lte=MAX_CARDS_PER_SERVER)
                & Q(overhead_w__lte=MAX_SERVER_OVERHEAD_W) & Q(nic_count__lte=MAX_NICS_PER_SERVER)
                & Q(nic_gbps__lte=MAX_LINK_GBPS) & Q(vf_limit__gte=1)
                & Q(vf_limit__lte=MAX_VFS_PER_SERVER),
                name="server_figures_bounded",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def deletion_contents(self) -> dict[str, models.QuerySet]:
        from twin.hardware.models import Card, NetworkDevice, links_touching

        cards = Card.objects.filter(server=self)
        devices = NetworkDevice.objects.filter(server=self)
        return {"cards": cards, "network_devices": devices,
                "links": links_touching(cards, devices)}

    def own_draw_w(self) -> int:
        """This server's draw: its overhead + its cards' TDP + its built-in devices."""
        carried = carried_w([self.pk]).get(self.pk, 0) if self.pk else 0
        return int(self.overhead_w or 0) + carried

    def lock_for_budget(self) -> None:
        if self.rack_id:
            racks = Rack.objects.filter(pk=self.rack_id).lock()
            if self.rack_id in racks:
                self.rack = racks[self.rack_id]

    def save(self, *args: Any, **kwargs: Any) -> None:
        adding = self._state.adding
        super().save(*args, **kwargs)
        if not adding:
            # Its built-in devices sit in its rack: a moved server takes them along
            # (their draw was checked against the new rack with the server's own).
            self.devices.exclude(rack_id=self.rack_id).update(rack_id=self.rack_id,
                                                              last_updated=timezone.now())

    def clean(self) -> None:
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
            moved = not self.pk or type(self).objects.filter(pk=self.pk).exclude(
                rack_id=self.rack_id).exists()
            self.check_budget(errors, lambda: self.rack.check_added_draw(
                self.own_draw_w(), excluding=Parts.of(servers=[self.pk]),
                field="rack" if moved else "overhead_w", what="this server",
                allow=self.allow_over_budget,
            ))
        if errors:
            raise ValidationError(errors)
