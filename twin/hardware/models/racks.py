"""Racks and their power: nameplate draw is always an aggregate in SQL.

A rack's draw = Σ cards' TDP + Σ servers' overhead + Σ network devices' power.
Each term is a correlated subquery (not a join, which would multiply rows), so
the admin and API can annotate thousands of racks in one query.
"""
from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, FloatField, OuterRef, Q, Subquery, Sum, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast, Coalesce

from twin.core.models import TimestampedModel
from twin.hardware.choices import CoolingChoices
from twin.hardware.constants import DEFAULT_PUE, DEFAULT_RACK_BUDGET_W

__all__ = ["Rack", "RackQuerySet", "per_rack_draw_sql", "rack_draw_w"]


def _sum_subquery(queryset: models.QuerySet, group: str, field: str) -> Coalesce:
    return Coalesce(
        Subquery(
            queryset.values(group).annotate(total=Sum(field)).values("total")[:1],
            output_field=models.BigIntegerField(),
        ),
        Value(0),
        output_field=models.BigIntegerField(),
    )


def draw_expression() -> models.Expression:
    """SQL expression of the draw of ``OuterRef('pk')`` rack, in watts."""
    from twin.hardware.models.cards import Card
    from twin.hardware.models.network import NetworkDevice
    from twin.hardware.models.servers import Server

    cards = _sum_subquery(
        Card.objects.filter(server__rack=OuterRef("pk")), "server__rack", "accelerator__tdp_w"
    )
    servers = _sum_subquery(Server.objects.filter(rack=OuterRef("pk")), "rack", "overhead_w")
    devices = _sum_subquery(NetworkDevice.objects.filter(rack=OuterRef("pk")), "rack", "power_w")
    return cards + servers + devices


def per_rack_draw_sql(cluster_id: int | None = None) -> tuple[str, list[object]]:
    """SQL of ``(rack_id, w)``: the draw of every rack (of one cluster) that draws anything.

    One ``UNION ALL`` of the three kinds of draw (cards' TDP, servers' overhead,
    devices' power), each built by the ORM, grouped by rack: a single pass over
    the card table, where ``with_power()``'s correlated subqueries probe it once
    per rack — right for a page of racks, seconds for all 26,000 of ``million``.
    """
    from twin.hardware.models.cards import Card
    from twin.hardware.models.network import NetworkDevice
    from twin.hardware.models.servers import Server

    cards = Card.objects.all()
    servers = Server.objects.all()
    devices = NetworkDevice.objects.exclude(rack_id=None)
    if cluster_id is not None:
        cards = cards.filter(server__rack__cluster_id=cluster_id)
        servers = servers.filter(rack__cluster_id=cluster_id)
        devices = devices.filter(rack__cluster_id=cluster_id)
    parts = [
        cards.annotate(r=F("server__rack_id"), w=F("accelerator__tdp_w")).values_list("r", "w"),
        servers.annotate(r=F("rack_id"), w=F("overhead_w")).values_list("r", "w"),
        devices.annotate(r=F("rack_id"), w=F("power_w")).values_list("r", "w"),
    ]
    sqls: list[str] = []
    params: list[object] = []
    for part in parts:
        sql, part_params = part.order_by().query.sql_with_params()
        sqls.append(sql)
        params.extend(part_params)
    union = " UNION ALL ".join(sqls)  # no parentheses: SQLite refuses them here
    return f"SELECT t.r AS rack_id, SUM(t.w) AS w FROM ({union}) t GROUP BY t.r", params


def over_budget_ids_sql(cluster_id: int | None = None) -> RawSQL:
    """Subquery of the ids of racks drawing more than their budget (one grouped pass)."""
    per_rack, params = per_rack_draw_sql(cluster_id)
    table = Rack._meta.db_table
    return RawSQL(
        f"SELECT p.rack_id FROM ({per_rack}) p INNER JOIN {table} rb ON rb.id = p.rack_id "
        f"WHERE p.w > rb.power_budget_w",
        params,
    )


class RackQuerySet(models.QuerySet):
    def with_power(self) -> RackQuerySet:
        """Annotate ``power_w``, ``utilization`` (draw / budget) and ``facility_w`` (× PUE)."""
        return self.annotate(power_w=draw_expression()).annotate(
            utilization=Cast(F("power_w"), FloatField()) / Cast(F("power_budget_w"), FloatField()),
            facility_w=Cast(F("power_w"), FloatField()) * F("pue"),
            headroom_w=F("power_budget_w") - F("power_w"),
        )

    def over_budget(self, cluster_id: int | None = None) -> RackQuerySet:
        """Racks over their budget, found in one grouped pass (``over_budget_ids_sql``)."""
        return self.filter(pk__in=over_budget_ids_sql(cluster_id))


def rack_draw_w(
    rack_id: int,
    *,
    exclude_card: int | None = None,
    exclude_server: int | None = None,
    exclude_device: int | None = None,
) -> int:
    """Draw of one rack in watts, leaving out the object being validated.

    Three aggregate queries; ``exclude_server`` leaves out the server together
    with its cards and built-in devices (it is being moved or re-rated).
    """
    from twin.hardware.models.cards import Card
    from twin.hardware.models.network import NetworkDevice
    from twin.hardware.models.servers import Server

    cards = Card.objects.filter(server__rack_id=rack_id)
    servers = Server.objects.filter(rack_id=rack_id)
    devices = NetworkDevice.objects.filter(rack_id=rack_id)
    if exclude_card:
        cards = cards.exclude(pk=exclude_card)
    if exclude_server:
        cards = cards.exclude(server_id=exclude_server)
        servers = servers.exclude(pk=exclude_server)
        devices = devices.exclude(server_id=exclude_server)
    if exclude_device:
        devices = devices.exclude(pk=exclude_device)
    total = cards.aggregate(w=Sum("accelerator__tdp_w"))["w"] or 0
    total += servers.aggregate(w=Sum("overhead_w"))["w"] or 0
    total += devices.aggregate(w=Sum("power_w"))["w"] or 0
    return int(total)


class Rack(TimestampedModel):
    cluster = models.ForeignKey("hardware.Cluster", on_delete=models.CASCADE, related_name="racks")
    supernode = models.ForeignKey(
        "hardware.SuperNode",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="racks",
        help_text="Empty for network racks shared by the cluster.",
    )
    name = models.CharField(max_length=100)
    row = models.PositiveIntegerField(help_text="Floor position: row.")
    slot = models.PositiveIntegerField(help_text="Floor position: slot within the row.")
    power_budget_w = models.PositiveIntegerField("Power budget (W)", default=DEFAULT_RACK_BUDGET_W)
    cooling = models.CharField(
        max_length=10, choices=CoolingChoices.choices(), default=CoolingChoices.LIQUID
    )
    pue = models.FloatField("PUE", default=DEFAULT_PUE[CoolingChoices.LIQUID])

    objects = RackQuerySet.as_manager()

    class Meta:
        ordering = ["cluster", "row", "slot"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="rack_unique_name"),
            models.UniqueConstraint(fields=["cluster", "row", "slot"], name="rack_unique_position"),
            models.CheckConstraint(condition=Q(power_budget_w__gt=0), name="rack_budget_positive"),
            models.CheckConstraint(condition=Q(pue__gte=1.0), name="rack_pue_at_least_one"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster} / {self.name}"

    def draw_w(self) -> int:
        return rack_draw_w(self.pk) if self.pk else 0

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.pue is not None and self.pue < 1.0:
            errors["pue"] = "PUE is facility power over IT power: it cannot be below 1.0."
        if self.supernode_id and self.cluster_id and self.supernode.cluster_id != self.cluster_id:
            errors["supernode"] = "The supernode belongs to another cluster."
        if self.pk and self.power_budget_w is not None:
            draw = rack_draw_w(self.pk)
            if draw > self.power_budget_w:
                errors["power_budget_w"] = (
                    f"The rack already draws {draw:,} W; a budget of {self.power_budget_w:,} W "
                    f"is too low. Set at least {draw:,} W or move hardware out first."
                )
        if errors:
            raise ValidationError(errors)
