"""The what-if kind: it always forks (live, or the inventory when there is none), checks
every event's target against this cluster (400 on ``params.events[i].target``), runs in
the real Celery worker through the runner, and prints through ``run_scenario``."""
from __future__ import annotations

import json
from io import StringIO
from typing import Any

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from tests.scenarios.conftest import SCENARIOS, wait_for

# the live-state fixtures of the fork tests (a fixture is a parameter name: F811 below)
from tests.scenarios.test_snapshot import live_ns, live_world  # noqa: F401
from twin.scenarios.runner import execute


def _run(client: Any, cluster_id: int, params: dict[str, Any], **extra: Any) -> Any:
    response = client.post(SCENARIOS, {"kind": "whatif", "cluster": cluster_id,
                                       "params": params, **extra}, format="json")
    assert response.status_code == 202, response.content
    run = execute(response.json()["id"], worker="test@host")
    assert run is not None and run.status == "succeeded", run.error
    return run


def test_a_card_of_the_running_job_fails_from_the_live_fork(live_world,  # noqa: F811
                                                            admin_client_api):
    """The live twin: a 4-card job running (an hour), a 7-card job queued behind it, card 7
    failed. One of the running job's cards fails 600 s from now: the job loses the work
    since its last checkpoint (cards × time since it), restarts, and ends later; the
    baseline (same snapshot and seed, no event) does not."""
    from simulation.snapshot import LiveSnapshot

    world = live_world
    # EASY: with one card fewer the queued 7-card job can never start, and under FIFO it
    # would block the restarted job behind it for the whole horizon (the scheduler's
    # head-of-line blocking, which a fifo what-if shows as a job that never completes)
    params = {"horizon_h": 6, "failure_rate": 0, "checkpoint_interval_min": 30,
              "restart_s": 60, "policy": "easy-backfill"}
    snap = None
    job_id = world["running"]["id"]
    # the job's first card (the event names it by id)
    from twin.jobs.models import Allocation

    card = Allocation.objects.filter(job_id=job_id).order_by("card_id").values_list(
        "card_id", flat=True).first()
    run = _run(admin_client_api, world["cluster"].pk, {
        **params, "events": [{"at_s": 600, "kind": "fail_card", "target": card}]})
    assert run.snapshot is not None  # it forked without being asked to
    snap = LiveSnapshot.from_dict(run.snapshot)
    result = run.result
    assert result["fork"]["has_live_state"] is True and result["fork"]["running"] == 1
    row = next(r for r in result["jobs"]["rows"] if r["job"] == job_id)
    (job,) = snap.running
    since = (snap.taken_at - job.started + 600) % 1800
    assert row["lost_card_h"] == pytest.approx(4 * since / 3600, rel=1e-6)
    assert row["restarts"] == 1
    assert row["baseline_completion_s"] == pytest.approx(job.remaining_s(snap.taken_at))
    assert row["completion_s"] > row["baseline_completion_s"] + since
    assert result["difference"]["lost_card_hours"] == pytest.approx(4 * since / 3600,
                                                                    rel=1e-6)
    assert result["baseline"]["totals"]["lost_card_hours"] == 0
    assert len(result["racks"]["ids"]) == len(result["racks"]["peak_kw_difference"]) == 1
    # computed again from the stored snapshot: the same answer
    again = _run(admin_client_api, world["cluster"].pk, {
        **params, "events": [{"at_s": 600, "kind": "fail_card", "target": card}]},
        fork_from=run.pk, refresh=True)

    def strip(r: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in r.items() if k != "wall_s"}

    assert strip(again.result) == strip(result)


@pytest.mark.parametrize(("params", "field"), [
    ({"events": [{"at_s": 10, "kind": "fail_card", "target": 10**9}]},
     "params.events[0].target"),
    ({"events": [{"at_s": 10, "kind": "change_policy", "policy": "best-fit"},
                 {"at_s": 10, "kind": "drain_rack", "target": 10**9}]},
     "params.events[1].target"),
    ({"events": [{"at_s": 10, "kind": "cancel_job", "target": 10**9}]},
     "params.events[0].target"),
    ({"events": [{"at_s": 10, "kind": "cdu_trip", "target": "cdu-0"}]},
     "params.events[0].kind"),
    ({"events": [{"at_s": 10, "kind": "melt", "target": 1}]}, "params.events[0].kind"),
    ({"horizon_h": 24 * 29}, "params.horizon_h"),
    ({"policy": "coin-toss"}, "params.policy"),
    ({"bogus": 1}, "params.bogus"),
    ({"spares": -1}, "params.spares"),
    ({"events": [{"at_s": 10, "kind": "change_spares", "value": 1.5}]},
     "params.events[0].value"),
    ({"events": [{"at_s": 10, "kind": "change_contract", "value": -1}]},
     "params.events[0].value"),
    ({"events": [{"at_s": 10, "kind": "change_contract", "value": "NaN"}]},
     "params.events[0].value"),
    ({"events": [{"at_s": 10, "kind": "change_contract", "value": 5000, "target": 1}]},
     "params.events[0].target"),
    ({"pue": 0.5}, "params.pue"),
    ({"events": [{"at_s": 10, "kind": "add_job", "job": {
        "cards": 1, "duration_s": 60, "training_model": "gpt-9"}}]},
     "params.events[0].job.training_model"),
])
def test_bad_what_ifs_are_400_on_the_field(admin_client_api, tiny_cluster, live_ns,  # noqa: F811
                                           published,
                                           params: dict[str, Any], field: str):
    from twin.scenarios.models import ScenarioRun

    before = ScenarioRun.objects.count()
    response = admin_client_api.post(SCENARIOS, {"kind": "whatif", "params": params,
                                                 "cluster": tiny_cluster["cluster"].pk},
                                     format="json")
    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
    if field.endswith("kind") and "cdu" in json.dumps(params):
        assert "no facility" in response.json()[field][0]
    assert ScenarioRun.objects.count() == before and published == []


def test_another_clusters_card_is_refused(admin_client_api, tiny_cluster,
                                          live_ns, published):  # noqa: F811
    from twin.hardware.models import Card, Cluster, Rack, Server, SuperNode

    other = Cluster.objects.create(name="other")
    sn = SuperNode.objects.create(cluster=other, name="o-sn", index=0, fabric="torus3d",
                                  card_count=1, dim_x=1, dim_y=1, dim_z=1, link_gbps=400,
                                  link_latency_ns=150)
    rack = Rack.objects.create(cluster=other, supernode=sn, name="o-r", row=0, slot=0)
    server = Server.objects.create(rack=rack, supernode=sn, name="o-s", hostname="o",
                                   cards_per_server=1, overhead_w=100)
    theirs = Card.objects.create(supernode=sn, server=server,
                                 accelerator=tiny_cluster["cards"][0].accelerator, index=0,
                                 slot=0, serial="OTHER-1")
    response = admin_client_api.post(SCENARIOS, {
        "kind": "whatif", "cluster": tiny_cluster["cluster"].pk,
        "params": {"events": [{"at_s": 1, "kind": "fail_card", "target": theirs.pk}]}},
        format="json")
    assert response.status_code == 400
    assert "no card" in response.json()["params.events[0].target"][0]
    assert published == []


def test_without_a_cluster_it_says_it_forks_one(admin_client_api, db, published):
    response = admin_client_api.post(SCENARIOS, {"kind": "whatif", "params": {}},
                                     format="json")
    assert response.status_code == 400 and "cluster" in response.json()


def test_the_command_forks_the_inventory_when_there_is_no_live_state(
        tiny_cluster, live_ns):  # noqa: F811
    """No telemetry ever: the run forks the inventory and says so; a drained server moves
    nothing (no job) but takes its cards out (availability falls)."""
    server = tiny_cluster["cards"][0].server_id
    out = StringIO()
    call_command("run_scenario", "whatif", "--cluster", "tiny", "--no-progress", "--json",
                 "--params", json.dumps({"horizon_h": 2, "failure_rate": 0, "events": [
                     {"at_s": 3600, "kind": "drain_server", "target": server}]}), stdout=out)
    result = json.loads(out.getvalue()[out.getvalue().index("{"):])
    assert result["fork"]["has_live_state"] is False
    assert "no live state" in result["note"]
    assert result["perturbed"]["totals"]["availability"] == pytest.approx(0.5)
    assert result["baseline"]["totals"]["availability"] == 1.0
    with pytest.raises(CommandError) as exc:
        call_command("run_scenario", "whatif", "--cluster", "tiny", "--no-progress",
                     "--params", json.dumps({"horizon_h": 10_000}))
    assert "params.horizon_h" in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_what_if_runs_in_the_worker(celery_worker, admin_client_api, tiny_cluster):
    response = admin_client_api.post(SCENARIOS, {
        "kind": "whatif", "cluster": tiny_cluster["cluster"].pk,
        "params": {"horizon_h": 24, "failure_rate": 50, "seed": 2, "events": [
            {"at_s": 60, "kind": "cap_power", "value": 400}]}}, format="json")
    assert response.status_code == 202, response.content
    run_id = response.json()["id"]

    def done() -> dict | None:
        body = admin_client_api.get(f"{SCENARIOS}{run_id}/").json()
        return body if body["status"] in ("succeeded", "failed") else None

    body = wait_for(done)
    assert body["status"] == "succeeded", body["error"]
    assert body["progress"] == 1.0 and body["worker"].startswith(celery_worker)
    res = body["result"]
    assert res["random_failures"] >= 0 and res["perturbed"]["applied"][0]["kind"] == "cap_power"
    assert res["perturbed"]["applied"][0]["clock"] < 1.0


def test_a_what_if_on_a_built_cluster_runs_its_plant_with_a_cdu_trip(db):
    """A preset-built cluster has a facility: the what-if composes it (PUE from the plant,
    both cases), and a CDU of that plant is a target a facility event may name."""
    from twin.facility.models import CoolingElement
    from twin.hardware.builder import build_cluster

    built = build_cluster("seed-512", supernodes=1, name="plant-whatif")
    cdu = CoolingElement.objects.filter(site__cluster_id=built["cluster_id"],
                                        kind="cdu").values_list("key", flat=True).first()
    out = StringIO()
    call_command("run_scenario", "whatif", "--cluster", "plant-whatif", "--no-progress",
                 "--json", "--params", json.dumps({"horizon_h": 2, "failure_rate": 0, "events": [
                     {"at_s": 600, "kind": "cdu_trip", "target": cdu}]}), stdout=out)
    result = json.loads(out.getvalue()[out.getvalue().index("{"):])
    facility = result["facility"]
    assert facility is not None
    # PUE is computed from the plant's losses, pumps and fans: above 1 in both cases. With
    # no job the cards idle on a plant sized for the racks' nameplate draw, so the fixed
    # losses (UPS at light load, pumps and fans at design flow) weigh heavily: well above
    # the seeds' 1.05, as a lightly loaded real plant is.
    assert 1.0 < facility["baseline"]["mean_pue"] < 3.0
    assert 1.0 < facility["perturbed"]["mean_pue"] < 3.0
    # A tripped CDU cannot make its racks run cooler than doing nothing.
    assert facility["perturbed"]["max_card_c"] >= facility["baseline"]["max_card_c"]
    with pytest.raises(CommandError) as exc:
        call_command("run_scenario", "whatif", "--cluster", "plant-whatif", "--no-progress",
                     "--params", json.dumps({"horizon_h": 2, "events": [
                         {"at_s": 600, "kind": "cdu_trip", "target": "no-such-cdu"}]}))
    assert "params.events[0].target" in str(exc.value) or "events[0]" in str(exc.value)


def test_a_training_job_runs_at_the_training_models_pace(admin_client_api, tiny_cluster,
                                                         live_ns):  # noqa: F811
    """A job submitted with ``training_model`` and ``global_batch`` (the jobs API): the
    what-if prices its pace under a cap with the training model on the cluster's own
    accelerator (the catalogue's H100), not with the generic compute share."""
    from simulation.training.energy import clock_for_cap
    from simulation.whatif import Layout, Shape, StepTimes

    cid = tiny_cluster["cluster"].pk
    job = admin_client_api.post("/api/jobs/", {
        "cluster": cid, "name": "llm", "tenant": "t", "cards": 4, "duration_s": 3600,
        "training_model": "llama3-8b", "global_batch": 16}, format="json").json()
    assert job["state"] == "running" and job["training_model"] == "llama3-8b"
    run = _run(admin_client_api, cid, {"horizon_h": 4, "failure_rate": 0, "events": [
        {"at_s": 600, "kind": "cap_power", "value": 400}]})
    result = run.result
    assert result["speed"]["accelerator"] == "h100-sxm5-80gb"
    assert result["baseline"]["jobs"]["training_model_jobs"] == 1
    assert result["perturbed"]["jobs"]["speed_fallbacks"] == 0
    layout = Layout.from_dict(run.inputs["layout"])
    f = float(clock_for_cap(np.array([400.0]), layout.tdp_w, layout.idle_w,
                            layout.clock_power)[0])
    times = StepTimes(layout.accelerator or {}, layout.width)
    slow = times.slowdown(Shape("llama3-8b", 16, 4, 4), Shape("llama3-8b", 16, 4, 4, f))
    assert slow is not None and slow > 1.0
    row = next(r for r in result["jobs"]["rows"] if r["job"] == job["id"])
    left = row["baseline_completion_s"]
    assert row["completion_s"] == pytest.approx(600 + (left - 600) * slow, rel=1e-9)


@pytest.mark.parametrize(("body", "field"), [
    ({"training_model": "gpt-9"}, "training_model"),
    ({"training_model": "llama3-8b", "global_batch": 0}, "global_batch"),
])
def test_a_jobs_training_model_is_checked(admin_client_api, tiny_cluster, body, field):
    response = admin_client_api.post("/api/jobs/", {
        "cluster": tiny_cluster["cluster"].pk, "name": "x", "tenant": "t", "cards": 1,
        **body}, format="json")
    assert response.status_code == 400 and field in response.json(), response.content


def test_a_contract_change_on_a_built_cluster_caps_its_cards_and_reaches_the_plant(db):
    """A preset-built cluster's site has a contract (the facility builder's: the plant's
    draw + 10 %): both cases run under it; halving it from 600 s caps every card to its
    share of contract / PUE less the racks' static non-card load (servers, switches,
    optics: the layout's, checked against the rows below), and the facility's perturbed
    run takes the lower contract."""
    from twin.facility.models import Site
    from twin.hardware.builder import build_cluster
    from twin.hardware.models import Cluster
    from twin.scenarios.kinds.whatif import cluster_layout

    built = build_cluster("seed-512", supernodes=1, name="contract-whatif")
    site = Site.objects.get(cluster_id=built["cluster_id"])
    half = site.contract_kw / 2
    out = StringIO()
    call_command("run_scenario", "whatif", "--cluster", "contract-whatif", "--no-progress",
                 "--json", "--params", json.dumps({"horizon_h": 2, "failure_rate": 0, "events": [
                     {"at_s": 600, "kind": "change_contract", "value": half}]}), stdout=out)
    result = json.loads(out.getvalue()[out.getvalue().index("{"):])
    (applied,) = result["perturbed"]["applied"]
    cards = result["perturbed"]["totals"]["cards"]
    assert applied["kind"] == "change_contract" and applied["contract_kw"] == half
    static_w = sum(cluster_layout(Cluster.objects.get(pk=built["cluster_id"])).rack_static_w)
    assert static_w > 0 and applied["static_kw"] == pytest.approx(static_w / 1e3)
    assert applied["card_cap_w"] == pytest.approx((half * 1e3 / 1.1 - static_w) / cards)
    facility = result["facility"]
    assert facility["baseline"]["contract_kw"] == site.contract_kw
    assert facility["perturbed"]["contract_kw"] == half


def test_the_layout_carries_each_racks_static_draw_and_the_feed_peak_counts_it(db):
    """Issue 25, the non-card IT load: the layout a what-if runs on carries each rack's
    servers' overhead (CPUs, fans, NICs) and network devices (switches, optics) — summed
    here per rack straight from the rows — and the run reports it as ``it_static_kw`` and
    adds it to the plant's drive: the plant's IT energy is the cards' energy plus the static
    load over the horizon, plus the nameplate of the plant's racks the layout has not (the
    network racks; no throttling on a cool plant)."""
    from django.db.models import Sum
    from django.db.models.functions import Coalesce

    from twin.hardware.builder import build_cluster
    from twin.hardware.models import Cluster, NetworkDevice, Server
    from twin.scenarios.kinds.whatif import cluster_layout, plant_for

    built = build_cluster("seed-512", supernodes=1, name="static-whatif")
    cluster = Cluster.objects.get(pk=built["cluster_id"])
    expect: dict[int, float] = {}
    for rack, w in Server.objects.filter(rack__cluster=cluster).values_list("rack_id") \
            .annotate(w=Sum("overhead_w")).order_by():
        expect[rack] = expect.get(rack, 0.0) + float(w)
    for rack, w in NetworkDevice.objects.filter(cluster=cluster) \
            .annotate(r=Coalesce("rack_id", "server__rack_id")).values_list("r") \
            .annotate(w=Sum("power_w")).order_by():
        if rack is not None:
            expect[rack] = expect.get(rack, 0.0) + float(w)
    layout = cluster_layout(cluster)
    racks, _ = layout.rack_index()
    assert racks and layout.rack_static_w == tuple(expect.get(r, 0.0) for r in racks)
    assert sum(layout.rack_static_w) > 0
    out = StringIO()
    call_command("run_scenario", "whatif", "--cluster", "static-whatif", "--no-progress",
                 "--json", "--params", json.dumps({"horizon_h": 2, "failure_rate": 0,
                                                   "events": []}), stdout=out)
    result = json.loads(out.getvalue()[out.getvalue().index("{"):])
    static_kw = sum(layout.rack_static_w) / 1e3
    base = result["baseline"]["totals"]
    assert base["it_static_kw"] == pytest.approx(static_kw)
    assert result["facility"]["static_kw"] == pytest.approx(static_kw)
    plant = plant_for(cluster.pk)
    others = sum(float(w) for i, w in zip(np.asarray(plant.racks.ids).tolist(),
                                          np.asarray(plant.racks.nameplate_w).tolist(),
                                          strict=True) if int(i) not in set(racks))
    assert result["facility"]["baseline"]["it_mwh"] == pytest.approx(
        base["energy_mwh"] + (static_kw + others / 1e3) * 2 / 1e3, rel=1e-6)
    assert base["peak_feed_kw"] > base["peak_power_kw"] + static_kw
    # the peak is the feed series' highest point, the mechanical draw at that instant
    feed = result["facility"]["baseline"]["feed"]
    assert base["peak_feed_kw"] == max(feed["kw"]) == feed["peak_kw"]
    assert feed["t_s"][feed["kw"].index(feed["peak_kw"])] == feed["peak_at_s"]
    assert feed["racks_down"] == [] and len(feed["mechanical_kw"]) == len(feed["t_s"])
