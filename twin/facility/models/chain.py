"""What power and cooling elements share: a site, a key, a parent in the same chain
and site (never a cycle), units and redundancy, and the rating rule on every write.

The rating rule (``twin.facility.capacity``) is the rack budget rule one level up:
a write that takes an element further over its usable rating (a PDU, a busway, a
CDU, a feed…) is refused with a 400 on the field at fault, unless
``allow_over_budget`` is set (the API's flag, as for racks) — then saved, and
``over_capacity`` lists what it took over. ``full_clean()`` locks the site's row
first when it runs in a transaction, so two writers to one site queue instead of
both squeezing under one rating.
"""
from __future__ import annotations

from typing import Any, ClassVar

from django.core.exceptions import ObjectDoesNotExist, ValidationError
from django.db import models, router, transaction
from django.db.models import Q

from twin.core.bounds import bounded
from twin.core.deletion import GuardedDeletion
from twin.core.models import TimestampedModel
from twin.core.validators import printable, printable_constraint
from twin.facility.choices import ElementStatusChoices, RedundancyChoices
from twin.hardware.models.budget import OVER_BUDGET

__all__ = ["MAX_UNITS", "ChainElement", "RatedWrite", "usable_units"]

MAX_UNITS = 1000


def usable_units(units: int, redundancy: str) -> int:
    """Units that may carry the load: N all, N+1 all but one, 2N half."""
    if redundancy == RedundancyChoices.N_PLUS_1:
        return units - 1
    if redundancy == RedundancyChoices.TWO_N:
        return units // 2
    return units


class RatedWrite:
    """Mixin of the models whose writes change what an element carries (see the module doc)."""

    allow_over_budget: bool = False
    over_capacity: list[dict[str, Any]] | None = None

    def site_id_for_lock(self) -> int | None:
        return getattr(self, "site_id", None)

    def full_clean(self, *args: Any, **kwargs: Any) -> None:
        from twin.facility.models.sites import Site

        self.over_capacity = None
        if transaction.get_connection(router.db_for_write(type(self))).in_atomic_block:
            try:
                site_id = self.site_id_for_lock()
            except ObjectDoesNotExist:
                site_id = None
            if site_id:
                list(Site.objects.select_for_update().filter(pk=site_id).values_list("pk"))
        super().full_clean(*args, **kwargs)  # type: ignore[misc]

    def check_ratings(self, errors: dict[str, Any], fields: dict[str, str]) -> None:
        """Run the rating rule from ``clean()`` (only when the rest is valid): a refusal
        joins ``errors`` on the field ``fields`` names for the chain ("power"/"cooling")
        or for the element itself ("self"); an allowed overload is recorded."""
        from twin.facility.capacity import check_write

        if errors:
            return
        over = check_write(self)
        if not over:
            return
        if self.allow_over_budget:
            self.over_capacity = [o.as_dict() for o in over]
            return
        for o in over:
            field = fields.get("self") if o.is_self else fields.get(o.chain)
            errors.setdefault(field or "__all__", ValidationError(o.message(), code=OVER_BUDGET))


class ChainElement(GuardedDeletion, RatedWrite, TimestampedModel):
    """An element of a power or cooling chain (abstract: ``PowerElement``,
    ``CoolingElement``). Subclasses say their kinds' allowed parents and roots."""

    site = models.ForeignKey("facility.Site", on_delete=models.CASCADE,
                             related_name="%(class)ss")
    key = models.SlugField(max_length=64, help_text="Unique in its chain on the site "
                                                    "(\"pdu-r3\", \"cdu-7\").")
    name = models.CharField(max_length=100, blank=True, validators=[printable])
    parent = models.ForeignKey("self", on_delete=models.CASCADE, null=True, blank=True,
                               related_name="children",
                               help_text="Upstream: power comes from it, heat goes to it.")
    units = models.PositiveIntegerField(default=1, validators=bounded(1, MAX_UNITS))
    redundancy = models.CharField(max_length=4, choices=RedundancyChoices.choices(),
                                  default=RedundancyChoices.N)
    status = models.CharField(max_length=12, choices=ElementStatusChoices.choices(),
                              default=ElementStatusChoices.OK,
                              help_text="degraded: one unit out; failed or maintenance: the "
                                        "whole element out (a what-if forks it).")

    #: kind → kinds its parent may be (empty: a root).
    parents: ClassVar[dict[str, tuple[str, ...]]] = {}
    #: kinds that may stand without a parent.
    roots: ClassVar[tuple[str, ...]] = ()
    #: "power" or "cooling".
    chain: ClassVar[str] = ""
    #: the per-unit rating field.
    rating_field: ClassVar[str] = ""

    kind: Any

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.key} ({self.kind})"

    @classmethod
    def common_constraints(cls, prefix: str) -> list[models.BaseConstraint]:
        return [
            models.UniqueConstraint(fields=["site", "key"], name=f"{prefix}_unique_key"),
            models.CheckConstraint(condition=Q(units__gte=1) & Q(units__lte=MAX_UNITS),
                                   name=f"{prefix}_units_bounded"),
            models.CheckConstraint(condition=~Q(redundancy="N+1") | Q(units__gte=2),
                                   name=f"{prefix}_n_plus_1_has_a_spare"),
            models.CheckConstraint(condition=~Q(redundancy="2N") | Q(units__gte=2),
                                   name=f"{prefix}_2n_has_two"),
            models.CheckConstraint(condition=Q(parent__isnull=True) | ~Q(parent=models.F("pk")),
                                   name=f"{prefix}_not_own_parent"),
            # The key is a slug (stricter than printable); the database checks at least this.
            printable_constraint("key", f"{prefix}_key_printable"),
            printable_constraint("name", f"{prefix}_name_printable"),
        ]

    def deletion_contents(self) -> dict[str, models.QuerySet]:
        from twin.facility.models.racks import RackFacility

        racks = RackFacility.objects.filter(**{f"{self.chain}_element": self})
        if self.chain == "cooling":
            racks = RackFacility.objects.filter(Q(cooling_element=self) | Q(air_element=self))
        return {"children": type(self).objects.filter(parent=self), "racks": racks}

    @property
    def usable_units(self) -> int:
        return usable_units(self.units, self.redundancy)

    def clean_chain(self, errors: dict[str, Any]) -> None:
        """Units against redundancy; the parent: same site, an allowed kind, no cycle."""
        units, redundancy = self.units, self.redundancy
        if units is not None and redundancy == RedundancyChoices.N_PLUS_1 and units < 2:
            errors["units"] = "N+1 needs at least 2 units (one of them the spare)."
        elif units is not None and redundancy == RedundancyChoices.TWO_N and (
                units < 2 or units % 2):
            errors["units"] = "2N needs an even number of units (two sides, A and B)."
        kind = self.kind
        if kind not in self.parents:
            return  # clean_fields() names the bad choice
        allowed = self.parents[kind]
        if self.parent_id is None:
            if kind not in self.roots:
                where = "power comes from" if self.chain == "power" else "heat goes"
                errors["parent"] = (f"A {kind} needs a parent: one of "
                                    f"{', '.join(allowed)} (where its {where}).")
            return
        parent = self.parent
        if self.site_id and parent.site_id != self.site_id:
            errors["parent"] = "The parent belongs to another site."
        elif not allowed:
            errors["parent"] = f"A {kind} is a root of the {self.chain} chain: it has no parent."
        elif parent.kind not in allowed:
            errors["parent"] = (f"A {kind} cannot hang from a {parent.kind}; its parent must be "
                                f"one of: {', '.join(allowed)}.")
        elif self.pk and self.pk in self._ancestor_ids(parent.pk):
            errors["parent"] = (f"{parent.key} is {self.key} itself or below it: the chain "
                                f"would feed itself.")

    def _ancestor_ids(self, start: int) -> set[int]:
        """``start`` and the elements above it (stops at a repeat: a stored cycle)."""
        seen: set[int] = set()
        current: int | None = start
        manager = type(self).objects
        while current is not None and current not in seen and len(seen) <= MAX_UNITS * 10:
            seen.add(current)
            current = manager.filter(pk=current).values_list("parent_id", flat=True).first()
        return seen
