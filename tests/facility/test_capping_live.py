"""Live power capping through the real stack: the policy's API, the tick (real Redis,
real database), the caps served to an agent token, the agent's cards obeying them,
and the audit trail."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from django.test import Client

from tests.telemetry.test_state import put
from twin.facility import capping_live
from twin.telemetry import processing, state
from twin.telemetry.config import conf, redis_client

pytestmark = pytest.mark.usefixtures("plant_namespace")


def _agent(world: dict[str, Any]) -> Client:
    from twin.telemetry.models import TelemetryAgent

    _, token = TelemetryAgent.issue(world["cluster"], "sim")
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}")


def _policy(world: dict[str, Any], mode: str, policy: str = "uniform") -> None:
    from twin.facility.models import CappingPolicy

    CappingPolicy.objects.update_or_create(cluster=world["cluster"],
                                           defaults={"mode": mode, "policy": policy})


def _run(world: dict[str, Any], agent: Client, demand: list[float]) -> list[float]:
    """Ticks where each card draws min(its demand, the cap the agent reads): the rack's
    measured draw (cards + static) after each tick."""
    cid = world["cluster"].pk
    ids = [c.pk for c in world["cards"]]
    lay = state.layout(cid)
    k = lay.groups["rack"].names.index("r0")
    static = float(lay.groups["rack"].static_w[k])
    draws = []
    for d in demand:
        caps = agent.get(f"/api/telemetry/clusters/{cid}/caps/").json()["caps_w"]
        cap = np.array(caps, dtype=float) if caps is not None else np.full(len(ids), np.inf)
        drawn = np.minimum(d, cap)
        put(cid, {"power_w": drawn.tolist()}, cards=ids)
        assert processing.tick(cid, force=True)
        draws.append(float(drawn.sum()) + static)
    return draws


def _budget(world: dict[str, Any], card_room_w: float) -> float:
    """Give r0 a budget that leaves its cards ``card_room_w``; returns the budget."""
    from twin.hardware.models import Rack

    rack = Rack.objects.get(pk=world["rack"].pk)
    lay = state.layout(world["cluster"].pk)
    k = lay.groups["rack"].names.index("r0")
    budget = card_room_w + float(lay.groups["rack"].static_w[k])
    rack.power_budget_w = budget
    rack.save()
    lay = state.layout(world["cluster"].pk)
    assert float(lay.groups["rack"].budget_w[k]) == pytest.approx(budget)
    return budget


def test_a_load_step_settles_under_the_rack_budget_without_overshoot(
        plant_world: dict[str, Any]) -> None:
    from twin.facility.models import CapEvent

    budget = _budget(plant_world, 4000.0)   # 8 cards: 500 W each fit
    _policy(plant_world, "apply")
    agent = _agent(plant_world)
    draws = _run(plant_world, agent, [300.0] * 3 + [700.0] * 12)  # 2.4 → 5.6 kW demand
    assert max(draws[:3]) < budget        # under budget: nothing binds
    after = draws[3:]
    assert max(after) <= budget * 1.02    # < 2 % overshoot of the rack budget
    settled = next(i for i, w in enumerate(after) if w >= 0.98 * budget)
    assert settled <= 8                    # within a few ticks
    assert all(0.98 * budget <= w <= budget * 1.0001 for w in after[settled:])
    # the audit: a row when the rack's limit started to bind, with the DVFS cost
    ev = CapEvent.objects.filter(cluster=plant_world["cluster"]).order_by("id")
    binding = [e for e in ev if "rack" in e.binding]
    assert binding and binding[0].mode == "apply" and binding[0].cards_capped == 8
    assert 0.0 < binding[0].throughput_lost < 0.5
    assert binding[0].summary["by"]["rack"] == 8
    # idempotent: the same tick writes nothing twice; the binding set did not change
    # while settled, so no row per tick
    n = ev.count()
    assert n <= 3
    e = binding[0]
    capping_live._audit(e.cluster_id, e.tick_ts, "apply", "uniform", e.binding, {},
                        np.zeros(0), 0.0)
    assert CapEvent.objects.filter(cluster=plant_world["cluster"]).count() == n
    # the audit trail in the API (a login)
    from django.contrib.auth.models import User

    user = User.objects.create_superuser("cap-admin", "c@example.com", "pw-cap-123")
    c = Client()
    c.force_login(user)
    listed = c.get(f"/api/facility/cap-events/?cluster={plant_world['cluster'].pk}").json()
    assert [r["id"] for r in listed["results"]][-1] == ev.first().pk


def test_propose_records_caps_but_agents_get_none(plant_world: dict[str, Any]) -> None:
    from twin.facility.models import CapEvent

    budget = _budget(plant_world, 4000.0)
    _policy(plant_world, "propose", "thermal")
    agent = _agent(plant_world)
    draws = _run(plant_world, agent, [700.0] * 3)
    assert min(draws) > budget            # nothing served, nothing held
    cid = plant_world["cluster"].pk
    body = agent.get(f"/api/telemetry/clusters/{cid}/caps/").json()
    assert body["mode"] == "propose" and body["caps_w"] is None
    stored = capping_live.read_caps(redis_client(), conf().prefix, cid)
    assert stored is not None and float(stored["caps_w"].sum()) <= 4000.0 + 1e-3
    ev = CapEvent.objects.get(cluster_id=cid)
    assert ev.mode == "propose" and ev.policy == "thermal" and "rack" in ev.binding


def test_a_cluster_with_capping_off_is_unchanged(plant_world: dict[str, Any]) -> None:
    from twin.facility.models import CapEvent

    budget = _budget(plant_world, 4000.0)
    agent = _agent(plant_world)
    _policy(plant_world, "off")
    draws = _run(plant_world, agent, [700.0] * 2)
    assert draws[-1] > budget
    cid = plant_world["cluster"].pk
    assert agent.get(f"/api/telemetry/clusters/{cid}/caps/").json() == {
        "layout": state.layout(cid).version, "ts": None, "mode": "off", "policy": None,
        "caps_w": None}
    assert not redis_client().exists(capping_live.caps_key(conf().prefix, cid))
    assert not CapEvent.objects.exists()
    assert Client().get(f"/api/telemetry/clusters/{cid}/caps/").status_code == 401


def test_bad_policy_values_are_a_400_naming_the_field(plant_world: dict[str, Any],
                                                      staff_client: Any) -> None:
    from twin.facility.models import CappingPolicy

    cid = plant_world["cluster"].pk
    bad = staff_client.post("/api/facility/capping/",
                            {"cluster": cid, "mode": "sometimes", "policy": "fair"},
                            format="json")
    assert bad.status_code == 400
    assert set(bad.json()) >= {"mode", "policy"}
    assert not CappingPolicy.objects.exists()
    ok = staff_client.post("/api/facility/capping/",
                           {"cluster": cid, "mode": "apply", "policy": "priority"},
                           format="json")
    assert ok.status_code == 201, ok.content
    assert CappingPolicy.objects.get(cluster_id=cid).mode == "apply"


def test_the_simulator_never_draws_above_its_cap() -> None:
    from twin.telemetry.simulator import Simulator

    sim = Simulator(np.full(8, 700.0), np.full(8, 70.0), np.full(8, 80.0), np.zeros(8),
                    fault_rate=0.0)
    sim.caps_w = np.array([300.0, 400.0, 500.0, 600.0, 700.0, 200.0, 250.0, 350.0])
    from twin.telemetry.metrics import METRIC_INDEX

    for _ in range(50):
        values, _ = sim.step(1.0)
        assert (values[METRIC_INDEX["power_w"]] <= sim.caps_w + 1e-3).all()


def test_a_pdu_over_its_rating_binds_the_caps(plant_world: dict[str, Any],
                                              settings: Any) -> None:
    from django.utils import timezone

    from twin.facility.models import CapEvent, PowerElement
    from twin.hardware.models import Rack

    settings.FACILITY_LIVE_RECHECK_S = 0.0
    _budget(plant_world, 20000.0)          # the rack's budget does not bind
    agent = _agent(plant_world)
    _policy(plant_world, "apply")
    _run(plant_world, agent, [300.0])
    cid = plant_world["cluster"].pk
    s = state.plant_summary(cid)
    assert s is not None
    # the PDU (2N, two units: usable = one unit's rating) is planned for 4 kW of cards
    # more than its racks' static and network draw; the cards want 5.6 kW
    lay = state.layout(cid)
    k = lay.groups["rack"].names.index("r0")
    net_w = Rack.objects.filter(pk=plant_world["net_rack"].pk).draw_by_rack().rows()[0].w
    rating_w = 4000.0 + float(lay.groups["rack"].static_w[k]) + net_w
    PowerElement.objects.filter(pk=plant_world["pdu"].pk).update(
        rating_kw=rating_w / 1e3, last_updated=timezone.now())
    _run(plant_world, agent, [700.0] * 10)
    s = state.plant_summary(cid)
    assert s is not None
    (pdu,) = s["pdus"]
    assert pdu["input_w"] <= rating_w * 1.001 and pdu["input_w"] >= 0.97 * rating_w
    assert CapEvent.objects.filter(cluster_id=cid, binding__startswith="power").exists()


def test_priority_policy_keeps_more_power_on_the_higher_priority_job(
        plant_world: dict[str, Any]) -> None:
    from twin.jobs.models import Allocation, Job

    cluster, cards = plant_world["cluster"], plant_world["cards"]
    low = Job.objects.create(cluster=cluster, name="low", tenant="t", cards=4, priority=0,
                             state="running")
    high = Job.objects.create(cluster=cluster, name="high", tenant="t", cards=4,
                              priority=500, state="running")
    for i, c in enumerate(cards):
        Allocation.objects.create(job=high if i % 2 else low, card=c)
    budget = _budget(plant_world, 4000.0)
    _policy(plant_world, "apply", "priority")
    agent = _agent(plant_world)
    draws = _run(plant_world, agent, [700.0] * 12)
    assert max(draws[1:]) <= budget * 1.02 and draws[-1] <= budget * 1.0001
    cid = cluster.pk
    caps = np.array(agent.get(f"/api/telemetry/clusters/{cid}/caps/").json()["caps_w"])
    lay = state.layout(cid)
    at = lay.ordinals([c.pk for c in cards])
    hi_caps = caps[at[1::2]]
    lo_caps = caps[at[0::2]]
    # the higher-priority job's cards keep more power; every card above its idle floor
    # and the rack's cards within their room
    assert hi_caps.min() > lo_caps.max() + 50.0
    assert caps.sum() <= 4000.0 + 1e-2
    assert (caps >= lay.idle_w - 1e-3).all()
    # the weights: 1 + priority / 100, a card no running job holds weighs the lowest
    low.state = "completed"
    low.save(update_fields=["state"])
    w = capping_live.priority_weights(cid, lay.card_ids)
    assert w[at[1::2]].tolist() == [6.0] * 4
    assert w[at[0::2]].tolist() == [capping_live.IDLE_WEIGHT] * 4 and capping_live.IDLE_WEIGHT < 1.0


def test_the_caps_are_in_the_cluster_frame_and_metrics(plant_world: dict[str, Any]) -> None:
    from tests.telemetry.test_monitoring import scrape
    from twin.live import frames
    from twin.live.protocol import SubscriptionKey

    budget = _budget(plant_world, 4000.0)
    cid = plant_world["cluster"].pk
    key = SubscriptionKey("cluster", None, "power_w")
    agent = _agent(plant_world)
    _run(plant_world, agent, [700.0])
    assert "caps" not in frames.build(cid, key).extra     # capping off: no section
    assert not [k for k in scrape() if k[0].startswith("twin_capping_")
                and ("cluster", str(cid)) in k[1]]
    _policy(plant_world, "apply")
    draws = _run(plant_world, agent, [700.0] * 6)
    assert draws[-1] <= budget * 1.0001
    caps = np.array(agent.get(f"/api/telemetry/clusters/{cid}/caps/").json()["caps_w"])
    built = frames.build(cid, key)
    sec = built.extra["caps"]
    names = built.extra["names"]
    lay = state.layout(cid)
    assert names == list(lay.groups["rack"].names)   # the frame's rack order
    r0, net = names.index("r0"), [i for i, n in enumerate(names) if n != "r0"]
    assert sec["mode"] == "apply" and sec["binding"] == "rack"
    assert sec["cards_capped"] == 8 and sec["limits_binding"] == 1
    assert sec["rack_caps_w"][r0] == pytest.approx(caps.sum(), abs=1.0)
    assert sec["rack_caps_w"][r0] <= 4000.0 + 1.0
    assert sec["rack_binding"][r0] == 1 and all(sec["rack_binding"][i] == 0 for i in net)
    assert len(sec["rack_caps_w"]) == len(names)          # per rack, not per card
    assert 0.0 < sec["throughput_lost"] < 0.5
    got = scrape()
    c = (("cluster", str(cid)),)
    assert got[("twin_capping_cards_capped", c)] == 8
    assert got[("twin_capping_capped_watts", c)] == pytest.approx(caps.sum(), abs=1.0)
    assert got[("twin_capping_throughput_lost_ratio", c)] == pytest.approx(
        sec["throughput_lost"])
    assert got[("twin_capping_binding_limits", c)] == 1


def test_the_floor_colours_by_the_caps_share_of_each_rack_budget(plant_world: dict[str, Any]
                                                                 ) -> None:
    """The cluster view's ``cap_share``: per rack Σ caps / budget × 100, with the
    binding flag per rack; null everywhere while capping is off."""
    from twin.live import frames
    from twin.live.protocol import SubscriptionKey

    budget = _budget(plant_world, 4000.0)
    cid = plant_world["cluster"].pk
    key = SubscriptionKey("cluster", None, "cap_share")
    agent = _agent(plant_world)
    _run(plant_world, agent, [700.0])
    off = frames.build(cid, key)
    assert set(off.head["values"]) == {None} and "binding" not in off.head
    _policy(plant_world, "apply")
    _run(plant_world, agent, [700.0] * 6)
    built = frames.build(cid, key)
    sec = frames.build(cid, SubscriptionKey("cluster", None, "power_w")).extra["caps"]
    names = built.extra["names"]
    r0 = names.index("r0")
    assert built.extra["unit"] == "%" and built.extra["aggregate"] == "caps"
    assert built.head["values"][r0] == pytest.approx(sec["rack_caps_w"][r0] / budget * 100,
                                                     abs=0.1)
    assert 0 < built.head["values"][r0] <= 100.0
    assert built.head["binding"] == sec["rack_binding"]
    assert len(built.head["values"]) == len(names)        # per rack, never per card


def test_the_rack_panel_reads_its_coolant_temperature_and_cap(plant_world: dict[str, Any],
                                                              admin_client: Client) -> None:
    """``GET /api/telemetry/clusters/<c>/racks/<r>/plant/``: one rack's coolant, hottest
    card and caps, the same numbers the floor's cluster views carry; nulls for a rack
    without cards, 404 for a rack of another cluster."""
    from twin.live import frames
    from twin.live.protocol import SubscriptionKey

    budget = _budget(plant_world, 4000.0)
    cid = plant_world["cluster"].pk
    rack = plant_world["rack"].pk
    agent = _agent(plant_world)
    _policy(plant_world, "apply")
    _run(plant_world, agent, [700.0] * 6)
    url = f"/api/telemetry/clusters/{cid}/racks/{rack}/plant/"
    got = admin_client.get(url)
    assert got.status_code == 200, got.content
    body = got.json()
    lay = state.layout(cid)
    k = lay.groups["rack"].names.index("r0")
    racks = state.plant_racks(cid, lay.version)
    assert racks is not None
    assert body["supply_c"] == pytest.approx(float(racks["supply_c"][k]), abs=0.05)
    assert body["card_c"] > body["supply_c"]
    coolant = frames.build(cid, SubscriptionKey("cluster", None, "coolant_supply_c"))
    assert body["supply_c"] == pytest.approx(coolant.head["values"][k], abs=0.05)
    share = frames.build(cid, SubscriptionKey("cluster", None, "cap_share"))
    assert body["cap_share"] * 100 == pytest.approx(share.head["values"][k], abs=0.1)
    assert body["caps_w"] == pytest.approx(body["cap_share"] * budget, rel=1e-3)
    assert body["binding"] is True and body["capping_mode"] == "apply"
    assert body["budget_w"] == pytest.approx(budget, abs=1.0)
    net = plant_world["net_rack"].pk
    empty = admin_client.get(f"/api/telemetry/clusters/{cid}/racks/{net}/plant/")
    assert empty.status_code == 200
    assert empty.json()["supply_c"] is None and empty.json()["capping_mode"] == "off"
    missing = admin_client.get(f"/api/telemetry/clusters/{cid}/racks/{10**9}/plant/")
    assert missing.status_code == 404


def test_the_policy_is_cached_until_a_write_to_the_policy_table(
        plant_world: dict[str, Any], django_assert_num_queries: Any) -> None:
    """The tick asks for the policy every tick: one query the first time, none after
    (one Redis read of the ``capping`` domain's version), and the next tick after any
    write to the policy table (create, update, ``QuerySet.update``) sees the new one."""
    from twin.facility.models import CappingPolicy

    cid = plant_world["cluster"].pk
    capping_live._policies.clear()
    with django_assert_num_queries(1):
        assert capping_live._policy(cid) is None
    with django_assert_num_queries(0):
        assert capping_live._policy(cid) is None
        assert not capping_live.capping_on(cid)
    _policy(plant_world, "apply")
    assert capping_live._policy(cid) == ("apply", "uniform")
    with django_assert_num_queries(0):
        assert capping_live._policy(cid) == ("apply", "uniform")
    CappingPolicy.objects.filter(cluster_id=cid).update(policy="priority")
    assert capping_live._policy(cid) == ("apply", "priority")
    CappingPolicy.objects.filter(cluster_id=cid).update(mode="off")
    assert capping_live._policy(cid) is None
    CappingPolicy.objects.filter(cluster_id=cid).delete()
    _policy(plant_world, "propose")
    assert capping_live._policy(cid) == ("propose", "uniform")


def test_a_value_cached_under_an_older_version_is_not_served(
        plant_world: dict[str, Any]) -> None:
    """The version lives in Redis, shared by every process: a value this process
    cached before another process's commit bumped it is read again."""
    from twin.core import aggregates
    from twin.facility.models import CappingPolicy

    cid = plant_world["cluster"].pk
    CappingPolicy.objects.create(cluster=plant_world["cluster"], mode="apply")
    capping_live._policies[cid] = (aggregates.version("capping"), None)  # (stale)
    assert capping_live._policy(cid) is None, "same version: the cached value"
    aggregates.bump("capping")  # (the other process's bump after its commit)
    assert capping_live._policy(cid) == ("apply", "uniform")


def test_the_caps_cost_is_priced_with_each_jobs_op_mix_and_says_so(
        plant_world: dict[str, Any]) -> None:
    """Issue 24: a capped card whose running job names a training model loses what the
    training model's op mix says (``throughput_op_mix`` of that job's mix, priced once per
    job); the other capped cards the labelled fallback share (0.7); the summary and the
    frame say which cards were priced how."""
    from simulation.facility.capping import throughput, throughput_op_mix
    from twin.jobs.models import Allocation, Job

    cluster, cards = plant_world["cluster"], plant_world["cards"]
    trained = Job.objects.create(cluster=cluster, name="llm", tenant="t", cards=4,
                                 state="running", training_model="llama3-8b",
                                 global_batch=16)
    plain = Job.objects.create(cluster=cluster, name="plain", tenant="t", cards=4,
                               state="running")
    for i, c in enumerate(cards):
        Allocation.objects.create(job=trained if i < 4 else plain, card=c)
    capping_live._mixes.clear()
    _budget(plant_world, 4000.0)
    _policy(plant_world, "apply")
    agent = _agent(plant_world)
    _run(plant_world, agent, [700.0] * 6)
    cid = cluster.pk
    r = redis_client()
    summary = capping_live.read_summary(r, conf().prefix, cid)
    assert summary is not None and summary["cards_capped"] == 8
    basis = summary["throughput_basis"]
    lay = state.layout(cid)
    mix = capping_live._mixes[trained.pk][1]
    assert mix is not None and 0.0 < mix.compute_s < mix.step_s   # the model priced it
    assert basis["op_mix_cards"] == 4 and basis["fallback_cards"] == len(lay.card_ids) - 4
    assert basis["job_compute_share"] == {str(trained.pk): round(mix.compute_s / mix.step_s, 4)}
    assert basis["fallback_compute_share"] == capping_live.FALLBACK_COMPUTE_SHARE == 0.7
    assert basis["jobs_pending"] == 0
    # the figure, by hand: the job's cards through its op mix, the others the fallback
    caps = np.array(agent.get(f"/api/telemetry/clusters/{cid}/caps/").json()["caps_w"])
    at = lay.ordinals([c.pk for c in cards])
    tdp, idle = float(lay.tdp_w[at[0]]), float(lay.idle_w[at[0]])
    kept = np.concatenate([
        throughput_op_mix(caps[at[:4]], mix, tdp, idle).kept,
        throughput(caps[at[4:]], np.full(4, tdp), tdp, idle, compute_share=0.7).kept])
    assert summary["throughput_lost"] == pytest.approx(1.0 - kept.mean(), rel=1e-3)
    # a GEMM-bound LLM step loses more per capped watt than the 0.7 fallback assumes
    assert kept[:4].mean() < kept[4:].mean() < 1.0
    # the live frame carries the basis
    sec = capping_live.frame_section(r, conf().prefix, cid, lay.version,
                                     len(lay.groups["rack"].names))
    assert sec is not None and sec["throughput_basis"]["op_mix_cards"] == 4


def test_jobs_are_priced_once_and_a_few_a_tick(plant_world: dict[str, Any]) -> None:
    """The op mix is cached per job; over the per-tick budget a job waits (fallback,
    counted as pending); a job without a training model is never priced."""
    from twin.jobs.models import Allocation, Job

    cluster, cards = plant_world["cluster"], plant_world["cards"]
    jobs = [Job.objects.create(cluster=cluster, name=f"j{i}", tenant="t", cards=2,
                               state="running", training_model="llama3-8b", global_batch=8)
            for i in range(3)]
    plain = Job.objects.create(cluster=cluster, name="plain", tenant="t", cards=2,
                               state="running")
    for i, c in enumerate(cards):
        Allocation.objects.create(job=(jobs + [plain])[i // 2], card=c)
    capping_live._mixes.clear()
    ids = state.layout(cluster.pk).card_ids
    job_of, mixes, pending = capping_live.job_op_mixes(cluster.pk, ids, budget=2)
    assert len(mixes) == 2 and pending == 1
    assert set(job_of[job_of >= 0].tolist()) == {j.pk for j in jobs}   # never the plain job
    job_of, mixes, pending = capping_live.job_op_mixes(cluster.pk, ids, budget=1)
    assert len(mixes) == 3 and pending == 0
    before = dict(capping_live._mixes)
    _, again, _ = capping_live.job_op_mixes(cluster.pk, ids, budget=0)   # all cached
    assert again == mixes and capping_live._mixes == before


def test_the_op_mix_cache_forgets_jobs_no_longer_running(plant_world: dict[str, Any]) -> None:
    from twin.jobs.models import Allocation, Job

    cluster, cards = plant_world["cluster"], plant_world["cards"]
    job = Job.objects.create(cluster=cluster, name="llm", tenant="t", cards=2,
                             state="running", training_model="llama3-8b", global_batch=8)
    for c in cards[:2]:
        Allocation.objects.create(job=job, card=c)
    capping_live._mixes.clear()
    capping_live._mixes.update({-i: (("gone",), None) for i in range(1, 1100)})
    _, mixes, _ = capping_live.job_op_mixes(cluster.pk, state.layout(cluster.pk).card_ids)
    assert set(capping_live._mixes) == {job.pk} and job.pk in mixes
