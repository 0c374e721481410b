"""Cluster and supernode: the top two levels of chip → supernode → cluster."""
from __future__ import annotations

import math

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from twin.core.bounds import AtMost, bounded
from twin.core.deletion import DeletionBlocked, GuardedDeletion
from twin.core.models import TimestampedModel
from twin.core.validators import printable, printable_constraint
from twin.hardware.choices import FabricChoices, SelfHealingChoices
from twin.hardware.constants import (
    MAX_DEVICE_LATENCY_NS,
    MAX_LINK_GBPS,
    MAX_LINK_LATENCY_NS,
    MAX_SUPERNODE_CARDS,
)

__all__ = ["Cluster", "SuperNode"]

# Fabrics whose dimensions *are* the wiring: their product must equal the card count.
DIMENSIONED_FABRICS = {FabricChoices.TORUS_3D, FabricChoices.TORUS_2D, FabricChoices.RING}
SWITCHED_FABRICS = {FabricChoices.FAT_TREE, FabricChoices.PCIE_STAR, FabricChoices.FULL_MESH}


class Cluster(GuardedDeletion, TimestampedModel):
    name = models.CharField(max_length=100, unique=True, validators=[printable])
    description = models.TextField(blank=True)
    preset = models.CharField(max_length=50, blank=True, help_text="Preset it was built from.")
    self_healing = models.CharField(
        max_length=10, choices=SelfHealingChoices.choices(), default=SelfHealingChoices.PROPOSE,
        help_text="When live telemetry shows a card failed: propose a remediation for an "
                  "operator to apply, or apply it at once (twin.jobs.healing).")

    #: A cluster is deleted with its contents only on confirmation of its name: it may be
    #: live (telemetry agents posting to it), and a million cards go with it.
    deletion_confirm_field = "name"

    class Meta:
        ordering = ["name"]
        constraints = [printable_constraint("name", "cluster_name_printable")]

    def __str__(self) -> str:
        return self.name

    def deletion_contents(self) -> dict[str, models.QuerySet]:
        from twin.hardware.models import Card, Link, NetworkDevice, Rack, Server

        return {
            "supernodes": SuperNode.objects.filter(cluster=self),
            "racks": Rack.objects.filter(cluster=self),
            "servers": Server.objects.filter(rack__cluster=self),
            "cards": Card.objects.filter(supernode__cluster=self),
            "network_devices": NetworkDevice.objects.filter(cluster=self),
            "links": Link.objects.filter(cluster=self),
        }

    def delete_with_contents(self) -> None:
        """Set-based (``twin.hardware.builder.delete``): ``Model.delete()`` would load
        every card of a million-card cluster into Python to cascade."""
        from twin.hardware.builder import BuildError, delete_cluster

        try:
            delete_cluster(self.pk)
        except BuildError as exc:
            raise DeletionBlocked(exc.message) from exc


class SuperNode(GuardedDeletion, TimestampedModel):
    """A scale-up domain: cards wired by one fabric (the seeds' 512-card 3D torus).

    Deleting it deletes its servers (and their cards, devices and links); its racks
    stay, without a supernode."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="supernodes")
    name = models.CharField(max_length=100, validators=[printable])
    index = models.PositiveIntegerField(help_text="Position of the supernode in its cluster.")
    fabric = models.CharField(max_length=20, choices=FabricChoices.choices())
    card_count = models.PositiveIntegerField(help_text="Cards the fabric is designed for.",
                                             validators=bounded(1, MAX_SUPERNODE_CARDS, "cards"))
    dim_x = models.PositiveSmallIntegerField(default=1)
    dim_y = models.PositiveSmallIntegerField(default=1)
    dim_z = models.PositiveSmallIntegerField(default=1)
    link_gbps = models.FloatField("Link bandwidth (Gb/s)", help_text="Per link, per direction.",
                                  validators=[AtMost(MAX_LINK_GBPS, "Gb/s")])
    link_latency_ns = models.FloatField("Link latency (ns)",
                                        validators=bounded(0, MAX_LINK_LATENCY_NS, "ns"))
    switch_latency_ns = models.FloatField(
        "Switch latency (ns)", default=0, help_text="Added per switch traversed (star, fat tree).",
        validators=bounded(0, MAX_DEVICE_LATENCY_NS, "ns"),
    )
    in_switch_reduction = models.BooleanField(
        "In-switch reduction", default=False,
        help_text="The scale-up switches reduce data in flight (NVLink SHARP on third-generation "
                  "NVSwitch): collectives may use NCCL's NVLS algorithm inside a switch domain.",
    )

    class Meta:
        ordering = ["cluster", "index"]
        constraints = [
            printable_constraint("name", "supernode_name_printable"),
            models.UniqueConstraint(fields=["cluster", "index"], name="supernode_unique_index"),
            models.UniqueConstraint(fields=["cluster", "name"], name="supernode_unique_name"),
            models.CheckConstraint(
                condition=Q(link_gbps__gt=0) & Q(link_latency_ns__gte=0)
                & Q(switch_latency_ns__gte=0),
                name="supernode_link_figures_valid",
            ),
            models.CheckConstraint(
                condition=Q(card_count__gt=0) & Q(dim_x__gt=0) & Q(dim_y__gt=0) & Q(dim_z__gt=0),
                name="supernode_sizes_positive",
            ),
            models.CheckConstraint(
                condition=Q(card_count__lte=MAX_SUPERNODE_CARDS) & Q(link_gbps__lte=MAX_LINK_GBPS)
                & Q(link_latency_ns__lte=MAX_LINK_LATENCY_NS)
                & Q(switch_latency_ns__lte=MAX_DEVICE_LATENCY_NS),
                name="supernode_figures_bounded",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cluster} / {self.name}"

    def deletion_contents(self) -> dict[str, models.QuerySet]:
        from twin.hardware.models import Card, NetworkDevice, Server, links_touching

        cards = Card.objects.filter(Q(supernode=self) | Q(server__supernode=self))
        devices = NetworkDevice.objects.filter(server__supernode=self)
        return {"servers": Server.objects.filter(supernode=self), "cards": cards,
                "network_devices": devices, "links": links_touching(cards, devices)}

    @property
    def dims(self) -> tuple[int, int, int]:
        return (self.dim_x, self.dim_y, self.dim_z)

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.link_gbps is not None and self.link_gbps <= 0:
            errors["link_gbps"] = "Link bandwidth must be positive."
        dims = [d for d in (self.dim_x, self.dim_y, self.dim_z) if d is not None]
        if self.card_count and len(dims) == 3:
            product = math.prod(dims)
            if self.fabric in DIMENSIONED_FABRICS or product != 1:
                if product != self.card_count:
                    errors["dim_x"] = (
                        f"Dimensions {self.dim_x}×{self.dim_y}×{self.dim_z} hold {product} "
                        f"cards, not the {self.card_count} declared; make their product "
                        f"equal the card count."
                    )
            if self.fabric == FabricChoices.TORUS_3D and min(dims) < 2:
                errors["dim_z"] = "A 3D torus needs at least 2 cards along every dimension."
            if self.fabric == FabricChoices.TORUS_2D and (self.dim_z != 1 or min(dims[:2]) < 2):
                errors["dim_z"] = "A 2D torus has dim_z = 1 and at least 2 along x and y."
            if self.fabric == FabricChoices.RING and (self.dim_y != 1 or self.dim_z != 1):
                errors["dim_y"] = "A ring is one-dimensional: set dim_x to the card count."
        if self.in_switch_reduction and self.fabric not in SWITCHED_FABRICS:
            errors["in_switch_reduction"] = (
                f"Only a switched fabric (fat tree, PCIe-switch star, full mesh) reduces in the "
                f"switch, not a {FabricChoices.label(self.fabric)}."
            )
        if errors:
            raise ValidationError(errors)
