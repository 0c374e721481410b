"""Network devices of the seeds' three-tier hybrid network (PCIe switch → smart NIC → RoCE)."""
from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from twin.core.bounds import bounded
from twin.core.deletion import GuardedDeletion
from twin.core.models import TimestampedModel
from twin.hardware.choices import DeviceKindChoices
from twin.hardware.constants import (
    DEVICE_TIER,
    MAX_DEVICE_LATENCY_NS,
    MAX_DEVICE_PORTS,
    MAX_DEVICE_POWER_W,
    MAX_LINK_GBPS,
)
from twin.hardware.models.racks import BudgetedWrite, Parts, Rack

__all__ = ["NetworkDevice"]


class NetworkDevice(GuardedDeletion, BudgetedWrite, TimestampedModel):
    """A switch or NIC. Inside a server (PCIe switch, NIC) it sets ``server``;
    either way its ``power_w`` counts against its rack."""

    cluster = models.ForeignKey(
        "hardware.Cluster", on_delete=models.CASCADE, related_name="devices"
    )
    rack = models.ForeignKey(
        "hardware.Rack", on_delete=models.PROTECT, null=True, blank=True, related_name="devices"
    )
    server = models.ForeignKey(
        "hardware.Server", on_delete=models.CASCADE, null=True, blank=True, related_name="devices"
    )
    kind = models.CharField(max_length=20, choices=DeviceKindChoices.choices(), db_index=True)
    name = models.CharField(max_length=100)
    model = models.CharField(max_length=100, blank=True)
    ports = models.PositiveSmallIntegerField(validators=bounded(1, MAX_DEVICE_PORTS, "ports"))
    port_gbps = models.PositiveIntegerField("Port speed (Gb/s)",
                                            validators=bounded(1, MAX_LINK_GBPS, "Gb/s"))
    latency_ns = models.FloatField("Forwarding latency (ns)", default=0,
                                   validators=bounded(0, MAX_DEVICE_LATENCY_NS, "ns"))
    power_w = models.PositiveIntegerField("Power (W)",
                                          validators=bounded(0, MAX_DEVICE_POWER_W, "W"))

    class Meta:
        ordering = ["cluster", "kind", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="device_unique_name"),
            models.CheckConstraint(condition=Q(ports__gt=0) & Q(port_gbps__gt=0),
                                   name="device_ports_positive"),
            models.CheckConstraint(condition=Q(latency_ns__gte=0), name="device_latency_valid"),
            models.CheckConstraint(
                condition=Q(ports__lte=MAX_DEVICE_PORTS) & Q(port_gbps__lte=MAX_LINK_GBPS)
                & Q(latency_ns__lte=MAX_DEVICE_LATENCY_NS) & Q(power_w__lte=MAX_DEVICE_POWER_W),
                name="device_figures_bounded",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def deletion_contents(self) -> dict[str, models.QuerySet]:
        from twin.hardware.models import links_touching

        return {"links": links_touching(devices=type(self).objects.filter(pk=self.pk))}

    @property
    def tier(self) -> str:
        return DEVICE_TIER.get(self.kind, "")

    def lock_for_budget(self) -> None:
        server = self.server if self.server_id else None
        racks = Rack.objects.filter(pk__in=[pk for pk in (
            self.rack_id, server.rack_id if server else None) if pk]).lock()
        if self.rack_id in racks:
            self.rack = racks[self.rack_id]
        if server is not None and server.rack_id in racks:
            server.rack = racks[server.rack_id]

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.server_id:
            if self.rack_id and self.server.rack_id != self.rack_id:
                errors["rack"] = "A device inside a server sits in that server's rack."
            self.rack = self.server.rack
        if self.rack_id and self.cluster_id and self.rack.cluster_id != self.cluster_id:
            errors["rack"] = "The rack belongs to another cluster."
        if self.rack_id and self.power_w is not None and "rack" not in errors:
            moved = not self.pk or type(self).objects.filter(pk=self.pk).exclude(
                rack_id=self.rack_id).exists()
            self.check_budget(errors, lambda: self.rack.check_added_draw(
                self.power_w, excluding=Parts.of(devices=[self.pk]),
                field="rack" if moved else "power_w", what="this device",
                allow=self.allow_over_budget,
            ))
        if errors:
            raise ValidationError(errors)
