"""simulation.resilience: each formula against its closed form, each published figure within a
stated tolerance (sources in docs/simulation.md "Resilience"), bad input naming the field."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulation.resilience import (
    DGX_H100_TIERS,
    LLAMA3_TABLE5,
    ResilienceInputError,
    StorageTier,
    calibrate,
    checkpoint_size,
    checkpoint_times,
    claim_check,
    component_counts,
    daly_ettr,
    daly_interval_s,
    expected_interruptions,
    full_size_availability,
    interruption_rate_per_h,
    resilience_from_params,
    simulate_resilience,
    spares_for,
    young_interval_s,
)
from simulation.resilience.events import ClassPlan, JobPlan, draw_failures, run_job
from simulation.resilience.failures import FailureClass
from simulation.resilience.replays import REPLAYS, replay_params


# --- failures ---------------------------------------------------------------------------------
def test_table5_rows_sum_to_the_published_419():
    """Dubey et al. 2024, Table 5: 419 unexpected interruptions; HBM3 72 = 17.2 %,
    software bugs 54 = 12.9 %, network switch/cable 35 = 8.4 % of 419."""
    counts = {cause: n for cause, _, n in LLAMA3_TABLE5}
    assert sum(counts.values()) == 419
    for cause, share in (("GPU HBM3 Memory", 0.172), ("Software Bug", 0.129),
                         ("Network Switch/Cable", 0.084), ("Host Maintenance", 0.076),
                         ("GPU SRAM Memory", 0.045), ("GPU System Processor", 0.041),
                         ("NIC", 0.017)):
        assert counts[cause] / 419 == pytest.approx(share, abs=0.0006)


def test_calibration_reproduces_its_own_run_and_one_failure_every_three_hours():
    """By construction the calibration cluster expects 419 in 54 days (a check of the
    bookkeeping, not a validation); 54 × 24 / 419 = 3.09 h, "one every 3 hours"."""
    classes, counts = calibrate(), component_counts(16_384)
    assert sum(expected_interruptions(classes, counts, 54 * 24).values()) == pytest.approx(419)
    assert 1 / interruption_rate_per_h(classes, counts) == pytest.approx(3.093, abs=0.001)


def test_rates_scale_with_component_counts():
    """Λ = Σ λ_c n_c: twice the cards, twice the card/HBM/host/software failures."""
    classes = calibrate()
    small = expected_interruptions(classes, component_counts(8192), 100)
    big = expected_interruptions(classes, component_counts(16_384), 100)
    for name in ("card", "hbm", "host", "nic", "software", "other"):
        assert big[name] == pytest.approx(2 * small[name])
    assert big["switch"] >= 2 * small["switch"] * 0.99


@pytest.mark.parametrize("k,hosts,switches", [(4, 16, 20), (48, 27_648, 2880), (64, 65_536, 5120)])
def test_full_fat_tree_counts_match_al_fares(k, hosts, switches):
    """Al-Fares et al. 2008: a k-ary fat tree has k³/4 hosts, 5k²/4 switches, 3·k³/4 links."""
    c = component_counts(hosts, switch_radix=k)
    assert c["switches"] == switches
    assert c["links"] == 3 * hosts


# --- checkpoints ------------------------------------------------------------------------------
def test_checkpoint_size_is_14_bytes_per_parameter_and_shards():
    """ZeRO (SC'20): 2 (BF16 weights) + 12 (FP32 master, m, v) bytes per parameter saved."""
    s = checkpoint_size(1e9)
    assert s.total_bytes == 14e9 and s.state_bytes_per_rank == 14e9
    z1 = checkpoint_size(1e9, tp=2, pp=2, dp=4, zero=1)
    assert z1.state_bytes_per_rank == pytest.approx(2e9 / 4 + 12e9 / 16)
    assert z1.write_bytes_per_rank == pytest.approx(14e9 / 16)
    z3 = checkpoint_size(1e9, tp=2, pp=2, dp=4, zero=3)
    assert z3.state_bytes_per_rank == pytest.approx(14e9 / 16)
    z0 = checkpoint_size(1e9, tp=2, pp=2, dp=4, zero=0)
    assert z0.state_bytes_per_rank == pytest.approx(14e9 / 4)


def test_llama3_per_gpu_state_within_the_published_range():
    """Llama 3 §3.3.4: each GPU's checkpointed state "ranges from 1 MB to 4 GB"."""
    s = checkpoint_size(405e9, tp=8, pp=16, dp=128, zero=1)
    assert 1e6 <= s.write_bytes_per_rank <= 4e9


def test_tier_times_hand_worked():
    """100 servers × 10 GB on a 200 GB/s shared file system reached at 50 GB/s each:
    max(10/50, 1000/200) = 5 s; async stalls for the DRAM copy only, sync for the chain."""
    # 1 TB over 100 servers of 8 cards, fully sharded: 10 GB per server, written once
    size = checkpoint_size(1e12 / 14, tp=8, dp=100, zero=3)
    pfs = StorageTier("pfs", 50, 50, aggregate_gbps=200, survives_host_loss=True)
    dram = StorageTier("host_dram", 100, 100)
    a = checkpoint_times(size, cards=800, tiers=(dram, pfs), mode="async")
    assert a.save_s["pfs"] == pytest.approx(5.0)
    assert a.save_s["host_dram"] == pytest.approx(10e9 / 100e9)
    assert a.blocking_s == pytest.approx(0.1) and a.durable_s == pytest.approx(5.1)
    s = checkpoint_times(size, cards=800, tiers=(dram, pfs), mode="sync")
    assert s.blocking_s == pytest.approx(5.1)
    g = checkpoint_times(size, cards=800, tiers=(dram, pfs), replicas=3,
                         network_gbps_per_server=50)
    assert g.replication_s == pytest.approx(2 * 10e9 / 50e9)  # Gemini: (r−1)·b/bw
    assert g.peer_restore_s == pytest.approx(10e9 / 50e9)


def test_fifteen_second_claim_for_llama3_405b_on_16k_h100():
    """The articles' "checkpoint in ≤ 15 s": on DGX H100 tiers with a 200 GB/s PFS an
    async 405B checkpoint stalls well under 15 s but is durable only after
    5.67 TB / 200 GB/s ≈ 28 s — true for the stall, false for durability."""
    size = checkpoint_size(405e9, tp=8, pp=16, dp=128, zero=1)
    verdict = claim_check(checkpoint_times(size, cards=16_384, tiers=DGX_H100_TIERS))
    assert verdict["holds_for_blocking"] and not verdict["holds_for_durable"]
    assert verdict["durable_s"] == pytest.approx(5.67e12 / 200e9, rel=0.02)


# --- closed forms -----------------------------------------------------------------------------
def test_young_and_daly():
    """Young: √(2δM); Daly's correction is small when δ ≪ M and τ = M when δ ≥ 2M."""
    assert young_interval_s(50, 10_000) == pytest.approx(1000)
    assert daly_interval_s(50, 10_000) == pytest.approx(
        1000 * (1 + math.sqrt(0.0025) / 3 + 0.0025 / 9) - 50)
    assert daly_interval_s(30_000, 10_000) == 10_000


def test_daly_optimum_maximises_daly_ettr():
    delta, m, r = 120.0, 4 * 3600.0, 600.0
    tau = daly_interval_s(delta, m)
    grid = np.linspace(tau * 0.5, tau * 1.5, 201)
    best = grid[np.argmax([daly_ettr(t, delta, r, m) for t in grid])]
    assert best == pytest.approx(tau, rel=0.02)


def test_spares_are_the_poisson_quantile():
    """M/G/∞: servers in repair ~ Poisson(a); a = 2 → 99.9 % needs 8 spares (P(≤7)=0.9989)."""
    assert spares_for(0.999, 2.0) == 8
    assert full_size_availability(7, 2.0) == pytest.approx(0.99890, abs=1e-5)
    assert full_size_availability(0, 2.0) == pytest.approx(math.exp(-2))


# --- the event simulation against the closed forms ---------------------------------------------
def _single_class_plan(*, mtbi_s: float, detect_s: float, restart_s: float, restore_s: float,
                       block_s: float, wall_s: float, needs_spare: bool = False,
                       repair_s: float = 0.0, spares: int | None = None) -> JobPlan:
    fc = FailureClass("card", "card", "cards", 1.0, "xid", needs_spare, repair_s / 3600)
    cp = ClassPlan(fc, 1.0 / mtbi_s, detect_s, repair_s, restore_s, block_s)
    return JobPlan(wall_s, block_s, block_s, {"card": cp}, restart_s, 60.0, 60.0, 10.0,
                   False, False, spares, 0.01, 10)


def test_simulated_ettr_matches_daly_closed_form():
    """Daly (2006) eq. 20 assumes exactly this model (exponential failures that may strike
    during checkpoints and restarts); 30 histories of 200 MTBIs agree within 0.5 %."""
    m, delta, r = 3 * 3600.0, 60.0, 900.0
    plan = _single_class_plan(mtbi_s=m, detect_s=100, restart_s=700, restore_s=100,
                              block_s=delta, wall_s=200 * m)
    rng = np.random.default_rng(7)
    for tau in (600.0, 1800.0, 5400.0):
        ettr = np.mean([run_job(plan, tau, draw_failures(plan.classes, plan.wall_s, rng)).work_s
                        / plan.wall_s for _ in range(30)])
        assert ettr == pytest.approx(daly_ettr(tau, delta, r, m), rel=0.005)


def test_simulated_spare_shortage_matches_mg_infinity():
    """With s spares and repairs of r hours the job waits only when more than s servers are in
    repair: over 20,000 MTBIs the simulated full-size share is P(Poisson(Λr) ≤ s) within a
    point (the statistical error is ~0.5 point)."""
    m = 10 * 3600.0
    plan = _single_class_plan(mtbi_s=m, detect_s=10, restart_s=60, restore_s=10, block_s=1,
                              wall_s=20_000 * m, needs_spare=True, repair_s=30 * 3600.0, spares=4)
    stats = run_job(plan, 600.0, draw_failures(plan.classes, plan.wall_s,
                                               np.random.default_rng(3)))
    assert stats.full_size_s / plan.wall_s == pytest.approx(full_size_availability(4, 3.0),
                                                             abs=0.01)
    assert stats.by_action.get("wait_repair", 0) > 0


@settings(max_examples=15, deadline=None)
@given(st.floats(60, 7200), st.integers(0, 10_000))
def test_ettr_is_a_share_and_work_is_conserved(tau, seed):
    """0 ≤ ETTR ≤ 1 and wall = work + lost + stalls + downtime (each second is one of them)."""
    plan = _single_class_plan(mtbi_s=4 * 3600.0, detect_s=30, restart_s=300, restore_s=30,
                              block_s=20, wall_s=10 * 86400.0)
    s = run_job(plan, tau, draw_failures(plan.classes, plan.wall_s,
                                         np.random.default_rng(seed)), timeline=True)
    assert 0.0 <= s.work_s <= plan.wall_s
    assert s.work_s + s.lost_s + s.blocked_s + s.down_s == pytest.approx(plan.wall_s, rel=1e-6)
    assert all(row["recovery_s"] is not None and row["recovery_s"] >= 0 for row in s.timeline)


def test_elastic_shrink_beats_waiting_for_repair():
    """With no spare left, shrinking by a data-parallel replica keeps training (at 1 − 1/dp)
    where a rigid job waits days for the repair."""
    base = dict(cards=1024, days=30, params=70e9, tp=8, pp=1, spares=0, sweep_runs=1,
                sweep_points=3, checkpoint={"interval_min": 10})
    rigid = simulate_resilience(base).to_dict()
    elastic = simulate_resilience({**base, "recovery": {"elastic": True}}).to_dict()
    assert elastic["ettr"] > rigid["ettr"] + 0.05
    assert elastic["interruptions"]["by_action"].get("shrink", 0) > 0


# --- the study ---------------------------------------------------------------------------------
def test_study_output_contract():
    r = simulate_resilience({"cards": 2048, "days": 10, "sweep_runs": 1, "sweep_points": 5,
                             "checkpoint": {"interval_min": 30}}).to_dict()
    for key in ("interruptions", "ettr", "lost_hours", "mean_time_to_recover_s",
                "optimal_checkpoint_interval_min", "ettr_curve", "timeline", "availability"):
        assert key in r
    assert set(r["optimal_checkpoint_interval_min"]) >= {"young", "daly", "simulated"}
    assert r["interruptions"]["total"] == sum(r["interruptions"]["by_class"].values())
    assert r["interruptions"]["total"] == len(r["timeline"])
    assert any(abs(row["interval_min"] - 30) < 1e-9 for row in r["ettr_curve"])
    assert r["ettr"] == pytest.approx(r["ettr_daly"], abs=0.03)


@pytest.mark.parametrize("name", sorted(REPLAYS))
def test_replays_reproduce_the_published_ettr(name):
    """The fidelity table of docs/simulation.md: Llama 3's "> 90 %" (a lower bound: the model
    must land in [90 %, 95 %]) and ByteRobust's 97 % (± 2 points), three seeds each."""
    replay = REPLAYS[name]
    ettrs = [simulate_resilience(replay_params(name, seed=seed, sweep_runs=1)).to_dict()["ettr"]
             for seed in range(3)]
    ettr = float(np.mean(ettrs))
    published, tol = replay["published_ettr"], replay["tolerance"]
    if replay["published_is_lower_bound"]:
        assert published <= ettr <= published + tol
    else:
        assert ettr == pytest.approx(published, abs=tol)


# --- input errors ------------------------------------------------------------------------------
@pytest.mark.parametrize("params,field", [
    ({}, "cards"),
    ({"cards": 0}, "cards"),
    ({"cards": 8, "days": -1}, "days"),
    ({"cards": 8, "days": "x"}, "days"),
    ({"cards": 16, "tp": 8, "pp": 4}, "pp"),
    ({"cards": 8, "checkpoint": {"mode": "fast"}}, "checkpoint.mode"),
    ({"cards": 8, "checkpoint": {"interval_min": 0}}, "checkpoint.interval_min"),
    ({"cards": 8, "checkpoint": {"tiers": ["tape"]}}, "checkpoint.tiers[0]"),
    ({"cards": 8, "checkpoint": {"tiers": [{"name": "x", "write_gbps": -1}]}},
     "checkpoint.tiers[0].write_gbps"),
    ({"cards": 8, "checkpoint": {"tiers": ["host_dram"]}}, "checkpoint.tiers"),
    ({"cards": 8, "recovery": {"elastic": "yes"}}, "recovery.elastic"),
    ({"cards": 8, "failure_mix": {"gremlins": 2}}, "failure_mix.gremlins"),
    ({"cards": 8, "failure_mix": {"card": -2}}, "failure_mix.card"),
    ({"cards": 8, "spares": 1.5}, "spares"),
])
def test_bad_input_names_the_field(params, field):
    with pytest.raises(ResilienceInputError) as err:
        resilience_from_params(params)
    assert err.value.field == field and err.value.reason


def test_a_shared_tier_reads_at_its_own_aggregate():
    """A file system reads faster than it writes (two DDN AI400X2: 180 GB/s read, 130 GB/s
    write): 64 servers × 10 GB take 64·10/130 s to save and 64·10/180 s to read back."""
    from simulation.resilience import StorageTier, resilience_from_params, tier_time_s

    pfs = StorageTier("pfs", 50.0, 50.0, aggregate_gbps=130.0, survives_host_loss=True,
                      aggregate_read_gbps=180.0)
    assert tier_time_s(10e9, 64, pfs) == pytest.approx(64 * 10 / 130)
    assert tier_time_s(10e9, 64, pfs, read=True) == pytest.approx(64 * 10 / 180)
    # 0 reads at the write aggregate, as before the field existed
    same = StorageTier("pfs", 50.0, 50.0, aggregate_gbps=130.0, survives_host_loss=True)
    assert tier_time_s(10e9, 64, same, read=True) == pytest.approx(64 * 10 / 130)
    parsed = resilience_from_params({"cards": 512, "checkpoint": {"tiers": [
        {"name": "pfs", "aggregate_gbps": 130, "aggregate_read_gbps": 180}]}})
    assert parsed.checkpoint.tiers[0].aggregate_read_gbps == 180.0
    with pytest.raises(Exception, match=r"checkpoint\.tiers\[0\]\.aggregate_read_gbps"):
        resilience_from_params({"cards": 512, "checkpoint": {"tiers": [
            {"name": "pfs", "aggregate_read_gbps": -1}]}})


def test_the_ettr_curve_in_parts_equals_the_whole_study() -> None:
    """Each point of the curve redrawn in another process (same seed, same
    histories) equals the study's own; the study handed the curve equals it whole."""
    params = {"cards": 2048, "days": 10, "sweep_runs": 2, "sweep_points": 7, "seed": 11,
              "checkpoint": {"interval_min": 20}}
    from simulation.resilience.study import ettr_curve, sweep_intervals

    whole = simulate_resilience(params).to_dict()
    points = sweep_intervals(params)
    assert points == len(whole["ettr_curve"]) >= 7
    odd, even = list(range(1, points, 2)), list(range(0, points, 2))
    rows = dict(zip(odd, ettr_curve(params, odd), strict=True)) | dict(
        zip(even, ettr_curve(params, even), strict=True))
    curve = [rows[i] for i in range(points)]
    assert curve == whole["ettr_curve"]
    assert simulate_resilience(params, curve=curve).to_dict() == whole
    with pytest.raises(ValueError, match="points"):
        simulate_resilience(params, curve=curve[:-1])
