"""The discrete-event scheduling simulation (SimPy) and its results.

Two modes:

``arrival-only``
    the FGD paper's experiment (Weng et al., ATC'23, §6.1): tasks arrive one
    after another and never leave; a task that fits nowhere fails. Arrivals
    replay the workload in order and, once it is used up, draw from it with
    replacement (seeded) until the arrived GPU demand reaches ``target_load`` ×
    the cluster's GPUs (default 1.3, past saturation). The result is the GPU
    allocation rate against arrived demand.
``full``
    tasks arrive at their times, run for their durations and leave; a task
    that does not fit waits in a queue ordered by priority then arrival.
    ``fifo`` queues block at the head; ``easy-backfill`` lets a later task
    start if it does not delay the head's reservation (EASY: Lifka, "The ANL/
    IBM SP scheduling system", JSSPP 1995; Mu'alem & Feitelson, IEEE TPDS 2001).
    The reservation is per node: the running tasks' releases are replayed in
    order of expected end until a node the head can use holds it (its cards,
    CPU, memory, a virtual function) — the shadow time — and that node is
    reserved; a later task may start now if it ends by the shadow time or
    takes no more of the reserved node's cards than the head leaves spare
    (:func:`.backfill.reservation`).
    Each arrival and each end runs one pass over the head and up to
    :data:`BACKFILL_WINDOW` jobs behind it. A burst (arrivals at one instant: a
    what-if's forked queue) is still dispatched one arrival at a time — one pass after
    all of them would start other jobs — but a pass reuses what cannot have changed
    (:meth:`_Run.place`, :meth:`_Run.head_reservation`, :meth:`_Run.settled_window`):
    the same schedule as recomputing everything (``_Run.reuse = False``), 20–30×
    faster on a week's what-if of 2,000 queued jobs (docs/benchmarks.md, what-if).

Gang or not (``Workload.gang``): a gang job starts with all its cards at once
(a job wider than a node across nodes, all or nothing). A **non-gang** job of
several cards is elastic: its cards are independent one-card pieces (CPU and
memory split evenly) that start one by one, wherever the policy puts each, as
cards free up; each piece runs the job's duration. The job's queueing delay
is to its first piece, its completion time to its last piece's end; it is
counted once in ``jobs``. In arrival-only mode it takes the cards that fit now
(it fails only if none does) and gets no AllReduce price (its pieces do not
all-reduce together). :func:`place` (one placement for the live twin) always
places a job whole.

SimPy (``simpy.Environment``) drives the clock: one process replays arrivals,
each start schedules its completion as a timeout event.

``initial`` pins allocations that exist before the first arrival (a live
cluster's running jobs): they hold their cards, CPU, memory and a virtual
function from time 0 — forever in ``arrival-only`` mode, for their
``remaining_s`` in ``full`` mode — and the policy places only the workload.
They count in the allocation rate, not in the arrived demand nor in the job
counts (``jobs["pinned"]``). EASY's reservation counts a pinned job's expected
end (``remaining_s``) as the time its cards free up, like a running task's.

Example:
    >>> from simulation.scheduling.cluster import Nodes
    >>> from simulation.scheduling.workload import Workload
    >>> nodes = Nodes.uniform(2, 4)   # 8 cards
    >>> jobs = Workload.from_records([{"num_gpu": 3}, {"num_gpu": 3}, {"num_gpu": 2},
    ...                               {"num_gpu": 2}])
    >>> r = simulate(nodes, jobs, "fifo-first-fit", target_load=None)
    >>> r.jobs["placed"], r.jobs["failed"], r.gpu_allocation_rate  # 3 + 3 leave 1 + 1
    (2, 2, 0.75)
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import simpy

from .allreduce import AllReducePrice
from .backfill import reservation
from .cluster import Nodes
from .errors import SchedulingInputError
from .fragmentation import TaskTypes
from .initial import pin_initial
from .openb import allocation_at_load, tuned_order, typical_pods
from .policies import POLICIES, JobRequest, place_job
from .state import ClusterState, Placement
from .workload import Workload

__all__ = ["BACKFILL_WINDOW", "MODES", "SimResult", "place", "simulate", "workload_types"]

MODES = ("arrival-only", "full")
BACKFILL_WINDOW = 200
"""How many queued jobs behind the head one EASY pass looks at."""
_CURVE_POINTS = 200
_TIMELINE_POINTS = 400


def _percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p90": None, "p99": None, "mean": None, "count": 0}
    a = np.asarray(values, np.float64)
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return {"p50": float(p50), "p90": float(p90), "p99": float(p99), "mean": float(a.mean()),
            "count": len(values)}


def _downsample(n: int, points: int) -> npt.NDArray[np.int64]:
    if n <= points:
        return np.arange(n, dtype=np.int64)
    return np.unique(np.linspace(0, n - 1, points).round().astype(np.int64))


@dataclass
class SimResult:
    """What a run produced; :meth:`to_dict` is the JSON the API and the command print."""

    policy: str
    mode: str
    gpu_allocation_rate: float
    curve: list[list[float]]
    unallocated_gpus: float
    jobs: dict[str, int]
    wall_s: float
    timeline: dict[str, list[float]]
    fragmentation: dict[str, float]
    utilisation: float
    queue_delay_s: dict[str, float | None]
    jct_s: dict[str, float | None]
    allreduce: dict[str, Any]
    placements: dict[int, Placement] = field(default_factory=dict, repr=False)
    #: with ``keep_placements``: seq -> (job index, arrival s, start s, end s or NaN)
    job_log: dict[int, tuple[int, float, float, float]] = field(default_factory=dict,
                                                                repr=False)
    #: per arrival: arrived GPU demand and allocated thousandths (cumulative)
    arrived_milli: npt.NDArray[np.int64] = field(
        default_factory=lambda: np.zeros(0, np.int64), repr=False)
    allocated_milli: npt.NDArray[np.int64] = field(
        default_factory=lambda: np.zeros(0, np.int64), repr=False)
    total_gpus: int = 0

    def allocation_at(self, load_pct: int) -> float:
        """GPU allocation ratio (%) at ``load_pct`` % arrived GPU load, measured as the FGD
        artifact does (:func:`.openb.allocation_at_load`: the mean over the arrivals whose
        arrived load rounds to it); NaN if no arrival is within ±1 %."""
        if not self.total_gpus or not len(self.arrived_milli):
            return float("nan")
        return allocation_at_load(self.arrived_milli, self.allocated_milli, self.total_gpus,
                                  load_pct)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON (placements omitted: they can be large)."""
        return {
            "policy": self.policy, "mode": self.mode,
            "gpu_allocation_rate": self.gpu_allocation_rate, "curve": self.curve,
            "unallocated_gpus": self.unallocated_gpus, "jobs": self.jobs,
            "wall_s": self.wall_s, "timeline": self.timeline,
            "fragmentation": self.fragmentation, "utilisation": self.utilisation,
            "queue_delay_s": self.queue_delay_s, "jct_s": self.jct_s,
            "allreduce": self.allreduce,
        }


class _Run:
    """One simulation's mutable state: the cluster, the queue, the records."""

    #: reuse placements, reservations and passes that cannot have changed (see
    #: :meth:`place`, :meth:`dispatch`); ``False`` recomputes everything every time —
    #: the reference the equivalence tests compare the schedule against.
    reuse = True

    def __init__(self, nodes: Nodes, work: Workload, policy: str, mode: str, seed: int,
                 types: TaskTypes, allreduce: AllReducePrice | None,
                 progress: Callable[[float], None] | None, n_arrivals: int,
                 keep_placements: bool) -> None:
        self.nodes, self.work, self.policy, self.mode = nodes, work, policy, mode
        self.rng = np.random.default_rng(seed)
        self.pick_rng = np.random.default_rng(seed + 1)
        self.st = ClusterState(nodes, types)
        self.types = types
        key = types.num_gpu * 2048 + types.milli
        lookup = {int(k): t for t, k in enumerate(key)}
        self.type_of = np.array(
            [lookup.get(int(k) * 2048 + int(m), -1) for k, m in zip(
                work.num_gpu.tolist(), work.gpu_milli.tolist(), strict=True)], np.int64)
        self.allreduce = allreduce
        self.requests: dict[int, JobRequest] = {}
        st = self.st
        self.empty_maxima = (int(st.capacity_gpus.max(initial=0)),
                             1000 if st.total_milli else 0,
                             int(nodes.cpu_milli.max(initial=0)), st.total_milli)
        self.max_mem = int(nodes.memory_mib.max(initial=0))
        self.progress = progress
        self.n_arrivals = n_arrivals
        self.keep = keep_placements
        self.env = simpy.Environment()
        self.queue: list[tuple[int, int, int]] = []  # (-priority, seq, job)
        # seq -> (end, milli, placement, request)
        self.running: dict[int, tuple[float, int, Placement, JobRequest]] = {}
        # non-gang jobs: queued unit seq -> the job's first seq; job -> [cards left, started]
        self.unit: dict[int, int] = {}
        self.tracks: dict[int, list[Any]] = {}
        self.pieces: dict[int, JobRequest] = {}
        self.one_card_type = lookup.get(1 * 2048 + 1000, -1)
        self.placements: dict[int, Placement] = {}
        self.job_log: dict[int, tuple[int, float, float, float]] = {}
        self.pinned = 0
        # pinned entries with an expected end (full mode): index -> as ``running``
        self.pinned_running: dict[int, tuple[float, int, Placement, JobRequest]] = {}
        self.arrived_milli = 0
        self.arrived = 0
        self.placed = 0
        self.failed = 0
        self.completed = 0
        self.delays: list[float] = []
        self.jcts: list[float] = []
        self.ar_times: list[float] = []
        self.ar_multi = 0
        self.curve_x: list[float] = []
        self.curve_y: list[float] = []
        # per arrival, integers: arrived GPU demand and allocated thousandths (the
        # artifact's measurement, :meth:`SimResult.allocation_at`)
        self.arrived_hist: list[int] = []
        self.used_hist: list[int] = []
        self.tl: dict[str, list[float]] = {k: [] for k in (
            "t", "allocation_rate", "fragmentation", "running", "queued")}
        self.alloc_at_end = 0.0
        self.arrivals_done = False
        self.seq = 0
        # (request, policy) -> (state releases, state version, placement or None)
        self.placed_at: dict[tuple[JobRequest, str], tuple[int, int, Placement | None]] = {}
        # the head's reservation: (state version, running, head request) -> result
        self.reserved_at: tuple[tuple[int, int, JobRequest], tuple[float, set[int], int]] | \
            None = None
        # after a pass that started nothing: (state version, policy, time, queue window)
        self.settled: tuple[int, str, float, list[tuple[int, int, int]]] | None = None

    # ------------------------------------------------------------ helpers
    def request(self, j: int) -> JobRequest:
        req = self.requests.get(j)
        if req is None:
            w = self.work
            req = self.requests[j] = JobRequest(
                int(w.num_gpu[j]), int(w.gpu_milli[j]), int(w.cpu_milli[j]),
                int(w.memory_mib[j]), w.gpu_model[j], int(self.type_of[j]))
        return req

    def record(self) -> None:
        st = self.st
        self.tl["t"].append(float(self.env.now))
        self.tl["allocation_rate"].append(st.allocation_rate)
        self.tl["fragmentation"].append(st.frag_total / st.total_milli if st.total_milli else 0.0)
        self.tl["running"].append(float(len(self.running)))
        self.tl["queued"].append(float(len(self.queue)))

    def piece(self, j: int) -> JobRequest:
        """One card of a non-gang job (its CPU and memory split evenly)."""
        req = self.pieces.get(j)
        if req is None:
            whole = self.request(j)
            k = whole.num_gpu
            req = self.pieces[j] = JobRequest(1, 1000, whole.cpu_milli // k,
                                              whole.memory_mib // k, whole.gpu_model,
                                              self.one_card_type)
        return req

    def req_of(self, seq: int, j: int) -> JobRequest:
        """What the queued unit ``seq`` asks for: job ``j`` or one card of it."""
        return self.piece(j) if seq in self.unit else self.request(j)

    def elastic(self, j: int) -> bool:
        """A non-gang job of several cards: its cards start one by one as they free up."""
        return not bool(self.work.gang[j]) and int(self.work.num_gpu[j]) > 1

    def start(self, seq: int, j: int, pl: Placement, arrival: float) -> None:
        req = self.req_of(seq, j)
        self.st.allocate(pl, req.cpu_milli, req.memory_mib, req.type_id)
        job = self.unit.get(seq)
        if job is None or not self.tracks[job][1]:
            self.placed += 1
            self.delays.append(float(self.env.now) - arrival)
            if job is not None:
                self.tracks[job][1] = True
        if self.keep:
            self.placements[seq] = pl
            self.job_log[seq] = (j, arrival, float(self.env.now), float("nan"))
        cards = sum(1 for _, c, m in pl if c >= 0 and m >= 1000)
        if self.allreduce is not None and cards >= 2:
            self.ar_times.append(float(self.allreduce(self.nodes, pl)))
            self.ar_multi += len({n for n, _, _ in pl}) > 1
        if self.mode == "full":
            end = float(self.env.now) + float(self.work.duration_s[j])
            self.running[seq] = (end, req.demand_milli if req.num_gpu else 0, pl, req)
            ev = self.env.timeout(float(self.work.duration_s[j]))

            def done(_event: simpy.Event, s: int = seq, jj: int = j, a: float = arrival) -> None:
                self.finish(s, jj, a)

            ev.callbacks.append(done)

    def finish(self, seq: int, j: int, arrival: float) -> None:
        _, _, pl, req = self.running.pop(seq)
        self.st.release(pl, req.cpu_milli, req.memory_mib, req.type_id)
        job = self.unit.pop(seq, None)
        last = True
        if job is not None:
            self.tracks[job][0] -= 1
            last = self.tracks[job][0] == 0
            if last:
                del self.tracks[job]
        if last:
            self.completed += 1
            self.jcts.append(float(self.env.now) - arrival)
        if self.keep and seq in self.job_log:
            self.job_log[seq] = (*self.job_log[seq][:3], float(self.env.now))
        self.dispatch()
        self.record()

    # ------------------------------------------------------------ queueing
    def fits_quickly(self, req: JobRequest, maxima: tuple[int, int, int, int]) -> bool:
        """Cheap scalar pre-check before a vectorised placement (avoids scoring hopeless jobs)."""
        max_full, max_r, max_cpu, free_milli = maxima
        if req.num_gpu == 0:
            return req.cpu_milli <= max_cpu
        if req.shared:
            return req.gpu_milli <= max_r
        if req.num_gpu > self.nodes.max_gpus:
            return req.num_gpu * 1000 <= free_milli
        return req.num_gpu <= max_full

    def too_big(self, req: JobRequest) -> bool:
        """Memory no node holds even when empty (a multi-node task: one card's share)."""
        if req.num_gpu > self.nodes.max_gpus:
            return req.memory_mib / req.num_gpu > self.max_mem
        return req.memory_mib > self.max_mem

    def maxima(self) -> tuple[int, int, int, int]:
        return self.st.maxima(cached=self.reuse)

    def place(self, req: JobRequest) -> Placement | None:
        """:func:`place_job` under the run's policy, remembered while it cannot change.

        A placement depends on the state, the request and the policy only (``random``
        also draws from the run's generator, but only when the request fits: so only its
        misses are remembered): the same request on an unchanged state
        (``st.version``) gets the same placement, and one that fits nowhere fits
        nowhere until something is released (``st.releases``: allocating only takes
        resources). A queue of thousands of jobs of a few shapes therefore asks
        :func:`place_job` once per shape and state, not once per job and pass — the
        same answers, so the same schedule.
        """
        st = self.st
        if not self.reuse:
            return place_job(st, req, self.policy, self.pick_rng)
        key = (req, self.policy)
        hit = self.placed_at.get(key)
        if hit is not None:
            releases, version, pl = hit
            if pl is None and releases == st.releases:
                return None
            if version == st.version and self.policy != "random":
                return pl
        pl = place_job(st, req, self.policy, self.pick_rng)
        self.placed_at[key] = (st.releases, st.version, pl)
        return pl

    def head_reservation(self, head: JobRequest) -> tuple[float, set[int], int]:
        """:func:`.backfill.reservation` for ``head``, kept while the state and the running
        set are unchanged (every start and end changes ``st.version``)."""
        key = (self.st.version, len(self.running) + len(self.pinned_running), head)
        if self.reuse and self.reserved_at is not None and self.reserved_at[0] == key:
            return self.reserved_at[1]
        result = reservation(self.st, [*self.running.values(), *self.pinned_running.values()],
                             head)
        self.reserved_at = (key, result)
        return result

    def try_start(self, entry: tuple[int, int, int],
                  maxima: tuple[int, int, int, int] | None) -> bool:
        _, seq, j = entry
        req = self.req_of(seq, j)
        if maxima is not None and not self.fits_quickly(req, maxima):
            return False
        pl = self.place(req)
        if pl is None:
            return False
        self.start(seq, j, pl, float(self.work.arrival_s[j]))
        return True

    def dispatch(self) -> None:
        """Start the queue's head while it fits; under EASY, then backfill behind it.

        Reuse (``reuse``): within one pass only allocations happen, so a request that
        fails the quick check or fits nowhere stays so for the rest of the pass
        (``dead``); a later job that could not start is counted against the reserved
        node only when it is not short. A pass that starts nothing in the scan leaves
        the queue *settled* (:meth:`settled_window`).
        """
        self.settled = None
        while self.queue:
            if self.try_start(self.queue[0], self.maxima()):
                self.queue.pop(0)
                continue
            break
        if self.policy != "easy-backfill" or len(self.queue) < 2:
            return
        # EASY: reservation for the head, then backfill what does not delay it
        _, head_seq, head_j = self.queue[0]
        shadow, reserved, spare = self.head_reservation(self.req_of(head_seq, head_j))
        now = float(self.env.now)
        reuse = self.reuse
        dead: set[JobRequest] = set()
        started = False
        queue = self.queue
        i = 1
        while i < len(queue) and i <= BACKFILL_WINDOW:
            _, seq, j = queue[i]
            req = self.req_of(seq, j)
            if dead and req in dead:
                i += 1
                continue
            pl = self.place(req) if self.fits_quickly(req, self.maxima()) else None
            if pl is not None:
                short = now + float(self.work.duration_s[j]) <= shadow
                cost = 0 if short and reuse else sum(1 for n, _, _ in pl if n in reserved)
                if short or cost <= spare:
                    queue.pop(i)
                    self.start(seq, j, pl, float(self.work.arrival_s[j]))
                    started = True
                    if not short:
                        spare -= cost
                    continue
            elif reuse:
                dead.add(req)
            i += 1
        if reuse and not started:
            self.settled = (self.st.version, self.policy, now, queue[:BACKFILL_WINDOW + 1])

    def settled_window(self) -> bool:
        """Whether a dispatch now would start nothing, known without a pass.

        True when the last pass started nothing behind the head and since then neither
        the state (``st.version``), the policy, the time nor the queue's first
        ``BACKFILL_WINDOW`` + 1 entries changed: the head still does not fit, its
        reservation is the same, and every job the pass looks at was looked at on the
        same state, against the same reservation, and did not start. A burst of
        arrivals queued behind the window therefore costs no pass each.
        """
        token = self.settled
        return (token is not None and token[0] == self.st.version and token[1] == self.policy
                and token[2] == float(self.env.now)
                and token[3] == self.queue[:BACKFILL_WINDOW + 1])

    # ------------------------------------------------------------ arrivals
    def arrivals(self, order: npt.NDArray[np.int64]) -> Any:
        env = self.env
        total = len(order)
        step = max(1, total // 100)
        t_offset = 0.0
        last_t = 0.0
        for pos, j in enumerate(order.tolist()):
            if self.mode == "full":
                t = float(self.work.arrival_s[j]) + t_offset
                if t < last_t:  # a resampled task after the trace's end
                    t_offset += last_t - t
                    t = last_t
                if t > env.now:
                    yield env.timeout(t - env.now)
                last_t = t
            self.arrive(j)
            if self.progress is not None and pos % step == 0:
                self.progress(pos / total)
        self.arrivals_done = True
        self.alloc_at_end = self.st.allocation_rate

    def arrive(self, j: int) -> None:
        req = self.request(j)
        self.arrived += 1
        self.arrived_milli += req.demand_milli if req.num_gpu else 0
        units: list[int] = []
        if self.elastic(j):
            job = self.seq
            self.tracks[job] = [req.num_gpu, False]
            for _ in range(req.num_gpu):
                self.unit[self.seq] = job
                units.append(self.seq)
                self.seq += 1
        else:
            units.append(self.seq)
            self.seq += 1
        if self.mode == "arrival-only":
            started = 0
            for seq in units:
                pl = self.place(self.req_of(seq, j))
                if pl is not None:
                    self.start(seq, j, pl, float(self.env.now))
                    started += 1
            if started == 0:
                self.failed += 1
            for seq in units:  # arrival-only tasks never end: forget the pieces
                self.unit.pop(seq, None)
            self.tracks.pop(units[0], None)
        elif not self.fits_quickly(self.req_of(units[0], j), self.empty_maxima) \
                or self.too_big(self.req_of(units[0], j)):
            self.failed += 1  # larger than any node even when empty: it would wait forever
            for seq in units:
                self.unit.pop(seq, None)
            self.tracks.pop(units[0], None)
        else:
            queued = False
            behind = True  # every unit queued behind the backfill window
            for seq in units:
                entry = (-int(self.work.priority[j]), seq, j)
                if not self.queue and self.try_start(entry, None):
                    continue
                at = bisect.bisect(self.queue, entry)
                behind = behind and at > BACKFILL_WINDOW
                self.queue.insert(at, entry)
                queued = True
            if queued and (len(self.queue) == 1 or self.policy == "easy-backfill"):
                if not (behind and self.reuse and self.settled_window()):
                    self.dispatch()
        tm = self.st.total_milli
        self.curve_x.append(self.arrived_milli / tm if tm else 0.0)
        self.curve_y.append(self.st.allocation_rate)
        self.arrived_hist.append(self.arrived_milli)
        self.used_hist.append(self.st.allocated_milli)
        self.record()


def _arrival_order(work: Workload, nodes: Nodes, target: float | None,
                   rng: np.random.Generator) -> npt.NDArray[np.int64]:
    """Jobs in arrival order, cut or extended (resampled with replacement) to ``target``."""
    n = len(work)
    base = np.argsort(work.arrival_s, kind="stable").astype(np.int64)
    if target is None or n == 0:
        return base
    demand = np.where(work.num_gpu > 0, work.gpu_demand, 0.0)
    goal = target * nodes.total_gpus
    cum = np.cumsum(demand[base])
    if cum[-1] >= goal:
        return base[: int(np.searchsorted(cum, goal)) + 1]
    mean = float(demand.mean())
    if mean <= 0:
        return base
    extra_n = int((goal - float(cum[-1])) / mean * 1.2) + 16
    while True:
        extra = rng.integers(0, n, extra_n).astype(np.int64)
        cum2 = float(cum[-1]) + np.cumsum(demand[extra])
        if cum2[-1] >= goal:
            return np.concatenate([base, extra[: int(np.searchsorted(cum2, goal)) + 1]])
        extra_n *= 2


def simulate(
    nodes: Nodes,
    workload: Workload,
    policy: str,
    *,
    mode: str = "arrival-only",
    seed: int = 0,
    allreduce: AllReducePrice | None = None,
    progress: Callable[[float], None] | None = None,
    target_load: float | None = 1.3,
    max_types: int | None = None,
    keep_placements: bool = False,
    shuffle: bool = False,
    used: Mapping[tuple[int, int], float] | None = None,
    tenants: Mapping[int, int] | None = None,
    initial: Sequence[Mapping[str, Any]] | None = None,
) -> SimResult:
    """Replay ``workload`` on ``nodes`` under ``policy``; see the module doc for the modes.

    ``target_load`` (arrival-only): keep arriving until the arrived GPU demand is that
    share of the cluster's GPUs (``None``: play the workload once). In ``full`` mode it
    is ignored. ``allreduce``: a pricing function (e.g. :func:`default_allreduce`) for
    each multi-card task's placement. ``progress`` gets the share of arrivals done.
    ``used`` / ``tenants`` (as :func:`place` takes them: (node, card) → share 0..1 already
    allocated, node → tasks already there) start the run from a live cluster; those
    allocations stay for the whole run and count in the allocation rate.
    ``keep_placements``: also return each started task's placement and its
    ``job_log`` entry (job index, arrival, start, end).
    ``shuffle`` (arrival-only): the FGD artifact's arrival process instead of the trace's
    order — the list shuffled, then resampled up to ``target_load`` (or thinned down to
    it) as :func:`.openb.tuned_order` does with ``seed``; with it and
    :meth:`SimResult.allocation_at` the run is the artifact's openb experiment (docs/
    simulation.md). ``max_types``: cap on FGD's typical pods (:func:`workload_types`;
    ``None``: all that cover 95 % of the pods).
    ``initial``: allocations in place before the first arrival, each
    ``{"placement": [[node, card, share 0..1], ...], "cpu_milli": 0, "memory_mib": 0,
    "remaining_s": None}`` (``None``: held for the whole run; ``arrival-only`` holds
    them all for the whole run); see the module doc.
    """
    if policy not in POLICIES:
        raise SchedulingInputError(
            "policy", f"unknown policy {policy!r}; one of {sorted(POLICIES)}")
    if mode not in MODES:
        raise SchedulingInputError("mode", f"must be one of {list(MODES)}")
    if target_load is not None and not 0 < target_load <= 100:
        raise SchedulingInputError("target_load", "must be in (0, 100]")
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    order = _arrival_order(workload, nodes, target_load if mode == "arrival-only" else None,
                           rng)
    if shuffle and mode == "arrival-only":
        order = tuned_order(workload, int(nodes.total_gpus), target_load, seed) \
            if target_load is not None else rng.permutation(len(workload)).astype(np.int64)
    types, specs = workload_types(workload, max_types)
    run = _Run(nodes, workload, policy, mode, seed, types, allreduce, progress, len(order),
               keep_placements)
    # task types' GPU-model constraints (each typical pod's own)
    if any(specs):
        run.st.set_type_models(specs)
    _take_used(run.st, used, tenants)
    if initial:
        pin_initial(run, initial)
    run.record()
    run.env.process(run.arrivals(order))
    run.env.run()
    if progress is not None:
        progress(1.0)
    st = run.st
    total_gpus = st.total_milli / 1000.0
    idx = _downsample(len(run.curve_x), _CURVE_POINTS)
    curve = [[run.curve_x[i], run.curve_y[i]] for i in idx.tolist()]
    t_arr = np.asarray(run.tl["t"])
    a_arr = np.asarray(run.tl["allocation_rate"])
    if run.mode == "full" and t_arr.size > 1 and t_arr[-1] > t_arr[0]:
        utilisation = float(np.sum(a_arr[:-1] * np.diff(t_arr)) / (t_arr[-1] - t_arr[0]))
    else:
        utilisation = float(a_arr[-1]) if a_arr.size else 0.0
    tidx = _downsample(len(run.tl["t"]), _TIMELINE_POINTS)
    timeline = {k: [v[i] for i in tidx.tolist()] for k, v in run.tl.items()}
    frag_series = np.asarray(run.tl["fragmentation"])
    ar = _percentiles(run.ar_times)
    ar["multi_node_jobs"] = run.ar_multi
    return SimResult(
        policy=policy,
        mode=mode,
        gpu_allocation_rate=run.alloc_at_end,
        curve=curve,
        unallocated_gpus=total_gpus * (1.0 - run.alloc_at_end),
        jobs={"arrived": run.arrived, "placed": run.placed, "failed": run.failed,
              "completed": run.completed, "waiting": len(run.queue),
              **({"pinned": run.pinned} if initial else {})},
        wall_s=time.perf_counter() - t0,
        timeline=timeline,
        fragmentation={
            "final_gpus": st.frag_total / 1000.0,
            "final_share": st.frag_total / st.total_milli if st.total_milli else 0.0,
            "mean_share": float(frag_series.mean()) if frag_series.size else 0.0,
            "task_types": len(types),
        },
        utilisation=utilisation,
        queue_delay_s=_percentiles(run.delays),
        jct_s=_percentiles(run.jcts),
        allreduce=ar,
        placements=run.placements,
        job_log=run.job_log,
        arrived_milli=np.asarray(run.arrived_hist, np.int64),
        allocated_milli=np.asarray(run.used_hist, np.int64),
        total_gpus=st.total_milli // 1000,
    )


def workload_types(work: Workload, max_types: int | None = None
                   ) -> tuple[TaskTypes, list[str]]:
    """FGD's target workload and each type's GPU-model spec, as the artifact builds it.

    :func:`.openb.typical_pods` (``frag.go`` ``GetTypicalPods``): pods grouped by (CPU,
    GPU share, cards, GPU model), CPU-only pods included, the most popular kept until
    they cover 95 % of the pods; memory is not part of a type (the artifact's
    fragmentation does not look at it). ``max_types`` keeps only the most popular
    (popularities renormalised); ``None``: all of them.
    """
    if len(work) == 0:
        return TaskTypes.from_arrays([1], [1000], [0], [0], [1.0]), [""]
    tp = typical_pods(work)
    keep = len(tp) if max_types is None else max(1, min(len(tp), max_types))
    milli = np.where(tp.num_gpu[:keep] > 0, tp.gpu_milli[:keep], 0)
    types = TaskTypes.from_arrays(tp.num_gpu[:keep], milli, tp.cpu_milli[:keep],
                                  np.zeros(keep, np.int64), tp.p[:keep])
    return types, list(tp.gpu_model[:keep])


def _take_used(st: ClusterState, used: Mapping[tuple[int, int], float] | None,
               tenants: Mapping[int, int] | None) -> None:
    """Start ``st`` with cards already partly or fully taken (``used``: (node, card) → share
    0..1) and tasks already on nodes (``tenants``: node → count)."""
    nodes = st.nodes
    if used:
        for (n, c), share in used.items():
            if not (0 <= n < len(nodes) and 0 <= c < nodes.max_gpus):
                raise SchedulingInputError("used", f"no card ({n}, {c}) in this cluster")
            st.free[n, c] = max(0, int(st.free[n, c]) - int(round(float(share) * 1000)))
        st.allocated_milli = st.total_milli - int(st.free.sum())
    if tenants:
        for n, count in tenants.items():
            if not 0 <= n < len(nodes):
                raise SchedulingInputError("tenants", f"no node {n} in this cluster")
            st.tenants[n] = int(count)
    if used or tenants:
        st.refresh_all()


def _mode_of(values: list[str]) -> str:
    if not values:
        return ""
    uniq, counts = np.unique(np.asarray(values, dtype=object).astype(str), return_counts=True)
    return str(uniq[int(np.argmax(counts))])


def place(
    nodes: Nodes,
    job: Mapping[str, Any],
    policy: str,
    *,
    used: Mapping[tuple[int, int], float] | None = None,
    tenants: Mapping[int, int] | None = None,
    seed: int = 0,
) -> list[tuple[int, int, float]] | None:
    """One placement on a live cluster: ``[(node, card, share)]`` or ``None`` if it fits nowhere.

    ``job`` has the :class:`Workload` record keys (``num_gpu``, ``gpu_milli``, ``cpu_milli``,
    ``memory_mib``, ``gpu_model``). ``used`` maps (node, card) to the share already
    allocated there (0..1), ``tenants`` a node to the tasks it already holds (SR-IOV
    virtual functions in use). Failed cards (``nodes.failed``) take nothing. A CPU-only
    task gets card −1 and share 0.
    """
    if policy not in POLICIES:
        raise SchedulingInputError(
            "policy", f"unknown policy {policy!r}; one of {sorted(POLICIES)}")
    work = Workload.from_records([dict(job)])
    st = ClusterState(nodes, TaskTypes.from_arrays([1], [1000], [0], [0], [1.0]))
    _take_used(st, used, tenants)
    req = JobRequest(int(work.num_gpu[0]), int(work.gpu_milli[0]), int(work.cpu_milli[0]),
                     int(work.memory_mib[0]), work.gpu_model[0])
    pl = place_job(st, req, policy, np.random.default_rng(seed))
    if pl is None:
        return None
    return [(n, c, m / 1000.0) for n, c, m in pl]

