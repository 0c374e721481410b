"""No existence leak through list filters (issue 22, item 7): for a user granted cluster A
only, a filter naming another tenant's cluster (or its rack, supernode, server) answers
exactly as one naming an id that does not exist, and the admin's list filters do not
offer another tenant's clusters."""
from __future__ import annotations

from typing import Any

import pytest
from django.db.models import Max

from tests.core.test_access import admin_client, api
from tests.core.test_access import world as world  # noqa: F401  (the fixture, shared)
from twin.hardware.models import Cluster, Rack, Server, SuperNode

# (list, parameter, what it names: a model and the world-half key)
FILTERS = [
    ("/api/racks/", "cluster", Cluster, "cluster"),
    ("/api/racks/", "supernode", SuperNode, "supernode"),
    ("/api/servers/", "cluster", Cluster, "cluster"),
    ("/api/servers/", "rack", Rack, "rack"),
    ("/api/cards/", "cluster", Cluster, "cluster"),
    ("/api/cards/", "rack", Rack, "rack"),
    ("/api/cards/", "server", Server, "server"),
    ("/api/supernodes/", "cluster", Cluster, "cluster"),
    ("/api/devices/", "cluster", Cluster, "cluster"),
    ("/api/links/", "cluster", Cluster, "cluster"),
    ("/api/jobs/", "cluster", Cluster, "cluster"),
    ("/api/scenarios/", "cluster", Cluster, "cluster"),
    ("/api/telemetry/alerts/", "cluster", Cluster, "cluster"),
    ("/api/facility/sites/", "cluster", Cluster, "cluster"),
]


def missing_id(model: Any) -> int:
    return (model.objects.aggregate(top=Max("pk"))["top"] or 0) + 1000


@pytest.mark.parametrize(("path", "param", "model", "key"), FILTERS)
def test_another_tenants_id_answers_as_a_missing_id(world, path, param, model, key):
    client = api(world["changer"])
    theirs = client.get(path, {param: world["b"][key].pk})
    missing = client.get(path, {param: missing_id(model)})
    assert theirs.status_code == missing.status_code, (theirs.content, missing.content)
    assert theirs.json() == missing.json()
    # The filter does filter: the tenant's own object answers its rows.
    mine = client.get(path, {param: world["a"][key].pk}) if key in world["a"] else None
    assert mine is None or mine.status_code == 200


# (changelist, what another tenant's object shows as in its sidebar)
SIDEBARS = [
    ("/admin/hardware/rack/", ["other-tenant", "b-sn0"]),
    ("/admin/hardware/supernode/", ["other-tenant"]),
    ("/admin/hardware/server/", ["other-tenant", "b-r0", "b-sn0"]),
    ("/admin/hardware/card/", ["other-tenant", "b-sn0"]),
    ("/admin/hardware/networkdevice/", ["other-tenant"]),
    ("/admin/jobs/job/", ["other-tenant"]),
]


@pytest.mark.parametrize(("path", "names"), SIDEBARS)
def test_the_admins_list_filters_do_not_offer_another_tenants_objects(world, admin_user,
                                                                       path, names):
    mine = admin_client(world["changer"]).get(path)
    assert mine.status_code == 200
    page = mine.content.decode()
    assert world["a"]["cluster"].name in page  # A is offered …
    assert not [name for name in names if name in page]  # … B and its parts are not
    # An unrestricted user is offered them all (the filter itself is unchanged).
    everything = admin_client(admin_user).get(path).content.decode()
    assert all(name in everything for name in names)


def test_the_admin_filter_on_another_tenants_cluster_answers_as_a_missing_one(world):
    client = admin_client(world["changer"])
    theirs = client.get("/admin/hardware/rack/", {"cluster": world["b"]["cluster"].pk})
    missing = client.get("/admin/hardware/rack/", {"cluster": missing_id(Cluster)})
    assert theirs.status_code == missing.status_code == 200
    for page in (theirs, missing):
        assert "0 racks" in page.content.decode()
