"""Capacity planning with cost: which designs fit a site, what they cost, cost per token.

Given a site (power, cooling, floor), a space of candidate designs (accelerators,
rack power classes, card counts, scale-out switches, optics), a workload (tokens
of a training-catalogue model, or a trace's GPU-hours) and a price table (each
default with its public source or marked "assumption — replace"), :func:`plan`
prices every design at once (numpy), says which fit and why the others do not,
and returns the Pareto front of cost per million tokens against time to train;
:func:`compare_generations` answers the seeds' "unit compute cost −70 %" for two
accelerators side by side. See ``docs/capacity.md``.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from simulation.capacity.design import (
    Plan,
    compare_generations,
    evaluate,
    evaluate_one,
    pareto_front,
)
from simulation.capacity.errors import CapacityInputError
from simulation.capacity.inputs import CandidateSpace, Site, Workload
from simulation.capacity.network import fat_tree, fat_tree_arrays
from simulation.capacity.prices import PRICE_SOURCES, PriceTable
from simulation.capacity.timing import Timer

__all__ = ["PRICE_SOURCES", "CandidateSpace", "CapacityInputError", "Plan", "PriceTable",
           "Site", "Timer", "Workload", "compare_generations", "evaluate", "evaluate_one",
           "fat_tree", "fat_tree_arrays", "pareto_front", "plan"]


def plan(site: Site, space: CandidateSpace, workload: Workload, prices: PriceTable,
         figures: Mapping[str, Mapping[str, Any]],
         progress: Callable[[float], None] | None = None) -> Plan:
    """Price every design of ``space`` for ``workload`` on ``site`` (``figures``:
    catalogue rows by slug, as ``system_for_accelerator`` takes them)."""
    return evaluate(site, space, workload, prices, figures, Timer(figures, workload), progress)
