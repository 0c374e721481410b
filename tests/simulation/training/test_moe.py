"""Mixture-of-experts features: shared experts, multi-head latent attention, DeepSeek-V3."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from simulation.training import MODELS, evaluate, execution_from_params, system_for_accelerator
from simulation.training.flops import step_flops
from simulation.training.gemm import gemm_time
from simulation.training.layer import layer_kernels
from simulation.training.models import model_from_params
from simulation.training.validation import ACCELERATORS

H100 = ACCELERATORS["h100-sxm5-80gb"]
QWEN = MODELS["qwen3-30b-a3b"]
SHARED = dataclasses.replace(QWEN, shared_experts=2, shared_ffn=1024)


def test_shared_experts_add_a_dense_mlp_to_every_moe_layer() -> None:
    """DeepSeekMoE's shared experts (Dai et al. 2024, §3.2): per MoE layer 3·h·n_s·f_s
    SwiGLU weights counted in the total and in the active parameters; 2·T·3·h·n_s·f_s
    forward FLOPs for every token (3× with the backward)."""
    h, w, L = QWEN.hidden, 2 * 1024, QWEN.moe_layers
    assert SHARED.shared_width == w and QWEN.shared_width == 0
    assert SHARED.params - QWEN.params == L * 3 * h * w
    assert SHARED.active_params - QWEN.active_params == L * 3 * h * w
    seqs = 4
    extra = step_flops(SHARED, seqs)[0] - step_flops(QWEN, seqs)[0]
    assert extra == pytest.approx(3 * L * 2 * seqs * QWEN.seq_len * 3 * h * w, rel=1e-12)
    # shared_ffn 0 means the routed experts' width; parsed with per-field errors
    assert model_from_params({"base": "qwen3-30b-a3b", "shared_experts": 1}).shared_width == 768
    with pytest.raises(Exception, match="shared_experts"):
        model_from_params({"base": "qwen3-30b-a3b", "shared_experts": -1})


def test_shared_experts_are_priced_as_a_dense_gemm_pair() -> None:
    """The layer's forward GEMM time grows by exactly the up (T, 2·f_s/t, h) and down
    (T, h, f_s/t) GEMMs of one dense MLP, every token, whatever the EP degree."""
    one = np.array([1.0])
    T, tp, rate, hbm, sms = 4096.0 * one, 2.0 * one, 700e12 * one, 3.0e12, 132
    for ep in (1.0, 8.0):
        args = (T, tp, np.array([False]), np.array([True]), 2.0, rate, rate, hbm, sms)
        a = layer_kernels(QWEN, *args, ep=ep)
        b = layer_kernels(SHARED, *args, ep=ep)
        w = 2048.0
        up = gemm_time(T, 2 * w / tp, 2048.0 * one, one, 2.0, rate, hbm, sms)
        dn = gemm_time(T, 2048.0 * one, w / tp, one, 2.0, rate, hbm, sms)
        assert float(b["fwd_gemm"][0] - a["fwd_gemm"][0]) == pytest.approx(
            float(up[0] + dn[0]), rel=1e-9)
        assert float(b["fwd_mem"][0]) > float(a["fwd_mem"][0])


def test_shared_experts_weights_are_replicated_over_ep() -> None:
    """The shared experts sit with the dense weights (split by TP, not by EP): the
    per-card weight memory grows by the same bytes at ep = 1 and ep = 8."""
    system = system_for_accelerator(H100, 8)

    def weights(model: object, ep: int) -> float:
        ex = execution_from_params({"global_batch": 8, "ep": ep, "precision": "bf16"}, 8,
                                   model)  # type: ignore[arg-type]
        return float(evaluate(model, system, ex).values["memory"]["weights"])  # type: ignore[arg-type]

    d1 = weights(SHARED, 1) - weights(QWEN, 1)
    d8 = weights(SHARED, 8) - weights(QWEN, 8)
    assert d1 > 0 and d8 == pytest.approx(d1, rel=1e-9)


DSV3 = MODELS["deepseek-v3"]


def test_deepseek_v3_matches_its_published_parameter_counts() -> None:
    """DeepSeek-V3 report (arXiv 2412.19437) §4.2: 671 B total, 37 B activated per token
    (the 14 B multi-token-prediction module excluded). We count 671.03 B and 37.55 B: the
    active count includes the 0.93 B input embedding, a lookup (36.63 B without it)."""
    assert DSV3.params / 1e9 == pytest.approx(671.0, rel=0.01)
    assert DSV3.active_params / 1e9 == pytest.approx(37.0, rel=0.02)
    no_lookup = DSV3.active_params - DSV3.vocab * DSV3.hidden
    assert no_lookup / 1e9 == pytest.approx(37.0, rel=0.011)
    assert DSV3.moe_layers == 58 and DSV3.dense_width == 18432 and DSV3.shared_width == 2048


def test_mla_projections_flops_and_kv_cache_follow_the_report() -> None:
    """MLA (DeepSeek-V3 report §2.1.1, eqs. 1-11): W_DQ h×d_c', W_UQ+W_QR d_c'×a(d_n+d_R),
    W_DKV+W_KR h×(d_c+d_R), W_UK+W_UV d_c×a(d_n+d_v), W_O a·d_v×h (+ the two latent
    RMSNorm gains); attention core 2·T·s·a·(d_n + d_R + d_v) forward FLOPs; KV cache
    (d_c + d_R) = 576 elements per token and layer = 4.5·d_h (DeepSeek-V2 report, Table 1)."""
    from simulation.training.flops import layer_flops

    h, a, qr, kvr, dn, dr, dv = 7168, 128, 1536, 512, 128, 64, 128
    weights = h * qr + qr * a * (dn + dr) + h * (kvr + dr) + kvr * a * (dn + dv) + a * dv * h
    assert DSV3.attention_params == weights + qr + kvr
    assert DSV3.kv_cache_elements == 576 == 4.5 * 128
    assert MODELS["llama3-8b"].kv_cache_elements == 2 * 8 * 128
    T = 4096.0
    gemm_dense, core = layer_flops(DSV3, T)
    assert core == 2 * T * 4096 * a * (dn + dr + dv)
    assert gemm_dense == 2 * T * weights + 2 * T * 3 * h * 18432
    gemm_moe, _ = layer_flops(DSV3, T, moe=True)
    assert gemm_moe == 2 * T * weights + 2 * T * 3 * h * 2048 * (8 + 1) + 2 * T * h * 256


def test_mla_saved_activations_count_its_tensors() -> None:
    """Per token, TP t, SP, flash, no recompute: the h-wide boundary tensors ÷t, the
    up-projected Q, K (a·d_qk each), V and the output (a·d_v each) ÷t, the latents'
    norm inputs and outputs (2·(d_c' + d_c)) and the rotary key d_R replicated, the MLP
    tensors of the per-token width, and flash's FP32 log-sum-exp (4·a/t): bytes at 2 each."""
    from simulation.training.memory import saved_activation_bytes

    one, t = np.array([1.0]), 8.0
    x = saved_activation_bytes(DSV3, one, tp=t * one, sp=np.array([True]),
                               recompute=np.array([0]), flash=np.array([True]))
    h, a, f = 7168, 128, DSV3.mlp_width_per_token()
    per_token = (8 * h / t + 2 * (2 * a * 192 + 2 * a * 128) / t + 4 * (1536 + 512) + 2 * 64
                 + 2 * (2 + 1) * f / t + 4 * a / t)
    assert float(x[0]) == pytest.approx(4096 * per_token, rel=1e-12)


def _ep_run(model: object, **extra: object) -> dict[str, object]:
    system = system_for_accelerator(H100, 8)
    ex = execution_from_params({"global_batch": 16, "ep": 8, "precision": "bf16", **extra}, 8,
                               model)  # type: ignore[arg-type]
    return evaluate(model, system, ex).values  # type: ignore[arg-type,no-any-return]


def test_routing_skew_makes_the_slowest_rank_the_steps() -> None:
    """Dropless routing with a max/mean rank load of 1.5: the slowest EP rank's grouped
    GEMMs run 1.5× the tokens of the balanced one, and its all-to-all sends 1.5× the
    bytes (the whole send buffer T·k·1.5·2h, collectives.costs.ring_alltoall); a skew
    under the capacity factor changes nothing (the padding already carries it)."""
    from simulation.training.comm import CommModel

    skewed = dataclasses.replace(QWEN, routing_skew=1.5)
    assert skewed.rank_load == 1.5 and dataclasses.replace(
        QWEN, capacity_factor=2.0, routing_skew=1.5).rank_load == 2.0
    one = np.array([1.0])
    T, rate, hbm, sms = 4096.0 * one, 700e12 * one, 3.0e12, 132
    args = (T, one, np.array([False]), np.array([True]), 2.0, rate, rate, hbm, sms)
    base, skew = layer_kernels(QWEN, *args, ep=8.0), layer_kernels(skewed, *args, ep=8.0)
    E, k, h, f = 128.0, 8.0, 2048.0, 768.0

    def experts(load: float) -> float:
        tok = T * k * load * 8 / E
        up = gemm_time(tok, 2 * f * one, h * one, E / 8 * one, 2.0, rate, hbm, sms)
        dn = gemm_time(tok, h * one, f * one, E / 8 * one, 2.0, rate, hbm, sms)
        return float(up[0] + dn[0])

    assert float(skew["fwd_gemm"][0] - base["fwd_gemm"][0]) == pytest.approx(
        experts(1.5) - experts(1.0), rel=1e-9)
    assert experts(1.5) > experts(1.0)
    system = system_for_accelerator(H100, 8)
    t = CommModel(system).time("alltoall", np.array([8]), np.array([1]),
                               np.array([4096.0 * 8 * 1.5 * 2048 * 2]))
    r = _ep_run(skewed)
    ep = r["exposed_comm"]["ep"]  # type: ignore[index]
    m = r["micro_batches"]
    assert ep == pytest.approx(4 * float(t[0]) * QWEN.layers * m, rel=1e-9)  # type: ignore[operator]


def test_ep_overlap_hides_the_all_to_all_behind_the_other_micro_batch() -> None:
    """DualPipe / DeepEP overlap (DeepSeek-V3 report §3.2.1): per MoE layer the exposed
    EP time is max(4·a2a − (forward + backward compute), 0); off with one micro-batch
    per pipeline (nothing to pair); on 8 NVLink cards the a2a of Qwen3-30B-A3B is shorter
    than its layer's compute, so all of it hides and the step gets faster. The hidden
    all-to-all holds ``comm_sms`` = 20 of the H100's 132 SMs (DeepSeek-V3 §3.2.2: 20 SMs
    run the dispatch and combine), so the compute under it takes 132/112 as long: the EP
    cost left is the hidden time × 20/112. Two micro-batches without a pipeline: the first
    one's forward and the last one's backward run alone (Megatron-Core's
    ``combined_1f1b_schedule_for_no_pipelining``), so u = 1/2 of the all-to-alls has no
    partner (:func:`simulation.training.core.ep_unpaired_share`)."""
    off, on = _ep_run(QWEN), _ep_run(QWEN, ep_overlap=True)
    ep_off, ep_on = off["exposed_comm"]["ep"], on["exposed_comm"]["ep"]  # type: ignore[index]
    lay = off["layer"]  # type: ignore[index]
    a2a = ep_off / (off["micro_batches"] * QWEN.layers)  # type: ignore[operator]
    compute = lay["forward"] + lay["backward"]  # type: ignore[index]
    assert ep_off > 0 and a2a < compute
    assert off["micro_batches"] == 2
    u = 0.5
    assert ep_on == pytest.approx(ep_off * (u + (1 - u) * 20 / (132 - 20)),  # type: ignore[operator]
                                  rel=1e-9)
    # one sequence per micro-batch: after the dispatcher's synchronisation the layer is
    # host-bound (its 96 expert GEMMs at dispatch.HOST_EXPERT_GEMM_S), the segment takes the
    # host's time either way, so hiding the all-to-all gains nothing; with two sequences the
    # GPU is the bound and the overlap makes the step faster
    assert off["layer_ops"] and any(o["op"].startswith("host-bound")  # type: ignore[attr-defined]
                                    for o in off["layer_ops"])  # type: ignore[attr-defined]
    assert on["step_time_s"] == pytest.approx(off["step_time_s"], rel=1e-12)  # type: ignore[arg-type]
    off2, on2 = (_ep_run(QWEN, global_batch=32, micro_batch=2, **x)
                 for x in ({}, {"ep_overlap": True}))
    assert not any(o["op"].startswith("host-bound")  # type: ignore[attr-defined]
                   for o in off2["layer_ops"])  # type: ignore[attr-defined]
    assert on2["step_time_s"] < off2["step_time_s"]  # type: ignore[operator]
    single = _ep_run(QWEN, ep_overlap=True, global_batch=8)
    assert single["exposed_comm"]["ep"] > 0  # type: ignore[index]


def test_expert_all_to_all_is_priced_on_nvlink_inside_the_domain_and_nics_across() -> None:
    """EP 16 on 16 H100s: inside one 16-card NVLink domain the all-to-all runs on NVLink
    (900 GB/s bidirectional a card); with 8-card domains part of every rank's buffer
    crosses its 400G NIC, so the exposed EP time grows — the same layout, only
    ``nvlink_domain_cards`` changed (``system_for_accelerator``)."""
    figures16 = {**H100, "nvlink_domain_cards": 16}
    out = {}
    for name, figs in (("nvlink", figures16), ("nics", H100)):
        system = system_for_accelerator(figs, 16)
        ex = execution_from_params({"global_batch": 32, "ep": 16, "precision": "bf16"}, 16,
                                   QWEN)
        out[name] = float(evaluate(QWEN, system, ex).values["exposed_comm"]["ep"])
    assert system.scale_up_domain == 8
    assert out["nics"] > 2 * out["nvlink"] > 0
