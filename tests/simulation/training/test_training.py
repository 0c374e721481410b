"""simulation.training: formulas against closed forms, published figures, search paths."""

from __future__ import annotations

import dataclasses
import statistics

import numpy as np
import pytest

from simulation.training import (
    MODELS,
    Execution,
    SystemSpec,
    TrainingInputError,
    evaluate,
    execution_from_params,
    model_from_params,
    search,
    system_for_accelerator,
)
from simulation.training.fidelity import ACCELERATORS, PUBLISHED_RUNS, fidelity_table
from simulation.training.flops import step_flops
from simulation.training.memory import layer_activation_bytes, saved_activation_bytes, state_bytes
from simulation.training.pipeline import articles_utilisation, bubble_fraction, utilisation
from simulation.training.search import enumerate_configs, execution_at

A100 = ACCELERATORS["a100-sxm-80gb"]
BOUND_MAE = 0.048
"""Mean absolute error over the fidelity table really reached (docs/simulation.md)."""
H100 = ACCELERATORS["h100-sxm5-80gb"]


def test_narayanan_flops_formula_for_every_gpt_shape() -> None:
    """Narayanan et al. 2021 eq. (3): 96·B·s·l·h²(1 + s/6h + V/16lh) with full recompute,
    72·… without (model FLOPs)."""
    for name in ("megatron-1.7b", "gpt3-175b", "megatron-530b", "megatron-1t"):
        m = MODELS[name]
        B, s, n, h, V = 512, m.seq_len, m.layers, m.hidden, m.vocab
        model, hw = step_flops(m, B, "full")
        assert hw == pytest.approx(96 * B * s * n * h**2 * (1 + s / (6 * h) + V / (16 * n * h)))
        assert model == pytest.approx(72 * B * s * n * h**2 * (1 + s / (6 * h) + V / (12 * n * h)))


def test_published_parameter_counts() -> None:
    """Narayanan Table 1 (529.6B, 1008.0B); Llama 3 (8.03B, 70.6B, 405B); Mixtral 46.7B/12.9B."""
    assert MODELS["megatron-530b"].params / 1e9 == pytest.approx(529.6, abs=0.1)
    assert MODELS["megatron-1t"].params / 1e9 == pytest.approx(1008.0, abs=0.1)
    assert MODELS["llama3-8b"].params / 1e9 == pytest.approx(8.03, abs=0.01)
    assert MODELS["llama3-70b"].params / 1e9 == pytest.approx(70.6, abs=0.1)
    assert MODELS["llama3-405b"].params / 1e9 == pytest.approx(405.9, abs=0.5)
    mix = MODELS["mixtral-8x7b"]
    assert mix.params / 1e9 == pytest.approx(46.7, abs=0.1)
    assert mix.active_params / 1e9 == pytest.approx(12.9, abs=0.1)


def test_korthikanti_activation_memory_closed_forms() -> None:
    """Korthikanti et al. 2022 eqs. 1–5: sbh(34 + 5as/h), TP, TP+SP, selective, full."""
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    sbh = s * b * h
    assert layer_activation_bytes(s, b, h, a, tp=1, sp=False) == pytest.approx(
        sbh * (34 + 5 * a * s / h))
    assert layer_activation_bytes(s, b, h, a, tp=t, sp=False) == pytest.approx(
        sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    assert layer_activation_bytes(s, b, h, a, tp=t, sp=True) == pytest.approx(
        sbh * (34 / t + 5 * a * s / (h * t)))
    assert layer_activation_bytes(s, b, h, a, tp=t, sp=True, recompute="selective") == (
        pytest.approx(sbh * 34 / t))
    assert layer_activation_bytes(s, b, h, a, tp=t, sp=True, recompute="full") == (
        pytest.approx(2 * sbh / t))


def test_zero_memory_matches_rajbhandari() -> None:
    """ZeRO (Rajbhandari et al. 2020) §5: Ψ = 7.5B, Nd = 64: 120 GB, 31.4, 16.6, 1.9 GB."""
    psi = 7.5e9
    got = [state_bytes(psi, 64, "bf16", zero=z) / 1e9 for z in range(4)]
    assert got == pytest.approx([120, 31.4, 16.6, 1.875], abs=0.06)


def test_pipeline_bubble_and_the_seeds_504_percent() -> None:
    """(p−1)/m and (p−1)/(v·m) (Narayanan 2021 §2.2); the seed's formula gives 503.75 %."""
    assert articles_utilisation(8, 4) == pytest.approx(5.0375)
    assert utilisation(8.0, 4.0) == pytest.approx(4 / 11)
    assert bubble_fraction(8.0, 4.0, 2) == pytest.approx(7 / 8)


def test_evaluate_breakdown_sums_to_step_time_and_bubble_is_reported() -> None:
    system = system_for_accelerator(A100, 64)
    ex = execution_from_params({"tp": 8, "pp": 8, "global_batch": 64, "recompute": "selective",
                                "sequence_parallel": True}, 64, MODELS["gpt3-175b"])
    r = evaluate(MODELS["gpt3-175b"], system, ex).to_dict()
    assert sum(r["breakdown"].values()) == pytest.approx(r["step_time_s"], rel=1e-9)
    assert r["bubble"]["fraction"] == pytest.approx(7 / 64)
    assert r["memory"]["total"] == pytest.approx(
        sum(r["memory"][k] for k in ("weights", "gradients", "optimizer", "activations",
                                     "reserve")))
    assert r["tokens_per_s"] == pytest.approx(64 * 2048 / r["step_time_s"])
    assert r["energy_j_per_token"] == pytest.approx(r["energy_j_per_step"] / (64 * 2048))


def test_power_cap_slows_compute_and_lowers_card_power() -> None:
    system = system_for_accelerator(H100, 8)
    m = MODELS["llama3-8b"]
    free = evaluate(m, system, Execution(tp=8, global_batch=8)).to_dict()
    capped = evaluate(m, system, Execution(tp=8, global_batch=8, power_cap_w=400)).to_dict()
    assert capped["step_time_s"] > free["step_time_s"]
    assert capped["power"]["card_w"] < free["power"]["card_w"]
    assert capped["power"]["clock"] < 1.0


def test_stage_clock_planning_saves_energy_without_slowdown() -> None:
    """Perseus-style: stages lighter than the critical one slow down for free."""
    system = system_for_accelerator(A100, 64)
    r = evaluate(MODELS["gpt3-175b"], system,
                 Execution(tp=8, pp=8, dp=1, global_batch=64)).to_dict()
    plan = r["dvfs"]
    assert plan["no_slowdown"]["slowdown"] == pytest.approx(0.0, abs=1e-9)
    assert plan["no_slowdown"]["card_energy_saved_fraction"] > 0
    assert (plan["one_percent"]["card_energy_saved_fraction"]
            > plan["no_slowdown"]["card_energy_saved_fraction"])


def test_compression_cuts_dp_traffic() -> None:
    system = system_for_accelerator(A100, 512)
    m = MODELS["megatron-7.5b"]
    base = dict(tp=1, pp=1, dp=512, global_batch=512, overlap_dp=False)
    plain = evaluate(m, system, Execution(**base)).to_dict()["breakdown"]
    four = evaluate(m, system, Execution(**base, compression=4.0)).to_dict()["breakdown"]
    assert four["dp_exposed"] < plain["dp_exposed"] / 3
    assert four["compression"] > 0


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"tp": 3, "global_batch": 8}, "tp"),
        ({"tp": 2, "pp": 1, "global_batch": 7}, "global_batch"),
        ({"precision": "int4", "global_batch": 8}, "precision"),
        ({"recompute": "some", "global_batch": 8}, "recompute"),
        ({"global_batch": 8, "bogus": 1}, "bogus"),
    ],
)
def test_bad_execution_names_the_field(params: dict[str, object], field: str) -> None:
    with pytest.raises(TrainingInputError) as err:
        execution_from_params(params, 8)
    assert err.value.field == field


def test_tp_not_dividing_heads_is_refused() -> None:
    m = model_from_params({"layers": 4, "hidden": 96, "heads": 12, "seq_len": 64, "vocab": 100})
    with pytest.raises(TrainingInputError, match="does not divide the 12 heads") as err:
        execution_from_params({"tp": 8, "global_batch": 8}, 8, m)
    assert err.value.field == "tp"
    with pytest.raises(TrainingInputError) as err2:
        model_from_params({"layers": 4, "hidden": 100, "heads": 12, "seq_len": 64, "vocab": 9})
    assert err2.value.field == "model.heads"


def test_system_round_trips_through_json() -> None:
    s = system_for_accelerator(H100, 1024, scale_up_domain=512, scale_up_topology="torus",
                               scale_up_dims=[8, 8, 8])
    assert SystemSpec.from_dict(s.to_dict()) == s
    with pytest.raises(TrainingInputError) as err:
        SystemSpec.from_dict({**s.to_dict(), "hbm_gib": -1})
    assert err.value.field == "system.hbm_gib"


def test_vectorised_search_agrees_with_per_configuration_loop() -> None:
    """The batched arrays (enumeration, gather, chunking) give what evaluate() gives."""
    m, system = MODELS["gpt3-175b"], system_for_accelerator(A100, 256)
    from simulation.training.comm import CommModel
    from simulation.training.core import step_arrays
    from simulation.training.step import MEMORY_RESERVE_GIB

    batch, _, _ = enumerate_configs(m, system, 256, 256, {})
    comm = CommModel(system)
    out = step_arrays(m, system, batch, comm, MEMORY_RESERVE_GIB)
    rng = np.random.default_rng(0)
    for i in rng.choice(len(batch), 40, replace=False):
        r = evaluate(m, system, execution_at(batch, int(i)), comm=comm).to_dict()
        assert r["step_time_s"] == pytest.approx(float(out["step_time_s"][i]), rel=1e-9)
        assert r["memory_gib_per_card"] == pytest.approx(float(out["mem_total"][i]), rel=1e-9)
        assert r["energy_j_per_step"] == pytest.approx(float(out["energy_j_per_step"][i]))


def test_search_ranks_rejects_and_returns_a_front() -> None:
    m, system = MODELS["gpt3-175b"], system_for_accelerator(A100, 256)
    res = search(m, system, 256, 256, top=5).to_dict()
    assert res["configs_evaluated"] > 10_000
    assert res["rejected"]["memory: does not fit HBM"] > 0
    times = [b["step_time_s"] for b in res["best"]]
    assert times == sorted(times) and all(b["fits"] for b in res["best"])
    assert res["pareto"][0]["step_time_s"] == pytest.approx(times[0])
    for a in res["pareto"]:
        for b in res["pareto"]:
            assert not (b["step_time_s"] < a["step_time_s"]
                        and b["energy_j_per_step"] < a["energy_j_per_step"]
                        and b["cards"] < a["cards"])
    tp12 = model_from_params({"base": "gpt3-175b", "heads": 12, "kv_heads": 12})
    assert "tp does not divide heads" in search(tp12, system, 256, 256, top=1).rejected


def test_fidelity_against_published_runs() -> None:
    """17 published runs (Narayanan 2021 Table 1, Korthikanti 2022, Llama 3 Table 4).

    Layouts are the papers' own (Narayanan's launch script, Korthikanti's Table 3);
    only Llama 3's micro-batch and virtual stages are unpublished and chosen by the
    rule (the fastest that fits HBM). The issue's target is a mean absolute error
    ≤ 5 %; the bound is the error really reached, so it cannot drift
    (docs/simulation.md, "Training fidelity", says why each row misses).
    """
    table = fidelity_table()
    assert len(table) == len(PUBLISHED_RUNS) >= 8
    assert all(row["source"] for row in table)
    assert all(row["fits"] for row in table)
    assert all(not row["chosen"] for row in table if "A100" in row["run"])  # all published
    mae = statistics.mean(abs(row["error"]) for row in table)
    assert mae <= BOUND_MAE


def test_korthikanti_per_layer_times_diagnose_the_compute_rate() -> None:
    """Korthikanti et al. 2022 Table 4: one 22B layer (TP 8, micro-batch 4) per experiment.

    At mamf-finder's best-case rate (0.86 of peak) every forward and backward figure
    is 7–12 % faster than measured, while what SP saves and what recomputation adds
    match: the structure (memory-bound kernels, TP collectives and their backward
    overlap) is right and the tensor-core rate is not. The A100 rate (0.75) is
    calibrated on the baseline forward alone; the other nine figures check it.
    """
    from simulation.training.fidelity import layer_time_table

    best_case = layer_time_table(matmul_efficiency=267.9 / 312.0)
    for row in best_case:
        assert -0.125 < row["forward_error"] < -0.07
        assert -0.125 < row["backward_error"] < -0.07
    by = {row["experiment"]: row for row in best_case}
    base = by["baseline, no recompute"]

    def delta(name: str, key: str) -> float:
        return float(by[name][key] - base[key])

    # SP's saving, full and selective recomputation's cost: published vs model (ms)
    assert delta("sequence parallelism", "model_forward_ms") == pytest.approx(-0.5, abs=0.1)
    assert delta("full recompute", "model_backward_ms") == pytest.approx(7.6, abs=0.6)
    assert delta("selective recompute", "model_backward_ms") == pytest.approx(1.3, abs=0.35)

    table = layer_time_table()
    assert abs(table[0]["forward_error"]) < 0.005  # the calibration point
    checks = [r["backward_error"] for r in table] + [r["forward_error"] for r in table[1:]]
    assert max(abs(e) for e in checks) < 0.025


def test_tp_backward_overlap_hides_the_column_parallel_all_reduces() -> None:
    """Megatron's async backward: the QKV / MLP-up input-gradient AllReduces run under
    their weight-gradient GEMMs; with SP the row-parallel AllGathers stay exposed."""
    m = MODELS["megatron-22b"]
    system = system_for_accelerator(A100, 8)
    base = {"tp": 8, "global_batch": 4, "micro_batch": 4, "flash_attention": False}
    for sp in (False, True):
        off = evaluate(m, system, execution_from_params(
            {**base, "sequence_parallel": sp}, 8, m)).values
        on = evaluate(m, system, execution_from_params(
            {**base, "sequence_parallel": sp, "overlap_tp_bwd": True}, 8, m)).values
        full = evaluate(m, system, execution_from_params(
            {**base, "sequence_parallel": sp, "overlap_tp": True}, 8, m)).values
        assert on["layer"]["forward"] == off["layer"]["forward"]
        assert full["layer"]["backward"] <= on["layer"]["backward"] < off["layer"]["backward"]
        hidden = off["layer"]["backward"] - on["layer"]["backward"]
        tp_b = off["layer"]["backward"] - full["layer"]["backward"]
        # no SP: both AllReduces hidden (the weight-gradient GEMMs are longer);
        # SP: the two exposed AllGathers are what is left of the backward TP time
        assert hidden == pytest.approx(tp_b if not sp else tp_b / 2, rel=0.02)


def test_gemm_store_follows_the_main_loop_on_ampere_and_hopper_not_on_blackwell() -> None:
    """C store after the main loop: + m·n·elem / HBM; with store_overlap the max roofline
    (Hopper: DeepGEMM's curve, ``test_gemm_shape.py``; Blackwell: MAMF's best shapes)."""
    from simulation.training.gemm import gemm_time
    from simulation.training.validation import ACCELERATORS as VALIDATION_ACCELERATORS

    one = np.array([1.0])
    args = (8192 * one, 768 * one, 6144 * one, one, 2.0, 234e12, 1.835e12, 0)
    hidden = gemm_time(*args)[0]
    stored = gemm_time(*args, store_overlap=False)[0]
    assert stored - hidden == pytest.approx(8192 * 768 * 2 / 1.835e12)
    assert system_for_accelerator(A100, 8).gemm_store_overlap is False
    h100 = dict(ACCELERATORS["h100-sxm5-80gb"])
    assert system_for_accelerator(h100, 8).gemm_store_overlap is False
    b200 = dict(VALIDATION_ACCELERATORS["b200-sxm-180gb"])
    assert system_for_accelerator(b200, 8).gemm_store_overlap is True


def test_comm_tables_reproduce_the_collective_model() -> None:
    """At grid sizes and between them the tables equal the wave-1 model's own times."""
    from simulation.collectives.models import algorithm_time
    from simulation.training.comm import CommModel

    comm = CommModel(system_for_accelerator(A100, 64))
    for size in (2.0**20, 2.0**27, 3.0 * 2**26):
        got = float(comm.time("allreduce", np.array([1]), np.array([16]), np.array([size]))[0])
        fab = comm.fabric(1, 16)
        want = min(algorithm_time(fab, "allreduce", a, size) for a in ("ring", "tree"))
        assert got == pytest.approx(want, rel=0.05)


def test_min_memory_is_a_lower_bound_of_every_searched_layout() -> None:
    """fits_anywhere / min_memory_gib: the least memory over the search's own layouts."""
    from simulation.training import fits_anywhere, min_memory_gib
    from simulation.training.comm import CommModel
    from simulation.training.core import step_arrays
    from simulation.training.step import MEMORY_RESERVE_GIB

    m, system = MODELS["gpt3-175b"], system_for_accelerator(A100, 64)
    least = min_memory_gib(m, system, 64)
    batch, _, _ = enumerate_configs(m, system, 64, 64, {})
    out = step_arrays(m, system, batch, CommModel(system), MEMORY_RESERVE_GIB)
    searched = float(out["mem_total"].min())
    assert least <= searched + 1e-9
    assert least == pytest.approx(searched, rel=0.05)  # the bound is reached (gb = dp there)
    # ZeRO-3 over 8 cards: 16 bytes × 174.6e9 / 8 alone is 325 GiB
    assert min_memory_gib(m, system, 8) > 16 * m.params / 8 / 2**30
    reason = fits_anywhere(m, system, 8)
    assert reason is not None and "80 GiB" in reason
    assert fits_anywhere(m, system, 64) is None
    with pytest.raises(TrainingInputError) as err:
        min_memory_gib(m, system, 65)
    assert err.value.field == "cards"


def test_search_limits_and_objectives_are_exported_and_enforced() -> None:
    from simulation.training import OBJECTIVES, SEARCH_LIMITS

    assert set(OBJECTIVES) == {"time", "energy", "cost"}
    assert "tp" in SEARCH_LIMITS and "max_cards" in SEARCH_LIMITS
    m, system = MODELS["megatron-1.7b"], system_for_accelerator(A100, 8)
    with pytest.raises(TrainingInputError) as err:
        search(m, system, 8, 8, limits={"tpp": [1]})
    assert err.value.field == "limits.tpp"
    with pytest.raises(TrainingInputError) as err:
        search(m, system, 8, 8, limits={"max_cards": 0})
    assert err.value.field == "limits.max_cards"


def test_dp_zero_is_refused_and_absent_dp_is_derived() -> None:
    with pytest.raises(TrainingInputError) as err:
        execution_from_params({"dp": 0, "global_batch": 8}, 8)
    assert err.value.field == "dp"
    assert execution_from_params({"dp": None, "global_batch": 8}, 8).dp == 8
    assert execution_from_params({"global_batch": 8}, 8).dp == 8


def test_gemm_quantization_and_roofline_closed_forms() -> None:
    """NVIDIA Matrix Multiplication guide: a partial wave costs a full one; roofline."""
    from simulation.training.gemm import gemm_time, wave_efficiency

    one = np.array([1.0])
    # 108 tiles of 256x128 on 108 SMs: one full wave; 109: two waves
    assert wave_efficiency(108 * 256 * one, 128 * one, one, 108)[0] == pytest.approx(1.0)
    assert wave_efficiency(109 * 256 * one, 128 * one, one, 108)[0] == pytest.approx(109 / 216)
    assert wave_efficiency(109 * 256 * one, 128 * one, one, 0)[0] == 1.0  # unknown SMs: off
    # a large square GEMM is compute-bound: 2mnk / rate exactly (8192 = 32 x 64 tiles)
    t = gemm_time(8192 * one, 8192 * one, 8192 * one, one, 2.0, 1e14, 2e12, 0)
    assert t[0] == pytest.approx(2 * 8192**3 / 1e14)
    # k = 1 is a pure copy: bytes / bandwidth
    t = gemm_time(8192 * one, 8192 * one, one, one, 2.0, 1e14, 2e12, 0)
    assert t[0] == pytest.approx(2.0 * (8192 + 8192 + 8192**2) / 2e12)


def test_flash_attention_is_faster_and_backward_costs_more_than_forward() -> None:
    """FlashAttention-2: causal half executed, backward 2.5x; no s^2 traffic."""
    from simulation.training.layer import layer_kernels

    m, one = MODELS["gpt3-175b"], np.array([1.0])
    args = (m, 2048 * one, 8 * one, np.array([True]))
    plain = layer_kernels(*args, np.array([False]), 2.0, one * 268e12, one * 268e12, 1.8e12, 108)
    flash = layer_kernels(*args, np.array([True]), 2.0, one * 268e12, one * 268e12, 1.8e12, 108)
    heads = 96 / 8
    assert flash["fwd_core"][0] == pytest.approx(2 * 2048**2 * 128 * heads / 268e12)
    assert flash["bwd_core"][0] == pytest.approx(2.5 * flash["fwd_core"][0])
    assert flash["core_mem"][0] == 0.0 < plain["core_mem"][0]
    assert flash["fwd_core"][0] < plain["fwd_core"][0]
    assert plain["fwd_gemm"][0] == flash["fwd_gemm"][0]


# ---- mechanisms of the fidelity step (activations per architecture, interleaving,
# ---- gradient accumulation, optimizer traffic, kernel gaps, context parallelism)

def _saved(model_name: str, tp: float, sp: bool, rc: int, flash: bool, cp: float = 1.0,
           mb: float = 1.0) -> float:
    from simulation.training.memory import saved_activation_bytes

    one = np.array([1.0])
    return float(saved_activation_bytes(
        MODELS[model_name], mb * one, tp=tp * one, sp=np.array([sp]), recompute=np.array([rc]),
        flash=np.array([flash]), cp=cp)[0])


def test_saved_activations_reproduce_korthikanti_for_gpt() -> None:
    """Tensor-by-tensor count = Korthikanti eqs. 1–5 for GPT-3 (GeLU, dropout, MHA)."""
    s, h, a, t = 2048, 12288, 96, 8
    sbh = s * h
    assert _saved("gpt3-175b", 1, False, 0, False) == pytest.approx(sbh * (34 + 5 * a * s / h))
    assert _saved("gpt3-175b", t, False, 0, False) == pytest.approx(
        sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    assert _saved("gpt3-175b", t, True, 0, False) == pytest.approx(
        sbh * (34 / t + 5 * a * s / (h * t)))
    assert _saved("gpt3-175b", t, True, 1, False) == pytest.approx(sbh * 34 / t)
    assert _saved("gpt3-175b", t, True, 2, False) == pytest.approx(2 * sbh / t)
    # micro-batch scales linearly
    assert _saved("gpt3-175b", t, True, 1, False, mb=4) == pytest.approx(4 * sbh * 34 / t)


def test_saved_activations_for_llama_swiglu_gqa_no_dropout_flash() -> None:
    """Llama 3 405B: per token (12h + 4kv + 6f)/t + the FP32 log-sum-exp 4·a/t, TP+SP;
    smaller than Korthikanti's 34h/t would say for the boundary and attention, larger
    for the 3.25h-wide SwiGLU; context parallelism divides it."""
    m = MODELS["llama3-405b"]
    s, h, kv, f, a, t = 8192, 16384, 8 * 128, 53248, 128, 8
    per_token = (12 * h + 4 * kv + 6 * f) / t + 4 * a / t
    assert _saved("llama3-405b", t, True, 0, True) == pytest.approx(s * per_token)
    assert _saved("llama3-405b", t, True, 0, True, cp=16) == pytest.approx(s * per_token / 16)
    # no flash: the s² scores (softmax output only, no dropout mask or output)
    plain = _saved("llama3-405b", t, True, 0, False)
    assert plain - s * (per_token - 4 * a / t) == pytest.approx(2 * a / t * s * s)
    assert m.dropout is False


def test_interleaved_chunks_in_flight_megatron_schedule() -> None:
    """Rank 0 of Megatron's interleaved 1F1B: min(m·v, 2(p−1) + (v−1)p + 1) chunks of
    L/(pv) layers; uncapped that is Korthikanti's L(1 + (p−1)/(pv))."""
    from simulation.training.memory import chunks_in_flight

    p, v, L = 16.0, 2.0, 128.0
    assert chunks_in_flight(p, 1000.0, v) * L / (p * v) == pytest.approx(
        L * (1 + (p - 1) / (p * v)))
    assert chunks_in_flight(p, 1000.0, 1.0) == p          # 1F1B: p micro-batches
    assert chunks_in_flight(p, 4.0, 1.0) == 4.0           # fewer micro-batches than stages
    assert chunks_in_flight(p, p, v) == p * v             # m = p: every chunk in flight
    system = system_for_accelerator(H100, 16384, scale_out_technology="roce")
    m = MODELS["llama3-405b"]
    base = {"tp": 8, "pp": 16, "global_batch": 2048, "sequence_parallel": True, "zero": 2}
    one = evaluate(m, system, execution_from_params(base, 16384, m)).to_dict()
    two = evaluate(m, system, execution_from_params({**base, "vpp": 2}, 16384, m)).to_dict()
    # m = 16 = p: interleaving holds the same layers, so the same activation memory
    assert two["memory"]["activations"] == pytest.approx(one["memory"]["activations"])


def test_unfused_gradient_accumulation_and_optimizer_traffic() -> None:
    """Unfused main_grad += grad: (2 + 2·4) B per parameter per micro-batch at HBM speed
    with FP32 gradients (+ one add kernel per parameter tensor); optimizer (28 + 10) B
    per parameter of the shard (BF16) + 4 B to zero the gradient buffer."""
    from simulation.training.core import KERNEL_GAP_S, PARAM_TENSORS

    m = MODELS["megatron-1.7b"]
    system = system_for_accelerator(A100, 8)
    hbm = system.hbm_tbps * 1e12 * system.memory_efficiency
    base = {"tp": 1, "pp": 1, "dp": 1, "global_batch": 4, "fp32_grads": True}
    fused = evaluate(m, system, execution_from_params(base, 8, m)).to_dict()
    unf = evaluate(m, system, execution_from_params({**base, "grad_accum_fusion": False},
                                                    8, m)).to_dict()
    p_card = m.layers * m.layer_params + m.vocab * m.hidden
    assert unf["breakdown"]["backward"] - fused["breakdown"]["backward"] == pytest.approx(
        4 * ((2 + 2 * 4) * p_card / hbm + PARAM_TENSORS * m.layers * KERNEL_GAP_S))
    assert fused["breakdown"]["optimizer"] == pytest.approx(p_card * (28 + 10 + 4) / hbm)
    assert fused["memory"]["gradients"] == pytest.approx(4 * p_card / 2**30)


def test_kernel_gaps_dominate_a_tiny_layer() -> None:
    """A layer too small to compute still pays ~1 µs per kernel: 12 (flash) forward."""
    from simulation.training.core import KERNEL_GAP_S, KERNELS_FWD

    m = model_from_params({"layers": 4, "hidden": 64, "heads": 4, "seq_len": 16, "vocab": 64,
                           "dropout": False})
    system = system_for_accelerator(A100, 1)
    r = evaluate(m, system, execution_from_params({"global_batch": 1}, 1, m)).to_dict()
    from simulation.training.layer import layer_kernels, logit_kernels

    one = np.array([1.0])
    peak = one * 312e12 * system.matmul_efficiency
    hbm = system.hbm_tbps * 1e12 * system.memory_efficiency
    k = layer_kernels(m, 16 * one, one, np.array([False]), np.array([True]), 2.0, peak, peak,
                      hbm, 108, flops_flash=one * 312e12 * system.flash_efficiency,
                      store_overlap=system.gemm_store_overlap)
    logit_f, _ = logit_kernels(m, 16 * one, one, 2.0, peak, hbm, 108, system.gemm_store_overlap)
    kernels = sum(float(k[x][0]) for x in ("fwd_gemm", "fwd_core", "fwd_mem", "core_mem"))
    gaps = (KERNELS_FWD - 4) * KERNEL_GAP_S  # one flash kernel for the core and its copy
    assert r["breakdown"]["forward"] == pytest.approx(4 * (kernels + gaps) + float(logit_f[0]))
    # 12 µs of gaps against ~14 µs of kernels (seven one-tile GEMMs, ~2 µs each)
    assert gaps > 0.8 * kernels


def test_context_parallel_splits_tokens_and_prices_kv_all_gather() -> None:
    """cp splits each sequence: cards = tp·cp·pp·dp, activations ÷ cp, a K/V all-gather
    (+ gradient reduce-scatter) per layer; cp must cut the sequence into 2·cp chunks."""
    m = model_from_params({"base": "llama3-8b", "seq_len": 32768})
    system = system_for_accelerator(H100, 64)
    base = {"tp": 8, "global_batch": 8, "sequence_parallel": True, "recompute": "none"}
    one = evaluate(m, system, execution_from_params(base, 64, m)).to_dict()
    ex2 = execution_from_params({**base, "cp": 2}, 64, m)
    two = evaluate(m, system, ex2).to_dict()
    assert ex2.dp == 4 and ex2.cards == 64 and one["cards"] == two["cards"] == 64
    assert two["breakdown"]["cp_comm"] > 0 == one["breakdown"]["cp_comm"]
    assert sum(two["breakdown"].values()) == pytest.approx(two["step_time_s"], rel=1e-9)
    assert two["memory"]["activations"] < one["memory"]["activations"]
    with pytest.raises(TrainingInputError) as err:
        execution_from_params({**base, "cp": 3}, 64, m)
    assert err.value.field == "cp"


def test_flash_attention_runs_at_its_measured_rate() -> None:
    """H100: FlashAttention-2's 335 TFLOP/s (FA-3 paper) on the causal half of 4·s²·d."""
    from simulation.training.layer import layer_kernels

    system = system_for_accelerator(H100, 8)
    assert system.flash_efficiency == pytest.approx(335 / 989.5)
    m, one = MODELS["llama3-8b"], np.array([1.0])
    rate = 989.5e12 * system.flash_efficiency
    k = layer_kernels(m, 8192 * one, one, np.array([False]), np.array([True]), 2.0,
                      one * 792e12, one * 792e12, 3e12, 132, flops_flash=one * rate)
    assert k["fwd_core"][0] == pytest.approx(2 * 8192**2 * 128 * 32 / rate)


def test_search_takes_context_parallel_sizes_when_asked() -> None:
    """limits.cp opts a long-sequence search into context parallelism; the search's
    figures for a cp row equal evaluate's; cp not splitting the sequence is a reason."""
    from simulation.training import SEARCH_LIMITS

    assert "cp" in SEARCH_LIMITS
    m = model_from_params({"base": "llama3-8b", "seq_len": 32768})
    system = system_for_accelerator(H100, 64)
    limits = {"tp": [8], "pp": [1, 2], "cp": [1, 2, 3], "micro_batch": [1], "vpp": [1],
              "zero": [1], "recompute": ["none", "selective"], "overlap": [True]}
    res = search(m, system, 64, 16, limits=limits).to_dict()
    assert res["rejected"]["cp does not split the sequence into 2·cp chunks"] > 0
    rows = res["best"] + res["pareto"]
    assert {r["execution"]["cp"] for r in rows} >= {2}
    row = next(r for r in rows if r["execution"]["cp"] == 2)
    ex = execution_from_params(row["execution"], 64, m)
    assert evaluate(m, system, ex).step_time_s == pytest.approx(row["step_time_s"], rel=1e-9)


def test_llama3_balanced_stages_closed_form() -> None:
    """Llama 3 §3.3.2: one layer fewer on the first and last stage (L + 2 slots).

    405B, pp 16: S = 128/16 = 8 slots a stage; the last stage (7 layers + output)
    is lighter than a middle one (8 layers), so the critical stage is a middle one:
    forward + backward + recompute + TP = m·S·(one layer), and the bubble is
    (p − 1)/v of the same S layers. vpp 8 (one slot per chunk) needs the balance.
    """
    model = MODELS["llama3-405b"]
    system = system_for_accelerator(H100, 8192, scale_out_technology="roce")
    base = {"tp": 8, "pp": 16, "global_batch": 2048, "sequence_parallel": True,
            "zero": 2, "vpp": 4, "recompute": "none"}
    with pytest.raises(TrainingInputError, match="pp × vpp"):
        execution_from_params({**base, "vpp": 8}, 8192, model)
    execution_from_params({**base, "vpp": 8, "pp_balance": True}, 8192, model)
    ex = execution_from_params({**base, "pp_balance": True}, 8192, model)
    r = evaluate(model, system, ex).to_dict()
    br, layer, m = r["breakdown"], r["layer"], ex.micro_batches
    per_layer = layer["forward"] + layer["backward"] + layer["recompute"]
    work = br["forward"] + br["backward"] + br["recompute"] + br["tp_comm"]
    assert work == pytest.approx(m * 8 * per_layer, rel=1e-9)
    assert br["pp_bubble"] == pytest.approx(15 / 4 * 8 * per_layer, rel=1e-9)
    plain = evaluate(model, system, execution_from_params(base, 8192, model)).to_dict()
    assert plain["breakdown"]["forward"] > br["forward"]  # 8 layers + the output layer


def test_llama3_balanced_first_stage_memory() -> None:
    """The first stage holds W·S/v − (its short chunk's share) layers' activations
    (memory docstring): 405B, p 16, v 4, 32 micro-batches: W = 79, 31 short → 127."""
    from simulation.training.memory import chunks_in_flight, first_chunk_share

    model = MODELS["llama3-405b"]
    system = system_for_accelerator(H100, 8192, scale_out_technology="roce")
    ex = execution_from_params({"tp": 8, "pp": 16, "global_batch": 2048,
                                "sequence_parallel": True, "zero": 2, "vpp": 4,
                                "pp_balance": True}, 8192, model)
    w = chunks_in_flight(16.0, 32.0, 4.0)
    held = w * 8 / 4 - first_chunk_share(16.0, 32.0, 4.0, w)
    assert (w, held) == (79.0, 127.0)
    one = np.array([1.0])
    per = float(saved_activation_bytes(model, one, tp=8 * one, sp=np.array([True]),
                                       recompute=np.array([0]), flash=np.array([True]))[0])
    acts = evaluate(model, system, ex).to_dict()["memory"]["activations"]
    assert acts == pytest.approx(held * per / 2**30, rel=1e-9)


def test_dp_every_microbatch_and_comm_sm_contention() -> None:
    """Sharded gradients reduced after every micro-batch: m reductions, not one
    (no overlap, no ZeRO gather: exposed DP = m × one AllReduce). Overlapped, the
    hidden collective holds comm_sms of the card's SMs: the compute under it takes
    sm/(sm − c) as long, so a fully hidden reduction costs t·c/(sm − c)."""
    model = MODELS["megatron-1.7b"]
    system = system_for_accelerator(H100, 64)
    base = {"tp": 1, "global_batch": 512, "micro_batch": 4, "zero": 0}
    once = evaluate(model, system, execution_from_params(
        {**base, "overlap_dp": False}, 64, model)).to_dict()["breakdown"]["dp_exposed"]
    every = evaluate(model, system, execution_from_params(
        {**base, "overlap_dp": False, "dp_every_microbatch": True}, 64, model)).to_dict()
    assert every["breakdown"]["dp_exposed"] == pytest.approx(
        every["micro_batches"] * once, rel=1e-9)
    hid = evaluate(model, system, execution_from_params(base, 64, model)).to_dict()
    assert hid["breakdown"]["dp_exposed"] == pytest.approx(
        once * system.comm_sms / (system.sm_count - system.comm_sms), rel=1e-9)
    free = evaluate(model, dataclasses.replace(system, comm_sms=0),
                    execution_from_params(base, 64, model)).to_dict()
    assert free["breakdown"]["dp_exposed"] == 0.0
