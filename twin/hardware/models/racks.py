"""Racks and their power: the one definition of a rack's draw and the one budget rule.

A rack's nameplate draw, in watts::

    draw(rack) = Σ its cards' TDP           (Card → AcceleratorType.tdp_w)
               + Σ its servers' static draw (Server.overhead_w)
               + Σ its network devices      (NetworkDevice.power_w, built-in ones included)

:data:`DRAW_TERMS` writes that down once, and everything that needs a rack's draw is
built from it:

* ``Rack.objects.draw_by_rack()`` — the draw of many racks in ONE grouped pass
  (a ``UNION ALL`` of the terms grouped by rack): the cluster summary and floor,
  the over-budget filter, telemetry's static draw, and the budget checks.
* ``Rack.objects.with_power()`` — the same terms as correlated subqueries, one
  set per rack of a page: the rack list and admin, sortable by draw (a grouped
  pass over every card would cost seconds for a page of 50 racks).
* ``Rack.check_added_draw()`` — the budget rule, for every write that adds draw
  (a card, a server's overhead or move, a device, the admin's inline formsets):
  refuse only what takes a rack over its budget *and* adds draw, so a rack already
  over budget still lets its cards be marked failed. Raising an accelerator type's
  TDP adds draw to every rack holding its cards: ``RackQuerySet.check_tdp_change()``
  refuses it in one grouped pass, naming the racks.

A write that would go over may be allowed explicitly (``allow_over_budget`` in the
API, a checkbox in the admin): :class:`BudgetedWrite` carries the flag and the
racks the write took over budget. The checks read other rows, so ``full_clean()``
first locks the racks they read (``SELECT … FOR UPDATE``) when it runs in a
transaction — the API's writes and the admin's saves both do.

Only this module knows the formula. It refers to the parts (cards, servers,
devices) by name through the app registry; the parts import it, never the
reverse, so there is no import circle.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from django.apps import apps
from django.core.exceptions import ObjectDoesNotExist, ValidationError
from django.db import connection, models, router, transaction
from django.db.models import Case, F, FloatField, OuterRef, Q, Subquery, Sum, Value, When
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast, Coalesce

from twin.core.bounds import AtLeast, AtMost, bounded
from twin.core.deletion import GuardedDeletion
from twin.core.models import TimestampedModel
from twin.core.validators import printable, printable_constraint
from twin.hardware.choices import CoolingChoices
from twin.hardware.constants import (
    DEFAULT_PUE,
    DEFAULT_RACK_BUDGET_W,
    MAX_PUE,
    MAX_RACK_BUDGET_W,
)
from twin.hardware.models.budget import NAMED_OVERLOADS, OVER_BUDGET, OverBudget, Overload

__all__ = [
    "DRAW_TERMS",
    "NOTHING",
    "BudgetedWrite",
    "DrawTerm",
    "DrawTotals",
    "Parts",
    "Rack",
    "RackDraw",
    "RackDraws",
    "RackQuerySet",
    "carried_w",
    "server_draw_expression",
]

# --- the formula ------------------------------------------------------------------------------
@dataclass(frozen=True)
class DrawTerm:
    """One kind of part that draws power: how its rows reach their rack, their server and
    their watts (lookups on the part's model)."""

    kind: str  #: the :class:`Parts` field that names rows of this kind
    model: str  #: model name in the hardware app
    rack: str  #: lookup of the rack's id
    server: str  #: lookup of the server the part sits in ("pk": the part is the server)
    watts: str  #: lookup of its watts
    static: bool = True  #: drawn whatever the load (False for cards: telemetry measures them)
    priced_by: str | None = None  #: lookup of what sets ``watts`` (a what-if may reprice it)


DRAW_TERMS: tuple[DrawTerm, ...] = (
    DrawTerm("cards", "Card", rack="server__rack_id", server="server_id",
             watts="accelerator__tdp_w", static=False, priced_by="accelerator_id"),
    DrawTerm("servers", "Server", rack="rack_id", server="pk", watts="overhead_w"),
    DrawTerm("devices", "NetworkDevice", rack="rack_id", server="server_id", watts="power_w"),
)


def _model(term: DrawTerm) -> type[models.Model]:
    return apps.get_model("hardware", term.model)


def _watts(term: DrawTerm, tdp_w: Mapping[int, int] | None = None) -> Any:
    """The term's watts; ``tdp_w`` reprices some accelerator types (a what-if)."""
    if not tdp_w or term.priced_by is None:
        return F(term.watts)
    return Case(*(When(**{term.priced_by: key}, then=Value(int(w))) for key, w in tdp_w.items()),
                default=F(term.watts), output_field=models.IntegerField())


def _sum_per(queryset: models.QuerySet, group: str, watts: Any) -> Coalesce:
    """``SUM(watts)`` of ``queryset``'s rows (already narrowed to one outer row) as a subquery."""
    return Coalesce(
        Subquery(queryset.order_by().values(group).annotate(t=Sum(watts)).values("t")[:1],
                 output_field=models.BigIntegerField()),
        Value(0), output_field=models.BigIntegerField(),
    )


@dataclass(frozen=True)
class Parts:
    """Parts left out of a draw, by id: the rows a write replaces, as they are stored.
    A server stands for itself, its cards and its built-in devices."""

    cards: tuple[int, ...] = ()
    servers: tuple[int, ...] = ()
    devices: tuple[int, ...] = ()

    @classmethod
    def of(cls, **ids: Iterable[int | None]) -> Parts:
        """``Parts.of(cards=[card.pk])``, dropping the ``None`` of unsaved rows."""
        return cls(**{kind: tuple(pk for pk in pks if pk) for kind, pks in ids.items()})

    def __bool__(self) -> bool:
        return bool(self.cards or self.servers or self.devices)

    def leave_out(self, term: DrawTerm, queryset: models.QuerySet) -> models.QuerySet:
        """``queryset`` (rows of ``term``) without these parts."""
        if own := getattr(self, term.kind):
            queryset = queryset.exclude(pk__in=own)
        if self.servers and term.server != "pk":
            queryset = queryset.exclude(**{f"{term.server}__in": self.servers})
        return queryset


NOTHING = Parts()


def carried_w(server_ids: Iterable[int | None],
              kinds: Iterable[str] = ("cards", "devices")) -> dict[int, int]:
    """What each server carries besides its own overhead: its cards and built-in
    devices (``kinds`` narrows it to some of them)."""
    ids = [pk for pk in server_ids if pk]
    carried = dict.fromkeys(ids, 0)
    for term in DRAW_TERMS:
        if term.server == "pk" or term.kind not in kinds or not ids:
            continue
        rows = (_model(term).objects.filter(**{f"{term.server}__in": ids}).order_by()
                .values_list(term.server).annotate(w=Sum(term.watts)))
        for server_id, w in rows:
            carried[server_id] += int(w or 0)
    return carried


def server_draw_expression() -> Any:
    """SQL of a server's draw (its overhead + what it carries), per row of a server queryset."""
    expression: Any = None
    for term in DRAW_TERMS:
        part = F(term.watts) if term.server == "pk" else _sum_per(
            _model(term).objects.filter(**{term.server: OuterRef("pk")}), term.server,
            term.watts)
        expression = part if expression is None else expression + part
    return expression


# --- the draw of many racks in one pass ------------------------------------------------------
class RackDraw(NamedTuple):
    rack_id: int
    cards: int  #: cards in the rack
    cards_w: int  #: their TDP
    w: int  #: the rack's draw


class DrawTotals(NamedTuple):
    it_w: int  #: Σ draw
    facility_w: float  #: Σ draw × PUE
    over: OverBudget


@dataclass(frozen=True)
class RackDraws:
    """The draw of some racks as one SQL statement (see ``RackQuerySet.draw_by_rack``).

    Columns ``rack_id, cards, cards_w, w``; a rack drawing nothing has no row. Run it
    (``rows()``, ``watts()``) or compose it (``over_budget_ids()``, ``totals()``):
    the per-rack figures then never leave the database.
    """

    sql: str
    params: tuple[Any, ...]

    def rows(self) -> list[RackDraw]:
        with connection.cursor() as cursor:
            cursor.execute(self.sql, self.params)
            return [RackDraw(int(r), int(n or 0), int(c or 0), int(w or 0))
                    for r, n, c, w in cursor.fetchall()]

    def watts(self) -> dict[int, int]:
        """``{rack id: draw}``."""
        return {row.rack_id: row.w for row in self.rows()}

    def _joined(self) -> str:
        rack = connection.ops.quote_name(Rack._meta.db_table)
        return f"FROM ({self.sql}) p INNER JOIN {rack} rb ON rb.id = p.rack_id"

    def over_budget_ids(self) -> RawSQL:
        """Subquery of the ids of the racks drawing more than their budget."""
        return RawSQL(f"SELECT p.rack_id {self._joined()} WHERE p.w > rb.power_budget_w",
                      self.params)

    def totals(self, *, worst: int = NAMED_OVERLOADS) -> DrawTotals:
        """IT draw, facility draw (Σ draw × PUE) and the racks over budget with the
        ``worst`` most over named: one query, two if any rack is over."""
        joined, over = self._joined(), "p.w > rb.power_budget_w"
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT SUM(p.w), SUM(p.w * rb.pue), "
                           f"SUM(CASE WHEN {over} THEN 1 ELSE 0 END) {joined}", self.params)
            it_w, facility_w, count = cursor.fetchone()
            racks: tuple[Overload, ...] = ()
            if count and worst:
                cluster = connection.ops.quote_name(apps.get_model("hardware", "Cluster")
                                                    ._meta.db_table)
                cursor.execute(
                    f"SELECT rb.id, rb.name, cl.name, p.w, rb.power_budget_w {joined} "
                    f"INNER JOIN {cluster} cl ON cl.id = rb.cluster_id WHERE {over} "
                    f"ORDER BY p.w - rb.power_budget_w DESC, rb.name LIMIT %s",
                    (*self.params, worst))
                racks = tuple(Overload(pk, name, cl, int(w), int(b))
                              for pk, name, cl, w, b in cursor.fetchall())
        return DrawTotals(int(it_w or 0), float(facility_w or 0.0),
                          OverBudget(int(count or 0), racks))


class RackQuerySet(models.QuerySet):
    def draw_by_rack(self, *, excluding: Parts = NOTHING, tdp_w: Mapping[int, int] | None = None,
                     static_only: bool = False) -> RackDraws:
        """The draw of these racks, one grouped pass over the parts (:data:`DRAW_TERMS`).

        ``excluding`` leaves parts out (what a write replaces); ``tdp_w`` prices the
        given accelerator types (id → W) differently (what a catalogue change would do);
        ``static_only`` leaves the cards out (telemetry adds their live draw instead).
        """
        rack_ids = self.order_by().values("pk")
        sqls: list[str] = []
        params: list[Any] = []
        for term in DRAW_TERMS:
            if static_only and not term.static:
                continue
            watts = _watts(term, tdp_w)
            card = Value(1 if term.kind == "cards" else 0)
            rows = excluding.leave_out(
                term, _model(term).objects.filter(**{f"{term.rack}__in": rack_ids}))
            rows = rows.order_by().annotate(
                r=F(term.rack), w=watts, n=card,
                c=watts if term.kind == "cards" else Value(0),
            ).values_list("r", "n", "c", "w")
            sql, part_params = rows.query.sql_with_params()
            sqls.append(sql)
            params.extend(part_params)
        union = " UNION ALL ".join(sqls)  # no parentheses: SQLite refuses them here
        return RackDraws(
            f"SELECT t.r AS rack_id, SUM(t.n) AS cards, SUM(t.c) AS cards_w, SUM(t.w) AS w "
            f"FROM ({union}) t GROUP BY t.r", tuple(params))

    def with_power(self) -> RackQuerySet:
        """Annotate ``power_w`` (the draw), ``utilization`` (draw / budget), ``facility_w``
        (× PUE) and ``headroom_w``: the terms as correlated subqueries, for a page of racks."""
        draw: Any = None
        for term in DRAW_TERMS:
            part = _sum_per(_model(term).objects.filter(**{term.rack: OuterRef("pk")}),
                            term.rack, term.watts)
            draw = part if draw is None else draw + part
        return self.annotate(power_w=draw).annotate(
            utilization=Cast(F("power_w"), FloatField()) / Cast(F("power_budget_w"), FloatField()),
            facility_w=Cast(F("power_w"), FloatField()) * F("pue"),
            headroom_w=F("power_budget_w") - F("power_w"),
        )

    def over_budget(self) -> RackQuerySet:
        """These racks that draw more than their budget (one grouped pass)."""
        return self.filter(pk__in=self.draw_by_rack().over_budget_ids())

    def holding(self, accelerator_id: int) -> RackQuerySet:
        """Racks with at least one card of this accelerator type."""
        card = apps.get_model("hardware", "Card")
        return self.filter(pk__in=card.objects.filter(accelerator_id=accelerator_id)
                           .values("server__rack_id"))

    def lock(self) -> dict[int, Rack]:
        """Lock these racks (``SELECT … FOR UPDATE``) in primary-key order; fresh rows by id.

        A fixed order means two writers that need the same racks queue instead of
        deadlocking. On SQLite ``FOR UPDATE`` is a no-op, but the settings open every
        transaction with ``BEGIN IMMEDIATE``, which already serialises writers. Must
        run inside ``transaction.atomic()``.
        """
        return {rack.pk: rack for rack in self.select_for_update().order_by("pk")}

    def check_tdp_change(self, accelerator_id: int, tdp_w: int, *, field: str = "tdp_w",
                         allow: bool = False) -> OverBudget | None:
        """The budget rule for a catalogue change: pricing ``accelerator_id`` at ``tdp_w``
        adds draw to every rack holding such cards; refuse it (``ValidationError`` on
        ``field``) if any of them would go over budget, naming them. Call it only for a
        rise. ``allow`` returns the racks instead (the caller lists them)."""
        over = self.holding(accelerator_id).draw_by_rack(tdp_w={accelerator_id: tdp_w}).totals(
            worst=NAMED_OVERLOADS).over
        if not over.count:
            return None
        if allow:
            return over
        raise ValidationError({field: ValidationError(
            f"A TDP of {tdp_w:,} W would put {over.describe()}. Keep it lower, raise those "
            f"racks' budgets, or allow over budget to save it anyway.", code=OVER_BUDGET)})


# --- the write side: locks and the explicit override -----------------------------------------
class BudgetedWrite:
    """Mixin of the models whose writes change racks' draw or budget.

    ``full_clean()`` locks the rows its budget check reads (:meth:`lock_for_budget`)
    when it runs inside a transaction, so the check and the save that follows see
    the same racks: two writers cannot both squeeze under one budget. The API's
    writes and the admin's saves run in one transaction each.

    ``allow_over_budget`` (set by the API's flag or the admin's checkbox, not stored)
    turns a refusal into a record: ``over_budget`` then lists the racks this write
    takes over budget, for the response to show.
    """

    allow_over_budget: bool = False
    over_budget: OverBudget | None = None

    def lock_for_budget(self) -> None:
        """Lock what ``clean()``'s budget check reads; point the instance at the fresh rows."""

    def full_clean(self, *args: Any, **kwargs: Any) -> None:
        self.over_budget = None
        if transaction.get_connection(router.db_for_write(type(self))).in_atomic_block:
            try:
                self.lock_for_budget()
            except ObjectDoesNotExist:
                pass  # a related row that does not exist: clean_fields() says so
        super().full_clean(*args, **kwargs)  # type: ignore[misc]

    def record_over_budget(self, over: OverBudget | None) -> None:
        if over is not None:
            self.over_budget = over + self.over_budget

    def check_budget(self, errors: dict[str, Any], check: Callable[[], OverBudget | None]) -> None:
        """Run a budget check from ``clean()``: a refusal joins ``errors`` (with the
        others, keeping its code ``over_budget``: the API answers 409 when it is the
        only kind of error), an allowed overload is recorded in ``over_budget``."""
        try:
            self.record_over_budget(check())
        except ValidationError as exc:
            errors.update((field, found[0]) for field, found in exc.error_dict.items())


# --- the rack ---------------------------------------------------------------------------------
class Rack(GuardedDeletion, BudgetedWrite, TimestampedModel):
    cluster = models.ForeignKey("hardware.Cluster", on_delete=models.CASCADE, related_name="racks")
    supernode = models.ForeignKey(
        "hardware.SuperNode",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="racks",
        help_text="Empty for network racks shared by the cluster.",
    )
    name = models.CharField(max_length=100, validators=[printable])
    row = models.PositiveIntegerField(help_text="Floor position: row.")
    slot = models.PositiveIntegerField(help_text="Floor position: slot within the row.")
    power_budget_w = models.PositiveIntegerField("Power budget (W)", default=DEFAULT_RACK_BUDGET_W,
                                                 validators=bounded(1, MAX_RACK_BUDGET_W, "W"))
    cooling = models.CharField(
        max_length=10, choices=CoolingChoices.choices(), default=CoolingChoices.LIQUID
    )
    pue = models.FloatField("PUE", default=DEFAULT_PUE[CoolingChoices.LIQUID], validators=[
        AtLeast(1.0, message="PUE is facility power over IT power: it cannot be below 1.0."),
        AtMost(MAX_PUE, message=f"A PUE above {MAX_PUE} is no working data centre (the worst "
                                "surveyed are near 2.5)."),
    ])

    objects = RackQuerySet.as_manager()

    class Meta:
        ordering = ["cluster", "row", "slot"]
        constraints = [
            printable_constraint("name", "rack_name_printable"),
            models.UniqueConstraint(fields=["cluster", "name"], name="rack_unique_name"),
            models.UniqueConstraint(fields=["cluster", "row", "slot"], name="rack_unique_position"),
            models.CheckConstraint(condition=Q(power_budget_w__gt=0), name="rack_budget_positive"),
            models.CheckConstraint(condition=Q(pue__gte=1.0), name="rack_pue_at_least_one"),
            models.CheckConstraint(condition=Q(power_budget_w__lte=MAX_RACK_BUDGET_W)
                                   & Q(pue__lte=MAX_PUE), name="rack_figures_bounded"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster} / {self.name}"

    def deletion_contents(self) -> dict[str, models.QuerySet]:
        from twin.hardware.models.links import links_touching

        part = apps.get_model
        cards = part("hardware", "Card").objects.filter(server__rack=self)
        devices = part("hardware", "NetworkDevice").objects.filter(
            Q(rack=self) | Q(server__rack=self))
        return {"servers": part("hardware", "Server").objects.filter(rack=self),
                "cards": cards, "network_devices": devices,
                "links": links_touching(cards, devices)}

    def delete_with_contents(self) -> None:
        """Servers (with their cards, built-in devices and links) go first, then the
        devices left in the rack: both protect the rack from deletion."""
        apps.get_model("hardware", "Server").objects.filter(rack=self).delete()
        apps.get_model("hardware", "NetworkDevice").objects.filter(rack=self).delete()
        self.delete()

    def draw_w(self, *, excluding: Parts = NOTHING) -> int:
        """This rack's draw, leaving out ``excluding``."""
        if not self.pk:
            return 0
        return Rack.objects.filter(pk=self.pk).draw_by_rack(excluding=excluding).watts().get(
            self.pk, 0)

    def overload(self, draw_w: int) -> Overload:
        return Overload(self.pk, self.name, str(self.cluster) if self.cluster_id else "",
                        draw_w, self.power_budget_w)

    def check_added_draw(
        self,
        added_w: int,
        *,
        excluding: Parts = NOTHING,
        field: str | None = None,
        what: str = "this change",
        advice: str = "Choose a rack with more headroom, or raise its budget.",
        message: str | None = None,
        allow: bool = False,
    ) -> OverBudget | None:
        """The budget rule, once: refuse a write that takes this rack over its budget,
        unless it adds no draw.

        The rack's draw after the write is its draw without ``excluding`` (the rows
        being written, as stored) plus ``added_w`` (them as written). The write is
        refused only if that is over the budget *and* more than the rack draws now:
        a rack already over budget (a catalogue TDP corrected upwards, an allowed
        overload) must still let its cards be marked failed or its server renamed.

        Refusal is a ``ValidationError`` on ``field`` (a plain one when ``field`` is
        None, for a formset) whose text is ``message`` formatted with ``rack``,
        ``draw``, ``budget``, ``over``, ``headroom``, ``added``, ``what`` and
        ``advice``. With ``allow`` the rack is returned instead, for the caller to list.
        """
        rest = self.draw_w(excluding=excluding)
        draw, budget = rest + added_w, self.power_budget_w
        if budget is None or draw <= budget:
            if not allow:
                self._check_elements_above(rest, draw, excluding, field)
            return None
        now = self.draw_w() if excluding else rest
        if draw <= now:
            return None  # adds no draw
        if allow:
            return OverBudget(1, (self.overload(draw),))
        text = (message or (
            "Rack {rack} would draw {draw:,} W, over its {budget:,} W budget ({what}: "
            "{added:,} W; headroom: {headroom:,} W). {advice} To go over on purpose, allow "
            "over budget."
        )).format(rack=self.name, draw=draw, budget=budget, over=draw - budget,
                  headroom=max(budget - rest, 0), added=added_w, what=what, advice=advice)
        refusal = ValidationError(text, code=OVER_BUDGET)
        raise ValidationError({field: refusal}) if field else refusal

    def _check_elements_above(self, rest: int, draw: int, excluding: Parts,
                              field: str | None) -> None:
        """The rule for what feeds and cools this rack (a PDU, a CDU, the feed: apps
        above hardware answer ``rack_draw_rising``): refuse a write that adds draw the
        rack's budget allows but an element above it cannot carry. ``allow over
        budget`` covers these ratings too (the caller skips this)."""
        from twin.hardware.signals import rack_draw_rising

        if not self.pk or not rack_draw_rising.receivers:
            return
        now = self.draw_w() if excluding else rest
        if draw <= now:
            return
        for _, messages in rack_draw_rising.send(sender=Rack, rack=self, added_w=draw - now):
            if messages:
                refusal = ValidationError(messages[0], code=OVER_BUDGET)
                raise ValidationError({field: refusal}) if field else refusal

    def lock_for_budget(self) -> None:
        if self.pk:
            Rack.objects.filter(pk=self.pk).lock()

    def clean(self) -> None:
        errors: dict[str, Any] = {}
        if self.supernode_id and self.cluster_id and self.supernode.cluster_id != self.cluster_id:
            errors["supernode"] = "The supernode belongs to another cluster."
        if self.pk and self.power_budget_w is not None:
            draw = self.draw_w()
            # Refuse only a budget lowered below the draw, not the rename of a rack
            # that is already over.
            if draw > self.power_budget_w and self.power_budget_w < (Rack.objects.filter(
                    pk=self.pk).values_list("power_budget_w", flat=True).first() or draw):
                if self.allow_over_budget:
                    self.record_over_budget(OverBudget(1, (self.overload(draw),)))
                else:
                    errors["power_budget_w"] = ValidationError(
                        f"The rack already draws {draw:,} W; a budget of "
                        f"{self.power_budget_w:,} W is too low. Set at least {draw:,} W or "
                        f"move hardware out first.", code=OVER_BUDGET)
        if errors:
            raise ValidationError(errors)
