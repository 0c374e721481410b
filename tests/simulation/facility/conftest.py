"""Small plants for the facility engine tests."""
from __future__ import annotations

import numpy as np
import pytest

from simulation.facility.plant import CoolingElement, Plant, PowerElement, RackSet, Site


def one_cdu_plant(racks: int = 4, *, cdu_kw: float = 200.0, flow: float = 4.0,
                  approach: float = 4.0, volume_l: float = 200.0, pump_kw: float = 2.0,
                  cdu_setpoint: float | None = None, units: int = 2,
                  tower_kw: float = 1000.0, tower_approach: float = 4.0,
                  liquid_fraction: float = 1.0, wet_bulb: float = 20.0) -> Plant:
    """``racks`` liquid racks on one CDU (N+1 pumps) on one tower; one feed."""
    rs = RackSet(ids=np.arange(racks, dtype=np.int64),
                 power_parent=np.zeros(racks, dtype=np.int64),
                 cooling_parent=np.ones(racks, dtype=np.int64),
                 budget_w=np.full(racks, 40e3), liquid_fraction=np.full(racks, liquid_fraction))
    cooling = (
        CoolingElement("tower", "cooling_tower", tower_kw, approach_c=tower_approach,
                       fan_kw=10.0, volume_l=500.0),
        CoolingElement("cdu", "cdu", cdu_kw, parent="tower", approach_c=approach,
                       design_flow_kg_s=flow, volume_l=volume_l, pump_kw=pump_kw,
                       units=units, redundancy="N+1" if units > 1 else "N",
                       supply_setpoint_c=cdu_setpoint),
    )
    return Plant(Site(wet_bulb_c=wet_bulb, dry_bulb_c=wet_bulb + 10),
                 (PowerElement("feed", "feed", 1000.0),), cooling, rs)


@pytest.fixture
def plant() -> Plant:
    return one_cdu_plant()
