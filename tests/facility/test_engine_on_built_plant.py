"""The seam between the two halves of the physical twin: a plant the builder made from a
preset's rows is a plant the engine accepts and runs, and its figures are physical."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from simulation.facility.model import compile_model
from simulation.facility.ratings import over_ratings
from twin.facility.plant import plant_for_cluster


@pytest.mark.parametrize("preset", ["seed-512", "gb200-nvl72"])
def test_a_built_plant_validates_settles_and_conserves_heat(db: Any, preset: str) -> None:
    from twin.hardware.builder import build_cluster
    from twin.hardware.models import Cluster

    built = build_cluster(preset, supernodes=2, name=f"engine-{preset}")
    plant = plant_for_cluster(Cluster.objects.get(pk=built["cluster_id"]))
    model = compile_model(plant)  # validate() raises PlantError on anything malformed
    # The builder sizes every element for its racks' nameplate draw: nothing planned over.
    assert over_ratings(plant) == []
    rack_w = 0.8 * plant.racks.budget_w
    reading = model.settle(rack_w)
    it_w = float(rack_w.sum())
    # PUE is computed from losses, pumps and fans: above 1, and near the seeds' 1.05.
    assert 1.0 < reading.pue < 1.2
    assert reading.power.it_w == pytest.approx(it_w, rel=1e-9)
    # One step from the settled state under the same load leaves it where it was.
    again = model.step(reading.thermal, rack_w, 1.0)
    assert again.pue == pytest.approx(reading.pue, rel=1e-6)
    assert np.all(np.isfinite(again.thermal.rack_sup_c))
    assert np.all(again.thermal.rack_sup_c < again.thermal.rack_ret_c)  # heat flows to the coolant
    # Heat into the coolant and the room air is the racks' IT heat (energy conserved).
    assert again.thermal.liquid_in_w + again.thermal.air_in_w == pytest.approx(it_w, rel=1e-3)
