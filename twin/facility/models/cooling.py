"""The cooling chain: racks → technology-cooling loops → CDUs → facility-water loop →
cooling towers, dry coolers or chillers; CRAHs take air-cooled heat to the facility
water or a chiller.

``capacity_kw`` is per unit at design conditions; ``design_flow_kg_s`` the design
flow; ``approach_c`` the design approach of its heat exchanger (a CDU: facility
supply → TCS supply; a tower: wet bulb → supply); ``volume_l`` the coolant it holds
(for transients); pump and fan powers at design flow (affinity laws scale them).
"""
from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from twin.core.bounds import bounded
from twin.facility.choices import CoolingKindChoices as C
from twin.facility.constants import COOLING_PARENTS, COOLING_ROOTS, MAX_KW
from twin.facility.models.chain import ChainElement

__all__ = ["CoolingElement", "FLOWING_KINDS"]

#: Kinds that move water: they need a positive design flow.
FLOWING_KINDS = (C.FACILITY_LOOP, C.CDU, C.TCS_LOOP)


class CoolingElement(ChainElement):
    kind = models.CharField(max_length=14, choices=C.choices())
    capacity_kw = models.FloatField("Capacity per unit (kW)",
                                    validators=bounded(0.001, MAX_KW, "kW"))
    design_flow_kg_s = models.FloatField("Design flow (kg/s)", default=0.0,
                                         validators=bounded(0.0, 1e6, "kg/s"))
    approach_c = models.FloatField("Approach (°C)", default=0.0,
                                   validators=bounded(0.0, 30.0, "°C"))
    supply_setpoint_c = models.FloatField("Supply setpoint (°C)", null=True, blank=True,
                                          validators=bounded(0.0, 70.0, "°C"))
    pump_kw = models.FloatField("Pump power (kW)", default=0.0,
                                validators=bounded(0.0, MAX_KW, "kW"))
    fan_kw = models.FloatField("Fan power (kW)", default=0.0,
                               validators=bounded(0.0, MAX_KW, "kW"))
    volume_l = models.FloatField("Coolant volume (L)", default=0.0,
                                 validators=bounded(0.0, 1e9, "L"))

    parents = COOLING_PARENTS
    roots = COOLING_ROOTS
    chain = "cooling"
    rating_field = "capacity_kw"

    class Meta:
        ordering = ["site", "kind", "key"]
        constraints = [
            *ChainElement.common_constraints("facility_cooling"),
            models.CheckConstraint(condition=Q(capacity_kw__gt=0) & Q(capacity_kw__lte=MAX_KW),
                                   name="facility_cooling_capacity_positive"),
            models.CheckConstraint(condition=Q(design_flow_kg_s__gte=0) & Q(approach_c__gte=0)
                                   & Q(pump_kw__gte=0) & Q(fan_kw__gte=0) & Q(volume_l__gte=0),
                                   name="facility_cooling_figures_not_negative"),
            models.CheckConstraint(condition=~Q(kind__in=FLOWING_KINDS)
                                   | Q(design_flow_kg_s__gt=0),
                                   name="facility_cooling_loops_flow"),
            models.CheckConstraint(condition=Q(kind__in=C.values()),
                                   name="facility_cooling_kind_known"),
        ]

    def clean(self) -> None:
        errors: dict[str, Any] = {}
        if self.kind in FLOWING_KINDS and self.design_flow_kg_s is not None \
                and self.design_flow_kg_s <= 0:
            errors["design_flow_kg_s"] = (f"A {self.kind} moves water: give its design flow "
                                          f"(kg/s, more than 0).")
        self.clean_chain(errors)
        self.check_ratings(errors, {"self": "capacity_kw", "cooling": "parent"})
        if errors:
            raise ValidationError(errors)
