"""Devices of the seeds' three-tier hybrid network (PCIe switch → smart NIC → RoCE), and the
appliances of the parallel file system that sit on it."""
from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from twin.core.bounds import bounded
from twin.core.deletion import GuardedDeletion
from twin.core.models import TimestampedModel
from twin.core.validators import printable, printable_constraint
from twin.hardware.choices import DeviceKindChoices, DeviceStatusChoices
from twin.hardware.constants import (
    DEVICE_TIER,
    MAX_DEVICE_LATENCY_NS,
    MAX_DEVICE_PORTS,
    MAX_DEVICE_POWER_W,
    MAX_LINK_GBPS,
    MAX_STORAGE_GB_PER_S,
    MAX_STORAGE_TB,
)
from twin.hardware.models.racks import BudgetedWrite, Parts, Rack

__all__ = ["NetworkDevice"]


class NetworkDevice(GuardedDeletion, BudgetedWrite, TimestampedModel):
    """A switch, a NIC or a file-system appliance. Inside a server (PCIe switch, NIC)
    it sets ``server``; either way its ``power_w`` counts against its rack.

    A ``storage`` device is one appliance of the cluster's parallel file system
    (e.g. a DDN AI400X2): it carries the capacity and sequential bandwidth it adds
    to the file system (the file system's aggregate is the sum over its
    appliances, as Lustre stripes over them); other kinds leave these empty."""

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
    status = models.CharField(max_length=12, choices=DeviceStatusChoices.choices(),
                              default=DeviceStatusChoices.OK)
    name = models.CharField(max_length=100, validators=[printable])
    model = models.CharField(max_length=100, blank=True, validators=[printable])
    ports = models.PositiveSmallIntegerField(validators=bounded(1, MAX_DEVICE_PORTS, "ports"))
    port_gbps = models.PositiveIntegerField("Port speed (Gb/s)",
                                            validators=bounded(1, MAX_LINK_GBPS, "Gb/s"))
    latency_ns = models.FloatField("Forwarding latency (ns)", default=0,
                                   validators=bounded(0, MAX_DEVICE_LATENCY_NS, "ns"))
    power_w = models.PositiveIntegerField("Power (W)",
                                          validators=bounded(0, MAX_DEVICE_POWER_W, "W"))
    capacity_tb = models.FloatField(
        "Capacity (TB)", null=True, blank=True, help_text="File-system appliances only: "
        "usable capacity, decimal TB.", validators=bounded(0, MAX_STORAGE_TB, "TB"))
    read_gb_per_s = models.FloatField(
        "Read (GB/s)", null=True, blank=True, help_text="File-system appliances only: "
        "sequential read it serves.", validators=bounded(0, MAX_STORAGE_GB_PER_S, "GB/s"))
    write_gb_per_s = models.FloatField(
        "Write (GB/s)", null=True, blank=True, help_text="File-system appliances only: "
        "sequential write it absorbs.", validators=bounded(0, MAX_STORAGE_GB_PER_S, "GB/s"))

    class Meta:
        ordering = ["cluster", "kind", "name"]
        constraints = [
            printable_constraint("name", "device_name_printable"),
            models.UniqueConstraint(fields=["cluster", "name"], name="device_unique_name"),
            models.CheckConstraint(condition=Q(ports__gt=0) & Q(port_gbps__gt=0),
                                   name="device_ports_positive"),
            models.CheckConstraint(condition=Q(latency_ns__gte=0), name="device_latency_valid"),
            models.CheckConstraint(
                condition=Q(ports__lte=MAX_DEVICE_PORTS) & Q(port_gbps__lte=MAX_LINK_GBPS)
                & Q(latency_ns__lte=MAX_DEVICE_LATENCY_NS) & Q(power_w__lte=MAX_DEVICE_POWER_W),
                name="device_figures_bounded",
            ),
            models.CheckConstraint(
                # IS NOT NULL spelled out: a comparison with NULL would pass a CHECK
                condition=(Q(kind=DeviceKindChoices.STORAGE, capacity_tb__isnull=False,
                             read_gb_per_s__isnull=False, write_gb_per_s__isnull=False)
                           & Q(capacity_tb__gt=0, read_gb_per_s__gt=0, write_gb_per_s__gt=0)
                           & Q(capacity_tb__lte=MAX_STORAGE_TB)
                           & Q(read_gb_per_s__lte=MAX_STORAGE_GB_PER_S)
                           & Q(write_gb_per_s__lte=MAX_STORAGE_GB_PER_S))
                | (~Q(kind=DeviceKindChoices.STORAGE) & Q(capacity_tb__isnull=True,
                                                         read_gb_per_s__isnull=True,
                                                         write_gb_per_s__isnull=True)),
                name="device_storage_figures",
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
        errors: dict[str, Any] = {}
        self._clean_storage(errors)
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

    STORAGE_FIELDS = ("capacity_tb", "read_gb_per_s", "write_gb_per_s")

    def _clean_storage(self, errors: dict[str, str]) -> None:
        """A file-system appliance has capacity and bandwidth, in a rack of its own
        (not inside a server); no other device has them."""
        if self.kind == DeviceKindChoices.STORAGE:
            for field in self.STORAGE_FIELDS:
                if getattr(self, field) in (None, 0):
                    errors[field] = "A file-system appliance needs this figure (above 0)."
            if self.server_id:
                errors["server"] = "A file-system appliance stands in a rack, not in a server."
        else:
            for field in self.STORAGE_FIELDS:
                if getattr(self, field) is not None:
                    errors[field] = (f"Only file-system appliances have this; leave it empty "
                                     f"for a {DeviceKindChoices.label(self.kind)}.")
