"""The plant composed with the jobs to a fixed point (``simulation.whatif.facility``):
per-rack power from the jobs' placement, window by window; throttled jobs' lower power
fed back until the power that sets the limits is the power under them; a tripped rack
back after its cool-down; the baseline and the perturbed case on the same seed and
snapshot, the fork's degraded elements in both.

The cluster is ``test_plant_jobs``'s (4 racks of 16 cards, racks 1-2 on CDU 0, 3-4 on
CDU 1), with hotter cards where a hot day must reach the card limit: 1,200 W at 0.04 K/W
sit 48 K over their coolant, on ``demo_plant(4, racks_per_cdu=2, rack_kw=20)``.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simulation.facility.presets import demo_plant
from simulation.facility.whatif import Event, WhatIfInput
from simulation.facility.whatif import run as run_facility
from simulation.whatif import run_case, run_whatif
from simulation.whatif.engine import draw_failures
from simulation.whatif.facility import (
    FIXED_POINT_TOL,
    TRIP_COOLDOWN_S,
    fixed_point_residual,
    held_demand,
    out_intervals,
    plant_limits,
    window_means,
    window_s,
)

from .test_engine import running, snap, spec
from .test_plant_jobs import LEFT, _completions, _world

HOT = [{"at_s": 600.0, "kind": "raise_wet_bulb", "value": 8.0}]


def _hot_world(jobs=None):
    lay, _, s = _world()
    lay = replace(lay, tdp_w=1200.0)
    if jobs is not None:
        s = snap(jobs)
    return lay, demo_plant(4, racks_per_cdu=2, rack_kw=20.0), s


def test_window_means_are_exact_integrals_of_the_step_function():
    """Two racks: 2 W then 4 W from 30 s; 0 W then 6 W from 90 s; windows of 50 s over
    120 s (the last 20 s): rack 1 (30·2 + 20·4)/50, 4, 4; rack 2 0, 10·6/50, 6."""
    t = np.array([0.0, 30.0, 90.0])
    w = np.array([[2.0, 0.0], [4.0, 0.0], [4.0, 6.0]])
    got = window_means(t, w, 120.0, 50.0)
    np.testing.assert_allclose(got, [[2.8, 0.0], [4.0, 60.0 / 50.0], [4.0, 6.0]], rtol=1e-12)
    # the integral is kept: Σ mean × window length = ∫ w dt
    assert (got * np.array([50.0, 50.0, 20.0])[:, None]).sum(axis=0).tolist() == \
        pytest.approx([30 * 2 + 90 * 4, 30 * 6])


def test_a_hot_day_throttles_the_racks_and_their_power_falls_at_a_fixed_point():
    """+8 °C of wet bulb: the CDUs' supply rises and the 1,200 W cards reach their limit,
    so every rack is throttled and the jobs finish later at a lower mean power and
    energy than the baseline's. The composition iterates jobs → plant → limits → jobs: checked
    from outside, the plant run on the final case's own power gives limits under which the
    jobs draw that same power again, within the tolerance (power from the clock = the
    clock from the power)."""
    lay, plant, s = _hot_world()
    sp = spec(horizon_s=6 * 3600.0, events=HOT)
    res = run_whatif(s, lay, sp, plant=plant)
    b, p = res.baseline.totals, res.perturbed.totals
    assert b["plant_throttled_racks"] == 0 and p["plant_throttled_racks"] == 4
    assert p["mean_power_kw"] < b["mean_power_kw"] and p["energy_mwh"] < b["energy_mwh"]
    assert p["plant_lowest_clock"] < 1.0
    done = _completions(res)
    assert done[1][0] == pytest.approx(LEFT) and done[1][1] > LEFT
    fp = res.facility["perturbed"]["fixed_point"]
    tol_w = FIXED_POINT_TOL * 16 * lay.tdp_w
    assert fp["converged"] and fp["rounds"] >= 2 and fp["residual_kw"] * 1e3 <= tol_w
    assert res.facility["baseline"]["fixed_point"] == {
        "rounds": 1, "converged": True, "residual_kw": None, "tolerance_kw": tol_w / 1e3}
    # from outside: the final case's power → the plant → limits → the jobs again
    final = res.perturbed
    limits = plant_limits(plant, sp, s, lay, final, perturbed=True)
    assert limits and min(w for _, _, w in limits if w) < lay.tdp_w
    again = run_case(s, lay, sp, failures=draw_failures(lay, sp), plant_limits=limits)
    assert fixed_point_residual(again.rack_steps, final.rack_steps, sp.horizon_s) <= tol_w
    assert again.totals["mean_power_kw"] == pytest.approx(p["mean_power_kw"], rel=0.01)


def test_per_rack_power_from_the_placement_sets_which_rack_reaches_its_limit():
    """Job 1 on rack 1 only (cards 0-15), job 2 on racks 3-4; rack 2 idles. On the hot
    day CDU 1's racks, both busy, reach the card limit; CDU 0 carries half the heat, its
    busy rack 1 stays under it, and so does idle rack 2: the time until the limit differs
    per rack as the placement dictates. Driven by the mean rack power instead (the
    cluster's total spread evenly), no rack reaches it."""
    lay, plant, s = _hot_world((running(1, range(0, 16), since=0.0, left=LEFT),
                                running(2, range(32, 64), since=0.0, left=LEFT)))
    res = run_whatif(s, lay, spec(horizon_s=3 * 3600.0, events=HOT), plant=plant)
    racks = res.facility["perturbed"]["racks"]
    assert racks["ids"] == [1, 2, 3, 4]
    t = racks["time_to_limit_s"]
    assert t[0] is None and t[1] is None and t[2] is not None and t[3] is not None
    assert res.facility["baseline"]["racks"]["time_to_limit_s"] == [None] * 4
    # the same total power, evenly spread: no rack reaches the limit
    times, rack_w = res.baseline.rack_steps
    mean = window_means(times, rack_w, 3 * 3600.0, 3 * 3600.0)[0].mean()
    even = run_facility(plant, WhatIfInput(
        horizon_s=3 * 3600.0, dt_s=10.0, rack_w=(float(mean),) * 4, cards_per_rack=16,
        card_tdp_w=lay.tdp_w, card_idle_w=lay.idle_w,
        events=(Event(600.0, "hot_day", "", 8.0),)))
    assert even.racks["time_to_limit_s"] == [None] * 4


def test_a_tripped_rack_comes_back_after_its_cool_down_once_its_coolant_is_back():
    """CDU 0 trips for 40 minutes: racks 1-2 lose their coolant flow, throttle to idle,
    then pass the shutdown temperature and trip; job 1 loses its work since the last
    checkpoint. The CDU is back at 3,000 s: once the cards are under the limit and
    ``TRIP_COOLDOWN_S`` has passed, the racks return, job 1 restarts on them and
    completes within the horizon; at the end every card is available again."""
    lay, plant, s = _world()
    events = [{"at_s": 600.0, "kind": "cdu_trip", "target": "cdu-0", "duration_s": 2400.0}]
    res = run_whatif(s, lay, spec(horizon_s=6 * 3600.0, events=events), plant=plant)
    p = res.perturbed.totals
    assert p["plant_out_racks"] == 2 and p["lost_card_hours"] > 0
    assert res.facility["perturbed"]["racks"]["trips"] == [1, 1, 0, 0]
    done = _completions(res)
    assert done[1][0] == pytest.approx(LEFT) and LEFT < done[1][1] < 6 * 3600.0
    assert done[2] == (pytest.approx(LEFT), pytest.approx(LEFT))
    assert res.perturbed.series["availability"][-1] == 1.0
    assert res.facility["perturbed"]["fixed_point"]["converged"]


@pytest.mark.parametrize("cooldown", [None, TRIP_COOLDOWN_S])
def test_the_plants_tripped_rack_returns_only_when_cooled_and_after_the_cool_down(cooldown):
    """The facility engine alone: without a cool-down a tripped rack stays out to the
    horizon; with one it is back (its limit no longer 0) no earlier than its trip +
    the cool-down and the CDU's return (3,000 s), its cards then under the limit."""
    _, plant, _ = _world()
    res = run_facility(plant, WhatIfInput(
        horizon_s=3 * 3600.0, dt_s=10.0, rack_w=(11200.0,) * 4, cards_per_rack=16,
        card_tdp_w=700.0, limit_step=0.02, trip_cooldown_s=cooldown,
        events=(Event(600.0, "cdu_trip", "cdu-0", None, 2400.0),)))
    assert res.racks["trips"] == [1, 1, 0, 0]
    rack0 = [(t, w) for t, r, w in res.card_limits if r == 0]
    trip = next(t for t, w in rack0 if w == 0.0)
    if cooldown is None:
        assert res.racks["out_at_end"] == [True, True, False, False]
        assert rack0[-1] == (trip, 0.0)
    else:
        assert res.racks["out_at_end"] == [False] * 4
        back = next(t for t, w in rack0 if t > trip and w != 0.0)
        assert back >= max(trip + cooldown, 3000.0)
        assert res.series["max_card_c"][-1] < 85.0


def test_out_intervals_and_held_demand():
    """A rack at 0 from 100 s to 400 s (and rack 1 from 300 s to the horizon): the
    demand fed back there is the demand that took it out, elsewhere the case's."""
    limits = [(50.0, 0, 500.0), (100.0, 0, 0.0), (300.0, 1, 0.0), (400.0, 0, None)]
    assert out_intervals(limits, 1000.0) == [(0, 100.0, 400.0), (1, 300.0, 1000.0)]
    case = (np.array([0.0, 100.0]), np.array([[5.0, 5.0], [0.0, 5.0]]))
    before = (np.array([0.0]), np.array([[9.0, 9.0]]))
    t, w = held_demand(case, before, out_intervals(limits, 1000.0))
    assert t.tolist() == [0.0, 100.0]
    assert w.tolist() == [[5.0, 5.0], [9.0, 5.0]]   # rack 1 held only from 300 s …
    t2, w2 = held_demand((np.array([0.0, 300.0]), np.array([[5.0, 5.0], [5.0, 0.0]])),
                         before, [(1, 300.0, 1000.0)])
    assert w2.tolist() == [[5.0, 5.0], [5.0, 9.0]]   # … there it draws what it asked for
    assert window_s(3600.0) == 600.0 and window_s(7 * 86400.0) == 7 * 86400.0 / 48


def test_the_baseline_and_the_perturbed_case_share_the_seed_the_snapshot_and_the_fork():
    """No event, random failures on, the fork's CDU 0 and UPS degraded (one unit out
    each): both cases draw the same failures from the seed, run from the same snapshot
    on the same forked plant, so every figure is equal — and the degraded elements
    are in both (the plant's PUE differs from the same run without them)."""
    lay, plant, s = _world()
    sp = spec(horizon_s=6 * 3600.0, failure_rate=1000.0, seed=11)
    degraded = replace(s, facility_down={"degraded": ("cooling:cdu-0", "power:ups")})
    res = run_whatif(degraded, lay, sp, plant=plant)
    assert res.failures > 0
    assert res.baseline.totals == res.perturbed.totals
    assert res.baseline.jobs == res.perturbed.jobs and res.baseline.jobs["restarts"] > 0
    fac = res.facility
    assert fac["fork"]["degraded"] == ["cdu-0", "ups"]
    for k in ("mean_pue", "facility_mwh", "it_mwh", "racks_at_thermal_limit"):
        assert fac["baseline"][k] == fac["perturbed"][k]
    plain = run_whatif(s, lay, sp, plant=plant).facility
    assert plain["baseline"]["mean_pue"] != fac["baseline"]["mean_pue"]


def test_a_degraded_one_unit_element_keeps_its_unit_as_in_the_live_plant():
    """The fork follows ``validate.units_out``: a degraded element loses one unit but
    never its last, so a one-unit degraded element gets no trip event (the live plant
    keeps it running too), while a multi-unit one loses a unit from time 0."""
    from simulation.whatif.facility import forked_plant

    _, plant, s = _world()
    one = replace(plant, cooling=tuple(replace(c, units=1) if c.key == "cdu-0" else c
                                       for c in plant.cooling))
    two = replace(plant, cooling=tuple(replace(c, units=2) if c.key == "cdu-0" else c
                                       for c in plant.cooling))
    degraded = replace(s, facility_down={"degraded": ("cooling:cdu-0",)})
    _, events_one, unknown = forked_plant(one, degraded)
    assert events_one == () and unknown == []
    _, events_two, _ = forked_plant(two, degraded)
    assert [(e.kind, e.target) for e in events_two] == [("pump_trip", "cdu-0")]
