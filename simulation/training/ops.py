"""Every op of one layer, forward and backward, with its FLOPs, bytes and what bounds it.

:func:`layer_ops` lists the ops of one transformer layer of the critical stage for
one micro-batch on one card — the same kernels :func:`~simulation.training.layer.
layer_kernels` sums for the step model (``tests/simulation/training`` checks the sums
agree), one row each, so a user sees where a layer's time goes:

* GEMMs (QKV, projection, MLP up / gate+up, MLP down; the router and the grouped
  expert GEMMs on MoE layers), forward and their data- and weight-gradient GEMMs
  backward: FLOPs 2·m·n·k·batch, bytes ``elem``·(m·k + k·n + m·n)·batch, time
  :func:`~simulation.training.gemm.gemm_time` (tile and wave quantization at the
  dtype's attainable rate, or the HBM traffic if more); ``bound`` ``compute`` or
  ``memory`` by which of the two is longer;
* the attention core (flash: the causal half of 4·s²·d per head at the measured
  attention rate, backward 2.5×; not flash: the score and context GEMMs, softmax and
  dropout);
* the memory-bound ops (norms, bias-dropout-residual adds, activation, RoPE, MoE token
  permute / unpermute and router softmax) at HBM speed, backward 1.5× their bytes;
  with the all-to-all dispatcher the expert sort + unsort
  (:func:`~simulation.training.layer.moe_sort_elements`), backward 1× its bytes; with
  expert biases Megatron-Core's eager bias of the experts' down projection
  (:func:`~simulation.training.layer.expert_bias_elements`);
* the FP8 / FP4 casts of :mod:`.recipes`;
* the launch floor: the back-to-back kernel gaps of the layer (:data:`.core.KERNEL_GAP_S`).

MoE models whose every ``moe_every``-th layer is a mixture list the expert ops
weighted by that share, like the step model's average layer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .core import (
    CAST_RECIPES,
    KERNEL_GAP_S,
    KERNELS_FWD,
    PARAM_TENSORS,
    Batch,
    kernel_rates,
)
from .gemm import gemm_time
from .layer import (
    BWD_TRAFFIC,
    CAST_TENSORS,
    cast_elements,
    eager_backward_elements,
    eager_elements,
    expert_bias_elements,
    moe_sort_elements,
    repeat_kv_elements,
)
from .models import ModelSpec
from .recipes import CAST_KERNELS, cast_bytes
from .system import SystemSpec

__all__ = ["layer_ops"]

F64 = npt.NDArray[np.float64]


def layer_ops(model: ModelSpec, system: SystemSpec, b: Batch, i: int = 0,
              host: tuple[float, float] = (0.0, 0.0)) -> list[dict[str, Any]]:
    """The ops of one layer for configuration ``i`` of ``b`` (module docstring).

    ``host``: the seconds the layer's forward and backward wait for the host beyond
    their GPU time (:mod:`.dispatch`, ``layer_host_f`` / ``layer_host_b`` of the step
    model), listed as launch-bound rows.

    Each row: ``op``, ``phase`` (``forward`` / ``backward``), ``kind`` (``gemm``,
    ``attention``, ``memory``, ``cast``, ``launch``), ``dtype``, ``flops``, ``bytes``,
    ``time_s``, ``bound`` (``compute``, ``memory`` or ``launch``).
    """
    one_b = b.take(np.array([i]))
    rates = kernel_rates(model, system, one_b)
    hbm = float(rates["hbm"][0])
    T = float(rates["tokens"][0])
    tp, cp, ep = float(one_b.tp[0]), float(one_b.cp[0]), float(one_b.ep[0])
    sp, flash = bool(one_b.sp[0]), bool(one_b.flash[0])
    elem = float(rates["elem"][0])
    act = 2.0 * float(rates["act_scale"][0])
    g_rate = rates["peak_gemm"]
    c_rate = rates["peak_core"]
    f_rate = float(rates["peak_flash"][0])
    fb_rate = float(rates["peak_flash_bwd"][0])
    sms, st = system.sm_count, system.gemm_store_overlap
    dtype = ("fp8" if elem == 1.0 else "fp4" if elem == 0.5 else
             "fp32" if elem == 4.0 else "bf16")

    s, h, a = float(model.seq_len), float(model.hidden), float(model.heads)
    d, kv, f = float(model.head_dim), float(model.kv_heads * model.head_dim), float(model.ffn)
    q = a * d
    bseq = T * cp / s
    sq = s / cp
    heads = bseq * a / tp
    n_up = 2.0 if model.activation == "swiglu" else 1.0
    r = 1.0 / tp if sp else 1.0
    share = model.moe_layers / model.layers if model.moe else 0.0
    kc = model.top_k * model.capacity_factor if model.moe else 1.0
    rows: list[dict[str, Any]] = []

    def add(op: str, phase: str, kind: str, dt: str, flops: float, nbytes: float,
            time_s: float, bound: str, weight: float = 1.0) -> None:
        if weight <= 0.0:
            return
        rows.append({"op": op, "phase": phase, "kind": kind, "dtype": dt,
                     "flops": flops * weight, "bytes": nbytes * weight,
                     "time_s": time_s * weight, "bound": bound})

    def gemm(op: str, m: float, n: float, k: float, batch: float, e: float, rate: F64,
             dt: str, weight: float = 1.0, kind: str = "gemm") -> None:
        for phase, (mm, nn, kk) in (("forward", (m, n, k)),
                                    ("backward", (m, k, n)), ("backward", (k, n, m))):
            t = float(gemm_time(np.array([mm]), np.array([nn]), np.array([kk]),
                                np.array([batch]), e, rate, hbm, sms, store_overlap=st)[0])
            fl = 2.0 * mm * nn * kk * batch
            by = e * batch * (mm * kk + kk * nn + mm * nn)
            name = op if (mm, nn, kk) == (m, n, k) else (
                f"{op} (data gradient)" if (mm, nn, kk) == (m, k, n) else
                f"{op} (weight gradient)")
            add(name, phase, kind, dt, fl, by, t,
                "memory" if by / hbm >= t * 0.999 else "compute", weight)

    def mem(op: str, elements: float, weight: float = 1.0,
            backward: float | None = None) -> None:
        nbytes = elements * act
        b_bytes = BWD_TRAFFIC * nbytes if backward is None else backward * act
        add(op, "forward", "memory", "bf16", 0.0, nbytes, nbytes / hbm, "memory", weight)
        add(f"{op} (backward)", "backward", "memory", "bf16", 0.0, b_bytes, b_bytes / hbm,
            "memory", weight)

    dropout = 0.5 if model.dropout else 0.0
    eager = bool(one_b.eager[0])
    norm_el, rope_el, act_el = (float(x) for x in eager_elements(model, eager))
    norm_b, rope_b, act_b = (float(x) for x in eager_backward_elements(model, eager))
    mem("norm (attention)", norm_el * T * h * r, backward=norm_b * T * h * r)
    dq, dv = float(model.qk_dim), float(model.v_dim)
    projections = model.attention_projections()
    for name, n_, k_, split in projections[:-1]:
        gemm(name, T, n_ / tp if split == "col" else float(n_), float(k_), 1.0, elem, g_rate,
             dtype)
    if model.latent_width:
        mem("norm (MLA latents)", norm_el * T * model.latent_width,
            backward=norm_b * T * model.latent_width)
    if model.mla and not model.learned_positions:
        rw = T * (a * model.qk_rope_dim / tp + model.qk_rope_dim)
        mem("rotary embedding", rope_el * rw, backward=rope_b * rw)
    elif not model.learned_positions:
        mem("rotary embedding", rope_el * T * (q + kv) / tp, backward=rope_b * T * (q + kv) / tp)
    rkv = float(repeat_kv_elements(model, np.array([T]), tp, eager)[0])
    if rkv:
        mem("repeat K/V heads (eager GQA)", rkv, backward=rkv)
    if flash:
        fl = sq * s * (dq + dv) * heads
        io = 2.0 * heads * sq * 2 * (dq + dv)  # read q, k, v, write o (16-bit)
        add("flash attention", "forward", "attention", "bf16", fl, io, fl / f_rate, "compute")
        add("flash attention (backward)", "backward", "attention", "bf16", 2.5 * fl, 2 * io,
            2.5 * fl / fb_rate, "compute")
    else:
        gemm("attention scores QKᵀ", sq, s, dq, heads, 2.0, c_rate, "bf16", kind="attention")
        soft = (2 + (2 + dropout if model.dropout else 0.0)) * heads * sq * s
        mem("softmax + dropout", soft)
        gemm("attention context PV", sq, dv, s, heads, 2.0, c_rate, "bf16", kind="attention")
    _, n_, k_, _ = projections[-1]
    gemm("projection", T, float(n_), k_ / tp, 1.0, elem, g_rate, dtype)
    mem("bias-dropout-residual (attention)", (3 + dropout) * T * h * r)
    mem("norm (MLP)", norm_el * T * h * r, backward=norm_b * T * h * r)
    if share < 1.0:
        fd = float(model.dense_width)
        gemm("MLP up" + (" (gate + up)" if n_up == 2 else ""), T, n_up * fd / tp, h, 1.0,
             elem, g_rate, dtype, 1.0 - share)
        mem("activation", act_el * T * fd / tp, 1.0 - share, backward=act_b * T * fd / tp)
        gemm("MLP down", T, h, fd / tp, 1.0, elem, g_rate, dtype, 1.0 - share)
    if share > 0.0:
        E = float(model.experts)
        rt = float(g_rate[0])
        router = 2 * T * h * E
        add("router", "forward", "gemm", dtype, router, 0.0, router / rt, "compute", share)
        add("router (backward)", "backward", "gemm", dtype, 2 * router, 0.0, 2 * router / rt,
            "compute", share)
        mem("router softmax / top-k", 2 * 2 * T * E, share)
        mem("token permute + unpermute", 2 * T * h * r * (1 + kc), share)
        et = float(one_b.etp[0])  # expert TP (Megatron-Core's default: tp)
        tok = T * model.top_k * model.rank_load * ep * (et / tp) / E  # the slowest EP rank's
        if bool(one_b.moe_sort[0]):  # the all-to-all dispatcher's sorts (layer.MOE_SORT_PASSES)
            sb = act * float(moe_sort_elements(model, np.array([T]), np.array([tp]), et,
                                               ep)[0])
            for phase, sfx in (("forward", ""), ("backward", " (backward)")):
                add("expert sort + unsort" + sfx, phase, "memory", "bf16", 0.0, sb, sb / hbm,
                    "memory")
        gemm("experts up (grouped)", tok, n_up * f / et, h, E / ep, elem, g_rate, dtype, share)
        mem("experts activation", act_el * T * kc * f / tp, share,
            backward=act_b * T * kc * f / tp)
        gemm("experts down (grouped)", tok, h, f / et, E / ep, elem, g_rate, dtype, share)
        xb_f, xb_b = (float(x[0]) for x in expert_bias_elements(
            model, np.array([T]), np.array([tp]), et, ep))
        if xb_f:  # Megatron-Core's eager per-expert bias (layer.EXPERT_BIAS_ELEMENTS)
            for phase, sfx, el in (("forward", "", xb_f), ("backward", " (backward)", xb_b)):
                add("experts down bias (eager, per expert)" + sfx, phase, "memory", "bf16",
                    0.0, el * act, el * act / hbm, "memory")
        fs = float(model.shared_width)
        if fs:
            gemm("shared experts up", T, n_up * fs / tp, h, 1.0, elem, g_rate, dtype, share)
            mem("shared experts activation", act_el * T * fs / tp, share,
                backward=act_b * T * fs / tp)
            gemm("shared experts down", T, h, fs / tp, 1.0, elem, g_rate, dtype, share)
    mem("bias-dropout-residual (MLP)", (3 + dropout) * T * h * r)

    recipe = CAST_RECIPES[int(one_b.recipe[0])]
    if cast_bytes(recipe) > 0:
        c_f, c_b = cast_elements(model, np.array([T]), np.array([tp]), np.array([sp]))
        for phase, el in (("forward", float(c_f[0])), ("backward", float(c_b[0]))):
            nbytes = el * cast_bytes(recipe)
            add(f"{'FP4' if elem == 0.5 else 'FP8'} casts ({phase})", phase, "cast", dtype,
                0.0, nbytes, nbytes / hbm, "memory")

    k_fwd = KERNELS_FWD - 4.0 if flash else KERNELS_FWD
    k_cast = CAST_TENSORS * CAST_KERNELS.get(recipe, 0.0)
    gaps_f = (k_fwd + k_cast) * KERNEL_GAP_S
    gaps_b = (2.0 * k_fwd + k_cast + (0.0 if one_b.grad_fusion[0] else PARAM_TENSORS)) \
        * KERNEL_GAP_S
    add("kernel launch gaps", "forward", "launch", "-", 0.0, 0.0, gaps_f, "launch")
    add("kernel launch gaps (backward)", "backward", "launch", "-", 0.0, 0.0, gaps_b, "launch")
    for phase, t in zip(("forward", "backward"), host, strict=True):
        if t > 0.0:
            add("host-bound MoE dispatch" + (" (backward)" if phase == "backward" else ""),
                phase, "launch", "-", 0.0, 0.0, t, "launch")
    return rows
