"""Rack power budget across a whole inline formset.

Each row's model ``clean()`` checks the budget against what is in the
database, so two new 700 W cards typed into one server form would each pass
against 1,000 W of headroom and together break it. These formsets add up
every kept row of the submission (plus what the formset does not show) and
refuse the whole save with one error naming the total and the budget.
All sums are aggregates in SQL.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Sum
from django.forms.models import BaseInlineFormSet

from twin.hardware.models import Card, NetworkDevice, Rack, Server

__all__ = [
    "CardsInServerFormSet",
    "DevicesInRackFormSet",
    "DevicesInServerFormSet",
    "ServersInRackFormSet",
    "rack_draw_excluding",
]


def _sum(queryset: Any, field: str) -> int:
    return int(queryset.aggregate(w=Sum(field))["w"] or 0)


def rack_draw_excluding(
    rack_id: int,
    *,
    servers: Iterable[int] = (),
    devices: Iterable[int] = (),
) -> int:
    """Draw of a rack in watts without the given servers (and their cards and
    built-in devices) and devices: what the rest of the rack already uses."""
    servers, devices = [s for s in servers if s], [d for d in devices if d]
    cards = Card.objects.filter(server__rack_id=rack_id)
    hosts = Server.objects.filter(rack_id=rack_id)
    gear = NetworkDevice.objects.filter(rack_id=rack_id)
    if servers:
        cards = cards.exclude(server_id__in=servers)
        hosts = hosts.exclude(pk__in=servers)
        gear = gear.exclude(server_id__in=servers)
    if devices:
        gear = gear.exclude(pk__in=devices)
    return (_sum(cards, "accelerator__tdp_w") + _sum(hosts, "overhead_w")
            + _sum(gear, "power_w"))


class RackBudgetFormSet(BaseInlineFormSet):
    """Refuses a submission whose rows together take the rack over its budget."""

    #: What one row is, for the message ("cards", "servers", …).
    noun = "rows"

    def kept_forms(self) -> list[Any]:
        return [
            form for form in self.forms
            if form.cleaned_data and not self._should_delete_form(form)
            and (form.instance.pk or form.has_changed())
        ]

    def rack(self) -> Rack | None:  # pragma: no cover - overridden
        raise NotImplementedError

    def total_w(self, rack: Rack) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    def clean(self) -> None:
        super().clean()
        if any(self.errors):
            return  # a row's own error says it better
        rack = self.rack()
        if rack is None or not rack.pk or rack.power_budget_w is None:
            return
        total, budget = self.total_w(rack), rack.power_budget_w
        if total > budget:
            raise ValidationError(
                f"Together these {self.noun} take rack {rack.name} to {total:,} W, over its "
                f"{budget:,} W budget by {total - budget:,} W. Remove or lighten some of "
                f"them, or raise the rack's budget.",
                code="over_budget",
            )


class CardsInServerFormSet(RackBudgetFormSet):
    """Cards edited inside a server: the server's rack must hold them all."""

    noun = "cards"

    def rack(self) -> Rack | None:
        return self.instance.rack if self.instance.rack_id else None

    def total_w(self, rack: Rack) -> int:
        server = self.instance
        own_devices = _sum(NetworkDevice.objects.filter(server_id=server.pk), "power_w") \
            if server.pk else 0
        cards = sum(form.cleaned_data["accelerator"].tdp_w for form in self.kept_forms()
                    if form.cleaned_data.get("accelerator"))
        return (rack_draw_excluding(rack.pk, servers=[server.pk]) + (server.overhead_w or 0)
                + own_devices + cards)


class DevicesInServerFormSet(RackBudgetFormSet):
    """NICs and PCIe switches edited inside a server (they count against its rack)."""

    noun = "devices"

    def _construct_form(self, i: int, **kwargs: Any) -> Any:
        form = super()._construct_form(i, **kwargs)
        # A built-in device sits in its server's rack and cluster.
        server = self.instance
        if server.rack_id:
            form.instance.rack_id = server.rack_id
            if not form.instance.cluster_id:
                form.instance.cluster_id = server.rack.cluster_id
        return form

    def rack(self) -> Rack | None:
        return self.instance.rack if self.instance.rack_id else None

    def total_w(self, rack: Rack) -> int:
        server = self.instance
        own_cards = _sum(Card.objects.filter(server_id=server.pk), "accelerator__tdp_w") \
            if server.pk else 0
        devices = sum(form.cleaned_data.get("power_w") or 0 for form in self.kept_forms())
        return (rack_draw_excluding(rack.pk, servers=[server.pk]) + (server.overhead_w or 0)
                + own_cards + devices)


class ServersInRackFormSet(RackBudgetFormSet):
    """Servers edited inside a rack: their overheads plus what they already carry."""

    noun = "servers"

    def rack(self) -> Rack | None:
        return self.instance

    def total_w(self, rack: Rack) -> int:
        existing = [form.instance.pk for form in self.forms if form.instance.pk]
        carried: dict[int, int] = {}
        for row in (Card.objects.filter(server_id__in=existing).values("server_id")
                    .annotate(w=Sum("accelerator__tdp_w"))):
            carried[row["server_id"]] = carried.get(row["server_id"], 0) + int(row["w"] or 0)
        for row in (NetworkDevice.objects.filter(server_id__in=existing).values("server_id")
                    .annotate(w=Sum("power_w"))):
            carried[row["server_id"]] = carried.get(row["server_id"], 0) + int(row["w"] or 0)
        servers = sum((form.cleaned_data.get("overhead_w") or 0)
                      + carried.get(form.instance.pk, 0) for form in self.kept_forms())
        return rack_draw_excluding(rack.pk, servers=existing) + servers


class DevicesInRackFormSet(RackBudgetFormSet):
    """Rack-mounted switches (not inside a server)."""

    noun = "devices"

    def _construct_form(self, i: int, **kwargs: Any) -> Any:
        form = super()._construct_form(i, **kwargs)
        if not form.instance.cluster_id and self.instance.cluster_id:
            form.instance.cluster_id = self.instance.cluster_id
        return form

    def rack(self) -> Rack | None:
        return self.instance

    def total_w(self, rack: Rack) -> int:
        existing = [form.instance.pk for form in self.forms if form.instance.pk]
        devices = sum(form.cleaned_data.get("power_w") or 0 for form in self.kept_forms())
        return rack_draw_excluding(rack.pk, devices=existing) + devices
