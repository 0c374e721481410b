"""Time to train a workload on ``cards`` of one accelerator, cached per (accelerator, cards).

For a token workload the training model's configuration search
(:func:`simulation.training.search`, the engine of the ``training_search`` kind)
finds the fastest layout of ``model`` on the cards (a system of the catalogue
accelerator with its NVLink domain as the scale-up domain, one 400G NIC per card);
time to train = tokens / (tokens per second of that layout). The search is the
costly part (~0.5 s), so a plan runs it once per distinct (accelerator, cards) —
the switches, optics and rack classes of a design do not change it. For a trace
workload, GPU-hours measured on a reference card are scaled by the ratio of BF16
peaks (an assumption, stated in the result).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from simulation.capacity.errors import CapacityInputError
from simulation.capacity.inputs import Workload
from simulation.training import MODELS, TrainingInputError, search, system_for_accelerator

__all__ = ["SEARCH_LIMITS", "StepFigure", "Timer"]

SEARCH_LIMITS: dict[str, Any] = {
    "micro_batch": [1], "vpp": [1], "ep": [1], "cp": [1], "zero": [1],
    "recompute": ["selective"], "sequence_parallel": [True], "overlap": [True],
    "tp": [1, 2, 4, 8], "pp": [1, 2, 4, 8, 16],
}
"""The layouts a plan's search tries (precision comes from the workload): the
tensor/pipeline split, with Megatron's usual switches on, so that one search stays
under a second."""


@dataclass(frozen=True)
class StepFigure:
    """Hours to train and the card draw while training, or why there is none."""

    hours: float
    card_w: float
    execution: dict[str, Any] | None = None
    reason: str | None = None


class Timer:
    """Time to train ``workload`` per (accelerator, cards), each priced once."""

    def __init__(self, figures: Mapping[str, Mapping[str, Any]], workload: Workload) -> None:
        self.figures = figures
        self.workload = workload
        self.cache: dict[tuple[str, int], StepFigure] = {}
        if workload.is_trace:
            if workload.reference not in figures:
                raise CapacityInputError("workload.reference", (
                    f"unknown accelerator {workload.reference!r} (known: "
                    f"{', '.join(sorted(figures))})"))
        elif workload.model not in MODELS:
            raise CapacityInputError("workload.model", (
                f"unknown model {workload.model!r} (known: {', '.join(MODELS)})"))

    def __call__(self, slug: str, cards: int) -> StepFigure:
        key = (slug, cards)
        if key not in self.cache:
            self.cache[key] = self._price(slug, cards)
        return self.cache[key]

    def _price(self, slug: str, cards: int) -> StepFigure:
        fig = self.figures[slug]
        w = self.workload
        if w.gpu_hours is not None and w.reference is not None:
            ref = float(self.figures[w.reference]["bf16_tflops"])
            hours = w.gpu_hours * ref / float(fig["bf16_tflops"]) / cards
            return StepFigure(hours, float(fig["tdp_w"]))
        assert w.model is not None and w.tokens is not None
        if w.precision == "fp8" and not fig.get("fp8_tflops"):
            return StepFigure(math.nan, math.nan, reason=f"{slug} has no FP8")
        domain = int(fig.get("nvlink_domain_cards") or 8)
        try:
            system = system_for_accelerator(fig, cards, scale_up_domain=domain)
            found = search(MODELS[w.model], system, cards, w.global_batch,
                           limits={**SEARCH_LIMITS, "precision": [w.precision]}, top=1)
        except TrainingInputError as exc:
            return StepFigure(math.nan, math.nan, reason=f"training model: {exc}")
        if not found.best:
            why = ", ".join(f"{k} ({v})" for k, v in sorted(found.rejected.items(),
                                                            key=lambda kv: -kv[1])[:2])
            return StepFigure(math.nan, math.nan, reason=(
                f"no layout of {w.model} fits {cards:,} × {slug}: {why or 'none valid'}"))
        best = found.best[0]
        hours = w.tokens / float(best["tokens_per_s"]) / 3600.0
        return StepFigure(hours, float(best["power"]["card_w"]),
                          execution=dict(best["execution"]))
