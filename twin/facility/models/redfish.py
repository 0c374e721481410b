"""Where the Redfish poller reads the plant (``twin.facility.redfish``), stored as data.

A ``RedfishSource`` is one Redfish service (a CDU's or a PDU's management controller, or
an aggregator serving many) on a site; each ``RedfishBinding`` maps one facility element
to the Redfish resource that measures it: a CDU to a ``CoolingUnit``
(``/redfish/v1/ThermalEquipment/CDUs/<id>``), a feed, PDU, busway or power shelf to a
``PowerDistribution`` (``/redfish/v1/PowerEquipment/RackPDUs/<id>``,
``…/PowerShelves/<id>``, ``…/FloorPDUs/<id>``). The password is never stored: the row
names the environment variable of the poller's process that holds it.
"""
from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from twin.core.bounds import bounded
from twin.core.models import TimestampedModel

__all__ = ["RedfishBinding", "RedfishSource"]


class RedfishSource(TimestampedModel):
    """One Redfish service the poller reads every ``interval_s``."""

    site = models.ForeignKey("facility.Site", on_delete=models.CASCADE,
                             related_name="redfish_sources")
    name = models.SlugField(max_length=64, help_text="Unique on the site (\"cdu-bmc-a\").")
    base_url = models.URLField(max_length=300, help_text="The service's root, e.g. "
                               "https://cdu-a.mgmt:443 (the /redfish/v1/ tree below it).")
    username = models.CharField(max_length=100, blank=True,
                                help_text="Blank: the service is read without logging in.")
    password_env = models.CharField(
        max_length=100, blank=True, help_text="The environment variable holding the "
        "password in the poller's process (never the password itself).")
    interval_s = models.FloatField("Poll interval (s)", default=30.0,
                                   validators=bounded(1.0, 3600.0, "s"))
    timeout_s = models.FloatField("Request timeout (s)", default=5.0,
                                  validators=bounded(0.1, 120.0, "s"))
    enabled = models.BooleanField(default=True)
    last_polled = models.DateTimeField(null=True, blank=True, editable=False)
    last_error = models.CharField(max_length=500, blank=True, editable=False)
    values_refused = models.PositiveBigIntegerField(
        default=0, editable=False, help_text="Readings refused since the source was added: "
        "not a number, in the wrong units, out of range or over the element's physical "
        "bound (twin.facility.redfish).")

    class Meta:
        ordering = ["site", "name"]
        constraints = [
            models.UniqueConstraint(fields=["site", "name"], name="facility_redfish_source_name"),
            models.CheckConstraint(condition=Q(interval_s__gte=1.0) & Q(interval_s__lte=3600.0)
                                   & Q(timeout_s__gt=0.0) & Q(timeout_s__lte=120.0),
                                   name="facility_redfish_source_times_bounded"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.base_url})"

    def clean(self) -> None:
        if self.username and not self.password_env:
            raise ValidationError({"password_env": "A user logs in with a password: name the "
                                                   "environment variable that holds it."})


class RedfishBinding(TimestampedModel):
    """One facility element ↔ the Redfish resource (URI under the source) that measures it."""

    source = models.ForeignKey(RedfishSource, on_delete=models.CASCADE,
                               related_name="bindings")
    cooling_element = models.ForeignKey("facility.CoolingElement", on_delete=models.CASCADE,
                                        null=True, blank=True, related_name="redfish_bindings")
    power_element = models.ForeignKey("facility.PowerElement", on_delete=models.CASCADE,
                                      null=True, blank=True, related_name="redfish_bindings")
    uri = models.CharField(max_length=300, help_text="The CoolingUnit or PowerDistribution "
                           "resource, e.g. /redfish/v1/ThermalEquipment/CDUs/1.")

    class Meta:
        ordering = ["source", "uri"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(cooling_element__isnull=False) & Q(power_element__isnull=True))
                | (Q(cooling_element__isnull=True) & Q(power_element__isnull=False)),
                name="facility_redfish_binding_one_element"),
            models.UniqueConstraint(fields=["source", "cooling_element"],
                                    name="facility_redfish_binding_cooling_once"),
            models.UniqueConstraint(fields=["source", "power_element"],
                                    name="facility_redfish_binding_power_once"),
        ]

    def __str__(self) -> str:
        element = self.cooling_element or self.power_element
        return f"{element} ← {self.uri}"

    @property
    def chain(self) -> str:
        return "cooling" if self.cooling_element_id else "power"

    def clean(self) -> None:
        from twin.facility.readings import POWER_KINDS_READ

        errors: dict[str, str] = {}
        if bool(self.cooling_element_id) == bool(self.power_element_id):
            errors["__all__"] = "Bind exactly one element: a CDU or a power element."
        if not self.uri.startswith("/redfish/v1/"):
            errors["uri"] = "A Redfish resource path, starting /redfish/v1/."
        site_id = self.source.site_id if self.source_id else None
        if self.cooling_element_id:
            el = self.cooling_element
            if el.kind != "cdu":
                errors["cooling_element"] = f"{el.key} is a {el.kind}: only a CDU has readings."
            elif site_id is not None and el.site_id != site_id:
                errors["cooling_element"] = f"{el.key} is on another site than the source."
        if self.power_element_id:
            pel = self.power_element
            if pel.kind not in POWER_KINDS_READ:
                errors["power_element"] = (f"{pel.key} is a {pel.kind}: readings are for a "
                                           f"feed, PDU, busway or power shelf.")
            elif site_id is not None and pel.site_id != site_id:
                errors["power_element"] = f"{pel.key} is on another site than the source."
        if errors:
            raise ValidationError(errors)
