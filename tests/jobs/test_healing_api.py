"""Remediations over the REST API and the admin: reads, the operator's apply/reject,
the cluster's policy field, a job's checkpoint fields and action; 401/403/404/409/400."""
from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from tests.jobs.test_api import client_with
from twin.core.roles import OPERATOR, VIEWER
from twin.jobs import healing
from twin.jobs.models import Allocation, Job, Remediation
from twin.jobs.scheduler import submit

REMEDIATIONS = "/api/jobs/remediations/"


@pytest.fixture
def proposed(tiny_cluster: dict[str, Any]) -> Remediation:
    job = Job(cluster=tiny_cluster["cluster"], name="train", tenant="team-a", cards=2)
    job.full_clean()
    submit(job)
    card = Allocation.objects.filter(job=job).order_by("card_id").first().card_id
    return healing.handle_failure(card, "xid79", 1, detail="XID 79")


def test_reads_need_a_login_and_show_the_proposal(proposed, anon_client, db):
    viewer = client_with(VIEWER, "viewer")
    assert anon_client.get(REMEDIATIONS).status_code == 401
    listed = viewer.get(f"{REMEDIATIONS}?state=proposed&cause=xid79").json()["results"]
    assert [r["id"] for r in listed] == [proposed.pk]
    one = viewer.get(f"{REMEDIATIONS}{proposed.pk}/").json()
    assert one["state"] == "proposed" and one["cause"] == "xid79" and one["detail"] == "XID 79"
    assert one["proposal"]["jobs"][0]["action"] == "spare" and one["jobs"] == [
        one["proposal"]["jobs"][0]["job"]]
    assert viewer.get(f"{REMEDIATIONS}?state=applied").json()["results"] == []
    assert viewer.get(f"{REMEDIATIONS}?state=nonsense").status_code == 400
    assert viewer.get(f"{REMEDIATIONS}999999/").status_code == 404
    # read-only: no create, no delete
    assert viewer.delete(f"{REMEDIATIONS}{proposed.pk}/").status_code in (403, 405)


def test_only_operators_apply_and_a_decision_is_final(proposed, anon_client, db):
    viewer, operator = client_with(VIEWER, "viewer"), client_with(OPERATOR, "op")
    url = f"{REMEDIATIONS}{proposed.pk}/apply/"
    assert anon_client.post(url).status_code == 401
    assert viewer.post(url).status_code == 403
    assert Remediation.objects.get(pk=proposed.pk).state == "proposed"  # no write on refusal
    answer = operator.post(url)
    assert answer.status_code == 200, answer.content
    assert answer.json()["state"] == "applied" and answer.json()["applied_by"] == "op"
    again = operator.post(url)
    assert again.status_code == 409 and "applied" in again.json()["detail"]
    assert operator.post(f"{REMEDIATIONS}{proposed.pk}/reject/").status_code == 409


def test_reject_takes_a_reason_and_refuses_a_long_one(proposed, db):
    operator = client_with(OPERATOR, "op")
    url = f"{REMEDIATIONS}{proposed.pk}/reject/"
    bad = operator.post(url, {"reason": "x" * 201}, format="json")
    assert bad.status_code == 400 and "reason" in bad.json()
    ok = operator.post(url, {"reason": "the server is being replaced"}, format="json")
    assert ok.status_code == 200 and ok.json()["state"] == "rejected"
    assert "the server is being replaced" in ok.json()["message"]


def test_the_cluster_policy_is_a_field_of_the_cluster(tiny_cluster, admin_client_api):
    url = f"/api/clusters/{tiny_cluster['cluster'].pk}/"
    assert admin_client_api.get(url).json()["self_healing"] == "propose"
    bad = admin_client_api.patch(url, {"self_healing": "sometimes"}, format="json")
    assert bad.status_code == 400 and "self_healing" in bad.json()
    ok = admin_client_api.patch(url, {"self_healing": "apply"}, format="json")
    assert ok.status_code == 200 and ok.json()["self_healing"] == "apply"


def test_checkpoint_fields_and_action(tiny_cluster, admin_client_api, db):
    base = {"cluster": tiny_cluster["cluster"].pk, "name": "t", "tenant": "a", "cards": 2}
    bad = admin_client_api.post("/api/jobs/", {**base, "checkpoint_interval_s": 0,
                                               "model_params": -1}, format="json")
    assert bad.status_code == 400
    assert {"checkpoint_interval_s", "model_params"} <= set(bad.json())
    job = admin_client_api.post("/api/jobs/", {**base, "checkpoint_interval_s": 600,
                                               "model_params": 7e10}, format="json").json()
    assert job["checkpoint_interval_s"] == 600 and job["last_checkpoint_at"] is None
    url = f"/api/jobs/{job['id']}/checkpoint/"
    future = (timezone.now() + dt.timedelta(hours=1)).isoformat()
    bad = admin_client_api.post(url, {"at": future}, format="json")
    assert bad.status_code == 400 and "at" in bad.json()
    assert client_with(VIEWER, "viewer").post(url).status_code == 403
    ok = admin_client_api.post(url)
    assert ok.status_code == 200 and ok.json()["last_checkpoint_at"] is not None
    admin_client_api.post(f"/api/jobs/{job['id']}/cancel/")
    assert admin_client_api.post(url).status_code == 409


def test_admin_lists_reads_and_applies_by_action(proposed, admin_client):
    assert admin_client.get("/admin/jobs/remediation/").status_code == 200
    page = admin_client.get(f"/admin/jobs/remediation/{proposed.pk}/change/")
    assert page.status_code == 200 and b"spare" in page.content
    assert admin_client.get("/admin/jobs/remediation/add/").status_code == 403
    answer = admin_client.post("/admin/jobs/remediation/", {
        "action": "apply_proposals", "_selected_action": [proposed.pk]})
    assert answer.status_code == 302
    assert Remediation.objects.get(pk=proposed.pk).state == "applied"
