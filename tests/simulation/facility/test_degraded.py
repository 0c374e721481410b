"""A degraded element (running below its rating) takes one unit out, and redundancy
decides what the rest carry (``simulation.facility.validate.units_out``)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simulation.facility.model import compile_model
from simulation.facility.plant import Plant
from simulation.facility.presets import demo_plant
from simulation.facility.thermal import Conditions
from simulation.facility.validate import units_out


def _cdus(plant: Plant, **changes: object) -> Plant:
    return replace(plant, cooling=tuple(replace(c, **changes) if c.kind == "cdu" else c
                                        for c in plant.cooling))


def _step(plant: Plant, degraded_cooling: set[str] = frozenset(),  # type: ignore[assignment]
          degraded_power: set[str] = frozenset()):  # type: ignore[assignment]
    model = compile_model(plant)
    cool = units_out([c.units for c in plant.cooling], [0] * len(plant.cooling),
                     [c.key in degraded_cooling for c in plant.cooling])
    power = units_out([p.units for p in plant.power], [0] * len(plant.power),
                      [p.key in degraded_power for p in plant.power])
    cond = replace(Conditions.of(plant), cooling_failed=tuple(int(v) for v in cool))
    w = plant.racks.budget_w * 0.8
    return model, model.settle(w, cond, power_failed=power)


def test_units_out_counts_one_unit_for_a_degraded_element_and_never_its_last() -> None:
    got = units_out([2, 2, 3, 1, 4, 2], [0, 1, 0, 0, 0, 2], [True, True, True, True, False, False])
    # degraded with none counted: one; counted failures win; a single unit keeps running
    assert got.tolist() == [1, 1, 1, 0, 0, 2]


def test_a_degraded_n_plus_1_cdu_keeps_its_flow_and_loses_its_spare() -> None:
    plant = demo_plant(56)  # CDUs: 2 units, N+1
    model, ok = _step(plant)
    _, deg = _step(plant, {"cdu-0"})
    k = list(model.net.cdu_elem).index(2)  # cdu-0 is cooling[2]
    assert deg.thermal.cdu_flow_kg_s[k] == pytest.approx(ok.thermal.cdu_flow_kg_s[k])
    before, after = ok.loads(model), deg.loads(model)
    cap = plant.cooling[2].capacity_kw * 1e3
    # planned one unit (N+1 of 2); running: 2 → 1: the spare is gone, the duty is not
    assert before.cooling_available_w[k] == pytest.approx(2 * cap)
    assert after.cooling_available_w[k] == pytest.approx(cap)
    assert after.cooling_planned_w[k] == pytest.approx(cap)
    assert after.cooling_headroom_w[k] == pytest.approx(before.cooling_headroom_w[k])
    # the other CDU is untouched
    assert deg.thermal.cdu_flow_kg_s[1 - k] == pytest.approx(ok.thermal.cdu_flow_kg_s[1 - k])


def test_a_degraded_n_cdu_loses_half_its_flow_and_capacity() -> None:
    """An N pair (both pumps needed): one out halves the flow (parallel identical pumps,
    the engine's hydraulics) and the capacity the running units give."""
    plant = _cdus(demo_plant(56), redundancy="N")
    model, ok = _step(plant)
    _, deg = _step(plant, {"cdu-0"})
    k = list(model.net.cdu_elem).index(2)
    assert deg.thermal.cdu_flow_kg_s[k] == pytest.approx(0.5 * ok.thermal.cdu_flow_kg_s[k])
    after = deg.loads(model)
    cap = plant.cooling[2].capacity_kw * 1e3
    assert after.cooling_planned_w[k] == pytest.approx(2 * cap)
    assert after.cooling_available_w[k] == pytest.approx(cap)
    assert after.cooling_load_fraction[k] == pytest.approx(after.cooling_heat_w[k] / cap)
    # less flow through the same heat: its racks' coolant rises more (Q = m c ΔT)
    racks = model.net.rack_cdu == k
    rise_ok = (ok.thermal.rack_ret_c - ok.thermal.rack_sup_c)[racks]
    rise_deg = (deg.thermal.rack_ret_c - deg.thermal.rack_sup_c)[racks]
    assert np.all(rise_deg > rise_ok * 1.5)


def test_a_degraded_ups_gives_less_but_n_plus_1_still_carries_the_plan() -> None:
    plant = demo_plant(56)  # UPS: 3 units, N+1 (power[2])
    model, ok = _step(plant)
    _, deg = _step(plant, degraded_power={"ups"})
    rating = plant.power[2].rating_kw * 1e3
    assert ok.power.available_w[2] == pytest.approx(3 * rating)
    assert deg.power.available_w[2] == pytest.approx(2 * rating)
    # N+1 planned two of three: the two left still give the plan (their input moves a
    # little: each unit runs at a higher load fraction, so at another efficiency)
    assert deg.power.planned_w[2] == pytest.approx(2 * rating)
    assert deg.power.headroom_w[2] == pytest.approx(2 * rating - deg.power.input_w[2])
    assert deg.power.input_w[2] == pytest.approx(ok.power.input_w[2], rel=0.03)
    # an N UPS of 3 that degrades: a third of its planned rating gone
    n_plant = replace(plant, power=tuple(replace(p, redundancy="N") if p.key == "ups" else p
                                         for p in plant.power))
    _, n_deg = _step(n_plant, degraded_power={"ups"})
    assert n_deg.power.planned_w[2] == pytest.approx(3 * rating)
    assert n_deg.power.headroom_w[2] == pytest.approx(2 * rating - n_deg.power.input_w[2])
