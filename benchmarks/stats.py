"""Percentiles for the benchmark scripts (one definition, so "p99" means the same
in every table of docs/benchmarks.md)."""
from __future__ import annotations

__all__ = ["pct"]


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0–100): an observed value, never an
    interpolation between two runs; NaN for no values (a phase that measured none)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100.0 * len(ordered) + 0.5)))
    return ordered[rank - 1]
