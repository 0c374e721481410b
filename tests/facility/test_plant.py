"""``plant_for_cluster``: the rows as the engine's ``Plant``, arrays pointing at the right
elements."""
from __future__ import annotations

import json
from typing import Any

import pytest

from simulation.facility.plant import PlantError
from twin.facility.plant import plant_for_cluster


def test_plant_of_the_hand_built_site(plant_world: dict[str, Any]) -> None:
    w = plant_world
    plant = plant_for_cluster(w["cluster"])
    assert plant.site.name == "tiny-site" and plant.site.contract_kw == 500.0
    power = {p.key: p for p in plant.power}
    assert power["pdu-r0"].parent == "ups-0" and power["feed-0"].parent is None
    assert power["ups-0"].redundancy == "2N" and power["ups-0"].units == 2
    assert power["ups-0"].efficiency.at(1.0) < 1.0
    cooling = {c.key: c for c in plant.cooling}
    assert cooling["tcs-0"].parent == "cdu-0" and cooling["cdu-0"].approach_c == 3.0
    racks = plant.racks
    assert len(racks) == 2
    by_name = {name: i for i, name in enumerate(racks.names)}
    r0, n0 = by_name["r0"], by_name["net0"]
    assert plant.power[racks.power_parent[r0]].key == "pdu-r0"
    assert plant.cooling[racks.cooling_parent[r0]].key == "tcs-0"
    assert racks.air_parent is not None
    assert plant.cooling[racks.air_parent[r0]].key == "crah-0"
    assert racks.air_parent[n0] == -1
    assert plant.cooling[racks.cooling_parent[n0]].key == "crah-0"
    assert racks.liquid_fraction[r0] == 0.8 and racks.liquid_fraction[n0] == 0.0
    assert racks.budget_w[r0] == w["rack"].power_budget_w
    json.dumps(plant.to_dict())  # plain JSON


def test_plant_of_a_built_cluster_covers_every_rack(db: Any) -> None:
    from twin.hardware.builder import build_cluster
    from twin.hardware.models import Rack

    r = build_cluster("seed-512", supernodes=2, name="plant-arrays")
    plant = plant_for_cluster(r["cluster_id"])
    assert len(plant.racks) == Rack.objects.filter(cluster_id=r["cluster_id"]).count()
    assert (plant.racks.power_parent >= 0).all() and (plant.racks.cooling_parent >= 0).all()
    kinds = {plant.power[i].kind for i in plant.racks.power_parent}
    assert kinds == {"busway"}   # the seed preset's efficient design: a busway pair per row
    liquid = plant.racks.liquid_fraction > 0
    assert {plant.cooling[i].kind for i in plant.racks.cooling_parent[liquid]} == {"tcs_loop"}
    keys = {p.key for p in plant.power}
    assert all(p.parent is None or p.parent in keys for p in plant.power)


def test_a_cluster_without_facility_names_the_site(tiny_cluster: dict[str, Any]) -> None:
    with pytest.raises(PlantError) as error:
        plant_for_cluster(tiny_cluster["cluster"])
    assert error.value.field == "site"
