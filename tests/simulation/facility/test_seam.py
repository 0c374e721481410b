"""What the app's plants need from the engine: a liquid rack's air share goes to the CRAH
it names (``RackSet.air_parent``), and a water-cooled chiller hands its condenser heat
(heat + compressor work) to the tower it sits on."""
from __future__ import annotations

import numpy as np
import pytest

from simulation.facility.model import compile_model
from simulation.facility.plant import CoolingElement, Plant, PlantError, PowerElement, RackSet, Site
from simulation.facility.thermal import Conditions, settle


def _plant(air_parent: list[int] | None, chiller_on_tower: bool = False) -> Plant:
    cooling = (
        CoolingElement("ct", "cooling_tower", 2000.0, approach_c=4.0, fan_kw=20.0),
        CoolingElement("ch", "chiller", 500.0, parent="ct" if chiller_on_tower else None,
                       supply_setpoint_c=14.0),
        CoolingElement("fwl", "facility_loop", 1000.0, parent="ct", design_flow_kg_s=24.0),
        CoolingElement("cdu", "cdu", 400.0, parent="fwl", approach_c=3.0,
                       design_flow_kg_s=10.0, volume_l=200.0),
        CoolingElement("crah-a", "crah", 100.0, parent="ch", design_flow_kg_s=4.0, fan_kw=2.0),
        CoolingElement("crah-b", "crah", 100.0, parent="ch", design_flow_kg_s=4.0, fan_kw=2.0),
    )
    n = 2
    racks = RackSet(ids=np.arange(n), power_parent=np.zeros(n, dtype=np.int64),
                    cooling_parent=np.full(n, 3, dtype=np.int64), budget_w=np.full(n, 40e3),
                    liquid_fraction=np.full(n, 0.8),
                    air_parent=None if air_parent is None else np.array(air_parent))
    return Plant(Site(wet_bulb_c=20.0, dry_bulb_c=30.0),
                 (PowerElement("feed", "feed", 500.0),), cooling, racks)


def test_a_liquid_racks_air_share_goes_to_the_crah_it_names() -> None:
    load = np.full(2, 30e3)
    named = compile_model(_plant([5, 5]))
    s = settle(named.net, load, Conditions(20.0, 30.0))
    # both racks name crah-b (the second CRAH): it takes all the air, crah-a none
    assert s.crah_heat_w.tolist() == pytest.approx([0.0, 2 * 0.2 * 30e3])
    spread = compile_model(_plant(None))
    s = settle(spread.net, load, Conditions(20.0, 30.0))
    assert s.crah_heat_w.tolist() == pytest.approx([0.2 * 30e3, 0.2 * 30e3])  # by capacity


def test_an_air_parent_that_is_not_a_crah_is_refused() -> None:
    with pytest.raises(PlantError) as err:
        compile_model(_plant([3, 4]))
    assert err.value.field == "racks.air_parent[0]"


def test_a_water_cooled_chiller_hands_its_condenser_heat_to_its_tower() -> None:
    load = np.full(2, 30e3)
    air = compile_model(_plant([4, 5]))
    water = compile_model(_plant([4, 5], chiller_on_tower=True))
    a = settle(air.net, load, Conditions(20.0, 30.0))
    w = settle(water.net, load, Conditions(20.0, 30.0))
    ch = 1  # roots in element order: ct, ch
    q_chilled = float(w.root_heat_w[ch])
    assert q_chilled == pytest.approx(0.2 * 60e3, rel=1e-6)
    # the tower rejects the CDU's water heat and the chiller's Q + W (first law)
    assert w.root_heat_w[0] == pytest.approx(0.8 * 60e3 + q_chilled + w.chillers_w, rel=1e-6)
    assert w.rejected_w == pytest.approx(60e3 + w.chillers_w, rel=1e-6)
    # a condenser on tower water (wet bulb + approach) lifts less than one on dry air
    assert w.chillers_w < a.chillers_w
