"""``/api/scenarios/``: validated up front, queued on commit, listed, cancelled, cached."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse
from rest_framework.test import APIClient

from tests.scenarios.conftest import SCENARIOS, post
from twin.hardware.models import SuperNode
from twin.scenarios.kinds import get_kind
from twin.scenarios.models import ScenarioRun
from twin.scenarios.runner import execute, submit

TORUS = {"kind": "topology", "params": {"family": "torus", "dims": [4, 4, 4]}}


def test_a_valid_run_is_202_and_queued_on_commit(admin_client_api, admin_user, db, published,
                                                 django_capture_on_commit_callbacks):
    response, callbacks = post(admin_client_api, TORUS, django_capture_on_commit_callbacks)
    assert response.status_code == 202, response.content
    body = response.json()
    run = ScenarioRun.objects.get()
    assert body["id"] == run.pk and body["status"] == "queued" and body["progress"] == 0
    assert response["Location"].endswith(reverse("api:scenariorun-detail", args=[run.pk]))
    assert body["url"] == response["Location"]
    assert body["websocket"] == f"/ws/scenarios/{run.pk}/"
    assert body["cached"] is False and body["result"] is None
    assert body["inputs"]["topology"] == {"family": "torus", "dims": [4, 4, 4],
                                          "link_gbps": 400.0, "link_ns": 5.0,
                                          "switch_ns": 10.0}
    assert run.created_by == admin_user and run.task_id and len(run.params_hash) == 64
    assert len(callbacks) == 1  # the task goes out once the row is committed
    assert published == []  # ... and not before


BAD = [
    # (body, cluster?, field, words in the reason)
    ({"kind": "weather"}, False, "kind", "unknown kind 'weather'"),
    ({"kind": "topology", "params": {"family": "hypercube"}}, False, "params.family",
     "unknown family 'hypercube'"),
    ({"kind": "topology", "params": {"family": "torus", "dims": [8, 1, 8]}}, False,
     "params.dims[1]", "≥ 2, got 1"),
    ({"kind": "topology", "params": {"family": "ring", "nodes": 1}}, False, "params.nodes",
     "≥ 2"),
    ({"kind": "collective", "params": {"family": "ring", "nodes": 8, "op": "allreduce",
                                       "ranks": 16}}, False, "params.ranks",
     "16 ranks but the topology has only 8 cards"),
    ({"kind": "collective", "params": {"op": "allreduce", "ranks": 16}}, True, "params.ranks",
     "only 8 cards"),
    ({"kind": "collective", "params": {"family": "ring", "nodes": 8, "op": "allreduce",
                                       "sizes": [1024, -5]}}, False, "params.sizes[1]",
     "> 0 bytes, got -5"),
    ({"kind": "collective", "params": {"family": "ring", "nodes": 8, "op": "allgather",
                                       "algorithm": "tree"}}, False, "params.algorithm",
     "only does AllReduce"),
    ({"kind": "collective", "params": {"family": "full_mesh", "nodes": 8, "op": "allreduce",
                                       "algorithm": "nvls"}}, False, "params.algorithm",
     "switches reduce in flight"),
    ({"kind": "collective", "params": {"family": "ring", "nodes": 8, "op": "allreduce",
                                       "scale_up_efficiency": 1.5}}, False,
     "params.scale_up_efficiency", "a fraction of line rate in (0, 1]"),
    ({"kind": "route", "params": {"family": "ring", "nodes": 8, "src": 0, "dst": 8}}, False,
     "params.dst", "card 8 does not exist (valid: 0…7)"),
    ({"kind": "failure", "params": {"family": "ring", "nodes": 8, "random_links": 9}}, False,
     "params.random_links", "cannot remove 9 links: only 8 exist"),
    ({"kind": "failure", "params": {"family": "ring", "nodes": 8, "links": [3],
                                    "random_links": 8}}, False, "params.random_links",
     "only 7 exist besides the ones chosen"),
    ({"kind": "failure", "params": {"family": "ring", "nodes": 8, "links": [8]}}, False,
     "params.links[0]", "link 8 does not exist"),
    ({"kind": "failure", "params": {"random_links": 99}}, True, "params.random_links",
     "only"),
    ({"kind": "failure", "params": {"family": "ring", "nodes": 8, "random_cards": -1}}, False,
     "params.random_cards", "≥ 0"),
    ({"kind": "topology", "params": [1, 2]}, False, "params", "object"),
    ({"kind": "topology", "params": {"family": "ring", "nodes": 8, "colour": "red"}}, False,
     "params.colour", "unknown field"),
    ({"kind": "topology", "params": {"family": "ring", "nodes": 8}}, True, "params.family",
     "not both"),
    ({"kind": "topology", "params": {}}, False, "params.family", "give a family"),
]


@pytest.mark.parametrize(("body", "on_cluster", "field", "text"), BAD,
                         ids=[f"{b['kind']}-{f}" for b, _, f, _ in BAD])
def test_bad_input_is_400_on_the_field_and_queues_nothing(
        admin_client_api, tiny_cluster, published, django_capture_on_commit_callbacks,
        body, on_cluster, field, text):
    if on_cluster:
        body = {**body, "cluster": tiny_cluster["cluster"].pk}
    before = ScenarioRun.objects.count()
    response, callbacks = post(admin_client_api, body, django_capture_on_commit_callbacks)
    assert response.status_code == 400, response.content
    errors = response.json()
    assert field in errors, errors
    assert text in errors[field][0], errors
    assert ScenarioRun.objects.count() == before
    assert callbacks == [] and published == []


def test_a_card_that_does_not_exist_is_409(admin_client_api, tiny_cluster, published,
                                           django_capture_on_commit_callbacks):
    """A route between a card and a serial no card has: well formed, a conflict with
    what is stored (it was a 400)."""
    body = {"kind": "route", "cluster": tiny_cluster["cluster"].pk,
            "params": {"src": "TINY-0000", "dst": "NO-SUCH-CARD"}}
    response, callbacks = post(admin_client_api, body, django_capture_on_commit_callbacks)
    assert response.status_code == 409, response.content
    assert "no card with serial 'NO-SUCH-CARD'" in response.json()["params.dst"][0]
    assert callbacks == [] and published == []
    body["params"] = {"src": 0}
    response, _ = post(admin_client_api, body, django_capture_on_commit_callbacks)
    assert response.status_code == 409, response.content
    assert "no card with id 0" in response.json()["params.src"][0]


def test_a_cluster_that_does_not_exist_is_409(admin_client_api, tiny_cluster, published,
                                             django_capture_on_commit_callbacks):
    """Well formed, but names no stored row: a conflict on the field (it was a 400)."""
    before = ScenarioRun.objects.count()
    response, callbacks = post(admin_client_api, {"kind": "topology", "cluster": 987654},
                               django_capture_on_commit_callbacks)
    assert response.status_code == 409, response.content
    assert "Invalid pk" in response.json()["cluster"][0]
    assert ScenarioRun.objects.count() == before and callbacks == [] and published == []


def test_a_cluster_the_simulation_cannot_represent_is_a_cluster_error(
        admin_client_api, tiny_cluster, published, django_capture_on_commit_callbacks):
    tiny_cluster["cards"][7].delete()
    response, callbacks = post(admin_client_api, {"kind": "topology",
                                                  "cluster": tiny_cluster["cluster"].pk},
                               django_capture_on_commit_callbacks)
    assert response.status_code == 400
    assert "fully populated" in response.json()["cluster"][0]
    assert not ScenarioRun.objects.exists() and callbacks == [] and published == []


def test_runs_are_listed_filtered_and_read(admin_client_api, admin_user, tiny_cluster):
    ring = submit("topology", {"family": "ring", "nodes": 8}, None, admin_user, enqueue=False)
    on_cluster = submit("route", {"src": "TINY-0000", "dst": "TINY-0007"},
                        tiny_cluster["cluster"], admin_user, enqueue=False)
    execute(ring.pk)
    listing = admin_client_api.get(SCENARIOS).json()
    assert [r["id"] for r in listing["results"]] == [on_cluster.pk, ring.pk]
    assert "result" not in listing["results"][0]  # the list stays light
    for query, expected in [("kind=topology", [ring.pk]), ("kind=route,failure", [on_cluster.pk]),
                            ("status=succeeded", [ring.pk]),
                            ("status=queued&status=running", [on_cluster.pk]),
                            (f"cluster={tiny_cluster['cluster'].pk}", [on_cluster.pk])]:
        got = admin_client_api.get(f"{SCENARIOS}?{query}").json()["results"]
        assert [r["id"] for r in got] == expected, query
    detail = admin_client_api.get(f"{SCENARIOS}{ring.pk}/").json()
    assert detail["status"] == "succeeded" and detail["progress"] == 1.0
    assert detail["result"]["avg_hops_exact"] == "16/7"  # ring of 8: 2·(1+2+3)+4 over 7
    assert detail["duration_s"] is not None and detail["finished"]
    # The summary rows the table shows are the kind's own rows() of the stored result.
    assert detail["rows"] == [list(r) for r in get_kind("topology").rows(detail["result"])]
    assert ["avg_hops", "2.2857143 (= 16/7)"] in detail["rows"]
    route = admin_client_api.get(f"{SCENARIOS}{on_cluster.pk}/").json()
    assert route["rows"] is None  # still queued: nothing to summarise
    assert route["inputs"]["cards"]["dst"]["serial"] == "TINY-0007"
    assert route["inputs"]["dst"] == 7  # x=1, y=1, z=1 of the 2×2×2 torus


def test_reads_need_a_login_and_starting_needs_the_permission(anon_client, reader_client,
                                                              reader, db, published):
    assert anon_client.get(SCENARIOS).status_code == 401
    assert anon_client.post(SCENARIOS, TORUS, format="json").status_code == 401
    assert reader_client.get(SCENARIOS).status_code == 200
    assert reader_client.post(SCENARIOS, TORUS, format="json").status_code == 403
    reader.user_permissions.add(Permission.objects.get(codename="add_scenariorun"))
    client = APIClient()
    client.force_authenticate(User.objects.get(pk=reader.pk))
    assert client.post(SCENARIOS, TORUS, format="json").status_code == 202
    assert not published  # the on-commit callback never runs inside a test transaction


def test_cancel_queued_run_then_409(admin_client_api, admin_user, reader_client, db):
    run = submit("topology", {"family": "ring", "nodes": 16}, None, admin_user, enqueue=False)
    url = f"{SCENARIOS}{run.pk}/cancel/"
    assert reader_client.post(url).status_code == 403  # not the creator, no permission
    response = admin_client_api.post(url)
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "cancelled" and body["finished"]
    again = admin_client_api.post(url)
    assert again.status_code == 409 and "already cancelled" in again.json()["detail"]
    # a worker that picks the task up later leaves it alone
    assert execute(run.pk).status == "cancelled"
    run.refresh_from_db()
    assert run.result is None and run.started is None


def test_the_same_params_on_the_same_model_reuse_the_result(
        admin_client_api, admin_user, tiny_cluster, published, django_capture_on_commit_callbacks):
    body = {"kind": "topology", "cluster": tiny_cluster["cluster"].pk}
    first, _ = post(admin_client_api, body, django_capture_on_commit_callbacks)
    assert first.status_code == 202
    original = execute(first.json()["id"])
    assert original.status == "succeeded"

    again, callbacks = post(admin_client_api, body, django_capture_on_commit_callbacks)
    assert again.status_code == 201, again.content  # done already: Created, not Accepted
    cached = again.json()
    assert cached["status"] == "succeeded" and cached["cached"] is True
    assert cached["cached_from"] == original.pk and cached["result"] == original.result
    assert callbacks == [] and published == []

    refreshed, callbacks = post(admin_client_api, {**body, "refresh": True},
                                django_capture_on_commit_callbacks)
    assert refreshed.status_code == 202 and len(callbacks) == 1

    # change the model: the converted inputs differ, so the cache no longer applies
    SuperNode.objects.filter(pk=tiny_cluster["supernode"].pk).update(link_latency_ns=90)
    changed, callbacks = post(admin_client_api, body, django_capture_on_commit_callbacks)
    assert changed.status_code == 202 and len(callbacks) == 1
    assert changed.json()["inputs"]["topology"]["supernodes"][0]["fabric"]["link_ns"] == 90.0
    assert ScenarioRun.objects.filter(cached_from__isnull=False).count() == 1
    # ... and filters tell cached runs apart
    only_cached = admin_client_api.get(f"{SCENARIOS}?cached=true").json()["results"]
    assert [r["id"] for r in only_cached] == [cached["id"]]
