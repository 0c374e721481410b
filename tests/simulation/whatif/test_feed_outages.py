"""Racks an overloaded power element takes down take their jobs down
(``simulation.whatif.facility.compose`` → ``feed_outages`` → ``_Case.power_out``).

The cluster of ``test_plant_jobs``: 4 racks of 16 cards (700 W TDP, 100 W idle), job 1 on
racks 0-1 (cards 0-31) and job 2 on racks 2-3 (cards 32-63), two hours left each, on
``demo_plant(4, racks_per_cdu=2, racks_per_pdu=2)``: racks 0-1 under ``pdu-0``, racks
2-3 under ``pdu-1``. Here each PDU is two N+1 units of ``PDU_UNIT_KW``: two units carry
a PDU's pair of busy racks (2 × 16 × 700 W = 22.4 kW), one does not when rated 20 kW,
and does when rated 40 kW. Checkpoints every 30 min since the jobs started at the fork,
restarts cost 2 min of work.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simulation.facility.presets import demo_plant
from simulation.whatif import run_whatif
from simulation.whatif.facility import MAX_ROUNDS

from .test_engine import row, spec
from .test_plant_jobs import LEFT, _world

H = 4 * 3600.0
TAU, RESTART = 1800.0, 120.0
CARDS = 64
RACK_CARDS = 16


def _plant(unit_kw: float):
    plant = demo_plant(4, racks_per_cdu=2, racks_per_pdu=2, rack_kw=40.0)
    power = tuple(replace(p, units=2, redundancy="N+1", rating_kw=unit_kw)
                  if p.kind == "pdu" else p for p in plant.power)
    return replace(plant, power=power)


def _run(events, unit_kw: float):
    lay, _, s = _world()
    return run_whatif(s, lay, spec(horizon_s=H, checkpoint_interval_s=TAU, restart_s=RESTART,
                                   events=events), plant=_plant(unit_kw))


def _rack_kw(case, t: float) -> np.ndarray:
    times, w = case.rack_steps
    return w[max(0, int(np.searchsorted(times, t, side="right")) - 1)] / 1e3


def test_a_pdu_unit_the_survivor_cannot_carry_interrupts_the_jobs_on_its_racks():
    """``pdu-0`` loses a unit at 40 min for 30 min: the survivor (20 kW) cannot carry
    racks 0-1's 22.4 kW, so racks 0-1 are unpowered from 40 to 70 min. Job 1 on them is
    interrupted at 40 min as on a rack failure — it loses the work since its checkpoint
    at 30 min (32 cards × 10 min), waits for its racks (job 2 holds the others) and
    restarts on them at 70 min: done at 70 min + the 80 min left + the 10 min redone + the
    restart. Job 2, under ``pdu-1``, and the baseline are untouched. The racks' cards are
    out for the stretch: availability falls by 32 cards × 30 min over 64 cards × 4 h."""
    at, dur = 2400.0, 1800.0
    res = _run([{"at_s": at, "kind": "feed_trip", "target": "pdu-0", "duration_s": dur}],
               unit_kw=20.0)
    fac = res.facility
    assert fac["perturbed"]["feed"]["racks_down"] == [
        {"element": "pdu-0", "from_s": at, "to_s": at + dur, "racks": [0, 1]}]
    assert fac["baseline"]["feed"]["racks_down"] == []
    since = at % TAU   # the work since its last checkpoint
    j1, j2 = row(res, 1), row(res, 2)
    assert j1["baseline_completion_s"] == pytest.approx(LEFT)
    assert j1["restarts"] == 1
    assert j1["lost_card_h"] == pytest.approx(32 * since / 3600)
    assert j1["completion_s"] == pytest.approx(at + dur + (LEFT - at) + since + RESTART)
    assert j2["restarts"] == 0 and j2["lost_card_h"] == 0.0
    assert j2["completion_s"] == j2["baseline_completion_s"] == pytest.approx(LEFT)
    b, p = res.baseline.totals, res.perturbed.totals
    assert b["lost_card_hours"] == 0.0 and b["feed_out_racks"] == b["feed_jobs_hit"] == 0
    # lost card-hours: the racks' cards × the time since the checkpoint, within cards ×
    # the stretch they were out
    unpowered_h = 2 * RACK_CARDS * dur / 3600
    assert p["lost_card_hours"] == pytest.approx(32 * since / 3600)
    assert 0 < p["lost_card_hours"] <= unpowered_h
    assert fac["perturbed"]["job_limits"]["unpowered_card_h"] == pytest.approx(unpowered_h)
    assert fac["perturbed"]["job_limits"]["racks_unpowered"] == 2
    assert fac["baseline"]["job_limits"]["racks_unpowered"] == 0
    assert p["feed_out_racks"] == 2 and p["feed_jobs_hit"] == 1
    assert b["availability"] == 1.0
    assert p["availability"] == pytest.approx(1 - 2 * RACK_CARDS * dur / (CARDS * H))
    assert res.to_dict()["difference"]["lost_card_hours"] == pytest.approx(32 * since / 3600)
    # out, the racks draw nothing; the others as in the baseline
    for t in (at, at + dur / 2):
        kw = _rack_kw(res.perturbed, t)
        assert kw[:2].tolist() == [0.0, 0.0]
        assert kw[2:] == pytest.approx(_rack_kw(res.baseline, t)[2:])
    # the cards' energy as step functions: racks 0-1 busy to 40 min, nothing while out,
    # busy again from 70 min to job 1's new end, then idle; racks 2-3 as in the baseline
    tdp, idle, end = 700.0, 100.0, j1["completion_s"]
    half = 2 * RACK_CARDS
    base_j = half * 2 * (tdp * LEFT + idle * (H - LEFT))
    pert_j = half * (tdp * LEFT + idle * (H - LEFT)) + half * (
        tdp * at + 0.0 * dur + tdp * (end - at - dur) + idle * (H - end))
    assert b["energy_mwh"] == pytest.approx(base_j / 3.6e9, rel=1e-9)
    assert p["energy_mwh"] == pytest.approx(pert_j / 3.6e9, rel=1e-9)
    assert fac["perturbed"]["fixed_point"]["converged"]


def test_a_pdu_unit_the_survivor_can_carry_interrupts_nothing():
    """The same loss with 40 kW units: the survivor carries racks 0-1's 22.4 kW, no rack
    goes down and the what-if is the baseline in every job and total."""
    res = _run([{"at_s": 2400.0, "kind": "feed_trip", "target": "pdu-0",
                 "duration_s": 1800.0}], unit_kw=40.0)
    assert res.facility["perturbed"]["feed"]["racks_down"] == []
    for j in (1, 2):
        r = row(res, j)
        assert r["restarts"] == 0 and r["lost_card_h"] == 0.0
        assert r["completion_s"] == r["baseline_completion_s"] == pytest.approx(LEFT)
    b, p = res.baseline.totals, res.perturbed.totals
    assert p["feed_out_racks"] == p["feed_jobs_hit"] == 0 and p["lost_card_hours"] == 0.0
    for key in ("energy_mwh", "availability", "utilisation", "lost_card_hours"):
        assert p[key] == pytest.approx(b[key], rel=1e-12), key
    assert res.facility["perturbed"]["fixed_point"]["rounds"] == 1


def test_a_job_moved_off_downed_racks_onto_a_weak_pdu_downs_those_racks_too():
    """The iteration: job 2 is gone (racks 2-3 idle, 3.2 kW), ``pdu-1`` has lost a unit
    from the start (its survivor, 20 kW, carries idle racks), and ``pdu-0`` loses one at
    40 min for 30 min. First pass: racks 0-1 go out and job 1 moves to racks 2-3; the
    power chain then finds ``pdu-1`` overloaded by it at that instant, so racks 2-3 go out
    too (for good: its unit never comes back) — the second pass takes all four racks out
    at once, job 1 waits and restarts on racks 0-1 when they are back, as in the first
    test; the third pass repeats the outages (a fixed point, within ``MAX_ROUNDS``)."""
    lay, _, s = _world()
    s = replace(s, running=s.running[:1])
    at, dur = 2400.0, 1800.0
    res = run_whatif(s, lay, spec(horizon_s=H, checkpoint_interval_s=TAU, restart_s=RESTART,
                                  events=[{"at_s": 0.0, "kind": "feed_trip", "target": "pdu-1"},
                                          {"at_s": at, "kind": "feed_trip", "target": "pdu-0",
                                           "duration_s": dur}]),
                     plant=_plant(20.0))
    fac = res.facility["perturbed"]
    assert fac["feed"]["racks_down"] == [
        {"element": "pdu-0", "from_s": at, "to_s": at + dur, "racks": [0, 1]},
        {"element": "pdu-1", "from_s": at, "to_s": None, "racks": [2, 3]}]
    assert fac["fixed_point"]["converged"] and 2 <= fac["fixed_point"]["rounds"] <= MAX_ROUNDS
    since = at % TAU
    j1 = row(res, 1)
    assert j1["restarts"] == 1 and j1["lost_card_h"] == pytest.approx(32 * since / 3600)
    assert j1["completion_s"] == pytest.approx(at + dur + (LEFT - at) + since + RESTART)
    assert fac["job_limits"]["unpowered_card_h"] == pytest.approx(
        2 * RACK_CARDS * (dur + H - at) / 3600)
    assert res.perturbed.totals["availability"] == pytest.approx(
        1 - 2 * RACK_CARDS * (dur + H - at) / (CARDS * H))
    assert res.baseline.totals["availability"] == 1.0
