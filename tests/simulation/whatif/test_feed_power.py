"""Peak feed power as a time series (``simulation.whatif.facility.feed_power``): a feed
lost by ``feed_trip`` moves its load per the redundancy or takes its racks down, and the
mechanical plant counts at the same instant as the IT load.

The cluster of ``test_plant_jobs``: 4 racks of 16 cards (700 W TDP, 100 W idle) on
``demo_plant(4, racks_per_cdu=2)`` — one utility feed of two units, 2N, over a
transformer, an N+1 UPS and a PDU per rack; every element here at a constant efficiency
η, so at every instant the feed draws (cards + static) / η⁴ + the mechanical plant's draw
then. Jobs 1 and 2 fill the 64 cards for two hours of a three-hour horizon.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simulation.facility.plant import EfficiencyCurve
from simulation.whatif import run_whatif
from simulation.whatif.facility import window_s

from .test_engine import spec
from .test_plant_jobs import _world

ETA = 0.95
STATIC_KW = 10.0
H = 3 * 3600.0


def _flat(plant, feed_unit_kw: float | None = None):
    curve = EfficiencyCurve((1.0,), (ETA,))
    power = tuple(replace(p, efficiency=curve,
                          rating_kw=feed_unit_kw if feed_unit_kw and p.kind == "feed"
                          else p.rating_kw) for p in plant.power)
    return replace(plant, power=power)


def _cards_kw(case, t: float) -> float:
    times, w = case.rack_steps
    i = max(0, int(np.searchsorted(times, t, side="right")) - 1)
    return float(w[i].sum()) / 1e3


def _run(events, feed_unit_kw=None):
    lay, plant, s = _world()
    lay = replace(lay, rack_static_w=(1000.0, 2000.0, 3000.0, 4000.0))
    return run_whatif(s, lay, spec(horizon_s=H, failure_rate=0.0, events=events),
                      plant=_flat(plant, feed_unit_kw))


def _check_points(res, name, case, down_from=None):
    """Each point of the series: (cards + static) / η⁴ + mechanical at that instant (the
    racks at 0 from ``down_from`` on), the mechanical the plant run's series interpolated
    there; the peak is the series' highest point, never the sum of separate peaks."""
    feed = res.facility[name]["feed"]
    fac = res.facility[name]
    assert feed["t_s"] == sorted(feed["t_s"]) and len(feed["t_s"]) == len(feed["kw"])
    w = window_s(H)
    assert set(np.arange(0.0, H, w).tolist()) <= set(feed["t_s"])
    for t, kw, mech in zip(feed["t_s"], feed["kw"], feed["mechanical_kw"], strict=True):
        it = 0.0 if down_from is not None and t >= down_from else \
            _cards_kw(case, t) + STATIC_KW
        assert kw == pytest.approx(it / ETA ** 4 + mech, rel=1e-9), t
        assert mech == pytest.approx(np.interp(t, fac["series"]["t_s"],
                                               fac["series"]["mechanical_kw"]))
    assert case.totals["peak_feed_kw"] == max(feed["kw"])
    assert feed["peak_at_s"] == feed["t_s"][int(np.argmax(feed["kw"]))]
    return feed


def test_a_feed_unit_lost_on_a_2n_feed_moves_its_load_to_the_other():
    """One unit of the 2N feed trips at 30 min for 30 min: the other unit carries the
    whole load (its rating, 1.35 × the racks' nameplate, is far above it), so no rack goes
    down, the feed's series is the baseline's point for point, and the instants of the
    trip and its end are in the series."""
    res = _run([{"at_s": 1800.0, "kind": "feed_trip", "target": "feed",
                 "duration_s": 1800.0}])
    base = _check_points(res, "baseline", res.baseline)
    pert = _check_points(res, "perturbed", res.perturbed)
    assert {1800.0, 3600.0} <= set(pert["t_s"])
    assert pert["racks_down"] == [] and base["racks_down"] == []
    at = {t: k for t, k in zip(base["t_s"], base["kw"], strict=True)}
    for t, k in zip(pert["t_s"], pert["kw"], strict=True):
        if t in at:
            assert k == pytest.approx(at[t], rel=1e-9)
    assert res.perturbed.totals["peak_feed_kw"] == pytest.approx(
        res.baseline.totals["peak_feed_kw"], rel=1e-9)


def test_a_feed_unit_the_survivor_cannot_carry_takes_its_racks_down():
    """The feed's units rated 40 kW each (80 kW for the two): the 44.8 kW of busy cards
    + 10 kW static, through four elements at η = 0.95 (≈ 67 kW) + the mechanical plant,
    is more than one unit carries. When one trips at 30 min (to the horizon) every rack
    under it goes down — reported with the instant — and from then the feed draws the
    mechanical plant only (the racks stay down while the unit is out, their jobs stopped:
    ``test_feed_outages.py``); before it, (cards + static) / η⁴ + mechanical as always."""
    res = _run([{"at_s": 1800.0, "kind": "feed_trip", "target": "feed"}], feed_unit_kw=40.0)
    pert = _check_points(res, "perturbed", res.perturbed, down_from=1800.0)
    assert pert["racks_down"] == [{"element": "feed", "from_s": 1800.0, "to_s": None,
                                   "racks": [0, 1, 2, 3]}]
    base = _check_points(res, "baseline", res.baseline)
    assert base["racks_down"] == []
    # the load the surviving unit was asked to carry: the racks' just before the trip
    assert (_cards_kw(res.perturbed, 1800.0 - 1e-6) + STATIC_KW) / ETA ** 4 > 40.0
    assert _cards_kw(res.perturbed, 1800.0) == 0.0   # down, they draw nothing


def test_racks_a_lost_feed_unit_took_down_come_back_with_it():
    """The same overload for 30 minutes only: the racks are down from 30 min to the
    unit's return at 60 min (``to_s``), then draw (cards + static) / η⁴ again."""
    res = _run([{"at_s": 1800.0, "kind": "feed_trip", "target": "feed",
                 "duration_s": 1800.0}], feed_unit_kw=40.0)
    feed = res.facility["perturbed"]["feed"]
    assert feed["racks_down"] == [{"element": "feed", "from_s": 1800.0, "to_s": 3600.0,
                                   "racks": [0, 1, 2, 3]}]
    for t, kw, mech in zip(feed["t_s"], feed["kw"], feed["mechanical_kw"], strict=True):
        it = 0.0 if 1800.0 <= t < 3600.0 else _cards_kw(res.perturbed, t) + STATIC_KW
        assert kw == pytest.approx(it / ETA ** 4 + mech, rel=1e-9), t
    assert 3600.0 in feed["t_s"]
