"""Links with generic endpoints: a card or a network device at each end.

Each end is a pair of nullable foreign keys (card, device) with a check that
exactly one is set. That keeps real foreign keys and indexes on millions of
rows, where a GenericForeignKey would need a content-type join per lookup.
Which ends may connect, and with which link kinds, is ``COMPATIBLE_ENDPOINTS``.
"""
from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from twin.core.bounds import AtMost, bounded
from twin.core.models import TimestampedModel
from twin.hardware.choices import LinkKindChoices, LinkStatusChoices
from twin.hardware.constants import (
    CARD_ENDPOINT,
    MAX_LINK_GBPS,
    MAX_LINK_LATENCY_NS,
    allowed_link_kinds,
)

__all__ = ["Link", "links_touching"]


def _one_end(side: str) -> Q:
    card, device = f"{side}_card__isnull", f"{side}_device__isnull"
    return (Q(**{card: False}) & Q(**{device: True})) | (Q(**{card: True}) & Q(**{device: False}))


def links_touching(cards: models.QuerySet | None = None,
                   devices: models.QuerySet | None = None) -> models.QuerySet:
    """Links with an end among ``cards`` or ``devices``: what deleting them takes along.

    A union of one indexed lookup per end column (``a_card``, ``b_card``, …), not
    one ``OR`` over all four, which PostgreSQL answers with a scan of every link.
    """
    parts = []
    for column, rows in (("a_card", cards), ("b_card", cards), ("a_device", devices),
                         ("b_device", devices)):
        if rows is not None:
            parts.append(Link.objects.filter(**{f"{column}__in": rows.values("pk")})
                         .order_by().values("pk"))
    if not parts:
        return Link.objects.none()
    return parts[0].union(*parts[1:])


class Link(TimestampedModel):
    cluster = models.ForeignKey("hardware.Cluster", on_delete=models.CASCADE, related_name="links")
    a_card = models.ForeignKey("hardware.Card", on_delete=models.CASCADE, null=True, blank=True,
                               related_name="links_a")
    a_device = models.ForeignKey("hardware.NetworkDevice", on_delete=models.CASCADE, null=True,
                                 blank=True, related_name="links_a")
    b_card = models.ForeignKey("hardware.Card", on_delete=models.CASCADE, null=True, blank=True,
                               related_name="links_b")
    b_device = models.ForeignKey("hardware.NetworkDevice", on_delete=models.CASCADE, null=True,
                                 blank=True, related_name="links_b")
    kind = models.CharField(max_length=12, choices=LinkKindChoices.choices())
    bandwidth_gbps = models.FloatField("Bandwidth (Gb/s)", help_text="Per direction.",
                                       validators=[AtMost(MAX_LINK_GBPS, "Gb/s")])
    latency_ns = models.FloatField("Latency (ns)",
                                   validators=bounded(0, MAX_LINK_LATENCY_NS, "ns"))
    status = models.CharField(max_length=10, choices=LinkStatusChoices.choices(),
                              default=LinkStatusChoices.UP, db_index=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(condition=_one_end("a"), name="link_a_one_end"),
            models.CheckConstraint(condition=_one_end("b"), name="link_b_one_end"),
            models.CheckConstraint(condition=Q(bandwidth_gbps__gt=0), name="link_bandwidth_pos"),
            models.CheckConstraint(condition=Q(latency_ns__gte=0), name="link_latency_valid"),
            models.CheckConstraint(condition=Q(bandwidth_gbps__lte=MAX_LINK_GBPS)
                                   & Q(latency_ns__lte=MAX_LINK_LATENCY_NS),
                                   name="link_figures_bounded"),
        ]

    def __str__(self) -> str:
        return f"{self.end_label('a')} ↔ {self.end_label('b')}"

    def end(self, side: str) -> object | None:
        return getattr(self, f"{side}_card") or getattr(self, f"{side}_device")

    def end_kind(self, side: str) -> str | None:
        if getattr(self, f"{side}_card_id"):
            return CARD_ENDPOINT
        if getattr(self, f"{side}_device_id"):
            return getattr(self, f"{side}_device").kind
        return None

    def end_label(self, side: str) -> str:
        end = self.end(side)
        return str(end) if end is not None else "?"

    def _end_cluster(self, side: str) -> int | None:
        if getattr(self, f"{side}_card_id"):
            return getattr(self, f"{side}_card").supernode.cluster_id
        if getattr(self, f"{side}_device_id"):
            return getattr(self, f"{side}_device").cluster_id
        return None

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.bandwidth_gbps is not None and self.bandwidth_gbps <= 0:
            errors["bandwidth_gbps"] = "Bandwidth must be positive."
        for side in ("a", "b"):
            has_card = bool(getattr(self, f"{side}_card_id"))
            has_device = bool(getattr(self, f"{side}_device_id"))
            if has_card == has_device:
                errors[f"{side}_card"] = (
                    f"End {side.upper()} must be exactly one of a card or a network device."
                )
        if not errors:
            kind_a, kind_b = self.end_kind("a"), self.end_kind("b")
            if (self.a_card_id and self.a_card_id == self.b_card_id) or (
                self.a_device_id and self.a_device_id == self.b_device_id
            ):
                errors["b_card" if self.b_card_id else "b_device"] = "A link cannot loop back."
            allowed = allowed_link_kinds(kind_a or "", kind_b or "")
            if not allowed:
                errors["b_card" if self.b_card_id else "b_device"] = (
                    f"A {kind_a} cannot be linked to a {kind_b}."
                )
            elif self.kind and self.kind not in allowed:
                errors["kind"] = (
                    f"A {kind_a}–{kind_b} link must be one of: {', '.join(sorted(allowed))}."
                )
            for side in ("a", "b"):
                cluster = self._end_cluster(side)
                if self.cluster_id and cluster is not None and cluster != self.cluster_id:
                    errors[f"{side}_card" if getattr(self, f"{side}_card_id") else
                           f"{side}_device"] = "This end belongs to another cluster."
        if errors:
            raise ValidationError(errors)
