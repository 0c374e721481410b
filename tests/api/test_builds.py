"""Builds over the API: validated up front, queued on commit, run by a real worker."""
from __future__ import annotations

import time

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from rest_framework.test import APIClient

from twin.hardware.models import Card, Cluster, ClusterBuild

BUILDS = "/api/builds/"


def post_build(client: APIClient, body: dict, callbacks_fixture) -> tuple:
    """POST a build; returns the response and the on-commit callbacks it queued
    (captured, not run: no task leaves a test that has no worker)."""
    with callbacks_fixture(execute=False) as callbacks:
        response = client.post(BUILDS, body, format="json")
    return response, callbacks


def test_presets_are_listed(reader_client, db):
    response = reader_client.get(reverse("api:preset-list"))
    assert response.status_code == 200
    presets = {p["name"]: p for p in response.json()}
    assert {"seed-512", "dgx-h100-superpod", "million"} <= set(presets)
    million = presets["million"]
    assert million["defaults"] == {"name": "million", "supernodes": 2048,
                                   "rack_budget_w": 40_000, "replace": False}
    assert million["plan"]["cards"] == 1_048_576
    assert million["plan"]["max_rack_w"] <= 40_000
    assert presets["seed-512"]["plan"]["racks_per_supernode"] >= 9  # 512 × 700 W > 9 × 40 kW
    assert presets["seed-512"]["description"]


def test_presets_need_login(anon_client, db):
    assert anon_client.get(reverse("api:preset-list")).status_code == 401


@pytest.mark.parametrize(("body", "field", "text"), [
    ({"preset": "no-such-preset"}, "preset", "seed-512"),
    ({"preset": "seed-512", "supernodes": 0}, "supernodes", "≥ 1"),
    ({"preset": "seed-512", "rack_budget_w": 5_000}, "rack_budget_w", "does not fit"),
    ({"preset": "seed-512", "rack_budget_w": -1}, "rack_budget_w", "positive"),
    ({"preset": "seed-512", "name": "   "}, "name", "blank"),
    ({"preset": "seed-512", "supernodes": "many"}, "supernodes", "integer"),
    ({}, "preset", "required"),
])
def test_bad_build_request_is_400_and_queues_nothing(admin_client_api, db, body, field, text,
                                                     django_capture_on_commit_callbacks):
    before = ClusterBuild.objects.count()
    response, callbacks = post_build(admin_client_api, body, django_capture_on_commit_callbacks)
    assert response.status_code == 400, response.content
    errors = response.json()
    assert field in errors, errors
    assert text in errors[field][0]
    assert ClusterBuild.objects.count() == before
    assert callbacks == []
    assert not Cluster.objects.exists()


def test_taken_name_needs_replace(admin_client_api, db, django_capture_on_commit_callbacks):
    Cluster.objects.create(name="seed-512")
    response, callbacks = post_build(admin_client_api, {"preset": "seed-512"},
                                     django_capture_on_commit_callbacks)
    assert response.status_code == 400
    assert "replace" in response.json()["name"][0]
    assert callbacks == [] and not ClusterBuild.objects.exists()
    response, callbacks = post_build(admin_client_api, {"preset": "seed-512", "replace": True},
                                     django_capture_on_commit_callbacks)
    assert response.status_code == 202
    assert len(callbacks) == 1


def test_build_request_is_202_and_queued_on_commit(admin_client_api, admin_user, db,
                                                   django_capture_on_commit_callbacks):
    response, callbacks = post_build(
        admin_client_api, {"preset": "seed-512", "supernodes": 2, "name": "lab"},
        django_capture_on_commit_callbacks)
    assert response.status_code == 202, response.content
    body = response.json()
    build = ClusterBuild.objects.get(pk=body["id"])
    assert body["status"] == "queued"
    assert body["url"].endswith(f"/api/builds/{build.pk}/")
    assert response["Location"] == body["url"]
    assert (build.preset, build.name, build.created_by) == ("seed-512", "lab", admin_user)
    assert build.params == {"name": "lab", "supernodes": 2, "replace": False}
    assert len(callbacks) == 1  # the task goes out only when the row is committed
    status = admin_client_api.get(body["url"]).json()
    assert {"status", "progress", "message", "result", "error", "cluster"} <= set(status)


def test_default_name_is_the_presets(admin_client_api, db, django_capture_on_commit_callbacks):
    response, _ = post_build(admin_client_api, {"preset": "dgx-h100-superpod"},
                             django_capture_on_commit_callbacks)
    assert response.status_code == 202
    assert ClusterBuild.objects.get().name == "dgx-h100-superpod"


def test_reader_and_anonymous_cannot_build(reader_client, anon_client, db,
                                           django_capture_on_commit_callbacks):
    for client, code in ((reader_client, 403), (anon_client, 401)):
        response, callbacks = post_build(client, {"preset": "seed-512"},
                                         django_capture_on_commit_callbacks)
        assert response.status_code == code
        assert callbacks == []
    assert not ClusterBuild.objects.exists()


def test_add_cluster_permission_is_what_a_build_needs(reader, db,
                                                      django_capture_on_commit_callbacks):
    reader.user_permissions.add(Permission.objects.get(codename="add_cluster"))
    client = APIClient()
    client.force_authenticate(reader)
    response, _ = post_build(client, {"preset": "seed-512"}, django_capture_on_commit_callbacks)
    assert response.status_code == 202


def test_builds_are_listed_and_filtered(reader_client, admin_user, db):
    done = ClusterBuild.objects.create(preset="seed-512", name="a", status="succeeded")
    failed = ClusterBuild.objects.create(preset="million", name="b", status="failed",
                                         error="out of disk")
    body = reader_client.get(BUILDS).json()
    assert {r["id"] for r in body["results"]} == {done.pk, failed.pk}
    assert [r["id"] for r in reader_client.get(BUILDS, {"status": "failed"}).json()["results"]] \
        == [failed.pk]
    assert [r["id"] for r in reader_client.get(BUILDS, {"preset": "seed-512"})
            .json()["results"]] == [done.pk]
    assert reader_client.get(f"{BUILDS}{failed.pk}/").json()["error"] == "out of disk"


def test_builds_are_read_only(admin_client_api, db):
    build = ClusterBuild.objects.create(preset="seed-512", name="a")
    assert admin_client_api.patch(f"{BUILDS}{build.pk}/", {"status": "succeeded"},
                                  format="json").status_code == 405
    assert admin_client_api.delete(f"{BUILDS}{build.pk}/").status_code == 405


@pytest.mark.worker
def test_build_end_to_end_with_a_real_worker(celery_worker, transactional_db, admin_user):
    """POST → 202 → the worker builds → GET shows succeeded → the cluster is there."""
    from rest_framework.authtoken.models import Token

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=admin_user).key}")
    response = client.post(BUILDS, {"preset": "seed-512", "name": "e2e", "supernodes": 1},
                           format="json")
    assert response.status_code == 202, response.content
    url = response.json()["url"]
    deadline = time.monotonic() + 180
    status: dict = {}
    while time.monotonic() < deadline:
        status = client.get(url).json()
        if status["status"] in ("succeeded", "failed"):
            break
        time.sleep(0.25)
    assert status["status"] == "succeeded", status
    assert status["progress"] == 1.0
    cluster = Cluster.objects.get(name="e2e")
    assert status["cluster"] == cluster.pk
    assert status["result"]["cards"] == 512
    assert Card.objects.filter(supernode__cluster=cluster).count() == 512
    summary = client.get(reverse("api:cluster-summary", args=[cluster.pk])).json()
    assert summary["counts"]["cards"] == 512
    assert summary["power"]["racks_over_budget"]["count"] == 0
    assert summary["racks_per_supernode"]["min"] == status["result"]["racks_per_supernode"]
