"""A hardware rack's place in the plant: the power element that feeds it, the cooling
element that takes its liquid heat (or, for an air rack, its CRAH), the CRAH that
takes the rest, and its class. A model of this app with a one-to-one to
``hardware.Rack``: the hardware model stays as it is. (Its reverse name is
``plant_place``: ``facility`` is already the rack admin's "Facility (× PUE)" column.)
"""
from __future__ import annotations

from typing import Any

from django.core.exceptions import ObjectDoesNotExist, ValidationError
from django.db import models
from django.db.models import Q

from twin.core.bounds import bounded
from twin.core.models import TimestampedModel
from twin.facility.choices import CoolingKindChoices, RackClassChoices
from twin.facility.constants import LIQUID_RACK_KINDS, POWER_RACK_KINDS
from twin.facility.models.chain import RatedWrite

__all__ = ["RackFacility"]


class RackFacility(RatedWrite, TimestampedModel):
    rack = models.OneToOneField("hardware.Rack", on_delete=models.CASCADE,
                                related_name="plant_place")
    site = models.ForeignKey("facility.Site", on_delete=models.CASCADE, related_name="racks")
    rack_class = models.CharField(max_length=8, choices=RackClassChoices.choices(),
                                  default=RackClassChoices.LIQUID)
    liquid_fraction = models.FloatField(
        default=0.8, validators=bounded(0.0, 1.0),
        help_text="Share of the rack's heat taken by liquid (0 for an air rack).")
    power_element = models.ForeignKey("facility.PowerElement", on_delete=models.CASCADE,
                                      related_name="racks",
                                      help_text="The PDU, busway or power shelf feeding it.")
    cooling_element = models.ForeignKey(
        "facility.CoolingElement", on_delete=models.CASCADE, related_name="racks",
        help_text="Liquid racks: the CDU or technology-cooling loop. Air racks: the CRAH.")
    air_element = models.ForeignKey(
        "facility.CoolingElement", on_delete=models.SET_NULL, null=True, blank=True,
        related_name="air_racks", help_text="The CRAH taking a liquid rack's air share.")

    class Meta:
        ordering = ["site", "rack"]
        verbose_name = "rack in the plant"
        verbose_name_plural = "racks in the plant"
        constraints = [
            models.CheckConstraint(condition=Q(liquid_fraction__gte=0)
                                   & Q(liquid_fraction__lte=1),
                                   name="facility_rack_liquid_fraction_bounded"),
            models.CheckConstraint(
                condition=(Q(rack_class=RackClassChoices.AIR) & Q(liquid_fraction=0))
                | (~Q(rack_class=RackClassChoices.AIR) & Q(liquid_fraction__gt=0)),
                name="facility_rack_class_matches_liquid"),
        ]

    def __str__(self) -> str:
        return f"{self.rack.name if self.rack_id else '?'} ({self.rack_class})"

    def clean(self) -> None:
        errors: dict[str, Any] = {}
        site = self._site()
        if self.rack_id and site is not None and self.rack.cluster_id != site.cluster_id:
            errors["rack"] = "The rack belongs to another cluster than the site's."
        liquid = self.rack_class != RackClassChoices.AIR
        fraction = self.liquid_fraction
        if fraction is not None:
            if not liquid and fraction != 0:
                errors["liquid_fraction"] = "An air rack takes no heat by liquid: set 0."
            elif liquid and fraction <= 0:
                errors["liquid_fraction"] = ("A liquid-cooled rack takes some heat by liquid: "
                                             "set its share (0.8 for the seeds' 40 kW rack).")
        if self.power_element_id:
            power = self.power_element
            if site is not None and power.site_id != site.pk:
                errors["power_element"] = "The power element belongs to another site."
            elif power.kind not in POWER_RACK_KINDS:
                errors["power_element"] = (f"A rack is fed by a {', '.join(POWER_RACK_KINDS)}, "
                                           f"not a {power.kind}.")
        if self.cooling_element_id:
            cooling = self.cooling_element
            want = LIQUID_RACK_KINDS if liquid else (CoolingKindChoices.CRAH,)
            if site is not None and cooling.site_id != site.pk:
                errors["cooling_element"] = "The cooling element belongs to another site."
            elif cooling.kind not in want:
                errors["cooling_element"] = (
                    f"A liquid-cooled rack needs a CDU or technology-cooling loop, not a "
                    f"{cooling.kind}." if liquid else
                    f"An air rack is cooled by a CRAH, not a {cooling.kind}.")
        if self.air_element_id:
            air = self.air_element
            if site is not None and air.site_id != site.pk:
                errors["air_element"] = "The CRAH belongs to another site."
            elif air.kind != CoolingKindChoices.CRAH:
                errors["air_element"] = f"The air share goes to a CRAH, not a {air.kind}."
            elif not liquid:
                errors["air_element"] = "An air rack's CRAH is its cooling element; leave empty."
        self.check_ratings(errors, {"power": "power_element", "cooling": "cooling_element"})
        if errors:
            raise ValidationError(errors)

    def _site(self):  # type: ignore[no-untyped-def]
        try:
            return self.site if self.site_id else None
        except ObjectDoesNotExist:
            return None
