"""The cluster as a what-if sees it: servers (nodes) with their cards, racks, switches.

:class:`Layout` is what the engine needs besides the snapshot: which card ids sit in
which server slot (the scheduler's node × slot grid, ``simulation.scheduling.Nodes``),
each server's rack and supernode, which servers a network switch carries (a switch
down cuts them off), and the cards' power figures (TDP, idle, the DVFS curve of
``simulation.training.energy``). Plain data, JSON in and out, built by the twin from
its inventory in a few bulk queries.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from simulation.scheduling import Nodes

from .events import WhatIfInputError

__all__ = ["DEFAULT_CLOCK_POWER", "Layout"]

I64 = npt.NDArray[np.int64]

DEFAULT_CLOCK_POWER: tuple[tuple[float, float], ...] = tuple(
    (f, f * (0.6 + 0.4 * f) ** 2) for f in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0))
"""g(f) = f·(0.6 + 0.4f)², ``simulation.training.system.default_clock_power``'s curve."""


@dataclass(frozen=True)
class Layout:
    """Servers in node order: ``cards[i]`` the card ids of server ``server_ids[i]`` by
    slot (``-1``: an empty slot), its ``rack_ids[i]`` and ``supernode_ids[i]``;
    ``switches`` maps a switch id to the server ids it carries."""

    server_ids: tuple[int, ...]
    rack_ids: tuple[int, ...]
    supernode_ids: tuple[int, ...]
    cards: tuple[tuple[int, ...], ...]
    switches: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    tdp_w: float = 700.0
    idle_w: float = 100.0
    clock_power: tuple[tuple[float, float], ...] = DEFAULT_CLOCK_POWER
    accelerator: Mapping[str, Any] | None = None
    """The cards' catalogue figures (``simulation.training.system_for_accelerator``'s
    input): with them, jobs that name a training model run at its speed
    (:mod:`.speed`); None: every job keeps its expected duration's pace."""
    rack_static_w: tuple[float, ...] = ()
    """The non-card IT load of each rack (:meth:`rack_index` order), W drawn whatever the
    load: its servers' static draw (CPUs, fans, NICs: ``Server.overhead_w``) and its
    network devices (switches and optics: ``NetworkDevice.power_w``), the terms of the
    hardware's rack draw besides the cards. Empty: none known (0). It reaches the plant
    and the feeds (:mod:`.facility`), not the cards' figures."""

    def __post_init__(self) -> None:
        n = len(self.server_ids)
        for name in ("rack_ids", "supernode_ids", "cards"):
            if len(getattr(self, name)) != n:
                raise WhatIfInputError(f"layout.{name}", f"one entry per server ({n})")
        if n == 0:
            raise WhatIfInputError("layout.server_ids", "no servers to run on")
        if not 0 <= self.idle_w <= self.tdp_w:
            raise WhatIfInputError("layout.idle_w", "0 ≤ idle ≤ TDP")
        if self.rack_static_w:
            racks = len(dict.fromkeys(self.rack_ids))
            w = np.asarray(self.rack_static_w, float)
            if w.shape != (racks,) or not np.all(np.isfinite(w)) or (w < 0).any():
                raise WhatIfInputError("layout.rack_static_w",
                                       f"one finite W ≥ 0 per rack ({racks})")

    # ------------------------------------------------------------ lookups
    @property
    def width(self) -> int:
        return max(len(c) for c in self.cards)

    def card_grid(self) -> I64:
        """servers × slots of card ids (-1: no card)."""
        grid = np.full((len(self.cards), self.width), -1, np.int64)
        for i, row in enumerate(self.cards):
            grid[i, :len(row)] = row
        return grid

    def card_place(self) -> dict[int, tuple[int, int]]:
        """card id → (node, slot)."""
        grid = self.card_grid()
        n, s = np.nonzero(grid >= 0)
        return {int(c): (int(a), int(b)) for c, a, b in zip(grid[n, s].tolist(), n.tolist(),
                                                            s.tolist(), strict=True)}

    def static_w(self) -> npt.NDArray[np.float64]:
        """W of non-card IT load per rack (:meth:`rack_index` order; zeros if unknown)."""
        if self.rack_static_w:
            return np.asarray(self.rack_static_w, np.float64)
        return np.zeros(len(dict.fromkeys(self.rack_ids)))

    def rack_index(self) -> tuple[list[int], I64]:
        """(distinct rack ids in first-seen order, rack index per node)."""
        racks = list(dict.fromkeys(self.rack_ids))
        pos = {r: i for i, r in enumerate(racks)}
        return racks, np.array([pos[r] for r in self.rack_ids], np.int64)

    def nodes(self, failed: set[int]) -> Nodes:
        """The scheduler's nodes: one per server, ``failed`` card ids and empty slots out."""
        grid = self.card_grid()
        records = []
        for i, sid in enumerate(self.server_ids):
            row = grid[i]
            bad = [g for g in range(len(self.cards[i])) if row[g] < 0 or int(row[g]) in failed]
            records.append({"name": str(sid), "gpus": len(self.cards[i]), "failed_gpus": bad,
                            "rack": self.rack_ids[i], "supernode": self.supernode_ids[i],
                            "server": sid})
        return Nodes.from_records(records)

    # ------------------------------------------------------------ JSON
    def to_dict(self) -> dict[str, Any]:
        return {"server_ids": list(self.server_ids), "rack_ids": list(self.rack_ids),
                "supernode_ids": list(self.supernode_ids),
                "cards": [list(c) for c in self.cards],
                "switches": {str(k): list(v) for k, v in self.switches.items()},
                "tdp_w": self.tdp_w, "idle_w": self.idle_w,
                "clock_power": [list(p) for p in self.clock_power],
                **({"accelerator": dict(self.accelerator)} if self.accelerator else {}),
                **({"rack_static_w": list(self.rack_static_w)} if self.rack_static_w
                   else {})}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Layout:
        try:
            return cls(tuple(int(x) for x in data["server_ids"]),
                       tuple(int(x) for x in data["rack_ids"]),
                       tuple(int(x) for x in data["supernode_ids"]),
                       tuple(tuple(int(c) for c in row) for row in data["cards"]),
                       {int(k): tuple(int(s) for s in v)
                        for k, v in (data.get("switches") or {}).items()},
                       float(data.get("tdp_w", 700.0)), float(data.get("idle_w", 100.0)),
                       tuple((float(a), float(b)) for a, b in
                             data.get("clock_power") or DEFAULT_CLOCK_POWER),
                       dict(data["accelerator"]) if data.get("accelerator") else None,
                       tuple(float(w) for w in data.get("rack_static_w") or ()))
        except (KeyError, TypeError, ValueError) as exc:
            raise WhatIfInputError("layout", f"not a layout: {exc}") from exc
