"""Agents and scrape targets over the API and in the admin; the token is shown once."""
from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from rest_framework.test import APIClient

from tests.telemetry.conftest import batches_url
from twin.telemetry.models import Alert, ScrapeTarget, TelemetryAgent, hash_token

AGENTS = "/api/telemetry/agents/"
TARGETS = "/api/telemetry/targets/"


def test_creating_an_agent_shows_its_token_once_and_the_token_works(admin_client_api,
                                                                    tiny_cluster):
    cid = tiny_cluster["cluster"].pk
    created = admin_client_api.post(AGENTS, {"cluster": cid, "name": "node0-dcgm"},
                                    format="json")
    assert created.status_code == 201, created.content
    token = created.json()["token"]
    assert token.startswith("twa_") and created.json()["token_hint"] == token[:12]
    row = TelemetryAgent.objects.get(name="node0-dcgm")
    assert row.token_hash == hash_token(token) and token not in row.token_hash
    again = admin_client_api.get(f"{AGENTS}{row.pk}/").json()
    assert again["token"] is None and again["gaps"] == 0
    ingest = Client(HTTP_AUTHORIZATION=f"Bearer {token}").post(
        batches_url(cid), json.dumps({"seq": 1, "cards": [
            {"card": tiny_cluster["cards"][0].pk, "gpu_util": 5}]}),
        content_type="application/json")
    assert ingest.status_code == 202
    rotated = admin_client_api.post(f"{AGENTS}{row.pk}/rotate-token/").json()
    assert rotated["token"] and rotated["token"] != token
    duplicate = admin_client_api.post(AGENTS, {"cluster": cid, "name": "node0-dcgm"},
                                      format="json")
    assert duplicate.status_code == 409  # a name taken: a conflict, per field
    assert "name" in duplicate.json() or "non_field_errors" in duplicate.json()


def test_agents_need_the_model_permissions(reader_client, anon_client, tiny_cluster):
    body = {"cluster": tiny_cluster["cluster"].pk, "name": "x"}
    assert anon_client.post(AGENTS, body, format="json").status_code == 401
    assert reader_client.post(AGENTS, body, format="json").status_code == 403
    assert not TelemetryAgent.objects.exists()


def test_an_agent_cannot_move_to_another_cluster(admin_client_api, tiny_cluster):
    from twin.hardware.models import Cluster

    agent, _ = TelemetryAgent.issue(tiny_cluster["cluster"], "a")
    other = Cluster.objects.create(name="other")
    response = admin_client_api.patch(f"{AGENTS}{agent.pk}/", {"cluster": other.pk},
                                      format="json")
    assert response.status_code == 400 and "cluster" in response.json()


@pytest.mark.parametrize(("body", "field"), [
    ({"endpoint": "ftp://node0/metrics"}, "endpoint"),
    ({"endpoint": "http://node0:9400/metrics", "interval_s": 5, "timeout_s": 10}, "timeout_s"),
    ({"endpoint": "http://node0:9400/metrics", "interval_s": 0}, "interval_s"),
    ({"endpoint": "http://"}, "endpoint"),
])
def test_scrape_targets_are_validated_per_field(admin_client_api, tiny_cluster, body, field):
    response = admin_client_api.post(TARGETS, {"cluster": tiny_cluster["cluster"].pk, **body},
                                     format="json")
    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
    assert not ScrapeTarget.objects.exists()


def test_a_scrape_target_with_another_clusters_agent_is_refused(admin_client_api,
                                                                 tiny_cluster):
    from twin.hardware.models import Cluster

    other = Cluster.objects.create(name="other")
    foreign, _ = TelemetryAgent.issue(other, "foreign")
    response = admin_client_api.post(TARGETS, {
        "cluster": tiny_cluster["cluster"].pk, "agent": foreign.pk,
        "endpoint": "http://node0:9400/metrics"}, format="json")
    assert response.status_code == 400 and "agent" in response.json()
    ok = admin_client_api.post(TARGETS, {"cluster": tiny_cluster["cluster"].pk,
                                         "endpoint": "http://node0:9400/metrics"}, format="json")
    assert ok.status_code == 201 and ok.json()["last_status"] == "never"


def test_the_admin_shows_the_token_once_and_lists_telemetry(admin_user, tiny_cluster):
    client = Client()
    client.force_login(admin_user)
    response = client.post("/admin/telemetry/telemetryagent/add/", {
        "cluster": tiny_cluster["cluster"].pk, "name": "from-admin", "description": "",
        "is_active": "on"}, follow=True)
    assert response.status_code == 200
    agent = TelemetryAgent.objects.get(name="from-admin")
    shown = [str(m) for m in response.context["messages"]]
    token = next(m.split(": ")[-1] for m in shown if "shown once" in m)
    assert agent.token_hash == hash_token(token)
    Alert.objects.create(cluster=tiny_cluster["cluster"], rule="xid", severity="critical",
                         level="card", subject="card:1", card=tiny_cluster["cards"][0],
                         message="card 1: XID 79", started="2026-01-01T00:00:00Z")
    for url in ("/admin/telemetry/telemetryagent/", "/admin/telemetry/scrapetarget/",
                "/admin/telemetry/alert/", "/admin/telemetry/alert/?active=1",
                "/admin/telemetry/cardhealth/", "/admin/telemetry/telemetryminute/"):
        assert client.get(url).status_code == 200, url
    acked = client.post("/admin/telemetry/alert/", {
        "action": "acknowledge", "_selected_action": [Alert.objects.get().pk]}, follow=True)
    assert acked.status_code == 200
    assert Alert.objects.get().acknowledged_by == admin_user


def test_an_operator_with_only_alert_permissions_can_acknowledge(staff_user, tiny_cluster):
    alert = Alert.objects.create(cluster=tiny_cluster["cluster"], rule="ecc",
                                 severity="critical", level="card", subject="card:1",
                                 message="m", started="2026-01-01T00:00:00Z")
    staff_user.user_permissions.add(Permission.objects.get(codename="change_alert"))
    client = APIClient()
    client.force_authenticate(staff_user)
    response = client.post(f"/api/telemetry/alerts/{alert.pk}/acknowledge/")
    assert response.status_code == 200 and response.json()["acknowledged_by"] == "operator"
