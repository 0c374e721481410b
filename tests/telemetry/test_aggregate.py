"""Rollup statistics: ``reduce_levels`` (coarser levels from finer ones) against a
brute-force reduction of every group's cards."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from twin.telemetry.processing.aggregate import (
    F32_SUM_MAX,
    reduce_groups,
    reduce_levels,
    reduce_levels_and_all,
)
from twin.telemetry.state import GroupIndex


def _index(level: str, of_card: np.ndarray) -> GroupIndex:
    """A GroupIndex as the layouts build one: ``perm`` only when cards are not
    already sorted by group."""
    groups = int(of_card.max()) + 1
    perm = None if (np.diff(of_card) >= 0).all() else np.argsort(of_card, kind="stable")
    cards = np.bincount(of_card, minlength=groups).astype(np.int32)
    starts = np.concatenate([[0], np.cumsum(cards)[:-1]]).astype(np.int64)
    return GroupIndex(level=level, ids=np.arange(groups) + 100, names=[""] * groups,
                      of_card=of_card.astype(np.int32), perm=perm, starts=starts, cards=cards,
                      budget_w=np.zeros(groups), static_w=np.zeros(groups))


def _brute(values: np.ndarray, of_card: np.ndarray) -> np.ndarray:
    groups = int(of_card.max()) + 1
    out = np.full((values.shape[0], 5, groups), np.nan)
    for g in range(groups):
        v = values[:, of_card == g].astype(np.float64)
        finite = np.isfinite(v)
        count = finite.sum(axis=1)
        total = np.where(finite, v, 0).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: NaN wanted
            out[:, 0, g] = np.where(count > 0, total / np.maximum(count, 1), np.nan)
            out[:, 1, g] = np.nanmin(np.where(finite, v, np.nan), axis=1)
            out[:, 2, g] = np.nanmax(np.where(finite, v, np.nan), axis=1)
        out[:, 3, g], out[:, 4, g] = total, count
    return out


def _cluster(rng: np.random.Generator, racks_per_sn: list[int], rack_cards: int):
    rack_of, sn_of = [], []
    rack = 0
    for sn, racks in enumerate(racks_per_sn):
        for _ in range(racks):
            size = int(rng.integers(rack_cards // 2, rack_cards + 1))
            rack_of += [rack] * size
            sn_of += [sn] * size
            rack += 1
    return np.array(rack_of), np.array(sn_of)


@pytest.mark.parametrize("rack_cards", [40, 2 * F32_SUM_MAX])  # float32 and float64 sums
def test_coarser_levels_from_finer_ones_equal_a_reduction_of_the_cards(rack_cards):
    rng = np.random.default_rng(3)
    rack_of, sn_of = _cluster(rng, [3, 5, 2, 4], rack_cards)
    n = len(rack_of)
    values = rng.uniform(0, 1_000, (6, n)).astype(np.float32)
    values[1, rng.random(n) < 0.3] = np.nan  # holes
    values[2, rack_of == 4] = np.nan  # a rack with no reading of metric 2
    values[3] = np.nan  # a metric nobody reports
    groups = {"rack": _index("rack", rack_of), "supernode": _index("supernode", sn_of),
              "cluster": _index("cluster", np.zeros(n, int))}
    got = reduce_levels(values, groups)
    assert list(got) == ["rack", "supernode", "cluster"]
    for level, of_card in (("rack", rack_of), ("supernode", sn_of),
                           ("cluster", np.zeros(n, int))):
        want = _brute(values, of_card)
        assert got[level].shape == want.shape and got[level].dtype == np.float32
        np.testing.assert_array_equal(got[level][:, [1, 2, 4]], want[:, [1, 2, 4]].astype(
            np.float32), err_msg=level)  # min, max, count: exact
        np.testing.assert_allclose(got[level][:, [0, 3]], want[:, [0, 3]], rtol=1e-6,
                                   err_msg=level)
        # and the same as reducing that level from the cards
        np.testing.assert_allclose(got[level], reduce_groups(values, groups[level]), rtol=1e-6)
    # Over every card, from the coarsest level asked for (what a tick shard adds up).
    shard_levels = {k: groups[k] for k in ("rack", "supernode")}
    _, (count, total, vmin, vmax) = reduce_levels_and_all(values, shard_levels)
    every = _brute(values, np.zeros(n, int))[:, :, 0]
    np.testing.assert_array_equal(count, every[:, 4])
    np.testing.assert_allclose(total, every[:, 3], rtol=1e-6)
    np.testing.assert_array_equal(vmin, every[:, 1].astype(np.float32))
    np.testing.assert_array_equal(vmax, every[:, 2].astype(np.float32))


def test_a_level_that_does_not_nest_is_reduced_from_the_cards():
    rng = np.random.default_rng(5)
    n = 600
    rack_of = np.repeat(np.arange(15), 40)
    shuffled = rng.permutation(np.arange(n) % 7)  # groups across racks, cards unsorted
    values = rng.uniform(0, 100, (3, n)).astype(np.float32)
    groups = {"rack": _index("rack", rack_of), "row": _index("row", shuffled)}
    assert groups["row"].perm is not None
    got = reduce_levels(values, groups, ["row"])
    assert list(got) == ["row"]
    np.testing.assert_allclose(got["row"], _brute(values, shuffled), rtol=1e-6)


def test_a_million_card_sum_keeps_float64_precision():
    """One group of a million cards: a sequential float32 sum would drift by percents."""
    n = 1 << 20
    values = np.full((1, n), 700.1, np.float32)
    got = reduce_groups(values, _index("cluster", np.zeros(n, int)))
    assert got[0, 3, 0] == pytest.approx(float(np.float32(700.1)) * n, rel=1e-7)
    assert got[0, 0, 0] == pytest.approx(700.1, rel=1e-6)


def test_no_level_is_a_clear_error():
    with pytest.raises(ValueError, match="at least one level"):
        reduce_levels_and_all(np.zeros((1, 4), np.float32), {}, [])
