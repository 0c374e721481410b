"""How fast a training job runs where it is: the training model's step time, relative.

A what-if job that names a training model (``training_model``, a slug of
:data:`simulation.training.MODELS`, and its ``global_batch`` in sequences) does not
progress at its expected duration's pace wherever it lands: it runs at

    speed = step_time(reference) / step_time(now)

where ``step_time`` is :mod:`simulation.training`'s step model (``core.step_arrays``:
GEMMs at peak × matmul efficiency × clock, attention, memory-bound ops, the pipeline
bubble, exposed TP/PP/DP communication over the scale-up and scale-out fabrics) for the
best layout the training search finds (:func:`simulation.training.search`, objective
time) on

* ``cards`` — the whole cards the job holds (a resize changes them; the global batch
  stays, so fewer cards take longer steps);
* ``domain`` — its scale-up (NVLink) domain as the placement gives it: the fewest of its
  cards sharing one server (one supernode when the accelerator's domain spans servers,
  an NVL72 rack), capped at the accelerator's domain and rounded down to one the system
  model takes (a divisor or multiple of the cards per server). A failure that moves a
  job onto scattered cards shrinks it: tensor parallelism no longer fits in NVLink and
  its collectives cross the scale-out network;
* ``clock`` — the DVFS clock fraction under a power cap
  (:func:`simulation.training.energy.clock_for_cap`); the step model scales compute
  by it and leaves HBM-bound and communication time alone, so a compute-bound step
  takes ~1/clock as long.

The reference is the job as its expected duration was measured: for a job running at the
fork, the placement it holds then at full clock; for a queued or added job, its cards at
the accelerator's full domain (``min(cards, domain)``) and full clock. Same placement,
same clock → speed 1, so the what-if without events stays the scheduling replay.

**Assumption**: the job runs a Megatron-style layout of the narrowed search space
:data:`SEARCH_LIMITS` (BF16, sequence parallel, overlapped communication, ZeRO-1, no
virtual stages, no context or expert parallelism), and re-plans its layout (tp, pp, dp,
micro-batch) for every placement — as a restarted job's launcher would.

**Cache**: the search runs once per (model, global batch, cards, domain) and the step
time once per (model, global batch, cards, domain, clock bucket of
:data:`CLOCK_BUCKET`): a week on thousands of cards prices a handful of shapes, not every
start (``benchmarks/whatif.py``). A shape the model cannot run (it does not fit the
cards' memory, or no layout divides the batch) has no step time: the engine falls back
to the expected duration's pace for it and says so (``fallbacks``).

**Op mix** (:meth:`StepTimes.op_mix`): the same layout's step at full clock split by
what bounds each op — compute-bound (GEMMs, attention, the output layer), memory-bound
(element-wise ops, casts, the optimizer) and exposed communication — the training
model's ``energy_compute_s`` / ``energy_memory_s`` / ``energy_comm_s``
(:mod:`simulation.training.energy`), as the
:class:`~simulation.facility.capping.OpMix` live capping prices a cap with
(:func:`~simulation.facility.capping.throughput_op_mix`: a memory-bound step draws
less and loses less from a clock cap). Cached per (model, global batch, cards, domain).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from simulation.facility.capping import OpMix
from simulation.training import MODELS, Execution, SystemSpec, search, system_for_accelerator
from simulation.training.comm import CommModel
from simulation.training.core import step_arrays
from simulation.training.energy import hbm_power_w
from simulation.training.errors import TrainingInputError
from simulation.training.step import MEMORY_RESERVE_GIB, batch_of

__all__ = ["CLOCK_BUCKET", "DEFAULT_SEQUENCES_PER_CARD", "SEARCH_LIMITS", "Shape", "StepTimes",
           "valid_domain"]

SEARCH_LIMITS: dict[str, Any] = {
    "precision": ["bf16"], "recompute": ["selective", "full"], "zero": [1],
    "sequence_parallel": [True], "overlap": [True], "vpp": [1], "cp": [1], "ep": [1]}
"""The narrowed training search a what-if job's layout comes from (assumption, see the
module doc): ~0.1–0.6 s a shape on a loaded machine instead of 1–4 s for the full space."""
DEFAULT_SEQUENCES_PER_CARD = 2
"""A job that names a model but no global batch: 2 sequences per card it asks for
(assumption — the twin's jobs carry their batch when known)."""
CLOCK_BUCKET = 0.01
"""Clock fractions are rounded to this before pricing (the DVFS curve's own points are
0.1 apart: a 1 % bucket changes a step time by < 1 %)."""


def valid_domain(cards: int, domain: int, cards_per_server: int) -> int:
    """The largest scale-up domain ≤ ``min(cards, domain)`` the system model takes: a
    multiple of ``cards_per_server`` at or above it, else a divisor of it.

    >>> valid_domain(72, 72, 4), valid_domain(50, 72, 4), valid_domain(3, 8, 8)
    (72, 48, 2)
    """
    d = max(1, min(cards, domain))
    per = max(1, cards_per_server)
    if d >= per:
        return d - d % per
    return max(k for k in range(1, d + 1) if per % k == 0)


@dataclass(frozen=True)
class Shape:
    """What the step time depends on: the job's model and batch, where and how fast."""

    model: str
    global_batch: int
    cards: int
    domain: int
    clock: float = 1.0


class StepTimes:
    """Step times of the training model on one accelerator, cached (see the module doc).

    ``accelerator``: the catalogue figures :func:`simulation.training.system_for_accelerator`
    takes (slug, bf16_tflops, hbm_gib, hbm_tbps, tdp_w, idle_w, scaleup_gbps,
    nvlink_domain_cards …); ``cards_per_server``: the cluster's. ``cache=False`` prices
    every call again (the benchmark's "before").
    """

    def __init__(self, accelerator: Mapping[str, Any], cards_per_server: int, *,
                 cache: bool = True) -> None:
        self.figures = dict(accelerator)
        self.cards_per_server = max(1, int(cards_per_server))
        self.domain = int(self.figures.get("nvlink_domain_cards") or 8)
        self.cache = cache
        self._layouts: dict[tuple[str, int, int, int], Execution | None] = {}
        self._steps: dict[tuple[str, int, int, int, float], float | None] = {}
        self._mixes: dict[tuple[str, int, int, int], OpMix | None] = {}
        self.searches = 0
        self.pricings = 0
        self.calls = 0

    def system(self, cards: int, domain: int) -> SystemSpec:
        """The accelerator as ``cards`` cards in scale-up domains of ``domain``."""
        return system_for_accelerator(self.figures, cards, scale_up_domain=domain,
                                      cards_per_server=self.cards_per_server)

    def layout(self, model: str, global_batch: int, cards: int, domain: int) -> Execution | None:
        """The fastest layout of the narrowed search (None: nothing fits)."""
        key = (model, global_batch, cards, domain)
        if self.cache and key in self._layouts:
            return self._layouts[key]
        self.searches += 1
        try:
            found = search(MODELS[model], self.system(cards, domain), cards, global_batch,
                           limits=SEARCH_LIMITS, objective="time", top=1)
            best = _execution(found.best[0]) if found.best else None
        except TrainingInputError:
            best = None
        self._layouts[key] = best
        return best

    def step_time(self, shape: Shape) -> float | None:
        """Seconds a step of ``shape`` takes (None: the model cannot run it)."""
        self.calls += 1
        clock = max(CLOCK_BUCKET, round(shape.clock / CLOCK_BUCKET) * CLOCK_BUCKET)
        domain = valid_domain(shape.cards, shape.domain, self.cards_per_server)
        key = (shape.model, shape.global_batch, shape.cards, domain, round(clock, 6))
        if self.cache and key in self._steps:
            return self._steps[key]
        ex = self.layout(shape.model, shape.global_batch, shape.cards, domain)
        out: float | None = None
        if ex is not None:
            self.pricings += 1
            system = self.system(shape.cards, domain)
            arrays = step_arrays(MODELS[shape.model], system,
                                 batch_of([replace(ex, clock=min(1.0, clock))]),
                                 CommModel(system), MEMORY_RESERVE_GIB)
            t = float(arrays["step_time_s"][0])
            out = t if math.isfinite(t) and t > 0 else None
        self._steps[key] = out
        return out

    def op_mix(self, model: str, global_batch: int, cards: int,
               domain: int | None = None) -> OpMix | None:
        """The step of ``model`` (``global_batch`` sequences on ``cards`` cards in
        scale-up domains of ``domain``, default the accelerator's) on one card at full
        clock by op class, with the card's power constants (module doc, "Op mix");
        None: the model cannot run it."""
        domain = valid_domain(cards, domain or self.domain, self.cards_per_server)
        key = (model, global_batch, cards, domain)
        if self.cache and key in self._mixes:
            return self._mixes[key]
        ex = self.layout(model, global_batch, cards, domain)
        out: OpMix | None = None
        if ex is not None:
            self.pricings += 1
            system = self.system(cards, domain)
            a = step_arrays(MODELS[model], system, batch_of([replace(ex, clock=1.0)]),
                            CommModel(system), MEMORY_RESERVE_GIB)
            step = float(a["step_time_s"][0])
            if math.isfinite(step) and step > 0:
                hbm = system.hbm_tbps * 1e12 * system.memory_efficiency
                out = OpMix(compute_s=float(a["energy_compute_s"][0]),
                            memory_s=float(a["energy_memory_s"][0]),
                            comm_s=float(a["energy_comm_s"][0]), step_s=step,
                            hbm_w=hbm_power_w(hbm, system.tdp_w, system.idle_w),
                            memory_sm=system.memory_sm_activity,
                            comm_activity=system.comm_activity)
        self._mixes[key] = out
        return out

    def slowdown(self, reference: Shape, now: Shape) -> float | None:
        """step_time(now) / step_time(reference) = 1 / speed (None: either has none)."""
        ref = self.step_time(reference)
        cur = self.step_time(now)
        if ref is None or cur is None:
            return None
        return cur / ref


def _execution(best: Mapping[str, Any]) -> Execution:
    """A search result's ``execution`` dict as an :class:`Execution`."""
    data = dict(best["execution"])
    names = set(Execution.__dataclass_fields__)
    return Execution(**{k: v for k, v in data.items() if k in names})
