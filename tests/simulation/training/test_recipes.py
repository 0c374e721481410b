"""Precision recipes, the op-class breakdown and the Hopper/Blackwell validation table."""
from __future__ import annotations

import statistics
from typing import Any

import numpy as np
import pytest

from simulation.training import (
    MODELS,
    SystemSpec,
    TrainingInputError,
    evaluate,
    execution_from_params,
    system_for_accelerator,
)
from simulation.training.gemm import mma_efficiency
from simulation.training.layer import cast_elements
from simulation.training.recipes import CAST_BYTES
from simulation.training.step import OP_CLASSES
from simulation.training.validation import (
    ACCELERATORS,
    MODERN_RUNS,
    VALIDATION_MODELS,
    validation_table,
)

H100 = ACCELERATORS["h100-sxm5-80gb"]
GB200 = ACCELERATORS["gb200-186gb"]
LLAMA8B = {"global_batch": 16, "micro_batch": 1, "zero": 1}


def _run(precision: str, recipe: str = "delayed", figures: dict[str, Any] = H100,
         **extra: Any) -> dict[str, Any]:
    model = MODELS["llama3-8b"]
    ex = execution_from_params({**LLAMA8B, "precision": precision, "fp8_recipe": recipe,
                                **extra}, 8, model)
    return evaluate(model, system_for_accelerator(figures, 8), ex).values


def test_cast_traffic_is_elements_times_recipe_bytes_over_hbm() -> None:
    """Casts a step = (layers × micro-batches × (forward + backward elements) + the
    card's weights once) × the recipe's bytes / achievable HBM: the closed form."""
    model = MODELS["llama3-8b"]
    one = np.array([1.0])
    f, b = cast_elements(model, 8192 * one, one, np.array([False]))
    r = _run("fp8", "current")
    system = system_for_accelerator(H100, 8)
    hbm = system.hbm_tbps * 1e12 * system.memory_efficiency
    m, layers = 2, model.layers  # global 16 / (dp 8 × micro 1)
    weights = r["ops"]["casts"] - m * layers * float(f[0] + b[0]) * 6.0 / hbm
    card = model.params - model.vocab * model.hidden  # layers + output layer (pp 1, tp 1)
    assert weights == pytest.approx(card * 6.0 / hbm, rel=1e-6)
    assert _run("fp8", "delayed")["ops"]["casts"] / r["ops"]["casts"] == pytest.approx(
        CAST_BYTES["delayed"] / CAST_BYTES["current"])
    assert _run("bf16")["ops"]["casts"] == 0.0


def test_ops_and_exposed_comm_make_the_step() -> None:
    """The op classes are the critical stage's busy time: with the bubble and the
    exposed communication they sum to the step, for every recomputation."""
    for rc in ("none", "selective", "full", "op"):
        r = _run("fp8", "current", tp=2, sequence_parallel=True, recompute=rc)
        assert set(r["ops"]) == set(OP_CLASSES)
        b = r["breakdown"]
        busy = b["forward"] + b["backward"] + b["recompute"] + b["optimizer"]
        assert sum(r["ops"].values()) == pytest.approx(busy, rel=1e-9)
        assert r["exposed_comm"]["tp"] == b["tp_comm"] > 0
        total = busy + b["pp_bubble"] + sum(r["exposed_comm"].values()) + b["compression"]
        assert total == pytest.approx(r["step_time_s"], rel=1e-9)


def test_fp8_speeds_up_only_the_gemms() -> None:
    """Attention, the output layer and the memory-bound ops keep their BF16 time;
    the projection/MLP GEMMs halve at most. End to end the gain on Llama 3 8B on an
    H100 is within the published 1.2-1.5x (issue 23), not the datasheet's 2x."""
    bf, f8 = _run("bf16"), _run("fp8", "current")
    for op in ("attention", "output_layer", "memory_bound"):
        assert f8["ops"][op] == pytest.approx(bf["ops"][op])
    assert 1.6 < bf["ops"]["gemm"] / f8["ops"]["gemm"] <= 2.0
    assert 1.2 <= bf["step_time_s"] / f8["step_time_s"] <= 1.5


def test_recipes_the_accelerator_lacks_are_refused_on_the_field() -> None:
    with pytest.raises(TrainingInputError) as exc:
        _run("fp4")
    assert exc.value.field == "precision" and "choose from fp32, bf16, fp16, fp8" in str(exc.value)
    with pytest.raises(TrainingInputError) as exc:
        _run("fp8", "mx")
    assert exc.value.field == "fp8_recipe" and "delayed, current, block" in str(exc.value)
    with pytest.raises(TrainingInputError) as exc:
        _run("fp8", "tensorwise")
    assert exc.value.field == "fp8_recipe"
    # Blackwell has both: MXFP8 costs what delayed scaling costs plus its scales
    mx, nv = _run("fp8", "mx", GB200), _run("fp4", figures=GB200)
    assert nv["step_time_s"] < mx["step_time_s"]


def test_system_reads_the_nvlink_domain_and_the_fp4_peak() -> None:
    s = system_for_accelerator(GB200, 72)
    assert s.scale_up_domain == 72 and s.peak("fp4") == 10000 and s.block_scaled_mma
    assert s.sm_count == 148
    h = system_for_accelerator(H100, 8)
    assert h.scale_up_domain == 8 and h.peak("fp4") == 0 and not h.block_scaled_mma
    # the GEMM rate per dtype: the MAMF table's measured maximum over the dtype's peak;
    # on Hopper the main loop's, the C store exposed at MAMF's shape taken out
    # (:data:`~simulation.training.system.MAMF_SHAPE`, test_gemm_shape.py)
    hbm = 3.35e12 * 0.9
    assert h.efficiency("fp8") == pytest.approx(
        mma_efficiency(1402.6 / 1979, 1979e12, hbm, 1024, 9216, 14336, 1.0))
    assert h.efficiency("bf16") == h.efficiency("fp16") == pytest.approx(
        mma_efficiency(792.1 / 989.5, 989.5e12, hbm, 6144, 2816, 17920, 2.0))
    assert s.efficiency("bf16") == pytest.approx(1822.0 / 2500)
    assert SystemSpec.from_dict(s.to_dict(), "").precision_efficiency == s.precision_efficiency


TABLE = validation_table()
#: The figures reached (the test holds them: a change that makes them worse fails).
# MOE_MEAN 0.545 → 0.559: the B200 Qwen3 235B row is priced as its run was, all-to-all
# overlap on (Megatron-Bridge pull request 1760; validation.QWEN3_B200_2511), +121 → +148 %
# The figures reached. This session (issue 23): Hopper GEMMs store C after the main loop
# (gemm.py "Epilogue", DeepGEMM's H800 curve), the overlap's warm-up and cool-down chunks
# unpaired (core.ep_unpaired_share), the all-to-all dispatcher's sorts by local expert
# (layer.moe_sort_elements), the attention kernel's rate by head dim (GPT-OSS's 64,
# system.FLASH_HEAD_DIM_RATE_FWD / _BWD): DENSE_MEAN 0.196 → 0.185, MOE_MEAN 0.559 →
# 0.508, MOE_MAX 1.94 → 1.67 (Blackwell dense unchanged); the expert GEMMs' issue cost
# measured on the GroupedLinear module (dispatch.HOST_EXPERT_GEMM_S, Megatron-MoE-ModelZoo
# issue 7): MOE_MEAN 0.508 → 0.419; the NVFP4 GEMM rate transferred by FP4 / FP8 peak
# ratio (recipes.fp4_over_fp8: 1.445× FP8 on GB200, not the B300's 1.81×) and MXFP8's
# parameter gather not overlapped in the 25.11 recipes (validation.MXFP8_PARAM_GATHER_2511):
# BW_MEAN 0.136 → 0.124, the Blackwell dense max 0.35 → 0.32; FSDP1's gradient passes and
# Composer's reduce-scatter after every micro-batch on the MPT rows (core.FSDP1_GRAD_BYTES):
# DENSE_MEAN 0.185 → 0.165; HybridEP's all-to-all on the 25.11 GB200 / GB300 Qwen3 and
# DeepSeek-V3 rows (each token once per destination rank, at the bandwidth measured in
# DeepEP's hybrid-ep pull request 428, dispatch.hybridep_layer_s): MOE_MEAN 0.419 → 0.385;
# GPT-OSS's eager per-expert bias and unfused YaRN rotary in Megatron-Core
# (layer.EXPERT_BIAS_ELEMENTS, layer.YARN_ROPE_ELEMENTS): MOE_MEAN → 0.362
BW_MEAN, DENSE_MEAN, MOE_MEAN, MOE_MAX = 0.124, 0.165, 0.362, 1.67
BW_MAX = 0.32


def test_validation_table_sources_and_reached_error() -> None:
    """At least 15 published Hopper/Blackwell runs, dense and MoE, BF16, FP8 and FP4, from
    four independent sources; the errors reached (docs/training.md, "Validation on Hopper
    and Blackwell"): far from the issue's 5 % goal except dense on Hopper with Megatron /
    Llama 3's stacks. The bounds are the figures reached, so they cannot drift."""
    assert len(TABLE) >= 15
    assert {r["accelerator"] for r in TABLE} >= {"h100-sxm5-80gb", "b200-sxm-180gb",
                                                 "gb200-186gb", "gb300-288gb"}
    assert {r["precision"] for r in TABLE} >= {"BF16", "FP8-CS", "FP8-MX", "NVFP4"}
    assert any(r["moe"] for r in TABLE) and not all(r["moe"] for r in TABLE)
    # NVIDIA (Megatron-Bridge), Meta (Llama 3), PyTorch (torchtitan), MosaicML (llm-foundry),
    # DeepSeek-AI (DeepSeek-V3)
    assert len({r["source"].split(",")[0] for r in TABLE}) >= 5
    dense = [r for r in TABLE if not r["moe"]]
    hopper = [abs(r["error"]) for r in dense
              if r["accelerator"] == "h100-sxm5-80gb" and not r["pytorch_fsdp"]]
    assert len(hopper) == 8
    assert statistics.mean(hopper) <= 0.063 and max(hopper) <= 0.145
    blackwell = [abs(r["error"]) for r in dense if r["accelerator"] != "h100-sxm5-80gb"]
    assert len(blackwell) == 21
    assert statistics.mean(blackwell) <= BW_MEAN and max(blackwell) <= BW_MAX
    assert statistics.mean(abs(r["error"]) for r in dense) <= DENSE_MEAN
    moe = [abs(r["error"]) for r in TABLE if r["moe"]]
    assert len(moe) >= 19 and statistics.mean(moe) <= MOE_MEAN and max(moe) <= MOE_MAX
    assert any(r["source"].startswith("DeepSeek-AI") for r in TABLE)


@pytest.mark.parametrize("row", range(len(MODERN_RUNS)),
                         ids=[r.name for r in MODERN_RUNS])
def test_validation_row(row: int) -> None:
    """Each row fits HBM in its published layout and is within the error reached:
    dense on Hopper (Megatron) within −3 % and +12 % (the three small FP8 rows −0.5 to
    −0.3 % since the Hopper GEMMs' C store is priced, +1.8 to +2.0 % before; 405B
    +11.3 %); dense on Blackwell between −10 % (the 70B FSDP rows, whose recipes offload
    activations to the CPU where the model recomputes, and GB300 8B) and +32 % (405B MXFP8
    on B200; NVFP4 70B on GB200 was +35 % before the FP4 rate's transfer by peak ratio);
    MoE at most the MOE_MAX reached (Qwen3 30B-A3B on 16 H100s), DeepSeek-V3's
    own run within 3 % either way, the 25.11 H100 Qwen3 235B row with expert TP 1 within
    5 % either way (−4.6 %; −0.5 % before the Hopper GEMMs' C store and the dispatcher's
    sorts, two cited mechanisms that move 30 other rows the right way and this one the
    wrong way: docs/training.md, "Not done"); torchtitan's eager FSDP rows (op-level SAC,
    autograd's eager kernels, foreach AdamW) at most +19 % (+18.0 %); llm-foundry's MPT
    rows at most +60 % (MPT 760M, +59.6 %)."""
    r = TABLE[row]
    assert r["fits"]
    low = 0.0
    if r["moe"] and "ETP1" in r["run"] and "26.02" not in r["run"]:
        # expert TP (EP 32 over TP 2 × DP 16) without the all-to-all overlap: within 5 %
        # either way (the 26.02 recipe overlaps it: optimistic like the other MoE rows)
        assert abs(r["error"]) <= 0.05
        return
    if r["moe"] and "(report)" in r["run"]:
        # DeepSeek-V3's own run, DualPipe as ep_overlap with the all-to-all's 20 SMs held
        assert abs(r["error"]) <= 0.03
        return
    if r["moe"]:
        bound = MOE_MAX
    elif r["eager"]:
        bound = 0.19
    elif r["pytorch_fsdp"]:
        bound = 0.60
    elif r["accelerator"] == "h100-sxm5-80gb":
        low, bound = -0.03, 0.12
    else:
        low, bound = -0.10, BW_MAX
    assert low < r["error"] <= bound


def test_mpt_shapes_match_llm_foundrys_parameter_counts() -> None:
    """The MPT shapes of the llm-foundry rows against the table's ``NumParams`` column
    (sequence 2,048): within 0.05 % (norm vectors counted differently)."""
    published = {"mpt-760m": 760470528, "mpt-1b": 1315950592, "mpt-3b": 2651837440,
                 "mpt-7b": 6658859008, "mpt-13b": 12853954560, "mpt-30b": 29975214080}
    for name, count in published.items():
        assert VALIDATION_MODELS[name].params == pytest.approx(count, rel=5e-4)
    assert not set(VALIDATION_MODELS) & set(MODELS)  # not offered in the catalogue


def test_moe_catalogue_matches_published_parameter_counts() -> None:
    """Totals and active parameters of the MoE models against their publishers
    (billions): Mixtral 8x7B 46.7 / 12.9 and 8x22B 141 / 39 (Mistral AI), Qwen3
    30.5 / 3.3 and 235 / 22 (Qwen3 technical report, Table 1), GPT-OSS 120B 116.83
    total (OpenAI model card, Table 1; its 5.13 B active exclude the embedding)."""
    expect = {"mixtral-8x7b": (46.7, 12.9), "mixtral-8x22b": (141.0, 39.0),
              "qwen3-30b-a3b": (30.5, 3.3), "qwen3-235b-a22b": (235.0, 22.0)}
    for name, (total, active) in expect.items():
        m = MODELS[name]
        assert m.params / 1e9 == pytest.approx(total, rel=0.01)
        assert m.active_params / 1e9 == pytest.approx(active, rel=0.03)
    oss = MODELS["gpt-oss-120b"]
    assert oss.params / 1e9 == pytest.approx(116.83, rel=0.001)
    assert (oss.active_params - oss.vocab * oss.hidden) / 1e9 == pytest.approx(5.13, rel=0.01)
    assert oss.q_dim == 64 * 64 != oss.hidden and MODELS["llama3-8b"].q_dim == 4096


def test_expert_all_to_all_sends_every_routed_copy() -> None:
    """EP dispatch + combine, forward and backward: 4 all-to-alls of the rank's whole
    send buffer T·k·h·2 bytes (collectives.costs.ring_alltoall: S is the per-rank
    buffer), so on one NVLink server the exposed EP time per MoE layer and
    micro-batch is 4 × the all-to-all of T·k·2h bytes over ep cards."""
    from simulation.training.comm import CommModel

    model = MODELS["qwen3-30b-a3b"]
    system = system_for_accelerator(H100, 8)
    ex = execution_from_params({"global_batch": 8, "ep": 8, "precision": "bf16"}, 8, model)
    r = evaluate(model, system, ex).values
    t = CommModel(system).time("alltoall", np.array([8]), np.array([1]),
                               np.array([4096.0 * 8 * 2048 * 2]))
    assert r["exposed_comm"]["ep"] == pytest.approx(4 * float(t[0]) * model.layers, rel=1e-9)


def test_expert_all_to_all_across_servers_is_bound_by_the_nics() -> None:
    """EP 32 over 4 DGX H100 (k = 8 ranks per NVLink domain, n = 4 domains, as the 25.11
    Qwen3 235B row with expert TP 1 places them): the (k − 1)/ep of a rank's buffer that
    stays on NVLink moves at the same time as the (ep − k)/ep that crosses its own 400 Gb/s
    NIC, so a large all-to-all takes (ep − 1)·α + S·(ep − k)/ep / (NIC × 0.98) and its
    busbw is (ep − 1)/ep · n/(n − 1) × the NIC's rate — the NCCL maintainer's multi-node
    formula ("N/(N-1)x the bandwidth per GPU", NVIDIA/nccl-tests issue 130): 62.9 GB/s at
    1 GiB. One EP rank per server (k = 1) is the NIC alone: busbw → 49 GB/s."""
    from simulation.training.comm import CommModel

    system = system_for_accelerator(H100, 256)
    comm = CommModel(system)
    nic = system.scale_out_gbps * 0.98 * 1e9 / 8  # InfiniBand protocol efficiency
    alpha = system.scale_out_latency_us * 1e-6
    S = 2.0**30
    t = float(comm.time("alltoall", np.array([8]), np.array([4]), np.array([S]))[0])
    assert t == pytest.approx(31 * alpha + S * 24 / 32 / nic, rel=1e-9)
    busbw = S / t * 31 / 32
    assert busbw / 1e9 == pytest.approx(62.9, abs=0.05)
    assert busbw < 31 / 32 * 4 / 3 * nic
    t1 = float(comm.time("alltoall", np.array([1]), np.array([32]), np.array([S]))[0])
    assert t1 == pytest.approx(31 * alpha + S * 31 / 32 / nic, rel=1e-9)


def test_search_tries_each_fp8_recipe_it_is_given() -> None:
    """``limits.fp8_recipe`` multiplies the FP8 configurations (one per recipe) and
    the vectorised prices agree with :func:`evaluate` one at a time; ``mx`` on an H100
    is rejected with its reason, counted, not priced; an unknown recipe names its index."""
    from simulation.training import search
    from simulation.training.search import enumerate_configs, execution_at

    model = MODELS["llama3-8b"]
    system = system_for_accelerator(H100, 8)
    limits: dict[str, Any] = {"tp": [1, 2], "pp": [1], "micro_batch": [1], "vpp": [1],
                              "zero": [1], "recompute": ["none"], "sequence_parallel": [True],
                              "overlap": [True], "precision": ["fp8"]}
    one, _, _ = enumerate_configs(model, system, 8, 16, limits)
    both, rej, _ = enumerate_configs(model, system, 8, 16,
                                     {**limits, "fp8_recipe": ["delayed", "current", "mx"]})
    assert len(both) == 2 * len(one)
    assert any(k.startswith("fp8_recipe") for k in rej)
    res = search(model, system, 8, 16, limits={**limits, "fp8_recipe": ["current", "delayed"]},
                 top=4).to_dict()
    recipes = {row["execution"]["fp8_recipe"] for row in res["best"]}
    assert recipes == {"current", "delayed"}
    for row in res["best"]:
        ex = execution_from_params(row["execution"], 8, model)
        assert evaluate(model, system, ex).values["step_time_s"] == pytest.approx(
            row["step_time_s"], rel=1e-9)
    assert execution_at(both, 0).precision == "fp8"
    with pytest.raises(TrainingInputError) as exc:
        search(model, system, 8, 16, limits={**limits, "fp8_recipe": ["fp8"]})
    assert exc.value.field == "limits.fp8_recipe[0]"


@pytest.mark.parametrize(("model_name", "params"), [
    ("llama3-8b", {"precision": "fp8", "fp8_recipe": "current"}),
    ("gpt3-175b", {"tp": 8, "sequence_parallel": True, "flash_attention": False,
                   "grad_accum_fusion": False}),
    ("qwen3-30b-a3b", {"ep": 8, "precision": "bf16"}),
    ("mixtral-8x7b", {"tp": 2, "ep": 4, "precision": "fp8", "fp8_recipe": "block"}),
    ("llama3-8b", {"fused_elementwise": False, "recompute": "selective"}),
    ("deepseek-v3", {"ep": 8, "precision": "fp8", "fp8_recipe": "block"}),
    ("deepseek-v3", {"tp": 4, "ep": 2, "sequence_parallel": True, "flash_attention": False}),
    ("gpt-oss-120b", {"ep": 8, "precision": "bf16"}),
])
def test_layer_ops_sum_to_the_step_models_layer(model_name: str, params: dict[str, Any]) -> None:
    """The per-op list (FLOPs, bytes, time, bound-by) is the step model's layer, op by
    op: its GEMM, attention, memory-bound, cast and launch rows sum to what
    :func:`layer_kernels` and the core price for one layer and micro-batch."""
    from simulation.training.core import kernel_rates
    from simulation.training.layer import layer_kernels
    from simulation.training.step import batch_of

    model = MODELS[model_name]
    system = system_for_accelerator(H100, 8)
    ex = execution_from_params({"global_batch": 8, **params}, 8, model)
    r = evaluate(model, system, ex).values
    ops = r["layer_ops"]
    b = batch_of([ex])
    rt = kernel_rates(model, system, b)
    k = layer_kernels(model, rt["tokens"], b.tp.astype(float), b.sp, b.flash, rt["elem"],
                      rt["peak_gemm"], rt["peak_core"], float(rt["hbm"][0]), system.sm_count,
                      2.0 * rt["act_scale"], cp=b.cp.astype(float), flops_flash=rt["peak_flash"],
                      flops_flash_bwd=rt["peak_flash_bwd"],
                      store_overlap=system.gemm_store_overlap, ep=b.ep.astype(float),
                      eager=b.eager, etp=b.etp.astype(float) if model.moe else None,
                      moe_sort=b.moe_sort)

    def total(kind: str, phase: str) -> float:
        return sum(o["time_s"] for o in ops if o["kind"] == kind and o["phase"] == phase)

    assert total("gemm", "forward") == pytest.approx(float(k["fwd_gemm"][0]), rel=1e-9)
    assert total("gemm", "backward") == pytest.approx(float(k["bwd_gemm"][0]), rel=1e-9)
    assert total("attention", "forward") == pytest.approx(float(k["fwd_core"][0]), rel=1e-9)
    assert total("attention", "backward") == pytest.approx(float(k["bwd_core"][0]), rel=1e-9)
    mem_f = float(k["fwd_mem"][0] + k["core_mem"][0])
    assert total("memory", "forward") == pytest.approx(mem_f, rel=1e-9)
    assert total("memory", "backward") == pytest.approx(float(k["bwd_mem"][0]), rel=1e-9)
    # the whole layer: the step model's per-layer forward + backward (no TP exposure here
    # when tp = 1; with TP the exposed collectives are the difference)
    layer = sum(o["time_s"] for o in ops)
    exposed = r["exposed_comm"]["tp"] / (r["micro_batches"] * model.layers)
    assert layer == pytest.approx(r["layer"]["forward"] + r["layer"]["backward"] - exposed,
                                  rel=1e-9)
    for o in ops:
        assert o["bound"] in ("compute", "memory", "launch") and o["time_s"] >= 0
        if o["kind"] == "gemm" and o["bytes"] > 0:
            assert o["flops"] > 0


def test_precision_comparison_prices_the_same_layout_per_dtype() -> None:
    """``precisions``: BF16 and FP8 on an H100 (no FP4), BF16/FP8/FP4 on a GB200; each
    the step of the same layout at that GEMM dtype, equal to evaluating it directly."""
    r = _run("bf16", "current")
    assert set(r["precisions"]) == {"bf16", "fp8"}
    assert r["precisions"]["bf16"]["step_time_s"] == pytest.approx(r["step_time_s"])
    fp8 = _run("fp8", "current")
    assert r["precisions"]["fp8"]["step_time_s"] == pytest.approx(fp8["step_time_s"])
    assert r["precisions"]["fp8"]["speedup_over_bf16"] == pytest.approx(
        r["step_time_s"] / fp8["step_time_s"])
    g = _run("fp8", "mx", GB200)
    assert set(g["precisions"]) == {"bf16", "fp8", "fp4"}
    assert g["precisions"]["fp8"]["step_time_s"] == pytest.approx(g["step_time_s"])


def test_eager_element_wise_ops_cost_their_extra_passes() -> None:
    """Unfused (eager) norms, rotary and SwiGLU move 36 / 20 / 10 bytes per element
    forward where the fused kernels move 4 / 4 / 6, and autograd's backward kernels
    92 / 20 / 18 where the fused ones move 6 / 6 / 9; torchtitan's ``repeat_kv`` copies
    K and V to the 32 query heads (2·(kv + q) elements each way). The memory-bound time
    grows by exactly the extra bytes at HBM speed; GEMMs and attention do not change."""
    model = MODELS["llama3-8b"]
    fused, eager = _run("bf16"), _run("bf16", fused_elementwise=False)
    for op in ("gemm", "attention", "casts"):
        assert eager["ops"][op] == pytest.approx(fused["ops"][op])
    system = system_for_accelerator(H100, 8)
    hbm = system.hbm_tbps * 1e12 * system.memory_efficiency
    T, h, f = 8192.0, float(model.hidden), float(model.ffn)
    kv = float(model.kv_heads * model.head_dim)
    qkv = float(model.q_dim) + kv
    fwd_el = 2 * (18 - 2) * T * h + (10 - 2) * T * qkv + (5 - 3) * T * f
    bwd_el = 2 * (46 - 3) * T * h + (10 - 3) * T * qkv + (9 - 4.5) * T * f
    rkv = 2 * T * (kv + float(model.q_dim))  # forward, and as many backward
    extra = (fwd_el + bwd_el + 2 * rkv) * 2.0 / hbm * model.layers * 2  # bytes, 2 mb
    assert eager["ops"]["memory_bound"] - fused["ops"]["memory_bound"] == pytest.approx(
        extra, rel=1e-9)
    # the eager loss: bf16 logits upcast, log-softmax, NLL: 14 + 22 B per logit, not 8 + 12
    logits = 2 * T * float(model.vocab) / hbm  # per step, 2 micro-batches
    assert eager["ops"]["output_layer"] - fused["ops"]["output_layer"] == pytest.approx(
        logits * (14 + 22 - 8 - 12), rel=1e-9)


def test_eager_backward_counts_are_autograds_kernels() -> None:
    """The eager backward elements are the sums of autograd's kernels, byte by byte
    (:data:`.layer.EAGER_BWD_ELEMENTS`): RMSNorm 12 + 6 + 24 + 4 + 28 + 12 + 6 = 92 B,
    rotary 6 + 8 + 6 = 20 B, SwiGLU 6 + 6 + 6 = 18 B, i.e. 46 / 10 / 9 16-bit elements;
    a GeLU model (one kernel each way) and fused kernels keep the 1.5×; repeat_kv only
    where K/V heads are fewer than query heads."""
    from simulation.training.layer import (
        EAGER_BWD_ELEMENTS,
        eager_backward_elements,
        repeat_kv_elements,
    )

    assert EAGER_BWD_ELEMENTS == {"norm": (12 + 6 + 24 + 4 + 28 + 12 + 6) / 2,
                                  "rope": (6 + 8 + 6) / 2, "swiglu": (6 + 6 + 6) / 2}
    gelu = MODELS["gpt3-175b"]
    assert eager_backward_elements(gelu, True)[2] == eager_backward_elements(gelu, False)[2]
    assert eager_backward_elements(gelu, False) == (3.0, 3.0, 3.0)
    one = np.array([1.0])
    assert float(repeat_kv_elements(gelu, 2048 * one, one, True)[0]) == 0.0  # MHA
    l70 = MODELS["llama3-70b"]  # 64 query heads, 8 K/V heads of 128, TP 4
    assert float(repeat_kv_elements(l70, 4096 * one, 4 * one, True)[0]) == pytest.approx(
        2 * 4096 * (1024 + 8192) / 4)


def test_adam_implementation_moves_its_kernels_bytes() -> None:
    """``optimizer``: the Adam step over the card's shard moves 28 (fused), 80 (PyTorch's
    foreach AdamW) or 88 (Composer's per-parameter DecoupledAdamW) FP32 bytes per
    parameter, the sums of their kernels' passes (:data:`.core.ADAM_IMPL_BYTES`); the
    step grows by exactly the difference at HBM speed, nothing else changes; the search's
    round trip keeps the choice and an unknown one is refused."""
    from simulation.training.core import ADAM_IMPL_BYTES
    from simulation.training.errors import TrainingInputError
    from simulation.training.search import execution_at
    from simulation.training.step import batch_of

    assert ADAM_IMPL_BYTES == (28.0, 8 + 12 + 8 + 12 + 8 + 8 + 8 + 16,
                               8 + 8 + 12 + 8 + 12 + 8 + 8 + 8 + 16)
    model = MODELS["llama3-8b"]
    system = system_for_accelerator(H100, 8)
    hbm = system.hbm_tbps * 1e12 * system.memory_efficiency
    base = {**LLAMA8B, "precision": "bf16", "zero": 3}
    runs = {o: evaluate(model, system, execution_from_params({**base, "optimizer": o}, 8,
                                                             model)).values
            for o in ("fused", "foreach", "loop")}
    for o, extra in (("foreach", 80.0 - 28.0), ("loop", 88.0 - 28.0)):
        d = runs[o]["ops"]["optimizer"] - runs["fused"]["ops"]["optimizer"]
        shard = runs["fused"]["memory"]["weights"] * 2**30 / 2.0  # BF16 weights on the card
        assert d == pytest.approx(shard * extra / hbm, rel=1e-9)
        assert runs[o]["step_time_s"] - runs["fused"]["step_time_s"] == pytest.approx(d)
    ex = execution_from_params({**base, "optimizer": "loop"}, 8, model)
    assert execution_at(batch_of([ex]), 0).optimizer == "loop"
    with pytest.raises(TrainingInputError):
        execution_from_params({**base, "optimizer": "sgd"}, 8, model)
