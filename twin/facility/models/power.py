"""The power chain: utility feed → transformers → UPS → PDUs or busways → power shelves.

Each element has a per-unit rating, units and a redundancy (its usable rating is
``rating_kw × usable units``) and a load-dependent efficiency curve: points
``[[load fraction, efficiency], …]`` with the load fraction of the usable rating,
linear between points, clamped at the ends (``simulation.facility.plant.EfficiencyCurve``).
"""
from __future__ import annotations

import math
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from twin.core.bounds import bounded
from twin.facility.choices import PowerKindChoices
from twin.facility.constants import MAX_KW, POWER_PARENTS
from twin.facility.models.chain import ChainElement

__all__ = ["PowerElement", "efficiency_problem"]

#: Efficiency curves are read up to this load fraction (a 2N side briefly carries all).
MAX_LOAD_FRACTION = 2.0


def efficiency_problem(points: Any) -> str | None:
    """Why ``points`` is not an efficiency curve, or None."""
    if not isinstance(points, list) or not points:
        return "Give at least one [load fraction, efficiency] point."
    last = -1.0
    for i, point in enumerate(points):
        if (not isinstance(point, list) or len(point) != 2
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                           and math.isfinite(v) for v in point)):
            return f"Point {i}: give [load fraction, efficiency] as two numbers."
        fraction, efficiency = point
        if not 0.0 <= fraction <= MAX_LOAD_FRACTION:
            return f"Point {i}: the load fraction must be 0 to {MAX_LOAD_FRACTION:g}."
        if fraction <= last:
            return f"Point {i}: load fractions must increase."
        if not 0.5 <= efficiency <= 1.0:
            return (f"Point {i}: an efficiency of {efficiency:g} is not a power converter "
                    f"(0.5 to 1.0).")
        last = fraction
    return None


class PowerElement(ChainElement):
    kind = models.CharField(max_length=12, choices=PowerKindChoices.choices())
    rating_kw = models.FloatField("Rating per unit (kW)", validators=bounded(0.001, MAX_KW, "kW"))
    efficiency = models.JSONField(default=list, blank=True,
                                  help_text="[[load fraction, efficiency], …]; empty: lossless.")

    parents = POWER_PARENTS
    roots = (PowerKindChoices.FEED,)
    chain = "power"
    rating_field = "rating_kw"

    class Meta:
        ordering = ["site", "kind", "key"]
        constraints = [
            *ChainElement.common_constraints("facility_power"),
            models.CheckConstraint(condition=Q(rating_kw__gt=0) & Q(rating_kw__lte=MAX_KW),
                                   name="facility_power_rating_positive"),
            models.CheckConstraint(condition=Q(kind__in=PowerKindChoices.values()),
                                   name="facility_power_kind_known"),
        ]

    def curve(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """``(load fractions, efficiencies)``; ``((1,), (1,))`` when none is given."""
        points = self.efficiency or [[1.0, 1.0]]
        return tuple(float(p[0]) for p in points), tuple(float(p[1]) for p in points)

    def clean(self) -> None:
        errors: dict[str, Any] = {}
        if (problem := efficiency_problem(self.efficiency or [[1.0, 1.0]])) is not None:
            errors["efficiency"] = problem
        self.clean_chain(errors)
        self.check_ratings(errors, {"self": "rating_kw", "power": "parent"})
        if errors:
            raise ValidationError(errors)
