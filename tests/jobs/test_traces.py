"""Trace upload (multipart, size limit, per-row errors, nothing stored from a bad file)
and the ``scheduling`` scenario kind through the API: 400s per field, and a run on an
uploaded trace end to end through the real Celery worker."""
from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings

from tests.conftest import wait_until
from twin.jobs.models import Trace

TRACES = "/api/jobs/traces/"
NODES = ("sn,cpu_milli,memory_mib,gpu,model\n"
         + "".join(f"node-{i},96000,786432,8,V100M32\n" for i in range(6))
         + "".join(f"cpu-{i},64000,262144,0,\n" for i in range(2)))
PODS_HEADER = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
               "creation_time,deletion_time,scheduled_time\n")
PODS = PODS_HEADER + "".join(
    f"pod-{i},{8000 if i % 3 else 4000},32768,{(1, 1, 2, 8)[i % 4]},"
    f"{(500, 1000, 1000, 1000)[i % 4]},,LS,Running,{100 + i},{5000 + 7 * i},{101 + i}\n"
    for i in range(40))


def upload(client: Any, pods: str = PODS, nodes: str | None = NODES, fmt: str = "alibaba-gpu-2023",
           name: str = "openb-sample") -> Any:
    data: dict[str, Any] = {"name": name, "format": fmt,
                            "jobs": SimpleUploadedFile("pods.csv", pods.encode(), "text/csv")}
    if nodes is not None:
        data["nodes"] = SimpleUploadedFile("nodes.csv", nodes.encode(), "text/csv")
    return client.post(TRACES, data, format="multipart")


def test_upload_parses_and_stores_the_trace(admin_client_api, db) -> None:
    response = upload(admin_client_api)
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["job_count"], body["node_count"], body["gpu_count"]) == (40, 8, 48)
    assert body["uploaded_by"] == "admin" and len(body["sha256"]) == 64
    trace = Trace.objects.get(pk=body["id"])
    assert len(trace.workload_dict()["jobs"]) == 40
    assert trace.nodes_dict()["nodes"][0]["gpu_model"] == "V100M32"
    assert trace.sha256 == Trace.digest(trace.nodes, trace.workload)
    listed = admin_client_api.get(TRACES, {"trace_format": "alibaba-gpu-2023"}).json()
    assert [t["id"] for t in listed["results"]] == [body["id"]]


def test_bad_rows_answer_400_with_line_numbers_and_store_nothing(admin_client_api, db) -> None:
    bad = PODS_HEADER + ("ok,1000,10,1,1000,,LS,Running,1,2,1\n"
                         "two,1000,10,2,500,,LS,Running,1,2,1\n"
                         "neg,abc,10,1,1000,,LS,Running,1,2,1\n")
    response = upload(admin_client_api, pods=bad,
                      nodes="sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,8,\n")
    assert response.status_code == 400, response.content
    errors = response.json()
    assert any("line 3" in m and "gpu_milli" in m for m in errors["jobs"]), errors
    assert any("line 4" in m and "cpu_milli" in m for m in errors["jobs"]), errors
    assert any("line 2" in m and "model" in m for m in errors["nodes"]), errors
    assert not Trace.objects.exists()


@pytest.mark.parametrize(("data", "field"), [
    ({"format": "slurm"}, "format"),
    ({"name": ""}, "name"),
])
def test_bad_form_fields_answer_400(admin_client_api, db, data: dict[str, str],
                                    field: str) -> None:
    body = {"name": "x", "format": "helios",
            "jobs": SimpleUploadedFile("a.csv", b"x\n", "text/csv"), **data}
    response = admin_client_api.post(TRACES, body, format="multipart")
    assert response.status_code == 400 and field in response.json()
    assert not Trace.objects.exists()


def test_a_node_list_goes_with_the_alibaba_format_only_and_binary_is_refused(
        admin_client_api, db) -> None:
    response = upload(admin_client_api, fmt="helios")
    assert response.status_code == 400 and "nodes" in response.json()
    response = upload(admin_client_api, pods="\xff\xfe garbage", nodes=None)
    assert response.status_code == 400 and "jobs" in response.json()
    assert not Trace.objects.exists()


def test_an_upload_over_the_limit_is_413_and_stores_nothing(admin_client_api, db) -> None:
    with override_settings(TWIN_TRACE_MAX_BYTES=1000):
        response = upload(admin_client_api)
    assert response.status_code == 413 and response.json()["limit"] == 1000
    assert not Trace.objects.exists()


def test_upload_needs_permission(reader_client, anon_client, db) -> None:
    assert upload(reader_client).status_code == 403
    assert upload(anon_client).status_code == 401
    assert not Trace.objects.exists()


# ------------------------------------------------------------- the kind
SCENARIOS = "/api/scenarios/"


@pytest.mark.parametrize(("params", "field"), [
    ({"policies": "fgd,magic"}, "params.policies[1]"),
    ({"policies": ""}, "params.policies[0]"),
    ({"mode": "half"}, "params.mode"),
    ({"trace": 999999}, "params.trace"),
    ({"jobs": 0}, "params.jobs"),
    ({"target_load": 0}, "params.target_load"),
    ({"from_live": True}, "params.from_live"),
    ({"family": "torus"}, "params.family"),
])
def test_the_scheduling_kind_refuses_bad_params_per_field(admin_client_api, db, published,
                                                          params: dict[str, Any],
                                                          field: str) -> None:
    response = admin_client_api.post(SCENARIOS, {"kind": "scheduling", "params": params},
                                     format="json")
    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
    assert published == []


def test_scheduling_with_a_cluster_refuses_shape_options(admin_client_api, tiny_cluster) -> None:
    response = admin_client_api.post(SCENARIOS, {
        "kind": "scheduling", "cluster": tiny_cluster["cluster"].pk,
        "params": {"servers": 4}}, format="json")
    assert response.status_code == 400 and "params.servers" in response.json()


def test_the_forms_described_defaults_are_accepted_on_a_cluster(tiny_cluster) -> None:
    """The dashboard's form sends every described default: on a cluster they must not
    include the uniform-node shape (refused there)."""
    from twin.scenarios.kinds import get_kind

    kind = get_kind("scheduling")
    params = {f.name: f.default for f in kind.fields if f.default is not None}
    inputs = kind.prepare(params, tiny_cluster["cluster"])
    assert inputs["nodes"]["source"] == "cluster"
    assert inputs["workload"] == {"source": "synthetic", "jobs": 2000}
    assert inputs["options"]["policies"] == ["fgd", "best-fit", "topology-aware"]


def test_from_live_starts_from_the_twins_jobs_and_failed_cards(admin_client_api,
                                                               tiny_cluster) -> None:
    from twin.hardware.models import Card
    from twin.jobs.models import Allocation
    from twin.scenarios.kinds import get_kind

    Card.objects.filter(pk=tiny_cluster["cards"][7].pk).update(status="failed")
    live = admin_client_api.post("/api/jobs/", {
        "cluster": tiny_cluster["cluster"].pk, "name": "live", "tenant": "t", "cards": 4,
        "duration_s": 3600}, format="json").json()
    slots = sorted(Allocation.objects.filter(job_id=live["id"]).values_list("card__slot",
                                                                            flat=True))
    kind = get_kind("scheduling")
    inputs = kind.prepare({"policies": "best-fit", "from_live": True, "jobs": 30},
                          tiny_cluster["cluster"])
    assert inputs["nodes"]["failed_cards"] == 1
    pinned = inputs["nodes"]["live_jobs"]
    # pinned to the very cards it holds live (node 0 = the one server), all of each card
    assert sorted(c for _, c, _ in pinned[0]["placement"]) == slots
    assert {(n, share) for n, _, share in pinned[0]["placement"]} == {(0, 1.0)}
    assert 3590 < pinned[0]["remaining_s"] <= 3600
    assert inputs["allreduce"]["nvlink_gbps"] == tiny_cluster["h100"].scaleup_gbps * 4
    result = kind.run(inputs, lambda *_: None)
    assert result["nodes"]["gpus"] == 7 and result["workload"]["live_jobs"] == 1
    policy = result["policies"][0]
    assert policy["jobs"]["pinned"] == 1 and policy["jobs"]["placed"] >= 1
    # the playback starts with the pinned cards in the one rack; arrivals only fill the rest
    rack = tiny_cluster["cluster"].racks.filter(servers__isnull=False).first().pk
    assert result["racks"] == {"ids": [rack], "cards": [7]}
    timeline = policy["rack_timeline"]
    assert timeline["axis"] == "arrivals" and timeline["allocated"][0] == [4.0]
    assert 4.0 <= timeline["allocated"][-1][0] <= 7.0
    assert policy["gpu_allocation_rate"] >= 4 / 7
    # the table lists the workload's placed tasks (the pinned job is not one of them)
    table = policy["job_table"]
    assert table["total"] == policy["jobs"]["placed"] and table["rows"]
    assert "pinned" in result["workload"]["note"]


@pytest.mark.worker
def test_a_scheduling_run_on_an_uploaded_trace_in_the_worker(celery_worker, admin_client_api,
                                                            transactional_db) -> None:
    trace = upload(admin_client_api).json()
    response = admin_client_api.post(SCENARIOS, {"kind": "scheduling", "params": {
        "trace": trace["id"], "policies": "fgd,best-fit,random", "seed": 1}}, format="json")
    assert response.status_code == 202, response.content
    run_id = response.json()["id"]

    def done() -> dict | None:
        body = admin_client_api.get(f"{SCENARIOS}{run_id}/").json()
        return body if body["status"] in ("succeeded", "failed") else None

    body = wait_until(done, timeout=120, what="the scheduling run")
    assert body["status"] == "succeeded", body["error"]
    result = body["result"]
    assert [p["policy"] for p in result["policies"]] == ["fgd", "best-fit", "random"]
    assert result["nodes"] == {"source": "trace", "count": 8, "gpus": 48, "failed_cards": 0,
                               "trace": trace["id"]}
    for policy in result["policies"]:
        assert 0 < policy["gpu_allocation_rate"] <= 1
        assert policy["curve"][-1][0] >= 1.3  # arrivals went past capacity
        xs = [x for x, _ in policy["curve"]]
        assert xs == sorted(xs)
    labels = [row[0] for row in body["rows"]]
    assert labels[:2] == ["nodes", "workload"] and "fgd" in labels
