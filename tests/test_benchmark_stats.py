"""The benchmarks' one percentile (benchmarks/stats.py): nearest rank, an observed
value, and NaN for a phase that measured nothing."""
from __future__ import annotations

import math

from benchmarks.stats import pct


def test_nearest_rank_is_an_observed_value():
    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert pct(values, 50) == 3.0
    assert pct(values, 99) == 5.0
    assert pct(values, 1) == 1.0
    assert pct([0.1, 0.2, 0.3, 0.4], 99) == 0.4  # never between two runs


def test_no_values_is_nan():
    assert math.isnan(pct([], 50))
