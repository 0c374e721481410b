"""The plant and the jobs composed (``simulation.whatif.facility.compose``), and what the
fork brings into a run: live caps, facility elements and switches down, peak feed power.

The cluster of these tests: 8 servers of 8 cards (700 W TDP, 100 W idle), 2 servers a
rack (4 racks of 16 cards), on ``demo_plant(4, racks_per_cdu=2)``: racks 1-2 on CDU 0,
racks 3-4 on CDU 1. Job 1 runs on racks 1-2 (cards 0-31), job 2 on racks 3-4 (cards
32-63), each with two hours left.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simulation.facility.plant import EfficiencyCurve
from simulation.facility.presets import demo_plant
from simulation.snapshot import CardReadings
from simulation.training.energy import clock_for_cap
from simulation.whatif import run_whatif
from simulation.whatif.engine import live_rack_caps
from simulation.whatif.facility import LIMIT_STEP
from simulation.whatif.layout import DEFAULT_CLOCK_POWER

from .test_engine import layout, running, snap, spec

LEFT = 7200.0


def _world():
    lay = layout(8, 8, 2)
    plant = demo_plant(4, racks_per_cdu=2, rack_kw=40.0)
    s = snap((running(1, range(0, 32), since=0.0, left=LEFT),
              running(2, range(32, 64), since=0.0, left=LEFT)))
    return lay, plant, s


def _completions(result):
    return {r["job"]: (r["baseline_completion_s"], r["completion_s"])
            for r in result.to_dict()["jobs"]["rows"]}


def _with_caps(s, caps: dict[int, float]):
    n = 64
    nan = np.full(n, np.nan, np.float32)
    cap = np.full(n, np.nan, np.float32)
    for c, w in caps.items():
        cap[c] = w
    return replace(s, readings=CardReadings(np.arange(n, dtype=np.int64), nan, nan, nan, cap))


def test_a_cdu_trip_without_a_spare_cdu_makes_its_racks_jobs_finish_later():
    """CDU 0 trips (all its units: no redundancy left for racks 1-2) ten minutes in. The
    plant's thermal ceiling (T_limit − T_coolant)/R falls below the cards' TDP as the
    coolant warms, then the cards pass their shutdown temperature: job 1 runs slower,
    then loses its rack and restarts from its checkpoint — it finishes later than in the
    baseline. Job 2, on the other CDU, is untouched; the baseline is the plain replay."""
    lay, plant, s = _world()
    res = run_whatif(s, lay, spec(horizon_s=6 * 3600.0, events=[
        {"at_s": 600.0, "kind": "cdu_trip", "target": "cdu-0"}]), plant=plant)
    done = _completions(res)
    assert done[1][0] == pytest.approx(LEFT) and done[1][1] > LEFT + 600.0
    assert done[2] == (pytest.approx(LEFT), pytest.approx(LEFT))
    p, b = res.perturbed.totals, res.baseline.totals
    assert b["plant_throttled_racks"] == b["plant_out_racks"] == 0
    assert p["plant_throttled_racks"] == 2 and p["plant_lowest_clock"] < 1.0
    assert p["plant_out_racks"] == 2 and p["lost_card_hours"] > 0
    fac = res.facility
    assert fac is not None and fac["baseline"]["job_limits"]["changes"] == 0
    limits = fac["perturbed"]["job_limits"]
    assert limits["racks_limited"] == 2 and limits["racks_out"] == 2
    # the limits are floored to the step (a multiple of 2 % of the TDP)
    assert limits["lowest_card_w"] % (LIMIT_STEP * lay.tdp_w) == pytest.approx(0.0, abs=1e-6)


def test_a_wet_bulb_rise_within_the_plants_capacity_changes_nothing_for_the_jobs():
    """+3 °C of wet bulb: the towers work harder (PUE up), the CDUs still hold their
    supply: no rack is limited and every job ends exactly as in the baseline."""
    lay, plant, s = _world()
    res = run_whatif(s, lay, spec(horizon_s=6 * 3600.0, events=[
        {"at_s": 600.0, "kind": "raise_wet_bulb", "value": 3.0}]), plant=plant)
    assert res.facility is not None and res.facility["difference"]["mean_pue"] > 0
    assert res.facility["perturbed"]["job_limits"]["changes"] == 0
    for base, pert in _completions(res).values():
        assert base == pert == pytest.approx(LEFT)
    assert res.perturbed.totals["plant_throttled_racks"] == 0
    assert res.to_dict()["difference"]["energy_mwh"] == 0


def test_the_forks_live_caps_slow_the_baseline_at_the_dvfs_clock():
    """Live capping held rack 2's cards (16-31) at 400 W at the fork: both cases run
    them at the clock whose busy power fits 400 W, f, and job 1 (on racks 1-2) takes
    c/f + 1 − c as long (c = 0.7); job 2 is uncapped."""
    lay, _, s = _world()
    capped = _with_caps(s, {c: 400.0 for c in range(16, 32)})
    res = run_whatif(capped, lay, spec(horizon_s=6 * 3600.0))
    f = float(clock_for_cap(np.array([400.0]), 700.0, 100.0, DEFAULT_CLOCK_POWER)[0])
    done = _completions(res)
    assert done[1][0] == pytest.approx(LEFT * (0.7 / f + 0.3), rel=1e-9)
    assert done[2][0] == pytest.approx(LEFT)


def test_a_racks_live_caps_are_averaged_with_its_uncapped_cards_at_tdp():
    lay, _, s = _world()
    caps = live_rack_caps(_with_caps(s, {**{c: 400.0 for c in range(16, 24)},
                                         **{c: 900.0 for c in range(40, 48)}}), lay)
    # rack 2: 8 cards at 400 W, 8 uncapped (700 W): 550 W; a cap above TDP binds nothing
    assert caps.tolist() == [np.inf, 550.0, np.inf, np.inf]


def test_a_cdu_down_at_the_fork_limits_the_baseline_too():
    """The snapshot recorded CDU 0 failed: both cases run without it from time 0. Racks
    1-2 have no coolant flow: settled, their cards are past shutdown, so the racks are
    out from the start and job 1 (restart 0 s, nothing since its checkpoint) waits for
    job 2's racks: it ends at 2 × 7,200 s in the baseline too. An element the plant
    does not have is listed, not fatal."""
    lay, plant, s = _world()
    down = replace(s, facility_down={"failed": ("cooling:cdu-0", "power:gone")})
    res = run_whatif(down, lay, spec(horizon_s=6 * 3600.0), plant=plant)
    done = _completions(res)
    assert done[1] == (pytest.approx(2 * LEFT), pytest.approx(2 * LEFT))
    assert done[2][0] == pytest.approx(LEFT)
    fork = res.facility["fork"]
    assert fork["down"] == ["cooling:cdu-0", "power:gone"] and fork["unknown"] == ["power:gone"]
    assert res.baseline.totals["plant_out_racks"] == 2
    assert res.baseline.totals["plant_jobs_hit"] == 1
    # without the fork's CDU down the same run is the plain replay
    plain = run_whatif(s, lay, spec(horizon_s=6 * 3600.0), plant=plant)
    assert _completions(plain)[1] == (pytest.approx(LEFT), pytest.approx(LEFT))


def test_a_degraded_cdu_at_the_fork_loses_one_pump_only():
    """``degraded``: one unit out from time 0. CDU 0 has N+1 pumps, so losing one leaves
    the racks cooled: no rack is limited, the jobs end as without it."""
    lay, plant, s = _world()
    res = run_whatif(replace(s, facility_down={"degraded": ("cooling:cdu-0",)}), lay,
                     spec(horizon_s=3 * 3600.0), plant=plant)
    assert res.facility["fork"]["degraded"] == ["cdu-0"]
    assert res.facility["baseline"]["job_limits"]["changes"] == 0
    assert _completions(res)[1] == (pytest.approx(LEFT), pytest.approx(LEFT))


def test_a_switch_down_at_the_fork_cuts_its_servers_off():
    """Leaf 900 (over servers 100-101) recorded failed: their 16 cards are out of the
    run; a queued 64-card job never starts, a 48-card one does."""
    from .test_engine import queued

    lay, _, _ = _world()
    s = replace(snap(queue=(queued(5, 64, 600.0), queued(6, 48, 600.0, priority=-1))),
                devices_down={"failed": (900,)})
    res = run_whatif(s, lay, spec(horizon_s=3600.0, policy="easy-backfill"))
    assert res.baseline.totals["cards"] == 48
    done = _completions(res)
    assert done[5][0] is None and done[6][0] == pytest.approx(600.0)


@pytest.mark.parametrize("eff", [1.0, 0.95])
def test_peak_feed_power_is_the_peak_it_load_through_the_chains_losses(eff):
    """Every element of the power chain at a constant efficiency η: the feed draws the IT
    load / η⁴ (feed → transformer → UPS → PDU) and the mechanical plant beside it (no
    conversion loss, one feed). The IT load is the cards' and the racks' static non-card
    load (servers, switches and optics: 1, 2, 3 and 4 kW on the four racks), so its peak
    is (cards' peak + 10 kW) / η⁴ + the plant's peak mechanical draw — kW, next to the
    peak rack power (the cards')."""
    lay, plant, s = _world()
    lay = replace(lay, rack_static_w=(1000.0, 2000.0, 3000.0, 4000.0))
    curve = EfficiencyCurve((1.0,), (eff,))
    flat = replace(plant, power=tuple(replace(p, efficiency=curve) for p in plant.power))
    res = run_whatif(s, lay, spec(horizon_s=3 * 3600.0), plant=flat)
    for name, case in (("baseline", res.baseline), ("perturbed", res.perturbed)):
        t = case.totals
        mech = res.facility[name]["peak_mechanical_kw"]
        assert mech > 0
        assert t["it_static_kw"] == 10.0
        assert t["peak_feed_kw"] == pytest.approx((t["peak_power_kw"] + 10.0) / eff ** 4 + mech,
                                                  rel=1e-9)
        assert t["peak_rack_kw"] == pytest.approx(16 * 0.7)
        # the plant is driven with the same IT load: the cards' energy + 10 kW × 3 h
        assert res.facility[name]["it_mwh"] == pytest.approx(t["energy_mwh"] + 0.03, rel=1e-9)
    d = res.to_dict()
    assert "peak_feed_kw" in d["difference"]
    assert res.facility["static_kw"] == 10.0
