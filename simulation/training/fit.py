"""Does a model fit on these cards at all? :func:`min_memory_gib`, :func:`fits_anywhere`.

Why: a web request must refuse "a model that cannot fit anywhere" before it
queues a search, cheaply (no collective tables, no pricing) and with the same
memory model as the search, so the request and the search never disagree.

The least memory per card over every execution the search can pick is the
memory model (:func:`simulation.training.core.memory_arrays`) at the layouts
that hold the least: every card used (dp = cards / (tp·pp)), weights,
gradients and optimizer states sharded over dp (ZeRO-3), full recomputation,
micro-batch 1, one micro-batch in flight (the global batch = dp, the smallest
a step can be), sequence parallelism, every tp the search offers (powers of
two up to the scale-up domain that split the heads), every pp (divisors and
powers of two of the layers), every ep dividing the experts and dp, every
precision the card offers. Memory grows with the micro-batch, the micro-batches
in flight and interleaving, and shrinks with sharding, so no execution of the
search holds less than this minimum (a test checks it against a full search).
"""

from __future__ import annotations

import itertools

import numpy as np

from ._check import integer
from .core import RECOMPUTE_CODES, Batch, memory_arrays
from .errors import TrainingInputError
from .models import ModelSpec
from .step import MEMORY_RESERVE_GIB
from .system import PRECISIONS, SystemSpec

__all__ = ["fits_anywhere", "least_memory_batch", "min_memory_gib"]


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _pow2(limit: int) -> list[int]:
    return [1 << i for i in range(limit.bit_length()) if (1 << i) <= limit]


def least_memory_batch(model: ModelSpec, system: SystemSpec, cards: int) -> Batch:
    """The candidate layouts of least memory (see the module docstring)."""
    tps = [t for t in _pow2(min(system.scale_up_domain, 64, cards))
           if not model.heads % t and not (model.kv_heads % t and t % model.kv_heads)]
    pps = sorted(set(_divisors(model.layers)) | set(_pow2(model.layers)))
    precs = [PRECISIONS.index(p) for p in PRECISIONS if system.peak(p) > 0]
    rows = []
    for tp, pp, prec in itertools.product(tps, pps, precs):
        if tp * pp > cards:
            continue
        dp = cards // (tp * pp)
        for ep in _divisors(model.experts):
            if dp % ep == 0:
                rows.append((tp, pp, dp, ep, prec))
    r = np.array(rows, dtype=np.int64).reshape(-1, 5)
    n = r.shape[0]
    ones = np.ones(n, dtype=np.int64)
    return Batch(
        tp=r[:, 0], pp=r[:, 1], dp=r[:, 2], ep=r[:, 3], vpp=ones, mb=ones, gb=r[:, 2],
        recompute=np.full(n, RECOMPUTE_CODES.index("full"), dtype=np.int64),
        zero=np.full(n, 3, dtype=np.int64), precision=r[:, 4], sp=r[:, 0] > 1,
        compression=np.ones(n), overlap_dp=np.ones(n, dtype=bool),
        overlap_tp=np.ones(n, dtype=bool), overlap_pp=np.ones(n, dtype=bool),
        flash=np.ones(n, dtype=bool), gpipe=np.zeros(n, dtype=bool), clock=np.ones(n),
        cap_w=np.full(n, np.inf),
    )


def min_memory_gib(model: ModelSpec, system: SystemSpec, cards: int) -> float:
    """The least memory per card (GiB, reserve included) any searchable layout needs.

    >>> from simulation.training.fidelity import ACCELERATORS
    >>> from simulation.training.models import MODELS
    >>> from simulation.training.system import system_for_accelerator
    >>> a100 = system_for_accelerator(ACCELERATORS["a100-sxm-80gb"], 8)
    >>> 80 < min_memory_gib(MODELS["gpt3-175b"], a100, 8)   # 16 B × 175e9 / 8 ≈ 326 GiB
    True
    """
    cards = integer(cards, "cards", high=1 << 24)
    if cards > system.cards:
        raise TrainingInputError("cards", f"{cards} cards but the system has {system.cards}")
    batch = least_memory_batch(model, system, cards)
    if len(batch) == 0:
        return float("inf")
    return float(np.min(memory_arrays(model, system, batch, MEMORY_RESERVE_GIB)["mem_total"]))


def fits_anywhere(model: ModelSpec, system: SystemSpec, cards: int) -> str | None:
    """None if some layout of ``cards`` cards fits HBM, else the reason (one line)."""
    need = min_memory_gib(model, system, cards)
    if need <= system.hbm_gib:
        return None
    return (f"{model.name} needs at least {need:.1f} GiB per card on {cards} cards "
            f"(states sharded over every card, full recomputation, micro-batch 1), "
            f"the card has {system.hbm_gib:g} GiB")
