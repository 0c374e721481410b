"""Racks over budget, as a budget check or a summary reports them.

Plain values: the rule that finds them is ``twin.hardware.models.racks``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["NAMED_OVERLOADS", "OVER_BUDGET", "OverBudget", "Overload"]

#: Racks an over-budget message names before it says "and N more".
NAMED_OVERLOADS = 5

#: The code of every refusal by the budget rule (a rack's budget, the rating of a PDU,
#: CDU or feed above it). The API answers it 409 (``twin.core.api.exceptions``): the
#: write is well formed, it conflicts with what the racks already draw.
OVER_BUDGET = "over_budget"


@dataclass(frozen=True)
class Overload:
    """A rack drawing (or about to draw) more than its budget."""

    rack_id: int
    name: str
    cluster: str
    draw_w: int
    budget_w: int

    def __str__(self) -> str:
        return f"{self.name} ({self.draw_w:,} W of {self.budget_w:,} W)"

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.rack_id, "name": self.name, "cluster": self.cluster,
                "draw_w": self.draw_w, "budget_w": self.budget_w}


@dataclass(frozen=True)
class OverBudget:
    """Racks over budget: how many, and the worst few (most watts over first)."""

    count: int
    racks: tuple[Overload, ...]

    def describe(self) -> str:
        """``3 racks over budget: r0 (49,000 W of 40,000 W), …`` (then ``and N more``)."""
        several_clusters = len({rack.cluster for rack in self.racks}) > 1
        named = ", ".join(f"{rack.cluster} / {rack}" if several_clusters else str(rack)
                          for rack in self.racks)
        more = self.count - len(self.racks)
        noun = "rack" if self.count == 1 else "racks"
        return f"{self.count:,} {noun} over budget: {named}" + (
            f" and {more:,} more" if more > 0 else "")

    def as_dict(self) -> dict[str, Any]:
        return {"count": self.count, "racks": [rack.as_dict() for rack in self.racks]}

    def __add__(self, other: OverBudget | None) -> OverBudget:
        if other is None:
            return self
        racks: dict[int, Overload] = {}
        for rack in (*self.racks, *other.racks):  # one write's checks: keep the highest draw
            if rack.rack_id not in racks or rack.draw_w > racks[rack.rack_id].draw_w:
                racks[rack.rack_id] = rack
        unnamed = self.count - len(self.racks) + other.count - len(other.racks)
        return OverBudget(len(racks) + unnamed,
                          tuple(sorted(racks.values(), key=lambda r: r.budget_w - r.draw_w)))
