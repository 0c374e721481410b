"""Facility what-ifs: events change the plant, racks report their time to the limit,
capping holds the contract, quiescent stretches are skipped exactly, bad input is
refused with its field."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simulation.facility.plant import PlantError
from simulation.facility.presets import demo_plant
from simulation.facility.thermal import ThermalParams, compile_network
from simulation.facility.whatif import Event, WhatIfInput, run


@pytest.fixture(scope="module")
def plant():
    return demo_plant(24, racks_per_cdu=8, racks_per_pdu=4)


def test_skipping_quiescent_stretches_equals_stepping_every_second(plant) -> None:
    inp = WhatIfInput(horizon_s=2400.0, points=2400,
                      events=(Event(300.0, "pump_trip", "cdu-0"),
                              Event(900.0, "hot_day", value=4.0, duration_s=600.0),
                              Event(1500.0, "load_surge", value=1.1)), capping=True)
    fast = run(plant, inp)
    full = run(plant, inp, skip_quiescent=False)
    assert fast.steps_computed < full.steps_computed == 2400
    assert fast.relaxations_jumped >= 1 and full.relaxations_jumped == 0   # closed form used
    assert fast.t_s == full.t_s
    for key in ("max_card_c", "facility_w", "pue", "facility_supply_c"):
        np.testing.assert_allclose(fast.series[key], full.series[key], rtol=1e-6, atol=1e-6)
    for key in ("facility_kwh", "it_kwh", "it_lost_kwh"):
        assert fast.energy[key] == pytest.approx(full.energy[key], rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("quiescent_k", [1e-4, 1e-3, 1e-2])
def test_skipping_a_relaxing_plant_stays_within_the_stated_tolerance(plant,
                                                                     quiescent_k) -> None:
    """Capping on and holding the site contract, events: the skip taken while the
    plant still relaxes leaves the temperatures within ``quiescent_k`` of stepping
    every second, the energies within 1e-6 relative, the capped ticks the same, and
    computes fewer steps than the exact skip alone."""
    contracted = replace(plant, site=replace(plant.site, contract_kw=24 * 40 * 0.9 * 1.12))
    inp = WhatIfInput(horizon_s=7200.0, points=7200, capping=True,
                      events=(Event(300.0, "pump_trip", "cdu-0"),
                              Event(900.0, "hot_day", value=4.0, duration_s=1800.0),
                              Event(3000.0, "load_surge", value=1.15)))
    full = run(contracted, inp, skip_quiescent=False)
    exact = run(contracted, replace(inp, quiescent_k=0.0))
    fast = run(contracted, replace(inp, quiescent_k=quiescent_k))
    assert full.capping["ticks_capped"] > 0
    assert fast.steps_computed < exact.steps_computed < full.steps_computed
    assert fast.t_s == full.t_s
    for key in ("max_card_c", "mean_card_c", "max_rack_return_c", "max_cdu_supply_c",
                "facility_supply_c"):
        np.testing.assert_allclose(fast.series[key], full.series[key], rtol=0,
                                   atol=quiescent_k)
    for key in ("facility_kwh", "it_kwh", "it_lost_kwh"):
        assert fast.energy[key] == pytest.approx(full.energy[key], rel=1e-6)
    assert fast.capping["ticks_capped"] == full.capping["ticks_capped"]


def test_cdu_trip_gives_its_racks_a_time_to_the_limit(plant) -> None:
    res = run(plant, WhatIfInput(horizon_s=900.0, load_fraction=0.9,
                                 events=(Event(100.0, "cdu_trip", "cdu-1"),)))
    ttl = res.racks["time_to_limit_s"]
    on_cdu = list(range(8, 16))
    assert all(ttl[i] is not None for i in on_cdu)
    assert all(ttl[i] is None for i in range(24) if i not in on_cdu)
    # closed form: with no flow the rack coolant heats at Q/C and the card (mean of the
    # held supply and the rising return, + P R) at Q/(2C)
    params = ThermalParams()
    net = compile_network(plant, params)
    q = 36e3 * 0.9                      # the liquid share of a 36 kW rack
    before = run(plant, WhatIfInput(horizon_s=10.0))
    card0 = before.series["max_card_c"][0]
    expected = 100.0 + (params.card_limit_c - card0) * 2 * net.rack_cap_j_k[8] / q
    assert ttl[8] == pytest.approx(expected, abs=1.0)
    # then firmware throttles them: IT power drops
    assert min(res.series["it_w"]) < res.series["it_w"][0] * 0.9


def test_n_plus_one_pump_trip_changes_nothing_and_hot_day_warms(plant) -> None:
    base = run(plant, WhatIfInput(horizon_s=600.0))
    pump = run(plant, WhatIfInput(horizon_s=600.0, events=(Event(60.0, "pump_trip", "cdu-0"),)))
    np.testing.assert_allclose(pump.series["max_card_c"], base.series["max_card_c"])
    hot = run(plant, WhatIfInput(horizon_s=3600.0, events=(Event(60.0, "hot_day", value=8.0),)))
    assert hot.series["facility_supply_c"][-1] > base.series["facility_supply_c"][-1] + 2.0
    assert hot.series["max_card_c"][-1] > base.series["max_card_c"][-1]


def test_losing_one_feed_of_2n_is_carried_and_the_ups_is_not(plant) -> None:
    one = run(plant, WhatIfInput(horizon_s=120.0, events=(Event(10.0, "feed_loss", "feed"),)))
    assert one.series["it_w"][-1] == pytest.approx(one.series["it_w"][0])
    ups = run(plant, WhatIfInput(horizon_s=120.0,
                                 events=(Event(10.0, "feed_loss", "ups", value=3),)))
    assert ups.series["it_w"][-1] == 0.0
    assert ups.energy["it_lost_kwh"] > 0


def test_capping_holds_the_site_contract_on_a_surge(plant) -> None:
    it_kw = 24 * 40.0 * 0.9
    contracted = replace(plant, site=replace(plant.site, contract_kw=it_kw * 1.08))
    inp = WhatIfInput(horizon_s=600.0, events=(Event(60.0, "load_surge", value=1.1),),
                      capping=True, points=600)
    res = run(contracted, inp)
    fac = np.array(res.series["facility_w"])
    t = np.array(res.t_s)
    assert fac[t > 90].max() <= it_kw * 1.08e3 * 1.02
    assert res.capping["ticks_capped"] > 0
    assert any(x is not None for x in res.racks["time_to_cap_s"])
    assert res.energy["it_lost_kwh"] > 0 and res.energy["throughput_lost_fraction"] > 0
    free = run(contracted, replace(inp, capping=False))
    assert max(free.series["facility_w"]) > it_kw * 1.08e3 * 1.02
    # 0.9 × 1.1 of the budget: no rack passes its own budget without capping
    assert all(x is None for x in free.racks["time_to_cap_s"])
    over = run(plant, WhatIfInput(horizon_s=300.0,
                                  events=(Event(60.0, "load_surge", value=1.2),)))
    assert over.racks["time_to_cap_s"] == [60.0] * 24


def test_series_are_bounded_and_round_trip_as_json(plant) -> None:
    inp = WhatIfInput(horizon_s=5000.0, points=50,
                      events=(Event(10.0, "capping", value=1.0, duration_s=100.0),))
    res = run(plant, inp)
    assert len(res.t_s) <= 51
    assert WhatIfInput.from_dict(inp.to_dict()) == inp
    d = res.to_dict()
    assert set(d["series"]) >= {"max_card_c", "pue", "facility_w"}


@pytest.mark.parametrize(("data", "field"), [
    ({"horizon_s": -1.0}, "horizon_s"),
    ({"dt_s": 0.0}, "dt_s"),
    ({"events": [{"at_s": 1.0, "kind": "meteor"}]}, "events[0].kind"),
    ({"events": [{"at_s": 1.0, "kind": "cdu_trip", "target": "tower"}]}, "events[0].target"),
    ({"events": [{"at_s": 1.0, "kind": "feed_loss", "target": "nope"}]}, "events[0].target"),
    ({"events": [{"at_s": 1.0, "kind": "load_surge"}]}, "events[0].value"),
    ({"events": [{"at_s": 1.0, "kind": "hot_day", "colour": 1}]}, "events[0].colour"),
    ({"rack_w": [1.0, 2.0]}, "rack_w"),
    ({"policy": "random"}, "policy"),
    ({"quiescent_k": -1e-4}, "quiescent_k"),
    ({"quiescent_k": float("nan")}, "quiescent_k"),
    ({"bogus": 1}, "bogus"),
])
def test_bad_input_names_its_field(plant, data, field: str) -> None:
    with pytest.raises(PlantError) as err:
        run(plant, WhatIfInput.from_dict(data))
    assert err.value.field == field


def test_a_weather_series_drives_the_towers(plant) -> None:
    day = replace(plant, site=replace(plant.site, weather=((0.0, 30.0, 20.0),
                                                           (3600.0, 38.0, 30.0))))
    res = run(day, WhatIfInput(horizon_s=3600.0, points=60))
    sup = res.series["facility_supply_c"]
    # the setpoint (design wet bulb 24 + 4) holds while the wet bulb is low, then floats
    assert sup[0] == pytest.approx(28.0, abs=0.01)
    assert sup[-1] > 30.0
    assert all(b >= a - 1e-9 for a, b in zip(sup, sup[1:], strict=False))


def test_the_reading_per_element(plant) -> None:
    from simulation.facility.model import compile_model

    model = compile_model(plant)
    r = model.settle(np.full(24, 36e3))
    el = r.elements(model)
    assert [c["key"] for c in el["cdus"]] == ["cdu-0", "cdu-1", "cdu-2"]
    assert sum(c["heat_w"] for c in el["cdus"]) == pytest.approx(24 * 36e3 * 0.9, rel=1e-6)
    feed = el["power"][0]
    assert feed["key"] == "feed"
    assert feed["headroom_w"] == pytest.approx(feed["planned_w"] - feed["input_w"])


def test_a_relaxation_jumped_in_closed_form_follows_the_stepped_path(plant) -> None:
    """A hot day with no other event: the plant relaxes for an hour; the jump takes
    most of it in closed form (geometric path to the settled fixed point) and every
    temperature sample stays within 1e-4 K of stepping every second, the energies
    within 1e-9 relative, with far fewer steps computed than the skip of quiescent
    stretches alone (``quiescent_k=0`` turns both off but the exact skip)."""
    inp = WhatIfInput(horizon_s=4 * 3600.0, points=1441, capping=False,
                      events=(Event(600.0, "hot_day", value=4.0),))
    full = run(plant, inp, skip_quiescent=False)
    fast = run(plant, inp)
    exact = run(plant, replace(inp, quiescent_k=0.0))
    assert fast.relaxations_jumped >= 1 and exact.relaxations_jumped == 0
    assert fast.steps_computed < exact.steps_computed / 4
    for key in ("max_card_c", "mean_card_c", "max_rack_return_c", "max_cdu_supply_c",
                "facility_supply_c"):
        np.testing.assert_allclose(fast.series[key], full.series[key], rtol=0, atol=1e-4)
    np.testing.assert_allclose(fast.cdu_sup_c, full.cdu_sup_c, rtol=0, atol=1e-4)
    for key in ("facility_kwh", "it_kwh"):
        assert fast.energy[key] == pytest.approx(full.energy[key], rel=1e-9)


def test_a_surge_scales_the_racks_with_cards_and_a_rack_without_cards_is_never_capped(
        plant) -> None:
    """The first rack of each CDU has no cards (card TDP 0: a 10 kW network rack): a 2×
    surge doubles the racks with cards only (a surge is the cards' work; a switch's
    draw barely moves with traffic), and capping cuts the racks with cards to their
    budget but never the rack without cards (nothing to cap: its draw is a fixed load)."""
    n = len(plant.racks)
    no_cards = np.zeros(n, dtype=bool)
    no_cards[::8] = True
    racks = replace(plant.racks, card_tdp_w=np.where(no_cards, 0.0, 700.0),
                    nameplate_w=np.where(no_cards, 10e3, 38e3))
    world = replace(plant, racks=racks)
    rack_w = np.where(no_cards, 10e3, 25e3)
    base = float(rack_w.sum())
    surge = (Event(60.0, "load_surge", value=2.0),)
    for capping in (False, True):
        res = run(world, WhatIfInput(horizon_s=300.0, rack_w=tuple(rack_w), events=surge,
                                     capping=capping, cards_per_rack=40, card_tdp_w=700.0))
        assert min(res.series["demand_w"]) == pytest.approx(base, rel=1e-12)
        assert max(res.series["demand_w"]) == pytest.approx(
            base + float(rack_w[~no_cards].sum()), rel=1e-12)
        # 50 kW over a 40 kW budget from 60 s on: the racks with cards, only those
        cap_t = res.racks["time_to_cap_s"]
        assert [cap_t[i] for i in np.flatnonzero(no_cards)] == [None] * int(no_cards.sum())
        assert {cap_t[i] for i in np.flatnonzero(~no_cards)} == {60.0}
        assert not any(res.racks["tripped"])
    assert res.capping["max_racks_capped"] == int((~no_cards).sum())
    # capped to their budgets, the site's IT = the budgets of the racks with cards + the
    # racks without cards at their own draw
    assert res.series["it_w"][-1] == pytest.approx(
        float(plant.racks.budget_w[~no_cards].sum() + rack_w[no_cards].sum()), rel=1e-3)
