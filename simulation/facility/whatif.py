"""Facility what-ifs: run the plant forward over a horizon with events.

Events (plain dataclasses, JSON in and out, for the twin's ``facility`` scenario
kind): a CDU trip (all its units), a pump trip (one unit of a CDU or facility
loop), the loss of a chiller or tower (cells), a hot day (wet and dry bulb + N °C),
the loss of one power feed (a unit of any power element), a load surge (demand ×
factor), capping on or off; each optionally reverting after ``duration_s``.

Every step is :func:`simulation.facility.thermal.step` (at ``dt_s``, 1 s by default)
plus the power chain for PUE. Cards protect themselves as firmware does: above the
card limit a rack's power falls to what the limit allows on its coolant,
cards × (T_limit − T_coolant)/R (the hardware slowdown), never below idle; a rack
whose cards pass the shutdown temperature trips (draws nothing) — to the horizon, or,
with ``trip_cooldown_s``, until that long has passed and its cards (at no power, its
coolant) are back under the limit. The demand is each rack's ``rack_w`` (or a fraction
of its budget), or a per-rack schedule over time (``rack_w_schedule``: the what-if
engine's jobs, window by window). With capping on,
:class:`~simulation.facility.capping.CapController` sets the caps each step (one
representative card per rack: the rack's cards are identical here). The result:
time series downsampled to at most ``points`` samples, per rack the time until it
reached its thermal limit and its cap, the energy and throughput lost, what capping
did.

**Racks without cards** (network and storage racks: card TDP 0 in
``RackSet.card_tdp_w``, which the twin fills from each rack's cards) draw their own
demand, whatever the cards do: they have no card to heat (their "card" temperature is
their coolant, or the air through them, so they trip only if that passes the shutdown
temperature), none for the firmware to slow down and none for capping to cap (the
controller counts their draw as a fixed load on the power elements above them), and
**a load surge scales only the racks with cards**: a surge is the cards' work, and a
switch's draw is set by its chassis, ports and line rate, barely by the traffic it
carries (Mahadevan, Sharma, Banerjee, Ranganathan, "A Power Benchmarking Framework for
Network Devices", IFIP Networking 2009; the premise of Heller et al., "ElasticTree",
NSDI 2010, which saves network power by switching elements off, not by load); storage
servers' drives and controllers move little more. Without ``card_tdp_w`` (a plant built
by hand) every rack counts as holding cards, as before.

**Quiescent stretches are skipped**: when no event is due, the rack power delivered is
exactly the previous step's and the temperatures have (nearly) settled, the run jumps to
the next event, filling samples and energy with the constant values. "Settled" is either
no temperature moving by more than 1e-9 K in a step (a fixed point of the exponential
integrator: the skip is then exact) or, while the plant still relaxes, what is left to
move below ``quiescent_k`` (1e-3 K by default): relaxing geometrically at the ratio r,
the largest m_j / m_(j−1) of the last 30 steps' largest movements m (every one below 1,
no event among them), a temperature still moves Σ m_k r^j = m_k r / (1 − r) (the sum of
a geometric series; the slowest mode of the demo plant has τ ≈ 600 s, so r ≈ 0.998). The
results then differ from stepping every second by at most about that much: tests check
the skipping run equals stepping every second (capping on, with events) within 1e-6
relative on the series and energies at the default, and within ``quiescent_k`` on every
temperature series from 1e-4 to 1e-2 K; ``quiescent_k=0`` keeps the exact skip only.
"Moving" counts every integrated temperature, the CDU returns too: while a CDU holds its
supply setpoint its return still relaxes, unseen in the supply (leaving it out froze the
as-built demo plant 0.07 K off stepping every second after a hot day; issue 24).

**Relaxations are jumped in closed form**: after an event the plant relaxes towards the
fixed point of the new load and conditions; once one mode is left it is linear and
geometric, x_(k+i) = x∞ + (x_k − x∞)·r^i (the exponential integrator of a linear lumped
network under constant input; r the slowest contraction, ≈ 0.9988 a second on the demo
plant, τ ≈ 830 s). The run then takes the stretch to the next change in one go: x∞
from :func:`simulation.facility.thermal.settle` (the integrator's fixed point does not
depend on the step), every series sample and the transport buffer on that path, the
plant's power summed as a geometric series (Σ_(i<m) r^i = (1 − r^m)/(1 − r)). Only when
(a) no change is due, the rack power is constant and the last ``_WINDOW`` ratios agree;
(b) every integrated temperature's motion now equals its motion ``_WINDOW`` steps ago
× r^W, the misfit × r/(1 − r) under ``_JUMP_SHARE`` × ``quiescent_k`` (a faster mode
still decaying would land on the slow path); (c) the motion the ratio predicts is left,
d·r/(1 − r), equals x∞ − x_k within the same; (d) nothing the run decides on can change
on the way, checked at both ends (one mode moves every figure monotonically): no card
reaches its limit or the shutdown temperature, no thermal ceiling binds, the caps bind
only on fixed limits (rack budgets, power elements) and the site contract cannot bind.
Refused, it is tried again a window later. Tests: the run equals stepping every second
within 1e-6 relative with jumps taken (``relaxations_jumped``), and within
``quiescent_k`` from 1e-4 to 1e-2 K; benchmarks/facility_kind.py prints the deviation
from stepping every second over its baseline hour.

>>> from simulation.facility.presets import demo_plant
>>> res = run(demo_plant(12, racks_per_cdu=6), WhatIfInput(horizon_s=600.0,
...           events=(Event(60.0, "cdu_trip", "cdu-0"),)))
>>> res.racks["time_to_limit_s"][0] is not None, res.racks["time_to_limit_s"][11]
(True, None)
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from simulation.facility.capping import (
    CapController,
    CapLimits,
    element_groups,
    it_limits,
    throughput,
)
from simulation.facility.model import compile_model
from simulation.facility.plant import Plant, PlantError
from simulation.facility.power_chain import power_flow
from simulation.facility.thermal import (
    _BUFFER,
    Conditions,
    ThermalParams,
    ThermalState,
    hydraulics,
    settle,
    step,
)

__all__ = ["EVENT_KINDS", "Event", "WhatIfInput", "WhatIfResult", "check", "run"]

F64 = npt.NDArray[np.float64]

EVENT_KINDS = ("cdu_trip", "pump_trip", "cooling_loss", "hot_day", "feed_loss",
               "load_surge", "capping")
"""What can happen: ``target`` names a cooling element (cdu_trip, pump_trip,
cooling_loss) or a power element (feed_loss); ``value`` is units lost (default 1;
cdu_trip: all), °C (hot_day), a demand factor (load_surge) or 1/0 (capping)."""

_WINDOW = 30
"""Steps over which the relaxation ratio is taken (its largest, all below 1)."""

_ONE_MODE = 1e-3
"""The window's ratios agree within this share (a first, cheap sign of one mode)."""

_JUMP_SHARE = 0.1
"""A relaxation jump's checks hold it to this share of ``quiescent_k`` (1e-4 K at the
default): well inside the stated tolerance, the series within 1e-6 relative."""

_MIN_JUMP = 2 * _WINDOW
"""A relaxation is jumped in closed form only over at least this many steps."""

#: The integrated temperatures (and what the series read) a relaxation jump extrapolates.
_RELAXED = ("rack_ret_c", "cdu_ret_c", "cdu_sup_c", "root_ret_c", "root_sup_c",
            "rack_sup_c", "card_c")


def _one_mode(hist: list[ThermalState], ratio: float, tol: float) -> bool:
    """Every integrated temperature moved the same way over the window: its last
    step's motion d_k equals its motion W = ``len(hist) − 2`` steps before times r^W,
    and the misfit, were it to go on at the slow mode's pace (× r/(1 − r), what is
    left of a geometric series), stays under ``tol`` (K). A faster mode still decaying
    changes the ratio between the two (0.993 against 0.9988 a step is 18 % over 30
    steps), and a jump would put its remainder on the slow mode's path."""
    w = len(hist) - 2
    scale = ratio ** w
    gain = ratio / (1.0 - ratio)
    for name in _RELAXED[:5]:
        a0, a1 = getattr(hist[0], name), getattr(hist[1], name)
        b0, b1 = getattr(hist[-2], name), getattr(hist[-1], name)
        if a1.size and float(np.max(np.abs((b1 - b0) - (a1 - a0) * scale))) * gain > tol:
            return False
    return True


def _settled(net: Any, prev: ThermalState, now: ThermalState, rack_w: F64, card_w: F64,
             cond: Conditions, ratio: float, tol: float) -> ThermalState | None:
    """The fixed point the plant relaxes to under a constant load and conditions, if the
    relaxation is one geometric mode (checked first by :func:`_one_mode`): for every
    integrated temperature x with last step's motion d = x_k − x_(k−1), the motion the
    ratio r predicts is left, Σ_(j≥1) d·r^j = d·r/(1 − r) (a geometric series), must
    equal x∞ − x_k within ``tol`` (K). x∞: :func:`simulation.facility.thermal.settle`
    from ``now`` (the exponential integrator's fixed point does not depend on the
    step). None: not one mode."""
    end = settle(net, rack_w, cond, now, card_w=card_w)
    gain = ratio / (1.0 - ratio)
    for name in _RELAXED[:5]:
        x, x0, xe = getattr(now, name), getattr(prev, name), getattr(end, name)
        if x.size and float(np.max(np.abs((xe - x) - (x - x0) * gain))) > tol:
            return None
    return end


def _relaxed(now: ThermalState, end: ThermalState, w: float) -> dict[str, Any]:
    """The relaxing temperatures and plant power ``w`` = r^i of the way from the fixed
    point back to ``now`` (i steps on)."""
    out: dict[str, Any] = {name: getattr(end, name) + (getattr(now, name) - getattr(end, name))
                           * w for name in _RELAXED}
    out["fans_w"] = end.fans_w + (now.fans_w - end.fans_w) * w
    out["chillers_w"] = end.chillers_w + (now.chillers_w - end.chillers_w) * w
    return out


def _jumped(now: ThermalState, end: ThermalState, ratio: float, m: int, dt: float
            ) -> ThermalState:
    """The state ``m − 1`` steps after ``now`` on the geometric path to ``end``: every
    relaxing figure, and the transport buffer (the CDU supply each past step sent)."""
    last = m - 1
    vals = _relaxed(now, end, ratio ** last)
    buf = now.buf.copy()
    if buf.size:
        pos = (now.pos + last) % _BUFFER
        for age in range(_BUFFER):
            j = last - age     # steps after ``now`` this slot was written
            slot = (pos - age) % _BUFFER
            buf[:, slot] = (end.cdu_sup_c + (now.cdu_sup_c - end.cdu_sup_c) * ratio ** j
                            if j >= 0 else now.buf[:, (now.pos + j) % _BUFFER])
    else:
        pos = now.pos
    return replace(now, t_s=now.t_s + last * dt, buf=buf, pos=pos, **vals)

_TARGETED = {"cdu_trip": ("cdu",), "pump_trip": ("cdu", "facility_loop"),
             "cooling_loss": ("cooling_tower", "dry_cooler", "chiller", "crah")}


@dataclass(frozen=True)
class Event:
    """One thing that happens at ``at_s`` seconds (and reverts after ``duration_s``)."""

    at_s: float
    kind: str
    target: str = ""
    value: float | None = None
    duration_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str = "event") -> Event:
        known = {f.name for f in fields(cls)}
        extra = set(data) - known
        if extra:
            raise PlantError(f"{where}.{sorted(extra)[0]}", "unknown field")
        try:
            return cls(**data)
        except TypeError as err:
            raise PlantError(where, str(err)) from err


@dataclass(frozen=True)
class WhatIfInput:
    """A facility what-if: horizon and step (s), events, the starting load (per rack
    W, e.g. from the live snapshot; else ``load_fraction`` of each budget), capping
    and its policy, the card figures the caps and throughput need, and how many
    samples the series keep."""

    horizon_s: float = 3600.0
    dt_s: float = 1.0
    events: tuple[Event, ...] = ()
    rack_w: tuple[float, ...] | None = None
    load_fraction: float = 0.9
    wet_bulb_c: float | None = None
    dry_bulb_c: float | None = None
    capping: bool = False
    policy: str = "uniform"
    cards_per_rack: int = 40
    card_tdp_w: float = 1000.0
    card_idle_w: float = 100.0
    compute_share: float = 0.7
    shutdown_margin_c: float = 10.0
    points: int = 500
    quiescent_k: float = 1e-3
    limit_step: float = 0.0
    """> 0: record each rack's per-card power limit over time (``WhatIfResult.card_limits``),
    floored to multiples of ``limit_step`` × ``card_tdp_w`` (0: not recorded). The
    what-if engine composes it with the jobs (``simulation.whatif.facility``)."""
    rack_w_schedule: tuple[tuple[float, tuple[float, ...]], ...] = ()
    """(time s, W per rack) in ascending time: each rack's demand from that time on
    (before the first entry: ``rack_w`` / ``load_fraction``). The what-if engine passes
    its jobs' per-rack power, window by window."""
    trip_cooldown_s: float | None = None
    """A tripped rack comes back once at least this long has passed since its trip *and*
    its cards (at no power: its coolant) are back under the card limit; None: a tripped
    rack stays out to the horizon."""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["events"] = [e.to_dict() for e in self.events]
        out["rack_w"] = list(self.rack_w) if self.rack_w is not None else None
        out["rack_w_schedule"] = [[t, list(w)] for t, w in self.rack_w_schedule]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WhatIfInput:
        known = {f.name for f in fields(cls)}
        extra = set(data) - known
        if extra:
            raise PlantError(sorted(extra)[0], "unknown field")
        d = dict(data)
        d["events"] = tuple(Event.from_dict(e, f"events[{i}]")
                            for i, e in enumerate(d.get("events", ())))
        if d.get("rack_w") is not None:
            d["rack_w"] = tuple(float(x) for x in d["rack_w"])
        try:
            d["rack_w_schedule"] = tuple((float(t), tuple(float(x) for x in w))
                                         for t, w in d.get("rack_w_schedule") or ())
        except (TypeError, ValueError) as err:
            raise PlantError("rack_w_schedule", "a list of [time s, [W per rack]]") from err
        try:
            return cls(**d)
        except TypeError as err:
            raise PlantError("input", str(err)) from err


@dataclass(frozen=True)
class WhatIfResult:
    """Series (``t_s`` and one list per figure), per-rack outcomes, energy,
    capping, and how many steps were computed (the rest were quiescent)."""

    t_s: list[float]
    series: dict[str, list[float]]
    cdu_sup_c: list[list[float]]
    racks: dict[str, list[Any]]
    energy: dict[str, float]
    capping: dict[str, Any]
    steps: int
    steps_computed: int
    relaxations_jumped: int = 0
    """Relaxations taken in closed form (module doc, "Relaxations are jumped")."""
    events: list[dict[str, Any]] = field(default_factory=list)
    card_limits: list[tuple[float, int, float | None]] = field(default_factory=list)
    """With ``limit_step`` > 0: (time s, plant rack index, W per card or None: no limit)
    at every change of a rack's limit — the tighter of the thermal ceiling
    (T_limit − T_coolant)/R and the capping controller's cap (per card), floored to the
    step; 0 for a rack that tripped or lost its power. A rack's first entry is at its
    first limit (none: never limited)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _check(plant: Plant, inp: WhatIfInput) -> None:
    def pos(name: str, v: float) -> None:
        if not (math.isfinite(v) and v > 0):
            raise PlantError(name, f"must be a finite number > 0, got {v!r}")

    pos("horizon_s", inp.horizon_s)
    pos("dt_s", inp.dt_s)
    if inp.horizon_s / inp.dt_s > 10_000_000:
        raise PlantError("dt_s", "more than 10 million steps; use a longer step")
    if not (math.isfinite(inp.quiescent_k) and 0 <= inp.quiescent_k <= 0.1):
        raise PlantError("quiescent_k", "must be a number of kelvin in [0, 0.1]")
    if not (math.isfinite(inp.limit_step) and 0 <= inp.limit_step <= 1):
        raise PlantError("limit_step", "must be a fraction of the TDP in [0, 1]")
    if not 2 <= inp.points <= 100_000:
        raise PlantError("points", "must be between 2 and 100000")
    pos("card_tdp_w", inp.card_tdp_w)
    if not 0 <= inp.card_idle_w < inp.card_tdp_w:
        raise PlantError("card_idle_w", "must be ≥ 0 and below card_tdp_w")
    if inp.cards_per_rack < 1:
        raise PlantError("cards_per_rack", "must be ≥ 1")
    if inp.rack_w is not None:
        arr = np.asarray(inp.rack_w, dtype=float)
        if arr.shape != (len(plant.racks),) or not np.all(np.isfinite(arr)) or (arr < 0).any():
            raise PlantError("rack_w", f"needs {len(plant.racks)} finite values ≥ 0")
    elif not 0 <= inp.load_fraction <= 2:
        raise PlantError("load_fraction", "must be in [0, 2]")
    last = -math.inf
    for i, (at, w) in enumerate(inp.rack_w_schedule):
        if not (math.isfinite(at) and at >= max(last, 0.0)):
            raise PlantError(f"rack_w_schedule[{i}]", "times must be finite, ≥ 0 and ascending")
        arr = np.asarray(w, dtype=float)
        if arr.shape != (len(plant.racks),) or not np.all(np.isfinite(arr)) or (arr < 0).any():
            raise PlantError(f"rack_w_schedule[{i}]",
                             f"needs {len(plant.racks)} finite values ≥ 0")
        last = at
    if inp.trip_cooldown_s is not None and not (math.isfinite(inp.trip_cooldown_s)
                                                and inp.trip_cooldown_s >= 0):
        raise PlantError("trip_cooldown_s", "must be a number of seconds ≥ 0 (or null)")
    from simulation.facility.capping import POLICIES

    if inp.policy not in POLICIES:
        raise PlantError("policy", f"unknown {inp.policy!r}; one of {', '.join(POLICIES)}")
    cool = {c.key: c.kind for c in plant.cooling}
    power = {p.key for p in plant.power}
    for i, e in enumerate(inp.events):
        name = f"events[{i}]"
        if e.kind not in EVENT_KINDS:
            raise PlantError(f"{name}.kind",
                             f"unknown {e.kind!r}; one of {', '.join(EVENT_KINDS)}")
        if not (math.isfinite(e.at_s) and 0 <= e.at_s):
            raise PlantError(f"{name}.at_s", "must be a finite time ≥ 0")
        if e.duration_s is not None and not (math.isfinite(e.duration_s) and e.duration_s > 0):
            raise PlantError(f"{name}.duration_s", "must be > 0")
        if e.value is not None and not math.isfinite(e.value):
            raise PlantError(f"{name}.value", "must be finite")
        if e.kind in _TARGETED and cool.get(e.target) not in _TARGETED[e.kind]:
            raise PlantError(f"{name}.target",
                             f"{e.target!r} is not a {' or '.join(_TARGETED[e.kind])} "
                             "of this plant")
        if e.kind == "feed_loss" and e.target not in power:
            raise PlantError(f"{name}.target", f"{e.target!r} is not a power element")
        if e.kind == "load_surge" and (e.value is None or e.value < 0):
            raise PlantError(f"{name}.value", "a load surge needs a factor ≥ 0 (1.2: +20 %)")
        if e.kind == "hot_day" and e.value is None:
            raise PlantError(f"{name}.value", "a hot day needs + °C")


def check(plant: Plant, inp: WhatIfInput) -> None:
    """Raise PlantError naming the field if ``run`` would refuse ``inp`` on ``plant``
    (what a caller checks before queueing a run: the twin's ``facility`` kind)."""
    _check(plant, inp)


def run(plant: Plant, inp: WhatIfInput, params: ThermalParams | None = None, *,
        skip_quiescent: bool = True) -> WhatIfResult:
    """Run the what-if (raises PlantError naming the field for bad input).
    ``skip_quiescent=False`` computes every step (the benchmark's baseline)."""
    _check(plant, inp)
    p = params or ThermalParams(cards_per_rack=inp.cards_per_rack)
    model = compile_model(plant, p)
    net, chain = model.net, model.chain
    n = len(plant.racks)
    cool_idx = {c.key: i for i, c in enumerate(plant.cooling)}
    pow_idx = {e.key: i for i, e in enumerate(plant.power)}
    budget = np.asarray(plant.racks.budget_w, dtype=float)
    base = (np.asarray(inp.rack_w, dtype=float) if inp.rack_w is not None
            else budget * inp.load_fraction)
    schedule = [np.asarray(w, dtype=float) for _, w in inp.rack_w_schedule]
    if schedule and inp.rack_w_schedule[0][0] <= 0:
        base = schedule[0]
    cards = inp.cards_per_rack
    idle_rack = cards * inp.card_idle_w
    # racks without cards (network, storage: card TDP 0 where the plant gives it) draw
    # their own power: no card to heat, throttle or cap, and a surge leaves them be
    card_less = (np.asarray(net.rack_card_tdp_w) <= 0 if net.rack_card_tdp_w is not None
                 else np.zeros(n, dtype=bool))

    def card_w_of(w: F64) -> F64:
        """The representative card's W of each rack (0 on a rack without cards)."""
        out: F64 = np.where(card_less, 0.0, w / cards)
        return out
    # timeline of changes: (time, sign, event); reverts apply the opposite change
    changes: list[tuple[float, int, int]] = []
    for i, e in enumerate(inp.events):
        changes.append((e.at_s, +1, i))
        if e.duration_s is not None:
            changes.append((e.at_s + e.duration_s, -1, i))
    weather = plant.site.weather
    if weather:
        t_w = 0.0
        while t_w < inp.horizon_s:
            changes.append((t_w, 0, -1))
            t_w += 60.0
    for i, (at, _) in enumerate(inp.rack_w_schedule):
        changes.append((at, 0, -2 - i))   # the demand from then on
    changes.sort(key=lambda c: (c[0], c[1]))
    wb0 = inp.wet_bulb_c if inp.wet_bulb_c is not None else plant.site.wet_bulb_c
    db0 = inp.dry_bulb_c if inp.dry_bulb_c is not None else plant.site.dry_bulb_c
    hot = 0.0
    cool_failed = np.zeros(len(plant.cooling), dtype=np.int64)
    pow_failed = np.zeros(len(plant.power), dtype=np.int64)
    surge = 1.0
    surge_by_rack = np.ones(n)   # a surge scales the cards' load only (module doc)
    capping = inp.capping
    wb, db = wb0, db0

    def apply(sign: int, i: int) -> None:
        nonlocal hot, surge, capping, wb, db, base
        if i <= -2:   # the demand schedule
            base = schedule[-2 - i]
            return
        if i < 0:   # weather point
            ts = np.array([w[0] for w in weather])
            t_now = t
            db = float(np.interp(t_now, ts, [w[1] for w in weather]))
            wb = float(np.interp(t_now, ts, [w[2] for w in weather]))
            return
        e = inp.events[i]
        if e.kind == "cdu_trip":
            k = cool_idx[e.target]
            cool_failed[k] += sign * plant.cooling[k].units
        elif e.kind in ("pump_trip", "cooling_loss"):
            k = cool_idx[e.target]
            units = int(e.value) if e.value is not None else 1
            cool_failed[k] += sign * units
        elif e.kind == "feed_loss":
            k = pow_idx[e.target]
            pow_failed[k] += sign * (int(e.value) if e.value is not None else 1)
        elif e.kind == "hot_day":
            hot += sign * float(e.value or 0.0)
        elif e.kind == "load_surge":
            f = float(e.value if e.value is not None else 1.0)
            surge = surge * f if sign > 0 else surge / max(f, 1e-12)
            surge_by_rack[...] = np.where(card_less, 1.0, surge)
        elif e.kind == "capping":
            on = bool(e.value if e.value is not None else 1.0)
            capping = on if sign > 0 else not on

    dt = inp.dt_s
    n_steps = int(math.ceil(inp.horizon_s / dt - 1e-9))
    stride = max(1, int(math.ceil(n_steps / (inp.points - 1))))
    ctl = CapController(min_w=np.full(n, idle_rack), max_w=budget.copy(), policy=inp.policy)
    rack_ids = np.arange(n)
    groups = element_groups(chain, rack_ids)
    t = 0.0
    cond = Conditions(wb0, db0)
    reading = model.settle(base, cond, card_w=card_w_of(base))
    r_liq = net.r_liquid_k_w   # per rack: its card's cold plate (thermal.ThermalParams)
    s = reading.thermal
    limit_c = p.card_limit_c
    shutdown_c = limit_c + inp.shutdown_margin_c
    tripped = np.zeros(n, dtype=bool)   # ever tripped
    out = np.zeros(n, dtype=bool)       # tripped and not back yet
    trip_at = np.full(n, np.nan)
    trips = np.zeros(n, dtype=np.int64)
    cooldown = inp.trip_cooldown_s
    t_limit = np.full(n, np.nan)
    t_cap = np.full(n, np.nan)
    delivered = base.copy()
    series: dict[str, list[float]] = {k: [] for k in (
        "max_card_c", "mean_card_c", "max_rack_return_c", "max_cdu_supply_c",
        "facility_supply_c", "tcs_flow_kg_s", "it_w", "demand_w", "facility_w", "losses_w",
        "mechanical_w", "pue", "racks_capped", "racks_throttled")}
    t_out: list[float] = []
    cdu_out: list[list[float]] = []
    e_fac = e_it = e_demand = 0.0
    thr_lost_time = 0.0
    cap_ticks = 0
    max_racks_capped = 0
    min_cap_fraction = 1.0
    ci = 0
    hyd = None
    flow_cache: tuple[F64, Any] | None = None
    computed = 0
    limit_log: list[tuple[float, int, float | None]] = []
    last_limit = np.full(n, np.inf)
    prev_moved = 0.0
    ratios: list[float] = []
    jumps = 0
    retry_at = 0
    hist: list[ThermalState] = []
    jump_tol = _JUMP_SHARE * inp.quiescent_k
    dec = None
    tol = inp.quiescent_k

    def holds(now: ThermalState, end: ThermalState, decision: Any, capped_racks: int,
              demand: F64, it_w: float, chain_w: float) -> bool:
        """Nothing the run decides on changes between ``now`` and ``end`` (both ends
        suffice: one mode moves every figure monotonically): no card reaches its limit
        or the shutdown temperature, neither the firmware's nor the caps' thermal
        ceiling binds, the caps bind only on fixed limits (rack budgets, power
        elements) and the site contract never binds."""
        live = ~tripped
        hot = np.maximum(now.card_c, end.card_c)
        if bool((hot[live & np.isnan(t_limit)] >= limit_c - tol).any()) \
                or bool((hot[live] >= shutdown_c - tol).any()):
            return False
        room = np.maximum(demand, budget) * (1.0 + 1e-9)
        for st in (now, end):
            ceiling = cards * (limit_c - 0.5 * (st.rack_sup_c + st.rack_ret_c)) / r_liq
            if bool((net.liquid_rack & ~card_less & (ceiling < room)).any()):
                return False
        if decision is not None:
            if capped_racks and not {int(b) for b in np.unique(decision.binding)} <= {0, 2, 3}:
                return False   # thermal (1) or site (4) caps move with the temperatures
            if plant.site.contract_kw:
                for st in (now, end):
                    site = (plant.site.contract_kw * 1e3 * it_w
                            / max(chain_w + st.mechanical_w, 1.0))
                    if site < float(budget.sum()) * (1.0 + 1e-9):
                        return False
        return True

    k = 0
    while k < n_steps:
        t = k * dt
        changed = False
        while ci < len(changes) and changes[ci][0] <= t + 1e-9:
            _, sign, i = changes[ci]
            apply(sign, i)
            ci += 1
            changed = True
        if changed or hyd is None:
            now_cond = Conditions(wb + hot, db + hot, tuple(int(x) for x in cool_failed))
            if hyd is None or now_cond != cond:
                cond = now_cond
                hyd = hydraulics(net, dt, cond)
            flow_cache = None   # a feed lost or back changes the flow too
        demand = base * surge_by_rack
        # firmware protection: slow down at the limit, trip past shutdown
        coolant = 0.5 * (s.rack_sup_c + s.rack_ret_c)
        thermal_cap = np.maximum(cards * (limit_c - coolant) / r_liq, idle_rack)
        thermal_cap = np.where(net.liquid_rack & ~card_less, thermal_cap, np.inf)
        if cooldown is not None and out.any():
            # back once cooled down: long enough since the trip, cards under the limit
            back = out & (t - trip_at >= cooldown - 1e-9) & (s.card_c < limit_c)
            out &= ~back
        new = (s.card_c >= shutdown_c) & ~out
        if new.any():
            out |= new
            tripped |= new
            trip_at[new] = t
            trips[new] += 1
        want = np.minimum(demand, thermal_cap)
        ceiling = thermal_cap.copy()   # rack W its cards may draw, whatever their load
        racks_capped = 0
        if capping:
            if flow_cache is None:
                flow0 = power_flow(chain, delivered, failed_units=pow_failed)
            else:
                flow0 = flow_cache[1]
            if card_less.any():   # nothing to cap: the controller counts them as fixed
                ctl.min_w[card_less] = demand[card_less]
                ctl.max_w[card_less] = demand[card_less]
            limits = CapLimits(card_rack=rack_ids, rack_limit_w=budget, chain=chain,
                               element_limit_w=it_limits(flow0, chain, delivered),
                               site_limit_w=(plant.site.contract_kw * 1e3 * flow0.it_w
                                             / max(flow0.facility_w + s.mechanical_w, 1.0)
                                             if plant.site.contract_kw else None),
                               coolant_c=np.where(card_less, -np.inf, coolant),
                               r_k_w=r_liq / cards,
                               limit_c=limit_c, element_groups=groups)
            dec = ctl.update(np.minimum(delivered, want), limits)
            caps = np.where(card_less, np.inf, dec.caps_w)   # (a rise ramps: not theirs)
            capped = caps < want * (1 - 1e-6)
            racks_capped = int(capped.sum())
            newly = capped & np.isnan(t_cap)
            t_cap[newly] = t
            want = np.minimum(want, caps)
            # a cap is a ceiling only where it binds (elsewhere it tracks the demand)
            ceiling = np.where(capped, np.minimum(ceiling, caps), ceiling)
            if racks_capped:
                max_racks_capped = max(max_racks_capped, racks_capped)
                min_cap_fraction = min(min_cap_fraction,
                                       float((caps / np.maximum(demand, 1.0)).min()))
        else:   # no capping: a rack "hits its cap" when its demand passes its budget
            over = (demand > budget * (1 + 1e-9)) & np.isnan(t_cap)
            t_cap[over] = t
        rack_w = np.where(out, 0.0, want)
        if flow_cache is None or not np.array_equal(flow_cache[0], rack_w):
            flow_cache = (rack_w.copy(), power_flow(chain, rack_w, failed_units=pow_failed))
        flow0 = flow_cache[1]
        rack_w = np.where(flow0.rack_powered, rack_w, 0.0)
        if inp.limit_step > 0:
            q = inp.limit_step * inp.card_tdp_w
            per_card = np.floor(ceiling / cards / q) * q
            lim = np.where(out | ~flow0.rack_powered, 0.0,
                           np.where(per_card < inp.card_tdp_w, per_card, np.inf))
            for r in np.flatnonzero(lim != last_limit).tolist():
                limit_log.append((t, int(r), None if math.isinf(lim[r]) else float(lim[r])))
            last_limit = lim
        nxt = step(net, s, rack_w, dt, cond, card_w_of(rack_w), hyd)
        computed += 1
        hit = (nxt.card_c >= limit_c - 1e-9) & np.isnan(t_limit)
        t_limit[hit] = t + dt
        throttled = int((demand > thermal_cap * (1 + 1e-9)).sum())
        fac = flow0.facility_w + nxt.mechanical_w
        it = flow0.it_w
        if n and bool((rack_w < demand).any()):
            kept = throughput(rack_w / cards, demand / cards, inp.card_tdp_w, inp.card_idle_w,
                              compute_share=inp.compute_share).kept
            lost = float(1.0 - (kept * (rack_w > 0)).mean())
        else:
            lost = 0.0
        # how many steps this one stands for: 1, or a quiescent stretch to the next change
        span = 1
        moved = max(float(np.max(np.abs(nxt.rack_ret_c - s.rack_ret_c), initial=0.0)),
                    float(np.max(np.abs(nxt.root_ret_c - s.root_ret_c), initial=0.0)),
                    float(np.max(np.abs(nxt.cdu_sup_c - s.cdu_sup_c), initial=0.0)),
                    # the CDU return too: while a CDU holds its supply setpoint its
                    # return still relaxes, unseen in the supply (issue 24)
                    float(np.max(np.abs(nxt.cdu_ret_c - s.cdu_ret_c), initial=0.0)))
        # relaxing geometrically at ratio r a step, what is left to move is
        # moved·r/(1 − r) (geometric series): quiescent when that is under quiescent_k
        # (r: the slowest contraction of the last _WINDOW steps, all decaying)
        ratios.append(moved / prev_moved if prev_moved > 0 and not changed else math.inf)
        del ratios[:-_WINDOW]
        ratio = max(ratios)
        left = (moved * ratio / (1.0 - ratio)
                if len(ratios) == _WINDOW and ratio < 1.0 else math.inf)
        prev_moved = moved
        if changed:
            hist.clear()
        hist.append(nxt)
        del hist[:-(_WINDOW + 2)]
        end = None
        steady = skip_quiescent and np.array_equal(rack_w, delivered) and not changed
        if steady and (moved < 1e-9 or left < inp.quiescent_k):
            nxt_change = changes[ci][0] if ci < len(changes) else inp.horizon_s
            if cooldown is not None and out.any():
                due = trip_at[out] + cooldown
                due = due[due > t + 1e-9]
                if due.size:   # a rack's cool-down ends before the next change
                    nxt_change = min(nxt_change, float(due.min()))
            span = max(1, min(n_steps - k, int(math.floor((nxt_change - t) / dt + 1e-9))))
        elif steady and inp.quiescent_k > 0 and inp.limit_step == 0 \
                and len(ratios) == _WINDOW and 0.0 < ratio < 1.0 \
                and min(ratios) >= ratio * (1.0 - _ONE_MODE):
            # a relaxation (one mode) under a constant load: jump it in closed form
            nxt_change = changes[ci][0] if ci < len(changes) else inp.horizon_s
            m = max(1, min(n_steps - k, int(math.floor((nxt_change - t) / dt + 1e-9))))
            if m >= _MIN_JUMP and k >= retry_at and len(hist) == _WINDOW + 2 \
                    and _one_mode(hist, ratio, jump_tol):
                retry_at = k + _WINDOW     # a refused jump is tried again a window later
                end = _settled(net, s, nxt, rack_w, card_w_of(rack_w), cond, ratio, jump_tol)
            if end is not None and not holds(nxt, end, dec if capping else None,
                                             racks_capped, demand, it, flow0.facility_w):
                end = None
            if end is not None:
                span = m
        delivered = rack_w
        e_it += it * dt * span
        e_demand += float(demand.sum()) * dt * span
        thr_lost_time += lost * dt * span
        cap_ticks += span if racks_capped else 0   # a skipped stretch is capped throughout
        if end is None:   # one step, or a quiescent stretch held constant
            s = nxt
            e_fac += fac * dt * span
        else:             # a relaxation: the geometric path to ``end``, in closed form
            # Σ_{i<span} r^i (the mechanical draw relaxes with the temperatures)
            mech_end = nxt.pumps_w + end.fans_w + end.chillers_w
            w_sum = (1.0 - ratio ** span) / (1.0 - ratio)
            e_fac += (flow0.facility_w * span + mech_end * span
                      + (nxt.mechanical_w - mech_end) * w_sum) * dt
            jumps += 1
        base_losses = float(flow0.loss_w.sum())
        for j in range(k, k + span):
            if j % stride == 0 or j == n_steps - 1:
                if end is None:
                    v: dict[str, Any] = {"card_c": s.card_c, "rack_ret_c": s.rack_ret_c,
                                         "cdu_sup_c": s.cdu_sup_c, "root_sup_c": s.root_sup_c}
                    mech = s.mechanical_w
                else:
                    v = _relaxed(nxt, end, ratio ** (j - k))
                    mech = nxt.pumps_w + v["fans_w"] + v["chillers_w"]
                fac_j = fac if end is None else flow0.facility_w + mech
                t_out.append((j + 1) * dt)
                series["max_card_c"].append(float(v["card_c"].max()) if n else 0.0)
                series["mean_card_c"].append(float(v["card_c"].mean()) if n else 0.0)
                series["max_rack_return_c"].append(float(v["rack_ret_c"].max()) if n else 0.0)
                series["max_cdu_supply_c"].append(float(v["cdu_sup_c"].max(initial=0.0)))
                series["facility_supply_c"].append(float(v["root_sup_c"].max(initial=0.0)))
                series["tcs_flow_kg_s"].append(float(nxt.cdu_flow_kg_s.sum()))
                series["it_w"].append(it)
                series["demand_w"].append(float(demand.sum()))
                series["facility_w"].append(fac_j)
                series["losses_w"].append(base_losses)
                series["mechanical_w"].append(mech)
                series["pue"].append(fac_j / it if it > 0 else float("nan"))
                series["racks_capped"].append(float(racks_capped))
                series["racks_throttled"].append(float(throttled))
                cdu_out.append([float(x) for x in v["cdu_sup_c"]])
        if end is not None:
            s = _jumped(nxt, end, ratio, span, dt)
            ratios.clear()       # a fresh window before the next relaxation jump
            hist.clear()
            prev_moved = 0.0
        k += span

    def opt(a: F64) -> list[float | None]:
        return [None if math.isnan(x) else float(x) for x in a]

    hours = 3_600_000.0
    return WhatIfResult(
        t_s=t_out, series=series, cdu_sup_c=cdu_out,
        racks={"time_to_limit_s": opt(t_limit), "time_to_cap_s": opt(t_cap),
               "tripped": tripped.tolist(), "trips": trips.tolist(),
               "out_at_end": out.tolist(),
               "names": list(plant.racks.names) or [str(int(x)) for x in plant.racks.ids]},
        energy={"facility_kwh": e_fac / hours, "it_kwh": e_it / hours,
                "it_lost_kwh": max(e_demand - e_it, 0.0) / hours,
                "throughput_lost_fraction": thr_lost_time / (n_steps * dt),
                "mean_pue": e_fac / e_it if e_it > 0 else float("nan")},
        capping={"on_at_end": capping, "ticks_capped": cap_ticks,
                 "max_racks_capped": max_racks_capped,
                 "min_cap_fraction": min_cap_fraction},
        steps=n_steps, steps_computed=computed, relaxations_jumped=jumps,
        events=[e.to_dict() for e in inp.events], card_limits=limit_log)
