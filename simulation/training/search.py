"""Best-configuration search: enumerate, reject with reasons, price, rank, Pareto.

Every combination of tp (powers of two up to the scale-up domain), pp
(divisors of the layers and powers of two), dp (divisors of the global batch,
and the most the cards allow), ep (divisors of the experts), virtual stages,
micro-batch, recomputation, ZeRO stage, precision (× FP8 recipe), expert TP,
the NVLink-domain size, sequence parallelism and overlap is enumerated as numpy
index arrays; structural rejections are counted
by reason without pricing; the rest is priced by the vectorised model in
chunks (:func:`simulation.training.core.step_arrays`), configurations that do
not fit HBM are counted as ``memory``, and the fitting ones ranked by time,
energy or cost. The Pareto front is over (step time, energy per step, cards).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ._check import check_keys, integer, number
from .comm import CommModel
from .core import CAST_RECIPES, RECOMPUTE_CODES, Batch, step_arrays
from .errors import TrainingInputError
from .execution import MAX_SCALE_UP_DOMAIN, OPTIMIZERS, Execution
from .models import ModelSpec
from .recipes import FP8_RECIPES, recipe_name
from .step import MEMORY_RESERVE_GIB, evaluate
from .system import PRECISIONS, SystemSpec, with_scale_up_domain

__all__ = [
    "OBJECTIVES",
    "SEARCH_LIMITS",
    "PartialSearch",
    "SearchResult",
    "enumerate_configs",
    "merge_search",
    "search",
    "search_blocks",
    "search_part",
]

OBJECTIVES = {"time": "step_time_s", "energy": "energy_j_per_step", "cost": "cost_per_step"}
"""Objective name → the result key it ranks by (iterate it for the names)."""
SEARCH_LIMITS = ("tp", "pp", "micro_batch", "vpp", "ep", "recompute", "zero", "precision",
                 "sequence_parallel", "overlap", "max_cards", "compression", "cp", "fp8_recipe",
                 "etp", "nvlink_domain")
"""The keys ``search(limits=...)`` accepts: lists of values to try for each
dimension, except ``max_cards`` (an integer) and ``compression`` (a ratio ≥ 1).
``cp`` (context-parallel sizes) defaults to [1]: long-sequence searches opt in.
``fp8_recipe`` (:mod:`.recipes`) defaults to ["delayed"]: each FP8 configuration is
tried with every recipe listed (``mx`` only on cards with block-scaled tensor cores;
FP4 is NVFP4). ``etp`` (expert tensor-parallel sizes, ``Execution.etp``) defaults to
[0] (= tp): with e.g. [0, 1] every MoE configuration is also tried with each expert
whole on its card, EP then spanning the TP ranks (ep × etp dividing tp × cp × dp).
``nvlink_domain`` (cards per NVLink domain, :func:`.system.with_scale_up_domain`)
defaults to [the system's]: e.g. [8, 72] on a GB200 rack prices every configuration
both as NVL8 islands and as one NVL72 domain — which TP / EP / DP groups stay inside
NVLink follows (a TP group wider than its domain crosses the network); tp then
defaults to the powers of two up to the largest domain.
Any other key is refused (``limits.<key>``)."""
CHUNK = 131_072
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class SearchResult:
    """Counts, speed, the best configurations and the Pareto front."""

    configs_enumerated: int
    configs_evaluated: int
    configs_per_s: float
    wall_s: float
    rejected: dict[str, int]
    objective: str
    best: list[dict[str, Any]]
    pareto: list[dict[str, Any]]
    fitting: int = 0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the contract's keys)."""
        return {
            "configs_enumerated": self.configs_enumerated,
            "configs_evaluated": self.configs_evaluated,
            "configs_per_s": self.configs_per_s,
            "wall_s": self.wall_s,
            "rejected": dict(self.rejected),
            "fitting": self.fitting,
            "objective": self.objective,
            "best": list(self.best),
            "pareto": list(self.pareto),
            "notes": list(self.notes),
        }


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _pow2(limit: int) -> list[int]:
    return [1 << i for i in range(limit.bit_length()) if (1 << i) <= limit]


def _limit_list(limits: Mapping[str, Any], key: str, default: list[Any]) -> list[Any]:
    value = limits.get(key, default)
    if not isinstance(value, list | tuple) or not value:
        raise TrainingInputError(f"limits.{key}", "a non-empty list")
    return list(value)


def _dimensions(model: ModelSpec, system: SystemSpec, cards: int,
                limits: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The values tried per dimension (the limits, else the defaults), checked."""
    check_keys(limits, set(SEARCH_LIMITS), "limits.")
    domains = [integer(d, f"limits.nvlink_domain[{i}]", high=MAX_SCALE_UP_DOMAIN)
               for i, d in enumerate(_limit_list(limits, "nvlink_domain",
                                                 [system.scale_up_domain]))]
    for i, d in enumerate(domains):
        with_scale_up_domain(system, d, f"limits.nvlink_domain[{i}]")
    domain = max(domains)
    dims: dict[str, list[Any]] = {
        "nvlink_domain": sorted(set(domains), key=domains.index),
        "tp": [int(t) for t in _limit_list(limits, "tp", _pow2(min(domain, 64, cards)))],
        "pp": [int(p) for p in _limit_list(
            limits, "pp", sorted(set(_divisors(model.layers)) | set(_pow2(model.layers))))],
        "mb": [int(m) for m in _limit_list(limits, "micro_batch", [1, 2, 4, 8])],
        "vpp": [int(v) for v in _limit_list(limits, "vpp", [1, 2, 4])],
        "ep": [int(e) for e in _limit_list(limits, "ep", _divisors(model.experts))],
        "cp": [integer(c, f"limits.cp[{i}]", high=4096)
               for i, c in enumerate(_limit_list(limits, "cp", [1]))],
        # op-level SAC (torchtitan's) only when asked: the default space is Megatron's
        "recompute": _limit_list(limits, "recompute", list(RECOMPUTE_CODES[:3])),
        "zero": [int(z) for z in _limit_list(limits, "zero", [0, 1, 2, 3])],
        "precision": _limit_list(limits, "precision",
                                 [p for p in ("bf16", "fp8") if system.peak(p) > 0]),
        "sp": [bool(x) for x in _limit_list(limits, "sequence_parallel", [False, True])],
        "overlap": [bool(x) for x in _limit_list(limits, "overlap", [False, True])],
        "fp8_recipe": _limit_list(limits, "fp8_recipe", ["delayed"]),
        "etp": [integer(e, f"limits.etp[{i}]", low=0, high=4096)
                for i, e in enumerate(_limit_list(limits, "etp", [0]))],
    }
    for i, r in enumerate(dims["fp8_recipe"]):
        if r not in FP8_RECIPES:
            raise TrainingInputError(f"limits.fp8_recipe[{i}]",
                                     f"unknown {r!r} (choose from {', '.join(FP8_RECIPES)})")
    for i, r in enumerate(dims["recompute"]):
        if r not in RECOMPUTE_CODES:
            raise TrainingInputError(f"limits.recompute[{i}]", f"unknown {r!r}")
    for i, p in enumerate(dims["precision"]):
        if p not in PRECISIONS:
            raise TrainingInputError(f"limits.precision[{i}]", f"unknown {p!r}")
    return dims


def search_blocks(model: ModelSpec, system: SystemSpec, cards: int,
                  limits: Mapping[str, Any] | None = None) -> int:
    """How many (tp, pp, cp) blocks the search's space has: the unit
    :func:`search_part` partitions it by (block ``j`` is the ``j``-th triple of
    ``itertools.product(tp values, pp values, cp values)``).

    >>> from simulation.training import MODELS
    >>> a100 = {"slug": "a100-sxm-80gb", "bf16_tflops": 312, "fp32_tflops": 19.5,
    ...         "tf32_tflops": 156, "hbm_gib": 80, "hbm_tbps": 2.039, "tdp_w": 400,
    ...         "idle_w": 55, "scaleup_gbps": 600}
    >>> from simulation.training import system_for_accelerator
    >>> search_blocks(MODELS["gpt3-175b"], system_for_accelerator(a100, 64), 64,
    ...               {"tp": [1, 2, 4, 8], "pp": [1, 2, 4]})
    12
    """
    dims = _dimensions(model, system, cards, limits or {})
    return len(dims["tp"]) * len(dims["pp"]) * len(dims["cp"])


def enumerate_configs(model: ModelSpec, system: SystemSpec, cards: int, global_batch: int,
                      limits: Mapping[str, Any]) -> tuple[Batch, dict[str, int], int]:
    """All valid configurations as a :class:`Batch`, the rejected counts, the total."""
    batch, rejected, total, _ = _enumerate(model, system, cards, global_batch, limits, None)
    return batch, rejected, total


def _enumerate(model: ModelSpec, system: SystemSpec, cards: int, global_batch: int,
               limits: Mapping[str, Any], blocks: Collection[int] | None
               ) -> tuple[Batch, dict[str, int], int, I64]:
    """:func:`enumerate_configs` over the (tp, pp, cp) blocks ``blocks`` only (all
    when None), and each configuration's *group* (precision position × blocks +
    block position): configurations in a lower group, or earlier in one group,
    come first in the whole space's order, which is what makes parts mergeable
    exactly (:func:`merge_search`)."""
    dims = _dimensions(model, system, cards, limits)
    tps, pps, cps = dims["tp"], dims["pp"], dims["cp"]
    mbs, vpps, eps, etps = dims["mb"], dims["vpp"], dims["ep"], dims["etp"]
    rcs, zeros, precs, sps, ovs = (dims["recompute"], dims["zero"], dims["precision"],
                                   dims["sp"], dims["overlap"])
    max_cards = integer(limits.get("max_cards", cards), "limits.max_cards", high=system.cards)
    ratio = number(limits.get("compression", 1.0), "limits.compression", low=1.0, high=1e4)
    rejected: dict[str, int] = {}
    inner = len(rcs) * len(zeros) * len(sps) * len(ovs)
    n_blocks = len(tps) * len(pps) * len(cps)
    mine = set(range(n_blocks)) if blocks is None else set(blocks)

    def reject(reason: str, n: int) -> None:
        rejected[reason] = rejected.get(reason, 0) + n

    rows: list[tuple[int, ...]] = []
    groups: list[int] = []
    total = 0
    # (precision, cast recipe) pairs: FP8 once per recipe asked for (:mod:`.recipes`)
    # × each NVLink domain size asked for (0: the system's own, stored as such)
    pairs = [(p, recipe_name(p, r), 0 if d == system.scale_up_domain else d) for p in precs
             for r in (dims["fp8_recipe"] if p == "fp8" else ["delayed"])
             for d in dims["nvlink_domain"]]
    for p_at, (prec, recipe, dom) in enumerate(pairs):
        if system.peak(prec) <= 0 or (recipe == "mx" and not system.block_scaled_mma):
            n = len(mine) * len(mbs) * len(vpps) * len(eps) * len(etps) * inner
            reject(f"precision: {system.accelerator} has no {prec} peak"
                   if system.peak(prec) <= 0 else
                   f"fp8_recipe: {system.accelerator} has no block-scaled tensor cores (mx)", n)
            total += n
            continue
        for block, (tp, pp, cp) in enumerate(itertools.product(tps, pps, cps)):
            if block not in mine:
                continue
            at = p_at * n_blocks + block
            tcp = tp * pp * cp
            dps = sorted({d for d in _divisors(global_batch) if tcp * d <= max_cards}
                         | ({max_cards // tcp} if max_cards >= tcp else set()))
            n_here = max(len(dps), 1) * len(mbs) * len(vpps) * len(eps) * len(etps) * inner
            total += n_here
            if model.heads % tp or (model.kv_heads % tp and tp % model.kv_heads):
                reject("tp does not divide heads", n_here)
                continue
            if cp > 1 and model.seq_len % (2 * cp):
                reject("cp does not split the sequence into 2·cp chunks", n_here)
                continue
            if not dps:
                reject("cards: tp × pp exceeds the cards" if cp == 1
                       else "cards: tp × cp × pp exceeds the cards", n_here)
                continue
            for dp, mb, vpp, ep, etp in itertools.product(dps, mbs, vpps, eps, etps):
                if pp * vpp > model.layers:
                    reject("pp × vpp exceeds layers", inner)
                elif vpp > 1 and pp == 1:
                    reject("vpp needs pp > 1", inner)
                elif global_batch % (dp * mb):
                    reject("batch: global batch not a multiple of dp × micro-batch", inner)
                elif vpp > 1 and (global_batch // (dp * mb)) % pp:
                    reject("vpp: micro-batches not a multiple of pp", inner)
                elif etp and (etp == tp or not model.moe):
                    reject("etp: the same as etp 0 (= tp), or no experts (duplicate)", inner)
                elif etp and ((tp * cp * dp) % (ep * etp) or model.ffn % etp):
                    reject("etp: ep × etp does not divide tp × cp × dp, or etp the FFN", inner)
                elif not etp and dp % ep:
                    reject("ep does not divide dp", inner)
                else:
                    rows.append((tp, pp, dp, ep, vpp, mb, PRECISIONS.index(prec), cp,
                                 CAST_RECIPES.index(recipe), etp or tp, dom))
                    groups.append(at)
    base = np.array(rows, dtype=np.int64).reshape(-1, 11)
    combos = np.array(list(itertools.product(
        [RECOMPUTE_CODES.index(r) for r in rcs], zeros, sps, ovs)), dtype=np.int64)
    nb, nc = base.shape[0], combos.shape[0]
    bi = np.repeat(np.arange(nb), nc)
    ci = np.tile(np.arange(nc), nb)
    b, c = base[bi], combos[ci]
    sp = c[:, 2].astype(bool) & (b[:, 0] > 1)
    keep = ~((c[:, 2] == 1) & (b[:, 0] == 1))  # SP on tp = 1 is the same configuration
    dup = int((~keep).sum())
    if dup:
        reject("sequence parallel needs tp > 1 (duplicate)", dup)
    b, c, sp = b[keep], c[keep], sp[keep]
    group: I64 = np.array(groups, dtype=np.int64)[bi][keep]
    n = b.shape[0]
    ov = c[:, 3].astype(bool)
    batch = Batch(
        tp=b[:, 0], pp=b[:, 1], dp=b[:, 2], ep=b[:, 3], vpp=b[:, 4], mb=b[:, 5],
        gb=np.full(n, global_batch, dtype=np.int64), recompute=c[:, 0], zero=c[:, 1],
        precision=b[:, 6], sp=sp, compression=np.full(n, ratio),
        overlap_dp=ov, overlap_tp=ov, overlap_pp=ov, flash=np.ones(n, dtype=bool),
        gpipe=np.zeros(n, dtype=bool), clock=np.ones(n), cap_w=np.full(n, np.inf),
        cp=b[:, 7], recipe=b[:, 8], etp=b[:, 9], domain=b[:, 10],
    )
    return batch, rejected, total, group


def execution_at(batch: Batch, i: int) -> Execution:
    """Row ``i`` of a batch as an :class:`Execution`."""
    cap = float(batch.cap_w[i])
    return Execution(
        tp=int(batch.tp[i]), pp=int(batch.pp[i]), dp=int(batch.dp[i]),
        global_batch=int(batch.gb[i]), micro_batch=int(batch.mb[i]), ep=int(batch.ep[i]),
        vpp=int(batch.vpp[i]), sequence_parallel=bool(batch.sp[i]),
        recompute=RECOMPUTE_CODES[int(batch.recompute[i])], zero=int(batch.zero[i]),
        precision=PRECISIONS[int(batch.precision[i])],
        compression=float(batch.compression[i]), overlap_dp=bool(batch.overlap_dp[i]),
        overlap_tp=bool(batch.overlap_tp[i]), overlap_pp=bool(batch.overlap_pp[i]),
        flash_attention=bool(batch.flash[i]),
        schedule="gpipe" if batch.gpipe[i] else "1f1b", clock=float(batch.clock[i]),
        power_cap_w=None if not np.isfinite(cap) else cap, cp=int(batch.cp[i]),
        grad_accum_fusion=bool(batch.grad_fusion[i]), fp32_grads=bool(batch.fp32_grads[i]),
        overlap_tp_bwd=bool(batch.overlap_tp_bwd[i]), pp_balance=bool(batch.balance[i]),
        dp_every_microbatch=bool(batch.dp_every_mb[i]),
        overlap_param_gather=bool(batch.param_overlap[i]),
        fused_elementwise=not bool(batch.eager[i]),
        fsdp1_flat_grads=bool(batch.fsdp1[i]),
        ep_overlap=bool(batch.ep_overlap[i]),
        ep_overlap_schedule="dualpipe" if batch.ep_dualpipe[i] else "megatron",
        cuda_max_connections=int(batch.connections[i]),
        moe_dispatcher=("alltoall" if batch.moe_sort[i] else
                        "flex" if batch.moe_sync[i] else "device"),
        hybridep_sms=int(batch.hybridep_sms[i]),
        etp=0 if int(batch.etp[i]) == int(batch.tp[i]) else int(batch.etp[i]),
        fp8_recipe=(CAST_RECIPES[int(batch.recipe[i])]
                    if CAST_RECIPES[int(batch.recipe[i])] in FP8_RECIPES else "delayed"),
        nvlink_domain=int(batch.domain[i]),
        optimizer=OPTIMIZERS[int(batch.adam[i])],
    )


def pareto_front(time_s: npt.NDArray[np.float64], energy: npt.NDArray[np.float64],
                 cards: npt.NDArray[np.float64]) -> I64:
    """Indices not dominated in (time, energy, cards), all minimised.

    >>> pareto_front(np.array([1., 2., 3., 1.]), np.array([3., 2., 1., 4.]),
    ...              np.array([8., 8., 8., 8.])).tolist()
    [0, 1, 2]
    """
    cand: list[int] = []
    for c in np.unique(cards):  # 2-D front per card count first
        idx = np.flatnonzero(cards == c)
        order = idx[np.lexsort((energy[idx], time_s[idx]))]
        best = np.minimum.accumulate(energy[order])
        first = np.concatenate([[True], energy[order][1:] < best[:-1]])
        cand.extend(order[first].tolist())
    ci = np.array(cand, dtype=np.int64)
    t, e, k = time_s[ci], energy[ci], cards[ci]
    le = (t[None, :] <= t[:, None]) & (e[None, :] <= e[:, None]) & (k[None, :] <= k[:, None])
    lt = (t[None, :] < t[:, None]) | (e[None, :] < e[:, None]) | (k[None, :] < k[:, None])
    dominated = (le & lt).any(axis=1)
    keep = ci[~dominated]
    out: I64 = keep[np.argsort(time_s[keep], kind="stable")]
    return out


@dataclass(frozen=True)
class PartialSearch:
    """What one part of a split search hands back (:func:`search_part`): its counts,
    its compute seconds and its *candidates* — the part's best ``top`` and its whole
    Pareto front, each with its place in the whole space's order (``group``,
    ``index``) so :func:`merge_search` breaks ties exactly as one search would.
    Plain JSON both ways (it travels between workers)."""

    enumerated: int
    evaluated: int
    wall_s: float
    rejected: dict[str, int]
    fitting: int
    group: list[int]
    index: list[int]
    score: list[float]
    time_s: list[float]
    energy_j: list[float]
    cards: list[float]
    executions: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (round-trips through :meth:`from_dict`)."""
        return {f: getattr(self, f) for f in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PartialSearch:
        """The part a worker sent (its :meth:`to_dict`)."""
        return cls(**{f: data[f] for f in cls.__dataclass_fields__})


def search_part(model: ModelSpec, system: SystemSpec, cards: int, global_batch: int, *,
                limits: Mapping[str, Any] | None = None, objective: str = "time",
                top: int = 10, blocks: Collection[int] | None = None,
                progress: Callable[[float], None] | None = None) -> PartialSearch:
    """Price the configurations of the (tp, pp, cp) blocks ``blocks`` (positions below
    :func:`search_blocks`; all when None) and keep what the merge needs.

    The best ``top`` of the whole space are among the union of every part's best
    ``top`` (ranked by (score, order)), and its Pareto front among the union of the
    parts' fronts (a point dominated inside a part is dominated in the whole), so
    the parts' candidates are all :func:`merge_search` needs.
    """
    if objective not in OBJECTIVES:
        raise TrainingInputError("objective", f"unknown {objective!r} (choose from "
                                 f"{', '.join(OBJECTIVES)})")
    if cards > system.cards:
        raise TrainingInputError("cards", f"{cards} cards but the system has {system.cards}")
    if not isinstance(limits, Mapping | None):
        raise TrainingInputError("limits", "an object")
    t0 = time.perf_counter()
    batch, rejected, total, group = _enumerate(model, system, cards, global_batch,
                                               limits or {}, blocks)
    # one collective table for every domain: a switch's k-rank level does not depend
    # on the mesh's size, so the largest domain's mesh prices the smaller ones too
    widest = int(batch.domain.max()) if len(batch) else 0
    comm = CommModel(with_scale_up_domain(system, max(widest, system.scale_up_domain),
                                          "limits.nvlink_domain"))
    key = OBJECTIVES[objective]
    n = len(batch)
    keep_cols = ("step_time_s", "energy_j_per_step", "cost_per_step", "cards", "mem_total")
    cols: dict[str, list[npt.NDArray[np.float64]]] = {k: [] for k in keep_cols}
    for start in range(0, n, CHUNK):
        idx = np.arange(start, min(n, start + CHUNK))
        out = step_arrays(model, system, batch.take(idx), comm, MEMORY_RESERVE_GIB)
        for k in keep_cols:
            cols[k].append(out[k])
        if progress is not None:
            progress(min(n, start + CHUNK) / max(n, 1) * 0.95)
    merged = {k: np.concatenate(v) if v else np.zeros(0) for k, v in cols.items()}
    fits = merged["mem_total"] <= system.hbm_gib
    n_mem = int((~fits).sum())
    if n_mem:
        rejected["memory: does not fit HBM"] = n_mem
    ok = np.flatnonzero(fits)  # in the whole space's order: (group, position) ascends
    take = ok[np.argsort(merged[key][ok], kind="stable")[:top]]
    front = ok[pareto_front(merged["step_time_s"][ok], merged["energy_j_per_step"][ok],
                            merged["cards"][ok])] if ok.size else ok
    chosen = np.union1d(take, front)
    wall = time.perf_counter() - t0
    if progress is not None:
        progress(1.0)
    return PartialSearch(
        enumerated=total, evaluated=n, wall_s=wall, rejected=rejected, fitting=int(ok.size),
        group=group[chosen].tolist(), index=chosen.tolist(),
        score=merged[key][chosen].tolist(), time_s=merged["step_time_s"][chosen].tolist(),
        energy_j=merged["energy_j_per_step"][chosen].tolist(),
        cards=merged["cards"][chosen].tolist(),
        executions=[execution_at(batch, int(i)).to_dict() for i in chosen])


def merge_search(parts: list[PartialSearch], model: ModelSpec, system: SystemSpec, *,
                 objective: str = "time", top: int = 10) -> SearchResult:
    """One :class:`SearchResult` from the parts of a partitioned space: equal to
    :func:`search` over the whole (counts summed; the best ``top`` ranked by score,
    ties in the whole space's order; the Pareto front of the parts' fronts, a
    repeated point represented by its first configuration), except ``wall_s``, which
    is the parts' compute seconds summed (and ``configs_per_s`` per those seconds)."""
    if objective not in OBJECTIVES:
        raise TrainingInputError("objective", f"unknown {objective!r}")
    rejected: dict[str, int] = {}
    for part in parts:
        for reason, count in part.rejected.items():
            rejected[reason] = rejected.get(reason, 0) + int(count)
    memory = rejected.pop("memory: does not fit HBM", 0)
    if memory:  # last, as one search reports it
        rejected["memory: does not fit HBM"] = memory

    def column(name: str, dtype: type) -> npt.NDArray[Any]:
        return np.array([v for p in parts for v in getattr(p, name)], dtype=dtype)

    group, index = column("group", np.int64), column("index", np.int64)
    score, time_s = column("score", np.float64), column("time_s", np.float64)
    energy, cards = column("energy_j", np.float64), column("cards", np.float64)
    executions = [e for p in parts for e in p.executions]
    order = np.lexsort((index, group))  # the whole space's order
    evaluated = sum(p.evaluated for p in parts)
    wall = sum(p.wall_s for p in parts)
    fitting = sum(p.fitting for p in parts)
    notes: list[str] = []
    best: list[dict[str, Any]] = []
    front: list[dict[str, Any]] = []
    if fitting == 0:
        notes.append("no configuration fits memory: more cards, ZeRO/recompute, or a larger card")
    else:
        take = order[np.argsort(score[order], kind="stable")[:top]]
        front_idx = order[pareto_front(time_s[order], energy[order], cards[order])]
        comms: dict[int, CommModel] = {}  # one per NVLink domain size
        tokens = 20.0 * model.params
        for target, idxs in ((best, take), (front, front_idx[:50])):
            for i in idxs:
                ex = Execution(**executions[int(i)])
                if ex.nvlink_domain not in comms:
                    comms[ex.nvlink_domain] = CommModel(with_scale_up_domain(
                        system, ex.nvlink_domain, "limits.nvlink_domain"))
                res = evaluate(model, system, ex, train_tokens=tokens,
                               comm=comms[ex.nvlink_domain]).to_dict()
                target.append({"execution": ex.to_dict(), **res})
    return SearchResult(
        configs_enumerated=sum(p.enumerated for p in parts), configs_evaluated=evaluated,
        configs_per_s=evaluated / wall if wall else 0.0, wall_s=wall, rejected=rejected,
        objective=objective, best=best, pareto=front, fitting=fitting, notes=notes,
    )


def search(model: ModelSpec, system: SystemSpec, cards: int, global_batch: int, *,
           limits: Mapping[str, Any] | None = None, objective: str = "time", top: int = 10,
           progress: Callable[[float], None] | None = None) -> SearchResult:
    """Enumerate every configuration, keep those that fit, rank and return the front
    (one part over the whole space, merged)."""
    part = search_part(model, system, cards, global_batch, limits=limits, objective=objective,
                       top=top, progress=progress)
    return merge_search([part], model, system, objective=objective, top=top)
