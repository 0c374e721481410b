"""The thermal-hydraulic network against its closed forms and a published design point."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from simulation.facility.fluids import PG25, WATER, rise_c
from simulation.facility.model import compile_model
from simulation.facility.presets import demo_plant
from simulation.facility.thermal import (
    Conditions,
    compile_network,
    effectiveness_counterflow,
    settle,
    step,
)

from .conftest import one_cdu_plant


def test_energy_conservation_at_steady_state_within_0_1_percent() -> None:
    plant = demo_plant(60, liquid_fraction=0.85)
    model = compile_model(plant)
    rack_w = np.linspace(20e3, 39e3, 60)
    r = model.settle(rack_w)
    heat_in = r.thermal.liquid_in_w + r.thermal.air_in_w
    assert heat_in == pytest.approx(rack_w.sum(), rel=1e-12)
    # every watt of IT heat leaves through the heat rejection plant
    assert r.thermal.rejected_w == pytest.approx(heat_in, rel=1e-3)
    # and the CDUs carry exactly the liquid share
    assert r.thermal.cdu_heat_w.sum() == pytest.approx(r.thermal.liquid_in_w, rel=1e-3)
    # the site's power balance: facility = IT + chain losses + mechanical
    balance = r.power.it_w + r.power.loss_w.sum() + r.thermal.mechanical_w
    assert r.power.facility_w == pytest.approx(balance, rel=1e-9)
    assert r.pue == pytest.approx(r.power.facility_w / r.power.it_w)
    assert 1.0 < r.pue < 1.2


def test_coolant_rise_is_p_over_mdot_cp() -> None:
    plant = one_cdu_plant(racks=4, flow=4.0)
    net = compile_network(plant)
    rack_w = np.array([10e3, 20e3, 30e3, 40e3])
    s = settle(net, rack_w, Conditions.of(plant))
    per_rack_flow = 4.0 / 4
    expected = rack_w / (per_rack_flow * PG25.cp_j_kg_k)
    np.testing.assert_allclose(s.rack_ret_c - s.rack_sup_c, expected, rtol=1e-6)
    np.testing.assert_allclose(s.rack_flow_kg_s, per_rack_flow)


@pytest.mark.parametrize(("nameplate_kw", "liquid"), [
    ((30.0, 10.0), (1.0, 1.0)),
    ((30.0, 20.0), (0.8, 0.6)),
])
def test_a_cdu_splits_its_flow_by_design_heat_so_every_rack_rises_the_same(
        nameplate_kw: tuple[float, float], liquid: tuple[float, float]) -> None:
    """Two racks of different design loads, the same budget, on one CDU: the loop is
    balanced for one design ΔT, ṁ_i = ṁ_CDU · Q_i / ΣQ with Q_i = nameplate_i × liquid
    share_i (``design_flow_split``: flow ∝ design heat at a design ΔT, the rule behind
    OCP's L/min per kW), so at design load both rise by ΣQ / (ṁ_CDU c_p). Split by
    budget (equal here) they rose by Q_i / (ṁ_CDU/2 · c_p): 3× and 2× apart."""
    base = one_cdu_plant(racks=2, flow=2.0, cdu_kw=200.0)
    plate = np.array(nameplate_kw) * 1e3
    fraction = np.array(liquid)
    plant = replace(base, racks=replace(base.racks, nameplate_w=plate,
                                        liquid_fraction=fraction))
    assert np.all(plant.racks.budget_w == 40e3)
    net = compile_network(plant)
    q = plate * fraction
    np.testing.assert_allclose(net.rack_flow_d, 2.0 * q / q.sum(), rtol=1e-12)
    s = settle(net, plate, Conditions.of(plant))
    rise = q.sum() / (2.0 * PG25.cp_j_kg_k)
    np.testing.assert_allclose(s.rack_ret_c - s.rack_sup_c, [rise, rise], rtol=1e-9)
    # the flows still add up to the CDU's
    assert s.rack_flow_kg_s.sum() == pytest.approx(2.0, rel=1e-12)


def test_without_a_nameplate_a_rack_takes_its_budget_as_its_design_load() -> None:
    """A plant without nameplates (built by hand) splits by budget × liquid share; a rack
    with no hardware (nameplate 0) counts its budget: it keeps a flow, it is not dry."""
    base = one_cdu_plant(racks=3, flow=3.0)
    budget = np.array([40e3, 20e3, 60e3])
    plain = replace(base, racks=replace(base.racks, budget_w=budget))
    np.testing.assert_allclose(compile_network(plain).rack_flow_d, 3.0 * budget / 120e3,
                               rtol=1e-12)
    empty = replace(plain, racks=replace(plain.racks, nameplate_w=np.array([30e3, 0.0, 30e3])))
    design = np.array([30e3, 20e3, 30e3])
    np.testing.assert_allclose(compile_network(empty).rack_flow_d, 3.0 * design / 80e3,
                               rtol=1e-12)


def test_published_flow_per_kw_gives_ten_kelvin() -> None:
    # OCP / vendor guidance: 1.5 L/min per kW of PG25 for a 10 °C rise
    flow = PG25.kg_s_from_l_min(1.5)
    assert rise_c(1000.0, flow, PG25.cp_j_kg_k) == pytest.approx(10.0, rel=0.01)
    # the same flow of water rises less (its c_p is higher)
    assert rise_c(1000.0, WATER.kg_s_from_l_min(1.5), WATER.cp_j_kg_k) < 9.7


def test_first_order_step_response_and_time_constant() -> None:
    plant = one_cdu_plant(racks=1, flow=1.0, cdu_kw=60.0)
    net = compile_network(plant)
    cond = Conditions.of(plant)
    s0 = settle(net, np.array([10e3]), cond)
    tau = net.rack_cap_j_k[0] / (net.rack_flow_d[0] * PG25.cp_j_kg_k)
    final_rise = 30e3 / (1.0 * PG25.cp_j_kg_k)
    start = float(s0.rack_ret_c[0] - s0.rack_sup_c[0])
    s, dt = s0, 0.05
    ts, ys = [], []
    for k in range(int(5 * tau / dt)):
        s = step(net, s, np.array([30e3]), dt, cond)
        ts.append((k + 1) * dt)
        ys.append(float(s.rack_ret_c[0] - s.rack_sup_c[0]))
    ts_a, ys_a = np.array(ts), np.array(ys)
    expected = final_rise + (start - final_rise) * np.exp(-ts_a / tau)
    # the CDU holds its supply at setpoint, so the rack sees a pure first-order lag
    np.testing.assert_allclose(ys_a, expected, atol=1e-6)
    # 63.2 % of the step at t = τ
    at_tau = np.interp(tau, ts_a, ys_a)
    assert (at_tau - start) / (final_rise - start) == pytest.approx(1 - math.exp(-1), abs=1e-3)


def test_exponential_integrator_is_stable_for_long_steps() -> None:
    plant = demo_plant(30)
    net = compile_network(plant)
    cond = Conditions.of(plant)
    ref = settle(net, np.full(30, 35e3), cond)
    s = settle(net, np.full(30, 20e3), cond)
    for _ in range(400):
        s = step(net, s, np.full(30, 35e3), 5.0, cond)
    np.testing.assert_allclose(s.rack_ret_c, ref.rack_ret_c, atol=1e-6)
    assert np.all(np.isfinite(s.card_c))


def test_affinity_law_cube_on_a_lost_pump() -> None:
    # a CDU of two pumps in N (no spare): losing one halves the flow, pump power / 8
    plant = one_cdu_plant(units=2)
    plant = replace(plant, cooling=(plant.cooling[0],
                                    replace(plant.cooling[1], redundancy="N")))
    net = compile_network(plant)
    rack_w = np.full(4, 20e3)
    full = step(net, settle(net, rack_w, Conditions.of(plant)), rack_w, 1.0,
                Conditions.of(plant))
    half = step(net, full, rack_w, 1.0, Conditions(20.0, 30.0, cooling_failed=(0, 1)))
    assert half.cdu_flow_kg_s[0] == pytest.approx(full.cdu_flow_kg_s[0] / 2)
    cdu_pump_full = 2000.0
    assert full.pumps_w == pytest.approx(cdu_pump_full)
    assert half.pumps_w == pytest.approx(cdu_pump_full / 8)


def test_n_plus_one_pumps_keep_the_flow_after_one_trip(plant) -> None:
    net = compile_network(plant)
    rack_w = np.full(4, 30e3)
    s = settle(net, rack_w, Conditions.of(plant))
    one = step(net, s, rack_w, 1.0, Conditions(20.0, 30.0, cooling_failed=(0, 1)))
    both = step(net, s, rack_w, 1.0, Conditions(20.0, 30.0, cooling_failed=(0, 2)))
    assert one.cdu_flow_kg_s[0] == pytest.approx(s.cdu_flow_kg_s[0])
    assert both.cdu_flow_kg_s[0] == 0.0
    # with no flow the racks heat at Q / C
    after = step(net, both, rack_w, 10.0, Conditions(20.0, 30.0, cooling_failed=(0, 2)))
    np.testing.assert_allclose(after.rack_ret_c - both.rack_ret_c,
                               30e3 * 10.0 / net.rack_cap_j_k, rtol=1e-9)


def test_counterflow_effectiveness_closed_forms() -> None:
    ntu = np.array([0.0, 0.5, 2.0, 10.0])
    np.testing.assert_allclose(effectiveness_counterflow(ntu, np.ones(4)), ntu / (1 + ntu))
    np.testing.assert_allclose(effectiveness_counterflow(ntu, np.zeros(4)), 1 - np.exp(-ntu))


def test_vendor_cdu_rated_point_reproduced() -> None:
    """A CDU rated Q at its flow and approach (CoolIT quotes a 5 °C approach
    temperature difference; flow sized at 1.5 L/min per kW): driven at its rated load
    with the valve open, the network's TCS supply sits the rated approach above the
    facility supply, and the rise is the rated ΔT."""
    rated_kw, atd = 750.0, 5.0
    flow = PG25.kg_s_from_l_min(1.5 * rated_kw)
    plant = one_cdu_plant(racks=25, cdu_kw=rated_kw, flow=flow, approach=atd,
                          cdu_setpoint=5.0, tower_kw=5000.0)
    net = compile_network(plant)
    s = settle(net, np.full(25, rated_kw * 1e3 / 25), Conditions.of(plant))
    assert s.cdu_heat_w[0] == pytest.approx(rated_kw * 1e3, rel=1e-3)
    assert s.cdu_sup_c[0] - s.root_sup_c[0] == pytest.approx(atd, abs=0.01)
    assert s.cdu_ret_c[0] - s.cdu_sup_c[0] == pytest.approx(
        rated_kw * 1e3 / (flow * PG25.cp_j_kg_k), rel=1e-3)
    # at half load the same exchanger closes to half the approach (UA fixed)
    half = settle(net, np.full(25, rated_kw * 1e3 / 50), Conditions.of(plant))
    assert half.cdu_sup_c[0] - half.root_sup_c[0] == pytest.approx(atd / 2, abs=0.01)


def test_hot_day_raises_the_tower_supply_and_card_temperatures() -> None:
    plant = demo_plant(30)
    net = compile_network(plant)
    rack_w = np.full(30, 38e3)
    design = settle(net, rack_w, Conditions(24.0, 35.0))
    hot = settle(net, rack_w, Conditions(30.0, 40.0))
    # the design day holds the setpoint (WB + 4 K); 6 K more wet bulb cannot be held
    assert design.root_sup_c[0] == pytest.approx(28.0)
    assert hot.root_sup_c[0] > 30.0 + 1.0
    # a CDU with spare exchanger still holds its setpoint; the loaded ones cannot
    assert np.all(hot.card_c >= design.card_c - 1e-9)
    assert hot.card_c.max() > design.card_c.max() + 2.0


def test_a_lost_tower_cell_is_held_by_n_plus_one_but_not_two() -> None:
    plant = demo_plant(30, towers=3)
    net = compile_network(plant)
    rack_w = np.full(30, 38e3)
    ok = settle(net, rack_w, Conditions(24.0, 35.0))
    one = settle(net, rack_w, Conditions(24.0, 35.0, cooling_failed=(1,)))
    two = settle(net, rack_w, Conditions(24.0, 35.0, cooling_failed=(2,)))
    assert one.root_sup_c[0] == pytest.approx(ok.root_sup_c[0], abs=0.05)
    assert two.root_sup_c[0] > ok.root_sup_c[0] + 1.0


def test_chiller_draws_heat_over_cop() -> None:
    from simulation.facility.plant import CoolingElement

    base = one_cdu_plant()
    chiller = CoolingElement("tower", "chiller", 1000.0, supply_setpoint_c=18.0)
    plant = replace(base, cooling=(chiller, base.cooling[1]))
    net = compile_network(plant)
    s = settle(net, np.full(4, 30e3), Conditions(20.0, 35.0))
    t_evap = 18.0 + 273.15
    cop = 0.40 * t_evap / (35.0 + 10.0 - 18.0)
    assert s.chillers_w == pytest.approx(s.rejected_w / cop, rel=1e-6)


def mixed_plant():
    from simulation.facility.plant import CoolingElement, Plant, PowerElement, RackSet, Site

    cooling = (
        CoolingElement("chiller", "chiller", 300.0, units=2, redundancy="N+1",
                       supply_setpoint_c=18.0),
        CoolingElement("dry", "dry_cooler", 800.0, approach_c=6.0, fan_kw=8.0),
        CoolingElement("fws-a", "facility_loop", 300.0, parent="chiller",
                       design_flow_kg_s=10.0, pump_kw=3.0, volume_l=2000.0),
        CoolingElement("cdu-a", "cdu", 200.0, parent="dry", approach_c=4.0,
                       design_flow_kg_s=5.0, pump_kw=2.0, volume_l=300.0),
        CoolingElement("tcs-a", "tcs_loop", 200.0, parent="cdu-a", volume_l=100.0),
        CoolingElement("crah", "crah", 150.0, parent="fws-a", design_flow_kg_s=6.0,
                       fan_kw=6.0, units=2, redundancy="N+1"),
    )
    racks = RackSet(ids=np.arange(6, dtype=np.int64), power_parent=np.zeros(6, dtype=np.int64),
                    cooling_parent=np.array([4, 4, 3, 5, 5, 5]),
                    budget_w=np.array([40e3, 40e3, 40e3, 20e3, 20e3, 20e3]),
                    liquid_fraction=np.array([0.9, 0.9, 0.8, 0.0, 0.0, 0.0]))
    return Plant(Site(dry_bulb_c=30.0, wet_bulb_c=22.0),
                 (PowerElement("feed", "feed", 500.0),), cooling, racks)


def test_every_kind_in_one_plant_balances() -> None:
    plant = mixed_plant()
    model = compile_model(plant)
    rack_w = np.array([35e3, 30e3, 38e3, 15e3, 18e3, 12e3])
    r = model.settle(rack_w)
    t = r.thermal
    assert np.all(np.isfinite(t.card_c))
    assert t.rejected_w == pytest.approx(rack_w.sum(), rel=1e-3)
    assert t.chillers_w > 0 and t.fans_w > 0 and t.pumps_w == pytest.approx(5000.0)
    # the technology loop's racks are the CDU's; the air racks sit on the CRAH's 25 °C
    assert t.cdu_heat_w[0] == pytest.approx(0.9 * 65e3 + 0.8 * 38e3, rel=1e-3)
    # an air rack's cards: the CRAH's supply air + half the rack's own rise
    # P / (m c_p), its fans sized for its 20 kW budget at the 12 K design rise
    rise = 15e3 / (20e3 / (1007.0 * 12.0) * 1007.0)
    assert rise == pytest.approx(9.0)
    assert t.rack_air_c[3] == pytest.approx(25.0 + 0.5 * rise)
    assert t.card_c[3] == pytest.approx(25.0 + 0.5 * rise + 15e3 / 40 * 0.065)
    assert np.isnan(t.rack_air_c[:3]).all()  # liquid racks: no air figure
    # lose a CRAH unit of two in N+1: nothing changes; both: the air racks' inlet rises
    one = model.settle(rack_w, Conditions(22.0, 30.0, cooling_failed=(0,) * 5 + (1,)))
    both = model.settle(rack_w, Conditions(22.0, 30.0, cooling_failed=(0,) * 5 + (2,)))
    assert one.thermal.card_c[3] == pytest.approx(t.card_c[3])
    assert both.thermal.card_c[3] > t.card_c[3] + 5.0
    assert both.thermal.unremoved_air_w > 0


def test_an_air_only_plant_runs() -> None:
    from simulation.facility.plant import CoolingElement, Plant, PowerElement, RackSet, Site

    plant = Plant(Site(), (PowerElement("feed", "feed", 100.0),),
                  (CoolingElement("ch", "chiller", 100.0),
                   CoolingElement("crah", "crah", 60.0, parent="ch", design_flow_kg_s=3.0,
                                  fan_kw=2.0)),
                  RackSet(ids=np.arange(2), power_parent=np.zeros(2, dtype=np.int64),
                          cooling_parent=np.ones(2, dtype=np.int64), budget_w=np.full(2, 15e3),
                          liquid_fraction=np.zeros(2)))
    r = compile_model(plant).settle(np.full(2, 12e3))
    assert r.thermal.rejected_w == pytest.approx(24e3, rel=1e-3)
    assert r.thermal.cdu_heat_w.size == 0
    assert r.pue > 1.0


def test_a_card_of_given_tdp_draws_its_share_and_rises_28_k_at_tdp() -> None:
    """Issue 24: racks that give their card's TDP. R = min(0.04, 28 K / TDP) (the
    cold plate's junction rise at TDP, ``ThermalParams.card_rise_at_tdp_c``), an
    unmeasured card draws TDP × min(1, P_rack / P_nameplate), a rack without cards has
    its card at its mean coolant; without the TDP the old rule, P_rack / cards_per_rack."""
    base = one_cdu_plant(racks=4, cdu_kw=600.0, flow=12.0, tower_kw=3000.0)
    tdp = np.array([1200.0, 700.0, 400.0, 0.0])
    plate = np.array([120e3, 40e3, 20e3, 15e3])
    plant = replace(base, racks=replace(base.racks, budget_w=np.full(4, 132e3),
                                        card_tdp_w=tdp, nameplate_w=plate))
    net = compile_network(plant)
    np.testing.assert_allclose(net.r_liquid_k_w, [28.0 / 1200, 0.04, 0.04, 0.04])
    rack_w = np.array([60e3, 40e3, 30e3, 15e3])   # half, full, 1.5× and full nameplate
    card = np.array([600.0, 700.0, 400.0, 0.0])   # TDP × min(1, load), capped at TDP
    np.testing.assert_allclose(net.card_w(rack_w), card)
    s = settle(net, rack_w, Conditions.of(plant))
    mean = 0.5 * (s.rack_sup_c + s.rack_ret_c)
    np.testing.assert_allclose(s.card_c, mean + card * net.r_liquid_k_w, rtol=1e-12)
    assert s.card_c[0] == pytest.approx(mean[0] + 14.0)       # half of 28 K at half load
    assert s.card_c[3] == pytest.approx(mean[3])               # no card: its coolant
    # no TDP given: a card is the rack's draw over cards_per_rack (40), R = 0.04
    old = compile_network(base)
    assert old.rack_card_tdp_w is None
    np.testing.assert_allclose(old.card_w(rack_w), rack_w / 40)
    np.testing.assert_allclose(old.r_liquid_k_w, 0.04)
