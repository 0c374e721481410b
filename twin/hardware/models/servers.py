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
from twin.core.validators import printable, printable_constraint
from twin.hardware.constants import (
    DEFAULT_VFS_PER_SERVER,
    MAX_CARDS_PER_SERVER,
    MAX_LINK_GBPS,
    MAX_NICS_PER_SERVER,
    MAX_NVME_GB_PER_S,
    MAX_NVME_TB,
    MAX_SERVER_MEMORY_GIB,
    MAX_SERVER_OVERHEAD_W,
    MAX_VFS_PER_SERVER,
)
from twin.hardware.models.racks import BudgetedWrite, Parts, Rack, carried_w

__all__ = ["Server"]


class Server(GuardedDeletion, BudgetedWrite, TimestampedModel):
    """A host in a rack. ``overhead_w`` is everything but the cards: CPUs, memory,
    fans, drives and on-board NICs. NICs and PCIe switches modelled as network
    devices add their own ``power_w``.

    Its storage tiers (what a checkpoint is written to before the shared file
    system): host memory and local NVMe with their sequential bandwidth, the sum
    over its data drives (a RAID 0 of them, as DGX systems ship). Their draw is in
    ``overhead_w``. The defaults are a DGX H100's: 2 TB DDR5, 8 × 3.84 TB U.2 NVMe
    (sources: ``docs/simulation.md``, "Storage tiers of the presets")."""

    rack = models.ForeignKey("hardware.Rack", on_delete=models.PROTECT, related_name="servers")
    supernode = models.ForeignKey(
        "hardware.SuperNode",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="servers",
    )
    name = models.CharField(max_length=100, validators=[printable])
    position = models.PositiveSmallIntegerField(default=0, help_text="Slot within the rack.")
    hostname = models.CharField(max_length=100, blank=True, db_index=True, validators=[printable],
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
    memory_gib = models.PositiveIntegerField(
        "Host memory (GiB)", default=2048, help_text="System DRAM (DGX H100: 2 TB DDR5).",
        validators=bounded(0, MAX_SERVER_MEMORY_GIB, "GiB"))
    nvme_tb = models.FloatField(
        "Local NVMe (TB)", default=30.72, help_text="Data drives, decimal TB (DGX H100: "
        "8 × 3.84 TB); 0 for none.", validators=bounded(0, MAX_NVME_TB, "TB"))
    nvme_read_gb_per_s = models.FloatField(
        "NVMe read (GB/s)", default=51.2, help_text="Sequential, all data drives together.",
        validators=bounded(0, MAX_NVME_GB_PER_S, "GB/s"))
    nvme_write_gb_per_s = models.FloatField(
        "NVMe write (GB/s)", default=30.4, help_text="Sequential, all data drives together.",
        validators=bounded(0, MAX_NVME_GB_PER_S, "GB/s"))

    class Meta:
        ordering = ["rack", "position"]
        constraints = [
            printable_constraint("name", "server_name_printable"),
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
            models.CheckConstraint(
                condition=Q(memory_gib__lte=MAX_SERVER_MEMORY_GIB) & Q(nvme_tb__gte=0)
                & Q(nvme_tb__lte=MAX_NVME_TB) & Q(nvme_read_gb_per_s__gte=0)
                & Q(nvme_read_gb_per_s__lte=MAX_NVME_GB_PER_S) & Q(nvme_write_gb_per_s__gte=0)
                & Q(nvme_write_gb_per_s__lte=MAX_NVME_GB_PER_S),
                name="server_storage_bounded",
            ),
            models.CheckConstraint(
                condition=Q(nvme_tb__gt=0, nvme_read_gb_per_s__gt=0, nvme_write_gb_per_s__gt=0)
                | Q(nvme_tb=0, nvme_read_gb_per_s=0, nvme_write_gb_per_s=0),
                name="server_nvme_consistent",
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
        errors: dict[str, Any] = {}
        if self.rack_id and self.supernode_id:
            if self.supernode.cluster_id != self.rack.cluster_id:
                errors["supernode"] = "The supernode and the rack belong to different clusters."
        if self.pk and self.cards_per_server is not None:
            installed = self.cards.count()
            if installed > self.cards_per_server:
                errors["cards_per_server"] = (
                    f"{installed} cards are installed; remove cards before lowering this."
                )
        self._clean_nvme(errors)
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

    def _clean_nvme(self, errors: dict[str, str]) -> None:
        """Drives have both capacity and bandwidth, or the server has none."""
        figures = (self.nvme_tb, self.nvme_read_gb_per_s, self.nvme_write_gb_per_s)
        if any(v is None for v in figures):
            return  # clean_fields() names the missing one
        if self.nvme_tb > 0:
            for field in ("nvme_read_gb_per_s", "nvme_write_gb_per_s"):
                if getattr(self, field) == 0:
                    errors[field] = ("Drives of some capacity have some bandwidth: give their "
                                     "sequential figure, or set the capacity to 0.")
        elif self.nvme_read_gb_per_s > 0 or self.nvme_write_gb_per_s > 0:
            errors["nvme_tb"] = ("Bandwidth without capacity: give the drives' capacity, or "
                                 "set both bandwidths to 0 for a server without NVMe.")
