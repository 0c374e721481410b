"""Energy by op mix and DVFS (:mod:`simulation.training.energy`): closed forms."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from simulation.training import (
    MODELS,
    Execution,
    SystemSpec,
    TrainingInputError,
    evaluate,
    system_for_accelerator,
)
from simulation.training.energy import (
    HBM_PJ_PER_BIT,
    card_power,
    dynamic_fraction,
    hbm_power_w,
    op_mix_power,
)
from simulation.training.fidelity import ACCELERATORS

H100 = ACCELERATORS["h100-sxm5-80gb"]
CURVE = ((0.5, 0.32), (0.75, 0.6), (1.0, 1.0))


def test_all_gemm_step_gives_the_old_formula() -> None:
    """No memory-bound or communication time: P = idle + (tdp − idle)·u·g(f), u = t_c/T."""
    clock = np.array([0.5, 0.6, 0.8, 1.0])
    t_c = np.array([0.3, 0.9, 1.7, 2.0])
    step = np.array([1.0, 1.0, 2.0, 2.0])
    zero = np.zeros(4)
    got = op_mix_power(t_c, zero, zero, step, clock, 700.0, 70.0, CURVE, 120.0, 0.25, 0.2)
    old = card_power(t_c / step, clock, 700.0, 70.0, CURVE)
    assert got == pytest.approx(old, rel=1e-12)


def test_all_memory_bound_step_draws_hbm_plus_its_sm_share() -> None:
    """P = idle + P_hbm + (tdp − idle)·s_m·g(f): only the SM share follows the clock."""
    clock = np.array([0.5, 0.75, 1.0])
    one, zero = np.ones(3), np.zeros(3)
    got = op_mix_power(zero, one, zero, one, clock, 700.0, 70.0, CURVE, 94.0, 0.25, 0.2)
    assert got == pytest.approx(70.0 + 94.0 + 630.0 * 0.25 * np.array([0.32, 0.6, 1.0]))
    # well under a GEMM's draw at the same clock
    gemm = op_mix_power(one, zero, zero, one, clock, 700.0, 70.0, CURVE, 94.0, 0.25, 0.2)
    assert np.all(got < gemm)


def test_hbm_power_is_bits_times_energy_per_bit() -> None:
    """e_bit · 8 · B/s (O'Connor et al. 2017: 3.9 pJ/bit), capped at the dynamic range."""
    assert hbm_power_w(1e12, 700.0, 70.0) == pytest.approx(HBM_PJ_PER_BIT * 8.0)
    assert hbm_power_w(1e20, 700.0, 70.0) == 630.0


def test_step_power_is_the_op_mix_closed_form() -> None:
    """The card power evaluate reports rebuilt from its seconds by class, at two clocks."""
    system = system_for_accelerator(H100, 8)
    m = MODELS["llama3-8b"]
    rng = system.tdp_w - system.idle_w
    hbm = hbm_power_w(system.hbm_tbps * 1e12 * system.memory_efficiency, system.tdp_w,
                      system.idle_w)
    for clock in (1.0, 0.7):
        r = evaluate(m, system, Execution(tp=8, global_batch=8, clock=clock)).to_dict()
        c = r["power"]["by_class_s"]
        g = float(dynamic_fraction(np.array([clock]), system.clock_power)[0])
        want = system.idle_w + (rng * g * c["compute"]
                                + (hbm + rng * system.memory_sm_activity * g) * c["memory_bound"]
                                + rng * system.comm_activity * c["comm"]) / r["step_time_s"]
        assert r["power"]["card_w"] == pytest.approx(want, rel=1e-9)
        assert sum(c.values()) == pytest.approx(r["step_time_s"], rel=1e-9)


def test_clock_stretches_gemms_not_memory_bound_ops() -> None:
    """DVFS: compute-bound time × 1/f; memory-bound time (HBM clock unchanged) the same."""
    system = system_for_accelerator(H100, 8)
    m = MODELS["llama3-8b"]
    ex = Execution(tp=8, global_batch=8, micro_batch=1)
    full = evaluate(m, system, ex).to_dict()
    slow = evaluate(m, system, dataclasses.replace(ex, clock=0.6)).to_dict()
    assert slow["ops"]["memory_bound"] == pytest.approx(full["ops"]["memory_bound"], rel=1e-12)
    assert slow["ops"]["optimizer"] == pytest.approx(full["ops"]["optimizer"], rel=1e-12)
    assert slow["ops"]["attention"] == pytest.approx(full["ops"]["attention"] / 0.6, rel=1e-9)
    # the large GEMMs are compute-bound: within the few HBM-bound ones of 1/f
    ratio = slow["ops"]["gemm"] / full["ops"]["gemm"]
    assert 1 / 0.6 * 0.95 < ratio <= 1 / 0.6 + 1e-9
    # energy: the memory-bound seconds keep their HBM watts; the GEMM seconds save power
    assert slow["power"]["card_w"] < full["power"]["card_w"]


def test_memory_heavy_step_draws_less_than_old_busy_formula() -> None:
    """A step with memory-bound time draws less than if all its busy time were GEMM."""
    system = system_for_accelerator(H100, 8)
    r = evaluate(MODELS["llama3-8b"], system, Execution(tp=8, global_batch=8)).to_dict()
    p = r["power"]
    old = float(card_power(np.array([p["utilisation"]]), np.array([1.0]), system.tdp_w,
                           system.idle_w, system.clock_power)[0])
    assert r["power"]["by_class_s"]["memory_bound"] > 0
    assert p["card_w"] < old


def test_activity_shares_are_validated() -> None:
    base = system_for_accelerator(H100, 8).to_dict()
    for key in ("memory_sm_activity", "comm_activity"):
        with pytest.raises(TrainingInputError) as err:
            SystemSpec.from_dict({**base, key: 1.5})
        assert err.value.field == f"system.{key}"
    spec = SystemSpec.from_dict({**base, "memory_sm_activity": 0.0, "comm_activity": 0.0})
    assert spec.memory_sm_activity == 0.0


def test_under_a_cap_time_and_energy_follow_the_op_mix() -> None:
    """A cap lowers the clock to g(f) = (C − idle)/(tdp − idle): the compute seconds grow
    as 1/f, the memory-bound and communication seconds stay, the card stays under C."""
    system = system_for_accelerator(H100, 8)
    m = MODELS["llama3-8b"]
    ex = Execution(tp=8, global_batch=8)
    free = evaluate(m, system, ex).to_dict()
    capped = evaluate(m, system, dataclasses.replace(ex, power_cap_w=450.0)).to_dict()
    f = capped["power"]["clock"]
    g = float(dynamic_fraction(np.array([f]), system.clock_power)[0])
    assert g == pytest.approx((450.0 - system.idle_w) / (system.tdp_w - system.idle_w), rel=1e-9)
    a, b = free["power"]["by_class_s"], capped["power"]["by_class_s"]
    assert b["memory_bound"] == pytest.approx(a["memory_bound"], rel=1e-12)
    assert b["comm"] == pytest.approx(a["comm"], rel=1e-12)
    assert capped["ops"]["attention"] == pytest.approx(free["ops"]["attention"] / f, rel=1e-9)
    assert capped["step_time_s"] > free["step_time_s"]
    assert capped["power"]["card_w"] < 450.0
