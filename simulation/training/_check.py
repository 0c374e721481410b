"""Small validators shared by the input dataclasses (each raises TrainingInputError)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .errors import TrainingInputError

__all__ = ["check_keys", "choice", "flag", "integer", "number"]


def check_keys(data: Mapping[str, Any], allowed: set[str], path: str) -> None:
    """Refuse unknown keys, naming the first and the allowed ones."""
    for key in data:
        if key not in allowed:
            raise TrainingInputError(
                f"{path}{key}", f"unknown field (allowed: {', '.join(sorted(allowed))})"
            )


def integer(value: Any, field: str, *, low: int = 1, high: int | None = None) -> int:
    """An int in [low, high] (bools refused)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TrainingInputError(field, f"an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"≥ {low}" if high is None else f"in [{low}, {high}]"
        raise TrainingInputError(field, f"must be {bound}, got {value}")
    return value


def number(
    value: Any, field: str, *, low: float = 0.0, high: float | None = None, open_low: bool = False
) -> float:
    """A finite float in [low, high] (or (low, high] with ``open_low``)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TrainingInputError(field, f"a finite number, got {value!r}")
    v = float(value)
    if v < low or (open_low and v == low) or (high is not None and v > high):
        lo = "(" if open_low else "["
        hi = "∞)" if high is None else f"{high}]"
        raise TrainingInputError(field, f"must be in {lo}{low}, {hi}, got {v}")
    return v


def choice(value: Any, field: str, options: tuple[str, ...]) -> str:
    """One of ``options``."""
    if value not in options:
        raise TrainingInputError(field, f"unknown {value!r} (choose from {', '.join(options)})")
    return str(value)


def flag(value: Any, field: str) -> bool:
    """A JSON boolean."""
    if not isinstance(value, bool):
        raise TrainingInputError(field, f"true or false, got {value!r}")
    return value
