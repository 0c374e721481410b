"""The efficient preset: the seeds' "PUE ≤ 1.05" computed from its parts, at design and
on a hot day; the demo preset's chain does not reach it (docs/facility.md)."""
from __future__ import annotations

import numpy as np
import pytest

from simulation.facility.model import compile_model
from simulation.facility.presets import demo_plant, efficient_plant
from simulation.facility.thermal import Conditions


def test_the_efficient_preset_computes_pue_at_most_1_05_at_design() -> None:
    plant = efficient_plant()
    reading = compile_model(plant).settle(plant.racks.budget_w.copy())
    s = reading.summary()
    assert reading.pue <= 1.05
    # computed, not stored: the closed form (IT + losses + pumps + fans + chillers) / IT
    assert s["chillers_w"] == 0.0
    assert reading.pue == pytest.approx(
        (s["it_w"] + s["losses_w"] + s["pumps_w"] + s["fans_w"]) / s["it_w"], rel=1e-12)
    assert s["max_card_c"] < 85.0


def test_the_efficient_preset_stays_near_1_05_on_a_hot_day() -> None:
    plant = efficient_plant()
    model = compile_model(plant)
    design = model.settle(plant.racks.budget_w.copy()).pue
    hot = model.settle(plant.racks.budget_w.copy(), Conditions(24.0, 35.0))
    assert design < hot.pue <= 1.05          # dry-cooler fans at full speed, no chiller
    assert hot.summary()["max_card_c"] < 85.0  # the supply floats to W40, cards hold


def test_the_demo_preset_does_not_reach_1_05_and_its_power_chain_is_why() -> None:
    plant = demo_plant()
    reading = compile_model(plant).settle(plant.racks.budget_w.copy())
    s = reading.summary()
    assert reading.pue > 1.05
    mech = s["pumps_w"] + s["fans_w"] + s["chillers_w"]
    assert s["losses_w"] > 2 * mech            # UPS double conversion and PDUs dominate
    eff = efficient_plant()
    e = compile_model(eff).settle(eff.racks.budget_w.copy()).summary()
    assert e["losses_w"] < 0.5 * s["losses_w"]
    assert np.isclose(e["it_w"], s["it_w"])
