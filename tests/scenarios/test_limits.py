"""Scenario runs are bounded: sizes refused up front with the limit, at most a few
active runs per user, result assembly linear in the sizes (issue 11, item 2)."""
from __future__ import annotations

import time

import pytest
from django.contrib.auth.models import Permission, User
from rest_framework.test import APIClient

from tests.scenarios.conftest import SCENARIOS, post
from twin.scenarios.kinds.collective import size_rows
from twin.scenarios.kinds.limits import (
    MAX_LIST_ITEMS,
    MAX_SAMPLES,
    MAX_SIZES,
    MAX_TOPOLOGY_CARDS,
)
from twin.scenarios.models import ScenarioRun
from twin.scenarios.runner import max_active_per_user

pytestmark = pytest.mark.django_db

RING = {"family": "ring", "nodes": 8}


def refused(client, body, callbacks_fixture, published) -> dict[str, list[str]]:
    response, callbacks = post(client, body, callbacks_fixture)
    assert response.status_code == 400, response.content
    assert ScenarioRun.objects.count() == 0 and callbacks == [] and published == []
    return response.json()


def test_defaults_are_the_documented_ones():
    assert (MAX_SIZES, MAX_LIST_ITEMS, MAX_SAMPLES, MAX_TOPOLOGY_CARDS) == (
        64, 4096, 10_000, 1 << 20)
    assert max_active_per_user() == 4


def test_forty_thousand_message_sizes_are_refused_with_the_limit(
        admin_client_api, published, django_capture_on_commit_callbacks):
    body = {"kind": "collective", "params": {**RING, "op": "allreduce",
                                             "sizes": list(range(1, 40_001))}}
    errors = refused(admin_client_api, body, django_capture_on_commit_callbacks, published)
    assert list(errors) == ["params.sizes"]
    assert "at most 64 message sizes" in errors["params.sizes"][0]
    assert "40,000" in errors["params.sizes"][0]
    body["params"]["sizes"] = list(range(1, MAX_SIZES + 1))
    response, _ = post(admin_client_api, body, django_capture_on_commit_callbacks)
    assert response.status_code == 202, response.content


@pytest.mark.parametrize("key", ["links", "nodes", "link_pairs"])
def test_failure_lists_are_bounded(key, admin_client_api, published,
                                   django_capture_on_commit_callbacks):
    item = [0, 1] if key == "link_pairs" else 0
    body = {"kind": "failure", "params": {"family": "torus", "dims": [4, 4],
                                          key: [item] * (MAX_LIST_ITEMS + 1)}}
    errors = refused(admin_client_api, body, django_capture_on_commit_callbacks, published)
    assert list(errors) == [f"params.{key}"]
    assert f"at most {MAX_LIST_ITEMS:,}" in errors[f"params.{key}"][0]


@pytest.mark.parametrize("kind", ["topology", "failure"])
def test_samples_are_bounded(kind, admin_client_api, published,
                             django_capture_on_commit_callbacks):
    body = {"kind": kind, "params": {**RING, "samples": MAX_SAMPLES + 1}}
    errors = refused(admin_client_api, body, django_capture_on_commit_callbacks, published)
    assert list(errors) == ["params.samples"]
    assert f"at most {MAX_SAMPLES:,}" in errors["params.samples"][0]


def test_a_family_larger_than_the_limit_is_refused(admin_client_api, published,
                                                   django_capture_on_commit_callbacks):
    # 2,097,152 cards: within the simulation's own guard (16 M), past the twin's.
    body = {"kind": "topology", "params": {"family": "torus", "dims": [128, 128, 128]}}
    errors = refused(admin_client_api, body, django_capture_on_commit_callbacks, published)
    assert list(errors) == ["params.dims"]
    assert f"at most {MAX_TOPOLOGY_CARDS:,} cards" in errors["params.dims"][0]


def test_a_user_has_at_most_four_active_runs(admin_client_api, admin_user,
                                             django_capture_on_commit_callbacks):
    def start(nodes: int):
        body = {"kind": "topology", "params": {"family": "ring", "nodes": nodes}}
        return post(admin_client_api, body, django_capture_on_commit_callbacks)

    for nodes in range(8, 12):
        assert start(nodes)[0].status_code == 202
    response, callbacks = start(12)
    assert response.status_code == 429, response.content
    assert response.json()["limit"] == 4 and response.json()["active"] == 4
    assert "limit is 4" in response.json()["detail"] and callbacks == []
    assert ScenarioRun.objects.count() == 4

    # Another user is not held back by this one's runs.
    other = User.objects.create_user("other", "o@example.com", "other-pass-123")
    other.user_permissions.set(Permission.objects.filter(codename="add_scenariorun"))
    client = APIClient()
    client.force_authenticate(User.objects.get(pk=other.pk))
    assert client.post(SCENARIOS, {"kind": "topology", "params": RING},
                       format="json").status_code == 202

    # Once one of them ends (here: cancelled), a new one is accepted.
    first = ScenarioRun.objects.filter(created_by=admin_user).order_by("pk").first()
    assert admin_client_api.post(f"{SCENARIOS}{first.pk}/cancel/").status_code == 200
    assert start(12)[0].status_code == 202


def test_the_limit_holds_for_a_logged_in_browser_session(admin_user):
    """The dashboard posts with the session cookie: ``request.user`` is a lazy
    object there, not a ``User`` (the limit must not trip over it)."""
    from django.test import Client

    client = Client()
    client.force_login(admin_user)
    for nodes in range(8, 13):
        response = client.post(SCENARIOS, {"kind": "topology",
                                           "params": {"family": "ring", "nodes": nodes}},
                               content_type="application/json")
        assert response.status_code == (202 if nodes < 12 else 429), response.content


def test_size_rows_are_linear_in_the_number_of_sizes():
    """60,000 sizes × 5 algorithms: one pass (well under a second), where a scan of
    every point per size (the old loop) would take hours."""
    from simulation.collectives.models import CollectivePoint

    algorithms = ("ring", "tree", "direct", "torus", "nvls")
    sizes = range(1, 60_001)
    points = [CollectivePoint(size, a, 1e-6 * size, 1.0, 2.0, 0.125, 0.25)
              for size in sizes for a in algorithms]
    best = [p for p in points if p.algorithm == "tree"]
    started = time.perf_counter()
    rows = size_rows(points, best)
    assert time.perf_counter() - started < 5.0
    assert [r["size_bytes"] for r in rows] == list(sizes)
    assert rows[41]["algorithm"] == "tree"
    assert sorted(rows[41]["algorithms"]) == sorted(algorithms)
    assert rows[41]["algorithms"]["ring"] == {"time_s": 1e-6 * 42, "algbw_gbps": 1.0,
                                              "busbw_gbps": 2.0, "busbw_GBps": 0.25}
