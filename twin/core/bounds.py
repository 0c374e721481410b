"""Bounds on physical figures, said once and enforced three times.

A figure's field carries :class:`AtLeast` / :class:`AtMost` validators. The
model's ``full_clean()`` runs them (the admin's forms too), the API's
``ValidatedModelSerializer`` turns them into its fields' ``min_value`` and
``max_value`` with the same message (so the schema shows ``minimum`` and
``maximum``), and each model repeats them in a named ``CheckConstraint`` for
writes that bypass validation (bulk builders, raw updates). Messages carry the
unit: "At most 1,000,000 W; got 1e+15."
"""
from __future__ import annotations

from typing import Any

from django.core.validators import MaxValueValidator, MinValueValidator
from django.utils.deconstruct import deconstructible

__all__ = ["AtLeast", "AtMost", "bounded", "figure"]


def figure(value: float, unit: str = "") -> str:
    """``1000000, "W"`` → ``"1,000,000 W"``; ``0.5, "ns"`` → ``"0.5 ns"``."""
    text = f"{int(value):,}" if float(value).is_integer() else f"{value:,g}"
    return f"{text} {unit}".strip()


def _messages(said: str, message: str | None) -> tuple[str, str]:
    """(the API's message, Django's: with the value that was given)."""
    text = message or said
    return text, text.removesuffix(".").replace("%", "%%") + "; got %(show_value)s."


@deconstructible
class AtMost(MaxValueValidator):
    """``value ≤ limit_value``, said with the unit (or ``message``)."""

    def __init__(self, limit_value: float, unit: str = "", message: str | None = None) -> None:
        self.unit = unit
        self.api_message, django_message = _messages(
            f"At most {figure(limit_value, unit)}.", message)
        super().__init__(limit_value, message=django_message)


@deconstructible
class AtLeast(MinValueValidator):
    """``value ≥ limit_value``, said with the unit (or ``message``)."""

    def __init__(self, limit_value: float, unit: str = "", message: str | None = None) -> None:
        self.unit = unit
        self.api_message, django_message = _messages(
            f"At least {figure(limit_value, unit)}.", message)
        super().__init__(limit_value, message=django_message)


def bounded(low: float | None, high: float | None, unit: str = "") -> list[Any]:
    """The validators of a figure from ``low`` to ``high`` (either may be None)."""
    out: list[Any] = []
    if low is not None:
        out.append(AtLeast(low, unit))
    if high is not None:
        out.append(AtMost(high, unit))
    return out
