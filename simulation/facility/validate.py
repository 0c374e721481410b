"""Checks a :class:`~simulation.facility.plant.Plant` before the engine reads it.

Every refusal is a :class:`~simulation.facility.plant.PlantError` whose ``field``
names the input (``"cooling[3].parent"``, ``"racks.liquid_fraction[17]"``), so an API
answers 400 with that field and a CLI prints one line. The rules are the ones the
physics needs: positive ratings, capacities and flows (a zero would divide), a
parent that exists and is of a kind that can take the child's power or heat, no
chain that feeds itself, a liquid-cooled rack on a CDU (or its technology loop), and
efficiencies in (0, 1].

>>> from simulation.facility.plant import (CoolingElement, Plant, PowerElement,
...     RackSet, Site)
>>> import numpy as np
>>> racks = RackSet(ids=np.array([1]), power_parent=np.array([0]),
...     cooling_parent=np.array([1]), budget_w=np.array([40e3]),
...     liquid_fraction=np.array([0.9]))
>>> plant = Plant(Site(), (PowerElement("feed", "feed", 100.0),),
...     (CoolingElement("tower", "cooling_tower", 100.0, approach_c=4.0),
...      CoolingElement("crah", "crah", 50.0, parent="tower", design_flow_kg_s=2.0)),
...     racks)
>>> try:
...     validate(plant)
... except PlantError as err:
...     print(err.field, "|", err.message[:50])
racks.cooling_parent[0] | a liquid-cooled rack (liquid_fraction 0.9) needs a
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from simulation.facility.plant import (
    COOLING_KINDS,
    POWER_KINDS,
    REDUNDANCY,
    CoolingElement,
    EfficiencyCurve,
    Plant,
    PlantError,
    PowerElement,
)

__all__ = [
    "HEAT_REJECTION_KINDS",
    "LIQUID_RACK_PARENTS",
    "units_out",
    "usable_units",
    "validate",
]

HEAT_REJECTION_KINDS = ("cooling_tower", "dry_cooler", "chiller")
"""Cooling roots: they reject the site's heat to ambient air."""

LIQUID_RACK_PARENTS = ("cdu", "tcs_loop")
"""What may take a liquid-cooled rack's heat."""

_COOLING_PARENTS: dict[str, tuple[str, ...]] = {
    "tcs_loop": ("cdu",),
    "cdu": ("facility_loop", *HEAT_REJECTION_KINDS),
    "crah": ("facility_loop", *HEAT_REJECTION_KINDS),
    "facility_loop": HEAT_REJECTION_KINDS,
    "chiller": ("cooling_tower", "dry_cooler"),
}
"""Which kinds may be the parent of which (heat goes to the parent); a kind not
listed (heat rejection) must be a root. A chiller may be a root (air-cooled) or reject
its condenser heat to a tower or dry cooler (water-cooled)."""


def usable_units(units: int, redundancy: str) -> int:
    """Units the planning rule lets carry load: N all, N+1 all but one, 2N half
    (Uptime Institute tier definitions; TIA-942)."""
    if redundancy == "N+1":
        return units - 1
    if redundancy == "2N":
        return units // 2
    return units


def units_out(units: npt.ArrayLike, failed: npt.ArrayLike, degraded: npt.ArrayLike
              ) -> npt.NDArray[np.int64]:
    """Units out of service per element, from its counted failures and its status.

    ``failed`` units are out. A **degraded** element (still running, below its rating: a
    tripped pump module, a fouled exchanger, a tower cell off) whose lost units are not
    counted has lost one unit — the least loss a plant described in units (Uptime
    Institute, *Tier Standard: Topology*: capacity components, N + redundant ones) can
    express — but never its last (a degraded element runs; one that does not is
    ``failed``). Redundancy then decides what the rest carry (:func:`usable_units`):
    an N+1 CDU keeps its design duty, an N pair loses half, a 2N pair keeps all. A
    one-unit element has no unit to spare: degraded is a flag only there (count its
    loss as failed, or fail it).

    >>> units_out([2, 2, 3, 1, 2], [0, 1, 0, 0, 2], [True, True, False, True, True]).tolist()
    [1, 1, 0, 0, 2]
    """
    u = np.asarray(units, dtype=np.int64)
    f = np.minimum(np.asarray(failed, dtype=np.int64), u)
    d = np.asarray(degraded, dtype=bool)
    out: npt.NDArray[np.int64] = np.where(d & (f == 0), np.minimum(1, u - 1), f)
    return out


def _positive(value: float, name: str, *, allow_zero: bool = False) -> None:
    ok = math.isfinite(value) and (value >= 0 if allow_zero else value > 0)
    if not ok:
        bound = "≥ 0" if allow_zero else "> 0"
        raise PlantError(name, f"must be a finite number {bound}, got {value!r}")


def _units(units: int, redundancy: str, name: str) -> None:
    if redundancy not in REDUNDANCY:
        raise PlantError(f"{name}.redundancy",
                         f"unknown redundancy {redundancy!r}; one of {', '.join(REDUNDANCY)}")
    if units < 1:
        raise PlantError(f"{name}.units", f"must be ≥ 1, got {units}")
    if usable_units(units, redundancy) < 1:
        need = 2
        raise PlantError(f"{name}.units",
                         f"{redundancy} needs at least {need} units, got {units}")


def _curve(curve: EfficiencyCurve, name: str) -> None:
    lf, eff = curve.load_fraction, curve.efficiency
    if len(lf) != len(eff) or not lf:
        raise PlantError(name, "load_fraction and efficiency need the same, non-zero length")
    if any(not (math.isfinite(e) and 0 < e <= 1) for e in eff):
        raise PlantError(f"{name}.efficiency", f"every efficiency must be in (0, 1], got {eff}")
    if any(not math.isfinite(x) or x < 0 for x in lf) or any(
            b <= a for a, b in zip(lf, lf[1:], strict=False)):
        raise PlantError(f"{name}.load_fraction",
                         f"must be finite, ≥ 0 and strictly increasing, got {lf}")


def _parents(elements: Sequence[PowerElement | CoolingElement], chain: str) -> list[int]:
    """Parent index per element (−1 for a root); unknown parents and cycles refused."""
    index: dict[str, int] = {}
    for i, e in enumerate(elements):
        if e.key in index:
            raise PlantError(f"{chain}[{i}].key", f"duplicate key {e.key!r}")
        index[e.key] = i
    parent = []
    for i, e in enumerate(elements):
        if e.parent is None:
            parent.append(-1)
        elif e.parent not in index:
            raise PlantError(f"{chain}[{i}].parent", f"no {chain} element has key {e.parent!r}")
        else:
            parent.append(index[e.parent])
    state = [0] * len(elements)  # 0 unseen, 1 on the current walk, 2 known to reach a root
    for start in range(len(elements)):
        walk = []
        i = start
        while i >= 0 and state[i] == 0:
            state[i] = 1
            walk.append(i)
            i = parent[i]
        if i >= 0 and state[i] == 1:
            raise PlantError(f"{chain}[{i}].parent",
                             f"{elements[i].key!r} feeds itself through its parents "
                             "(a loop that feeds itself)")
        for j in walk:
            state[j] = 2
    return parent


def validate(plant: Plant) -> None:
    """Raise :class:`PlantError` for the first input the engine cannot simulate."""
    site = plant.site
    for name in ("dry_bulb_c", "wet_bulb_c"):
        if not math.isfinite(getattr(site, name)):
            raise PlantError(f"site.{name}", "must be a finite temperature")
    if site.wet_bulb_c > site.dry_bulb_c:
        raise PlantError("site.wet_bulb_c", "the wet bulb cannot exceed the dry bulb")
    if site.contract_kw is not None:
        _positive(site.contract_kw, "site.contract_kw")
    for k, point in enumerate(site.weather):
        if len(point) != 3 or not all(math.isfinite(x) for x in point):
            raise PlantError(f"site.weather[{k}]", "needs (seconds, dry bulb, wet bulb), finite")
    if not plant.power:
        raise PlantError("power", "a plant needs at least one power element (a feed)")
    for i, p in enumerate(plant.power):
        name = f"power[{i}]"
        if p.kind not in POWER_KINDS:
            raise PlantError(f"{name}.kind",
                             f"unknown kind {p.kind!r}; one of {', '.join(POWER_KINDS)}")
        _positive(p.rating_kw, f"{name}.rating_kw")
        _units(p.units, p.redundancy, name)
        _curve(p.efficiency, f"{name}.efficiency")
    _parents(plant.power, "power")
    for i, c in enumerate(plant.cooling):
        name = f"cooling[{i}]"
        if c.kind not in COOLING_KINDS:
            raise PlantError(f"{name}.kind",
                             f"unknown kind {c.kind!r}; one of {', '.join(COOLING_KINDS)}")
        _positive(c.capacity_kw, f"{name}.capacity_kw")
        _units(c.units, c.redundancy, name)
        for attr in ("design_flow_kg_s", "approach_c", "pump_kw", "fan_kw", "volume_l"):
            _positive(getattr(c, attr), f"{name}.{attr}", allow_zero=True)
        if c.kind in ("cdu", "facility_loop"):  # a CRAH's 0: sized from its capacity
            _positive(c.design_flow_kg_s, f"{name}.design_flow_kg_s")
        if c.kind in ("cdu", "cooling_tower", "dry_cooler"):
            _positive(c.approach_c, f"{name}.approach_c")
        if c.supply_setpoint_c is not None and not math.isfinite(c.supply_setpoint_c):
            raise PlantError(f"{name}.supply_setpoint_c", "must be a finite temperature")
    parent = _parents(plant.cooling, "cooling")
    for i, c in enumerate(plant.cooling):
        allowed = _COOLING_PARENTS.get(c.kind, ())
        if parent[i] < 0:
            if c.kind not in HEAT_REJECTION_KINDS:
                raise PlantError(f"cooling[{i}].parent",
                                 f"a {c.kind} must pass its heat to a parent "
                                 f"({', '.join(allowed)})")
        elif plant.cooling[parent[i]].kind not in allowed:
            up = plant.cooling[parent[i]]
            raise PlantError(f"cooling[{i}].parent",
                             f"a {c.kind} cannot pass its heat to {up.kind} {up.key!r}; "
                             f"allowed: {', '.join(allowed) or 'none (it is a root)'}")
    _validate_racks(plant)


def _validate_racks(plant: Plant) -> None:
    r = plant.racks
    n = len(r)
    for attr in ("power_parent", "cooling_parent", "budget_w", "liquid_fraction"):
        arr = getattr(r, attr)
        if arr.shape != (n,):
            raise PlantError(f"racks.{attr}", f"needs one entry per rack ({n}), got {arr.shape}")
    for attr in ("air_parent", "nameplate_w", "card_tdp_w"):
        arr = getattr(r, attr)
        if arr is not None and arr.shape != (n,):
            raise PlantError(f"racks.{attr}", f"needs one entry per rack ({n}), got {arr.shape}")
    if r.names and len(r.names) != n:
        raise PlantError("racks.names", f"needs one name per rack ({n}) or none")

    def first_bad(mask: np.ndarray, attr: str, message: str) -> None:
        if mask.any():
            k = int(np.flatnonzero(mask)[0])
            raise PlantError(f"racks.{attr}[{k}]", message.format(v=getattr(r, attr)[k]))

    first_bad((r.power_parent < 0) | (r.power_parent >= len(plant.power)), "power_parent",
              "{v} is not an index of the power chain")
    first_bad((r.cooling_parent < 0) | (r.cooling_parent >= len(plant.cooling)),
              "cooling_parent", "{v} is not an index of the cooling chain")
    first_bad(~np.isfinite(r.budget_w) | (r.budget_w <= 0), "budget_w",
              "must be a finite number > 0, got {v}")
    if r.nameplate_w is not None:
        first_bad(~np.isfinite(r.nameplate_w) | (r.nameplate_w < 0), "nameplate_w",
                  "must be a finite number ≥ 0, got {v}")
    if r.card_tdp_w is not None:
        first_bad(~np.isfinite(r.card_tdp_w) | (r.card_tdp_w < 0), "card_tdp_w",
                  "must be a finite number ≥ 0, got {v}")
    if r.air_parent is not None:
        first_bad((r.air_parent < -1) | (r.air_parent >= len(plant.cooling)), "air_parent",
                  "{v} is not an index of the cooling chain (or -1)")
        kinds_ = [c.kind for c in plant.cooling]
        named = np.flatnonzero(r.air_parent >= 0)
        wrong = [k for k in named.tolist() if kinds_[int(r.air_parent[k])] != "crah"]
        if wrong:
            k = wrong[0]
            up = plant.cooling[int(r.air_parent[k])]
            raise PlantError(f"racks.air_parent[{k}]",
                             f"a rack's air share goes to a CRAH, not {up.kind} {up.key!r}")
    first_bad(~np.isfinite(r.liquid_fraction) | (r.liquid_fraction < 0)
              | (r.liquid_fraction > 1), "liquid_fraction", "must be in [0, 1], got {v}")
    kinds = np.array([c.kind for c in plant.cooling] or [""])
    parent_kind = kinds[r.cooling_parent]
    liquid_ok = np.isin(parent_kind, LIQUID_RACK_PARENTS)
    bad = (r.liquid_fraction > 0) & ~liquid_ok
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        up = plant.cooling[int(r.cooling_parent[k])]
        raise PlantError(f"racks.cooling_parent[{k}]",
                         f"a liquid-cooled rack (liquid_fraction {r.liquid_fraction[k]:g}) needs "
                         f"a CDU or technology loop as its cooling parent, not {up.kind} "
                         f"{up.key!r}")
    bad = (r.liquid_fraction == 0) & (parent_kind != "crah")
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        up = plant.cooling[int(r.cooling_parent[k])]
        raise PlantError(f"racks.cooling_parent[{k}]",
                         f"an air-cooled rack needs a CRAH as its cooling parent, not {up.kind} "
                         f"{up.key!r}")
