"""Per-cluster access (``twin.core.access``) over REST, the admin and scenario runs.

The world: the tiny cluster ("A") and a second cluster ("B") with a supernode, a
rack, a server, a card, a device, a link and a scenario run. A *tenant* holds
every hardware, scenario and telemetry permission and a grant on A only; another
tenant's objects must then look as if they did not exist (404, left out of lists,
400 "does not exist" in a body), and a cluster granted "see" refuses writes (403).
"""
from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from twin.hardware.models import (
    Card,
    Cluster,
    ClusterBuild,
    ClusterGrant,
    Link,
    NetworkDevice,
    Rack,
    Server,
    SuperNode,
)
from twin.scenarios.models import ScenarioRun
from twin.telemetry.models import Alert, TelemetryAgent

APPS = ("hardware", "scenarios", "telemetry", "jobs")


def other_cluster(h100: Any) -> dict[str, Any]:
    cluster = Cluster.objects.create(name="other-tenant")
    sn = SuperNode.objects.create(cluster=cluster, name="b-sn0", index=0, fabric="torus3d",
                                  card_count=2, dim_x=2, dim_y=1, dim_z=1, link_gbps=400,
                                  link_latency_ns=150)
    rack = Rack.objects.create(cluster=cluster, supernode=sn, name="b-r0", row=0, slot=0)
    server = Server.objects.create(rack=rack, supernode=sn, name="b-s0", hostname="b-node0",
                                   cards_per_server=2, overhead_w=1000)
    cards = [Card.objects.create(supernode=sn, server=server, accelerator=h100, index=i,
                                 slot=i, x=i, y=0, z=0, serial=f"B-{i}",
                                 uuid=uuid.UUID(int=1000 + i)) for i in range(2)]
    device = NetworkDevice.objects.create(cluster=cluster, rack=rack, kind="leaf",
                                          name="b-leaf", ports=64, port_gbps=400, power_w=100)
    link = Link.objects.create(cluster=cluster, a_card=cards[0], b_card=cards[1],
                               kind="scale_up", bandwidth_gbps=400, latency_ns=150)
    run = ScenarioRun.objects.create(kind="topology", status="succeeded", cluster=cluster)
    return {"cluster": cluster, "supernode": sn, "rack": rack, "server": server,
            "card": cards[0], "device": device, "link": link, "run": run}


def tenant(name: str, **grants: Cluster) -> User:
    """A staff user with every permission of the twin's apps and the given grants
    (``see=cluster`` / ``change=cluster``)."""
    user = User.objects.create_user(name, f"{name}@example.com", f"{name}-pass-123",
                                    is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label__in=APPS))
    for level, cluster in grants.items():
        ClusterGrant.objects.create(user=user, cluster=cluster, level=level)
    return User.objects.get(pk=user.pk)


def api(user: User) -> APIClient:
    """A client authenticated by the user's real API token (grants follow the token)."""
    token, _ = Token.objects.get_or_create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def world(tiny_cluster) -> dict[str, Any]:
    a = tiny_cluster
    b = other_cluster(a["h100"])
    run_a = ScenarioRun.objects.create(kind="topology", status="succeeded", cluster=a["cluster"])
    return {"a": a, "b": b, "run_a": run_a,
            "changer": tenant("changer", change=a["cluster"]),
            "watcher": tenant("watcher", see=a["cluster"])}


# (URL prefix, key of the object in a world half)
DETAIL = [
    ("/api/clusters/", "cluster"),
    ("/api/supernodes/", "supernode"),
    ("/api/racks/", "rack"),
    ("/api/servers/", "server"),
    ("/api/cards/", "card"),
    ("/api/devices/", "device"),
    ("/api/links/", "link"),
]


def ids(response: Any) -> set[int]:
    assert response.status_code == 200, response.content
    return {row["id"] for row in response.json()["results"]}


# --- today's behaviour without grants ---------------------------------------------

def test_a_user_without_grant_rows_sees_and_changes_every_cluster(world):
    user = tenant("unrestricted")
    client = api(user)
    assert ids(client.get("/api/clusters/")) == {world["a"]["cluster"].pk,
                                                 world["b"]["cluster"].pk}
    rack = world["b"]["rack"]
    assert client.patch(f"/api/racks/{rack.pk}/", {"name": "renamed"},
                        format="json").status_code == 200


def test_a_superuser_sees_every_cluster_even_with_grant_rows(world, admin_user):
    ClusterGrant.objects.create(user=admin_user, cluster=world["a"]["cluster"], level="see")
    assert world["b"]["cluster"].pk in ids(api(admin_user).get("/api/clusters/"))


# --- reads: another tenant's objects do not exist --------------------------------

@pytest.mark.parametrize(("prefix", "key"), DETAIL)
def test_another_tenants_objects_are_left_out_of_lists_and_404(world, prefix, key):
    client = api(world["watcher"])
    a = world["a"]
    mine = {"card": a["cards"][0], "device": a["leaf"], "link": a["links"][0]}.get(key) \
        or a[key]
    theirs = world["b"][key]
    listed = client.get(prefix)
    assert listed.status_code == 200
    got = {row["id"] for row in listed.json()["results"]}
    assert mine.pk in got and theirs.pk not in got
    assert client.get(f"{prefix}{mine.pk}/").status_code == 200
    missing = client.get(f"{prefix}{theirs.pk}/")
    assert missing.status_code == 404
    assert missing.json() == client.get(f"{prefix}999999/").json()  # indistinguishable


@pytest.mark.parametrize("suffix", ["summary/", "floor/", "allocations/",
                                    "route/?src=1&dst=2"])
def test_cluster_actions_of_another_tenant_are_404(world, suffix):
    client = api(world["watcher"])
    assert client.get(f"/api/clusters/{world['b']['cluster'].pk}/{suffix}").status_code == 404
    if suffix != "route/?src=1&dst=2":
        assert client.get(f"/api/clusters/{world['a']['cluster'].pk}/{suffix}").status_code \
            == 200


def test_live_views_of_another_tenant_are_404(world):
    client = api(world["watcher"])
    b = world["b"]
    assert client.get(f"/api/telemetry/clusters/{b['cluster'].pk}/").status_code == 404
    assert client.get(f"/api/telemetry/clusters/{b['cluster'].pk}/rollup/").status_code == 404
    assert client.get(f"/api/telemetry/cards/{b['card'].pk}/").status_code == 404
    browser = Client()
    browser.force_login(world["watcher"])
    for what in ("layout", "coolant", "caps"):  # what agents and the dashboard read live
        assert browser.get(f"/api/telemetry/clusters/{b['cluster'].pk}/{what}/").status_code \
            == 404, what
    browser.force_login(tenant("unrestricted"))  # the same URLs exist for a user without grants
    for what in ("layout", "coolant", "caps"):
        assert browser.get(f"/api/telemetry/clusters/{b['cluster'].pk}/{what}/").status_code \
            == 200, what


def test_alerts_and_agents_of_another_tenant_are_left_out(world):
    import datetime as dt

    b = world["b"]
    alert = Alert.objects.create(cluster=b["cluster"], rule="util_drop", severity="warning",
                                 level="card", subject=f"card:{b['card'].pk}", card=b["card"],
                                 message="x", started=dt.datetime.now(dt.UTC))
    agent, _ = TelemetryAgent.issue(b["cluster"], "b-agent")
    client = api(world["watcher"])
    assert ids(client.get("/api/telemetry/alerts/")) == set()
    assert client.get(f"/api/telemetry/alerts/{alert.pk}/").status_code == 404
    assert agent.pk not in ids(client.get("/api/telemetry/agents/"))
    assert client.post(f"/api/telemetry/agents/{agent.pk}/rotate-token/").status_code == 404


# --- writes ---------------------------------------------------------------------

def test_writes_on_a_cluster_one_may_only_see_are_403_and_change_nothing(world):
    client = api(world["watcher"])
    rack = world["a"]["rack"]
    response = client.patch(f"/api/racks/{rack.pk}/", {"name": "renamed"}, format="json")
    assert response.status_code == 403, response.content
    assert "may see cluster" in response.json()["detail"]
    assert client.delete(f"/api/links/{world['a']['links'][0].pk}/").status_code == 403
    rack.refresh_from_db()
    assert rack.name == "r0" and Link.objects.filter(pk=world["a"]["links"][0].pk).exists()
    # the same user with "change" may
    ClusterGrant.objects.filter(user=world["watcher"]).update(level="change")
    assert api(User.objects.get(pk=world["watcher"].pk)).patch(
        f"/api/racks/{rack.pk}/", {"name": "renamed"}, format="json").status_code == 200


def test_writes_on_another_tenants_objects_are_404(world):
    client = api(world["changer"])
    b = world["b"]
    assert client.patch(f"/api/racks/{b['rack'].pk}/", {"name": "x"},
                        format="json").status_code == 404
    assert client.delete(f"/api/clusters/{b['cluster'].pk}/?cascade=true&confirm="
                         f"{b['cluster'].name}").status_code == 404
    assert Cluster.objects.filter(pk=b["cluster"].pk).exists()


def test_a_reference_to_another_tenants_cluster_reads_as_missing(world):
    client = api(world["changer"])
    body = {"name": "r9", "row": 5, "slot": 5, "power_budget_w": 40_000}
    theirs = client.post("/api/racks/", {**body, "cluster": world["b"]["cluster"].pk},
                         format="json")
    nowhere = client.post("/api/racks/", {**body, "cluster": 999_999}, format="json")
    # Both read as a missing row: a conflict with the stored data (409, as docs/api.md says).
    assert theirs.status_code == nowhere.status_code == 409
    assert theirs.json() == nowhere.json() | {"cluster": theirs.json()["cluster"]}
    assert set(theirs.json()) == {"detail", "cluster"}
    assert "does not exist" in theirs.json()["cluster"][0]
    assert not Rack.objects.filter(name="r9").exists()
    mine = client.post("/api/racks/", {**body, "cluster": world["a"]["cluster"].pk},
                       format="json")
    assert mine.status_code == 201, mine.content


def test_a_server_in_another_tenants_rack_reads_as_missing(world):
    client = api(world["changer"])
    body = {"name": "s9", "hostname": "s9", "position": 30, "cards_per_server": 8,
            "overhead_w": 1000, "rack": world["b"]["rack"].pk}
    response = client.post("/api/servers/", body, format="json")
    assert response.status_code == 409  # as a rack that does not exist
    assert "rack" in response.json() and "does not exist" in response.json()["rack"][0]
    assert not Server.objects.filter(name="s9").exists()


def test_creating_in_a_cluster_one_may_only_see_is_403_and_kept_nowhere(world):
    client = api(world["watcher"])
    body = {"name": "r9", "row": 5, "slot": 5, "power_budget_w": 40_000,
            "cluster": world["a"]["cluster"].pk}
    response = client.post("/api/racks/", body, format="json")
    assert response.status_code == 403, response.content
    assert not Rack.objects.filter(name="r9").exists()  # the write's transaction rolled back


def test_a_restricted_user_cannot_create_build_or_replace_a_cluster(world):
    client = api(world["changer"])
    response = client.post("/api/clusters/", {"name": "mine"}, format="json")
    assert response.status_code == 403
    assert not Cluster.objects.filter(name="mine").exists()
    response = client.post("/api/builds/", {"preset": "seed-512", "replace": True,
                                            "name": world["b"]["cluster"].name}, format="json")
    assert response.status_code == 403, response.content
    assert not ClusterBuild.objects.exists()


# --- scenario runs ---------------------------------------------------------------

def test_scenario_runs_of_another_tenant_are_left_out_and_404(world):
    client = api(world["watcher"])
    listed = ids(client.get("/api/scenarios/"))
    assert world["run_a"].pk in listed and world["b"]["run"].pk not in listed
    assert client.get(f"/api/scenarios/{world['b']['run'].pk}/").status_code == 404
    assert client.get(f"/api/scenarios/{world['b']['run'].pk}/snapshot/").status_code == 404
    assert client.post(f"/api/scenarios/{world['b']['run'].pk}/cancel/").status_code == 404


def test_a_run_on_another_tenants_cluster_or_from_its_snapshot_reads_as_missing(world):
    client = api(world["watcher"])
    response = client.post("/api/scenarios/", {"kind": "topology",
                                               "cluster": world["b"]["cluster"].pk},
                           format="json")
    assert response.status_code == 409, response.content  # as a cluster that does not exist
    assert "does not exist" in response.json()["cluster"][0]
    response = client.post("/api/scenarios/", {"kind": "topology",
                                               "cluster": world["a"]["cluster"].pk,
                                               "fork_from": world["b"]["run"].pk},
                           format="json")
    assert response.status_code == 409, response.content  # as a run that does not exist
    assert "does not exist" in response.json()["fork_from"][0]
    assert ScenarioRun.objects.count() == 2


# --- the admin ---------------------------------------------------------------------

def admin_client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_admin_leaves_out_another_tenants_objects(world):
    client = admin_client(world["changer"])
    page = client.get("/admin/hardware/rack/")
    assert page.status_code == 200
    assert "b-r0" not in page.content.decode() and "net0" in page.content.decode()
    theirs = client.get(f"/admin/hardware/rack/{world['b']['rack'].pk}/change/", follow=True)
    assert "doesn’t exist" in theirs.content.decode() or \
        "doesn't exist" in theirs.content.decode()
    assert "b-r0" not in client.get("/admin/hardware/cluster/").content.decode()
    assert client.get("/admin/hardware/cluster/add/").status_code == 403


def test_the_admin_shows_a_see_only_cluster_read_only(world):
    client = admin_client(world["watcher"])
    rack = world["a"]["rack"]
    page = client.get(f"/admin/hardware/rack/{rack.pk}/change/")
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()
    response = client.post(f"/admin/hardware/rack/{rack.pk}/change/",
                           {"name": "renamed", "cluster": rack.cluster_id, "row": 0,
                            "slot": 0, "power_budget_w": 40_000})
    assert response.status_code == 403
    rack.refresh_from_db()
    assert rack.name == "r0"
    assert client.post(f"/admin/hardware/rack/{rack.pk}/delete/",
                       {"post": "yes"}).status_code == 403
    assert Rack.objects.filter(pk=rack.pk).exists()


def test_the_admin_form_takes_only_clusters_one_may_change(world):
    from tests.hardware.test_admin import form_data

    client = admin_client(world["changer"])
    data = form_data(client.get("/admin/hardware/rack/add/"))
    data.update({"name": "r9", "row": 5, "slot": 5, "power_budget_w": 40_000})
    theirs = client.post("/admin/hardware/rack/add/", {**data, "cluster": world["b"]["cluster"].pk})
    assert theirs.status_code == 200
    assert "cluster" in theirs.context["adminform"].form.errors
    assert not Rack.objects.filter(name="r9").exists()
    mine = client.post("/admin/hardware/rack/add/", {**data, "cluster": world["a"]["cluster"].pk})
    assert mine.status_code == 302, mine.context["adminform"].form.errors
    assert Rack.objects.filter(name="r9", cluster=world["a"]["cluster"]).exists()


def test_only_unrestricted_users_edit_grants(world, admin_user):
    grant = ClusterGrant.objects.get(user=world["changer"])
    restricted = admin_client(world["changer"])
    assert restricted.get("/admin/hardware/clustergrant/add/").status_code == 403
    assert restricted.post(f"/admin/hardware/clustergrant/{grant.pk}/delete/",
                           {"post": "yes"}).status_code == 403
    assert ClusterGrant.objects.filter(pk=grant.pk).exists()  # no way back to "everything"
    assert admin_client(admin_user).get("/admin/hardware/clustergrant/add/").status_code == 200


# --- the command -------------------------------------------------------------------

def test_grant_cluster_command_grants_lists_and_removes(world):
    from io import StringIO

    from django.core.management import CommandError, call_command

    user = tenant("newcomer")
    out = StringIO()
    call_command("grant_cluster", "newcomer", "tiny", "change", stdout=out)
    assert out.getvalue().strip() == "newcomer: tiny (change)"
    assert ids(api(User.objects.get(pk=user.pk)).get("/api/clusters/")) == {
        world["a"]["cluster"].pk}
    call_command("grant_cluster", "newcomer", "tiny", "--remove", stdout=out)
    assert "every cluster (no grants)" in out.getvalue().splitlines()[-1]
    with pytest.raises(CommandError, match="no cluster 'nowhere'"):
        call_command("grant_cluster", "newcomer", "nowhere")
