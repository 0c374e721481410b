"""Named API tokens (``twin.core.tokens``, ``hardware.ApiToken``, ``/api/tokens/``).

The world of ``tests/core/test_access.py``: the tiny cluster (A) and another one (B).
A token carries its user's access ∩ its scope, on every path the grants apply to:
REST lists and details, writes, scenario runs, telemetry reads, ``/metrics`` (the
websockets are in ``tests/live/test_token_scope.py``). The secret is shown once and
stored only hashed; a revoked, expired or unknown token is a 401.
"""
from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.core.test_access import ids, other_cluster, tenant
from tests.telemetry.test_monitoring import scrape
from twin.core import tokens
from twin.hardware.models import ApiToken, Cluster, ClusterGrant, Rack
from twin.scenarios.models import ScenarioRun
from twin.telemetry.models import TelemetryAgent

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_cache() -> Any:
    tokens.clear_cache()
    yield
    tokens.clear_cache()


@pytest.fixture
def world(tiny_cluster) -> dict[str, Any]:
    a = tiny_cluster
    b = other_cluster(a["h100"])
    return {"a": a, "b": b, "owner": tenant("owner"),  # no grant rows: every cluster
            "watcher": tenant("watcher", see=a["cluster"])}


def issue(user: User, name: str = "t", clusters: tuple[Cluster, ...] = (),
          see_only: bool = False, **fields: Any) -> tuple[ApiToken, str]:
    token = ApiToken(user=user, name=name, limited=bool(clusters), see_only=see_only, **fields)
    key = token.new_key()
    token.save()
    token.clusters.set(clusters)
    return token, key


def client_of(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def session(user: User) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


# --- /api/tokens/ -------------------------------------------------------------------

def test_create_shows_the_secret_once_and_stores_only_its_hash(world):
    client = session(world["owner"])
    created = client.post("/api/tokens/", {"name": "wall screen",
                                           "clusters": [world["a"]["cluster"].pk],
                                           "see_only": True}, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    key = body["token"]
    assert key.startswith("twk_") and len(key) == 4 + 43
    assert body["prefix"] == key[:12] and body["see_only"] is True
    assert body["clusters"] == [world["a"]["cluster"].pk] and body["revoked"] is False
    row = ApiToken.objects.get(pk=body["id"])
    assert row.key_hash == tokens.hash_key(key) and key not in (row.prefix, row.key_hash)
    assert row.limited and row.user == world["owner"]
    listed = client.get("/api/tokens/").json()["results"]
    assert [(t["id"], t["token"], t["prefix"]) for t in listed] == [(row.pk, None, key[:12])]
    assert client.get(f"/api/tokens/{row.pk}/").json()["token"] is None
    # and the key works
    assert ids(client_of(key).get("/api/clusters/")) == {world["a"]["cluster"].pk}


@pytest.mark.parametrize(("body", "field"), [
    ({}, "name"),
    ({"name": ""}, "name"),
    ({"name": "x" * 101}, "name"),
    ({"name": "bad\x07name"}, "name"),
    ({"name": "t", "see_only": "maybe"}, "see_only"),
    ({"name": "t", "clusters": "1"}, "clusters"),
    ({"name": "t", "clusters": ["one"]}, "clusters"),
    ({"name": "t", "expires": "yesterday"}, "expires"),
    ({"name": "t", "expires": "2001-01-01T00:00:00Z"}, "expires"),
])
def test_bad_input_is_400_on_the_field_and_creates_nothing(world, body, field):
    response = session(world["owner"]).post("/api/tokens/", body, format="json")
    assert response.status_code == 400, response.content
    # the schema check names an item of a list by its index ("clusters[0]")
    assert {key.split("[")[0] for key in response.json()} == {field}, response.json()
    assert not ApiToken.objects.exists()


def test_a_token_cannot_reach_a_cluster_its_user_may_not_see(world):
    """B reads as an id that does not exist (the project's answer for one: 409 with
    the field's message), and nothing is created."""
    response = session(world["watcher"]).post(
        "/api/tokens/", {"name": "t", "clusters": [world["b"]["cluster"].pk]}, format="json")
    assert response.status_code == 409, response.content
    assert "does not exist" in response.json()["clusters"][0]
    missing = session(world["watcher"]).post(
        "/api/tokens/", {"name": "t", "clusters": [987654]}, format="json")
    assert missing.status_code == 409 and missing.json()["clusters"] == \
        [m.replace(str(world["b"]["cluster"].pk), "987654")
         for m in response.json()["clusters"]]
    assert not ApiToken.objects.exists()


def test_another_users_token_is_404_and_not_listed(world, admin_user):
    theirs, _ = issue(world["watcher"], "theirs")
    for user in (world["owner"], admin_user):
        client = session(user)
        assert client.get(f"/api/tokens/{theirs.pk}/").status_code == 404
        assert client.post(f"/api/tokens/{theirs.pk}/revoke/").status_code == 404
        assert client.get("/api/tokens/").json()["results"] == []
    assert not ApiToken.objects.get(pk=theirs.pk).revoked


def test_anonymous_may_not_list_or_create(world):
    assert APIClient().get("/api/tokens/").status_code == 401
    assert APIClient().post("/api/tokens/", {"name": "t"}, format="json").status_code == 401


def test_a_scoped_token_creates_only_tokens_within_its_scope(world):
    _, key = issue(world["owner"], clusters=(world["a"]["cluster"],))
    client = client_of(key)
    wider = client.post("/api/tokens/", {"name": "wider"}, format="json")
    assert wider.status_code == 400 and "clusters" in wider.json()
    outside = client.post("/api/tokens/", {"name": "b", "clusters": [world["b"]["cluster"].pk]},
                          format="json")
    assert outside.status_code == 409 and "clusters" in outside.json()
    inside = client.post("/api/tokens/", {"name": "a", "clusters": [world["a"]["cluster"].pk]},
                         format="json")
    assert inside.status_code == 201, inside.content
    assert ApiToken.objects.count() == 2


# --- the scope, on every path -----------------------------------------------------------

def test_a_scoped_token_lists_its_clusters_only_and_404s_the_others(world):
    a, b = world["a"], world["b"]
    _, key = issue(world["owner"], clusters=(a["cluster"],))
    client = client_of(key)
    assert ids(client.get("/api/clusters/")) == {a["cluster"].pk}
    assert ids(client.get("/api/racks/")) == {r.pk for r in Rack.objects.filter(
        cluster=a["cluster"])}
    for prefix, obj in (("/api/clusters/", b["cluster"]), ("/api/racks/", b["rack"]),
                        ("/api/cards/", b["card"]), ("/api/scenarios/", b["run"])):
        assert client.get(f"{prefix}{obj.pk}/").status_code == 404, prefix
    assert client.get(f"/api/clusters/{b['cluster'].pk}/summary/").status_code == 404
    assert client.get(f"/api/telemetry/clusters/{b['cluster'].pk}/").status_code == 404
    assert client.get(f"/api/telemetry/clusters/{a['cluster'].pk}/").status_code != 404
    # the same user without the token's limit sees both
    assert ids(session(world["owner"]).get("/api/clusters/")) >= {a["cluster"].pk,
                                                                  b["cluster"].pk}
    # a run on B is a run on a cluster that does not exist; on A it starts
    run_b = client.post("/api/scenarios/", {"kind": "topology", "cluster": b["cluster"].pk},
                        format="json")
    assert run_b.status_code in (400, 409) and "cluster" in run_b.json()
    assert not ScenarioRun.objects.filter(cluster=b["cluster"]).exclude(
        pk=b["run"].pk).exists()


def test_a_superusers_scoped_token_is_scoped_too(world, admin_user):
    _, key = issue(admin_user, clusters=(world["a"]["cluster"],))
    client = client_of(key)
    assert ids(client.get("/api/clusters/")) == {world["a"]["cluster"].pk}
    assert client.get(f"/api/racks/{world['b']['rack'].pk}/").status_code == 404
    response = client.post("/api/clusters/", {"name": "new"}, format="json")
    assert response.status_code == 403  # a new cluster would be outside the token


def test_a_see_only_token_reads_and_every_write_is_403(world):
    rack = world["a"]["rack"]
    _, key = issue(world["owner"], see_only=True)
    client = client_of(key)
    assert client.get(f"/api/racks/{rack.pk}/").status_code == 200
    patched = client.patch(f"/api/racks/{rack.pk}/", {"name": "renamed"}, format="json")
    assert patched.status_code == 403 and "see-only" in patched.json()["detail"]
    assert client.post("/api/scenarios/", {"kind": "topology", "cluster": rack.cluster_id},
                       format="json").status_code == 403
    assert client.post("/api/tokens/", {"name": "more"}, format="json").status_code == 403
    rack.refresh_from_db()
    assert rack.name == "r0" and ApiToken.objects.count() == 1
    # the user's own session still writes
    assert session(world["owner"]).patch(f"/api/racks/{rack.pk}/", {"name": "renamed"},
                                         format="json").status_code == 200


def test_a_token_never_adds_to_its_users_grants(world):
    """The watcher may only see A: a token limited to A (not see-only) still may not
    change it, and B stays out of reach."""
    rack = world["a"]["rack"]
    _, key = issue(world["watcher"], clusters=(world["a"]["cluster"],))
    client = client_of(key)
    assert client.patch(f"/api/racks/{rack.pk}/", {"name": "x"},
                        format="json").status_code == 403
    assert client.get(f"/api/racks/{world['b']['rack'].pk}/").status_code == 404
    # a grant on B added later does not reach through the token limited to A
    ClusterGrant.objects.create(user=world["watcher"], cluster=world["b"]["cluster"],
                                level="change")
    assert client.get(f"/api/racks/{world['b']['rack'].pk}/").status_code == 404


def test_metrics_with_a_scoped_token_show_its_clusters_only(world, settings):
    a, b = world["a"]["cluster"], world["b"]["cluster"]
    TelemetryAgent.issue(a, "a-agent")
    TelemetryAgent.issue(b, "b-agent")
    settings.TWIN_METRICS_ALLOW = []  # no trusted address: the token is the only way in
    _, key = issue(world["owner"], clusters=(a,))
    mine = scrape(Client(HTTP_AUTHORIZATION=f"Token {key}"), REMOTE_ADDR="10.9.9.9")
    assert {dict(labels).get("cluster") for _, labels in mine} - {None} == {str(a.pk)}
    assert any(name == "twin_source_up" for name, _ in mine)
    unscoped = Token.objects.create(user=world["owner"]).key
    everything = scrape(Client(HTTP_AUTHORIZATION=f"Token {unscoped}"), REMOTE_ADDR="10.9.9.9")
    assert {dict(labels).get("cluster") for _, labels in everything} >= {str(a.pk), str(b.pk)}


# --- revocation, expiry, the cache ---------------------------------------------------

def test_a_revoked_token_is_refused_at_once_in_this_process(world):
    token, key = issue(world["owner"])
    client = client_of(key)
    assert client.get("/api/clusters/").status_code == 200  # now cached
    revoked = session(world["owner"]).post(f"/api/tokens/{token.pk}/revoke/")
    assert revoked.status_code == 200 and revoked.json()["revoked"] is True
    assert revoked.json()["revoked_at"] is not None
    refused = client.get("/api/clusters/")
    assert refused.status_code == 401 and refused["WWW-Authenticate"] == "Token"
    # revoking again changes nothing; the token stays listed
    assert session(world["owner"]).post(f"/api/tokens/{token.pk}/revoke/").status_code == 200
    assert session(world["owner"]).get("/api/tokens/").json()["results"][0]["revoked"]


def test_a_revocation_in_another_process_lands_within_the_cache_time(world, monkeypatch):
    """Another process revoked it (the row changed, this process's cache did not
    hear): accepted until the entry is ``CACHE_S`` old, refused from then on."""
    token, key = issue(world["owner"])
    client = client_of(key)
    assert client.get("/api/clusters/").status_code == 200
    ApiToken.objects.filter(pk=token.pk).update(revoked=True)  # no signal: elsewhere
    assert client.get("/api/clusters/").status_code == 200
    now = tokens._cache._clock()  # the process's token cache (a TtlCache) and its clock
    monkeypatch.setattr(tokens._cache, "_clock", lambda: now + tokens.CACHE_S + 0.01)
    assert client.get("/api/clusters/").status_code == 401


def test_expired_unknown_and_inactive_are_401(world):
    _, expired = issue(world["owner"], expires=timezone.now() - timedelta(seconds=1))
    assert client_of(expired).get("/api/clusters/").status_code == 401
    assert client_of("twk_" + "x" * 43).get("/api/clusters/").status_code == 401
    _, key = issue(world["watcher"])
    User.objects.filter(pk=world["watcher"].pk).update(is_active=False)
    assert client_of(key).get("/api/clusters/").status_code == 401


def test_a_cached_token_costs_no_query_and_last_used_is_written_rarely(world):
    token, key = issue(world["owner"])
    client = client_of(key)
    assert client.get("/api/clusters/").status_code == 200
    first = ApiToken.objects.get(pk=token.pk).last_used
    assert first is not None
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/api/clusters/").status_code == 200
    assert not [q for q in queries.captured_queries if "hardware_apitoken" in q["sql"]]
    tokens.clear_cache()  # a miss within a minute reads the row but does not write it
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/api/clusters/").status_code == 200
    touched = [q["sql"] for q in queries.captured_queries if "hardware_apitoken" in q["sql"]]
    assert touched and not [sql for sql in touched if sql.startswith("UPDATE")]
    assert ApiToken.objects.get(pk=token.pk).last_used == first


def test_drf_tokens_from_the_login_endpoint_keep_working(world):
    world["owner"].set_password("owner-pass-123")
    world["owner"].save()
    got = APIClient().post("/api/token/", {"username": "owner", "password": "owner-pass-123"},
                           format="json")
    assert got.status_code == 200, got.content
    client = client_of(got.json()["token"])
    assert ids(client.get("/api/clusters/")) >= {world["a"]["cluster"].pk,
                                                 world["b"]["cluster"].pk}
    assert client.post("/api/tokens/", {"name": "from a script"},
                       format="json").status_code == 201


# --- the admin -----------------------------------------------------------------------

def test_the_admin_creates_with_the_secret_once_checks_the_scope_and_revokes(world,
                                                                             admin_user):
    browser = Client()
    browser.force_login(admin_user)
    refused = browser.post("/admin/hardware/apitoken/add/", {
        "name": "bad", "user": world["watcher"].pk, "clusters": [world["b"]["cluster"].pk]})
    assert refused.status_code == 200 and "may not see" in refused.content.decode()
    assert not ApiToken.objects.exists()
    added = browser.post("/admin/hardware/apitoken/add/", {
        "name": "wall", "user": world["watcher"].pk, "clusters": [world["a"]["cluster"].pk],
        "see_only": "on"}, follow=True)
    assert added.status_code == 200
    shown = [str(m) for m in added.context["messages"] if "shown this once" in str(m)]
    key = shown[0].split("shown this once: ")[1].split(" ")[0]
    token = ApiToken.objects.get()
    assert token.key_hash == tokens.hash_key(key) and token.limited and token.see_only
    assert ids(client_of(key).get("/api/clusters/")) == {world["a"]["cluster"].pk}
    browser.post("/admin/hardware/apitoken/", {"action": "revoke",
                                               "_selected_action": [token.pk]})
    assert ApiToken.objects.get().revoked
    assert client_of(key).get("/api/clusters/").status_code == 401
