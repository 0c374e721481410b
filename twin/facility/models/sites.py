"""A site: where a cluster's plant stands (one per cluster)."""
from __future__ import annotations

import math
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q

from twin.core.bounds import bounded
from twin.core.deletion import GuardedDeletion
from twin.core.models import TimestampedModel
from twin.core.validators import printable, printable_constraint
from twin.facility.constants import MAX_KW

__all__ = ["Site"]

#: Design temperatures outside this range (°C) are no place on Earth.
MIN_C, MAX_C = -60.0, 60.0


class Site(GuardedDeletion, TimestampedModel):
    """The site of one cluster: location, design dry-bulb and wet-bulb temperatures (they
    drive heat rejection), the utility contract, and an optional weather series
    (``[[seconds from start, dry bulb °C, wet bulb °C], …]``, seconds increasing)."""

    cluster = models.OneToOneField("hardware.Cluster", on_delete=models.CASCADE,
                                   related_name="facility_site")
    name = models.CharField(max_length=100, validators=[printable])
    location = models.CharField(max_length=200, blank=True, validators=[printable])
    dry_bulb_c = models.FloatField("Design dry bulb (°C)", default=35.0,
                                   validators=bounded(MIN_C, MAX_C, "°C"))
    wet_bulb_c = models.FloatField("Design wet bulb (°C)", default=24.0,
                                   validators=bounded(MIN_C, MAX_C, "°C"))
    contract_kw = models.FloatField("Utility contract (kW)", null=True, blank=True,
                                    validators=bounded(0.001, MAX_KW, "kW"),
                                    help_text="Empty: no contract limit.")
    weather = models.JSONField(default=list, blank=True,
                               help_text="[[seconds, dry bulb °C, wet bulb °C], …]")

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["name"], name="facility_site_unique_name"),
            models.CheckConstraint(condition=Q(wet_bulb_c__lte=F("dry_bulb_c")),
                                   name="facility_site_wet_bulb_at_most_dry"),
            models.CheckConstraint(condition=Q(contract_kw__isnull=True) | Q(contract_kw__gt=0),
                                   name="facility_site_contract_positive"),
            models.CheckConstraint(condition=Q(dry_bulb_c__gte=MIN_C) & Q(dry_bulb_c__lte=MAX_C)
                                   & Q(wet_bulb_c__gte=MIN_C) & Q(wet_bulb_c__lte=MAX_C),
                                   name="facility_site_temperatures_bounded"),
            printable_constraint("name", "facility_site_name_printable"),
            printable_constraint("location", "facility_site_location_printable"),
        ]

    def __str__(self) -> str:
        return self.name

    def deletion_contents(self) -> dict[str, models.QuerySet]:
        from twin.facility.models import CoolingElement, PowerElement, RackFacility

        return {"power_elements": PowerElement.objects.filter(site=self),
                "cooling_elements": CoolingElement.objects.filter(site=self),
                "racks": RackFacility.objects.filter(site=self)}

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if (self.wet_bulb_c is not None and self.dry_bulb_c is not None
                and self.wet_bulb_c > self.dry_bulb_c):
            errors["wet_bulb_c"] = (f"The wet bulb ({self.wet_bulb_c:g} °C) cannot be above "
                                    f"the dry bulb ({self.dry_bulb_c:g} °C).")
        if (problem := weather_problem(self.weather)) is not None:
            errors["weather"] = problem
        if errors:
            raise ValidationError(errors)


def weather_problem(series: Any) -> str | None:
    """Why ``series`` is not a weather series, or None."""
    if not isinstance(series, list):
        return "Give a list of [seconds, dry bulb °C, wet bulb °C] points."
    last = -math.inf
    for i, point in enumerate(series):
        if (not isinstance(point, list) or len(point) != 3
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                           and math.isfinite(v) for v in point)):
            return f"Point {i}: give [seconds, dry bulb °C, wet bulb °C] as three numbers."
        t, dry, wet = point
        if t <= last:
            return f"Point {i}: seconds must increase ({t:g} after {last:g})."
        if not (MIN_C <= wet <= dry <= MAX_C):
            return (f"Point {i}: need {MIN_C:g} <= wet bulb <= dry bulb <= {MAX_C:g} °C "
                    f"(got dry {dry:g}, wet {wet:g}).")
        last = t
    return None
