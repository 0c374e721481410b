"""A search split into parts by (tp, pp) blocks merges to exactly the one-process search.

What a sweep across workers relies on (``twin.scenarios`` runs each part as its own
Celery task): every count, the best configurations *and their order* (ties broken
in the whole space's order) and the Pareto front (a repeated point represented by
its first configuration) equal :func:`search`'s; only the timings differ.
"""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulation.training import MODELS, model_from_params, search, system_for_accelerator
from simulation.training.fidelity import ACCELERATORS
from simulation.training.search import (
    PartialSearch,
    merge_search,
    pareto_front,
    search_blocks,
    search_part,
)

A100 = ACCELERATORS["a100-sxm-80gb"]
H100 = ACCELERATORS["h100-sxm5-80gb"]
TIMINGS = ("wall_s", "configs_per_s")


def _without_timings(result: dict) -> dict:
    return {k: v for k, v in result.items() if k not in TIMINGS}


def _split(model, system, cards, batch, *, parts, limits=None, objective="time", top=10):
    blocks = search_blocks(model, system, cards, limits)
    chunks = [list(range(i, blocks, parts)) for i in range(min(parts, blocks))]
    partials = [search_part(model, system, cards, batch, limits=limits, objective=objective,
                            top=top, blocks=chunk) for chunk in chunks]
    # through JSON, as between workers
    partials = [PartialSearch.from_dict(json.loads(json.dumps(p.to_dict()))) for p in partials]
    return merge_search(partials, model, system, objective=objective, top=top)


@pytest.mark.parametrize("objective", ["time", "energy", "cost"])
@pytest.mark.parametrize("parts", [2, 5, 64])
def test_split_search_equals_the_single_process_one(objective: str, parts: int) -> None:
    model, system = MODELS["gpt3-175b"], system_for_accelerator(A100, 256)
    whole = search(model, system, 256, 256, objective=objective, top=20).to_dict()
    split = _split(model, system, 256, 256, parts=parts, objective=objective, top=20).to_dict()
    assert whole["configs_evaluated"] > 10_000 and len(whole["pareto"]) > 1
    assert _without_timings(split) == _without_timings(whole)
    assert [b["execution"] for b in split["best"]] == [b["execution"] for b in whole["best"]]


def test_ties_are_broken_in_the_whole_space_order() -> None:
    """With ``overlap`` on and off giving equal times for many layouts, the ranking
    has ties; the split run must pick the same representatives in the same order."""
    model, system = MODELS["llama3-8b"], system_for_accelerator(H100, 64)
    whole = search(model, system, 64, 128, top=100).to_dict()
    times = [b["step_time_s"] for b in whole["best"]]
    assert len(set(times)) < len(times), "the case must have ties to test anything"
    split = _split(model, system, 64, 128, parts=7, top=100).to_dict()
    assert _without_timings(split) == _without_timings(whole)


def test_a_split_with_nothing_that_fits_says_so_like_the_whole() -> None:
    big = model_from_params({"base": "gpt3-175b", "layers": 192})
    system = system_for_accelerator(A100, 8)
    whole = search(big, system, 8, 8, limits={"zero": [0]}).to_dict()
    split = _split(big, system, 8, 8, parts=3, limits={"zero": [0]}).to_dict()
    assert whole["best"] == [] and whole["notes"]
    assert _without_timings(split) == _without_timings(whole)


def test_precision_rejections_are_shared_out_by_block() -> None:
    """An fp8 limit on an A100 (no fp8 peak) is rejected per block: the parts' counts
    add up to the whole's."""
    model, system = MODELS["llama3-8b"], system_for_accelerator(A100, 32)
    limits = {"precision": ["bf16", "fp8"], "tp": [1, 2, 4, 8], "pp": [1, 2, 4]}
    whole = search(model, system, 32, 64, limits=limits).to_dict()
    split = _split(model, system, 32, 64, parts=5, limits=limits).to_dict()
    assert any(k.startswith("precision") for k in whole["rejected"])
    assert split["rejected"] == whole["rejected"]
    assert split["configs_enumerated"] == whole["configs_enumerated"]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(1, 3)),
                min_size=1, max_size=40),
       st.integers(1, 6))
def test_pareto_of_parts_fronts_is_the_pareto_of_the_whole(points, parts) -> None:
    """Front of the union = front of the union of the parts' fronts (contiguous
    parts in order; repeated points keep their first occurrence)."""
    import numpy as np

    t, e, k = (np.array(c, dtype=float) for c in zip(*points, strict=True))
    whole = pareto_front(t, e, k).tolist()
    chunks = np.array_split(np.arange(len(points)), min(parts, len(points)))
    cand = sorted(int(c[i]) for c in chunks if len(c)
                  for i in pareto_front(t[c], e[c], k[c]))
    ci = np.array(cand)
    assert ci[pareto_front(t[ci], e[ci], k[ci])].tolist() == whole


def test_context_parallel_blocks_split_and_merge_exactly() -> None:
    """With ``cp`` in the limits a block is a (tp, pp, cp) triple; the split still
    merges to the whole search."""
    model, system = MODELS["llama3-8b"], system_for_accelerator(H100, 64)
    limits = {"cp": [1, 2, 4], "tp": [1, 2, 4, 8], "pp": [1, 2, 4]}
    assert search_blocks(model, system, 64, limits) == 36
    whole = search(model, system, 64, 128, limits=limits, top=15).to_dict()
    split = _split(model, system, 64, 128, parts=6, limits=limits, top=15).to_dict()
    assert any(b["execution"].get("cp", 1) > 1 for b in whole["pareto"] + whole["best"]) \
        or whole["rejected"]
    assert _without_timings(split) == _without_timings(whole)


def test_nvlink_domain_sizes_split_and_merge_exactly() -> None:
    """``limits.nvlink_domain`` multiplies the space like the precision does; parts
    that price different domain sizes (on their own widest mesh) merge to the whole."""
    model, system = MODELS["llama3-8b"], system_for_accelerator(H100, 64)
    limits = {"nvlink_domain": [4, 8, 16], "tp": [1, 2, 4, 8, 16], "pp": [1, 2, 4],
              "micro_batch": [1, 2]}
    whole = search(model, system, 64, 128, limits=limits, top=30).to_dict()
    split = _split(model, system, 64, 128, parts=4, limits=limits, top=30).to_dict()
    assert {b["execution"]["nvlink_domain"] for b in whole["best"] + whole["pareto"]} >= {0, 16}
    assert _without_timings(split) == _without_timings(whole)
