"""Per-cluster access on the telemetry paths (``twin.core.access``): ingestion refuses
an agent whose owner may not change its cluster, and ``/metrics`` read with a user's
API token leaves out the clusters the user may not see."""
from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.authtoken.models import Token

from tests.telemetry.conftest import batches_url
from tests.telemetry.test_monitoring import scrape
from twin.hardware.models import Cluster, ClusterGrant
from twin.telemetry import keys, state
from twin.telemetry.api import ingest_views
from twin.telemetry.models import TelemetryAgent

pytestmark = pytest.mark.django_db


def batch(cards: list) -> str:
    return json.dumps({"seq": 1, "cards": [{"card": c.pk, "gpu_util": 50} for c in cards]})


@pytest.fixture
def owner(db) -> User:
    return User.objects.create_user("agent-owner", "o@example.com", "owner-pass-123")


def post(token: str, cluster_id: int, body: str):
    ingest_views._cache.clear()  # the token cache would keep the last answer for 5 s
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}").post(
        batches_url(cluster_id), body, content_type="application/json")


@pytest.mark.parametrize(("level", "status"), [(None, 202), ("change", 202), ("see", 403)])
def test_ingestion_follows_the_agent_owners_grant(tiny_cluster, owner, level, status):
    cluster = tiny_cluster["cluster"]
    other = Cluster.objects.create(name="other-tenant")
    if level is not None:
        ClusterGrant.objects.create(user=owner, cluster=cluster, level=level)
    else:  # a grant elsewhere only: the owner may not touch this cluster at all
        ClusterGrant.objects.create(user=owner, cluster=other, level="change")
        status = 403
    _, token = TelemetryAgent.issue(cluster, "rack-agent", user=owner)
    response = post(token, cluster.pk, batch(tiny_cluster["cards"]))
    assert response.status_code == status, response.content
    if status == 403:
        assert "may no longer change" in response.json()["detail"]
        r = state.redis_client()
        assert not r.exists(keys.stream()) or r.xlen(keys.stream()) == 0  # nothing queued
        assert TelemetryAgent.objects.get(name="rack-agent").batches == 0


def test_an_agent_without_an_owner_or_of_an_unrestricted_owner_is_accepted(tiny_cluster,
                                                                            owner):
    cluster = tiny_cluster["cluster"]
    _, anonymous = TelemetryAgent.issue(cluster, "legacy")
    _, owned = TelemetryAgent.issue(cluster, "owned", user=owner)
    assert post(anonymous, cluster.pk, batch(tiny_cluster["cards"])).status_code == 202
    assert post(owned, cluster.pk, batch(tiny_cluster["cards"])).status_code == 202


def test_metrics_read_with_an_api_token_show_only_visible_clusters(tiny_cluster, owner,
                                                                   settings):
    a = tiny_cluster["cluster"]
    b = Cluster.objects.create(name="other-tenant")
    TelemetryAgent.issue(a, "a-agent")
    TelemetryAgent.issue(b, "b-agent")
    ClusterGrant.objects.create(user=owner, cluster=a, level="see")
    settings.TWIN_METRICS_ALLOW = []  # no address is trusted: the token is the only way in
    key = Token.objects.create(user=owner).key
    mine = scrape(Client(HTTP_AUTHORIZATION=f"Token {key}"), REMOTE_ADDR="10.9.9.9")
    clusters = {dict(labels).get("cluster") for _, labels in mine} - {None}
    assert clusters == {str(a.pk)}
    assert ("twin_ingest_batches_total", (("cluster", str(a.pk)),)) in mine
    assert any(name == "twin_source_up" for name, _ in mine)  # installation-wide stays
    settings.TWIN_METRICS_ALLOW = ["127.0.0.1/8"]
    everything = scrape()
    assert {dict(labels).get("cluster") for _, labels in everything} >= {str(a.pk), str(b.pk)}
    wrong = Client(HTTP_AUTHORIZATION="Token nope").get("/metrics", REMOTE_ADDR="10.9.9.9")
    assert wrong.status_code == 403
