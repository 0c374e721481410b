"""Bad plants are refused with the field that is wrong, never a crash in a step."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simulation.facility.model import compile_model
from simulation.facility.plant import (
    CoolingElement,
    EfficiencyCurve,
    PlantError,
    PowerElement,
)
from simulation.facility.validate import validate

from .conftest import one_cdu_plant


def refused(plant, field: str) -> PlantError:
    with pytest.raises(PlantError) as err:
        validate(plant)
    assert err.value.field == field, str(err.value)
    return err.value


def test_a_good_plant_passes(plant) -> None:
    validate(plant)
    compile_model(plant)


@pytest.mark.parametrize("value", [0.0, -5.0, float("nan"), float("inf")])
def test_non_positive_capacities_ratings_and_flows(plant, value: float) -> None:
    cdu = plant.cooling[1]
    refused(replace(plant, cooling=(plant.cooling[0], replace(cdu, capacity_kw=value))),
            "cooling[1].capacity_kw")
    refused(replace(plant, cooling=(plant.cooling[0], replace(cdu, design_flow_kg_s=value))),
            "cooling[1].design_flow_kg_s")
    refused(replace(plant, power=(replace(plant.power[0], rating_kw=value),)),
            "power[0].rating_kw")


def test_unknown_kinds_redundancy_and_parents(plant) -> None:
    cdu = plant.cooling[1]
    refused(replace(plant, cooling=(plant.cooling[0], replace(cdu, kind="fridge"))),
            "cooling[1].kind")
    refused(replace(plant, cooling=(plant.cooling[0], replace(cdu, redundancy="3N"))),
            "cooling[1].redundancy")
    refused(replace(plant, cooling=(plant.cooling[0], replace(cdu, parent="nowhere"))),
            "cooling[1].parent")
    refused(replace(plant, power=(replace(plant.power[0], units=1, redundancy="N+1"),)),
            "power[0].units")


def test_a_loop_that_feeds_itself(plant) -> None:
    loops = (CoolingElement("a", "facility_loop", 10.0, parent="b", design_flow_kg_s=1.0),
             CoolingElement("b", "facility_loop", 10.0, parent="a", design_flow_kg_s=1.0))
    err = refused(replace(plant, cooling=plant.cooling + loops), "cooling[2].parent")
    assert "feeds itself" in err.message
    power = (PowerElement("x", "ups", 10.0, parent="y"), PowerElement("y", "ups", 10.0,
                                                                       parent="x"))
    refused(replace(plant, power=plant.power + power), "power[1].parent")


def test_a_liquid_rack_without_a_cdu(plant) -> None:
    crah = CoolingElement("crah", "crah", 50.0, parent="tower", design_flow_kg_s=1.0)
    racks = replace(plant.racks, cooling_parent=np.array([1, 2, 1, 1]))
    err = refused(replace(plant, cooling=plant.cooling + (crah,), racks=racks),
                  "racks.cooling_parent[1]")
    assert "CDU" in err.message
    racks = replace(plant.racks, cooling_parent=np.array([1, 1, 1, 0]))
    refused(replace(plant, racks=racks), "racks.cooling_parent[3]")


def test_a_cdu_must_hand_its_heat_on(plant) -> None:
    orphan = replace(plant.cooling[1], parent=None)
    err = refused(replace(plant, cooling=(plant.cooling[0], orphan)), "cooling[1].parent")
    assert "must pass its heat" in err.message
    crah_on_cdu = CoolingElement("c", "crah", 5.0, parent="cdu", design_flow_kg_s=1.0)
    refused(replace(plant, cooling=plant.cooling + (crah_on_cdu,)), "cooling[2].parent")


@pytest.mark.parametrize("curve", [EfficiencyCurve((0.5,), (1.2,)),
                                   EfficiencyCurve((0.5,), (0.0,)),
                                   EfficiencyCurve((0.5, 0.2), (0.9, 0.9))])
def test_efficiency_curves_outside_zero_one(plant, curve: EfficiencyCurve) -> None:
    with pytest.raises(PlantError) as err:
        validate(replace(plant, power=(replace(plant.power[0], efficiency=curve),)))
    assert err.value.field.startswith("power[0].efficiency")


def test_rack_arrays(plant) -> None:
    refused(replace(plant, racks=replace(plant.racks, budget_w=np.array([1.0, 0.0, 1.0, 1.0]))),
            "racks.budget_w[1]")
    refused(replace(plant, racks=replace(plant.racks,
                                         liquid_fraction=np.array([1.0, 1.0, 1.5, 1.0]))),
            "racks.liquid_fraction[2]")
    refused(replace(plant, racks=replace(plant.racks, power_parent=np.array([0, 0, 0, 7]))),
            "racks.power_parent[3]")
    refused(replace(plant, racks=replace(plant.racks, budget_w=np.ones(3))), "racks.budget_w")


@pytest.mark.parametrize("bad", [np.nan, -1.0, np.inf])
def test_card_tdp_per_rack(plant, bad: float) -> None:
    """``RackSet.card_tdp_w`` (issue 24): one entry per rack, finite and ≥ 0 (0: no card)."""
    good = np.array([1200.0, 0.0, 700.0, 700.0])
    validate(replace(plant, racks=replace(plant.racks, card_tdp_w=good)))
    refused(replace(plant, racks=replace(plant.racks, card_tdp_w=np.array(
        [1200.0, 700.0, bad, 700.0]))), "racks.card_tdp_w[2]")
    refused(replace(plant, racks=replace(plant.racks, card_tdp_w=good[:3])), "racks.card_tdp_w")


def test_site_inputs() -> None:
    plant = one_cdu_plant()
    refused(replace(plant, site=replace(plant.site, contract_kw=0.0)), "site.contract_kw")
    refused(replace(plant, site=replace(plant.site, wet_bulb_c=50.0)), "site.wet_bulb_c")


def test_planning_over_ratings_names_every_element_over() -> None:
    from simulation.facility.presets import demo_plant
    from simulation.facility.ratings import over_ratings

    assert over_ratings(demo_plant(56)) == []
    # 28 racks × 40 kW × 0.9 liquid = 1,008 kW per CDU; 2 modules of 520 kW in N+1: 520
    small = demo_plant(56, cdu_kw=520.0)
    errs = over_ratings(small)
    assert [e.field for e in errs] == ["cooling[2].capacity_kw", "cooling[3].capacity_kw"]
    assert "N+1 of 2" in errs[0].message
    # the same CDUs with a third module (N+1 of 3: two usable) fit
    third = replace(small, cooling=tuple(replace(c, units=3) if c.kind == "cdu" else c
                                         for c in small.cooling))
    assert over_ratings(third) == []
    # a contract under the racks' nameplate draw
    tight = replace(small, site=replace(small.site, contract_kw=1000.0))
    assert "site.contract_kw" in [e.field for e in over_ratings(tight)]
    # a PDU of 8 racks × 40 kW planned at 300 kW: over, losses included
    pdus = replace(small, power=tuple(replace(p, rating_kw=300.0) if p.kind == "pdu" else p
                                      for p in small.power))
    fields = [e.field for e in over_ratings(pdus)]
    assert "power[3].rating_kw" in fields and len([f for f in fields if f.startswith("power")]) == 7
