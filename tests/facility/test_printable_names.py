"""The facility's names are printable text (issue 22, item 4, as in
tests/hardware/test_printable_names.py): a site, a power or cooling element named with a
control character is refused with a 400 on that field, every user-named field carries the
rule, the schema shows it as a ``pattern``, and the database refuses a write that skips
validation."""
from __future__ import annotations

import re
from typing import Any

import pytest
from django.apps import apps
from django.core.validators import validate_slug
from django.db import IntegrityError, transaction
from drf_spectacular.generators import SchemaGenerator

from twin.core.validators import printable

BAD = ["\x03Ið¶Bä", "tab\there", "line\nbreak", "del\x7f", "c1\x85c1", "sep\u2028sep"]
GOOD = ["hall", "Ið¶Bä", "机房-1", "row 3 (hall 2)", "émoji 🚀"]

#: Every field a user names something with in the facility app.
NAMED = [("facility", "Site", "name"), ("facility", "Site", "location"),
         ("facility", "PowerElement", "name"), ("facility", "CoolingElement", "name")]
#: Keys are slugs (stricter than printable: the slug validator refuses control characters);
#: the database still checks them as printable.
KEYS = [("facility", "PowerElement", "key"), ("facility", "CoolingElement", "key")]


def _site_body(cluster_pk: int, **fields: Any) -> dict[str, Any]:
    return {"cluster": cluster_pk, "name": "hall", "location": "Oslo", **fields}


@pytest.mark.parametrize("field", ["name", "location"])
@pytest.mark.parametrize("value", BAD)
def test_the_api_refuses_a_site_with_control_characters(admin_client_api, field, value):
    from twin.facility.models import Site
    from twin.hardware.models import Cluster

    cluster = Cluster.objects.create(name="c")
    response = admin_client_api.post("/api/facility/sites/",
                                     _site_body(cluster.pk, **{field: value}), format="json")
    assert response.status_code == 400, response.content
    assert "printable" in response.json()[field][0]
    assert not Site.objects.exists()


@pytest.mark.parametrize("value", GOOD)
def test_any_script_and_symbol_is_a_fine_site_name(admin_client_api, value):
    from twin.hardware.models import Cluster

    cluster = Cluster.objects.create(name="c")
    response = admin_client_api.post("/api/facility/sites/",
                                     _site_body(cluster.pk, name=value, location=value),
                                     format="json")
    assert response.status_code == 201, response.content
    assert (response.json()["name"], response.json()["location"]) == (value, value)


@pytest.mark.parametrize(("path", "body"), [
    ("/api/facility/power/", {"key": "feed-0", "kind": "feed", "rating_kw": 100.0}),
    ("/api/facility/cooling/", {"key": "ct-0", "kind": "cooling_tower",
                                "capacity_kw": 100.0}),
])
@pytest.mark.parametrize("value", BAD)
def test_the_api_refuses_an_element_name_with_control_characters(admin_client_api, path,
                                                                  body, value):
    from twin.facility.models import Site
    from twin.hardware.models import Cluster

    site = Site.objects.create(cluster=Cluster.objects.create(name="c"), name="hall")
    response = admin_client_api.post(path, {"site": site.pk, "name": value, **body},
                                     format="json")
    assert response.status_code == 400, response.content
    assert "printable" in response.json()["name"][0]
    assert not site.powerelements.exists() and not site.coolingelements.exists()


@pytest.mark.parametrize(("app", "model", "field"), NAMED)
def test_every_user_named_facility_field_carries_the_rule(app, model, field):
    assert printable in apps.get_model(app, model)._meta.get_field(field).validators


@pytest.mark.parametrize(("app", "model", "field"), KEYS)
def test_keys_stay_slugs(app, model, field):
    assert validate_slug in apps.get_model(app, model)._meta.get_field(field).validators


def test_the_schema_says_so_with_a_pattern():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]
    for component, field in [("Site", "name"), ("Site", "location"), ("SiteRequest", "name"),
                             ("PowerElement", "name"), ("CoolingElement", "name")]:
        schema_field = components[component]["properties"][field]
        # A field that may be blank is ``oneOf: [the pattern, maxLength 0]``.
        pattern = next(s["pattern"] for s in schema_field.get("oneOf", [schema_field])
                       if "pattern" in s)
        regex = re.compile(pattern)
        assert all(regex.match(good) for good in GOOD), component
        assert not any(regex.match(bad) for bad in BAD), component


@pytest.mark.django_db
@pytest.mark.parametrize(("model", "field"), [(m, f) for _, m, f in NAMED + KEYS])
def test_the_database_refuses_a_write_that_skips_validation(model, field):
    from twin.facility.models import CoolingElement, PowerElement, Site
    from twin.hardware.models import Cluster

    site = Site.objects.create(cluster=Cluster.objects.create(name="c"), name="hall")
    rows = {"Site": site,
            "PowerElement": PowerElement.objects.create(site=site, key="feed-0", kind="feed",
                                                        rating_kw=100.0),
            "CoolingElement": CoolingElement.objects.create(site=site, key="ct-0",
                                                            kind="cooling_tower",
                                                            capacity_kw=100.0)}
    row = rows[model]
    before = getattr(row, field)
    with pytest.raises(IntegrityError), transaction.atomic():
        type(row).objects.filter(pk=row.pk).update(**{field: "\x03Ið¶Bä"})
    row.refresh_from_db()
    assert getattr(row, field) == before
