"""The what-if engine against closed forms: a failed card's rework, a drain, a cap's
DVFS slowdown, energy of a step function, the baseline against the pure scheduling
replay, seeds, and the facility path on a plant built here."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from simulation.facility.presets import demo_plant
from simulation.scheduling import Nodes, Workload, simulate
from simulation.snapshot import LiveSnapshot, PendingJob, RunningJob
from simulation.training.energy import clock_for_cap, dynamic_fraction
from simulation.whatif import (
    Event,
    Layout,
    WhatIfInputError,
    WhatIfSpec,
    draw_failures,
    run_case,
    run_whatif,
)

T0 = 1_000_000.0  # the snapshot's instant (Unix s)


def layout(servers: int = 4, per: int = 8, per_rack: int = 2) -> Layout:
    """``servers`` servers of ``per`` cards (card id = server × per + slot), server ids
    100.., racks of ``per_rack`` servers (ids 1..), one leaf switch 900 over servers 0-1."""
    return Layout(tuple(range(100, 100 + servers)),
                  tuple(1 + i // per_rack for i in range(servers)), (0,) * servers,
                  tuple(tuple(range(s * per, s * per + per)) for s in range(servers)),
                  {900: (100, 101)}, tdp_w=700.0, idle_w=100.0)


def running(job_id: int, cards: range, *, since: float, left: float | None,
            priority: int = 0) -> RunningJob:
    return RunningJob(job_id, f"r{job_id}", "", priority, tuple(cards), (1000,) * len(cards),
                      T0 - since, None if left is None else T0 + left, None)


def queued(job_id: int, cards: int, duration: float, priority: int = 0) -> PendingJob:
    return PendingJob(job_id, f"q{job_id}", "", priority, cards, 1000, True, duration, T0 - 60)


def snap(run: tuple[RunningJob, ...] = (), queue: tuple[PendingJob, ...] = ()) -> LiveSnapshot:
    return LiveSnapshot(taken_at=T0, cluster_id=1, cluster_name="c", has_live_state=False,
                        running=run, queue=queue)


def spec(**kw) -> WhatIfSpec:
    base = {"horizon_s": 86400.0, "failure_rate": 0.0, "restart_s": 0.0,
            "checkpoint_interval_s": 1800.0}
    return WhatIfSpec.from_dict({**base, **kw})


def row(result, job_id):
    return next(r for r in result.to_dict()["jobs"]["rows"] if r["job"] == job_id)


def test_a_failed_cards_job_restarts_and_loses_cards_times_time_since_checkpoint():
    since, left, at, tau, restart = 700.0, 5000.0, 2000.0, 1800.0, 120.0
    s = snap((running(1, range(0, 8), since=since, left=left),))
    sp = spec(checkpoint_interval_s=tau, restart_s=restart,
              events=[{"at_s": at, "kind": "fail_card", "target": 3}])
    r = row(run_whatif(s, layout(), sp), 1)
    lost = (since + at) % tau  # checkpoints every tau since the job started
    assert r["lost_card_h"] == pytest.approx(8 * lost / 3600)
    assert r["restarts"] == 1
    assert r["baseline_completion_s"] == pytest.approx(left)
    # its first start (the Gantt's bar start): before the fork, in both cases
    assert r["baseline_start_s"] == r["start_s"] == pytest.approx(-since)
    # it restarts at once on free cards: the remaining work, the rework and the restart
    assert r["completion_s"] == pytest.approx(at + (left - at) + lost + restart)


def test_a_drained_servers_jobs_move_and_lose_nothing():
    s = snap((running(1, range(0, 8), since=0.0, left=7200.0),
              running(2, range(8, 12), since=0.0, left=7200.0)))
    sp = spec(events=[{"at_s": 1000.0, "kind": "drain_server", "target": 100}])
    res = run_whatif(s, layout(), sp)
    r = row(res, 1)
    assert r["lost_card_h"] == 0 and r["restarts"] == 0
    assert r["completion_s"] == pytest.approx(7200.0)  # checkpointed, moved, same work
    assert row(res, 2)["completion_s"] == pytest.approx(7200.0)
    applied = res.perturbed.applied[0]
    assert applied["kind"] == "drain_server" and applied["jobs_hit"] == 1
    assert applied["cards"] == 8
    # the drained server's cards are out: availability drops by 8 cards over the rest
    down = 8 * (86400.0 - 1000.0) / (32 * 86400.0)
    assert res.perturbed.totals["availability"] == pytest.approx(1 - down)


def test_a_switch_fails_every_server_it_carries():
    s = snap((running(1, range(0, 4), since=0.0, left=3600.0),
              running(2, range(8, 12), since=0.0, left=3600.0),
              running(3, range(16, 20), since=0.0, left=3600.0)))
    res = run_whatif(s, layout(), spec(events=[{"at_s": 10.0, "kind": "fail_switch",
                                                "target": 900}]))
    assert res.perturbed.applied[0]["jobs_hit"] == 2
    assert row(res, 3)["restarts"] == 0 and row(res, 1)["restarts"] == 1


def test_a_power_cap_slows_compute_by_the_dvfs_clock():
    lay = layout()
    cap, share, left, at = 400.0, 0.6, 10_000.0, 1000.0
    s = snap((running(1, range(0, 8), since=0.0, left=left),))
    res = run_whatif(s, lay, spec(compute_share=share, events=[
        {"at_s": at, "kind": "cap_power", "value": cap}]))
    f = float(clock_for_cap(np.array([cap]), lay.tdp_w, lay.idle_w, lay.clock_power)[0])
    assert 0.3 < f < 1.0
    slow = share / f + 1 - share
    assert row(res, 1)["completion_s"] == pytest.approx(at + (left - at) * slow)
    # and the busy cards' power falls to the cap (g(f) of the dynamic part)
    g = float(dynamic_fraction(np.array([f]), lay.clock_power)[0])
    assert lay.idle_w + (lay.tdp_w - lay.idle_w) * g == pytest.approx(cap, rel=1e-6)


def test_energy_is_the_integral_of_idle_and_busy_power():
    lay = layout()
    s = snap((running(1, range(0, 8), since=0.0, left=3600.0),))
    base = run_case(s, lay, spec(), events=())
    h = 86400.0
    g1 = float(dynamic_fraction(np.array([1.0]), lay.clock_power)[0])
    joules = 32 * lay.idle_w * h + 8 * (lay.tdp_w - lay.idle_w) * g1 * 3600.0
    assert base.totals["energy_mwh"] == pytest.approx(joules / 3.6e9)
    assert base.totals["peak_rack_kw"] == pytest.approx(
        (16 * lay.idle_w + 8 * (lay.tdp_w - lay.idle_w) * g1) / 1e3)
    assert base.totals["utilisation"] == pytest.approx(8 * 3600.0 / (32 * h))


def test_the_baseline_without_events_is_the_pure_scheduling_replay():
    lay = layout(8, 8, 2)
    rng = np.random.default_rng(3)
    run = (running(1, range(0, 16), since=100.0, left=5000.0),
           running(2, range(20, 24), since=100.0, left=900.0))
    queue = tuple(queued(10 + i, int(rng.choice([1, 2, 4, 8, 16])),
                         float(rng.uniform(600, 20_000))) for i in range(40))
    s = snap(run, queue)
    for policy in ("fifo-first-fit", "easy-backfill"):
        base = run_case(s, lay, spec(policy=policy, horizon_s=7 * 86400.0), events=())
        nodes = Nodes.uniform(8, 8)
        work = Workload.from_records([{"num_gpu": q.cards, "duration_s": q.duration_s}
                                      for q in queue])
        initial = [{"placement": [[c // 8, c % 8, 1.0] for c in j.cards],
                    "remaining_s": j.remaining_s(T0)} for j in run]
        ref = simulate(nodes, work, policy, mode="full", initial=initial,
                       keep_placements=True, target_load=None)
        starts = {j: st for j, _, st, _ in ref.job_log.values()}
        ends = {j: e for j, _, _, e in ref.job_log.values()}
        mine_start = base.per_job["first_start_s"][len(run):]
        mine_end = base.per_job["completion_s"][len(run):]
        assert np.allclose(mine_start, [starts[j] for j in range(len(queue))]), policy
        assert np.allclose(mine_end, [ends[j] for j in range(len(queue))], equal_nan=True)


def test_the_same_seed_gives_the_same_answer_and_both_cases_share_the_failures():
    lay = layout(16, 8, 4)
    s = snap((running(1, range(0, 64), since=0.0, left=40_000.0),),
             tuple(queued(10 + i, 8, 5000.0) for i in range(20)))
    sp = spec(failure_rate=1000.0, seed=5, horizon_s=4 * 86400.0,
              events=[{"at_s": 3600.0, "kind": "fail_rack", "target": 1}])
    a, b = run_whatif(s, lay, sp).to_dict(), run_whatif(s, lay, sp).to_dict()
    a.pop("wall_s"), b.pop("wall_s")
    assert a == b
    assert a["random_failures"] > 0
    assert a["baseline"]["totals"]["lost_card_hours"] > 0  # random failures in the baseline
    other = WhatIfSpec.from_dict({**sp.to_dict(), "seed": 6})
    assert draw_failures(lay, other) != draw_failures(lay, sp)


def test_add_cancel_resize_and_policy_events():
    s = snap((running(1, range(0, 8), since=0.0, left=10_000.0),),
             (queued(2, 8, 3600.0),))
    res = run_whatif(s, layout(), spec(events=[
        {"at_s": 100.0, "kind": "add_job", "job": {"id": 77, "cards": 16,
                                                    "duration_s": 1800.0}},
        {"at_s": 200.0, "kind": "cancel_job", "target": 2},
        {"at_s": 300.0, "kind": "resize_job", "target": 1, "value": 16},
        {"at_s": 400.0, "kind": "change_policy", "policy": "best-fit"}]))
    assert row(res, 2)["cancelled"] and row(res, 2)["completion_s"] is None
    added = row(res, "events[0]")
    assert added["baseline_completion_s"] is None
    assert added["completion_s"] == pytest.approx(100.0 + 1800.0)
    # resized at 300 s: 9,700 s of 8-card work left is 4,850 s on 16 cards; 16 are free
    # (32, less the added job's 16: the queued job 2 was cancelled at 200 s)
    r1 = row(res, 1)
    assert r1["completion_s"] == pytest.approx(300.0 + 9700.0 / 2)
    assert r1["baseline_completion_s"] == pytest.approx(10_000.0)


def test_bad_events_name_their_field():
    with pytest.raises(WhatIfInputError) as exc:
        WhatIfSpec.from_dict({"horizon_s": 40 * 86400.0})
    assert exc.value.field == "horizon_s"
    with pytest.raises(WhatIfInputError) as exc:
        WhatIfSpec.from_dict({"events": [{"at_s": 1, "kind": "fail_card", "target": 1},
                                         {"at_s": 1, "kind": "explode", "target": 1}]})
    assert exc.value.field == "events[1].kind"
    with pytest.raises(WhatIfInputError) as exc:
        WhatIfSpec.from_dict({"events": [{"at_s": 1, "kind": "fail_card", "target": "x"}]})
    assert exc.value.field == "events[0].target"
    with pytest.raises(WhatIfInputError) as exc:
        run_whatif(snap(), layout(), spec(events=[{"at_s": 1, "kind": "fail_card",
                                                   "target": 999}]))
    assert exc.value.field == "events[0].target"
    with pytest.raises(WhatIfInputError) as exc:
        run_whatif(snap(), layout(), spec(events=[{"at_s": 1, "kind": "cdu_trip",
                                                   "target": "cdu-0"}]))
    assert exc.value.field == "events[0].kind" and "facility" in exc.value.message
    e = Event.from_dict({"at_s": 5, "kind": "cap_power", "target": 2, "value": 500,
                         "duration_s": 60})
    assert Event.from_dict(e.to_dict()) == e


def test_a_cdu_trip_through_the_facility_engine():
    lay = layout(8, 8, 2)  # 4 racks
    plant = demo_plant(4, racks_per_cdu=2, rack_kw=40.0)
    s = snap((running(1, range(0, 64), since=0.0, left=86400.0),))
    sp = spec(horizon_s=3 * 3600.0, events=[{"at_s": 600.0, "kind": "cdu_trip",
                                             "target": "cdu-0"}])
    fac = run_whatif(s, lay, sp, plant=plant).facility
    assert fac is not None and fac["matched_racks"]
    assert fac["baseline"]["racks_at_thermal_limit"] == 0
    assert fac["perturbed"]["racks_at_thermal_limit"] >= 1
    assert fac["perturbed"]["first_thermal_limit_s"] > 600.0
    assert math.isfinite(fac["baseline"]["mean_pue"]) and fac["baseline"]["mean_pue"] > 1.0
    with pytest.raises(WhatIfInputError) as exc:
        run_whatif(s, lay, spec(events=[{"at_s": 1, "kind": "cdu_trip", "target": "nope"}]),
                   plant=plant)
    assert exc.value.field == "events[0].target"


def test_random_failures_come_at_the_calibrated_rates():
    """Over many seeds the mean count of drawn failures is Σ λ·n·T (Poisson means):
    per card the GPU and 5 HBM stacks, per server the host (Llama 3's Table 5 rates)."""
    from simulation.resilience import calibrate

    lay = layout(64, 8, 4)
    sp = spec(failure_rate=200.0, horizon_s=7 * 86400.0)
    c = calibrate()
    hours = sp.horizon_s / 3600 * sp.failure_rate
    expected = hours * (512 * (c["card"].rate_per_unit_h + 5 * c["hbm"].rate_per_unit_h)
                        + 64 * c["host"].rate_per_unit_h)
    counts = [len(draw_failures(lay, WhatIfSpec.from_dict({**sp.to_dict(), "seed": s})))
              for s in range(60)]
    # the mean of 60 Poisson draws is within 4 standard errors of λ·n·T
    assert abs(np.mean(counts) - expected) < 4 * math.sqrt(expected / 60)
    hosts = [f for f in draw_failures(lay, sp) if f.kind == "host"]
    assert all(len(f.slots) == 8 and f.repair_s == c["host"].repair_h * 3600 for f in hosts)


def test_a_hot_spare_lets_a_failed_job_resume_in_place():
    """A full cluster: without spares the failed job waits in the queue for cards; with
    one spare it resumes at once (rework since the checkpoint + restart), and the
    spare goes back to the pool when it ends."""
    since, left, at, tau, restart = 300.0, 4000.0, 1000.0, 1800.0, 60.0
    s = snap((running(1, range(0, 16), since=since, left=left),
              running(2, range(16, 32), since=0.0, left=20_000.0)))
    events = [{"at_s": at, "kind": "fail_card", "target": 3}]
    base = dict(checkpoint_interval_s=tau, restart_s=restart, events=events)
    without = row(run_whatif(s, layout(), spec(**base)), 1)
    rework = (since + at) % tau
    resumed = at + (left - at) + rework + restart
    # 31 cards up, 16 held by job 2: job 1 (16 cards) waits until job 2 ends
    assert without["completion_s"] == pytest.approx(20_000.0 + (left - at) + rework + restart)
    res = run_whatif(s, layout(), spec(spares=1, **base))
    assert row(res, 1)["completion_s"] == pytest.approx(resumed)
    assert row(res, 1)["lost_card_h"] == pytest.approx(16 * rework / 3600)
    assert res.perturbed.jobs["spare_swaps"] == 1
    # the pool emptied by an event: back to waiting
    emptied = run_whatif(s, layout(), spec(spares=1, **{**base, "events": [
        {"at_s": 10.0, "kind": "change_spares", "value": 0}, *events]}))
    assert row(emptied, 1)["completion_s"] == pytest.approx(without["completion_s"])


def test_the_queue_series_counts_waiting_jobs_and_their_cards():
    """A hand case: 32 cards, a 24-card job running to 3,600 s; two 24-card jobs queued
    at the fork (FIFO, 1,800 s each). Job 2 waits until 3,600 s; job 3 behind it until
    5,400 s. The queue is 2 jobs / 48 cards on [0, 3600), 1 job / 24 cards on
    [3600, 5400), empty after: the means are those steps' integrals over the horizon."""
    s = snap((running(1, range(0, 24), since=0.0, left=3600.0),),
             (queued(2, 24, 1800.0), queued(3, 24, 1800.0)))
    h = 7200.0
    base = run_case(s, layout(), spec(horizon_s=h), events=())
    series = base.series
    at = {round(t): (w, c) for t, w, c in zip(series["t_s"], series["waiting_jobs"],
                                              series["queued_cards"], strict=True)}
    assert at[0] == (2, 48.0) and at[3600] == (1, 24.0) and at[5400] == (0, 0.0)
    assert base.totals["waiting_jobs_mean"] == pytest.approx((2 * 3600 + 1 * 1800) / h)
    assert base.totals["queued_cards_mean"] == pytest.approx((48 * 3600 + 24 * 1800) / h)
    assert base.totals["waiting_jobs_peak"] == 2
    # a server of the running job fails at 600 s: job 1 goes back to the queue, and the
    # 24 cards still up take job 2 at once — the queue is then jobs 3 and 1 (48 cards)
    res = run_whatif(s, layout(), spec(horizon_s=h, events=[
        {"at_s": 600.0, "kind": "fail_server", "target": 100}]))
    p = res.perturbed.series
    k = p["t_s"].index(600.0)
    assert (p["waiting_jobs"][k], p["queued_cards"][k]) == (2, 48.0)
    out = res.to_dict()
    assert out["difference"]["waiting_jobs_mean"] == pytest.approx(
        res.perturbed.totals["waiting_jobs_mean"] - base.totals["waiting_jobs_mean"])


@pytest.mark.parametrize(("static_w", "cap_w"), [((), 250.0), ((800.0, 400.0), 212.5)])
def test_a_new_site_contract_caps_every_card_to_its_share(static_w, cap_w):
    """32 cards (TDP 700 W, idle 100 W). At 1,000 s the contract falls to 10 kW at PUE
    1.25: the site's IT budget is 8 kW; the racks' static non-card load (servers,
    switches, optics: 0, or 0.8 + 0.4 kW) comes off it first, so each card's share is
    (8 kW − static) / 32 — 250 W, or 212.5 W with the 1.2 kW of static load; the clock is
    the DVFS clock whose busy power is that cap, and the 8-card job slows by
    c/f + 1 − c; the IT power (cards + static) never exceeds the budget after. Lifted
    after 2 h (``duration_s``): full clock again."""
    lay = replace(layout(), rack_static_w=static_w)
    left, at, share = 20_000.0, 1000.0, 0.7
    s = snap((running(1, range(0, 8), since=0.0, left=left),))
    res = run_whatif(s, lay, spec(compute_share=share, pue=1.25, events=[
        {"at_s": at, "kind": "change_contract", "value": 10.0, "duration_s": 7200.0}]))
    f = float(clock_for_cap(np.array([cap_w]), lay.tdp_w, lay.idle_w, lay.clock_power)[0])
    applied = res.perturbed.applied[0]
    assert applied["card_cap_w"] == pytest.approx((10e3 / 1.25 - sum(static_w)) / 32)
    assert applied["card_cap_w"] == pytest.approx(cap_w)
    assert applied["static_kw"] == pytest.approx(sum(static_w) / 1e3)
    assert applied["clock"] == pytest.approx(f) and not applied["below_idle"]
    slow = share / f + 1 - share
    # 7,200 s at the capped pace does 7,200 / slow of work; the rest at full clock
    done_capped = 7200.0 / slow
    assert row(res, 1)["completion_s"] == pytest.approx(at + 7200.0 + (left - at - done_capped))
    series = res.perturbed.series
    during = [p for t, p in zip(series["t_s"], series["power_kw"], strict=True)
              if at <= t < at + 7200.0]
    # 24 idle cards at 100 W and 8 busy ones at the cap; the baseline's are at 700 W
    assert during and max(during) == pytest.approx((24 * 100 + 8 * cap_w) / 1e3)
    # with every card busy at the cap, cards + static fill the budget exactly
    assert 32 * cap_w + sum(static_w) == pytest.approx(10e3 / 1.25)
    assert res.baseline.totals["peak_power_kw"] == pytest.approx((24 * 100 + 8 * 700) / 1e3)


def test_a_contract_in_force_at_the_fork_caps_both_cases_and_the_plant_takes_the_lowest():
    from simulation.whatif.facility import contract_plant

    lay = layout()
    s = snap((running(1, range(0, 8), since=0.0, left=3600.0),))
    sp = spec(contract_kw=16.0, pue=1.0, events=[
        {"at_s": 60.0, "kind": "change_contract", "value": 40.0}])
    res = run_whatif(s, lay, sp)
    f = float(clock_for_cap(np.array([500.0]), lay.tdp_w, lay.idle_w, lay.clock_power)[0])
    slow = 0.7 / f + 0.3
    # the baseline runs capped at 500 W a card all along; the raise to 40 kW (1,250 W a
    # card, above the TDP) lifts the cap at 60 s
    assert row(res, 1)["baseline_completion_s"] == pytest.approx(3600.0 * slow)
    assert row(res, 1)["completion_s"] == pytest.approx(60.0 + 3600.0 - 60.0 / slow)
    plant = demo_plant()
    assert contract_plant(plant, sp).site.contract_kw == 16.0
    assert contract_plant(plant, spec()) is plant


@pytest.mark.parametrize(("event", "field"), [
    ({"value": -5.0}, "events[0].value"),
    ({"value": float("nan")}, "events[0].value"),
    ({"value": None}, "events[0].value"),
    ({"value": 100.0, "target": 3}, "events[0].target"),
])
def test_a_bad_contract_names_its_field(event, field):
    with pytest.raises(WhatIfInputError) as exc:
        WhatIfSpec.from_dict({"events": [{"at_s": 10, "kind": "change_contract", **event}]})
    assert exc.value.field == field
    with pytest.raises(WhatIfInputError) as exc:
        WhatIfSpec.from_dict({"contract_kw": -1})
    assert exc.value.field == "contract_kw"
