"""The rating rule: what every element of a site carries, from the racks' nameplate draw.

Power: a PDU, busway or shelf delivers the nameplate draw of the racks it feeds
(``Rack.objects.draw_by_rack()``, hardware's one definition of draw, one grouped
SQL pass); every element draws from its parent what it delivers divided by its
efficiency at that load (its curve at ``delivered / usable``), so losses downstream
are carried upstream. Cooling: a CDU or technology-cooling loop takes each rack's
liquid share (``draw × liquid_fraction``), a CRAH the air share; each element hands
its parent that heat plus its own pump and fan power (they end up in the water),
a chiller also its compressor's work (heat / design COP). An element's usable
rating is its per-unit rating × the units its redundancy lets carry the load
(N all, N+1 all but one, 2N half).

The rule, as for a rack's budget: a write is refused if it takes any element over
its usable rating *and* further over than it was (so an element already over can
still be renamed, or relieved). The check computes the site twice (as stored, and
with the written row) from one read of the draw: a handful of queries and a numpy
pass; a Python loop runs per element (a million-card site has ~13,000), never per
rack or card. An element's write reads only the draw of the racks under the roots
above it (as stored and as written): a PDU's check reads its feed's racks, a CDU's
every rack under the tower plant (docs/benchmarks.md, facility_build).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from django.apps import apps
from django.db.models import Q

from twin.facility.choices import CoolingKindChoices as C
from twin.facility.choices import RackClassChoices
from twin.facility.constants import COOLING_PARENTS, POWER_PARENTS
from twin.facility.models.chain import usable_units

__all__ = ["CHILLER_DESIGN_COP", "ChainLoads", "Draws", "Overload", "RackLinks", "SiteLoads",
           "check_rack_draw", "check_write", "positions", "site_loads"]

#: A chiller's design COP (heat moved per kW of compressor work): its condenser rejects
#: ``heat × (1 + 1/COP)``. A water-cooled centrifugal chiller meets ASHRAE 90.1's
#: ~0.56 kW/ton (COP 6.3) at full load; 5.5 leaves margin for warm condenser water.
CHILLER_DESIGN_COP = 5.5

NEW = -1  # the id of a row not yet saved


def _rank(parents: dict[str, tuple[str, ...]]) -> dict[str, int]:
    """Depth of each kind from the roots (children deeper than any parent kind)."""
    rank: dict[str, int] = {}

    def depth(kind: str) -> int:
        if kind not in rank:
            rank[kind] = 1 + max((depth(p) for p in parents.get(kind, ())), default=-1)
        return rank[kind]

    for kind in parents:
        depth(kind)
    return rank


POWER_RANK, COOLING_RANK = _rank(POWER_PARENTS), _rank(COOLING_PARENTS)


@dataclass
class ChainLoads:
    """One chain of a site as arrays by element (``ids`` order)."""

    ids: npt.NDArray[np.int64]
    keys: list[str]
    kinds: list[str]
    usable_kw: npt.NDArray[np.float64]
    load_kw: npt.NDArray[np.float64]  #: power delivered / heat taken
    input_kw: npt.NDArray[np.float64]  #: power drawn from the parent / heat handed on
    index: dict[int, int] = field(default_factory=dict)

    def headroom_kw(self) -> npt.NDArray[np.float64]:
        return self.usable_kw - self.load_kw


@dataclass
class SiteLoads:
    power: ChainLoads
    cooling: ChainLoads
    it_kw: float


@dataclass(frozen=True)
class Overload:
    """An element a write would take (further) over its usable rating."""

    chain: str
    element_id: int
    key: str
    kind: str
    load_kw: float
    usable_kw: float
    before_kw: float
    is_self: bool

    def message(self) -> str:
        noun = "carry" if self.chain == "power" else "take"
        return (f"{self.kind.upper() if self.kind in ('pdu', 'ups', 'cdu', 'crah') else self.kind}"
                f" {self.key} would {noun} {self.load_kw:,.1f} kW, over its usable "
                f"{self.usable_kw:,.1f} kW (this change: {self.load_kw - self.before_kw:+,.1f} "
                f"kW; headroom: {max(self.usable_kw - self.before_kw, 0):,.1f} kW). Choose an "
                f"element with more headroom, or add units or raise its rating. To go over "
                f"on purpose, allow over budget.")

    def as_dict(self) -> dict[str, Any]:
        return {"chain": self.chain, "id": self.element_id, "key": self.key, "kind": self.kind,
                "load_kw": round(self.load_kw, 3), "usable_kw": round(self.usable_kw, 3)}


# --- reading the site ------------------------------------------------------------------------
def _rows(model: str, site_id: int, columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
    return list(apps.get_model("facility", model).objects.filter(site_id=site_id)
                .order_by("pk").values_list(*columns))


POWER_COLUMNS = ("pk", "key", "kind", "parent_id", "rating_kw", "units", "redundancy",
                 "efficiency")
COOLING_COLUMNS = ("pk", "key", "kind", "parent_id", "capacity_kw", "units", "redundancy",
                   "pump_kw", "fan_kw")
RACK_COLUMNS = ("rack_id", "power_element_id", "cooling_element_id", "air_element_id",
                "liquid_fraction", "rack_class")


def _as_row(obj: Any, columns: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple((obj.pk or NEW) if c == "pk" else getattr(obj, c) for c in columns)


def _replace(rows: list[tuple[Any, ...]], row: tuple[Any, ...] | None,
             key: int | None) -> list[tuple[Any, ...]]:
    if row is None:
        return rows
    return [r for r in rows if r[0] != key] + [row]


def _draws(site_id: int, extra_rack: int | None, *, chain: str | None = None,
           elements: set[int] | None = None) -> Draws:
    """Nameplate draw (kW) of the site's racks (and ``extra_rack``): one grouped pass;
    with ``elements``, only the racks whose ``chain`` element is one of them."""
    rack = apps.get_model("hardware", "Rack")
    placed = Q(plant_place__site_id=site_id)
    if chain is not None and elements is not None:
        field = "power_element" if chain == "power" else "cooling_element"
        placed &= Q(**{f"plant_place__{field}_id__in": elements})
        if chain == "cooling":
            placed |= Q(plant_place__site_id=site_id, plant_place__air_element_id__in=elements)
    racks = rack.objects.filter(placed | Q(pk=extra_rack or 0))
    rows = racks.draw_by_rack().rows()
    return Draws(np.array([r.rack_id for r in rows], dtype=np.int64),
                 np.array([r.w for r in rows], dtype=float) / 1000.0)


def _subtree(rows: list[tuple[Any, ...]], starts: set[int]) -> set[int]:
    """The elements under the roots of ``starts`` (ids; ``rows`` as ``_rows`` reads them)."""
    parent = {r[0]: r[3] for r in rows}
    roots = set()
    for start in starts:
        seen: set[int] = set()
        while parent.get(start) is not None and start not in seen:
            seen.add(start)
            start = parent[start]
        roots.add(start)
    children: dict[int, list[int]] = {}
    for pk, up in parent.items():
        if up is not None:
            children.setdefault(up, []).append(pk)
    found, todo = set(roots), list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


@dataclass(frozen=True)
class Draws:
    """Racks' nameplate draw (kW) by rack id."""

    rack_ids: npt.NDArray[np.int64]
    kw: npt.NDArray[np.float64]

    def of(self, rack_ids: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        at = positions(self.rack_ids, rack_ids)
        return np.where(at >= 0, self.kw[np.maximum(at, 0)] if len(self.kw) else 0.0, 0.0)


def positions(ids: npt.NDArray[np.int64], query: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Index of each ``query`` id in ``ids`` (any order), -1 where absent."""
    if not len(ids) or not len(query):
        return np.full(len(query), -1, dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    at = np.minimum(np.searchsorted(ids, query, sorter=order), len(ids) - 1)
    found = ids[order[at]] == query
    return np.where(found, order[at], -1).astype(np.int64)


@dataclass(frozen=True)
class RackLinks:
    """The site's racks' places in the plant as arrays (element ids, -1 for none)."""

    rack_ids: npt.NDArray[np.int64]
    power: npt.NDArray[np.int64]
    cooling: npt.NDArray[np.int64]
    air: npt.NDArray[np.int64]
    liquid_fraction: npt.NDArray[np.float64]
    is_air: npt.NDArray[np.bool_]

    @classmethod
    def of(cls, rows: list[tuple[Any, ...]]) -> RackLinks:
        if not rows:
            empty = np.zeros(0, dtype=np.int64)
            return cls(empty, empty, empty, empty, np.zeros(0), np.zeros(0, dtype=bool))
        cols = list(zip(*rows, strict=True))
        ints = [np.array([-1 if v is None else v for v in c], dtype=np.int64)
                for c in cols[:4]]
        is_air = np.array(cols[5]) == RackClassChoices.AIR
        fraction = np.where(is_air, 0.0, np.array(cols[4], dtype=float))
        return cls(*ints, fraction, is_air)


def _power(rows: list[tuple[Any, ...]], racks: RackLinks, draw: Draws) -> ChainLoads:
    n = len(rows)
    index = {r[0]: i for i, r in enumerate(rows)}
    usable = np.array([r[4] * usable_units(r[5], r[6]) for r in rows], dtype=float)
    direct = np.zeros(n)
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    at = positions(ids, racks.power)
    np.add.at(direct, at[at >= 0], draw.of(racks.rack_ids)[at >= 0])
    load, drawn = direct.copy(), np.zeros(n)
    for i in sorted(range(n), key=lambda i: -POWER_RANK.get(rows[i][2], 0)):
        points = rows[i][7] or [[1.0, 1.0]]
        fraction = load[i] / usable[i] if usable[i] > 0 else 1.0
        efficiency = float(np.interp(fraction, [p[0] for p in points], [p[1] for p in points]))
        drawn[i] = load[i] / efficiency
        parent = index.get(rows[i][3]) if rows[i][3] is not None else None
        if parent is not None:
            load[parent] += drawn[i]
    return ChainLoads(np.array([r[0] for r in rows], dtype=np.int64), [r[1] for r in rows],
                      [r[2] for r in rows], usable, load, drawn, index)


def _cooling(rows: list[tuple[Any, ...]], racks: RackLinks, draw: Draws) -> ChainLoads:
    n = len(rows)
    index = {r[0]: i for i, r in enumerate(rows)}
    usable = np.array([r[4] * usable_units(r[5], r[6]) for r in rows], dtype=float)
    direct = np.zeros(n)
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    kw = draw.of(racks.rack_ids)
    main, air = positions(ids, racks.cooling), positions(ids, racks.air)
    share = np.where(racks.is_air, kw, kw * racks.liquid_fraction)
    np.add.at(direct, main[main >= 0], share[main >= 0])
    keep = (air >= 0) & ~racks.is_air
    np.add.at(direct, air[keep], (kw * (1.0 - racks.liquid_fraction))[keep])
    load, handed = direct.copy(), np.zeros(n)
    for i in sorted(range(n), key=lambda i: -COOLING_RANK.get(rows[i][2], 0)):
        kind = rows[i][2]
        handed[i] = load[i] + rows[i][7] + rows[i][8]
        if kind == C.CHILLER:
            handed[i] += load[i] / CHILLER_DESIGN_COP
        parent = index.get(rows[i][3]) if rows[i][3] is not None else None
        if parent is not None:
            load[parent] += handed[i]
    return ChainLoads(np.array([r[0] for r in rows], dtype=np.int64), [r[1] for r in rows],
                      [r[2] for r in rows], usable, load, handed, index)


def site_loads(site_id: int, *, draw: Draws | None = None,
               power_row: tuple[Any, ...] | None = None,
               cooling_row: tuple[Any, ...] | None = None,
               rack_row: tuple[Any, ...] | None = None) -> SiteLoads:
    """Every element's load and usable rating on a site; a ``*_row`` replaces (or adds)
    one row as a write would leave it (``_as_row`` of the unsaved instance)."""
    draw = _draws(site_id, rack_row[0] if rack_row else None) if draw is None else draw
    power = _replace(_rows("PowerElement", site_id, POWER_COLUMNS), power_row,
                     power_row[0] if power_row else None)
    cooling = _replace(_rows("CoolingElement", site_id, COOLING_COLUMNS), cooling_row,
                       cooling_row[0] if cooling_row else None)
    racks = RackLinks.of(_replace(_rows("RackFacility", site_id, RACK_COLUMNS), rack_row,
                                  rack_row[0] if rack_row else None))
    it_kw = float(draw.of(racks.rack_ids).sum())
    return SiteLoads(_power(power, racks, draw), _cooling(cooling, racks, draw), it_kw)


# --- the rule --------------------------------------------------------------------------------
def check_write(obj: Any) -> list[Overload]:
    """The elements writing ``obj`` (a power or cooling element, or a rack's place, unsaved)
    would take further over their usable rating; [] if none."""
    site_id = getattr(obj, "site_id", None)
    if not site_id:
        return []
    model = type(obj)._meta.model_name
    kwargs: dict[str, Any] = {}
    if model in ("powerelement", "coolingelement"):
        # Only this chain changes, and only under the roots above the element (as stored
        # and as written): read the draw of the racks there.
        chain = "power" if model == "powerelement" else "cooling"
        columns = POWER_COLUMNS if chain == "power" else COOLING_COLUMNS
        row = _as_row(obj, columns)
        stored = _rows("PowerElement" if chain == "power" else "CoolingElement", site_id,
                       columns)
        kwargs[f"{chain}_row"] = row
        starts = {row[0]} | ({row[3]} if row[3] is not None else set())
        starts |= {r[3] for r in stored if r[0] == row[0] and r[3] is not None}
        elements = _subtree(_replace(stored, row, row[0]), starts) | _subtree(stored, starts)
        draw = _draws(site_id, None, chain=chain, elements=elements)
    else:
        kwargs["rack_row"] = _as_row(obj, RACK_COLUMNS)
        draw = _draws(site_id, obj.rack_id)
    before = site_loads(site_id, draw=draw)
    after = site_loads(site_id, draw=draw, **kwargs)
    return _new_overloads(before, after, model, obj.pk or NEW)


def check_rack_draw(rack_id: int, added_w: float) -> list[Overload]:
    """The elements a hardware write adding ``added_w`` W to rack ``rack_id`` would take
    further over their usable rating (the rack's own budget is hardware's rule); []
    if none or the rack has no place in a plant. Reads the site's draw once."""
    site_id = apps.get_model("facility", "RackFacility").objects.filter(
        rack_id=rack_id).values_list("site_id", flat=True).first()
    if not site_id:
        return []
    draw = _draws(site_id, None)
    before = site_loads(site_id, draw=draw)
    kw = draw.kw.copy()
    kw[draw.rack_ids == rack_id] += added_w / 1000.0
    after = site_loads(site_id, draw=Draws(draw.rack_ids, kw))
    return _new_overloads(before, after, "rack", None)


def _new_overloads(before: SiteLoads, after: SiteLoads, model: str,
                   written: int | None) -> list[Overload]:
    """The elements over their usable rating in ``after`` and further over than in
    ``before``; the written element itself (``model``, id ``written``) first, then the
    nearest."""
    over: list[Overload] = []
    for chain in ("power", "cooling"):
        now, then = getattr(after, chain), getattr(before, chain)
        excess = now.load_kw - now.usable_kw
        for i in np.flatnonzero(excess > 1e-6):
            pk = int(now.ids[i])
            j = then.index.get(pk)
            was = float(then.load_kw[j] - then.usable_kw[j]) if j is not None else -np.inf
            if excess[i] <= was + 1e-6:
                continue
            is_self = model.startswith(chain) and pk == written
            over.append(Overload(chain, pk, now.keys[i], now.kinds[i], float(now.load_kw[i]),
                                 float(now.usable_kw[i]),
                                 float(then.load_kw[j]) if j is not None else 0.0, is_self))
    # The element itself first, then the nearest (smallest) over.
    return sorted(over, key=lambda o: (not o.is_self, o.usable_kw))
