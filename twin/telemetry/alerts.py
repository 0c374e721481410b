"""Health rules and damped alerts, evaluated on the whole cluster at each tick.

Thresholds come from the seeds and the catalogue (override any of them in
``settings.TELEMETRY_THRESHOLDS``, keyed by rule):

===================== ======= ============================================ ============
rule                  level   fires when                                   severity
===================== ======= ============================================ ============
rack_power            rack    measured draw (Σ cards + overhead) > budget  critical
gpu_temp              card    GPU > 85 °C                                  warning
gpu_temp_critical     card    GPU > 92 °C                                  critical
mem_temp              card    HBM > 95 °C                                  warning
card_power            card    power > 1.1 × the catalogue TDP              warning
link_latency          card    intra-supernode latency > 200 ns (seed spec) warning
link_latency_critical card    > 500 ns (the other design's limit)          critical
rdma_latency          card    RDMA > 2 µs (seeds)                          warning
xid                   card    last XID code ≠ 0                            critical
ecc                   card    uncorrectable ECC errors > 0                 critical
stale                 card    silent > ``TELEMETRY_STALE_INTERVALS`` ×     warning
                              ``TELEMETRY_INTERVAL_S`` + the ingest lag
                              (``tickparts.ingest_lag_s``; its rack is not)
rack_silent           rack    every card that reported is stale            warning
cluster_silent        cluster every card that reported is stale            critical
util_drop             card    utilization 50 points under its 1-minute     warning
                              average (which was ≥ 60 %)
checkpoint_slow       card    checkpoint write > 15 s (seeds: ≤ 15 s)      warning
coolant_supply        rack    coolant supply into the rack > 45 °C (the    warning
                              top of ASHRAE's W45 class; the live plant)
coolant_flow          rack    coolant flow < 50 % of the rack's design     critical
                              flow (a pump or CDU down; the live plant)
cdu_load              facility CDU heat > 90 % of its planned capacity      warning
feed_headroom         facility a feed's input > 90 % of its planned        warning
                              rating (headroom under 10 %)
model_drift           facility a facility reading departs from the model's warning
                              prediction by more than its tolerance for
                              30 s (|reading − model| / tolerance > 1;
                              2 K, 10 %: ``twin.facility.readings``)
cdu_leak              facility a leak detector of a CDU (Redfish           critical
                              LeakDetection) reports a leak (Warning or
                              Critical), at once; clears 30 s after all
                              its detectors say OK again
feed_failed           facility a power feed has units out of service       critical
                              (``units_failed``, or the whole feed failed
                              or in maintenance), at once; names the feed
                              and what its surviving units carry (its load
                              moved to them: ``feed_headroom`` fires on
                              them if they are short; a feed with none left
                              leaves its racks without power)
===================== ======= ============================================ ============

The seven plant rules read the live plant (``twin.facility.live``) of a cluster that
has a facility; elsewhere their inputs are absent and they never fire. The CDU and
feed rules see measured readings where fresh ones exist (they win over the model).

Flapping is damped twice: a condition must hold ``min_s`` seconds before an
alert opens, and an open alert closes only after the value has stayed past
the hysteresis point (``clear``, below the threshold) for ``clear_s``
seconds. A card that stops reporting keeps its alerts as they are (no data
is not good news); it gets a ``stale`` alert instead. Silence is reported at
the highest level where it is total — the whole cluster (an agent or the
network is down), else a whole rack, else single cards — so a dead agent is
one alert, not one per card.

The damping state (pending since, clearing since, alert id) is one msgpack
blob per cluster in Redis; when it is missing (Redis restarted) it is rebuilt
from the open alerts in the database, so no alert is opened twice.

A tick decides (:func:`decide`, no database write) before its event and commits
(:func:`commit`, one transaction) after it: the rows to insert or close travel in
the damping state until written, so a failed commit is retried by the next tick
with the times it decided, and an insert that meets the same subject's open row
(the unique constraint) adopts that row. Writes still pending are lost only with
the state itself (Redis flushed, or the cluster's layout changed).
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import msgpack
import numpy as np
from django.conf import settings
from django.db import transaction

from twin.telemetry.choices import AlertRuleChoices as R
from twin.telemetry.choices import SeverityChoices as S
from twin.telemetry.metrics import METRIC_INDEX

__all__ = ["PENDING", "PLANT_RULES", "RULES", "Committed", "Decision", "EvalInput", "Rule",
           "Transition", "commit", "decide", "rules", "settle"]

MAX_OPEN_PER_TICK = 1000


@dataclass(frozen=True)
class Rule:
    key: str
    level: str  # "card" or "rack"
    severity: str
    threshold: float
    clear: float  # hysteresis: clears below this
    min_s: float = 3.0
    clear_s: float = 10.0
    unit: str = ""
    what: str = ""


RULES: tuple[Rule, ...] = (
    Rule(R.RACK_POWER, "rack", S.CRITICAL, 1.0, 0.98, 5.0, 15.0, "× budget",
         "rack draw over its power budget"),
    Rule(R.GPU_TEMP, "card", S.WARNING, 85.0, 82.0, 5.0, 15.0, "°C", "GPU temperature"),
    Rule(R.GPU_TEMP_CRITICAL, "card", S.CRITICAL, 92.0, 88.0, 2.0, 15.0, "°C",
         "GPU temperature"),
    Rule(R.MEM_TEMP, "card", S.WARNING, 95.0, 90.0, 5.0, 15.0, "°C", "HBM temperature"),
    Rule(R.CARD_POWER, "card", S.WARNING, 1.1, 1.0, 5.0, 15.0, "× TDP", "card power over TDP"),
    Rule(R.LINK_LATENCY, "card", S.WARNING, 200.0, 180.0, 5.0, 15.0, "ns",
         "intra-supernode link latency over the 200 ns spec"),
    Rule(R.LINK_LATENCY_CRITICAL, "card", S.CRITICAL, 500.0, 450.0, 3.0, 15.0, "ns",
         "intra-supernode link latency over the 500 ns limit"),
    Rule(R.RDMA_LATENCY, "card", S.WARNING, 2.0, 1.8, 5.0, 15.0, "µs",
         "RDMA latency over 2 µs"),
    Rule(R.XID, "card", S.CRITICAL, 0.0, 0.5, 0.0, 10.0, "", "XID error"),
    Rule(R.ECC, "card", S.CRITICAL, 0.0, 0.5, 0.0, 10.0, "", "uncorrectable ECC errors"),
    Rule(R.STALE, "card", S.WARNING, 0.0, 0.5, 2.0, 0.0, "s", "card silent"),
    Rule(R.RACK_SILENT, "rack", S.WARNING, 0.0, 0.5, 1.0, 0.0, "s", "rack silent"),
    Rule(R.CLUSTER_SILENT, "cluster", S.CRITICAL, 0.0, 0.5, 0.0, 0.0, "s",
         "cluster silent"),
    Rule(R.UTIL_DROP, "card", S.WARNING, 50.0, 20.0, 2.0, 10.0, "points",
         "sudden utilization drop"),
    Rule(R.CHECKPOINT_SLOW, "card", S.WARNING, 15.0, 14.0, 0.0, 30.0, "s",
         "checkpoint write over 15 s"),
    Rule(R.COOLANT_SUPPLY, "rack", S.WARNING, 45.0, 43.0, 5.0, 15.0, "°C",
         "coolant supply into the rack"),
    Rule(R.COOLANT_FLOW, "rack", S.CRITICAL, 0.5, 0.6, 2.0, 10.0, "× design",
         "coolant flow"),
    Rule(R.CDU_LOAD, "facility", S.WARNING, 0.9, 0.85, 5.0, 15.0, "× capacity",
         "CDU load"),
    Rule(R.FEED_HEADROOM, "facility", S.WARNING, 0.9, 0.85, 5.0, 15.0, "× rating",
         "feed load"),
    Rule(R.MODEL_DRIFT, "facility", S.WARNING, 1.0, 0.8, 30.0, 30.0, "× tolerance",
         "reading departs from the model by"),
    Rule(R.CDU_LEAK, "facility", S.CRITICAL, 0.0, 0.5, 0.0, 30.0, "detectors",
         "leak detectors reporting a leak:"),
    Rule(R.FEED_FAILED, "facility", S.CRITICAL, 0.0, 0.5, 0.0, 10.0, "units",
         "feed units out of service:"),
)


def rules() -> tuple[Rule, ...]:
    """The rules with ``settings.TELEMETRY_THRESHOLDS`` overrides applied."""
    overrides: dict[str, dict[str, float]] = getattr(settings, "TELEMETRY_THRESHOLDS", {})
    return tuple(replace(r, **overrides.get(r.key, {})) for r in RULES)


@dataclass
class EvalInput:
    """What the tick hands the rules: fresh values (NaN for stale/unknown cards)."""

    now: float
    values: np.ndarray  # (N_METRICS, n) float32, NaN unless fresh
    fresh: np.ndarray  # bool (n,)
    stale: np.ndarray  # bool (n,)
    age_s: np.ndarray  # float64 (n,)
    tdp_w: np.ndarray  # (n,)
    util_ewma: np.ndarray  # (n,)
    rack_draw_w: np.ndarray  # (racks,)
    rack_budget_w: np.ndarray  # (racks,)
    rack_of: np.ndarray | None = None  # (n,) rack position of each card
    rack_supply_c: np.ndarray | None = None  # (racks,) coolant supply (the live plant)
    rack_flow_ratio: np.ndarray | None = None  # (racks,) flow / design flow
    cdu_load: np.ndarray | None = None  # (CDUs,) heat / planned capacity
    feed_load: np.ndarray | None = None  # (feeds,) input / planned rating
    model_drift: np.ndarray | None = None  # (drift slots,) |reading − model| / tolerance
    cdu_leak: np.ndarray | None = None  # (CDUs,) leak detectors reporting a leak (NaN: none read)
    feed_out: np.ndarray | None = None  # (feeds,) units out of service (failed, or all: down)
    cluster_silent: bool | None = None
    """Whether the whole cluster is silent, when these cards are only part of it (a
    tick shard, ``processing.shards``); None: judged from these cards."""
    _silence: tuple[np.ndarray, np.ndarray, bool] | None = field(
        default=None, init=False, repr=False, compare=False)

    def silence(self) -> tuple[np.ndarray, np.ndarray, bool]:
        """(rack all silent (racks,), card silent but its rack is not (n,), cluster silent);
        computed once (two rules ask, and it counts every card)."""
        if self._silence is None:
            self._silence = self._count_silence()
        return self._silence

    def _count_silence(self) -> tuple[np.ndarray, np.ndarray, bool]:
        reported = self.fresh | self.stale
        cluster = (bool(reported.any() and not self.fresh.any()) if self.cluster_silent is None
                   else self.cluster_silent)
        if self.rack_of is None or not len(self.rack_budget_w):
            return np.zeros(len(self.rack_budget_w), bool), self.stale, cluster
        racks = len(self.rack_budget_w)
        rep = np.bincount(self.rack_of, weights=reported, minlength=racks)
        fresh = np.bincount(self.rack_of, weights=self.fresh, minlength=racks)
        rack = (rep > 0) & (fresh == 0)
        return rack, self.stale & ~rack[self.rack_of], cluster


_PLANT_INPUT = {R.COOLANT_SUPPLY: "rack_supply_c", R.COOLANT_FLOW: "rack_flow_ratio",
                R.CDU_LOAD: "cdu_load", R.FEED_HEADROOM: "feed_load",
                R.MODEL_DRIFT: "model_drift", R.CDU_LEAK: "cdu_leak",
                R.FEED_FAILED: "feed_out"}

PLANT_RULES = frozenset(_PLANT_INPUT)
"""The rules that read the live plant (``processing.plant.step_plant``), not the cards:
a sharded round runs them once in its merge, after the plant stepped on every rack."""


def _m(inp: EvalInput, key: str) -> np.ndarray:
    return inp.values[METRIC_INDEX[key]].astype(np.float64)


def _signal(rule: Rule, inp: EvalInput) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(value, firing, clearing) per subject. NaN values neither fire nor clear."""
    with np.errstate(invalid="ignore", divide="ignore"):
        if rule.key == R.RACK_POWER:
            ratio = inp.rack_draw_w / inp.rack_budget_w
            return inp.rack_draw_w, ratio > rule.threshold, ratio < rule.clear
        if rule.key == R.STALE:
            _, card, cluster = inp.silence()
            age = np.where(inp.stale, inp.age_s, np.nan)
            return age, card & (not cluster), inp.fresh
        if rule.key == R.RACK_SILENT:
            rack, _, cluster = inp.silence()
            fresh = (np.bincount(inp.rack_of, weights=inp.fresh, minlength=len(rack)) > 0
                     if inp.rack_of is not None else np.zeros(len(rack), bool))
            silent_for = np.full(len(rack), np.nan)
            if inp.rack_of is not None and len(rack):
                ages = np.where(inp.stale, inp.age_s, np.inf)
                least = np.full(len(rack), np.inf)
                np.minimum.at(least, inp.rack_of, ages)
                silent_for = np.where(rack, least, np.nan)
            return silent_for, rack & (not cluster), fresh
        if rule.key == R.CLUSTER_SILENT:
            _, _, cluster = inp.silence()
            ages = inp.age_s[np.isfinite(inp.age_s)]
            age = float(ages.min()) if len(ages) else np.nan
            return np.array([age]), np.array([cluster]), np.array([bool(inp.fresh.any())])
        if rule.key in _PLANT_INPUT:
            value = getattr(inp, _PLANT_INPUT[rule.key])
            if value is None:
                n = len(inp.rack_budget_w) if rule.level == "rack" else 0
                value = np.full(n, np.nan)
            value = np.asarray(value, dtype=np.float64)
            if rule.key == R.COOLANT_FLOW:  # low is bad
                return value, value < rule.threshold, value > rule.clear
            return value, value > rule.threshold, value < rule.clear
        if rule.key == R.CARD_POWER:
            power = _m(inp, "power_w")
            ratio = power / inp.tdp_w
            return power, ratio > rule.threshold, ratio < rule.clear
        if rule.key == R.UTIL_DROP:
            util = _m(inp, "gpu_util")
            drop = inp.util_ewma - util
            firing = (inp.util_ewma >= 60.0) & (drop > rule.threshold)
            return util, firing, drop < rule.clear
        metric = {R.GPU_TEMP: "gpu_temp_c", R.GPU_TEMP_CRITICAL: "gpu_temp_c",
                  R.MEM_TEMP: "mem_temp_c", R.LINK_LATENCY: "link_latency_ns",
                  R.LINK_LATENCY_CRITICAL: "link_latency_ns",
                  R.RDMA_LATENCY: "rdma_latency_us", R.XID: "xid_errors",
                  R.ECC: "ecc_errors", R.CHECKPOINT_SLOW: "checkpoint_write_s"}[rule.key]
        value = _m(inp, metric)
        return value, value > rule.threshold, value < rule.clear


@dataclass
class Transition:
    event: str  # "opened" or "closed"
    rule: Rule
    position: int  # card ordinal or rack position
    value: float
    alert_id: int | None = None


def _message(rule: Rule, value: float, threshold: float, subject: str) -> str:
    if rule.key in (R.STALE, R.RACK_SILENT, R.CLUSTER_SILENT):
        return f"{subject}: no telemetry for {value:.0f} s"
    if rule.key == R.XID:
        return f"{subject}: XID {value:.0f}"
    if rule.key == R.ECC:
        return f"{subject}: {value:.0f} uncorrectable ECC errors"
    if rule.key == R.RACK_POWER:
        return f"{subject}: {value / 1000:.1f} kW over its {threshold / 1000:.1f} kW budget"
    if rule.key == R.CARD_POWER:
        return f"{subject}: {value:.0f} W over 1.1 × its {threshold / 1.1:.0f} W TDP"
    if rule.key == R.MODEL_DRIFT:
        return f"{subject}, off by {value:.1f} × the tolerance"
    if rule.key == R.CDU_LEAK:
        return f"{subject}: leak reported by {value:.0f} leak detector(s)"
    if rule.key == R.FEED_FAILED:
        return subject  # the label says what failed and what is left
    if rule.key == R.UTIL_DROP:
        return f"{subject}: utilization fell to {value:.0f} %"
    return f"{subject}: {rule.what} {value:.4g} {rule.unit} (threshold {threshold:g} {rule.unit})"


PENDING = 0
"""The alert id of a damping-state entry whose alert was decided open but whose row is
not written yet (:func:`decide`; :func:`settle` puts the row's id in its place)."""

_OPS = "~ops"
"""The damping state's list of database writes decided but not yet committed."""


@dataclass
class Decision:
    """One tick of the rules, decided without writing the database (:func:`decide`).

    ``state`` is the new damping state; an alert opened here is open in it with the
    id :data:`PENDING`. ``ops`` are the database writes still to do, in order: the
    ones a failed commit left in the state (retried first), then this tick's opens,
    then its closes; each is a list (msgpack):
    ``["opened", rule, position, value, alert row fields]`` or
    ``["closed", rule, position, value, alert id (PENDING: opened in these ops), end]``
    (values NaN-free, None instead: :func:`settle` finds the committed ops by equality).
    ``transitions`` are this tick's, without the ids of the alerts they open.
    """

    state: dict[str, dict[int, list[Any]]]
    ops: list[list[Any]]
    transitions: list[Transition]
    card_alerts: dict[int, list[tuple[str, str]]]

    def packed(self) -> bytes:
        """The damping state with its pending writes: what the tick keeps in Redis
        before the commit, so a commit that fails (or never runs) is retried."""
        return _pack(self.state, self.ops)


def _pack(st: dict[str, dict[int, list[Any]]], ops: list[list[Any]]) -> bytes:
    out: dict[str, Any] = {k: {int(o): v for o, v in d.items()} for k, d in st.items() if d}
    if ops:
        out[_OPS] = ops
    return msgpack.packb(out)


def _unpack(raw: bytes) -> tuple[dict[str, dict[int, list[Any]]], list[list[Any]]]:
    st: dict[str, dict[int, list[Any]]] = {}
    ops: list[list[Any]] = []
    for k, d in msgpack.unpackb(raw, strict_map_key=False).items():
        if k == _OPS:
            ops = list(d)
        else:
            st[k] = {int(o): v for o, v in d.items()}
    return st, ops


def decide(
    inp: EvalInput,
    raw_state: bytes | None,
    *,
    subject_of: Callable[[Rule, int], dict[str, Any]],
    cluster_id: int,
    load_open: Callable[[], list[tuple[str, str, int]]],
    position_of: Callable[[str, str], int | None],
    levels: frozenset[str] | None = None,
    rule_keys: frozenset[str] | None = None,
) -> Decision:
    """Advance every rule one tick (only the rules of ``levels``, when given: a tick
    shard runs the card and rack rules of its cards, the merge the cluster rules; and
    only those named in ``rule_keys``, when given: a shard leaves the plant's rules,
    :data:`PLANT_RULES`, to the merge, which runs only those on the whole cluster).

    Writes nothing: the alert rows to insert or close are the decision's ``ops``, for
    :func:`commit` once the tick's event is out (a commit waits on PostgreSQL, the
    slowest ticks of ``benchmarks/serving.py`` waited 0.6-1.2 s on it). Only a tick
    without a damping state (Redis restarted) reads the open alerts (``load_open``).
    """
    now = inp.now
    ops: list[list[Any]] = []
    if raw_state:
        st, ops = _unpack(raw_state)
    else:
        st = {}
        for rule_key, subject, alert_id in load_open():
            rule = next((r for r in RULES if r.key == rule_key), None)
            if rule is None or not _runs(rule, levels, rule_keys):
                continue
            pos = position_of(rule.level, subject)
            if pos is not None:
                st.setdefault(rule_key, {})[pos] = [None, None, alert_id]
    transitions: list[Transition] = []
    opens: list[list[Any]] = []
    closes: list[list[Any]] = []
    for rule in rules():
        if not _runs(rule, levels, rule_keys):
            continue
        value, firing, clearing = _signal(rule, inp)
        rs = st.setdefault(rule.key, {})
        cand = set(np.flatnonzero(firing).tolist()) | set(rs)
        opened_here = 0
        for o in sorted(cand):
            entry = rs.get(o)
            if o >= len(firing):  # a subject gone (a plant's input absent this tick)
                continue
            f = bool(firing[o])
            if entry is None or entry[2] is None:  # not open
                if not f:
                    rs.pop(o, None)
                    continue
                since = entry[0] if entry and entry[0] is not None else now
                if now - since >= rule.min_s and opened_here < MAX_OPEN_PER_TICK:
                    v = float(value[o])
                    opens.append(["opened", rule.key, o, _finite(v),
                                  _row(rule, v, since, subject_of(rule, o), cluster_id)])
                    transitions.append(Transition("opened", rule, o, v))
                    opened_here += 1
                    rs[o] = [since, None, PENDING]
                else:
                    rs[o] = [since, None, None]
            else:  # open
                if bool(clearing[o]):
                    since = entry[1] if entry[1] is not None else now
                    if now - since >= rule.clear_s:
                        v = float(value[o])
                        closes.append(["closed", rule.key, o, _finite(v), int(entry[2]), now])
                        transitions.append(Transition("closed", rule, o, v, int(entry[2])
                                                      or None))
                        rs.pop(o, None)
                    else:
                        rs[o] = [entry[0], since, entry[2]]
                else:
                    rs[o] = [entry[0], None, entry[2]]
    card_alerts: dict[int, list[tuple[str, str]]] = {}
    for rule in RULES:
        if rule.level != "card":
            continue
        for o, entry in st.get(rule.key, {}).items():
            if entry[2] is not None:
                card_alerts.setdefault(o, []).append((rule.key, rule.severity))
    return Decision({k: d for k, d in st.items() if d}, ops + opens + closes, transitions,
                    card_alerts)


def _row(rule: Rule, value: float, since: float, subject: dict[str, Any],
         cluster_id: int) -> dict[str, Any]:
    """The fields of the Alert row that opens (``started``: epoch seconds)."""
    subject = dict(subject)
    threshold = subject.pop("threshold", rule.threshold)
    return {"cluster_id": cluster_id, "rule": rule.key, "severity": rule.severity,
            "level": rule.level, "value": _finite(value), "peak": _finite(value),
            "threshold": threshold,
            "message": _message(rule, value, threshold, subject.pop("label"))[:300],
            "started": since, **subject}


Committed = tuple[list[Transition], dict[tuple[str, int], int]]
"""What a commit did to one batch of ops: its transitions (with their alert ids) and
the id of the alert each ``(rule, position)`` opened."""


def commit(batches: list[list[list[Any]]]) -> list[Committed]:
    """Write the ops of :class:`Decision` s (one batch each: positions are per batch)
    in one transaction: insert the alerts they open, close the ones they close.

    An insert that meets an open alert of the same subject (the damping state was
    lost while alerts were open, or an earlier commit's state never came back) adopts
    that row instead: the transaction is run again, reading the open rows first. Any
    other database error is raised, with nothing written: the caller keeps the ops.
    """
    from django.db import IntegrityError

    if not any(batches):
        return [([], {}) for _ in batches]
    try:
        with transaction.atomic():
            return [_write(ops, adopt=False) for ops in batches]
    except IntegrityError:
        with transaction.atomic():
            return [_write(ops, adopt=True) for ops in batches]


def _write(ops: list[list[Any]], *, adopt: bool) -> Committed:
    from twin.telemetry.models import Alert

    by_key = {r.key: r for r in rules()}
    transitions: list[Transition] = []
    opened: dict[tuple[str, int], int] = {}
    k = 0
    while k < len(ops):  # runs of the same kind, in order (a subject may reopen)
        kind = ops[k][0]
        run = [ops[k]]
        k += 1
        while k < len(ops) and ops[k][0] == kind:
            run.append(ops[k])
            k += 1
        if kind == "opened":
            existing: dict[tuple[str, str], int] = {}
            if adopt:
                fields = [op[4] for op in run]
                existing = {(rule, subject): pk for rule, subject, pk in Alert.objects.filter(
                    cluster_id__in={f["cluster_id"] for f in fields}, ended__isnull=True,
                    rule__in={f["rule"] for f in fields},
                    subject__in={f["subject"] for f in fields}).values_list(
                        "rule", "subject", "id")}
            new = []
            for op in run:
                pk = existing.get((op[4]["rule"], op[4]["subject"]))
                if pk is None:
                    new.append(op)
                else:
                    opened[(op[1], op[2])] = pk
            rows = Alert.objects.bulk_create([Alert(**{
                **op[4], "started": dt.datetime.fromtimestamp(op[4]["started"], tz=dt.UTC)})
                for op in new])
            for op, row in zip(new, rows, strict=True):
                opened[(op[1], op[2])] = row.pk
            for op in run:
                transitions.append(Transition("opened", by_key[op[1]],
                                              op[2], _nan(op[3]), opened[(op[1], op[2])]))
        else:
            ends: dict[float, list[int]] = {}
            for op in run:
                pk = op[4] or opened.get((op[1], op[2]))
                if not pk:
                    continue  # (its opening is lost with the state that held it)
                ends.setdefault(op[5], []).append(pk)
                transitions.append(Transition("closed", by_key[op[1]],
                                              op[2], _nan(op[3]), pk))
            for end, pks in ends.items():
                # (an alert self-healing closed as remediated keeps its own end)
                Alert.objects.filter(pk__in=pks, ended__isnull=True).update(
                    ended=dt.datetime.fromtimestamp(end, tz=dt.UTC))
    return transitions, opened


def _nan(value: float | None) -> float:
    return float("nan") if value is None else float(value)


def settle(raw_state: bytes, done: list[list[Any]],
           opened: dict[tuple[str, int], int]) -> bytes:
    """The damping state once ``done`` (ops it held) committed: those ops dropped, the
    ids of the alerts they opened in place of :data:`PENDING`."""
    st, ops = _unpack(raw_state)
    for (key, o), pk in opened.items():
        entry = st.get(key, {}).get(o)
        if entry is not None and entry[2] == PENDING:
            entry[2] = pk
    return _pack(st, [op for op in ops if op not in done])


def _runs(rule: Rule, levels: frozenset[str] | None, rule_keys: frozenset[str] | None
          ) -> bool:
    return (levels is None or rule.level in levels) and (rule_keys is None
                                                         or rule.key in rule_keys)


def _finite(value: float) -> float | None:
    return value if value == value and abs(value) != float("inf") else None
