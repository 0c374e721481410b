"""Choice sets of the facility (value, label, colour: the admin badges reuse them)."""
from __future__ import annotations

from simulation.facility.plant import COOLING_KINDS, POWER_KINDS, REDUNDANCY
from twin.core.choices import ChoiceSet

__all__ = ["CoolingKindChoices", "ElementStatusChoices", "PowerKindChoices", "RackClassChoices",
           "RedundancyChoices"]


class PowerKindChoices(ChoiceSet):
    """Power-chain parts, upstream to downstream (``simulation.facility.plant.POWER_KINDS``)."""

    FEED, TRANSFORMER, UPS, PDU, BUSWAY, POWER_SHELF = POWER_KINDS
    CHOICES = [
        (FEED, "Utility feed", "purple"),
        (TRANSFORMER, "Transformer", "blue"),
        (UPS, "UPS", "teal"),
        (PDU, "PDU", "green"),
        (BUSWAY, "Busway", "green"),
        (POWER_SHELF, "Power shelf", "gray"),
    ]


class CoolingKindChoices(ChoiceSet):
    """Cooling-chain parts (``simulation.facility.plant.COOLING_KINDS``)."""

    COOLING_TOWER, DRY_COOLER, CHILLER, FACILITY_LOOP, CDU, TCS_LOOP, CRAH = COOLING_KINDS
    CHOICES = [
        (COOLING_TOWER, "Cooling tower", "purple"),
        (DRY_COOLER, "Dry cooler", "purple"),
        (CHILLER, "Chiller", "blue"),
        (FACILITY_LOOP, "Facility water loop", "teal"),
        (CDU, "CDU", "green"),
        (TCS_LOOP, "Technology-cooling loop", "green"),
        (CRAH, "CRAH (air)", "gray"),
    ]


class RedundancyChoices(ChoiceSet):
    """How many of an element's units may carry the load (``plant.REDUNDANCY``)."""

    N, N_PLUS_1, TWO_N = REDUNDANCY
    CHOICES = [(N, "N (all units)", "orange"), (N_PLUS_1, "N+1 (all but one)", "green"),
               (TWO_N, "2N (half)", "blue")]


class RackClassChoices(ChoiceSet):
    """What cools a rack and how much it may draw (see ``constants.RACK_CLASSES``)."""

    AIR = "air"
    LIQUID = "liquid"
    NVL72 = "nvl72"
    CHOICES = [(AIR, "Air (15-40 kW)", "gray"), (LIQUID, "Liquid 40 kW (the seeds')", "blue"),
               (NVL72, "NVL72-class liquid (120-140 kW)", "purple")]


class ElementStatusChoices(ChoiceSet):
    """The live state of a power or cooling element (the words of the cards' status).

    ``failed`` and ``maintenance`` take the whole element out of service in the live
    plant (``OUT_OF_SERVICE``); ``degraded`` keeps it running below its rating: the units
    it lost are ``units_failed``, and when it counts none, one unit (never its last:
    ``simulation.facility.validate.units_out``); redundancy decides what the rest carry."""

    OK = "ok"
    DEGRADED = "degraded"
    FAILED = "failed"
    MAINTENANCE = "maintenance"
    CHOICES = [(OK, "OK", "green"), (DEGRADED, "Degraded", "orange"),
               (FAILED, "Failed", "red"), (MAINTENANCE, "Maintenance", "gray")]
    OUT_OF_SERVICE = (FAILED, MAINTENANCE)
