"""The deletion rule in the admin (issue 11, item 4): the confirmation page lists
what is inside per kind (never every row), confirming it cascades, a cluster needs
its name typed, and a type in use is protected."""
from __future__ import annotations

from typing import Any

from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.test import Client
from django.urls import reverse

from twin.hardware.models import AcceleratorType, Card, Cluster, Link, Server, SuperNode
from twin.telemetry.models import TelemetryAgent

World = dict[str, Any]


def delete_url(model_name: str, pk: int) -> str:
    return reverse(f"admin:hardware_{model_name}_delete", args=[pk])


def page_text(response: Any) -> str:
    return response.content.decode().replace("\u00a0", " ")


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_supernode_page_lists_what_is_inside_then_cascades(admin_user,
                                                            tiny_cluster: World) -> None:
    client = logged_in(admin_user)
    url = delete_url("supernode", tiny_cluster["supernode"].pk)
    page = client.get(url)
    assert page.status_code == 200
    html = page_text(page)
    for line in ("servers: 1", "cards: 8", "network devices: 2", "links: 4"):
        assert line in html, line
    assert "TINY-0000" not in html  # counted, not listed row by row
    response = client.post(url, {"post": "yes"})
    assert response.status_code == 302
    assert not SuperNode.objects.exists() and not Card.objects.exists()
    assert not Server.objects.exists() and not Link.objects.exists()


def test_cluster_needs_its_name_typed(admin_user, tiny_cluster: World) -> None:
    cluster = tiny_cluster["cluster"]
    TelemetryAgent.issue(cluster, "dcgm")
    client = logged_in(admin_user)
    url = delete_url("cluster", cluster.pk)
    page = page_text(client.get(url))
    assert 'name="confirm"' in page
    assert "telemetry agents: 1" in page and "cards: 8" in page
    for typed in ({}, {"confirm": "other"}):
        again = client.post(url, {"post": "yes", **typed})
        assert again.status_code == 200
        assert 'id="confirm-error"' in page_text(again)
        assert Cluster.objects.filter(pk=cluster.pk).exists()
        assert Card.objects.count() == 8 and TelemetryAgent.objects.count() == 1
    done = client.post(url, {"post": "yes", "confirm": "tiny"})
    assert done.status_code == 302
    assert not Cluster.objects.exists() and not Card.objects.exists()
    assert not TelemetryAgent.objects.exists()


def test_empty_cluster_needs_no_name(admin_user, db) -> None:
    cluster = Cluster.objects.create(name="empty")
    client = logged_in(admin_user)
    assert 'name="confirm"' not in page_text(client.get(delete_url("cluster", cluster.pk)))
    assert client.post(delete_url("cluster", cluster.pk), {"post": "yes"}).status_code == 302
    assert not Cluster.objects.exists()


def test_type_in_use_is_protected(admin_user, tiny_cluster: World) -> None:
    client = logged_in(admin_user)
    url = delete_url("acceleratortype", tiny_cluster["h100"].pk)
    page = page_text(client.get(url))
    assert "in use (cards: 8)" in page and "TINY-0000" in page
    client.post(url, {"post": "yes"})
    assert AcceleratorType.objects.filter(pk=tiny_cluster["h100"].pk).exists()
    assert Card.objects.count() == 8


def test_bulk_delete_of_a_full_cluster_is_refused(admin_user, tiny_cluster: World) -> None:
    client = logged_in(admin_user)
    empty = Cluster.objects.create(name="empty")
    changelist = reverse("admin:hardware_cluster_changelist")
    pks = [tiny_cluster["cluster"].pk, empty.pk]
    page = client.post(changelist, {"action": "delete_selected", ACTION_CHECKBOX_NAME: pks})
    assert "delete it from its own page" in page_text(page)
    client.post(changelist, {"action": "delete_selected", ACTION_CHECKBOX_NAME: pks,
                             "post": "yes"})
    assert Cluster.objects.filter(pk=tiny_cluster["cluster"].pk).exists()
    assert Card.objects.count() == 8


def test_bulk_delete_of_servers_lists_and_cascades(admin_user, tiny_cluster: World) -> None:
    client = logged_in(admin_user)
    changelist = reverse("admin:hardware_server_changelist")
    pks = [tiny_cluster["server"].pk]
    page = page_text(client.post(changelist, {"action": "delete_selected",
                                              ACTION_CHECKBOX_NAME: pks}))
    assert "cards: 8" in page
    client.post(changelist, {"action": "delete_selected", ACTION_CHECKBOX_NAME: pks,
                             "post": "yes"})
    assert not Server.objects.exists() and not Card.objects.exists()


def test_operator_without_card_delete_permission_may_not_cascade(
        staff_user, tiny_cluster: World) -> None:
    from django.contrib.auth.models import Permission

    staff_user.user_permissions.remove(Permission.objects.get(codename="delete_card"))
    client = logged_in(type(staff_user).objects.get(pk=staff_user.pk))
    url = delete_url("server", tiny_cluster["server"].pk)
    page = client.get(url)
    assert page.status_code == 200 and "cards" in page.context["perms_lacking"]
    assert client.post(url, {"post": "yes"}).status_code == 403
    assert Server.objects.exists() and Card.objects.count() == 8
