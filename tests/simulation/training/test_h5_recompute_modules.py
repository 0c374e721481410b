"""Megatron-Core's fine-grained recomputation (``Execution.recompute_modules``), h5.

What each module re-runs and drops follows Megatron-Core (``transformer_config.py``
``recompute_modules``; ``transformer_layer.py``, ``moe/experts.py``, ``moe/moe_layer.py``,
``multi_latent_attention.py``); the rows' settings follow Megatron-Bridge's presets
(``scripts/performance/configs``, tags ``v0.2.1`` for 25.11 and ``v0.3.0`` for 26.02).
"""

from __future__ import annotations

import numpy as np
import pytest

from simulation.training import TrainingInputError, evaluate, execution_from_params
from simulation.training.core import KERNEL_GAP_S, kernel_rates
from simulation.training.execution import RECOMPUTE_MODULES, recompute_module_mask
from simulation.training.memory import saved_activation_bytes
from simulation.training.models import MODELS
from simulation.training.step import batch_of
from simulation.training.system import system_for_accelerator
from simulation.training.validation import ACCELERATORS, MODERN_RUNS

ONE = np.array([1.0])
NO_SP = np.array([False])
FLASH = np.array([True])
SEL = np.array([1])


def _mask(*names: str) -> np.ndarray:
    return np.array([recompute_module_mask("selective", names)])


def _saved(model_name: str, *names: str) -> float:
    model = MODELS[model_name]
    return float(saved_activation_bytes(model, ONE, tp=ONE, sp=NO_SP, recompute=SEL,
                                        flash=FLASH, modules=_mask(*names))[0])


def test_the_modules_are_megatron_cores() -> None:
    """``TransformerConfig.recompute_modules``' choices (those for a transformer layer);
    an empty list is its default, ``["core_attn"]``."""
    assert RECOMPUTE_MODULES == ("core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp",
                                 "moe", "shared_experts")
    assert recompute_module_mask("selective", ()) == recompute_module_mask(
        "selective", ("core_attn",)) == 1
    assert recompute_module_mask("none", ("core_attn",)) == 0


def test_an_unknown_module_is_refused_naming_the_field_and_the_choices() -> None:
    base = {"global_batch": 8, "recompute": "selective"}
    with pytest.raises(TrainingInputError) as err:
        execution_from_params({**base, "recompute_modules": ["moe_act", "attn"]}, 8)
    assert err.value.field == "recompute_modules[1]"
    assert all(m in err.value.reason for m in RECOMPUTE_MODULES)
    # one comma-separated string, as every choice list of the API and the command line
    assert execution_from_params({**base, "recompute_modules": "moe_act, layernorm"},
                                 8).recompute_modules == ("moe_act", "layernorm")
    with pytest.raises(TrainingInputError) as err:
        execution_from_params({**base, "recompute_modules": "moe_act,attn"}, 8)
    assert err.value.field == "recompute_modules[1]"
    with pytest.raises(TrainingInputError) as err:
        execution_from_params({**base, "recompute_modules": 5}, 8)
    assert err.value.field == "recompute_modules"
    # given alone, the modules mean selective recomputation
    assert execution_from_params({"global_batch": 8, "recompute_modules": ["mlp"]},
                                 8).recompute == "selective"
    with pytest.raises(TrainingInputError) as err:  # only read with selective
        execution_from_params({**base, "recompute": "full", "recompute_modules": ["mlp"]}, 8)
    assert err.value.field == "recompute_modules"


def test_the_modules_round_trip_through_json() -> None:
    ex = execution_from_params({"global_batch": 8, "recompute": "selective",
                                "recompute_modules": ["layernorm", "moe_act", "layernorm"]}, 8)
    assert ex.recompute_modules == ("layernorm", "moe_act")  # duplicates dropped
    assert ex.to_dict()["recompute_modules"] == ["layernorm", "moe_act"]
    assert execution_from_params(ex.to_dict(), 8) == ex


def test_the_default_list_is_the_attention_core() -> None:
    """Selective with no modules = selective with ``core_attn`` (Megatron-Core's default):
    the same step and memory, and the model's selective of before."""
    model = MODELS["llama3-8b"]
    system = system_for_accelerator(ACCELERATORS["h100-sxm5-80gb"], 8)
    lay = {"global_batch": 16, "recompute": "selective", "precision": "bf16"}
    a = evaluate(model, system, execution_from_params(lay, 8)).values
    b = evaluate(model, system, execution_from_params(
        {**lay, "recompute_modules": ["core_attn"]}, 8)).values
    assert a["step_time_s"] == b["step_time_s"]
    assert a["memory_gib_per_card"] == b["memory_gib_per_card"]


def test_each_module_drops_the_tensors_its_recomputation_rebuilds() -> None:
    """Bytes per token (sequence s, one micro-batch, tp 1, no SP), 16-bit: ``layernorm``
    the two norm outputs 2·2h (output-discarding checkpoint); ``moe_act`` the routed
    experts' activation output 2·k·f on the MoE layers; ``mla_up_proj`` the up-projected
    Q, K, V 2·(a·d_qk + a·(d_qk + d_v)); ``mlp`` the dense layers' fc1 and activation outputs
    (SwiGLU: 2·2f + 2f), not an MoE layer's (``transformer_layer.py``: ``if not
    self.is_moe_layer``)."""
    s = MODELS["llama3-8b"].seq_len
    h = MODELS["llama3-8b"].hidden
    assert _saved("llama3-8b", "core_attn") - _saved("llama3-8b", "core_attn", "layernorm") \
        == pytest.approx(s * 4.0 * h)
    q = MODELS["qwen3-30b-a3b"]  # every layer MoE, top 8 of 128, dropless (capacity 1)
    assert q.moe_layers == q.layers
    assert _saved("qwen3-30b-a3b", "core_attn") - _saved("qwen3-30b-a3b", "core_attn",
                                                         "moe_act") \
        == pytest.approx(q.seq_len * 2.0 * q.top_k * q.capacity_factor * q.ffn)
    d = MODELS["deepseek-v3"]
    a = d.heads
    assert _saved("deepseek-v3", "core_attn") - _saved("deepseek-v3", "core_attn",
                                                       "mla_up_proj") == pytest.approx(
        d.seq_len * 2.0 * (a * d.qk_dim + a * (d.qk_nope_dim + d.qk_rope_dim + d.v_dim)))
    dense_share = 1 - d.moe_layers / d.layers  # 3 dense layers of 61
    assert _saved("deepseek-v3", "core_attn") - _saved("deepseek-v3", "core_attn", "mlp") \
        == pytest.approx(d.seq_len * 6.0 * dense_share * d.dense_width)
    # "moe" holds the whole layer: moe_act and shared_experts add nothing to it
    assert _saved("deepseek-v3", "moe") == _saved("deepseek-v3", "moe", "moe_act",
                                                  "shared_experts")


def _layer_recompute(model_name: str, acc: str, *names: str) -> float:
    model = MODELS[model_name]
    system = system_for_accelerator(ACCELERATORS[acc], 8)
    ex = execution_from_params({"global_batch": 8, "recompute": "selective",
                                "recompute_modules": list(names), "precision": "bf16",
                                "ep": 8 if model.moe else 1}, 8, model)
    return float(evaluate(model, system, ex).values["layer"]["recompute"])


def test_the_memory_bound_modules_rerun_their_passes() -> None:
    """``layernorm`` re-runs the two fused RMSNorms (read + write T·h each, 16-bit) and
    ``moe_act`` the routed experts' fused SwiGLU (read 2f, write f per routed token), at
    the card's achievable HBM rate, one kernel launch each: closed forms."""
    model = MODELS["qwen3-30b-a3b"]
    system = system_for_accelerator(ACCELERATORS["b200-sxm-180gb"], 8)
    ex = execution_from_params({"global_batch": 8, "ep": 8, "precision": "bf16"}, 8, model)
    hbm = float(kernel_rates(model, system, batch_of([ex]))["hbm"][0])
    T, h = float(model.seq_len), float(model.hidden)
    norms = 2 * 2.0 * T * h * 2.0 / hbm + 2 * KERNEL_GAP_S
    act = 3.0 * T * model.top_k * model.capacity_factor * model.ffn * 2.0 / hbm + KERNEL_GAP_S
    acc = "b200-sxm-180gb"
    assert _layer_recompute("qwen3-30b-a3b", acc, "layernorm") == pytest.approx(norms)
    assert _layer_recompute("qwen3-30b-a3b", acc, "moe_act") == pytest.approx(act)
    assert _layer_recompute("qwen3-30b-a3b", acc, "layernorm", "moe_act") == pytest.approx(
        norms + act)
    # the whole MoE layer costs more than its activation alone (GEMMs, router, permute,
    # the dispatch and combine again)
    assert _layer_recompute("qwen3-30b-a3b", acc, "moe") > 10 * act


# ---------------------------------------------------------------- CPU activation offloading
def test_offloading_is_refused_where_megatron_core_refuses_it() -> None:
    """``transformer_config.py``: "no support for Pipeline parallelism with CPU offloading",
    "CPU offloading does not work when activation recomputation is enabled", "CPU offloading
    can be done only for layers less than num_layers"."""
    model = MODELS["llama3-70b"]
    base = {"global_batch": 64, "cpu_offload_layers": 10}
    with pytest.raises(TrainingInputError) as err:
        execution_from_params({**base, "pp": 2}, 64, model)
    assert err.value.field == "cpu_offload_layers"
    with pytest.raises(TrainingInputError) as err:
        execution_from_params({**base, "recompute": "selective"}, 64, model)
    assert err.value.field == "cpu_offload_layers"
    with pytest.raises(TrainingInputError) as err:
        execution_from_params({**base, "cpu_offload_layers": model.layers}, 64, model)
    assert err.value.field == "cpu_offload_layers"


def test_the_host_links() -> None:
    """Grace-Blackwell: 900 GB/s NVLink-C2C, bidirectional, between one Grace and two GPUs:
    225 GB/s per card and direction; HGX H100 / B200: PCIe Gen 5 x16, 64; A100: Gen 4, 32."""
    gb200 = system_for_accelerator(ACCELERATORS["gb200-186gb"], 8)
    assert gb200.host_link_gbps == 900 / 2 / 2
    assert system_for_accelerator(ACCELERATORS["b200-sxm-180gb"], 8).host_link_gbps == 64.0
    assert system_for_accelerator(ACCELERATORS["h100-sxm5-80gb"], 8).host_link_gbps == 64.0


def test_offloaded_layers_leave_hbm_and_their_copies_hide_under_one_layer() -> None:
    """N offloaded layers: N layers' saved activations fewer in HBM; each forward copy (one
    layer's bytes at the host link's rate) shows only where it outlasts the next layer's
    forward, the reload where it outlasts a layer's backward (Transformer Engine's
    ``get_cpu_offload_context``): step(N) − step(0) = m·N·(max(0, c − f) + max(0, c − b))."""
    run = next(r for r in MODERN_RUNS if r.model == "llama3-70b" and r.fsdp
               and r.accelerator == "gb200-186gb")
    model = MODELS["llama3-70b"]
    system = system_for_accelerator(ACCELERATORS["gb200-186gb"], run.gpus)
    lay = {**run.layout(), "cpu_offload_layers": 0}
    v0 = evaluate(model, system, execution_from_params(lay, run.gpus, model)).values
    v40 = evaluate(model, system, execution_from_params(
        {**lay, "cpu_offload_layers": 40}, run.gpus, model)).values
    # one layer's saved activations (micro-batch 2, tp 1, FP8 recipe: 16-bit activations)
    layer_bytes = float(saved_activation_bytes(
        model, np.array([float(run.mbs)]), tp=ONE, sp=NO_SP, recompute=np.array([0]),
        flash=FLASH)[0])
    drop = v0["memory"]["activations"] - v40["memory"]["activations"]
    assert drop == pytest.approx(40 * layer_bytes / 2**30)
    copy = layer_bytes / (system.host_link_gbps * 1e9)
    m = run.gbs // (run.gpus * run.mbs)
    f, b = v0["layer"]["forward"], v0["layer"]["backward"]
    assert f < copy < b  # the forward copy shows, the reload hides
    assert v0["exposed_comm"]["tp"] == 0.0  # tp 1: the forward is the layer's kernels
    assert v40["step_time_s"] - v0["step_time_s"] == pytest.approx(m * 40 * (copy - f),
                                                                   rel=1e-6)
    assert v40["memory_gib_per_card"] < v0["memory_gib_per_card"] - 150
