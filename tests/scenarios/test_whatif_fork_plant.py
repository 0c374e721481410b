"""Fork now freezes the plant too: the binding power caps of live capping, the facility
elements and network devices recorded down, the plant's temperatures — and the what-if's
baseline runs under them (real database, real Redis, the real tick and capping loop).

The world: ``plant_world`` (the tiny cluster's rack r0 of 8 H100s on CDU ``cdu-0``),
rack r0's budget leaving its cards 4 kW (500 W each), capping ``apply``, a 4-card job
running for an hour, ticks with every card asking 700 W until the caps settle.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tests.facility.conftest import plant_world  # noqa: F401  (a fixture)
from tests.facility.test_capping_live import _agent, _budget, _policy, _run
from tests.scenarios.conftest import SCENARIOS
from tests.telemetry.conftest import flush_namespace
from twin.facility import live
from twin.scenarios.runner import execute


@pytest.fixture(autouse=True)
def namespace(settings: Any) -> Iterator[None]:
    settings.TELEMETRY_AUTO_DRAIN = False
    flush_namespace()
    live._cache.clear()
    yield
    flush_namespace()
    live._cache.clear()


@pytest.fixture
def capped_world(plant_world, admin_client_api):  # noqa: F811
    world = plant_world
    _budget(world, 4000.0)
    _policy(world, "apply")
    job = admin_client_api.post("/api/jobs/", {
        "cluster": world["cluster"].pk, "name": "train", "tenant": "t", "cards": 4,
        "duration_s": 3600}, format="json").json()
    assert job["state"] == "running"
    agent = _agent(world)
    _run(world, agent, [700.0] * 12)
    return {**world, "job": job, "agent": agent}


def _fork(client: Any, cluster_id: int) -> Any:
    response = client.post(SCENARIOS, {"kind": "whatif", "cluster": cluster_id, "fork": True,
                                       "params": {"horizon_h": 6, "failure_rate": 0,
                                                  "events": []}}, format="json")
    assert response.status_code == 202, response.content
    run = execute(response.json()["id"], worker="test@host")
    assert run is not None and run.status == "succeeded", run.error
    return run


def test_a_fork_freezes_the_caps_a_failed_cdu_and_a_switch_and_the_baseline_runs_under_them(
        capped_world, admin_client_api):
    from simulation.snapshot import LiveSnapshot
    from simulation.training.energy import clock_for_cap
    from simulation.whatif import Layout
    from simulation.whatif.engine import live_rack_caps
    from twin.telemetry import state

    world = capped_world
    cid = world["cluster"].pk
    # 1. capped rack only: the snapshot holds the caps the agents obey, the plant's
    #    temperatures; the baseline runs the job at the clock the rack's caps allow
    run = _fork(admin_client_api, cid)
    snap = LiveSnapshot.from_dict(run.snapshot)
    served = world["agent"].get(f"/api/telemetry/clusters/{cid}/caps/").json()["caps_w"]
    assert snap.readings is not None and snap.readings.cap_w is not None
    assert snap.readings.cap_w.tolist() == pytest.approx(served, abs=0.05)
    assert max(served) < 700.0  # the rack budget binds
    assert snap.facility_down == {} and snap.devices_down == {}
    plant = snap.plant
    assert plant is not None and plant.rack_ids == tuple(
        int(r) for r in state.layout(cid).groups["rack"].ids)
    assert plant.supply_c[0] is not None and 10.0 < plant.supply_c[0] < 60.0
    assert [c["key"] for c in plant.cdus] == ["cdu-0"] and plant.pue is not None
    summary = run.result["fork"]
    assert summary["caps"] == 8 and summary["plant"] is True
    layout = Layout.from_dict(run.inputs["layout"])
    (cap,) = live_rack_caps(snap, layout).tolist()
    f = float(clock_for_cap(np.array([cap]), layout.tdp_w, layout.idle_w,
                            layout.clock_power)[0])
    assert f < 1.0
    row = next(r for r in run.result["jobs"]["rows"] if r["job"] == world["job"]["id"])
    (job,) = snap.running
    left = job.remaining_s(snap.taken_at)
    assert row["baseline_completion_s"] == pytest.approx(left * (0.7 / f + 0.3), rel=1e-6)
    facility = run.result["facility"]
    assert facility["matched_racks"] is True and facility["capping"] is True
    assert run.result["baseline"]["totals"]["peak_feed_kw"] > 0
    # 2. the CDU fails (an operator records it through the API) and the leaf switch too
    cdu = world["cdu"]
    response = admin_client_api.patch(f"/api/facility/cooling/{cdu.pk}/",
                                      {"status": "failed"}, format="json")
    assert response.status_code == 200, response.content
    from twin.hardware.models import NetworkDevice

    leaf = NetworkDevice.objects.get(cluster_id=cid, kind="leaf")
    response = admin_client_api.patch(f"/api/devices/{leaf.pk}/", {"status": "failed"},
                                      format="json")
    assert response.status_code == 200, response.content
    run2 = _fork(admin_client_api, cid)
    snap2 = LiveSnapshot.from_dict(run2.snapshot)
    assert snap2.facility_down == {"failed": ("cooling:cdu-0",)}
    assert snap2.devices_down == {"failed": (leaf.pk,)}
    fac = run2.result["facility"]
    assert fac["fork"]["down"] == ["cooling:cdu-0"]
    # without its CDU rack r0 has no coolant flow: the plant takes it out and the job,
    # on its only rack, never completes in the baseline either
    base = run2.result["baseline"]["totals"]
    assert base["plant_out_racks"] + base["plant_throttled_racks"] == 1
    row2 = next(r for r in run2.result["jobs"]["rows"] if r["job"] == world["job"]["id"])
    assert row2["baseline_completion_s"] is None or \
        row2["baseline_completion_s"] > row["baseline_completion_s"]
    # the stored snapshot gives the same answer after the CDU is repaired
    cdu.status = "ok"
    cdu.save()
    again = admin_client_api.post(SCENARIOS, {
        "kind": "whatif", "cluster": cid, "fork_from": run2.pk, "refresh": True,
        "params": {"horizon_h": 6, "failure_rate": 0, "events": []}}, format="json")
    assert again.status_code == 202, again.content
    rerun = execute(again.json()["id"], worker="test@host")
    assert rerun is not None and rerun.status == "succeeded", rerun.error

    def strip(r: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in r.items() if k != "wall_s"}

    assert strip(rerun.result) == strip(run2.result)
