"""The rating rule's arithmetic (``twin.facility.capacity``) against hand-worked sums."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from simulation.facility.plant import EfficiencyCurve
from twin.facility.capacity import positions, site_loads
from twin.facility.models.chain import usable_units
from twin.facility.sizing import curve


def efficiency_at(kind: str, fraction: float) -> float:
    """The stored curve, read as the plant reads it (linear between points, clamped)."""
    points = curve(kind)
    return float(EfficiencyCurve(tuple(p[0] for p in points),
                                 tuple(p[1] for p in points)).at(fraction))


def _draw_kw(rack: Any) -> float:
    from twin.hardware.models import Rack

    return Rack.objects.filter(pk=rack.pk).draw_by_rack().watts().get(rack.pk, 0) / 1000.0


@pytest.mark.parametrize(("units", "redundancy", "usable"),
                         [(4, "N", 4), (4, "N+1", 3), (2, "2N", 1), (6, "2N", 3)])
def test_usable_units(units: int, redundancy: str, usable: int) -> None:
    assert usable_units(units, redundancy) == usable


def test_positions_maps_ids_and_marks_missing() -> None:
    ids = np.array([30, 10, 20], dtype=np.int64)
    got = positions(ids, np.array([10, 20, 30, 99, -1], dtype=np.int64))
    assert got.tolist() == [1, 2, 0, -1, -1]


def test_power_chain_carries_draw_and_losses_upstream(plant_world: dict[str, Any]) -> None:
    """PDU delivers both racks' nameplate draw; each element draws load / η(load/usable)."""
    w = plant_world
    it = _draw_kw(w["rack"]) + _draw_kw(w["net_rack"])
    loads = site_loads(w["site"].pk)
    power = {key: i for i, key in enumerate(loads.power.keys)}
    assert loads.it_kw == pytest.approx(it)
    pdu_in = it / efficiency_at("pdu", it / 100.0)
    ups_in = pdu_in / efficiency_at("ups", pdu_in / 200.0)
    assert loads.power.load_kw[power["pdu-r0"]] == pytest.approx(it)
    assert loads.power.input_kw[power["pdu-r0"]] == pytest.approx(pdu_in, rel=1e-4)
    assert loads.power.load_kw[power["ups-0"]] == pytest.approx(pdu_in, rel=1e-4)
    assert loads.power.load_kw[power["feed-0"]] == pytest.approx(ups_in, rel=1e-4)
    assert loads.power.usable_kw[power["pdu-r0"]] == 100.0  # 2 × 100 kW, 2N: one side
    assert loads.power.input_kw[power["feed-0"]] > it  # losses are carried, not dropped


def test_cooling_chain_conserves_heat(plant_world: dict[str, Any]) -> None:
    """Heat reaching the tower = IT heat + the pumps and fans below it (steady state)."""
    w = plant_world
    r0, net = _draw_kw(w["rack"]), _draw_kw(w["net_rack"])
    loads = site_loads(w["site"].pk)
    cooling = {key: i for i, key in enumerate(loads.cooling.keys)}
    assert loads.cooling.load_kw[cooling["tcs-0"]] == pytest.approx(0.8 * r0)
    assert loads.cooling.load_kw[cooling["crah-0"]] == pytest.approx(0.2 * r0 + net)
    assert loads.cooling.load_kw[cooling["cdu-0"]] == pytest.approx(0.8 * r0)
    pumps_and_fans = 1.0 + 0.5 + 2.0  # CDU pump, CRAH fan, facility-loop pump
    assert loads.cooling.load_kw[cooling["ct-0"]] == pytest.approx(r0 + net + pumps_and_fans,
                                                                   rel=1e-9)
    assert loads.cooling.usable_kw[cooling["cdu-0"]] == 100.0  # 2 × 100 kW, N+1
