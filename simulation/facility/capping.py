"""Live power capping (DVFS): per-card caps that hold every rack, power element, the
site contract and every card's thermal limit.

**Allocation** (pure, vectorised over a million cards). Each card wants
``want = clip(demand, min, thermal)``, the thermal ceiling being the power at which
the card reaches its limit on its coolant, (T_limit − T_coolant) / R
(:mod:`~simulation.facility.thermal`). Then, for every constraint group from the
smallest up — racks, power elements from the deepest (PDUs) to the feeds, the site —
a group over its limit cuts its cards' *flexible* power (want − min) by the excess,
shared by the policy:

* ``uniform``: in proportion to flexible power (every card loses the same share);
* ``priority``: in proportion to flexible power / priority weight (low-priority
  jobs give first);
* ``thermal``: in proportion to flexible power / thermal headroom (the hottest cards
  give first).

A card whose share exceeds its flexible power stops at its minimum and the rest is
shared again (a few water-filling rounds). Cutting a group only lowers the groups
above it, so once the site is done every limit holds; if even every card at its
minimum does not fit, the group is reported ``infeasible`` (the caps sit at their
minimum: the controller cannot do more, an operator must shed load).
Element limits are on the element's input; they are turned into IT watts with the
element's present ratio of IT below it to input (losses and mechanical share),
:func:`it_limits`.

**Control law** (:class:`CapController`): a card drawing within 2 % of its cap is capped
and its true demand unknown, so it is assumed to want its maximum (the allocation then
gives it what fits); a card below its cap wants what it draws plus a 5 % margin (a card
whose power still rises by more than 2 % a tick, lagging its cap, counts as capped).
Caps fall at once (a limit is never held late) and rise by a fraction α of the gap each
tick — cap fast, uncap gradually, the shape of Facebook's Dynamo (Wu et al., "Dynamo:
Facebook's Data Center-Wide Power Management System", ISCA 2016, a three-band
controller: cap above one threshold, uncap below a lower one, hold between). A rising
cap whose remaining gap after the rise, (1 − α)(target − cap), is at most ``snap``
(10⁻⁶) of the card's range (max − min) takes its target: with α = 0.6 after at most
⌈ln(snap)/ln(1 − α)⌉ = 16 ticks of a steady target, so a settled cap is *exactly* its
fixed point (not approaching it for ever) and a run can tell that nothing changes. The
snap lands on the allocation, which holds every limit, so it adds no overshoot. Since
caps always sum within every limit and an obeying card never draws above its cap, power
cannot overshoot a limit; rising geometrically, caps approach their target from below,
so the settle has no overshoot either (tests: a step settles within a few ticks, < 2 %
overshoot).

**Throughput cost**: a card capped at C with demand d runs the clock whose dynamic
power fits, g(f) = (C − idle)/(d − idle), through the training model's DVFS curve
(:func:`simulation.training.energy.clock_for_cap`); a step whose compute share is
``compute_share`` takes compute_share/f + (1 − compute_share) of its time, so the
throughput is the inverse (the training model's treatment of memory- and
network-bound time, which a clock does not speed up).

>>> caps = allocate(np.full(4, 1000.0), np.full(4, 200.0), np.full(4, 1000.0),
...                 CapLimits(card_rack=np.array([0, 0, 1, 1]),
...                           rack_limit_w=np.array([1500.0, 5000.0])))
>>> caps.caps_w.tolist()
[750.0, 750.0, 1000.0, 1000.0]
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from simulation.facility.power_chain import PowerChain, PowerFlow
from simulation.training.energy import clock_for_cap, op_mix_power
from simulation.training.system import default_clock_power

__all__ = [
    "OpMix",
    "throughput_op_mix",
    "BINDING",
    "POLICIES",
    "CapController",
    "CapDecision",
    "CapLimits",
    "Throughput",
    "allocate",
    "element_groups",
    "it_limits",
    "throughput",
]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

POLICIES = ("uniform", "priority", "thermal")
"""How a group over its limit shares the cut."""

BINDING = ("none", "thermal", "rack", "power", "site")
"""What limits a card's cap (index stored per card in :attr:`CapDecision.binding`)."""

_ROUNDS = 6


@dataclass(frozen=True, eq=False)
class CapLimits:
    """The limits to hold, in IT watts: per rack, per power element (optional, with
    the chain to find each rack's elements) and the site; card thermal limits from
    the coolant temperature at each card and its thermal resistance."""

    card_rack: I64
    rack_limit_w: F64
    chain: PowerChain | None = None
    element_limit_w: F64 | None = None
    site_limit_w: float | None = None
    coolant_c: F64 | None = None
    r_k_w: float | F64 = 0.04
    """Junction to coolant, K/W: one for every card, or per card (an air rack's cards
    take junction to the air at the card, ``coolant_c`` then being that air:
    :mod:`simulation.facility.air`)."""
    limit_c: float = 85.0
    element_groups: tuple[I64, ...] | None = None
    """:func:`element_groups` of ``chain`` and ``card_rack``, if already computed (a
    controller that runs every tick passes it to save the walk)."""


@dataclass(frozen=True, eq=False)
class CapDecision:
    """Caps (W per card), what binds each card, and the groups over their limit."""

    caps_w: F64
    binding: npt.NDArray[np.int8]
    racks_limited: I64
    elements_limited: I64
    site_limited: bool
    infeasible: tuple[str, ...] = ()

    def summary(self) -> dict[str, Any]:
        """Counts per binding reason, for an audit entry."""
        counts = np.bincount(self.binding, minlength=len(BINDING))
        return {"cards_capped": int((self.binding > 0).sum()),
                "by": {name: int(counts[k]) for k, name in enumerate(BINDING) if k},
                "racks_limited": self.racks_limited.tolist()[:100],
                "elements_limited": self.elements_limited.tolist(),
                "site_limited": self.site_limited, "infeasible": list(self.infeasible)}


def _cut(want: F64, floor: F64, coef: F64, group: I64, limit: F64,
         binding: npt.NDArray[np.int8], code: int) -> tuple[F64, npt.NDArray[np.bool_]]:
    """Lower ``want`` so every group's sum ≤ its limit, sharing by flexible × coef.
    Returns the new wants and which groups were over."""
    n = limit.shape[0]
    total = np.bincount(group, weights=want, minlength=n)
    excess = np.maximum(total - limit, 0.0)
    over = excess > 1e-9 * np.maximum(limit, 1.0)
    if not over.any():
        return want, over
    want = want.copy()
    hit = over[group]
    for _ in range(_ROUNDS):
        flex = np.where(hit, want - floor, 0.0)
        weight = flex * coef
        wsum = np.bincount(group, weights=weight, minlength=n)
        share = np.where(wsum[group] > 0, weight / np.where(wsum[group] > 0, wsum[group], 1.0),
                         0.0)
        take = np.minimum(excess[group] * share, flex)
        want -= take
        excess = np.maximum(excess - np.bincount(group, weights=take, minlength=n), 0.0)
        if not (excess > 1e-9 * np.maximum(limit, 1.0)).any():
            break
    binding[hit] = code
    return want, over


def element_groups(chain: PowerChain, rack: I64) -> tuple[I64, ...]:
    """Per depth (deepest first): the element at that depth above each card's rack
    (−1 none); ``rack`` maps cards to racks."""
    depth_of = np.full(chain.n, -1, dtype=np.int64)
    for d, level in enumerate(chain.levels):
        depth_of[level] = d
    anc = np.full((len(chain.levels), chain.n), -1, dtype=np.int64)
    cur = np.arange(chain.n)
    alive = np.ones(chain.n, dtype=bool)
    while alive.any():
        idx = np.flatnonzero(alive)
        anc[depth_of[cur[idx]], idx] = cur[idx]
        nxt = chain.parent[cur[idx]]
        alive[idx] = nxt >= 0
        cur[idx] = np.maximum(nxt, 0)
    per_rack = anc[:, chain.rack_parent]
    return tuple(per_rack[d][rack] for d in range(len(chain.levels) - 1, -1, -1))


def allocate(demand_w: F64, min_w: F64, max_w: F64, limits: CapLimits,
             policy: str = "uniform", weight: F64 | None = None) -> CapDecision:
    """Caps that hold every limit (see the module docstring). ``weight``: the job
    priority of each card for ``priority`` (higher keeps more)."""
    if policy not in POLICIES:
        raise ValueError(f"policy: unknown {policy!r}; one of {', '.join(POLICIES)}")
    n = demand_w.shape[0]
    binding = np.zeros(n, dtype=np.int8)
    hi = np.asarray(max_w, dtype=float)
    if limits.coolant_c is not None:
        thermal = (limits.limit_c - limits.coolant_c) / limits.r_k_w
        binding[thermal < np.minimum(demand_w, hi)] = 1
        hi = np.maximum(np.minimum(hi, thermal), min_w)
    want = np.minimum(np.maximum(demand_w, min_w), hi)    # np.clip, without its overhead
    if policy == "priority":
        coef = 1.0 / np.maximum(weight if weight is not None else np.ones(n), 1e-6)
    elif policy == "thermal":
        headroom = (np.full(n, 50.0) if limits.coolant_c is None else np.maximum(
            limits.limit_c - (limits.coolant_c + demand_w * limits.r_k_w), 0.5))
        coef = 1.0 / headroom
    else:
        coef = np.ones(n)
    infeasible: list[str] = []
    rack = limits.card_rack
    floor_r = np.bincount(rack, weights=min_w, minlength=limits.rack_limit_w.shape[0])
    if (floor_r > limits.rack_limit_w + 1e-6).any():
        infeasible.append("rack")
    want, rack_over = _cut(want, min_w, coef, rack, limits.rack_limit_w, binding, 2)
    elements_limited: list[int] = []
    if limits.chain is not None and limits.element_limit_w is not None:
        big = np.append(limits.element_limit_w, np.inf)
        groups = limits.element_groups if limits.element_groups is not None \
            else element_groups(limits.chain, rack)
        for grp in groups:
            g = np.where(grp >= 0, grp, limits.chain.n)
            want, over = _cut(want, min_w, coef, g, big, binding, 3)
            if over.any():
                elements_limited.extend(int(e) for e in np.flatnonzero(over[:-1]))
    site_limited = False
    if limits.site_limit_w is not None:
        want, over = _cut(want, min_w, coef, np.zeros(n, dtype=np.int64),
                          np.array([limits.site_limit_w]), binding, 4)
        site_limited = bool(over[0])
        if float(min_w.sum()) > limits.site_limit_w:
            infeasible.append("site")
    return CapDecision(caps_w=want, binding=binding,
                       racks_limited=np.flatnonzero(rack_over).astype(np.int64),
                       elements_limited=np.array(sorted(set(elements_limited)), dtype=np.int64),
                       site_limited=site_limited, infeasible=tuple(infeasible))


def it_limits(flow: PowerFlow, chain: PowerChain, rack_w: F64) -> F64:
    """Each power element's limit (min of planned and available input) in IT watts:
    scaled by IT below it over its present input, so losses and mechanical load
    count against the rating."""
    it_below = np.bincount(chain.rack_parent, weights=np.where(flow.rack_powered, rack_w, 0.0),
                           minlength=chain.n).astype(float)
    for d in range(len(chain.levels) - 1, 0, -1):
        idx = chain.levels[d]
        it_below += np.bincount(chain.parent[idx], weights=it_below[idx], minlength=chain.n)
    ratio = np.where(flow.input_w > 0, it_below / np.where(flow.input_w > 0, flow.input_w, 1.0),
                     1.0)
    out: F64 = np.minimum(flow.planned_w, flow.available_w) * ratio
    return out


@dataclass(frozen=True)
class Throughput:
    """Clock fraction per card and the throughput kept (1 = nothing lost)."""

    clock: F64
    kept: F64

    @property
    def lost_fraction(self) -> float:
        """Share of the cards' throughput the caps cost (mean over cards)."""
        return float(1.0 - self.kept.mean()) if self.kept.size else 0.0


DEFAULT_CURVE: tuple[tuple[float, float], ...] = tuple(
    (float(f), float(g)) for f, g in default_clock_power())


@dataclass(frozen=True)
class OpMix:
    """A job's step on one card at full clock, by what bounds it (the training model's
    breakdown, :mod:`simulation.training.energy`): seconds compute-bound, memory-bound
    and in exposed communication out of ``step_s`` (the rest idle), with the power
    constants of :func:`~simulation.training.energy.op_mix_power`."""

    compute_s: float
    memory_s: float
    comm_s: float
    step_s: float
    hbm_w: float = 0.0
    memory_sm: float = 0.25
    comm_activity: float = 0.2


def throughput_op_mix(caps_w: F64, mix: OpMix, tdp_w: float, idle_w: float, *,
                      curve: tuple[tuple[float, float], ...] = DEFAULT_CURVE,
                      iterations: int = 48) -> Throughput:
    """What the caps cost a job whose step the training model priced by op class.

    At clock f the compute-bound time stretches to t_c/f and the rest does not
    (DVFS slows only compute; :mod:`simulation.training.energy`), so the step takes
    T(f) = t_c/f + (T − t_c) and the card draws the op-mix power
    P(f) = idle + [(tdp − idle)·g(f)·t_c/f + P_m(f)·t_m + (tdp − idle)·a_x·t_x] / T(f)
    (:func:`~simulation.training.energy.op_mix_power` with the stretched compute
    time). The clock is the highest f whose P(f) fits the cap (bisection: P rises
    with f), the throughput kept T/T(f). A cap at or over P(1) costs nothing; a
    memory-bound step fits a cap that would slow a GEMM-bound one. With t_c = T
    this is :func:`clock_for_cap` and kept = f, exactly.

    >>> mix = OpMix(compute_s=1.0, memory_s=0.0, comm_s=0.0, step_s=1.0)
    >>> t = throughput_op_mix(np.array([292.0]), mix, 700.0, 100.0,
    ...                       curve=((0.5, 0.32), (1.0, 1.0)))
    >>> round(float(t.clock[0]), 6), round(float(t.kept[0]), 6)
    (0.5, 0.5)
    """
    caps = np.asarray(caps_w, dtype=np.float64)
    f_min = float(curve[0][0])
    fixed = max(mix.step_s - mix.compute_s, 0.0)

    def power(f: F64) -> F64:
        stretched = mix.compute_s / f
        return op_mix_power(stretched, np.full_like(f, mix.memory_s),
                            np.full_like(f, mix.comm_s), stretched + fixed, f, tdp_w,
                            idle_w, curve, mix.hbm_w, mix.memory_sm, mix.comm_activity)

    lo, hi = np.full_like(caps, f_min), np.ones_like(caps)
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        fits = power(mid) <= caps
        lo, hi = np.where(fits, mid, lo), np.where(fits, hi, mid)
    clock = np.where(power(np.ones_like(caps)) <= caps, 1.0, lo)
    kept = mix.step_s / (mix.compute_s / clock + fixed) if mix.step_s > 0 else np.ones_like(
        caps)
    return Throughput(clock=clock, kept=np.asarray(kept, dtype=np.float64))


def throughput(caps_w: F64, demand_w: F64, tdp_w: float, idle_w: float, *,
               compute_share: float = 0.7,
               curve: tuple[tuple[float, float], ...] = DEFAULT_CURVE) -> Throughput:
    """What the caps cost: clock from the cap through the DVFS curve of
    :mod:`simulation.training.energy` (the cap scaled to a fully busy card's), step
    time compute_share/f + (1 − compute_share).

    The fixed ``compute_share`` (0.7) is a **labelled fallback** for cards whose job
    has no training model (the share of a typical LLM step that is GEMM-bound, an
    assumption); a job the training model priced uses :func:`throughput_op_mix`."""
    dyn = np.maximum(demand_w - idle_w, 1e-9)
    busy_equiv = idle_w + (np.minimum(caps_w, demand_w) - idle_w) * (tdp_w - idle_w) / dyn
    clock = np.where(caps_w >= demand_w, 1.0, clock_for_cap(busy_equiv, tdp_w, idle_w, curve))
    kept = 1.0 / (compute_share / clock + (1.0 - compute_share))
    return Throughput(clock=clock, kept=kept)


@dataclass
class CapController:
    """The per-tick control law around :func:`allocate` (module docstring).
    ``caps_w`` is its state: the caps it last set (None: none yet)."""

    min_w: F64
    max_w: F64
    policy: str = "uniform"
    rise: float = 0.6
    margin: float = 0.05
    capped_within: float = 0.02
    snap: float = 1e-6
    """A rise whose remaining gap is at most this share of (max − min) lands on its
    target (module docstring)."""
    caps_w: F64 | None = field(default=None)
    last_w: F64 | None = field(default=None)
    #: The caps before the last update: what a card may still obey while the raised
    #: ones have not reached it (an agent reads caps every few ticks).
    served_w: F64 | None = field(default=None)

    def update(self, measured_w: F64, limits: CapLimits,
               weight: F64 | None = None) -> CapDecision:
        """New caps from this tick's measured card power."""
        prev = self.caps_w if self.caps_w is not None else self.max_w.copy()
        # A card at its previous cap is still capped: a raised cap reaches the card
        # only when its agent next reads it, and a tick in between would otherwise take
        # the old cap's draw for the card's demand (and drop every limit for a tick).
        held = prev if self.served_w is None else np.minimum(prev, self.served_w)
        capped = measured_w >= held * (1.0 - self.capped_within)
        if self.last_w is not None:   # still ramping towards its cap: demand unknown too
            capped |= measured_w > self.last_w * (1.0 + self.capped_within)
        self.last_w = measured_w.copy()
        demand = np.where(capped, self.max_w, measured_w * (1.0 + self.margin))
        target = allocate(demand, self.min_w, self.max_w, limits, self.policy, weight)
        rising = target.caps_w > prev
        raised = prev + self.rise * (target.caps_w - prev)
        # the last sliver of a rise lands on the target (module docstring: snap)
        near = target.caps_w - raised <= self.snap * (self.max_w - self.min_w)
        caps = np.where(rising & ~near, raised, target.caps_w)
        self.served_w = prev.copy()
        self.caps_w = caps
        return CapDecision(caps_w=caps, binding=target.binding,
                           racks_limited=target.racks_limited,
                           elements_limited=target.elements_limited,
                           site_limited=target.site_limited, infeasible=target.infeasible)
