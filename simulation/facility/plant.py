"""The plant as data: the one input every facility model reads.

A site's power chain (utility feed → transformers/UPS → PDUs or busways → racks'
power shelves) and cooling chain (racks → technology-cooling loops → CDUs →
facility-water loop → cooling towers, dry coolers or chillers; CRAHs for air-cooled
rows) are two trees of named parts, as ExaDigiT/RAPS describes a machine in
``power.json`` / ``cooling.json`` and the Modelica Buildings library names
components by what they are. The engine (the other modules of this package) reads
this; the twin builds it from its rows (``twin/facility``); a test or notebook types
one by hand. Nothing here is Django, and nothing is stored twice: losses, PUE and
temperatures are computed from these parts each step, never written into them.

Racks are arrays (a million-card site has ~27,000 racks): ``RackSet`` holds one
entry per rack, indexing into the element tuples.

Keys are strings unique within their chain (``"feed-a"``, ``"cdu-3"``); a parent
names the element upstream (power comes *from* the parent; heat goes *to* the
parent). Roots have ``parent=None``: power feeds, and heat rejection.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "COOLING_KINDS",
    "POWER_KINDS",
    "REDUNDANCY",
    "CoolingElement",
    "EfficiencyCurve",
    "Plant",
    "PlantError",
    "PowerElement",
    "RackSet",
    "Site",
]

POWER_KINDS = ("feed", "transformer", "ups", "pdu", "busway", "power_shelf")
"""Power-chain parts, upstream to downstream."""

COOLING_KINDS = ("cooling_tower", "dry_cooler", "chiller", "facility_loop", "cdu",
                 "tcs_loop", "crah")
"""Cooling-chain parts: heat rejection, loops, CDUs, and CRAH units for air rows."""

REDUNDANCY = ("N", "N+1", "2N")
"""How many of ``units`` may carry the load: N all, N+1 all but one, 2N half."""


class PlantError(ValueError):
    """A plant that cannot be simulated; ``field`` names the offending input
    (``"cooling[3].parent"``) so an API can answer 400 with it."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.message = message


@dataclass(frozen=True)
class EfficiencyCurve:
    """Conversion efficiency against load fraction, linear between points (a UPS or
    transformer is worst at light load). One point means a constant."""

    load_fraction: tuple[float, ...] = (1.0,)
    efficiency: tuple[float, ...] = (1.0,)

    def at(self, load_fraction: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Efficiency at each load fraction (clamped to the curve's ends)."""
        out: npt.NDArray[np.float64] = np.interp(np.asarray(load_fraction, dtype=float),
                                                 self.load_fraction, self.efficiency)
        return out


@dataclass(frozen=True)
class Site:
    """Where the plant stands: design temperatures (°C) drive heat rejection;
    ``weather`` optionally gives (seconds from start, dry bulb, wet bulb) points;
    ``contract_kw`` is the utility contract the site must stay under (None: none)."""

    name: str = "site"
    dry_bulb_c: float = 35.0
    wet_bulb_c: float = 24.0
    contract_kw: float | None = None
    weather: tuple[tuple[float, float, float], ...] = ()


@dataclass(frozen=True)
class PowerElement:
    """One part of the power chain. ``rating_kw`` is per unit; the usable rating is
    set by ``redundancy`` (see :data:`REDUNDANCY`)."""

    key: str
    kind: str
    rating_kw: float
    parent: str | None = None
    units: int = 1
    redundancy: str = "N"
    efficiency: EfficiencyCurve = field(default_factory=EfficiencyCurve)
    down: bool = False


@dataclass(frozen=True)
class CoolingElement:
    """One part of the cooling chain. ``capacity_kw`` is per unit at design
    conditions; flows in kg/s; ``approach_c`` is the design approach of its heat
    exchanger (CDU: facility supply → technology-loop supply; tower: wet bulb →
    supply); ``volume_l`` is the coolant it holds (for transients); pump and fan
    powers are at design flow (affinity laws scale them)."""

    key: str
    kind: str
    capacity_kw: float
    parent: str | None = None
    units: int = 1
    redundancy: str = "N"
    design_flow_kg_s: float = 0.0
    approach_c: float = 0.0
    supply_setpoint_c: float | None = None
    pump_kw: float = 0.0
    fan_kw: float = 0.0
    volume_l: float = 0.0
    down: bool = False


@dataclass(frozen=True, eq=False)
class RackSet:
    """Every rack of the site as arrays of one length (index = rack position).

    ``power_parent`` / ``cooling_parent`` index into :attr:`Plant.power` /
    :attr:`Plant.cooling` (the PDU or shelf that feeds it; the CDU or CRAH that
    takes its heat). ``liquid_fraction`` is the share of the rack's heat taken by
    liquid (0 for an air rack); the rest goes to room air (CRAH: ``air_parent``, or
    ``cooling_parent`` for an air rack)."""

    ids: npt.NDArray[np.int64]
    power_parent: npt.NDArray[np.int64]
    cooling_parent: npt.NDArray[np.int64]
    budget_w: npt.NDArray[np.float64]
    liquid_fraction: npt.NDArray[np.float64]
    names: tuple[str, ...] = ()
    air_parent: npt.NDArray[np.int64] | None = None
    """Index into :attr:`Plant.cooling` of the CRAH taking each rack's air share
    (``1 - liquid_fraction``), -1 where none is named; None: not given at all."""
    nameplate_w: npt.NDArray[np.float64] | None = None
    """The nameplate draw of each rack's installed hardware (W), what the twin's rating
    rule plans the chains for; None: plan for ``budget_w`` (every rack at its budget)."""
    card_tdp_w: npt.NDArray[np.float64] | None = None
    """The TDP of each rack's hottest card (W; 0: the rack holds no card, e.g. a network
    rack); None: not given (the engine takes a card as the rack's draw over
    ``ThermalParams.cards_per_rack``). With it a card's junction-to-coolant resistance
    follows its TDP and, where ``card_w`` is not measured, a card draws its TDP × the
    rack's load over its nameplate (:mod:`~simulation.facility.thermal`)."""

    def __len__(self) -> int:
        return int(self.ids.shape[0])


@dataclass(frozen=True, eq=False)
class Plant:
    """A site, its two chains and its racks: everything the engine reads."""

    site: Site
    power: tuple[PowerElement, ...]
    cooling: tuple[CoolingElement, ...]
    racks: RackSet

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON (arrays as lists): the same shape the REST API accepts."""
        from dataclasses import asdict

        return {
            "site": asdict(self.site),
            "power": [asdict(p) for p in self.power],
            "cooling": [asdict(c) for c in self.cooling],
            "racks": {name: (getattr(self.racks, name).tolist()
                             if name != "names" else list(self.racks.names))
                      for name in ("ids", "power_parent", "cooling_parent", "budget_w",
                                   "liquid_fraction", "names")
                      } | ({} if self.racks.air_parent is None
                           else {"air_parent": self.racks.air_parent.tolist()})
                        | ({} if self.racks.nameplate_w is None
                           else {"nameplate_w": self.racks.nameplate_w.tolist()})
                        | ({} if self.racks.card_tdp_w is None
                           else {"card_tdp_w": self.racks.card_tdp_w.tolist()}),
        }
