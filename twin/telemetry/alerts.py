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

__all__ = ["PLANT_RULES", "RULES", "EvalInput", "Rule", "Transition", "evaluate", "rules"]

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


def evaluate(
    inp: EvalInput,
    raw_state: bytes | None,
    *,
    subject_of: Callable[[Rule, int], dict[str, Any]],
    cluster_id: int,
    load_open: Callable[[], list[tuple[str, str, int]]],
    position_of: Callable[[str, str], int | None],
    levels: frozenset[str] | None = None,
    rule_keys: frozenset[str] | None = None,
) -> tuple[bytes, list[Transition], dict[int, list[tuple[str, str]]]]:
    """Advance every rule one tick (only the rules of ``levels``, when given: a tick
    shard runs the card and rack rules of its cards, the merge the cluster rules; and
    only those named in ``rule_keys``, when given: a shard leaves the plant's rules,
    :data:`PLANT_RULES`, to the merge, which runs only those on the whole cluster).

    Returns the new damping state, the transitions (alerts opened/closed, with
    their database rows written) and, per card ordinal, the open card alerts
    as ``(rule, severity)`` (for the card's derived health).
    """
    from twin.telemetry.models import Alert

    now = inp.now
    if raw_state:
        st: dict[str, dict[int, list[Any]]] = {
            k: {int(o): v for o, v in d.items()}
            for k, d in msgpack.unpackb(raw_state, strict_map_key=False).items()}
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
    to_open: list[tuple[Rule, int, float, float]] = []
    to_close: list[tuple[Rule, int, float, int]] = []
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
                    to_open.append((rule, o, float(value[o]), since))
                    opened_here += 1
                rs[o] = [since, None, None]
            else:  # open
                if bool(clearing[o]):
                    since = entry[1] if entry[1] is not None else now
                    if now - since >= rule.clear_s:
                        to_close.append((rule, o, float(value[o]), int(entry[2])))
                        rs.pop(o, None)
                    else:
                        rs[o] = [entry[0], since, entry[2]]
                else:
                    rs[o] = [entry[0], None, entry[2]]
    if to_open or to_close:
        stamp = dt.datetime.fromtimestamp(now, tz=dt.UTC)
        with transaction.atomic():
            rows = []
            for rule, o, value, since in to_open:
                subject = subject_of(rule, o)
                threshold = subject.pop("threshold", rule.threshold)
                rows.append(Alert(
                    cluster_id=cluster_id, rule=rule.key, severity=rule.severity,
                    level=rule.level, value=_finite(value), peak=_finite(value),
                    threshold=threshold,
                    message=_message(rule, value, threshold, subject.pop("label"))[:300],
                    started=dt.datetime.fromtimestamp(since, tz=dt.UTC), **subject))
            created = Alert.objects.bulk_create(rows)
            for (rule, o, value, _since), row in zip(to_open, created, strict=True):
                st[rule.key][o][2] = row.pk
                transitions.append(Transition("opened", rule, o, value, row.pk))
            if to_close:
                # (an alert self-healing closed as remediated keeps its own end)
                Alert.objects.filter(pk__in=[a for *_, a in to_close],
                                     ended__isnull=True).update(ended=stamp)
                for rule, o, value, alert_id in to_close:
                    transitions.append(Transition("closed", rule, o, value, alert_id))
    card_alerts: dict[int, list[tuple[str, str]]] = {}
    for rule in RULES:
        if rule.level != "card":
            continue
        for o, entry in st.get(rule.key, {}).items():
            if entry[2] is not None:
                card_alerts.setdefault(o, []).append((rule.key, rule.severity))
    packed = msgpack.packb({k: {int(o): v for o, v in d.items()} for k, d in st.items() if d})
    return packed, transitions, card_alerts


def _runs(rule: Rule, levels: frozenset[str] | None, rule_keys: frozenset[str] | None
          ) -> bool:
    return (levels is None or rule.level in levels) and (rule_keys is None
                                                         or rule.key in rule_keys)


def _finite(value: float) -> float | None:
    return value if value == value and abs(value) != float("inf") else None
