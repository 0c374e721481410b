"""The invariants hold in the database too (writes that skip ``clean()``, like bulk
builders), and the admin shows every facility model."""
from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.test import Client
from django.urls import reverse

from twin.facility.models import CoolingElement, PowerElement, RackFacility, Site


def _refused(create: Any) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        create()


def test_constraints_refuse_what_clean_refuses(plant_world: dict[str, Any]) -> None:
    w = plant_world
    site = w["site"]
    _refused(lambda: PowerElement.objects.create(site=site, key="z", kind="pdu",
                                                 parent=w["ups"], rating_kw=0))
    _refused(lambda: PowerElement.objects.create(site=site, key="z", kind="pdu",
                                                 parent=w["ups"], rating_kw=5, units=1,
                                                 redundancy="2N"))
    _refused(lambda: PowerElement.objects.create(site=site, key="pdu-r0", kind="pdu",
                                                 parent=w["ups"], rating_kw=5))  # key taken
    _refused(lambda: CoolingElement.objects.create(site=site, key="z", kind="cdu",
                                                   parent=w["loop"], capacity_kw=10,
                                                   design_flow_kg_s=0))
    _refused(lambda: CoolingElement.objects.create(site=site, key="z", kind="crah",
                                                   parent=w["loop"], capacity_kw=10,
                                                   fan_kw=-1))
    _refused(lambda: RackFacility.objects.filter(pk=w["net_place"].pk)
             .update(liquid_fraction=0.5))  # an air rack with liquid
    _refused(lambda: Site.objects.filter(pk=site.pk).update(wet_bulb_c=50.0, dry_bulb_c=30.0))
    _refused(lambda: PowerElement.objects.filter(pk=w["pdu"].pk).update(parent=w["pdu"].pk))


def test_admin_lists_and_edits_the_plant(admin_user: Any, plant_world: dict[str, Any]) -> None:
    client = Client()
    client.force_login(admin_user)
    for model in ("site", "powerelement", "coolingelement", "rackfacility"):
        response = client.get(reverse(f"admin:facility_{model}_changelist"))
        assert response.status_code == 200, model
    response = client.get(reverse("admin:facility_powerelement_changelist"), {"kind": "pdu"})
    assert b"pdu-r0" in response.content and b"feed-0" not in response.content
    url = reverse("admin:facility_powerelement_change", args=[plant_world["pdu"].pk])
    assert client.get(url).status_code == 200
    # The rating rule in the admin: a PDU under its racks' draw is refused on the field.
    form = {"site": plant_world["site"].pk, "key": "pdu-r0", "name": "", "kind": "pdu",
            "parent": plant_world["ups"].pk, "units": 2, "redundancy": "2N",
            "rating_kw": 1.0, "efficiency": "[]", "status": "ok"}
    response = client.post(url, form)
    assert response.status_code == 200 and b"would carry" in response.content
    assert PowerElement.objects.get(pk=plant_world["pdu"].pk).rating_kw == 100.0
    # Ticked "allow over budget": saved, with a warning naming the element.
    response = client.post(url, {**form, "allow_over_budget": "on"}, follow=True)
    assert response.status_code == 200
    assert b"Saved over rating: pdu-r0" in response.content
    assert PowerElement.objects.get(pk=plant_world["pdu"].pk).rating_kw == 1.0
