"""The power chain, vectorised: rack IT power up the tree to the utility feed.

Each element (feed, transformer, UPS, PDU or busway, power shelf) delivers its
*output* (the sum of its children's inputs) and draws

    input = output / η(output / installed rating)

from its parent, so its loss is input − output. η is the element's load-dependent
efficiency curve (:class:`~simulation.facility.plant.EfficiencyCurve`): UPS and
transformers are worst at light load (the double-conversion UPS curves of
Schneider Electric White Paper 108, "Making Large UPS Systems More Efficient", and
the EU Code of Conduct on Data Centre Energy Efficiency, UPS annex; the rectifier
and conversion efficiencies ExaDigiT/RAPS keeps per system in ``power.json``).
Loads go up the tree one depth at a time with ``np.bincount`` (a few levels, each
one vectorised over every element at that depth), so a 27,000-rack site costs a
handful of array operations, not a Python walk.

Ratings: ``planned`` = rating × usable units by redundancy (N all, N+1 all but one,
2N half; :func:`~simulation.facility.validate.usable_units`) is what planning may
load; ``available`` = rating × units still running (a failed unit, a lost feed) is
what can carry load now. Headroom = min(planned, available) − input. An element with
no unit running cuts every rack below it (``rack_powered``).

Mechanical load (pumps, fans, chillers) is fed from the roots (feeds) beside the IT
chain, spread over the feeds that are up in proportion to their available rating,
without conversion loss (mechanical plant usually sits on its own, non-UPS board).

>>> from simulation.facility.plant import EfficiencyCurve, PowerElement
>>> chain = compile_chain((PowerElement("feed", "feed", 1000.0),
...     PowerElement("ups", "ups", 500.0, parent="feed",
...                  efficiency=EfficiencyCurve((0.1, 1.0), (0.9, 0.95)))),
...     np.array([1, 1]))
>>> flow = power_flow(chain, np.array([200e3, 300e3]))
>>> round(float(flow.facility_w))              # 500 kW: the UPS at full load, η = 0.95
526316
>>> round(float(flow.headroom_w[0]))           # the feed: 1 MW − 526 kW
473684
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from simulation.facility.plant import PowerElement
from simulation.facility.validate import usable_units

__all__ = ["PowerChain", "PowerFlow", "compile_chain", "power_flow", "units_fraction"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class PowerChain:
    """The chain as arrays: parent index (−1 root), depth, per-unit rating (W),
    units, usable units, efficiency curve index, and the elements of each depth."""

    keys: tuple[str, ...]
    parent: I64
    levels: tuple[I64, ...]
    rating_w: F64
    units: I64
    usable: I64
    down: npt.NDArray[np.bool_]
    curve_of: I64
    curves: tuple[tuple[F64, F64], ...]
    rack_parent: I64

    @property
    def n(self) -> int:
        return int(self.parent.shape[0])


@dataclass(frozen=True, eq=False)
class PowerFlow:
    """One evaluation: per element output, input, loss, ratings and headroom (W);
    per rack whether it has power; site totals."""

    output_w: F64
    input_w: F64
    loss_w: F64
    planned_w: F64
    available_w: F64
    headroom_w: F64
    rack_powered: npt.NDArray[np.bool_]
    it_w: float
    mechanical_w: float
    facility_w: float


def compile_chain(elements: Sequence[PowerElement], rack_parent: I64) -> PowerChain:
    """Index arrays of a validated chain (see :func:`~simulation.facility.validate.validate`)."""
    index = {e.key: i for i, e in enumerate(elements)}
    parent = np.array([index[e.parent] if e.parent is not None else -1 for e in elements],
                      dtype=np.int64)
    depth = np.zeros(len(elements), dtype=np.int64)
    for i in range(len(elements)):
        j, d = parent[i], 0
        while j >= 0:
            j, d = parent[j], d + 1
        depth[i] = d
    levels = tuple(np.flatnonzero(depth == d) for d in range(int(depth.max(initial=0)) + 1))
    curves: list[tuple[F64, F64]] = []
    seen: dict[tuple[tuple[float, ...], tuple[float, ...]], int] = {}
    curve_of = np.zeros(len(elements), dtype=np.int64)
    for i, e in enumerate(elements):
        k = (e.efficiency.load_fraction, e.efficiency.efficiency)
        if k not in seen:
            seen[k] = len(curves)
            curves.append((np.array(k[0], dtype=float), np.array(k[1], dtype=float)))
        curve_of[i] = seen[k]
    return PowerChain(
        keys=tuple(e.key for e in elements), parent=parent, levels=levels,
        rating_w=np.array([e.rating_kw * 1e3 for e in elements], dtype=float),
        units=np.array([e.units for e in elements], dtype=np.int64),
        usable=np.array([usable_units(e.units, e.redundancy) for e in elements],
                        dtype=np.int64),
        down=np.array([e.down for e in elements], dtype=bool),
        curve_of=curve_of, curves=tuple(curves),
        rack_parent=np.asarray(rack_parent, dtype=np.int64))


def units_fraction(units: I64, usable: I64, failed: I64 | None,
                   down: npt.NDArray[np.bool_]) -> F64:
    """Share of the design duty the running units can carry: min(1, running/usable).
    An N+1 group that loses one unit still carries everything; a second loss does not."""
    running = units - (failed if failed is not None else 0)
    running = np.where(down, 0, np.maximum(running, 0))
    out: F64 = np.minimum(running / usable, 1.0)
    return out


def power_flow(chain: PowerChain, rack_w: F64, *, failed_units: I64 | None = None,
               mechanical_w: float = 0.0) -> PowerFlow:
    """Aggregate rack IT power (W) up the chain; losses from each element's curve.

    ``failed_units`` (per element) are units out of service; racks under an element
    with no running unit draw nothing (``rack_powered`` is False for them)."""
    n = chain.n
    running = chain.units - (failed_units if failed_units is not None else 0)
    running = np.where(chain.down, 0, np.maximum(running, 0))
    available = chain.rating_w * running
    planned = chain.rating_w * chain.usable
    dead = running == 0
    for level in chain.levels[1:]:
        dead[level] |= dead[chain.parent[level]]
    rack_powered = ~dead[chain.rack_parent]
    it = np.where(rack_powered, rack_w, 0.0)
    out = np.bincount(chain.rack_parent, weights=it, minlength=n).astype(float)
    inp = np.zeros(n)
    installed = chain.rating_w * np.maximum(running, 1)
    for d in range(len(chain.levels) - 1, -1, -1):
        idx = chain.levels[d]
        frac = out[idx] / installed[idx]
        eff = np.ones(idx.shape[0])
        cidx = chain.curve_of[idx]
        for c, (lf, ef) in enumerate(chain.curves):
            m = cidx == c
            if m.any():
                eff[m] = np.interp(frac[m], lf, ef)
        inp[idx] = out[idx] / eff
        if d > 0:
            out += np.bincount(chain.parent[idx], weights=inp[idx], minlength=n)
    roots = chain.levels[0]
    if mechanical_w > 0 and roots.size:
        share = available[roots]
        total = share.sum()
        add = mechanical_w * (share / total if total > 0 else np.full(roots.size, 1 / roots.size))
        out[roots] += add
        inp[roots] += add
    loss = inp - out
    headroom = np.minimum(planned, available) - inp
    return PowerFlow(
        output_w=out, input_w=inp, loss_w=loss, planned_w=planned, available_w=available,
        headroom_w=headroom, rack_powered=rack_powered, it_w=float(it.sum()),
        mechanical_w=float(mechanical_w), facility_w=float(inp[roots].sum()))
