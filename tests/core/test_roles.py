"""Roles out of the box (issue 11, item 8): the groups viewer, operator and hardware
admin exist after ``migrate`` with the permissions they imply, ``assign_role`` puts
users in them, and the API lets each do exactly what its role says."""
from __future__ import annotations

import io
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from twin.core.roles import HARDWARE_ADMIN, OPERATOR, ROLES, VIEWER
from twin.hardware.models import Card, Cluster, Rack
from twin.telemetry.models import Alert, TelemetryAgent

World = dict[str, Any]
SCENARIO = {"kind": "topology", "params": {"family": "ring", "nodes": 8}}


def perms(role: str) -> set[str]:
    return {f"{p.content_type.app_label}.{p.codename}"
            for p in Group.objects.get(name=role).permissions.select_related("content_type")}


def user_with(role: str | None, name: str | None = None) -> User:
    user = User.objects.create_user(name or (role or "nobody").replace(" ", "-"),
                                    password="role-pass-123")
    if role:
        call_command("assign_role", user.username, role, stdout=io.StringIO())
    return User.objects.get(pk=user.pk)


def client_of(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.mark.django_db
def test_the_roles_exist_after_migrate_each_including_the_last() -> None:
    viewer, operator, admin = perms(VIEWER), perms(OPERATOR), perms(HARDWARE_ADMIN)
    assert {"hardware.view_card", "hardware.view_cluster", "telemetry.view_alert",
            "telemetry.view_telemetryagent", "scenarios.view_scenariorun"} <= viewer
    assert not {p for p in viewer if not p.split(".")[1].startswith("view_")}
    assert viewer < operator < admin
    assert {"scenarios.add_scenariorun", "scenarios.change_scenariorun",
            "telemetry.change_alert", "telemetry.add_telemetryagent",
            "telemetry.delete_telemetryagent", "telemetry.add_scrapetarget",
            "hardware.add_cluster", "hardware.add_clusterbuild"} <= operator
    assert not {"hardware.delete_card", "hardware.change_rack", "hardware.delete_cluster",
                "hardware.add_card"} & operator
    assert {f"hardware.{action}_{model}" for action in ("add", "change", "delete")
            for model in ("acceleratortype", "cluster", "supernode", "rack", "server", "card",
                          "networkdevice", "link")} <= admin
    assert not any(p.startswith("auth.") for p in admin)


@pytest.mark.django_db
def test_assign_role_and_list() -> None:
    user = User.objects.create_user("alice", password="alice-pass-123")
    out = io.StringIO()
    call_command("assign_role", "alice", OPERATOR, "--staff", stdout=out)
    assert out.getvalue().strip() == "alice: operator (admin site)"
    call_command("assign_role", "alice", VIEWER, "--only", stdout=io.StringIO())
    user.refresh_from_db()
    assert [g.name for g in user.groups.all()] == [VIEWER] and user.is_staff
    call_command("assign_role", "alice", VIEWER, "--remove", stdout=io.StringIO())
    assert not user.groups.exists()
    listing = io.StringIO()
    call_command("assign_role", "--list", stdout=listing)
    lines = listing.getvalue().splitlines()
    assert [line.split(" (")[0] for line in lines] == list(ROLES)
    assert "scenarios.add_scenariorun" in lines[1]
    with pytest.raises(CommandError, match="no user 'bob'"):
        call_command("assign_role", "bob", VIEWER)


@pytest.mark.django_db
def test_roles_come_back_after_a_flush_and_never_lose_additions() -> None:
    """``migrate`` re-runs the handler: it adds what is missing, keeps what was added."""
    from django.apps import apps
    from django.contrib.auth.models import Permission

    from twin.core.roles import grant_roles

    group = Group.objects.get(name=VIEWER)
    extra = Permission.objects.get(codename="add_link")
    group.permissions.add(extra)
    group.permissions.remove(Permission.objects.get(codename="view_card"))
    for app_config in apps.get_app_configs():
        grant_roles(app_config)
    assert {"hardware.view_card", "hardware.add_link"} <= perms(VIEWER)


def test_viewer_reads_and_writes_nothing(tiny_cluster: World) -> None:
    client = client_of(user_with(VIEWER))
    assert client.get(reverse("api:card-list")).status_code == 200
    assert client.post("/api/scenarios/", SCENARIO, format="json").status_code == 403
    assert client.delete(reverse("api:card-detail",
                                 args=[tiny_cluster["cards"][7].pk])).status_code == 403
    assert client.post("/api/telemetry/agents/", {"cluster": tiny_cluster["cluster"].pk,
                                                  "name": "x"}, format="json").status_code == 403


def test_operator_runs_the_twin_but_edits_no_hardware(tiny_cluster: World,
                                                      django_capture_on_commit_callbacks) -> None:
    client = client_of(user_with(OPERATOR))
    with django_capture_on_commit_callbacks(execute=False):
        assert client.post("/api/scenarios/", SCENARIO, format="json").status_code == 202
        assert client.post("/api/builds/", {"preset": "seed-512", "supernodes": 1,
                                            "name": "lab"}, format="json").status_code == 202
        # Replacing a cluster deletes it: not an operator's call.
        replace = client.post("/api/builds/", {"preset": "seed-512", "name": "tiny",
                                               "replace": True}, format="json")
    assert replace.status_code == 403 and "delete_cluster" in replace.json()["detail"]
    created = client.post("/api/telemetry/agents/", {"cluster": tiny_cluster["cluster"].pk,
                                                     "name": "dcgm"}, format="json")
    assert created.status_code == 201, created.content
    alert = Alert.objects.create(cluster=tiny_cluster["cluster"], rule="gpu_temp",
                                 severity="warning", level="card", subject="x",
                                 card=tiny_cluster["cards"][0], value=90, threshold=85,
                                 message="hot", started=timezone.now())
    assert client.post(f"/api/telemetry/alerts/{alert.pk}/acknowledge/").status_code == 200
    assert client.patch(reverse("api:rack-detail", args=[tiny_cluster["rack"].pk]),
                        {"power_budget_w": 30_000}, format="json").status_code == 403
    assert client.delete(reverse("api:card-detail",
                                 args=[tiny_cluster["cards"][7].pk])).status_code == 403
    assert Card.objects.count() == 8


def test_hardware_admin_edits_and_cascades(tiny_cluster: World) -> None:
    TelemetryAgent.issue(tiny_cluster["cluster"], "dcgm")
    client = client_of(user_with(HARDWARE_ADMIN))
    assert client.patch(reverse("api:rack-detail", args=[tiny_cluster["rack"].pk]),
                        {"power_budget_w": 30_000}, format="json").status_code == 200
    response = client.delete(reverse("api:cluster-detail", args=[tiny_cluster["cluster"].pk]),
                             QUERY_STRING="cascade=true&confirm=tiny")
    assert response.status_code == 204, response.content
    assert not Cluster.objects.exists() and not Rack.objects.exists()


def test_a_cascade_needs_the_delete_permission_of_what_is_inside(staff_user,
                                                                 tiny_cluster: World) -> None:
    """staff_user holds every hardware permission but none of telemetry's: the cluster's
    agent would go too, so the cascade is refused and nothing is deleted."""
    TelemetryAgent.issue(tiny_cluster["cluster"], "dcgm")
    response = client_of(staff_user).delete(
        reverse("api:cluster-detail", args=[tiny_cluster["cluster"].pk]),
        QUERY_STRING="cascade=true&confirm=tiny")
    assert response.status_code == 403
    assert "telemetry agents" in response.json()["detail"]
    assert Cluster.objects.exists() and Card.objects.count() == 8
