"""The air path of an air-cooled rack (``simulation.facility.air``): the energy balance
ΔT = P / (ṁ c_p), the design airflow, the air at the cards and the thermal ceiling,
against hand-worked numbers and the data-centre airflow rule of thumb; and the capping
controller holding that ceiling on an air rack's cards."""
from __future__ import annotations

import numpy as np
import pytest

from simulation.facility import air
from simulation.facility.capping import CapLimits, allocate

CFM_M3_S = 0.3048 ** 3 / 60.0  # one cubic foot per minute


def test_the_rise_is_power_over_mass_flow_times_cp() -> None:
    # 10 kW into 0.8 kg/s of air: 10,000 / (0.8 × 1,007) = 12.413 K
    assert float(air.air_rise_c(10e3, 0.8)) == pytest.approx(12.4131, abs=1e-4)
    np.testing.assert_allclose(air.air_rise_c(np.array([0.0, 5e3, 10e3]), 0.8),
                               [0.0, 6.2066, 12.4131], atol=1e-4)
    # no airflow: an infinite rise with heat, none without
    assert air.air_rise_c(np.array([1e3, 0.0]), 0.0).tolist() == [np.inf, 0.0]


def test_the_design_airflow_carries_the_design_power_at_the_design_rise() -> None:
    for design_w, rise in ((40e3, 12.0), (15e3, 10.0), (130e3, 17.0)):
        m = air.design_airflow_kg_s(design_w, rise)
        assert float(m) == pytest.approx(design_w / (1007.0 * rise))
        assert float(air.air_rise_c(design_w, m)) == pytest.approx(rise)
        assert float(air.air_rise_c(design_w / 2, m)) == pytest.approx(rise / 2)
    with pytest.raises(ValueError, match="design_rise_c"):
        air.design_airflow_kg_s(40e3, 0.0)


def test_158_cfm_per_kw_at_a_20_f_rise() -> None:
    """The rule of thumb BTU/h = 1.08 × CFM × ΔT(°F), "158 CFM at a ΔT of 20 °F to
    transfer one kilowatt" (Data Center Frontier, 2022), is the same energy balance
    with standard air: 0.075 lb/ft³ (1.2014 kg/m³), 0.24 Btu/(lb·°F) (1,004.8 J/(kg·K)).
    With Incropera's air at 300 K (1.1614 kg/m³, 1,007 J/(kg·K)) it is 163 CFM."""
    rise_k = 20.0 * 5.0 / 9.0
    m = air.design_airflow_kg_s(1e3, rise_k, cp=1004.8)
    cfm = float(air.volumetric_flow_m3_s(m, density=1.2014)) / CFM_M3_S
    assert cfm == pytest.approx(158.0, rel=0.005)
    ours = float(air.volumetric_flow_m3_s(air.design_airflow_kg_s(1e3, rise_k))) / CFM_M3_S
    assert ours == pytest.approx(163.0, rel=0.005)


def test_the_air_at_the_cards_and_the_ceiling() -> None:
    m = air.design_airflow_kg_s(40e3)  # a 40 kW rack's fans, 12 K at its budget
    # at its budget: 25 + 0.5 × 12 = 31 °C at the cards; (85 − 31) / 0.065 = 830.8 W
    assert float(air.card_air_c(25.0, 40e3, m)) == pytest.approx(31.0)
    ceiling = float(air.air_ceiling_w(85.0, 25.0, 40e3, m, 0.065))
    assert ceiling == pytest.approx(54.0 / 0.065)
    # at the ceiling the card sits exactly at its limit
    assert float(air.card_air_c(25.0, 40e3, m)) + ceiling * 0.065 == pytest.approx(85.0)
    # a card at the exhaust side (f = 1) sees the whole rise
    assert float(air.card_air_c(25.0, 40e3, m, position=1.0)) == pytest.approx(37.0)
    # half the load, half the rise: a higher ceiling; hotter supply air, a lower one
    racks = np.array([20e3, 40e3, 40e3])
    got = air.air_ceiling_w(85.0, np.array([25.0, 25.0, 35.0]), racks, m, 0.065)
    np.testing.assert_allclose(got, [(85 - 28) / 0.065, (85 - 31) / 0.065,
                                     (85 - 41) / 0.065])
    with pytest.raises(ValueError, match="r_k_w"):
        air.air_ceiling_w(85.0, 25.0, 40e3, m, 0.0)


def test_capping_holds_the_air_ceiling_on_air_cards_only() -> None:
    """Two racks of two cards: rack 0 liquid (coolant 30 °C, R 0.04 K/W: ceiling
    1,375 W), rack 1 air (the air at its cards 41 °C, R 0.065: 676.9 W). Each card
    wants 1,000 W of 1,200: the air cards are held at their ceiling, bound by it."""
    coolant = np.array([30.0, 30.0, 41.0, 41.0])
    r = np.array([0.04, 0.04, 0.065, 0.065])
    limits = CapLimits(card_rack=np.array([0, 0, 1, 1]), rack_limit_w=np.full(2, 1e5),
                       coolant_c=coolant, r_k_w=r)
    d = allocate(np.full(4, 1000.0), np.full(4, 100.0), np.full(4, 1200.0), limits)
    np.testing.assert_allclose(d.caps_w, [1000.0, 1000.0, 44.0 / 0.065, 44.0 / 0.065])
    assert d.binding.tolist() == [0, 0, 1, 1]  # 1: thermal
