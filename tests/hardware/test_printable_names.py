"""Names are printable text (issue 22, item 4): a cluster named ``"\\x03Ið¶Bä"`` is
refused with a 400 on ``name``, every user-named field carries the rule, the schema
shows it as a ``pattern``, and the database refuses a write that skips validation."""
from __future__ import annotations

import re

import pytest
from django.apps import apps
from django.db import IntegrityError, transaction
from drf_spectacular.generators import SchemaGenerator

from twin.core.validators import printable

BAD = ["\x03Ið¶Bä", "tab\there", "line\nbreak", "del\x7f", "c1\x85c1", "sep\u2028sep"]
GOOD = ["demo", "Ið¶Bä", "集群-1", "rack 3 (row 2)", "émoji 🚀"]

#: Every field a user names something with.
NAMED = [("hardware", "Cluster", "name"), ("hardware", "SuperNode", "name"),
         ("hardware", "Rack", "name"), ("hardware", "Server", "name"),
         ("hardware", "Server", "hostname"), ("hardware", "NetworkDevice", "name"),
         ("hardware", "NetworkDevice", "model"), ("hardware", "AcceleratorType", "name"),
         ("hardware", "AcceleratorType", "vendor"), ("hardware", "ClusterBuild", "name"),
         ("hardware", "Card", "serial"), ("jobs", "Job", "name"), ("jobs", "Job", "tenant"),
         ("jobs", "Trace", "name"), ("telemetry", "TelemetryAgent", "name"),
         ("telemetry", "TelemetryAgent", "description")]


@pytest.mark.parametrize("name", BAD)
def test_the_api_refuses_a_cluster_name_with_control_characters(admin_client_api, name):
    from twin.hardware.models import Cluster

    response = admin_client_api.post("/api/clusters/", {"name": name}, format="json")
    assert response.status_code == 400, response.content
    assert "printable" in response.json()["name"][0]
    assert not Cluster.objects.exists()


@pytest.mark.parametrize("name", GOOD)
def test_any_script_and_symbol_is_a_fine_name(admin_client_api, name):
    response = admin_client_api.post("/api/clusters/", {"name": name}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["name"] == name


@pytest.mark.parametrize(("app", "model", "field"), NAMED)
def test_every_user_named_field_carries_the_rule(app, model, field):
    assert printable in apps.get_model(app, model)._meta.get_field(field).validators


def test_the_schema_says_so_with_a_pattern():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]
    for component in ("Cluster", "ClusterRequest", "Rack", "Server", "TelemetryAgent"):
        pattern = components[component]["properties"]["name"]["pattern"]
        # The pattern as a client (ECMA, Python) reads it refuses what the server refuses.
        regex = re.compile(pattern)
        assert all(regex.match(good) for good in GOOD), component
        assert not any(regex.match(bad) for bad in BAD), component


@pytest.mark.django_db
def test_the_database_refuses_a_write_that_skips_validation():
    from twin.hardware.models import Cluster

    cluster = Cluster.objects.create(name="ok")
    with pytest.raises(IntegrityError), transaction.atomic():
        Cluster.objects.filter(pk=cluster.pk).update(name="\x03Ið¶Bä")
    cluster.refresh_from_db()
    assert cluster.name == "ok"
