"""The training kinds: one step of a parallel training configuration, and the search for the best.

``training`` prices one configuration (``simulation.training.evaluate``): step
time broken down by part, memory per card against the HBM, MFU/HFU, tokens/s,
energy per step and per token. ``training_search`` enumerates every valid
configuration for a model, a number of cards and a global batch
(``simulation.training.search``) and returns the ranked best, the count of
configurations rejected by reason, and the Pareto front of time against energy.

The hardware is either a catalogue accelerator (``accelerator``: a slug of
``GET /api/accelerators/`` — a hypothetical system of 8-card NVLink servers, one
NIC per card, ``system_for_accelerator``) or the cluster's own
(the run's cluster, or ``cluster`` by name in the parameters:
:func:`twin.scenarios.hardware.cluster_hardware` reads its accelerator, its
scale-up domain — a 512-card torus or an 8-card NVLink server — its NIC Gb/s per
card and technology, servers' static power and PUE). Everything the library
refuses (``TrainingInputError``: unknown model, precision or key, tp not
dividing the heads, batches that do not divide) is a 400 on
``params.<field>`` in ``prepare``, before anything is queued; so is a model
whose states cannot fit on the cards however they are split.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields as dataclass_fields
from typing import Any

from simulation.training import (
    MODELS,
    Execution,
    ModelSpec,
    SystemSpec,
    TrainingInputError,
    evaluate,
    execution_from_params,
    fits_anywhere,
    model_from_params,
    search,
    system_for_accelerator,
)
from simulation.training.dispatch import MOE_DISPATCHERS
from simulation.training.execution import (
    EP_OVERLAP_SCHEDULES,
    MAX_SCALE_UP_DOMAIN,
    OPTIMIZERS,
    RECOMPUTE,
    RECOMPUTE_MODULES,
    SCHEDULES,
)
from simulation.training.recipes import FP8_RECIPES
from simulation.training.search import OBJECTIVES as OBJECTIVE_KEYS
from simulation.training.search import (
    SEARCH_LIMITS,
    PartialSearch,
    SearchResult,
    enumerate_configs,
    merge_search,
    search_blocks,
    search_part,
)
from simulation.training.system import PRECISIONS, with_scale_up_domain
from twin.scenarios.hardware import ClusterHardware, accelerator_figures, cluster_hardware
from twin.scenarios.inputs import ConversionError
from twin.scenarios.kinds.base import (
    FieldSpec,
    Progress,
    ScenarioInputError,
    ScenarioKind,
    field_default,
    fmt,
    jsonable,
    register,
)

__all__ = ["LIMITS", "OBJECTIVES", "PART_CONFIGS", "TrainingKind", "TrainingSearchKind",
           "execution_fields"]

OBJECTIVES = tuple(OBJECTIVE_KEYS)
LIMITS: dict[str, tuple[str, Any]] = {
    # key of the search's limits → (what it is, the values allowed)
    "tp": ("list", (1, None)), "pp": ("list", (1, None)), "micro_batch": ("list", (1, None)),
    "vpp": ("list", (1, None)), "ep": ("list", (1, None)), "cp": ("list", (1, None)),
    "zero": ("list", (0, 3)), "etp": ("list", (0, None)),
    "recompute": ("list", RECOMPUTE), "precision": ("list", PRECISIONS),
    "sequence_parallel": ("list", (False, True)), "overlap": ("list", (False, True)),
    "max_cards": ("integer", (1, None)), "compression": ("number", (1.0, 1e4)),
    "fp8_recipe": ("list", FP8_RECIPES), "nvlink_domain": ("list", (1, MAX_SCALE_UP_DOMAIN)),
}
"""The values each of the search's ``limits`` (``SEARCH_LIMITS``) takes: lists of
the values to try per dimension, the most cards, a compression ratio."""
assert set(LIMITS) == set(SEARCH_LIMITS), "the search's limits changed: describe them here"
MAX_TOP = 100
MAX_SEARCH_BATCH = 1 << 20
"""Largest global batch a search takes: it enumerates the batch's divisors one by one
(a billion-sequence batch would hold a worker for minutes)."""
PART_CONFIGS = 100_000
"""Fewest configurations a part of a split search prices: ~0.5 s at the search's
~200k configurations/s, against a part's fixed cost of ~0.1 s (a task, a row, the
enumeration of its blocks, its candidates priced again in the merge); a smaller
search runs whole (``docs/benchmarks.md`` "sweeps")."""

# ------------------------------------------------------------------ the form
HARDWARE_FIELDS = (
    FieldSpec("model", "choice", "Model", "A model of the catalogue (the API also takes an "
              "object of its shape: layers, hidden, heads, kv_heads, ffn, activation, seq_len, "
              "vocab, experts, top_k …).", required=True, choices=tuple(MODELS)),
    FieldSpec("accelerator", "string", "Accelerator", "A catalogue slug (GET /api/accelerators/, "
              "e.g. h100-sxm5-80gb): a hypothetical system of 8-card NVLink servers with one "
              "400G NIC per card. Empty: the cluster's own hardware."),
    FieldSpec("cluster", "string", "Cluster (name)", "A cluster of the inventory by name, for "
              "scripts; runs on a cluster already use that cluster's hardware.", advanced=True),
    FieldSpec("cards", "integer", "Cards", "Cards of the run (empty: every card of the "
              "cluster; required with an accelerator).", min=1),
)

_EXECUTION_TEXT: dict[str, tuple[str, str]] = {
    "tp": ("Tensor parallel (TP)", "Cards splitting each layer; inside one scale-up domain."),
    "pp": ("Pipeline stages (PP)", "Stages the layers are split into."),
    "dp": ("Data parallel (DP)", "Replicas (empty: cards / (TP × PP))."),
    "global_batch": ("Global batch (sequences)", "Sequences per optimizer step."),
    "micro_batch": ("Micro-batch (sequences)", "Sequences per pipeline micro-batch."),
    "ep": ("Expert parallel (EP)", "Cards sharing the experts of an MoE layer (divides DP)."),
    "vpp": ("Virtual stages per card", "Interleaved 1F1B (needs PP > 1)."),
    "sequence_parallel": ("Sequence parallel", "Split norms and dropout along the sequence "
                          "inside the TP group."),
    "recompute": ("Activation recomputation",
                  "none, selective (attention), full or op (torchtitan's op-level SAC)."),
    "zero": ("ZeRO stage", "1: optimizer states sharded, 2: + gradients, 3: + weights."),
    "distributed_optimizer": ("Distributed optimizer", "Megatron's = ZeRO 1."),
    "precision": ("Precision", "fp32, bf16/fp16 (mixed, loss scaling), fp8 or fp4 "
                  "(NVFP4, Blackwell)."),
    "compression": ("Gradient compression", "DP traffic divided by this (4 = 4:1)."),
    "overlap_dp": ("Overlap DP communication", "Gradient reduction behind the backward pass."),
    "overlap_tp": ("Overlap TP communication", "TP collectives behind the GEMMs."),
    "overlap_param_gather": ("Overlap parameter all-gather", "With the distributed optimizer: "
                             "the step's parameter all-gather behind the first forward "
                             "(off: synchronous after the optimizer step)."),
    "overlap_pp": ("Overlap PP sends", "Stage-to-stage sends behind compute."),
    "flash_attention": ("Flash attention", "No s² attention scores kept."),
    "schedule": ("Pipeline schedule", "1F1B or GPipe."),
    "clock": ("Clock (fraction)", "Fixed clock as a fraction of the maximum (DVFS)."),
    "power_cap_w": ("Power cap (W per card)", "Empty: no cap."),
    "fused_elementwise": ("Fused element-wise kernels", "Norms, rotary and the activation as "
                          "fused kernels (off: eager PyTorch, one memory pass per op)."),
    "fp8_recipe": ("FP8 scaling recipe", "delayed or current per-tensor scaling, block "
                   "(DeepSeek-V3's 1×128 / 128×128) or mx (MXFP8, Blackwell); fp4 is NVFP4."),
    "moe_dispatcher": ("MoE token dispatcher", "alltoall: Megatron-Core's, which waits on the "
                       "host for the tokens per expert once per MoE layer (its kernels then "
                       "launch-bound where the host is slower) and which sorts the received "
                       "tokens by local expert; flex: DeepEP / HybridEP, the same wait, no "
                       "sort; device: sizes stay on the GPU (CUDA-graphed MoE)."),
    "hybridep_sms": ("HybridEP SMs", "0: the model's all-to-all; 16 or 32: the EP dispatch "
                     "and combine are HybridEP's kernels on that many SMs (Megatron-Core's "
                     "flex dispatcher, hybridep backend): each token sent once per "
                     "destination rank, at HybridEP's measured GB200 / B200 bandwidth inside "
                     "an NVLink domain; elsewhere the model's all-to-all price."),
    "optimizer": ("Adam implementation", "fused: one kernel (Megatron / Apex FusedAdam); "
                  "foreach: PyTorch's multi-tensor AdamW (torchtitan's default); loop: "
                  "per-parameter ops (Composer's DecoupledAdamW, llm-foundry)."),
    "recompute_modules": ("Recomputed modules", "With selective recomputation, Megatron-Core's "
                          "recompute_modules: core_attn (the default when empty), moe_act, "
                          "layernorm, mla_up_proj, mlp, moe, shared_experts."),
    "cpu_offload_layers": ("CPU-offloaded layers", "Layers whose saved activations wait in "
                           "host memory (Megatron-Core's cpu_offloading_num_layers): out of HBM, "
                           "copied over the host link; no PP, no recomputation."),
    "etp": ("Expert tensor parallel (ETP)", "Cards splitting each expert (empty or 0: TP); "
            "EP × ETP divides TP × CP × DP, so ETP 1 lets EP span the TP ranks."),
    "ep_overlap": ("Overlap EP all-to-alls", "Dispatch and combine under the paired "
                   "micro-batch's compute (Megatron-Core's overlap_moe_expert_parallel_comm, "
                   "DeepSeek-V3's DualPipe); needs 2 micro-batches or more."),
    "ep_overlap_schedule": ("EP overlap schedule", "megatron: three phases, each all-to-all "
                            "hidden only under its phase's compute; dualpipe: under the whole "
                            "paired chunk (DeepSeek-V3's tuned split)."),
    "cuda_max_connections": ("CUDA device max connections", "The run's "
                             "CUDA_DEVICE_MAX_CONNECTIONS (1-32): with 1, kernels of every "
                             "stream start in launch order, so the EP overlap hides less."),
    "nvlink_domain": ("NVLink domain (cards)", "Cards per scale-up domain for this run (empty "
                      "or 0: the system's), e.g. 8 or 72 on a GB200 rack: a multiple or divisor "
                      "of the cards per server; groups wider than it cross the network."),
}
_CHOICES: dict[str, tuple[str, ...]] = {"recompute": RECOMPUTE, "precision": PRECISIONS,
                                        "schedule": SCHEDULES, "fp8_recipe": FP8_RECIPES,
                                        "moe_dispatcher": MOE_DISPATCHERS,
                                        "ep_overlap_schedule": EP_OVERLAP_SCHEDULES,
                                        "optimizer": OPTIMIZERS}
_CHOICE_LISTS: dict[str, tuple[str, ...]] = {"recompute_modules": RECOMPUTE_MODULES}
"""Execution fields that take several of their choices (a list)."""
_BOUNDS: dict[str, tuple[float | None, float | None]] = {
    "tp": (1, 4096), "pp": (1, 4096), "dp": (1, None), "global_batch": (1, None),
    "micro_batch": (1, None), "ep": (1, 4096), "vpp": (1, 1024), "zero": (0, 3),
    "compression": (1, 10_000), "clock": (0.1, 1), "etp": (0, 4096),
    "nvlink_domain": (0, MAX_SCALE_UP_DOMAIN), "cuda_max_connections": (1, 32),
    "cpu_offload_layers": (0, None),
    "hybridep_sms": (0, 32),
}


def _field_type(name: str, annotation: Any) -> str:
    if name in _CHOICE_LISTS:
        return "choice_list"
    if name in _CHOICES:
        return "choice"
    text = str(annotation)
    for python, form in (("bool", "boolean"), ("int", "integer"), ("float", "number")):
        if text.startswith(python):
            return form
    return "string"


def execution_fields() -> tuple[FieldSpec, ...]:
    """The form of an :class:`Execution`: one field per dataclass field, in its order
    (plus ``distributed_optimizer``, which the library takes as ZeRO ≥ 1), with the
    library's defaults, choices and bounds."""
    out = []
    for f in dataclass_fields(Execution):
        label, text = _EXECUTION_TEXT.get(f.name, (f.name.replace("_", " "), ""))
        low, high = _BOUNDS.get(f.name, (None, None))
        default = None if f.name == "dp" else jsonable(field_default(Execution, f.name))
        out.append(FieldSpec(f.name, _field_type(f.name, f.type), label, text,
                             required=f.name == "global_batch",
                             default=None if f.name == "global_batch" else default,
                             choices=_CHOICES.get(f.name, _CHOICE_LISTS.get(f.name)),
                             min=low, max=high))
        if f.name == "zero":
            label, text = _EXECUTION_TEXT["distributed_optimizer"]
            out.append(FieldSpec("distributed_optimizer", "boolean", label, text, default=False))
    return tuple(out)


# ------------------------------------------------------------ the hardware
def _system(hw: ClusterHardware, cards: int) -> SystemSpec:
    """The library's system of ``cards`` cards of the cluster ``hw``."""
    torus = hw.scale_up_kind in ("torus", "ring")
    return system_for_accelerator(
        hw.accelerator, cards,
        cards_per_server=hw.cards_per_server, scale_up_domain=hw.scale_up_domain,
        scale_up_gbps=hw.scale_up_gbps, scale_up_technology=hw.scale_up_technology,
        scale_up_topology="torus" if torus else "switch",
        scale_up_dims=tuple(hw.scale_up_dims) if torus else (),
        scale_out_gbps=hw.scale_out_gbps, scale_out_technology=hw.scale_out_technology,
        server_static_w=hw.server_static_w, network_w_per_card=hw.network_w_per_card,
        pue=hw.pue)


def _named_cluster(value: Any, run_cluster: Any | None) -> Any:
    """The cluster ``params.cluster`` names (by name or id), checked against the run's."""
    from twin.hardware.models import Cluster

    field = "params.cluster"
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        raise ScenarioInputError.one(field, f"a cluster name, got {value!r}")
    found = Cluster.objects.filter(name=str(value)).first()
    if found is None and (isinstance(value, int) or str(value).isdigit()):
        found = Cluster.objects.filter(pk=int(value)).first()
    if found is None:
        names = list(Cluster.objects.order_by("name").values_list("name", flat=True)[:10])
        known = f" (known: {', '.join(names)})" if names else " (there are no clusters yet)"
        raise ScenarioInputError.one(field, f"no cluster named {value!r}{known}")
    if run_cluster is not None and run_cluster.pk != found.pk:
        raise ScenarioInputError.one(field, (
            f"the run is on cluster {run_cluster.name!r} but params name {found.name!r}; "
            f"give one of them"))
    return found


def _cards(value: Any, field: FieldSpec) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ScenarioInputError.one("params.cards", f"a whole number of cards ≥ 1, got {value!r}")
    return value


def _wrap(exc: TrainingInputError) -> ScenarioInputError:
    field = exc.field if exc.field.startswith("params") else f"params.{exc.field}"
    return ScenarioInputError.one(field, exc.reason)


def hardware_inputs(mine: Mapping[str, Any], cluster: Any | None,
                    cards_field: FieldSpec) -> tuple[ModelSpec, SystemSpec, dict[str, Any]]:
    """(model, system, what the system was built from) — shared by both kinds."""
    try:
        model = model_from_params(mine.get("model"), "params.model.") if "model" in mine \
            else None
    except TrainingInputError as exc:
        raise _wrap(exc) from exc
    if model is None:
        raise ScenarioInputError.one("params.model", "required: a catalogue slug "
                                                     f"({', '.join(MODELS)}) or a shape")
    if "cluster" in mine:
        cluster = _named_cluster(mine["cluster"], cluster)
    cards = _cards(mine.get("cards"), cards_field)
    slug = mine.get("accelerator")
    if slug not in (None, ""):
        if not isinstance(slug, str):
            raise ScenarioInputError.one("params.accelerator", f"a catalogue slug, got {slug!r}")
        figures = accelerator_figures(slug)
        if figures is None:
            from twin.hardware.models import AcceleratorType

            known = ", ".join(AcceleratorType.objects.order_by("slug")
                              .values_list("slug", flat=True))
            raise ScenarioInputError.one("params.accelerator",
                                         f"unknown accelerator {slug!r} (known: {known})")
        if cards is None:
            raise ScenarioInputError.one("params.cards", "required with an accelerator: how "
                                                         "many cards the system has")
        try:
            system = system_for_accelerator(figures, cards)
        except TrainingInputError as exc:
            raise _wrap(exc) from exc
        source = {"accelerator": slug}
    elif cluster is not None:
        try:
            hw = cluster_hardware(cluster)
        except ConversionError as exc:
            raise ScenarioInputError.one(exc.field, exc.message) from exc
        if cards is None:
            cards = hw.cards
        if cards > hw.cards:
            raise ScenarioInputError.one("params.cards", (
                f"{cards:,} cards but cluster {hw.cluster_name!r} has only {hw.cards:,}"))
        try:
            system = _system(hw, cards)
        except TrainingInputError as exc:
            raise _wrap(exc) from exc
        source = {"cluster": {"id": hw.cluster_id, "name": hw.cluster_name},
                  "hardware": hw.to_dict()}
    else:
        raise ScenarioInputError.one("params.accelerator", (
            "give an accelerator (a catalogue slug) or run on a cluster (its own hardware)"))
    _check_fits_somewhere(model, system)
    return model, system, source


def _check_fits_somewhere(model: ModelSpec, system: SystemSpec) -> None:
    """Refuse a model that no layout of the cards can hold (the library's
    ``fits_anywhere``: states sharded over every card, full recomputation,
    micro-batch 1 — ZeRO's 16 bytes per parameter, Rajbhandari et al. 2020, §3.1,
    plus the least activations), so the search is not queued to find nothing."""
    try:
        reason = fits_anywhere(model, system, system.cards)
    except TrainingInputError as exc:
        raise _wrap(exc) from exc
    if reason is not None:
        raise ScenarioInputError.one("params.model", (
            f"cannot fit however it is split: {reason}; use more cards or a card with more "
            f"memory"))


def _system_rows(result: Mapping[str, Any]) -> list[tuple[str, str]]:
    system = result.get("system") or {}
    where = result.get("cluster") or {}
    on = f"cluster {where.get('name')!r}" if where else "a hypothetical system"
    return [("hardware", f"{fmt(system.get('cards'))} × {system.get('accelerator')} on {on}, "
                         f"scale-up {fmt(system.get('scale_up_domain'))} cards "
                         f"({system.get('scale_up_topology')}, "
                         f"{fmt(system.get('scale_up_gbps'))} Gb/s), scale-out "
                         f"{fmt(system.get('scale_out_gbps'))} Gb/s "
                         f"{system.get('scale_out_technology')}")]


def step_rows(step: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The figures of one configuration as table rows."""
    memory = step.get("memory") or {}
    out = [
        ("step time", f"{fmt(step.get('step_time_s'))} s"),
        ("MFU / HFU", f"{fmt(100 * (step.get('mfu') or 0))} % / "
                      f"{fmt(100 * (step.get('hfu') or 0))} %"),
        ("tokens/s", fmt(step.get("tokens_per_s"))),
        ("memory per card", f"{fmt(step.get('memory_gib_per_card'))} GiB of "
                            f"{fmt(memory.get('hbm'))} GiB HBM"
                            f"{'' if step.get('fits', True) else ' — does NOT fit'}"),
        ("energy per step", f"{fmt(step.get('energy_j_per_step'))} J"
                            f" ({fmt(step.get('energy_j_per_token'))} J/token)"),
    ]
    power = step.get("power") or {}
    classes = power.get("by_class_s") or {}
    if classes:  # the card's power from its op mix (simulation.training.energy)
        out.append(("card power by op mix", f"{fmt(power.get('card_w'))} W: " + ", ".join(
            f"{name.replace('_', '-')} {fmt(seconds)} s" for name, seconds in classes.items())))
    for part, seconds in (step.get("breakdown") or {}).items():
        if seconds:
            out.append((f"  {part}", f"{fmt(seconds)} s"))
    dvfs = step.get("dvfs") or {}
    if (dvfs.get("stages") or 0) > 1:
        for key, label in (("no_slowdown", "no slowdown"), ("one_percent", "≤ 1 % slowdown")):
            plan = dvfs.get(key) or {}
            if not plan:
                continue
            clocks = ", ".join(f"{100 * c:.0f}" for c in plan.get("clocks") or [])
            out.append((f"per-stage clocks, {label}",
                        f"cards' energy −{fmt(100 * plan.get('card_energy_saved_fraction', 0))} %"
                        f", step +{fmt(100 * plan.get('slowdown', 0))} % (clocks {clocks} % "
                        f"of base)"))
    return out


# ----------------------------------------------------------------- the kinds
@register
class TrainingKind(ScenarioKind):
    name = "training"
    label = "Training step"
    description = ("One parallel training configuration: step time by part, memory per card "
                   "against HBM, MFU, tokens/s and energy per step.")
    fields = (*HARDWARE_FIELDS, *execution_fields())
    chart = None  # stacked bars of the breakdown and memory: frontend/src/panels/training.ts

    def prepare(self, params: Mapping[str, Any], cluster: Any | None) -> dict[str, Any]:
        rest, mine = self.split(params)
        _refuse_unknown(self, rest, mine)
        model, system, source = hardware_inputs(mine, cluster, self.field("cards"))
        own = {k: v for k, v in mine.items() if k not in {f.name for f in HARDWARE_FIELDS}}
        try:
            execution = execution_from_params(own, system.cards, model, "params.")
            evaluate(model, system, execution)  # what only pricing finds (fp8 on an A100)
        except TrainingInputError as exc:
            raise _wrap(exc) from exc
        return {"model": model.to_dict(), "system": system.to_dict(),
                "execution": execution.to_dict(), **source}

    def run(self, inputs: Mapping[str, Any], progress: Progress) -> dict[str, Any]:
        progress(0.1, "pricing the step")
        model = model_from_params(inputs["model"])
        system = SystemSpec.from_dict(inputs["system"])
        execution = execution_from_params(inputs["execution"], system.cards, model)
        step = evaluate(model, system, execution)
        progress(0.9, "done")
        return jsonable({**step.to_dict(), "model": model.to_dict(), "system": system.to_dict(),
                         "execution": execution.to_dict(),
                         **{k: inputs[k] for k in ("cluster", "accelerator") if k in inputs}})

    def rows(self, result: Mapping[str, Any]) -> list[tuple[str, str]]:
        model = result.get("model") or {}
        return [("model", str(model.get("name") or "custom")), *_system_rows(result),
                *step_rows(result)]


@register
class TrainingSearchKind(ScenarioKind):
    name = "training_search"
    label = "Best training configuration"
    description = ("Every valid parallel configuration for a model, a number of cards and a "
                   "global batch: the best ranked, the rejected counted by reason, the Pareto "
                   "front of step time against energy.")
    fields = (
        *HARDWARE_FIELDS,
        FieldSpec("global_batch", "integer", "Global batch (sequences)",
                  f"Sequences per optimizer step (at most {MAX_SEARCH_BATCH:,}: the search "
                  f"tries every divisor of it).", required=True, min=1, max=MAX_SEARCH_BATCH),
        FieldSpec("objective", "choice", "Rank by", "time (step time), energy (per step) or "
                  "cost (card-hours).", default="time", choices=OBJECTIVES),
        FieldSpec("top", "integer", "Configurations kept", f"The best N (at most {MAX_TOP}).",
                  default=10, min=1, max=MAX_TOP),
        FieldSpec("limits", "object", "Limits", "Restrict the search, as JSON: e.g. "
                  '{"tp": [1, 2, 4, 8], "precision": ["bf16"]}.'),
    )
    chart = None  # Pareto scatter and the best table: frontend/src/panels/training.ts

    def prepare(self, params: Mapping[str, Any], cluster: Any | None) -> dict[str, Any]:
        rest, mine = self.split(params)
        _refuse_unknown(self, rest, mine)
        model, system, source = hardware_inputs(mine, cluster, self.field("cards"))
        global_batch = _integer(mine, self.field("global_batch"))
        top = _integer(mine, self.field("top"))
        objective = mine.get("objective", self.field("objective").default)
        if objective not in OBJECTIVES:
            raise ScenarioInputError.one("params.objective", (
                f"unknown objective {objective!r} (choose from {', '.join(OBJECTIVES)})"))
        limits = mine.get("limits")
        if limits is not None and not isinstance(limits, Mapping):
            raise ScenarioInputError.one("params.limits", "an object of the search's limits")
        search_inputs = {"global_batch": global_batch, "objective": objective, "top": top,
                         "limits": dict(limits) if limits else None}
        _check_limits(limits or {}, system)
        return {"model": model.to_dict(), "system": system.to_dict(),
                "search": search_inputs, **source}

    def run(self, inputs: Mapping[str, Any], progress: Progress) -> dict[str, Any]:
        model = model_from_params(inputs["model"])
        system = SystemSpec.from_dict(inputs["system"])
        opts = inputs["search"]
        progress(0.02, "enumerating configurations")

        def report(fraction: float) -> None:
            progress(0.02 + 0.96 * fraction, "searching")

        found = search(model, system, system.cards, opts["global_batch"],
                       limits=opts["limits"], objective=opts["objective"], top=opts["top"],
                       progress=report)
        return self._result(inputs, model, system, found)

    # A sweep: the configuration space split by (tp, pp) blocks, dealt round-robin
    # (neighbouring blocks differ most in cost); the library merges exactly. A part
    # gets PART_CONFIGS configurations at least, so its fixed cost stays small.
    def parts(self, inputs: Mapping[str, Any], most: int) -> list[dict[str, Any]]:
        model = model_from_params(inputs["model"])
        system = SystemSpec.from_dict(inputs["system"])
        limits = inputs["search"]["limits"] or {}
        blocks = search_blocks(model, system, system.cards, limits)
        configs = len(enumerate_configs(model, system, system.cards,
                                        inputs["search"]["global_batch"], limits)[0])
        count = min(most, blocks, configs // PART_CONFIGS)
        if count < 2:
            return []
        return [{"blocks": list(range(i, blocks, count))} for i in range(count)]

    def run_part(self, inputs: Mapping[str, Any], part: Mapping[str, Any],
                 progress: Progress) -> dict[str, Any]:
        model = model_from_params(inputs["model"])
        system = SystemSpec.from_dict(inputs["system"])
        opts = inputs["search"]
        blocks = part["blocks"]
        found = search_part(model, system, system.cards, opts["global_batch"],
                            limits=opts["limits"], objective=opts["objective"],
                            top=opts["top"], blocks=blocks,
                            progress=lambda f: progress(f, f"searching {len(blocks)} "
                                                           f"(tp, pp) blocks"))
        return jsonable(found.to_dict())

    def merge(self, inputs: Mapping[str, Any],
              partials: list[dict[str, Any]]) -> dict[str, Any]:
        model = model_from_params(inputs["model"])
        system = SystemSpec.from_dict(inputs["system"])
        opts = inputs["search"]
        found = merge_search([PartialSearch.from_dict(p) for p in partials], model, system,
                             objective=opts["objective"], top=opts["top"])
        return self._result(inputs, model, system, found)

    @staticmethod
    def _result(inputs: Mapping[str, Any], model: ModelSpec, system: SystemSpec,
                found: SearchResult) -> dict[str, Any]:
        opts = inputs["search"]
        return jsonable({**found.to_dict(), "model": model.to_dict(), "system": system.to_dict(),
                         "objective": opts["objective"], "global_batch": opts["global_batch"],
                         **{k: inputs[k] for k in ("cluster", "accelerator") if k in inputs}})

    def rows(self, result: Mapping[str, Any]) -> list[tuple[str, str]]:
        model = result.get("model") or {}
        out = [("model", str(model.get("name") or "custom")), *_system_rows(result),
               ("configurations", f"{fmt(result.get('configs_evaluated'))} evaluated "
                                  f"({fmt(result.get('configs_per_s'))}/s), ranked by "
                                  f"{result.get('objective')}")]
        for reason, count in sorted((result.get("rejected") or {}).items(),
                                    key=lambda kv: -kv[1]):
            out.append((f"  rejected: {reason}", fmt(count)))
        for i, entry in enumerate(result.get("best") or [], 1):
            ex = entry.get("execution") or {}
            domain = f" NVLink {ex['nvlink_domain']}" if ex.get("nvlink_domain") else ""
            out.append((f"#{i}", (f"TP {ex.get('tp')} PP {ex.get('pp')} DP {ex.get('dp')} "
                                  f"mb {ex.get('micro_batch')} {ex.get('precision')} "
                                  f"recompute {ex.get('recompute')} ZeRO {ex.get('zero')}"
                                  f"{domain}: {fmt(entry.get('step_time_s'))} s, MFU "
                                  f"{fmt(100 * (entry.get('mfu') or 0))} %, "
                                  f"{fmt(entry.get('energy_j_per_step'))} J")))
        return out


def _refuse_unknown(kind: ScenarioKind, rest: Mapping[str, Any],
                    mine: Mapping[str, Any]) -> None:
    """Refuse a key the kind does not describe, and a described number outside its
    bounds (so the form's bounds are the API's: ``dp: 0`` would otherwise be
    taken as "derive it")."""
    for spec in kind.fields:
        value = mine.get(spec.name)
        if spec.type not in ("integer", "number") or value is None \
                or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if spec.type == "integer" and not isinstance(value, int):
            raise ScenarioInputError.one(f"params.{spec.name}", f"a whole number, got {value!r}")
        if (spec.min is not None and value < spec.min) or \
                (spec.max is not None and value > spec.max):
            bound = " and ".join(b for b in (
                f"≥ {spec.min:g}" if spec.min is not None else "",
                f"≤ {spec.max:g}" if spec.max is not None else "") if b)
            raise ScenarioInputError.one(f"params.{spec.name}", f"must be {bound}, got {value!r}")
    if rest:
        key = sorted(rest)[0]
        raise ScenarioInputError.one(f"params.{key}", (
            f"unknown field for a {kind.name} scenario (allowed: "
            f"{', '.join(sorted(kind.options))})"))


def _integer(data: Mapping[str, Any], spec: FieldSpec) -> int:
    value = data.get(spec.name, spec.default)
    if value is None and spec.required:
        raise ScenarioInputError.one(f"params.{spec.name}", "required")
    low = int(spec.min or 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ScenarioInputError.one(f"params.{spec.name}",
                                     f"an integer ≥ {low}, got {value!r}")
    if spec.max is not None and value > spec.max:
        raise ScenarioInputError.one(f"params.{spec.name}", f"at most {int(spec.max):,}, "
                                                            f"got {value:,}")
    return value


def _check_limits(limits: Mapping[str, Any], system: SystemSpec) -> None:
    """What the search would refuse in its limits (or silently ignore: an unknown
    key), refused now on ``params.limits.<key>[i]``."""
    for key, value in limits.items():
        where = f"params.limits.{key}"
        if key not in LIMITS:
            raise ScenarioInputError.one(where, f"unknown limit (allowed: {', '.join(LIMITS)})")
        what, allowed = LIMITS[key]
        items = value if what == "list" else [value]
        if what == "list" and (not isinstance(value, list) or not value):
            raise ScenarioInputError.one(where, "a non-empty list of the values to try")
        for i, item in enumerate(items):
            at = f"{where}[{i}]" if what == "list" else where
            if isinstance(allowed[0], str) or isinstance(allowed[0], bool):
                if item not in allowed or type(item) is not type(allowed[0]):
                    raise ScenarioInputError.one(at, f"one of {', '.join(map(str, allowed))}, "
                                                     f"got {item!r}")
                continue
            low, high = allowed
            integer = what != "number"
            if isinstance(item, bool) or not isinstance(item, int if integer else int | float) \
                    or item < low or (high is not None and item > high):
                bound = f"≥ {low:g}" + (f" and ≤ {high:g}" if high is not None else "")
                raise ScenarioInputError.one(at, f"{'an integer' if integer else 'a number'} "
                                                 f"{bound}, got {item!r}")
    offered = [p for p in limits.get("precision", ()) if system.peak(p) > 0]
    if "precision" in limits and not offered:
        raise ScenarioInputError.one("params.limits.precision", (
            f"{system.accelerator} offers none of {', '.join(limits['precision'])} "
            f"(it has peaks for {', '.join(p for p in PRECISIONS if system.peak(p) > 0)})"))
    for i, domain in enumerate(limits.get("nvlink_domain", ())):
        try:  # a torus keeps its shape; a server is never split between domains
            with_scale_up_domain(system, domain, f"params.limits.nvlink_domain[{i}]")
        except TrainingInputError as exc:
            raise _wrap(exc) from exc
    if limits.get("max_cards", 0) > system.cards:
        raise ScenarioInputError.one("params.limits.max_cards",
                                     f"at most the run's {system.cards:,} cards")
