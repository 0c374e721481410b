"""Live power capping (DVFS): each tick of a cluster whose capping policy is on sets
per-card power caps that hold every rack's budget, the site contract and every card's
thermal limit (``simulation.facility.capping``).

The contract (read as ``twin.jobs.healing`` reads; the tick calls in, as for the plant):

* **Off by default.** A cluster without a :class:`~twin.facility.models.CappingPolicy`
  row, or with ``mode = off``, costs one Redis read a tick (the policy is cached per
  process until a write to the policy table, :func:`_policy`) and nothing else: no
  caps are stored, the agents' endpoint serves none.
* **Inputs, per tick**: each card's measured power (NaN where it did not report: counted
  at its idle draw), its rack (layout order), the racks' budgets (the layout's
  ``budget_w``, 40 kW for the seeds' rack), the site contract turned into IT watts by
  the plant's present IT/facility ratio, and each card's coolant (its rack's coolant
  supply from the live plant) for the thermal ceiling (T_limit − T_coolant)/R; on an
  air rack the coolant is the air reaching its cards (the CRAH supply air + half the
  rack's own air rise P/(ṁ c_p), ``simulation.facility.air``) and R junction-to-air.
* **The control law** is :class:`~simulation.facility.capping.CapController`: caps fall
  at once and rise by 60 % of the gap a tick, so a step settles in a few ticks without
  overshoot. Its state (caps and last measured power) is one msgpack blob in Redis
  (:func:`state_key`), so any worker may tick next; a state of another layout restarts
  it from the cards' maxima (TDP).
* **Served**: the caps (float32 per card, layout order) and the mode at
  :func:`caps_key`; ``GET /api/telemetry/clusters/<id>/caps/`` serves them as binding
  only under ``apply`` (``propose`` computes and records them, agents get none).
* **Audit** (:class:`~twin.facility.models.CapEvent`): a row when the binding set of
  limits changes (which kinds bind, the racks over budget, site, infeasible) with the
  caps' summary and the throughput they cost. One row per cluster and tick (a
  unique constraint): a retried tick writes nothing twice.
* **What the caps cost** (:func:`throughput_lost`), per capped card: where a running job
  that names a ``training_model`` holds the card, through that job's op mix from the
  training model (:meth:`simulation.whatif.speed.StepTimes.op_mix`: its step split
  into compute-bound, memory-bound and exposed-communication time;
  :func:`simulation.facility.capping.throughput_op_mix`: only compute stretches with
  the clock, memory-bound ops draw less), priced once per job and kept per process
  (:data:`_mixes`, jobs no longer running forgotten past 1,000 entries; at most
  :data:`NEW_JOBS_PER_TICK` new job a tick, a training search costs ~0.1–0.6 s);
  elsewhere (no job, a job without a training model, one
  the model cannot run or not priced yet) the **labelled fallback**, a fixed compute
  share of :data:`FALLBACK_COMPUTE_SHARE` (:func:`simulation.facility.capping.throughput`).
  The summary says which was used (``throughput_basis``: cards on each, the jobs'
  compute shares, jobs still waiting to be priced).
* **Power elements** (PDUs, busways, UPS, transformers, feeds): each one's usable input
  (min of planned and available: redundancy and units running) turned into IT watts at
  the plant's present losses (``it_limits``, handed over by ``twin.facility.live`` in
  the step's summary); the cards' groups per chain depth are computed once per layout
  version and kept per process.
* **Priority weights** (policy ``priority``): each card weighs ``1 + priority / 100``
  of the running job that holds it (:func:`priority_weights`; the job priority is 0–1000,
  so a priority-100 job gives half as much of a cut per flexible watt as a priority-0
  one, the highest 1/11), the highest priority where jobs share a card; a card no job
  holds weighs 0.5, below any job, so idle cards give first. Only under that policy;
  kept per process and cluster under the version of the ``jobs`` domain of
  ``twin.core.aggregates`` (every committed write to the job and allocation tables
  replaces it: a job submitted, placed, finished or re-prioritised is seen on the
  next tick), so a steady tick pays one Redis GET instead of one query over the
  cluster's allocations (:func:`_weights`).
* **Seen** (:func:`summary_key`, a small blob next to the caps): per layout rack the sum
  of its cards' caps and whether a limit binds one of its cards, and the cluster's
  mode, binding kinds, cards capped, capped watts, throughput lost and the number of
  binding limits (racks, power elements, site); the live frame
  (:func:`frame_section`) and ``/metrics`` read it, never the per-card caps.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar, cast

import msgpack
import numpy as np

from simulation.facility.capping import (
    BINDING,
    CapController,
    CapLimits,
    OpMix,
    element_groups,
    throughput,
    throughput_op_mix,
)
from simulation.facility.power_chain import PowerChain
from simulation.whatif.speed import DEFAULT_SEQUENCES_PER_CARD, StepTimes

__all__ = ["FALLBACK_COMPUTE_SHARE", "NEW_JOBS_PER_TICK", "capping_on", "caps_key",
           "clear_caps", "frame_section", "job_op_mixes", "priority_weights", "read_caps",
           "read_summary", "state_key", "step_caps", "summary_key", "throughput_lost"]

#: The weight of a card no running job holds (below any job's, 1 + priority / 100).
IDLE_WEIGHT = 0.5
#: The compute-bound share of a step for a capped card whose job the training model has
#: not priced (no job, no training model, a shape it cannot run): an **assumption**, the
#: GEMM-bound share of a typical LLM step (``simulation.facility.capping.throughput``).
FALLBACK_COMPUTE_SHARE = 0.7
#: Jobs priced with the training model per tick at most (the others keep the fallback,
#: counted as ``pending``, until a later tick prices them).
NEW_JOBS_PER_TICK = 1

#: Per process: job id → ((model, global batch, cards, accelerator), its op mix or None).
_mixes: dict[int, tuple[tuple[Any, ...], OpMix | None]] = {}
#: Per process: the training model's step times per (accelerator slug, cards per server).
_step_times: dict[tuple[str, int], StepTimes] = {}

log = logging.getLogger(__name__)


def state_key(prefix: str, cluster_id: int) -> str:
    """The controller's state (``<prefix>:c<id>:facility:capstate``)."""
    return f"{prefix}:c{cluster_id}:facility:capstate"


def caps_key(prefix: str, cluster_id: int) -> str:
    """The caps of the last tick (msgpack: version, mode, float32 caps per card)."""
    return f"{prefix}:c{cluster_id}:facility:caps"


def summary_key(prefix: str, cluster_id: int) -> str:
    """The caps' compact summary of the last tick (msgpack; see :func:`read_summary`)."""
    return f"{prefix}:c{cluster_id}:facility:capsum"


def read_summary(r: Any, prefix: str, cluster_id: int) -> dict[str, Any] | None:
    """``{"v", "mode", "policy", "ts", "binding", "cards_capped", "capped_w",
    "throughput_lost", "throughput_basis", "limits_binding", "rack_caps_w": ndarray,
    "rack_binding": ndarray of bool}`` (layout rack order; None: capping off)."""
    raw = r.get(summary_key(prefix, cluster_id))
    if not raw:
        return None
    d = dict(msgpack.unpackb(raw))
    d["rack_caps_w"] = np.frombuffer(d["rack_caps_w"], dtype="<f4")
    d["rack_binding"] = np.frombuffer(d["rack_binding"], dtype=np.uint8).astype(bool)
    return d


def frame_section(r: Any, prefix: str, cluster_id: int, version: str,
                  n_racks: int) -> dict[str, Any] | None:
    """The caps in a cluster frame, compact (per rack, not per card): mode, policy,
    binding kinds, cards capped, capped watts, throughput lost and its basis (op mix or
    fallback, :func:`throughput_lost`), binding limits, per rack (layout rack order) the
    sum of caps and 0/1 whether a limit binds there. None when capping is off or the
    summary is of another layout."""
    s = read_summary(r, prefix, cluster_id)
    if s is None or s.get("v") != version or len(s["rack_caps_w"]) != n_racks:
        return None
    out = {k: s.get(k) for k in ("ts", "mode", "policy", "binding", "cards_capped",
                                 "capped_w", "throughput_lost", "throughput_basis",
                                 "limits_binding")}
    out["rack_caps_w"] = [round(float(v), 0) for v in s["rack_caps_w"]]
    out["rack_binding"] = s["rack_binding"].astype(int).tolist()
    return out


def read_caps(r: Any, prefix: str, cluster_id: int) -> dict[str, Any] | None:
    """The stored caps: ``{"v", "mode", "policy", "ts", "caps_w": ndarray}`` (None: none)."""
    raw = r.get(caps_key(prefix, cluster_id))
    if not raw:
        return None
    d = msgpack.unpackb(raw)
    d["caps_w"] = np.frombuffer(d["caps_w"], dtype="<f4")
    return dict(d)


_groups: dict[int, tuple[str, int, tuple[np.ndarray, ...]]] = {}


def _element_groups(cluster_id: int, version: str, chain: PowerChain, rack_at: np.ndarray,
                    card_rack: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per chain depth, the element above each card (−1: none or not in the plant),
    kept per cluster, layout version and chain."""
    hit = _groups.get(cluster_id)
    if hit is not None and hit[0] == version and hit[1] == id(chain):
        return hit[2]
    at = np.asarray(rack_at, dtype=np.int64)[card_rack]
    groups = tuple(np.where(at >= 0, g, -1)
                   for g in element_groups(chain, np.maximum(at, 0)))
    _groups[cluster_id] = (version, id(chain), groups)
    return groups


def _below(chain: PowerChain, rack_w: np.ndarray) -> np.ndarray:
    """Per power element, the sum of ``rack_w`` (plant rack order) of the racks below it."""
    out = np.bincount(chain.rack_parent, weights=rack_w, minlength=chain.n).astype(float)
    for d in range(len(chain.levels) - 1, 0, -1):
        idx = chain.levels[d]
        out += np.bincount(chain.parent[idx], weights=out[idx], minlength=chain.n)
    return out


T = TypeVar("T")

_policies: dict[int, tuple[str, tuple[str, str] | None]] = {}
"""Per cluster, (the ``capping`` domain's version it was read under, (mode, policy) or
None): :func:`_policy`'s per-process cache."""


def _policy(cluster_id: int) -> tuple[str, str] | None:
    """The cluster's (mode, policy) when capping is on, else None.

    Cached in this process under the version of the ``capping`` domain of
    ``twin.core.aggregates``, which every committed write to the policy table
    replaces (from any process): a tick pays one Redis GET instead of a database
    query (~40 ms on the tick's path with a crowd of web readers on the shared
    PostgreSQL; ``benchmarks/serving.py``), and sees a policy change on its next
    tick. The version is read before the row, so a write between the two leaves a
    value under an old version that the next tick no longer takes. Redis away:
    the query, uncached."""
    return _versioned(_policies, "capping", cluster_id, lambda: _policy_row(cluster_id))


def _versioned(cache: dict[int, Any], domain: str, cluster_id: int,
               compute: Callable[[], T], extra: tuple[Any, ...] = ()) -> T:
    """``compute()`` cached in this process per cluster under ``domain``'s version
    (``twin.core.aggregates``) and ``extra``, stored as ``(version, *extra, value)``.
    The version is read before the rows, so a write between the two leaves a value
    under an old version that the next tick no longer takes. Redis away: computed,
    uncached. The one mechanism behind the tick's policy, weights and job rows."""
    from twin.core import aggregates
    from twin.core.unavailable import REDIS_ERRORS

    try:
        stamp = (aggregates.version(domain), *extra)
    except REDIS_ERRORS:
        return compute()
    hit = cache.get(cluster_id)
    if hit is not None and hit[:-1] == stamp:
        return cast(T, hit[-1])
    value = compute()
    cache[cluster_id] = (*stamp, value)
    return value


def _policy_row(cluster_id: int) -> tuple[str, str] | None:
    from twin.facility.models import CappingPolicy

    row = (CappingPolicy.objects.filter(cluster_id=cluster_id).exclude(mode="off")
           .values_list("mode", "policy").first())
    return None if row is None else (str(row[0]), str(row[1]))


def capping_on(cluster_id: int) -> bool:
    """Whether ``cluster_id``'s capping policy is on (``propose`` or ``apply``): a
    sharded round asks once at its start, so its shards hand the merge their cards'
    power only when the merge will cap (one indexed query)."""
    return _policy(cluster_id) is not None


def clear_caps(r: Any, prefix: str, cluster_id: int) -> None:
    """Forget the cluster's caps, controller state and summary (capping turned off)."""
    r.delete(caps_key(prefix, cluster_id), state_key(prefix, cluster_id),
             summary_key(prefix, cluster_id))


def priority_weights(cluster_id: int, card_ids: np.ndarray) -> np.ndarray:
    """Per card (``card_ids`` order) the cap-sharing weight of the running job holding
    it: ``1 + priority / 100`` (the highest where jobs share a card), ``IDLE_WEIGHT``
    where none does. One bulk query over the cluster's allocations."""
    from twin.jobs.models import Allocation

    ids = np.asarray(card_ids, dtype=np.int64)
    w = np.full(len(ids), IDLE_WEIGHT)
    rows = np.array(list(Allocation.objects.filter(
        job__cluster_id=cluster_id, job__state="running").values_list("card_id", "job__priority")),
        dtype=np.int64).reshape(-1, 2)
    if not len(rows) or not len(ids):
        return w
    order = np.argsort(ids)
    pos = np.searchsorted(ids, rows[:, 0], sorter=order)
    pos = np.minimum(pos, len(ids) - 1)
    at = order[pos]
    found = ids[at] == rows[:, 0]
    np.maximum.at(w, at[found], 1.0 + rows[found, 1] / 100.0)
    return w


_weight_cache: dict[int, tuple[str, str, int, np.ndarray]] = {}
"""Per cluster, (the ``jobs`` domain's version, the layout version, the card count,
the weights): :func:`_weights`' per-process cache."""


def _weights(cluster_id: int, version: str, card_ids: np.ndarray) -> np.ndarray:
    """:func:`priority_weights` of the layout ``version``'s cards, cached in this
    process under the ``jobs`` domain's version (read before the rows, as
    :func:`_policy` does: a write between the two leaves weights under an old version
    that the next tick no longer takes). Redis away: the query, uncached."""
    def compute() -> np.ndarray:
        w = priority_weights(cluster_id, card_ids)
        w.setflags(write=False)  # shared by every tick under this version
        return w

    return _versioned(_weight_cache, "jobs", cluster_id, compute, (version, len(card_ids)))


_rows_cache: dict[int, tuple[str, list[tuple[Any, ...]]]] = {}
"""Per cluster, (the ``jobs`` domain's version, the running training jobs' allocation
rows): :func:`job_op_mixes`' per-process cache, so a capping tick in steady state
queries nothing (as :func:`_weights`)."""


def _allocation_rows(cluster_id: int, query: Callable[[], list[tuple[Any, ...]]]
                     ) -> list[tuple[Any, ...]]:
    """``query()``'s rows, cached in this process under the ``jobs`` domain's version
    (:func:`_versioned`)."""
    return _versioned(_rows_cache, "jobs", cluster_id, query)


def job_op_mixes(cluster_id: int, card_ids: np.ndarray, *, budget: int = NEW_JOBS_PER_TICK
                 ) -> tuple[np.ndarray, dict[int, OpMix | None], int]:
    """Per card (``card_ids`` order) the running job that names a training model and
    holds it (-1: none; a card several such jobs share takes the lowest job id), each
    such job's op mix (None: the model cannot run its shape), and how many jobs wait to
    be priced (over ``budget`` this call). One query over the cluster's allocations; a
    job is priced once per process (:data:`_mixes`)."""
    from twin.hardware.catalogue import accelerator_figures
    from twin.hardware.models import Card
    from twin.jobs.models import Allocation

    ids = np.asarray(card_ids, dtype=np.int64)
    job_of = np.full(len(ids), -1, dtype=np.int64)
    rows = _allocation_rows(cluster_id, lambda: list(
        Allocation.objects.filter(job__cluster_id=cluster_id, job__state="running")
        .exclude(job__training_model="").order_by("-job_id").values_list(
            "card_id", "job_id", "job__training_model", "job__global_batch",
            "job__cards", "card__accelerator__slug", "card__server_id")))
    if not rows or not len(ids):
        return job_of, {}, 0
    cards = np.array([r[0] for r in rows], dtype=np.int64)
    jobs = np.array([r[1] for r in rows], dtype=np.int64)
    order = np.argsort(ids)
    pos = np.minimum(np.searchsorted(ids, cards, sorter=order), len(ids) - 1)
    at = order[pos]
    found = ids[at] == cards
    job_of[at[found]] = jobs[found]   # rows by job id descending: the lowest id is written last
    mixes: dict[int, OpMix | None] = {}
    pending = 0
    first = {r[1]: r for r in reversed(rows)}
    for job, (_, _, model, batch, n, slug, server) in first.items():
        shape = (model, int(batch or DEFAULT_SEQUENCES_PER_CARD * n), int(n), slug)
        known = _mixes.get(job)
        if known is not None and known[0] == shape:
            mixes[job] = known[1]
            continue
        if budget <= 0:
            pending += 1
            continue
        budget -= 1
        figures = accelerator_figures(slug) if slug else None
        mix = None
        if figures is not None:
            per_server = Card.objects.filter(server_id=server).count()
            times = _step_times.setdefault((slug, per_server), StepTimes(figures, per_server))
            try:
                mix = times.op_mix(model, shape[1], shape[2])
            except Exception:  # a shape the training model refuses: the fallback, labelled
                log.exception("job %s: the training model could not price its op mix", job)
        _mixes[job] = (shape, mix)
        mixes[job] = mix
    if len(_mixes) > 1000 + 2 * len(first):   # forget jobs no longer running
        for gone in set(_mixes) - set(first):
            del _mixes[gone]
    return job_of, mixes, pending


def throughput_lost(caps: np.ndarray, capped: np.ndarray, demand: np.ndarray,
                    tdp_w: np.ndarray, idle_w: np.ndarray, job_of: np.ndarray | None,
                    mixes: dict[int, OpMix | None], pending: int = 0
                    ) -> tuple[float, dict[str, Any]]:
    """The share of the cards' throughput the caps cost, and on what basis (module doc):
    the capped cards of a priced job through its op mix, every other card through the
    fallback compute share. Returns ``(lost, basis)``."""
    kept = throughput(caps, demand, float(np.median(tdp_w)) if len(tdp_w) else 1.0,
                      float(np.median(idle_w)) if len(idle_w) else 0.0,
                      compute_share=FALLBACK_COMPUTE_SHARE).kept.copy()
    on_mix = np.zeros(len(caps), dtype=bool)
    shares: dict[str, float] = {}
    for job, mix in mixes.items():
        if mix is None or job_of is None:
            continue
        held = job_of == job
        on_mix |= held
        if len(shares) < 50:   # the first 50 jobs' shares (the blob stays small)
            shares[str(job)] = round(mix.compute_s / mix.step_s, 4) if mix.step_s > 0 else 0.0
        sel = held & capped
        if sel.any():
            kept[sel] = throughput_op_mix(caps[sel], mix, float(np.median(tdp_w[sel])),
                                          float(np.median(idle_w[sel]))).kept
    lost = float(1.0 - kept.mean()) if kept.size else 0.0
    return lost, {"op_mix_cards": int(on_mix.sum()), "fallback_cards": int((~on_mix).sum()),
                  "fallback_compute_share": FALLBACK_COMPUTE_SHARE,
                  "job_compute_share": shares, "jobs_pending": int(pending)}


def _ceilings(card_rack: np.ndarray, rack_coolant_c: np.ndarray | None,
              rack_air_c: np.ndarray | None,
              thermal: tuple[float | np.ndarray, float, float] | None
              ) -> tuple[np.ndarray | None, float | np.ndarray, float]:
    """Per card, what its thermal ceiling (T_limit − T)/R is taken from: its liquid
    rack's coolant supply with R junction-to-coolant, or its air rack's air at the
    cards (``simulation.facility.air``: the CRAH supply air + half the rack's own air
    rise) with R junction-to-air; a card with neither reading gets T = 0 °C, i.e. no
    ceiling below its TDP. ``thermal``: the engine's (R liquid — one, or one per
    layout rack: its card's cold plate —, R air, T_limit)."""
    r_rack, r_air, limit_c = thermal if thermal is not None else (0.04, 0.065, 85.0)
    r_liq: float | np.ndarray = (np.asarray(r_rack, dtype=float)[card_rack]
                                 if np.ndim(r_rack) else float(r_rack))
    liquid = air = None
    if rack_coolant_c is not None and len(rack_coolant_c):
        liquid = np.asarray(rack_coolant_c, dtype=float)[card_rack]
    if rack_air_c is not None and len(rack_air_c):
        air = np.asarray(rack_air_c, dtype=float)[card_rack]
    if liquid is None and air is None:
        return None, r_liq, limit_c
    n = len(card_rack)
    liquid = liquid if liquid is not None else np.full(n, np.nan)
    on_air = ~np.isfinite(liquid) & (np.isfinite(air) if air is not None
                                     else np.zeros(n, bool))
    coolant = np.where(np.isfinite(liquid), liquid,
                       np.where(on_air, air if air is not None else 0.0, 0.0))
    return coolant, np.where(on_air, r_air, r_liq), limit_c


def _signature(binding: np.ndarray, racks_limited: np.ndarray, site: bool,
               infeasible: tuple[str, ...]) -> str:
    kinds = sorted({BINDING[int(k)] for k in np.unique(binding) if k})
    racks = ",".join(str(int(x)) for x in racks_limited[:50])
    return f"{'+'.join(kinds) or 'none'}|racks:{racks}|site:{int(site)}|inf:{','.join(infeasible)}"


def step_caps(r: Any, prefix: str, cluster_id: int, version: str, card_rack: np.ndarray,
              card_w: np.ndarray, tdp_w: np.ndarray, idle_w: np.ndarray,
              rack_budget_w: np.ndarray, now: float, *,
              rack_coolant_c: np.ndarray | None = None,
              rack_air_c: np.ndarray | None = None,
              thermal: tuple[float | np.ndarray, float, float] | None = None,
              site_limit_w: float | None = None,
              power_limits: tuple[PowerChain, np.ndarray, np.ndarray, np.ndarray] | None
              = None,
              card_ids: np.ndarray | None = None
              ) -> dict[str, Any] | None:
    """One controller step for ``cluster_id`` (None: capping is off). Arrays are in the
    layout's card order (``card_rack``: layout rack position of each card) and rack
    order; ``card_w`` NaN where a card did not report; ``power_limits``: the plant's
    chain, each element's limit in IT watts, each layout rack's plant index and each
    plant rack's IT power this step. Every limit is turned into a limit on the cards
    by taking off what else draws below it (static draw, network racks): what the
    cards draw now is the rest of the IT power. ``card_ids``: the layout's card ids,
    for the ``priority`` policy's job weights (:func:`priority_weights`). Stores the caps and state,
    writes an audit row when the binding set changes, returns a summary."""
    pol = _policy(cluster_id)
    if pol is None:
        clear_caps(r, prefix, cluster_id)
        return None
    mode, policy = pol
    lo = np.asarray(idle_w, dtype=float)
    hi = np.maximum(np.asarray(tdp_w, dtype=float), lo)
    measured = np.where(np.isfinite(card_w), np.asarray(card_w, dtype=float), lo)
    ctl = CapController(min_w=lo, max_w=hi, policy=policy)
    sig_prev = ""
    raw = r.get(state_key(prefix, cluster_id))
    if raw:
        st = msgpack.unpackb(raw)
        if st.get("v") == version and len(st["caps"]) == 8 * len(hi):
            ctl.caps_w = np.frombuffer(st["caps"], dtype="<f8").copy()
            ctl.last_w = np.frombuffer(st["last"], dtype="<f8").copy()
            if len(st.get("served", b"")) == 8 * len(hi):
                ctl.served_w = np.frombuffer(st["served"], dtype="<f8").copy()
            sig_prev = str(st.get("sig", ""))
    coolant, r_k_w, limit_c = _ceilings(card_rack, rack_coolant_c, rack_air_c, thermal)
    card_rack = np.asarray(card_rack, dtype=np.int64)
    chain = elem_w = groups = None
    if power_limits is not None:
        chain, elem_w, rack_at, plant_w = power_limits
        groups = _element_groups(cluster_id, version, chain, rack_at, card_rack)
        cards = np.bincount(card_rack, weights=np.nan_to_num(card_w, nan=0.0),
                            minlength=len(rack_at))
        ok = np.asarray(rack_at) >= 0
        cards_plant = np.zeros(len(plant_w))
        cards_plant[np.asarray(rack_at)[ok]] = cards[ok]
        other = _below(chain, np.maximum(np.asarray(plant_w) - cards_plant, 0.0))
        elem_w = np.where(np.isfinite(elem_w), np.maximum(elem_w - other, 0.0), np.inf)
    limits = CapLimits(card_rack=card_rack,
                       rack_limit_w=np.where(np.isfinite(rack_budget_w), rack_budget_w, np.inf),
                       chain=chain, element_limit_w=elem_w, element_groups=groups,
                       site_limit_w=site_limit_w, coolant_c=coolant, r_k_w=r_k_w,
                       limit_c=limit_c)
    weight = (_weights(cluster_id, version, card_ids)
              if policy == "priority" and card_ids is not None else None)
    decision = ctl.update(measured, limits, weight)
    caps = decision.caps_w
    sig = _signature(decision.binding, decision.racks_limited, decision.site_limited,
                     decision.infeasible)
    pipe = r.pipeline(transaction=False)
    pipe.set(state_key(prefix, cluster_id), msgpack.packb(
        {"v": version, "caps": caps.astype("<f8").tobytes(),
         "last": measured.astype("<f8").tobytes(), "sig": sig,
         "served": (ctl.served_w if ctl.served_w is not None else caps).astype("<f8")
         .tobytes()}))
    pipe.set(caps_key(prefix, cluster_id), msgpack.packb(
        {"v": version, "mode": mode, "policy": policy, "ts": now,
         "caps_w": caps.astype("<f4").tobytes()}))
    capped = decision.binding > 0
    job_of, mixes, pending = (job_op_mixes(cluster_id, card_ids)
                              if card_ids is not None and capped.any() else (None, {}, 0))
    lost, basis = throughput_lost(caps, capped, np.where(capped, hi, measured), hi, lo,
                                  job_of, mixes, pending)
    n_racks = len(rack_budget_w)
    rack_caps = np.bincount(card_rack, weights=caps, minlength=n_racks)[:n_racks]
    rack_bind = np.bincount(card_rack, weights=capped, minlength=n_racks)[:n_racks] > 0
    kinds = sorted({BINDING[int(k)] for k in np.unique(decision.binding) if k})
    pipe.set(summary_key(prefix, cluster_id), msgpack.packb(
        {"v": version, "mode": mode, "policy": policy, "ts": now,
         "binding": "+".join(kinds) or "none", "cards_capped": int(capped.sum()),
         "capped_w": float(caps[capped].sum()), "throughput_lost": lost,
         "throughput_basis": basis,
         "limits_binding": int(len(decision.racks_limited) + len(decision.elements_limited)
                               + int(decision.site_limited)),
         "rack_caps_w": rack_caps.astype("<f4").tobytes(),
         "rack_binding": rack_bind.astype(np.uint8).tobytes()}))
    pipe.execute()
    out: dict[str, Any] = {"mode": mode, "policy": policy, "binding": sig,
                           "cards_capped": int(capped.sum()),
                           "limits_binding": int(len(decision.racks_limited)
                                                 + len(decision.elements_limited)
                                                 + int(decision.site_limited)),
                           "throughput_lost": lost, "throughput_basis": basis,
                           "changed": sig != sig_prev}
    if sig != sig_prev and (sig_prev or capped.any()):
        _audit(cluster_id, now, mode, policy, sig, {**decision.summary(),
                                                     "throughput_basis": basis},
               caps[capped], lost)
    return out


def _audit(cluster_id: int, now: float, mode: str, policy: str, sig: str,
           summary: dict[str, Any], capped: np.ndarray, lost: float) -> None:
    from twin.facility.models import CapEvent

    CapEvent.objects.get_or_create(
        cluster_id=cluster_id, tick_ts=now,
        defaults={"mode": mode, "policy": policy, "binding": sig[:300], "summary": summary,
                  "cards_capped": int(capped.size), "capped_w": float(capped.sum()),
                  "throughput_lost": float(lost)})
