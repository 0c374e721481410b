"""Jobs over the REST API: submit (placed or queued), list/filter, cancel, permissions, 400s."""
from __future__ import annotations

import io
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from rest_framework.test import APIClient

from twin.core.roles import OPERATOR, VIEWER
from twin.jobs.choices import JobStateChoices
from twin.jobs.models import Allocation, Job

JOBS = "/api/jobs/"


def client_with(role: str, name: str) -> APIClient:
    user = User.objects.create_user(name, password="role-pass-123")
    call_command("assign_role", name, role, stdout=io.StringIO())
    client = APIClient()
    client.force_authenticate(User.objects.get(pk=user.pk))
    return client


def body(world: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"cluster": world["cluster"].pk, "name": "train", "tenant": "team-a", "cards": 4,
            **fields}


def submit(client: APIClient, world: dict[str, Any], **fields: Any) -> dict[str, Any]:
    response = client.post(JOBS, body(world, **fields), format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_submit_places_the_job_at_once_with_its_quality(admin_client_api, tiny_cluster) -> None:
    job = submit(admin_client_api, tiny_cluster, cards=4)
    assert job["state"] == "running" and job["policy"] == "topology-aware"
    assert len(job["cards_held"]) == 4
    q = job["placement"]
    assert (q["cards"], q["servers"], q["supernodes"]) == (4, 1, 1)
    assert q["allreduce_s"] > 0 and q["allreduce_algorithm"]
    assert q["vs_compact"] == pytest.approx(q["allreduce_s"] / q["compact_allreduce_s"])
    assert Allocation.objects.filter(job_id=job["id"]).count() == 4
    assert job["submitted_by"] == "admin"


def test_a_job_that_does_not_fit_is_queued_and_placed_when_cards_are_released(
        admin_client_api, tiny_cluster) -> None:
    first = submit(admin_client_api, tiny_cluster, cards=6)
    second = submit(admin_client_api, tiny_cluster, cards=4, name="waits")
    assert second["state"] == "queued" and "no room for 4 card(s)" in second["message"]
    assert second["cards_held"] == [] and second["placement"] is None
    response = admin_client_api.post(f"{JOBS}{first['id']}/cancel/")
    assert response.status_code == 200 and response.json()["state"] == "cancelled"
    assert not Allocation.objects.filter(job_id=first["id"]).exists()
    again = admin_client_api.get(f"{JOBS}{second['id']}/").json()
    assert again["state"] == "running" and len(again["cards_held"]) == 4
    assert admin_client_api.post(f"{JOBS}{first['id']}/cancel/").status_code == 409


def test_shared_jobs_fill_one_card_and_failed_cards_take_nothing(admin_client_api,
                                                                 tiny_cluster) -> None:
    from twin.hardware.models import Card

    Card.objects.filter(pk__in=[c.pk for c in tiny_cluster["cards"][1:]]).update(status="failed")
    a = submit(admin_client_api, tiny_cluster, cards=1, share_milli=600)
    b = submit(admin_client_api, tiny_cluster, cards=1, share_milli=400, tenant="team-b")
    c = submit(admin_client_api, tiny_cluster, cards=1, share_milli=100, tenant="team-c")
    assert a["cards_held"] == b["cards_held"] == [tiny_cluster["cards"][0].pk]
    assert c["state"] == "queued" and "100 ‰ free" in c["message"]
    vfs = set(Allocation.objects.values_list("vf_index", flat=True))
    assert len(vfs) == 2  # one virtual function per job on the server


def test_the_vf_limit_queues_the_next_tenant(admin_client_api, tiny_cluster) -> None:
    server = tiny_cluster["server"]
    server.vf_limit = 2
    server.save()
    for i in range(2):
        assert submit(admin_client_api, tiny_cluster, cards=1, name=f"j{i}")["state"] == "running"
    assert submit(admin_client_api, tiny_cluster, cards=1, name="j2")["state"] == "queued"


def test_a_job_that_is_not_a_gang_takes_what_fits(admin_client_api, tiny_cluster) -> None:
    submit(admin_client_api, tiny_cluster, cards=6)
    job = submit(admin_client_api, tiny_cluster, cards=4, gang=False, name="elastic")
    assert job["state"] == "running" and len(job["cards_held"]) == 2
    assert "2 of 4 asked" in job["message"]


@pytest.mark.parametrize(("fields", "field", "text"), [
    ({"cards": 0}, "cards", "At least 1"),
    ({"cards": 2, "share_milli": 500}, "share_milli", "fraction of one card"),
    ({"share_milli": 1001}, "share_milli", "At most 1,000"),
    ({"policy": "magic"}, "policy", "unknown policy"),
    ({"qos": "urgent"}, "qos", "not a valid choice"),
    ({"name": ""}, "name", "blank"),
    ({"duration_s": 0}, "duration_s", "At least 1"),
    ({"priority": 5000}, "priority", "1,000"),
])
def test_bad_fields_answer_400_on_the_field_and_write_nothing(admin_client_api, tiny_cluster,
                                                              fields, field, text) -> None:
    response = admin_client_api.post(JOBS, body(tiny_cluster, **fields), format="json")
    assert response.status_code == 400, response.content
    assert text in " ".join(response.json()[field])
    assert not Job.objects.exists()


def test_a_cluster_that_does_not_exist_is_a_409_on_the_field(admin_client_api,
                                                             tiny_cluster) -> None:
    """Well formed, but names no stored row: a conflict (it was a 400)."""
    response = admin_client_api.post(JOBS, body(tiny_cluster, cluster=987654), format="json")
    assert response.status_code == 409, response.content
    assert "does not exist" in " ".join(response.json()["cluster"])
    assert not Job.objects.exists()


def test_roles_operator_submits_and_cancels_viewer_reads(tiny_cluster, anon_client) -> None:
    operator = client_with(OPERATOR, "op")
    viewer = client_with(VIEWER, "view")
    job = submit(operator, tiny_cluster, cards=2)
    assert viewer.get(JOBS).json()["count"] == 1
    assert viewer.post(JOBS, body(tiny_cluster), format="json").status_code == 403
    assert viewer.post(f"{JOBS}{job['id']}/cancel/").status_code == 403
    assert anon_client.get(JOBS).status_code == 401
    assert anon_client.post(JOBS, body(tiny_cluster), format="json").status_code == 401
    assert Job.objects.count() == 1
    assert operator.delete(f"{JOBS}{job['id']}/").status_code == 403  # hardware admins delete
    assert operator.post(f"{JOBS}{job['id']}/cancel/").status_code == 200


def test_the_submitter_may_cancel_without_change_permission(tiny_cluster) -> None:
    from django.contrib.auth.models import Permission

    user = User.objects.create_user("sub", password="role-pass-123")
    user.user_permissions.add(Permission.objects.get(codename="add_job"))
    client = APIClient()
    client.force_authenticate(User.objects.get(pk=user.pk))
    job = submit(client, tiny_cluster, cards=1)
    assert client.post(f"{JOBS}{job['id']}/cancel/").status_code == 200


def test_a_running_job_is_not_deleted_a_cancelled_one_is(admin_client_api, tiny_cluster) -> None:
    job = submit(admin_client_api, tiny_cluster, cards=2)
    refused = admin_client_api.delete(f"{JOBS}{job['id']}/?cascade=true")
    assert refused.status_code == 409 and "Cancel it first" in refused.json()["detail"]
    admin_client_api.post(f"{JOBS}{job['id']}/cancel/")
    assert admin_client_api.delete(f"{JOBS}{job['id']}/").status_code == 204


def test_jobs_are_not_edited(admin_client_api, tiny_cluster) -> None:
    job = submit(admin_client_api, tiny_cluster, cards=2)
    assert admin_client_api.patch(f"{JOBS}{job['id']}/", {"cards": 8},
                                  format="json").status_code == 405


def test_filters_and_the_cluster_allocations(admin_client_api, tiny_cluster) -> None:
    a = submit(admin_client_api, tiny_cluster, cards=2, tenant="alpha", name="llama")
    b = submit(admin_client_api, tiny_cluster, cards=8, tenant="beta", name="gpt")
    ids = lambda q: {r["id"] for r in admin_client_api.get(JOBS, q).json()["results"]}  # noqa: E731
    assert ids({"state": "running"}) == {a["id"]}
    assert ids({"state": "queued"}) == {b["id"]}
    assert ids({"tenant": "beta"}) == {b["id"]}
    assert ids({"q": "llam"}) == {a["id"]}
    assert ids({"card": a["cards_held"][0]}) == {a["id"]}
    assert ids({"cluster": tiny_cluster["cluster"].pk}) == {a["id"], b["id"]}
    assert admin_client_api.get(JOBS, {"state": "bogus"}).status_code == 400
    listed = admin_client_api.get("/api/jobs/allocations/", {"tenant": "alpha"}).json()
    assert {r["card"] for r in listed["results"]} == set(a["cards_held"])
    arrays = admin_client_api.get(
        f"/api/clusters/{tiny_cluster['cluster'].pk}/allocations/").json()
    assert arrays["card"] == sorted(a["cards_held"]) and set(arrays["job"]) == {a["id"]}
    assert arrays["tenants"] == ["alpha"] and arrays["jobs"][0]["placement"]["cards"] == 2


def test_job_admin_submits_and_cancels(client, admin_user, tiny_cluster) -> None:
    client.force_login(admin_user)
    response = client.post("/admin/jobs/job/add/", {
        "cluster": tiny_cluster["cluster"].pk, "name": "from-admin", "tenant": "ops", "cards": 2,
        "share_milli": 1000, "qos": "LS", "priority": 0, "gang": "on", "policy": "best-fit"})
    assert response.status_code == 302, response.content[:2000]
    job = Job.objects.get(name="from-admin")
    assert job.state == JobStateChoices.RUNNING and job.policy == "best-fit"
    assert client.get(f"/admin/jobs/job/{job.pk}/change/").status_code == 200
    assert client.get("/admin/jobs/job/?state=running").status_code == 200
    assert client.get("/admin/jobs/allocation/").status_code == 200
    client.post("/admin/jobs/job/", {"action": "cancel_jobs", "_selected_action": [job.pk]})
    job.refresh_from_db()
    assert job.state == JobStateChoices.CANCELLED and not job.allocations.exists()
