"""The one error the capacity planner raises on bad input."""
from __future__ import annotations

__all__ = ["CapacityInputError"]


class CapacityInputError(ValueError):
    """Bad input: ``field`` (a dotted path) and why, for a per-field 400."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")
