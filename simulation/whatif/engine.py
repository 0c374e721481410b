"""The what-if engine: from a snapshot, over a horizon, with events — and without them.

**Composition.** The scheduling replay is ``simulation.scheduling``'s own discrete-event
run (:class:`simulation.scheduling.engine._Run`, SimPy, ``full`` mode: the queue, the
policies, EASY backfilling): :class:`_Case` extends it with what a live cluster adds —

* the snapshot's running jobs start at time 0 on the cards they hold, for their
  remaining expected time; its queue arrives at time 0 in priority order;
* **failures at their rates**: per card (GPU + HBM) and per server (host), Poisson at
  the rates calibrated on Llama 3's Table 5 (:func:`simulation.resilience.calibrate`;
  Dubey et al. 2024) × ``failure_rate``, down for the class's repair time. The draws
  come from the seed alone, so the baseline and the perturbed case see the *same*
  random failures (common random numbers: the difference is the perturbation's);
* **self-healing**: a job hit by a failure loses the work since its last checkpoint
  (checkpoints every ``checkpoint_interval_s`` since it started), is requeued and
  restarts ``restart_s`` later wherever the policy puts it (``docs/simulation.md``,
  resilience). Lost card-hours = cards × time since the checkpoint (Young 1974's
  accounting of rework);
* a drained element makes its jobs checkpoint and move (nothing lost); a down card is
  held by the run (allocated to nobody) so the scheduler never places on it;
* **power caps** slow a job through the DVFS curve (``simulation.training.energy``:
  the clock f whose busy power fits the cap, compute-bound time × 1/f, the rest
  unchanged: slowdown = c/f + 1 − c with c = ``compute_share``); a running job's
  remaining work is re-timed when a cap on its racks changes;
* **power** per card ``idle + (tdp − idle)·share·g(f)`` (``card_power``), a down card
  draws nothing; summed per rack exactly at every change (start, end, cap, failure):
  energy, peak rack power, utilisation and availability are integrals of step
  functions, not samples.

With a :class:`~simulation.facility.plant.Plant`, each rack's power over time (window
means of its cards' step function plus its static non-card load) drives the facility
engine (:func:`simulation.facility.whatif.run`) with the facility events (CDU trip, feed
trip, wet bulb raised): PUE, thermal limits and capping come from it, and the plant's
per-rack limits come back to the jobs (:func:`.facility.compose`: a rack at its thermal
ceiling or cap runs its cards at the clock it allows, a tripped or unpowered rack goes
down and its jobs restart from their checkpoints, back after its cool-down), round after
round until the jobs' power under the limits is the power that set them. A power element
that lost units (a ``feed_trip``) and cannot carry its racks unpowers them for the
stretch (:func:`.facility.feed_outages`): their jobs are interrupted as by a
``fail_rack`` (:meth:`_Case.power_out`), in the same rounds.

**The fork** also brings: cards cut off by a switch recorded down
(:func:`unavailable_cards`), the live caps per rack (:func:`live_rack_caps`, held over
the horizon in both cases, the tighter of them and any other cap applies), and the
facility elements down (the plant's, in both cases).

The baseline is the same snapshot, seed and failures without the events.
"""
from __future__ import annotations

import bisect
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from operator import itemgetter
from typing import Any

import numpy as np
import numpy.typing as npt

from simulation.resilience import calibrate
from simulation.scheduling import Workload
from simulation.scheduling.engine import _Run, workload_types
from simulation.scheduling.fragmentation import TaskTypes
from simulation.scheduling.state import Placement
from simulation.snapshot import LiveSnapshot
from simulation.training.energy import clock_for_cap, dynamic_fraction
from simulation.training.models import MODELS

from .events import Event, WhatIfInputError, WhatIfSpec
from .layout import Layout
from .speed import DEFAULT_SEQUENCES_PER_CARD, Shape, StepTimes

__all__ = ["CaseResult", "WhatIfResult", "draw_failures", "run_case", "run_whatif",
           "step_times_for", "summary_rows"]

F64 = npt.NDArray[np.float64]
_HOLD = -1  # the ``job`` of a down card's hold in the segment table
_JOB = itemgetter(2)  # of a queue entry (-priority, seq, job)


@dataclass(frozen=True)
class _Failure:
    at_s: float
    node: int
    slots: tuple[int, ...]
    repair_s: float
    kind: str


def draw_failures(layout: Layout, spec: WhatIfSpec) -> list[_Failure]:
    """Random failures over the horizon: Poisson per card (card + HBM classes) and per
    server (host) at the calibrated rates × ``failure_rate`` (seeded: the same list
    for the baseline and the perturbed case)."""
    if spec.failure_rate <= 0:
        return []
    classes = calibrate()
    rng = np.random.default_rng([spec.seed, 7919])
    hours = spec.horizon_s / 3600.0
    out: list[_Failure] = []
    grid = layout.card_grid()
    n_nodes, width = grid.shape
    per_card = (classes["card"].rate_per_unit_h + 5 * classes["hbm"].rate_per_unit_h)
    lam = per_card * spec.failure_rate * hours
    counts = rng.poisson(lam, size=grid.shape) * (grid >= 0)
    for n, s in zip(*np.nonzero(counts), strict=True):
        for t in rng.uniform(0, spec.horizon_s, int(counts[n, s])).tolist():
            out.append(_Failure(t, int(n), (int(s),), classes["card"].repair_h * 3600, "card"))
    host = classes["host"]
    hc = np.asarray(rng.poisson(host.rate_per_unit_h * spec.failure_rate * hours,
                                size=n_nodes), np.int64)
    for node in np.nonzero(hc)[0].tolist():
        slots = tuple(int(s) for s in np.nonzero(grid[node] >= 0)[0])
        for t in rng.uniform(0, spec.horizon_s, int(hc[node])).tolist():
            out.append(_Failure(t, int(node), slots, host.repair_h * 3600, "host"))
    out.sort(key=lambda f: (f.at_s, f.node, f.slots))
    return out


@dataclass
class _PlantLog:
    """What the plant's limits did to one case: limits applied, racks slowed below full
    clock, racks taken out (tripped or unpowered), jobs they stopped, the lowest clock."""

    limits: int = 0
    racks_throttled: set[int] = field(default_factory=set)
    racks_out: set[int] = field(default_factory=set)
    jobs_hit: int = 0
    lowest_clock: float = 1.0


def unavailable_cards(snapshot: LiveSnapshot, layout: Layout) -> set[int]:
    """Card ids out at the fork: failed or in maintenance, and every card of a server a
    switch recorded ``failed`` or in ``maintenance`` carries (the snapshot's
    ``devices_down``; a switch down cuts its servers off, as ``fail_switch`` does)."""
    out = snapshot.down_cards("failed", "maintenance")
    dead = {d for k in ("failed", "maintenance") for d in snapshot.devices_down.get(k, ())}
    servers = {s for d in dead for s in layout.switches.get(d, ())}
    if servers:
        for sid, row in zip(layout.server_ids, layout.cards, strict=True):
            if sid in servers:
                out.update(c for c in row if c >= 0)
    return out


def live_rack_caps(snapshot: LiveSnapshot, layout: Layout) -> F64:
    """W per card each rack (``layout.rack_index`` order) is capped to at the fork by live
    capping (``readings.cap_w``), inf where none binds. The engine clocks a rack as one,
    so a rack's caps are averaged over its cards, an uncapped card counting at its TDP
    (the rack's capped power shared evenly: **assumption**; exact under the controller's
    uniform policy)."""
    racks, rack_of_node = layout.rack_index()
    out = np.full(len(racks), np.inf)
    r = snapshot.readings
    if r is None or r.cap_w is None:
        return out
    cap = dict(zip(r.card_ids.tolist(), np.asarray(r.cap_w, np.float64).tolist(),
                   strict=True))
    total = np.zeros(len(racks))
    count = np.zeros(len(racks))
    for node, row in enumerate(layout.cards):
        k = int(rack_of_node[node])
        for c in row:
            if c >= 0:
                v = cap.get(c, math.nan)
                total[k] += min(v, layout.tdp_w) if math.isfinite(v) else layout.tdp_w
                count[k] += 1
    mean = total / np.maximum(count, 1.0)
    capped = (count > 0) & (mean < layout.tdp_w * (1 - 1e-9))
    out[capped] = mean[capped]
    return out


def _call(fn: Callable[..., Any], *args: Any) -> None:
    """A SimPy callback (it passes the event) that calls ``fn(*args)``."""
    fn(*args[:-1])


class _Case(_Run):
    """One case (baseline or perturbed): the scheduler's run plus failures, drains,
    caps and job changes. Jobs are workload rows; a restarted job is the same row
    queued again with its remaining work."""

    def __init__(self, nodes: Any, work: Workload, spec: WhatIfSpec, layout: Layout,
                 types: TaskTypes, info: dict[str, Any], speed: StepTimes | None = None) -> None:
        super().__init__(nodes, work, spec.policy, "full", spec.seed, types, None, None,
                         len(work), True)
        self.spec, self.layout, self.info = spec, layout, info
        self.speed = speed
        self.train: list[tuple[str, int] | None] = info.get("train") or [None] * len(work)
        self.reference: dict[int, Shape] = {}
        self.fallbacks: set[int] = set()
        self.by_supernode = speed is not None and speed.domain > speed.cards_per_server
        self.work_left = work.duration_s.astype(np.float64).copy()  # full-speed seconds
        self.ckpt_origin = np.zeros(len(work))  # time its checkpoint clock started
        self.lost_card_s = np.zeros(len(work))
        self.restarts = np.zeros(len(work), np.int64)
        self.done_at = np.full(len(work), np.nan)
        self.first_start = np.full(len(work), np.nan)
        self.cancelled = np.zeros(len(work), bool)
        self.racks, self.rack_of_node = layout.rack_index()
        self.clock = np.ones(len(self.racks))
        self.rack_cap = np.full(len(self.racks), np.inf)  # cap_power's W per card
        self.live_cap = np.asarray(info.get("live_cap", self.rack_cap), np.float64)
        self.plant_cap = np.full(len(self.racks), np.inf)  # the plant's limit per card
        self.plant_out: set[int] = set()  # racks the plant took out (tripped, unpowered)
        self.plant_applied = _PlantLog()
        self.feed_applied = _PlantLog()  # racks an overloaded power element took down
        self.contract_kw = spec.contract_kw
        self.site_cap = self.contract_cap(spec.contract_kw)
        self.clock = self.clocks(np.arange(len(self.racks)))
        self.seg: dict[int, tuple[int, float, float]] = {}  # seq -> (job, t0, slowdown)
        self.holds: dict[tuple[int, int], int] = {}  # (node, slot) -> reasons holding it
        self.hold_log: list[tuple[int, int, float, float]] = []  # node, slot, t0, t1
        self.hold_open: dict[tuple[int, int], float] = {}
        self.cap_log: list[tuple[float, F64]] = [(0.0, self.clock.copy())]
        self.applied: list[dict[str, Any]] = []
        self.spares_total = spec.spares
        self.spares_free = spec.spares
        self.borrowed = np.zeros(len(work), np.int64)
        self.spare_swaps = 0
        self.queue_log: list[tuple[float, int, float]] = []  # t, waiting jobs, queued cards
        self.card_demand: list[float] | None = None  # per job; None: to compute (resized)

    def record(self) -> None:
        """The scheduler's timeline, plus the queue as the what-if reports it: jobs
        waiting (a non-gang job's queued cards count as one job) and the cards they ask
        for (a fraction of one card for a shared one)."""
        super().record()
        q = self.queue
        # the list's own C loops where they can be (no unit queued): it is recorded at every
        # change and holds a thousand jobs in the benchmark; summed in queue order, the
        # float a running total would give
        dem = self.card_demand
        if dem is None:
            num = self.work.num_gpu
            dem = self.card_demand = np.where(num > 1, num, self.work.gpu_milli / 1000.0
                                              ).astype(np.float64).tolist()
        units = self.unit
        cards = ([1.0 if seq in units else dem[j] for _, seq, j in q] if units
                 else list(map(dem.__getitem__, map(_JOB, q))))
        self.queue_log.append((float(self.env.now), len(set(map(_JOB, q))), sum(cards, 0.0)))

    # -------------------------------------------------------------- speed
    def slowdown(self, pl: Placement, j: int | None = None) -> float:
        """The job's time per unit of work on ``pl`` at the slowest clock among its racks:
        the training model's step(now) / step(reference) for a job that names one
        (:mod:`.speed`), else c/f + 1 − c (a job without a model, or one the model
        cannot run where it is: counted in ``fallbacks``)."""
        f = min(float(self.clock[self.rack_of_node[n]]) for n, _, _ in pl)
        if self.speed is not None and j is not None and self.train[j] is not None:
            ref = self.reference.get(j)
            if ref is None:
                ref = self.reference[j] = self.shape(j, None, 1.0)
            now = self.shape(j, pl, f)
            slow = self.speed.slowdown(ref, now)
            if slow is not None:
                return slow
            self.fallbacks.add(j)
            c = self.spec.compute_share
            # its work was not rescaled on a resize: the linear bound, as for other jobs
            return (c / max(f, 1e-6) + 1.0 - c) * ref.cards / max(now.cards, 1)
        c = self.spec.compute_share
        return c / max(f, 1e-6) + 1.0 - c

    def shape(self, j: int, pl: Placement | None, clock: float) -> Shape:
        """Job ``j``'s training shape on ``pl`` (None: its requested cards in the
        accelerator's full scale-up domain) at ``clock``. The domain is the fewest of
        its whole cards in one server (one supernode when the domain spans servers)."""
        assert self.speed is not None and self.train[j] is not None
        model, batch = self.train[j]  # type: ignore[misc]
        if pl is None:
            cards = int(self.work.num_gpu[j])
            return Shape(model, batch, cards, min(cards, self.speed.domain), clock)
        per: dict[int, int] = {}
        sn = self.layout.supernode_ids
        for n, c, m in pl:
            if c >= 0 and m >= 1000:
                key = sn[n] if self.by_supernode and sn[n] else -1 - n
                per[key] = per.get(key, 0) + 1
        cards = sum(per.values())
        return Shape(model, batch, max(cards, 1), min(per.values(), default=1), clock)

    # -------------------------------------------------------------- the run's hooks
    def start(self, seq: int, j: int, pl: Placement, arrival: float) -> None:
        slow = self.slowdown(pl, j)
        self.work.duration_s[j] = self.work_left[j] * slow
        if math.isnan(self.first_start[j]):
            self.first_start[j] = float(self.env.now)
        else:
            self.ckpt_origin[j] = float(self.env.now)
        self.seg[seq] = (j, float(self.env.now), slow)
        super().start(seq, j, pl, arrival)

    def finish(self, seq: int, j: int, arrival: float) -> None:
        if seq not in self.running or self.seg.get(seq, (j,))[0] != j:
            return  # a completion of a segment interrupted before it ended
        super().finish(seq, j, arrival)
        self.return_spares(j)
        self.done_at[j] = float(self.env.now)
        self.work_left[j] = 0.0

    # -------------------------------------------------------------- interruptions
    def stop(self, seq: int, *, lose: bool, requeue: bool = True) -> None:
        """End segment ``seq`` now: free its cards, account the work done (and lost,
        ``lose``), queue the rest again."""
        now = float(self.env.now)
        _, _, pl, req = self.running.pop(seq)
        self.st.release(pl, req.cpu_milli, req.memory_mib, req.type_id)
        j, t0, slow = self.seg[seq]
        self.job_log[seq] = (*self.job_log[seq][:3], now)
        done = (now - t0) / slow
        left = max(0.0, self.work_left[j] - done)
        if lose:
            since = (now - self.ckpt_origin[j]) % self.spec.checkpoint_interval_s
            cards = sum(m for _, c, m in pl if c >= 0) / 1000.0
            self.lost_card_s[j] += cards * since
            left += since / slow + self.spec.restart_s
            self.restarts[j] += 1
        self.work_left[j] = left
        if requeue or self.cancelled[j]:
            self.return_spares(j)
        if requeue and not self.cancelled[j]:
            entry = (-int(self.work.priority[j]), self.seq, j)
            self.seq += 1
            bisect.insort(self.queue, entry)

    def swap_in_spares(self, seq: int, down: set[tuple[int, int]]) -> bool:
        """Hot spares (the resilience kind's model): when the pool has a card for each
        of the job's failed cards, the job resumes at once on its other cards plus the
        spares — it loses the work since its checkpoint and ``restart_s``, but is not
        requeued; the spares return to the pool when it ends or is requeued."""
        _, _, pl, _ = self.running[seq]
        lost = [(n, c, m) for n, c, m in pl if (n, c) in down]
        rest = [(n, c, m) for n, c, m in pl if (n, c) not in down]
        if not rest or self.spares_free < len(lost):
            return False
        j = self.seg[seq][0]
        self.stop(seq, lose=True, requeue=False)
        self.spares_free -= len(lost)
        self.borrowed[j] += len(lost)
        new = self.seq
        self.seq += 1
        self.start(new, j, rest, float(self.work.arrival_s[j]))
        self.spare_swaps += 1
        return True

    def return_spares(self, j: int) -> None:
        self.spares_free += int(self.borrowed[j])
        self.borrowed[j] = 0

    def jobs_on(self, cells: set[tuple[int, int]]) -> list[int]:
        return [seq for seq, (_, _, pl, _) in self.running.items()
                if any((n, c) in cells for n, c, _ in pl)]

    def take_down(self, cells: list[tuple[int, int]], *, lose: bool,
                  back_after: float | None) -> int:
        """Cards out of service now (failed or drained), back after ``back_after`` s;
        returns how many running jobs it stopped."""
        healthy = self.info["healthy"]
        cells = [c for c in cells if healthy[c]]
        down = set(cells)
        hit = self.jobs_on(down)
        for seq in hit:
            if not (lose and self.swap_in_spares(seq, down)):
                self.stop(seq, lose=lose)
        now = float(self.env.now)
        for cell in cells:
            if self.holds.get(cell, 0) == 0:
                free = int(self.st.free[cell])
                if free > 0:
                    self.st.allocate([(cell[0], cell[1], free)], 0, 0)
                self.hold_open[cell] = now
            self.holds[cell] = self.holds.get(cell, 0) + 1
        if back_after is not None and math.isfinite(back_after):
            ev = self.env.timeout(back_after)
            ev.callbacks.append(partial(_call, self.bring_back, cells))
        self.dispatch()
        self.record()
        return len(hit)

    def bring_back(self, cells: list[tuple[int, int]]) -> None:
        now = float(self.env.now)
        for cell in cells:
            self.holds[cell] -= 1
            if self.holds[cell] == 0:
                held = 1000 - int(self.st.free[cell])
                if held > 0:
                    self.st.release([(cell[0], cell[1], held)], 0, 0)
                self.hold_log.append((*cell, self.hold_open.pop(cell), now))
        self.dispatch()
        self.record()

    def contract_cap(self, contract_kw: float | None) -> float:
        """W per card a contract leaves. A contract is on the utility feed: the site's
        facility power is PUE × IT power (the PUE's definition, The Green Grid WP#49),
        and the IT power is the cards' plus the racks' static non-card load
        (``Layout.rack_static_w``: servers, switches, optics), so the cards' budget is
        ``contract / pue − static`` (the losses and the mechanical plant are the PUE's
        share), shared by every healthy card in the layout — the site stays under the
        contract with every card busy. 0 when the static load alone fills the budget."""
        if contract_kw is None:
            return math.inf
        cards = float(self.info["healthy"].sum()) if "healthy" in self.info else 0.0
        budget = contract_kw * 1e3 / self.spec.pue - float(self.layout.static_w().sum())
        return max(0.0, budget) / max(cards, 1.0)

    def clocks(self, racks: npt.NDArray[np.int64]) -> F64:
        """The racks' clocks under the tighter of their cap and the contract's."""
        lay = self.layout
        cap = np.minimum(np.minimum(self.rack_cap[racks], self.site_cap),
                         np.minimum(self.live_cap[racks], self.plant_cap[racks]))
        capped = np.isfinite(cap) & (cap < lay.tdp_w)
        f = np.ones(len(racks))
        if capped.any():
            f[capped] = clock_for_cap(cap[capped], lay.tdp_w, lay.idle_w, lay.clock_power)
        return f

    def set_clock(self, racks: list[int], cap_w: float | None) -> None:
        """Cap (or uncap: None) the racks' cards; re-time the jobs running on them."""
        self.rack_cap[racks] = np.inf if cap_w is None else float(cap_w)
        self.reclock(racks)

    def set_contract(self, contract_kw: float | None) -> float:
        """A new site contract from now: every rack re-clocked; returns the card cap."""
        self.contract_kw = contract_kw
        self.site_cap = self.contract_cap(contract_kw)
        self.reclock(list(range(len(self.racks))))
        return self.site_cap

    def reclock(self, racks: list[int]) -> None:
        """The racks' clocks from their caps and the contract; the jobs running on a
        rack whose clock changed are re-timed."""
        idx = np.asarray(racks, np.int64)
        f = self.clocks(idx)
        changed = {int(r) for r, a, b in zip(idx.tolist(), self.clock[idx].tolist(),
                                             f.tolist(), strict=True) if a != b}
        self.clock[idx] = f
        self.cap_log.append((float(self.env.now), self.clock.copy()))
        for seq in [s for s, (_, _, pl, _) in self.running.items()
                    if any(int(self.rack_of_node[n]) in changed for n, _, _ in pl)]:
            self.retime(seq)

    def retime(self, seq: int) -> None:
        """The same cards, a new pace: end the segment and start it again in place."""
        _, _, pl, _ = self.running[seq]
        j = self.seg[seq][0]
        ck = self.ckpt_origin[j]
        self.stop(seq, lose=False, requeue=False)
        new = self.seq
        self.seq += 1
        self.start(new, j, pl, float(self.work.arrival_s[j]))
        self.ckpt_origin[j] = ck

    # -------------------------------------------------------------- the plant
    def rack_cells(self, rack: int) -> list[tuple[int, int]]:
        """The in-service slots of rack index ``rack``."""
        healthy, grid = self.info["healthy"], self.info["grid"]
        return [(int(n), int(s)) for n in np.flatnonzero(self.rack_of_node == rack).tolist()
                for s in np.nonzero(grid[n] >= 0)[0].tolist() if healthy[n, s]]

    def plant_limit(self, rack: int, card_w: float | None) -> None:
        """The plant's limit on rack index ``rack`` from now (``simulation.whatif.facility``):
        W per card (its cards run at the clock it allows, as under ``cap_power``), None
        (no limit), or 0 — the rack tripped or lost its power: its cards go down and
        their jobs lose the work since their checkpoint and are requeued, as on a
        failure, until the plant powers it again."""
        log = self.plant_applied
        log.limits += 1
        if card_w == 0.0:
            if rack not in self.plant_out:
                self.plant_out.add(rack)
                log.racks_out.add(rack)
                log.jobs_hit += self.take_down(self.rack_cells(rack), lose=True,
                                               back_after=None)
            return
        if rack in self.plant_out:
            self.plant_out.discard(rack)
            self.bring_back(self.rack_cells(rack))
        self.plant_cap[rack] = math.inf if card_w is None else float(card_w)
        self.reclock([rack])
        if self.clock[rack] < 1.0:
            log.racks_throttled.add(rack)
            log.lowest_clock = min(log.lowest_clock, float(self.clock[rack]))

    def power_out(self, racks: Mapping[int, float | None]) -> None:
        """Racks (index → back after s; None: not within the horizon) lose their power now:
        an element of their power chain is overloaded (:func:`.facility.feed_power`'s
        ``racks_down``). Applied as a ``fail_rack`` is (:meth:`take_down`: the work since
        the checkpoint lost, a hot spare or a requeue onto cards outside them), every rack
        of the instant at once — one by one, a stopped job could restart on a rack about
        to go out at the same instant; their cards draw nothing while out."""
        log = self.feed_applied
        cells = {r: self.rack_cells(r) for r in racks}
        log.limits += len(racks)
        log.racks_out.update(racks)
        log.jobs_hit += self.take_down([c for r in racks for c in cells[r]], lose=True,
                                       back_after=None)
        for r, back in racks.items():
            if back is not None and math.isfinite(back):
                ev = self.env.timeout(back)
                ev.callbacks.append(partial(_call, self.bring_back, cells[r]))

    # -------------------------------------------------------------- events
    def cells_of(self, ev: Event, where: str) -> list[tuple[int, int]]:
        lay = self.layout
        grid = self.info["grid"]
        target = int(ev.target) if isinstance(ev.target, int) else -1
        element = ev.element
        if element == "card":
            place = self.info["card_place"].get(target)
            if place is None:
                raise WhatIfInputError(f"{where}.target", f"no card {target} in this cluster")
            return [place]
        if element == "server":
            servers = [target]
        elif element == "rack":
            servers = [s for s, r in zip(lay.server_ids, lay.rack_ids, strict=True)
                       if r == target]
        else:
            servers = list(lay.switches.get(target, ()))
            if target not in lay.switches:
                raise WhatIfInputError(f"{where}.target", f"no switch {target} in this "
                                                          f"cluster")
        nodes = [self.info["node_of"][s] for s in servers if s in self.info["node_of"]]
        if not nodes and element != "switch":
            raise WhatIfInputError(f"{where}.target", f"no {element} {target} in this cluster")
        return [(n, int(s)) for n in nodes for s in np.nonzero(grid[n] >= 0)[0].tolist()]

    def apply(self, ev: Event, where: str) -> None:
        kind = ev.kind
        now = float(self.env.now)
        note: dict[str, Any] = {"at_s": now, "kind": kind, "target": ev.target}
        if ev.element is not None:
            cells = self.cells_of(ev, where)
            hit = self.take_down(cells, lose=kind.startswith("fail_"),
                                 back_after=ev.duration_s)
            note.update(cards=len(cells), jobs_hit=hit)
        elif kind == "cancel_job":
            j = self.info["row_of"].get(ev.target)
            if j is None:
                raise WhatIfInputError(f"{where}.target", f"no job {ev.target} in the snapshot"
                                                          f" or an earlier add_job")
            self.cancelled[j] = True
            for seq in [s for s in self.running if self.seg[s][0] == j]:
                self.stop(seq, lose=False, requeue=False)
            self.queue[:] = [e for e in self.queue if e[2] != j]
            self.dispatch()
            self.record()
        elif kind == "resize_job":
            j = self.info["row_of"].get(ev.target)
            if j is None:
                raise WhatIfInputError(f"{where}.target", f"no job {ev.target} in the snapshot"
                                                          f" or an earlier add_job")
            old = int(self.work.num_gpu[j])
            new = int(ev.value or old)
            running = [s for s in self.running if self.seg[s][0] == j]
            for seq in running:
                self.stop(seq, lose=False)
            self.work.num_gpu[j] = new
            self.work.gpu_milli[j] = 1000
            self.card_demand = None
            self.requests.pop(j, None)
            self.type_of[j] = -1
            if self.speed is None or self.train[j] is None:
                self.work_left[j] *= old / new  # linear scaling: an upper bound
            # a training job's new size enters through its step time (``slowdown``)
            self.dispatch()
            self.record()
        elif kind == "add_job":
            j = self.info["row_of"][("added", where)]
            self.work.arrival_s[j] = now
            self.arrive(j)
        elif kind == "change_spares":
            size = int(ev.value or 0)
            self.spares_free += size - self.spares_total
            self.spares_total = size
            note["spares"] = size
        elif kind == "change_policy":
            self.policy = str(ev.policy)
            self.dispatch()
            self.record()
        elif kind == "cap_power":
            racks = (list(range(len(self.racks))) if ev.target in (None, "") else
                     [self.racks.index(int(ev.target))] if int(ev.target) in self.racks
                     else [])
            if not racks:
                raise WhatIfInputError(f"{where}.target", f"no rack {ev.target} in this "
                                                          f"cluster")
            self.set_clock(racks, ev.value)
            note["clock"] = float(self.clock[racks[0]])
            if ev.duration_s is not None:
                back = self.env.timeout(ev.duration_s)
                back.callbacks.append(partial(_call, self.set_clock, racks, None))
        elif kind == "change_contract":
            before = self.contract_kw
            cap = self.set_contract(ev.value)
            note.update(contract_kw=ev.value, card_cap_w=cap if math.isfinite(cap) else None,
                        static_kw=float(self.layout.static_w().sum()) / 1e3,
                        clock=float(self.clock.min()) if len(self.clock) else 1.0,
                        below_idle=bool(cap < self.layout.idle_w))
            if ev.duration_s is not None:
                back = self.env.timeout(ev.duration_s)
                back.callbacks.append(partial(_call, self.set_contract, before))
        self.applied.append(note)

    def events(self, events: list[tuple[float, Callable[[], Any]]]) -> Any:
        for at, fn in events:
            if at > self.env.now:
                yield self.env.timeout(at - self.env.now)
            fn()


@dataclass(frozen=True)
class CaseResult:
    """One case's figures (JSON by :meth:`to_dict`)."""

    jobs: dict[str, Any]
    totals: dict[str, Any]
    series: dict[str, list[float]]
    per_job: dict[str, npt.NDArray[Any]]
    rack_peak_w: F64
    applied: list[dict[str, Any]]
    #: rows (start s, end s, rack index, card share) of every busy card (not in the JSON)
    segments: F64 | None = None
    #: the racks' power as a step function: (change times s, W per time × rack)
    rack_steps: tuple[F64, F64] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"jobs": self.jobs, "totals": self.totals, "series": self.series,
                "applied": self.applied}


def _inputs(snapshot: LiveSnapshot, layout: Layout, spec: WhatIfSpec,
            events: tuple[Event, ...]) -> tuple[Workload, dict[str, Any], list[dict[str, Any]]]:
    """The workload rows (running jobs, the queue, added jobs) and the pins."""
    place = layout.card_place()
    records: list[dict[str, Any]] = []
    ids: list[Any] = []
    pins: list[dict[str, Any]] = []
    unavailable = unavailable_cards(snapshot, layout)
    train: list[tuple[str, int] | None] = []

    def training(model: str | None, batch: int | None, cards: int, milli: int) -> None:
        """The row's (model, global batch), for whole-card jobs that name a model."""
        if model is None or model not in MODELS or milli < 1000:
            train.append(None)
        else:
            train.append((model, int(batch or DEFAULT_SEQUENCES_PER_CARD * cards)))

    for job in snapshot.running:
        pieces = [(place[c][0], place[c][1], m) for c, m in zip(job.cards, job.share_milli,
                                                                strict=True)
                  if c in place and c not in unavailable]
        if not pieces:
            continue
        remaining = job.remaining_s(snapshot.taken_at)
        cards = len(pieces)
        records.append({"name": job.name or f"job {job.id}", "num_gpu": cards,
                        "gpu_milli": pieces[0][2] if cards == 1 else 1000,
                        "duration_s": spec.horizon_s * 2 if remaining is None
                        else max(remaining, 1e-3), "priority": job.priority})
        since = 0.0 if job.started is None else max(0.0, snapshot.taken_at - job.started)
        pins.append({"row": len(ids), "placement": pieces, "since_s": since})
        ids.append(job.id)
        training(job.training_model, job.global_batch, len(job.cards),
                 min(job.share_milli, default=1000))
    for q in snapshot.queue:
        records.append({"name": q.name or f"job {q.id}", "num_gpu": q.cards,
                        "gpu_milli": q.share_milli if q.cards == 1 else 1000,
                        "duration_s": q.duration_s or spec.default_duration_s,
                        "priority": q.priority})
        ids.append(q.id)
        training(q.training_model, q.global_batch, q.cards, q.share_milli)
    for i, ev in enumerate(events):
        if ev.kind == "add_job" and ev.job is not None:
            records.append({"name": ev.job["name"] or f"added {i}",
                            "num_gpu": ev.job["cards"], "gpu_milli": ev.job["share_milli"],
                            "duration_s": ev.job["duration_s"], "priority": ev.job["priority"],
                            "arrival_s": ev.at_s})
            ids.append(("added", f"events[{i}]"))
            training(ev.job.get("training_model"), ev.job.get("global_batch"),
                     ev.job["cards"], ev.job["share_milli"])
    work = Workload.from_records(records) if records else Workload.from_records([])
    row_of: dict[Any, int] = {}
    for j, key in enumerate(ids):
        row_of[key] = j
    for i, ev in enumerate(events):
        if ev.kind == "add_job" and ev.job is not None and ev.job.get("id") is not None:
            row_of[ev.job["id"]] = row_of[("added", f"events[{i}]")]
    info = {"ids": ids, "row_of": row_of, "running_rows": len(pins),
            "queued_rows": len(snapshot.queue), "train": train}
    return work, info, pins


def run_case(snapshot: LiveSnapshot, layout: Layout, spec: WhatIfSpec, *,
             events: tuple[Event, ...] | None = None,
             failures: list[_Failure] | None = None,
             speed: StepTimes | None = None,
             plant_limits: Sequence[tuple[float, int, float | None]] = (),
             outages: Sequence[tuple[int, float, float | None]] = ()) -> CaseResult:
    """One case: ``events`` (default: the spec's; ``()`` for the baseline). ``speed``:
    the training model's step times (default: :func:`step_times_for` the layout; share
    one between cases so its cache serves both). ``plant_limits``: (time s, rack index,
    W per card / None / 0) from the plant (:func:`.facility.plant_limits`). ``outages``:
    (rack index, from s, to s — None: the horizon) a rack is unpowered by an overloaded
    power element (:func:`.facility.feed_outages`; :meth:`_Case.power_out`). The live
    caps of the snapshot hold in both cases over the whole horizon."""
    events = spec.events if events is None else events
    unavailable = unavailable_cards(snapshot, layout)
    nodes = layout.nodes(unavailable)
    work, info, pins = _inputs(snapshot, layout, spec, spec.events)
    # FGD's target workload as the scheduling engine builds it (the artifact's typical pods)
    types, specs = workload_types(work)
    grid = layout.card_grid()
    info.update(grid=grid, card_place=layout.card_place(), healthy=nodes.healthy(),
                node_of={s: i for i, s in enumerate(layout.server_ids)},
                live_cap=live_rack_caps(snapshot, layout))
    if speed is None:
        speed = step_times_for(layout)
    case = _Case(nodes, work, spec, layout, types, info, speed)
    if any(specs):
        case.st.set_type_models(specs)
    # the snapshot's running jobs, where they are, for their remaining time
    for pin in pins:
        j = int(pin["row"])
        pl = [(int(n), int(c), int(m)) for n, c, m in pin["placement"]]
        if speed is not None and case.train[j] is not None:
            case.reference[j] = case.shape(j, pl, 1.0)  # its pace at the fork
        seq = case.seq
        case.seq += 1
        case.start(seq, j, pl, 0.0)
        case.ckpt_origin[j] = case.first_start[j] = -float(pin["since_s"])
    added = {info["row_of"][("added", f"events[{i}]")] for i, e in enumerate(spec.events)
             if e.kind == "add_job"}
    order = np.array([j for j in range(info["running_rows"], len(work)) if j not in added],
                     np.int64)
    case.record()
    case.env.process(case.arrivals(order))
    timed: list[tuple[float, int, Callable[[], Any]]] = []
    for f in failures or []:
        cells = [(f.node, s) for s in f.slots]
        timed.append((f.at_s, 0, partial(case.take_down, cells, lose=True,
                                         back_after=f.repair_s)))
    for i, ev in enumerate(events):
        if ev.kind in ("cdu_trip", "feed_trip", "raise_wet_bulb"):
            continue  # the facility engine's
        where = f"events[{i}]"
        timed.append((ev.at_s, 1, partial(case.apply, ev, where)))
    for at, rack, card_w in plant_limits:
        if at < spec.horizon_s:
            timed.append((at, 2, partial(case.plant_limit, rack, card_w)))
    out_at: dict[float, dict[int, float | None]] = {}
    for rack, t0, t1 in outages:   # per instant, each rack for its longest stretch
        if t0 < spec.horizon_s:
            racks = out_at.setdefault(t0, {})
            back = None if t1 is None else t1 - t0
            old = racks.get(rack, 0.0)
            racks[rack] = None if back is None or old is None else max(old, back)
    for t0, racks in out_at.items():
        timed.append((t0, 3, partial(case.power_out, racks)))
    timed.sort(key=lambda x: (x[0], x[1]))
    case.env.process(case.events([(t, fn) for t, _, fn in timed]))
    case.env.run(until=spec.horizon_s)
    return _figures(case, work, info)


def step_times_for(layout: Layout, *, cache: bool = True) -> StepTimes | None:
    """The training model's step times on the layout's accelerator (None without one)."""
    if not layout.accelerator:
        return None
    return StepTimes(layout.accelerator, layout.width, cache=cache)


def _step_integral(t: F64, v: F64, horizon: float) -> float:
    """∫ v dt of a step function (v[i] from t[i] to t[i+1], the last to the horizon)."""
    dt = np.diff(np.append(t, horizon))
    return float(np.sum(v * np.clip(dt, 0.0, None)))


def _figures(case: _Case, work: Workload, info: dict[str, Any]) -> CaseResult:
    """Per job and totals; power per rack as an exact step function."""
    spec, lay = case.spec, case.layout
    horizon = spec.horizon_s
    now = float(case.env.now)
    for cell, t0 in list(case.hold_open.items()):
        case.hold_log.append((*cell, t0, now))
    n_racks = len(case.racks)
    # change points: segment starts/ends, hold starts/ends, clock changes
    seg_rows = []
    for seq, (_, _, start, stop) in case.job_log.items():
        pl = case.placements.get(seq) or []
        e = horizon if math.isnan(stop) else min(stop, horizon)
        for n, c, m in pl:
            if c >= 0:
                seg_rows.append((start, e, int(case.rack_of_node[n]), m / 1000.0))
    busy = np.array(seg_rows, np.float64).reshape(-1, 4)
    holds = np.array([(t0, t1, int(case.rack_of_node[n]), 1.0)
                      for n, _, t0, t1 in case.hold_log], np.float64).reshape(-1, 4)
    cap_t = np.array([t for t, _ in case.cap_log])
    qlog = np.array(case.queue_log or [(0.0, 0, 0.0)], np.float64).reshape(-1, 3)
    times = np.unique(np.concatenate([[0.0], busy[:, 0], busy[:, 1], holds[:, 0], holds[:, 1],
                                      cap_t, qlog[:, 0]]))
    times = times[(times >= 0) & (times < horizon)]

    def steps(rows: npt.NDArray[np.float64]) -> F64:
        out = np.zeros((len(times), n_racks))
        if len(rows):
            a = np.searchsorted(times, np.clip(rows[:, 0], 0, None), side="left")
            b = np.searchsorted(times, rows[:, 1], side="left")
            r = rows[:, 2].astype(np.int64)
            np.add.at(out, (a, r), rows[:, 3])
            keep = b < len(times)
            np.add.at(out, (b[keep], r[keep]), -rows[keep, 3])
        return np.cumsum(out, axis=0)

    busy_cards = steps(busy)  # cards' shares busy per rack
    down_cards = steps(holds)
    clocks = np.vstack([c for _, c in case.cap_log])
    which = np.searchsorted(cap_t, times, side="right") - 1
    g = dynamic_fraction(clocks[which], lay.clock_power)
    cards_per_rack = np.bincount(case.rack_of_node, weights=info["healthy"].sum(axis=1),
                                 minlength=n_racks)
    up = cards_per_rack[None, :] - down_cards
    rack_w = lay.idle_w * up + (lay.tdp_w - lay.idle_w) * busy_cards * g
    total_w = rack_w.sum(axis=1)
    n_cards = float(cards_per_rack.sum())
    energy_j = _step_integral(times, total_w, horizon)
    util = busy_cards.sum(axis=1) / max(n_cards, 1.0)
    avail = 1.0 - down_cards.sum(axis=1) / max(n_cards, 1.0)
    # the queue: a step function, its last record at or before each time holds
    at = np.clip(np.searchsorted(qlog[:, 0], times, side="right") - 1, 0, None)
    waiting, queued_cards = qlog[at, 1], qlog[at, 2]
    # per job
    n = len(work)
    arrival: F64 = work.arrival_s.astype(np.float64)
    end = case.done_at
    cards = np.where(work.num_gpu > 1, work.num_gpu, work.gpu_milli / 1000.0).astype(float)
    wait = case.first_start - np.where(np.arange(n) < info["running_rows"], case.first_start,
                                       arrival)
    jobs = {"total": n, "completed": int(np.isfinite(end).sum()),
            "cancelled": int(case.cancelled.sum()), "restarts": int(case.restarts.sum()),
            "spare_swaps": case.spare_swaps,
            "training_model_jobs": sum(t is not None for t in case.train)
            if case.speed is not None else 0,
            "speed_fallbacks": len(case.fallbacks),
            "running_at_end": len(case.running), "queued_at_end": len(case.queue)}
    queued_rows = np.arange(info["running_rows"], n)
    waits = np.where(np.isnan(case.first_start[queued_rows]),
                     horizon - arrival[queued_rows], wait[queued_rows])
    totals = {
        "energy_mwh": energy_j / 3.6e9,
        "mean_power_kw": energy_j / horizon / 1e3,
        "peak_power_kw": float(total_w.max()) / 1e3 if len(total_w) else 0.0,
        "peak_rack_kw": float(rack_w.max()) / 1e3 if rack_w.size else 0.0,
        "utilisation": _step_integral(times, util, horizon) / horizon,
        "availability": _step_integral(times, avail, horizon) / horizon,
        "lost_card_hours": float(case.lost_card_s.sum()) / 3600.0,
        "queue_wait_mean_s": float(waits.mean()) if len(waits) else 0.0,
        "queue_wait_p90_s": float(np.percentile(waits, 90)) if len(waits) else 0.0,
        "waiting_jobs_mean": _step_integral(times, waiting, horizon) / horizon,
        "waiting_jobs_peak": float(waiting.max()) if len(waiting) else 0.0,
        "queued_cards_mean": _step_integral(times, queued_cards, horizon) / horizon,
        "cards": n_cards,
        "plant_throttled_racks": len(case.plant_applied.racks_throttled),
        "plant_out_racks": len(case.plant_applied.racks_out),
        "plant_jobs_hit": case.plant_applied.jobs_hit,
        "plant_lowest_clock": case.plant_applied.lowest_clock,
        "feed_out_racks": len(case.feed_applied.racks_out),
        "feed_jobs_hit": case.feed_applied.jobs_hit,
    }
    idx = np.unique(np.linspace(0, len(times) - 1, min(spec.points, len(times)))
                    .round().astype(np.int64)) if len(times) else np.zeros(0, np.int64)
    series = {"t_s": times[idx].tolist(), "power_kw": (total_w[idx] / 1e3).tolist(),
              "utilisation": util[idx].tolist(), "availability": avail[idx].tolist(),
              "waiting_jobs": waiting[idx].tolist(), "queued_cards": queued_cards[idx].tolist()}
    mean_rack_w = (np.sum(rack_w * np.diff(np.append(times, horizon))[:, None], axis=0)
                   / horizon if len(times) else np.zeros(n_racks))
    per_job: dict[str, npt.NDArray[Any]] = {
               "mean_rack_w": mean_rack_w, "completion_s": end,
               "first_start_s": case.first_start, "wait_s": wait,
               "lost_card_h": case.lost_card_s / 3600.0, "restarts": case.restarts,
               "cards": cards, "cancelled": case.cancelled}
    return CaseResult(jobs, totals, series, per_job, rack_w.max(axis=0) if len(times)
                      else np.zeros(n_racks), case.applied, busy, (times, rack_w))


@dataclass(frozen=True)
class WhatIfResult:
    """The baseline, the perturbed case and their differences (bounded: see
    :meth:`to_dict`)."""

    baseline: CaseResult
    perturbed: CaseResult
    job_ids: list[Any]
    job_names: list[str]
    racks: list[int]
    facility: dict[str, Any] | None
    failures: int
    wall_s: float
    rows: int
    speed: dict[str, Any] | None = None

    def job_table(self) -> dict[str, Any]:
        """Per job: first start (s from the fork; negative when it ran before the fork,
        None if it never started) and completion (None past the horizon) in both cases,
        delay, slowdown (perturbed / baseline time from the fork to completion), lost
        card-hours — the ``rows`` most changed jobs."""
        b, p = self.baseline.per_job, self.perturbed.per_job
        horizon_end = np.where(np.isfinite(b["completion_s"]), b["completion_s"], np.inf)
        delay = np.where(np.isfinite(p["completion_s"]) & np.isfinite(b["completion_s"]),
                         p["completion_s"] - b["completion_s"], np.nan)
        # most changed first: a job that completes in one case only, then by delay and rework
        flipped = np.isfinite(b["completion_s"]) != np.isfinite(p["completion_s"])
        change = np.where(flipped, np.inf, np.nan_to_num(np.abs(delay), nan=0.0)) \
            + p["lost_card_h"] + p["cancelled"].astype(float)
        order = np.argsort(-change, kind="stable")[: self.rows]

        def opt(x: float) -> float | None:
            return float(x) if np.isfinite(x) else None

        rows = []
        for j in order.tolist():
            bc, pc = b["completion_s"][j], p["completion_s"][j]
            rows.append({"job": self.job_ids[j] if not isinstance(self.job_ids[j], tuple)
                         else self.job_ids[j][1], "name": self.job_names[j],
                         "cards": float(b["cards"][j]),
                         "baseline_start_s": opt(b["first_start_s"][j]),
                         "start_s": opt(p["first_start_s"][j]),
                         "baseline_completion_s": opt(bc), "completion_s": opt(pc),
                         "delay_s": opt(delay[j]),
                         "slowdown": opt(pc / bc) if np.isfinite(pc) and np.isfinite(bc)
                         and horizon_end[j] > 0 else None,
                         "lost_card_h": float(p["lost_card_h"][j]),
                         "restarts": int(p["restarts"][j]), "cancelled": bool(p["cancelled"][j])})
        return {"rows": rows, "shown": len(rows), "of": len(self.job_ids)}

    def to_dict(self) -> dict[str, Any]:
        b, p = self.baseline.totals, self.perturbed.totals
        diff = {k: p[k] - b[k] for k in b if isinstance(b[k], int | float)}
        rack_diff = (self.perturbed.rack_peak_w - self.baseline.rack_peak_w) / 1e3
        return {"baseline": self.baseline.to_dict(), "perturbed": self.perturbed.to_dict(),
                "difference": diff, "jobs": self.job_table(),
                "racks": {"ids": self.racks,
                          "peak_kw_baseline": (self.baseline.rack_peak_w / 1e3).tolist(),
                          "peak_kw": (self.perturbed.rack_peak_w / 1e3).tolist(),
                          "peak_kw_difference": rack_diff.tolist()},
                "facility": self.facility, "random_failures": self.failures,
                "speed": self.speed, "wall_s": self.wall_s}


def run_whatif(snapshot: LiveSnapshot, layout: Layout, spec: WhatIfSpec, *,
               plant: Any | None = None,
               progress: Callable[[float, str], None] | None = None,
               step_times: StepTimes | None = None) -> WhatIfResult:
    """The baseline and the perturbed case from ``snapshot`` (see the module doc).

    ``plant``: a :class:`simulation.facility.plant.Plant` for the facility events and
    PUE; without one a facility event is a :class:`WhatIfInputError` on its ``kind``.
    ``step_times``: the training model's step times (default: one built from the
    layout's accelerator, shared by both cases; None without one).
    """
    t0 = time.perf_counter()
    facility_events = [(i, e) for i, e in enumerate(spec.events)
                       if e.kind in ("cdu_trip", "feed_trip", "raise_wet_bulb")]
    if facility_events and plant is None:
        i, e = facility_events[0]
        raise WhatIfInputError(f"events[{i}].kind", f"{e.kind} needs the cluster's facility "
                                                    f"(a plant); this cluster has none")
    failures = draw_failures(layout, spec)
    if progress:
        progress(0.05, f"baseline ({len(failures)} random failures)")
    speed = step_times if step_times is not None else step_times_for(layout)
    base = run_case(snapshot, layout, spec, events=(), failures=failures, speed=speed)
    if progress:
        progress(0.5, "perturbed")
    pert = run_case(snapshot, layout, spec, failures=failures, speed=speed)
    facility = None
    if plant is not None:
        if progress:
            progress(0.7, "facility")
        from .facility import compose

        def rerun(perturbed: bool, limits: list[tuple[float, int, float | None]],
                  outages: Sequence[tuple[int, float, float | None]] = ()) -> CaseResult:
            if progress:
                progress(0.8 if perturbed else 0.75, "the plant's limits on the "
                                                     + ("perturbed case" if perturbed
                                                        else "baseline"))
            return run_case(snapshot, layout, spec, events=None if perturbed else (),
                            failures=failures, speed=speed, plant_limits=limits,
                            outages=outages)

        base, pert, facility = compose(plant, spec, snapshot, layout, base, pert, rerun)
    work, info, _ = _inputs(snapshot, layout, spec, spec.events)
    racks, _ = layout.rack_index()
    used = None if speed is None else {
        "method": "training model step time (simulation.whatif.speed)",
        "accelerator": speed.figures.get("slug"), "searches": speed.searches,
        "step_pricings": speed.pricings}
    return WhatIfResult(base, pert, info["ids"], list(work.name), racks, facility,
                        len(failures), time.perf_counter() - t0, spec.job_rows, used)


def summary_rows(result: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, value) lines for the command."""
    out = []
    for key in ("energy_mwh", "utilisation", "availability", "lost_card_hours",
                "queue_wait_mean_s", "peak_rack_kw", "peak_feed_kw"):
        b = result["baseline"]["totals"].get(key)
        p = result["perturbed"]["totals"].get(key)
        if b is None or p is None:
            continue
        out.append((key, f"{b:,.4g} → {p:,.4g} ({p - b:+,.4g})"))
    return out
