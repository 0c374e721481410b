"""The resilience kind through the API, the command and the real worker (issue 14's contract:
``run_scenario resilience --json`` prints interruptions by cause, ettr, lost_hours,
mean_time_to_recover_s and optimal_checkpoint_interval_min)."""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.scenarios.conftest import SCENARIOS, wait_for
from twin.scenarios.kinds import get_kind
from twin.scenarios.models import ScenarioRun

CONTRACT = {"interruptions", "ettr", "lost_hours", "mean_time_to_recover_s",
            "optimal_checkpoint_interval_min"}


def run(*args: str, **options: object) -> str:
    out = StringIO()
    call_command("run_scenario", *args, stdout=out, no_progress=True, **options)
    return out.getvalue()


def test_the_issue_command_prints_the_contract(db):
    params = {"accelerator": "h100-sxm5-80gb", "cards": 16384, "days": 54,
              "checkpoint_interval_min": 30, "sweep_runs": 1}
    result = json.loads(run("resilience", params=json.dumps(params), json=True))
    assert CONTRACT <= set(result)
    by_cause = result["interruptions"]["by_cause"]
    assert sum(by_cause.values()) == result["interruptions"]["total"]
    assert 350 < result["interruptions"]["total"] < 490  # Poisson(419): ±3.4σ
    assert "Faulty GPU" in by_cause and "GPU HBM3 Memory" in by_cause
    assert 0.5 < result["ettr"] < 1 and result["lost_hours"] > 0
    opt = result["optimal_checkpoint_interval_min"]
    assert {"young", "daly", "simulated"} <= set(opt) and opt["young"] < 30
    table = run("resilience", params=json.dumps({**params, "days": 2}))
    assert "ETTR" in table and "optimal interval" in table and "Young" in table


def test_the_command_refuses_bad_input_in_one_line(db):
    with pytest.raises(CommandError, match=r"params\.accelerator: no accelerator 'nope'"):
        run("resilience", params='{"cards": 8, "accelerator": "nope"}')
    with pytest.raises(CommandError, match=r"params\.cards: required without a cluster"):
        run("resilience", params='{"days": 3}')


def test_on_a_cluster_its_cards_and_accelerator_are_used(tiny_cluster):
    inputs = get_kind("resilience").prepare({"days": 1}, tiny_cluster["cluster"])
    assert inputs["resilience"]["cards"] == 8 and inputs["accelerator"] == "h100-sxm5-80gb"
    assert inputs["resilience"]["hbm_stacks_per_card"] == 5
    with pytest.raises(Exception, match="params.cards"):
        get_kind("resilience").prepare({"cards": 9}, tiny_cluster["cluster"])


@pytest.mark.parametrize(("params", "field"), [
    ({"cards": 0}, "params.cards"),
    ({"cards": 8, "days": 0}, "params.days"),
    ({"cards": 8, "checkpoint_mode": "later"}, "params.checkpoint_mode"),
    ({"cards": 8, "storage_tiers": "host_dram"}, "params.storage_tiers"),
    ({"cards": 8, "storage_tiers": "host_dram,tape"}, "params.storage_tiers"),
    ({"cards": 8, "failure_card": -1}, "params.failure_card"),
    ({"cards": 8, "params_b": "big"}, "params.params_b"),
    ({"cards": 8, "tp": 8, "pp": 2}, "params.pp"),
    ({"cards": 8, "spares": -1}, "params.spares"),
    ({"cards": 8, "elastic": "yes"}, "params.elastic"),
    ({"cards": 8, "family": "torus"}, "params.family"),
])
def test_bad_input_is_a_400_naming_the_field(admin_client_api, db, params, field):
    before = ScenarioRun.objects.count()
    response = admin_client_api.post(SCENARIOS, {"kind": "resilience", "params": params},
                                     format="json")
    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
    assert ScenarioRun.objects.count() == before


def test_writes_need_authentication(anon_client, db):
    response = anon_client.post(SCENARIOS, {"kind": "resilience", "params": {"cards": 8}},
                                format="json")
    assert response.status_code == 401


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_runs_end_to_end_in_the_worker(celery_worker, admin_client_api):
    response = admin_client_api.post(SCENARIOS, {"kind": "resilience", "params": {
        "cards": 2048, "days": 14, "model": "llama3-405b", "pp": 16, "sweep_runs": 1}},
        format="json")
    assert response.status_code == 202, response.content
    run_id = response.json()["id"]

    def finished() -> dict | None:
        body = admin_client_api.get(f"{SCENARIOS}{run_id}/").json()
        return body if body["status"] in ("succeeded", "failed", "cancelled") else None

    body = wait_for(finished)
    assert body["status"] == "succeeded", body["error"]
    result = body["result"]
    assert CONTRACT <= set(result) and body["worker"].startswith(celery_worker)
    chart = get_kind("resilience").chart
    assert chart is not None
    assert all(row[chart["y"]] > 0 for row in result[chart["series"]])
    assert len(result["timeline"]) == result["interruptions"]["total"]


# -- the cluster's own storage tiers ---------------------------------------------------------
def test_on_a_built_preset_the_tiers_are_the_clusters_storage(db):
    """seed-512: 2 TB host memory and 2 × 15.36 TB PM1743 per server (26 GB/s read,
    13.2 GB/s write), a file system of 2 DDN AI400X2 (130 GB/s write, 180 GB/s read,
    1,000 TB): the checkpoint's times follow from those, not from the DGX defaults."""
    from simulation.resilience import StorageTier, tier_time_s
    from twin.hardware.builder import build_cluster
    from twin.hardware.models import Cluster

    cluster = Cluster.objects.get(pk=build_cluster("seed-512")["cluster_id"])
    kind = get_kind("resilience")
    inputs = kind.prepare({"days": 1, "sweep_runs": 1, "model": "llama3-70b"}, cluster)
    tiers = {t["name"]: t for t in inputs["resilience"]["checkpoint"]["tiers"]}
    assert tiers["host_dram"]["capacity_gb"] == pytest.approx(2048 * 2**30 / 1e9)
    assert (tiers["local_nvme"]["write_gbps"], tiers["local_nvme"]["read_gbps"],
            tiers["local_nvme"]["capacity_gb"]) == (13.2, 26.0, pytest.approx(30_720.0))
    assert (tiers["pfs"]["aggregate_gbps"], tiers["pfs"]["aggregate_read_gbps"],
            tiers["pfs"]["capacity_gb"]) == (130.0, 180.0, 1_000_000.0)
    assert all("seed-512" in where for where in inputs["storage"].values())

    result = kind.run(inputs, lambda share, message: None)
    times = result["checkpoint"]
    per_server = times["per_server_bytes"]
    pfs = StorageTier(**tiers["pfs"])
    # 512 cards on 64 servers, each writing its deduplicated share to 130 GB/s shared
    assert times["save_s"]["pfs"] == pytest.approx(tier_time_s(per_server, 64, pfs))
    assert times["save_s"]["pfs"] == pytest.approx(max(per_server / 50e9,
                                                       64 * per_server / 130e9))
    assert times["save_s"]["local_nvme"] == pytest.approx(per_server / 13.2e9)
    # restores read at the file system's 180 GB/s, not its write figure
    spread = times["restore_s"]["pfs"] - tier_time_s(per_server, 64, pfs, read=True)
    assert tier_time_s(per_server, 64, pfs, read=True) == pytest.approx(
        max(per_server / 50e9, 64 * per_server / 180e9))
    assert spread > 0
    assert "storage tiers" in dict(kind.rows(result))

    # an explicit pfs_gbps is a what-if over the cluster's file system
    what_if = kind.prepare({"days": 1, "pfs_gbps": 20}, cluster)
    pfs_tier = what_if["resilience"]["checkpoint"]["tiers"][-1]
    assert (pfs_tier["aggregate_gbps"], pfs_tier["aggregate_read_gbps"]) == (20.0, 0.0)
    assert what_if["storage"]["pfs"] == "params.pfs_gbps"


def test_a_cluster_without_a_file_system_takes_the_default_and_says_so(tiny_cluster):
    inputs = get_kind("resilience").prepare({"days": 1}, tiny_cluster["cluster"])
    pfs = inputs["resilience"]["checkpoint"]["tiers"][-1]
    assert pfs["name"] == "pfs" and pfs["aggregate_gbps"] == 200.0
    assert "no file-system appliances" in inputs["storage"]["pfs"]
    assert "tiny" in inputs["storage"]["local_nvme"]


def test_servers_without_nvme_refuse_the_nvme_tier(admin_client_api, tiny_cluster):
    from twin.hardware.models import Server

    Server.objects.filter(pk=tiny_cluster["server"].pk).update(
        nvme_tb=0, nvme_read_gb_per_s=0, nvme_write_gb_per_s=0)
    body = {"kind": "resilience", "cluster": tiny_cluster["cluster"].pk, "params": {"days": 1}}
    response = admin_client_api.post(SCENARIOS, body, format="json")
    assert response.status_code == 400, response.content
    assert "no local NVMe" in response.json()["params.storage_tiers"][0]
    body["params"]["storage_tiers"] = "host_dram,pfs"
    assert admin_client_api.post(SCENARIOS, body, format="json").status_code == 202
