"""Telemetry for a deleted cluster (issue 11, item 4): 410 JSON, never a 500.

Its agents keep posting after the cluster is deleted with its contents
(``?cascade=true&confirm=<name>``): within the per-process token cache, after
it expires, and when the layout published in Redis outlived the cluster (a
reader that rebuilt it mid-delete, or a delete made while Redis was away).
Nothing reaches the stream. A cluster that never existed is a 404.
"""
from __future__ import annotations

import json

from django.test import Client
from django.urls import reverse

from tests.telemetry.conftest import batches_url, metrics_url
from twin.telemetry import keys, state
from twin.telemetry.api import ingest_views
from twin.telemetry.models import TelemetryAgent


def post_batch(client: Client, cluster_id: int, seq: int, card: int) -> object:
    doc = {"seq": seq, "cards": [{"card": card, "gpu_util": 50, "power_w": 400}]}
    return client.post(batches_url(cluster_id), json.dumps(doc),
                       content_type="application/json")


def stream_length() -> int:
    r = state.redis_client()
    return r.xlen(keys.stream()) if r.exists(keys.stream()) else 0


def delete_cluster(admin_client_api: Client, cluster) -> None:
    response = admin_client_api.delete(reverse("api:cluster-detail", args=[cluster.pk]),
                                       QUERY_STRING=f"cascade=true&confirm={cluster.name}")
    assert response.status_code == 204, response.content


def assert_gone(response, cluster_id: int) -> None:
    assert response.status_code == 410, response.content
    assert response["Content-Type"] == "application/json"
    assert f"cluster {cluster_id} was deleted" in response.json()["detail"]


def test_posts_to_a_deleted_cluster_are_410(agent, admin_client_api) -> None:
    cluster, card = agent["cluster"], agent["cards"][0].pk
    assert post_batch(agent["client"], cluster.pk, 1, card).status_code == 202
    queued = stream_length()
    delete_cluster(admin_client_api, cluster)
    assert not TelemetryAgent.objects.exists()
    # The token is still in this process's cache (a few seconds): the agent is known.
    assert_gone(post_batch(agent["client"], cluster.pk, 2, card), cluster.pk)
    exposition = 'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="node0"} 50\n'
    assert_gone(agent["client"].post(metrics_url(cluster.pk), exposition.encode(),
                                     content_type="text/plain"), cluster.pk)
    # Once the cache expired the token is unknown, and the cluster is still gone.
    ingest_views._cache.clear()
    assert_gone(post_batch(agent["client"], cluster.pk, 3, card), cluster.pk)
    assert stream_length() == queued


def test_a_layout_left_in_redis_does_not_bring_it_back(agent, admin_client_api) -> None:
    cluster, card = agent["cluster"], agent["cards"][0].pk
    assert post_batch(agent["client"], cluster.pk, 1, card).status_code == 202
    r = state.redis_client()
    published = r.get(keys.layout(cluster.pk))
    assert published
    delete_cluster(admin_client_api, cluster)
    # A reader rebuilt and republished the layout while the delete was committing.
    r.set(keys.layout(cluster.pk), published)
    queued = stream_length()
    assert_gone(post_batch(agent["client"], cluster.pk, 2, card), cluster.pk)
    assert stream_length() == queued
    logged_in = Client()
    logged_in.force_login(agent["agent"].created_by or _user())
    assert_gone(logged_in.get(f"/api/telemetry/clusters/{cluster.pk}/layout/"), cluster.pk)


def test_a_cluster_that_never_existed_is_404(agent) -> None:
    response = post_batch(agent["client"], 987654, 1, 1)
    assert response.status_code == 404, response.content
    assert response.json()["detail"] == "no cluster 987654"


def test_unauthenticated_posts_stay_401(agent, admin_client_api) -> None:
    delete_cluster(admin_client_api, agent["cluster"])
    response = Client().post(batches_url(agent["cluster"].pk), "{}",
                             content_type="application/json")
    assert response.status_code == 401


def _user():
    from django.contrib.auth.models import User

    return User.objects.create_user("viewer-of-layouts", password="x-pass-123456")
