"""The power chain: losses per stage from the curves, redundancy, headroom, lost feeds."""
from __future__ import annotations

import numpy as np
import pytest

from simulation.facility.plant import EfficiencyCurve, PowerElement
from simulation.facility.power_chain import compile_chain, power_flow
from simulation.facility.validate import usable_units


def chain3(**ups_kw):  # feed → UPS (N+1 of 3) → 2 PDUs, racks 0,1 on pdu-a, 2 on pdu-b
    elements = (
        PowerElement("feed", "feed", 2000.0, units=2, redundancy="2N"),
        PowerElement("ups", "ups", 500.0, parent="feed", units=3, redundancy="N+1",
                     efficiency=EfficiencyCurve((0.2, 1.0), (0.90, 0.96)), **ups_kw),
        PowerElement("pdu-a", "pdu", 400.0, parent="ups",
                     efficiency=EfficiencyCurve((1.0,), (0.98,))),
        PowerElement("pdu-b", "pdu", 400.0, parent="ups",
                     efficiency=EfficiencyCurve((1.0,), (0.98,))),
    )
    return compile_chain(elements, np.array([2, 2, 3]))


@pytest.mark.parametrize(("units", "redundancy", "usable"),
                         [(4, "N", 4), (4, "N+1", 3), (4, "2N", 2), (2, "2N", 1)])
def test_redundancy_rules(units: int, redundancy: str, usable: int) -> None:
    assert usable_units(units, redundancy) == usable


def test_losses_per_stage_follow_the_curves() -> None:
    chain = chain3()
    rack_w = np.array([100e3, 150e3, 200e3])
    flow = power_flow(chain, rack_w)
    pdu_in = np.array([250e3, 200e3]) / 0.98
    np.testing.assert_allclose(flow.input_w[2:], pdu_in)
    ups_out = pdu_in.sum()
    frac = ups_out / (3 * 500e3)          # installed: every running unit
    eta = np.interp(frac, [0.2, 1.0], [0.90, 0.96])
    assert flow.input_w[1] == pytest.approx(ups_out / eta)
    assert flow.facility_w == pytest.approx(ups_out / eta)
    assert flow.loss_w.sum() == pytest.approx(flow.facility_w - rack_w.sum())
    # planned rating by redundancy: UPS N+1 of 3 × 500 kW → 1 MW; feed 2N of 2 → 2 MW
    assert flow.planned_w[1] == pytest.approx(1000e3)
    assert flow.planned_w[0] == pytest.approx(2000e3)
    assert flow.headroom_w[1] == pytest.approx(1000e3 - flow.input_w[1])


def test_a_lost_feed_unit_is_carried_by_2n_and_a_lost_ups_cuts_its_racks() -> None:
    chain = chain3()
    rack_w = np.array([100e3, 150e3, 200e3])
    one_feed = power_flow(chain, rack_w, failed_units=np.array([1, 0, 0, 0]))
    assert one_feed.rack_powered.all()
    assert one_feed.available_w[0] == pytest.approx(2000e3)
    no_ups = power_flow(chain, rack_w, failed_units=np.array([0, 3, 0, 0]))
    assert not no_ups.rack_powered.any()
    assert no_ups.it_w == 0.0
    pdu_down = power_flow(chain, rack_w, failed_units=np.array([0, 0, 0, 1]))
    assert pdu_down.rack_powered.tolist() == [True, True, False]


def test_mechanical_load_lands_on_the_feeds() -> None:
    chain = chain3()
    rack_w = np.array([100e3, 150e3, 200e3])
    base = power_flow(chain, rack_w)
    mech = power_flow(chain, rack_w, mechanical_w=30e3)
    assert mech.facility_w == pytest.approx(base.facility_w + 30e3)
    assert mech.headroom_w[0] == pytest.approx(base.headroom_w[0] - 30e3)


def test_vectorised_flow_matches_a_walk_up_the_tree() -> None:
    rng = np.random.default_rng(3)
    elements = [PowerElement("feed", "feed", 1e5)]
    for k in range(10):
        elements.append(PowerElement(f"ups{k}", "ups", 1e4, parent="feed",
                                     efficiency=EfficiencyCurve((0.1, 1.0), (0.9, 0.97))))
    for k in range(50):
        elements.append(PowerElement(f"pdu{k}", "pdu", 2e3, parent=f"ups{k % 10}",
                                     efficiency=EfficiencyCurve((0.0, 1.0), (0.97, 0.99))))
    parent_of = rng.integers(11, 61, size=400)
    rack_w = rng.uniform(1e3, 5e3, size=400)
    flow = power_flow(compile_chain(elements, parent_of), rack_w)
    # reference: plain Python, element by element
    index = {e.key: i for i, e in enumerate(elements)}
    out = [0.0] * len(elements)
    for r, w in zip(parent_of, rack_w, strict=True):
        out[int(r)] += float(w)
    inp = [0.0] * len(elements)
    for i in range(len(elements) - 1, -1, -1):   # children come after parents here
        e = elements[i]
        frac = out[i] / (e.rating_kw * 1e3)
        inp[i] = out[i] / float(np.interp(frac, e.efficiency.load_fraction,
                                          e.efficiency.efficiency))
        if e.parent is not None:
            out[index[e.parent]] += inp[i]
    np.testing.assert_allclose(flow.input_w, inp, rtol=1e-12)
