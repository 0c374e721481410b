"""Health evaluation of a tick: alert rules, each card's health, the CardHealth rows.

``decide_alerts`` runs the rules of ``twin.telemetry.alerts`` over the fresh
state and the rack draw, writing nothing; ``commit_alerts`` writes the alert rows
they opened or closed once the tick's event is out (a commit waits on PostgreSQL,
which no live frame needs); ``card_health`` turns the active alerts and staleness
into one health code per card; ``sync_card_health`` brings the ``CardHealth``
table (non-OK cards only) toward it, a bounded number of rows per tick.
"""
from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import numpy as np
import redis
from django.db import DatabaseError, IntegrityError, connection

from twin.telemetry import alerts
from twin.telemetry.alerts import PLANT_RULES, Decision, EvalInput, Rule, Transition
from twin.telemetry.metrics import N_METRICS
from twin.telemetry.state import HEALTH_CODES, HEALTH_NAMES, Layout

__all__ = ["HEALTH_SYNC_PER_TICK", "card_health", "commit_alerts", "decide_alerts",
           "decide_plant_alerts", "sync_card_health", "table_health"]

log = logging.getLogger(__name__)


def decide_alerts(lay: Layout, cluster_id: int, *, now: float,
                  fresh_values: np.ndarray, fresh: np.ndarray, stale: np.ndarray,
                  age: np.ndarray, util_ewma: np.ndarray, rack_draw: np.ndarray,
                  alert_state: bytes | None,
                  levels: frozenset[str] | None = None,
                  cluster_silent: bool | None = None,
                  plant: dict[str, Any] | None = None,
                  rule_keys: frozenset[str] | None = None) -> Decision:
    """Run the alert rules without writing: the new damping state (with the alert
    writes still to do), the transitions and the active alerts per card
    (``alerts.decide``). The caller keeps ``Decision.packed()`` as the state and hands
    its ``ops`` to :func:`commit_alerts` after the tick's event.

    ``alert_state`` is the rules' damping state from the last tick (None: none
    yet, so the open alerts are read from the database). A tick shard passes its
    slice of the cluster as ``lay`` (``processing.shards``), the rule ``levels`` it
    runs and whether the whole cluster is silent. ``plant``: the live plant's step
    this tick (``processing.plant.step_plant``), for the coolant, CDU, feed and drift
    rules. ``rule_keys``: only these rules.
    """
    from twin.telemetry.models import Alert

    racks = lay.groups["rack"]

    def subject_of(rule: Rule, pos: int) -> dict[str, Any]:
        if rule.level == "cluster":
            return {"subject": f"cluster:{cluster_id}",
                    "label": f"cluster {lay.groups['cluster'].names[0]}"}
        if rule.level == "facility" and rule.key == "model_drift":
            slot = plant["drift"][pos] if plant else {"subject": f"drift:{pos}",
                                                      "label": str(pos)}
            label = str(slot["label"])
            if "reading" in slot:
                label += (f": reading {slot['reading']:.4g}, model {slot['model']:.4g} "
                          f"(tolerance {slot['tolerance']:.3g})")
            return {"subject": slot["subject"], "label": label}
        if rule.level == "facility":
            kind = "cdu" if rule.key in ("cdu_load", "cdu_leak") else "feed"
            key = str(plant[f"{kind}s"][pos]["key"]) if plant else str(pos)
            label = f"{kind.upper()} {key}"
            if rule.key == "feed_failed" and plant:
                label += _feed_out_label(plant["feeds"][pos])
            return {"subject": f"{kind}:{key}"[:40], "label": label}
        if rule.level == "rack":
            rid = int(racks.ids[pos])
            out_rack: dict[str, Any] = {"subject": f"rack:{rid}", "rack_id": rid,
                                        "label": f"rack {racks.names[pos]}"}
            if rule.key not in ("coolant_supply", "coolant_flow"):
                out_rack["threshold"] = float(racks.budget_w[pos])
            return out_rack
        card_id = int(lay.card_ids[pos])
        rack_pos = int(racks.of_card[pos])
        sn = lay.groups["supernode"]
        out: dict[str, Any] = {
            "subject": f"card:{card_id}", "card_id": card_id,
            "rack_id": int(racks.ids[rack_pos]),
            "supernode_id": int(sn.ids[sn.of_card[pos]]), "label": f"card {card_id}"}
        if rule.key == "card_power":
            out["threshold"] = float(lay.tdp_w[pos]) * rule.threshold
        return out

    def load_open() -> list[tuple[str, str, int]]:
        return list(Alert.objects.filter(cluster_id=cluster_id, ended__isnull=True)
                    .values_list("rule", "subject", "id"))

    card_pos: dict[int, int] = {}  # built on the first card subject (no state: from the DB)

    def position_of(level: str, subject: str) -> int | None:
        kind, _, ident = subject.partition(":")
        if level == "cluster" and kind == "cluster":
            return 0
        if level == "facility" and kind == "drift":
            subjects = [str(d["subject"]) for d in (plant or {}).get("drift", [])]
            return subjects.index(subject) if subject in subjects else None
        if level == "facility" and kind in ("cdu", "feed"):
            keys_ = [str(e["key"]) for e in (plant or {}).get(f"{kind}s", [])]
            return keys_.index(ident) if ident in keys_ else None
        if level == "rack" and kind == "rack":
            try:
                return racks.position(int(ident))
            except KeyError:
                return None
        if kind == "card":
            if not card_pos:
                card_pos.update((int(cid), k) for k, cid in enumerate(lay.card_ids))
            return card_pos.get(int(ident))
        return None

    inp = EvalInput(now=now, values=fresh_values, fresh=fresh, stale=stale, age_s=age,
                    tdp_w=lay.tdp_w.astype(np.float64), util_ewma=util_ewma,
                    rack_draw_w=rack_draw, rack_budget_w=racks.budget_w,
                    rack_of=racks.of_card, cluster_silent=cluster_silent)
    if plant is not None:
        inp.rack_supply_c = plant["rack_supply_c"]
        inp.rack_flow_ratio = plant["rack_flow_ratio"]
        inp.cdu_load = np.array([_or_nan(c.get("load_fraction")) for c in plant["cdus"]])
        inp.feed_load = np.array([_or_nan(f.get("load_fraction")) for f in plant["feeds"]])
        inp.model_drift = plant.get("model_drift")
        inp.cdu_leak = np.array([_or_nan(c.get("leaks")) for c in plant["cdus"]])
        inp.feed_out = np.array([_or_nan(f.get("units_out")) for f in plant["feeds"]])
    return alerts.decide(inp, alert_state, subject_of=subject_of, cluster_id=cluster_id,
                         load_open=load_open, position_of=position_of, levels=levels,
                         rule_keys=rule_keys)


def commit_alerts(r: redis.Redis, cluster_id: int,
                  batches: list[tuple[str, list[list[Any]], int | None]]) -> list[Transition]:
    """Write the alert rows of ``batches`` — ``(state key, ops, expiry s)``: the
    ``Decision.ops`` of the damping state kept at that key — in one transaction, then
    put the new rows' ids into those states; the transitions written (with their
    alert ids), to publish.

    A failure breaks nothing and loses nothing: the states keep the ops (the tick
    stored ``Decision.packed()`` before its event), so the next tick's decision
    carries them and they are written then, with their own times. A write the
    database refuses even after adopting the open rows of the same subjects
    (``alerts.commit``) cannot succeed by retrying: those states are dropped and
    rebuilt from the database's open alerts on the next tick.
    """
    batches = [b for b in batches if b[1]]
    if not batches:
        return []
    try:
        done = alerts.commit([ops for _, ops, _ in batches])
    except IntegrityError:
        log.warning("alert state of cluster %s rebuilt from the database", cluster_id,
                    exc_info=True)
        r.delete(*[key for key, _, _ in batches])
        return []
    except DatabaseError:
        log.warning("alert rows of cluster %s not written: retried next tick", cluster_id,
                    exc_info=True)
        if not connection.in_atomic_block:  # (a dropped connection: reconnect next query)
            connection.close_if_unusable_or_obsolete()
        return []
    raws = r.mget([key for key, _, _ in batches])
    pipe = r.pipeline(transaction=False)
    transitions: list[Transition] = []
    for (key, ops, ex), raw, (moved, opened) in zip(batches, raws, done, strict=True):
        transitions += moved
        if raw:  # (gone: the next tick rebuilds it from the rows just written)
            pipe.set(key, alerts.settle(raw, ops, opened), ex=ex)
    pipe.execute()
    return transitions


def decide_plant_alerts(lay: Layout, *, now: float, plant: dict[str, Any],
                        alert_state: bytes | None) -> Decision:
    """The plant's rules alone (``alerts.PLANT_RULES``: coolant supply and flow per
    rack, CDU load and feed headroom) on the whole cluster ``lay``, with their own
    damping state ``alert_state``: what a sharded round's merge runs once the plant
    has stepped on every rack (the shards cannot: the plant needs all the racks).
    They read the plant's arrays only, so no card values are passed."""
    empty = np.zeros(0)
    return decide_alerts(
        lay, lay.cluster_id, now=now,
        fresh_values=np.full((N_METRICS, 0), np.nan, np.float32),
        fresh=np.zeros(0, bool), stale=np.zeros(0, bool), age=empty, util_ewma=empty,
        rack_draw=np.full(len(lay.groups["rack"].ids), np.nan), alert_state=alert_state,
        plant=plant, rule_keys=PLANT_RULES)


def _feed_out_label(feed: dict[str, Any]) -> str:
    """What a feed with units out has left: its units out of how many, and what the
    survivors carry (their load over the rating they give), or that none is left."""
    units, out = int(feed.get("units") or 0), int(feed.get("units_out") or 0)
    if units and out >= units:
        return f" failed: {out} of {units} units out, none left: its racks have no power"
    frac = feed.get("load_fraction")
    carry = "" if frac is None else (f"; the {units - out} left carry its load at "
                                     f"{float(frac) * 100:.0f} % of their rating")
    return f" failed: {out} of {units} units out{carry}"


def _or_nan(value: Any) -> float:
    return float("nan") if value is None else float(value)


def card_health(reported: np.ndarray, stale: np.ndarray,
                card_alerts: dict[int, list[tuple[str, str]]]) -> np.ndarray:
    """uint8 health per card: unknown until it reports, stale when silent, else
    the worst severity of its active alerts (ok without any)."""
    health = np.where(reported, HEALTH_CODES["ok"], HEALTH_CODES["unknown"]).astype(np.uint8)
    rank = {"warning": HEALTH_CODES["warning"], "critical": HEALTH_CODES["critical"]}
    for o, active in card_alerts.items():
        worst = max(rank.get(sev, 0) for _, sev in active)
        if worst and health[o] != HEALTH_CODES["unknown"]:
            health[o] = max(int(health[o]), worst)
    health[stale] = HEALTH_CODES["stale"]
    return health


HEALTH_SYNC_PER_TICK = 5000
"""Card health rows written per tick: a mass event (a rack of cards going stale and
back) is caught up over a few ticks instead of stalling one."""


def table_health(lay: Layout) -> np.ndarray:
    """The health the ``CardHealth`` table says for each card of ``lay`` (a cluster or
    a tick shard's slice): what the tick starts from when ``keys.health_db`` is gone
    (Redis restarted), so rows of cards that have since recovered are still removed."""
    from twin.telemetry.models import CardHealth

    out = np.zeros(lay.n, np.uint8)
    rows = list(CardHealth.objects.filter(cluster_id=lay.cluster_id)
                .values_list("card_id", "status"))
    if rows:
        ords = lay.ordinals([cid for cid, _ in rows])
        for o, (_, status) in zip(ords.tolist(), rows, strict=True):
            if o >= 0:
                out[o] = HEALTH_CODES.get(status, 0)
    return out


def sync_card_health(lay: Layout, old: np.ndarray | None, new: np.ndarray,
                      card_alerts: dict[int, list[tuple[str, str]]], transitions: list[Any],
                      now: float) -> np.ndarray:
    """Bring ``CardHealth`` rows (non-OK cards only) toward the live health; returns
    the health the table now reflects. ``old`` is what it reflected after the last
    tick (None: not known, read from the table)."""
    from twin.telemetry.models import CardHealth

    if old is None:
        old = table_health(lay)

    bad = {HEALTH_CODES["warning"], HEALTH_CODES["critical"], HEALTH_CODES["stale"]}
    bad_codes = np.array(sorted(bad), np.uint8)
    # Only bad cards have rows: a change between two healthy codes (unknown → ok, a
    # million cards when agents start) is synced without touching the table.
    silent = ~np.isin(old, bad_codes) & ~np.isin(new, bad_codes)
    synced = np.where(silent, new, old).astype(np.uint8)
    diff = np.flatnonzero(synced != new)
    changed = set(diff[:HEALTH_SYNC_PER_TICK].tolist())
    synced[list(changed)] = new[list(changed)]
    touched = {t.position for t in transitions if t.rule.level == "card"} - changed
    touched = {o for o in touched if int(synced[o]) == int(new[o])}
    if not changed and not touched:
        return synced
    stamp = dt.datetime.fromtimestamp(now, tz=dt.UTC)
    names = HEALTH_NAMES
    gone = [int(lay.card_ids[o]) for o in changed if int(new[o]) not in bad]
    if gone:
        for i in range(0, len(gone), 2000):
            CardHealth.objects.filter(card_id__in=gone[i:i + 2000]).delete()

    def reasons(o: int) -> str:
        active = sorted(rule for rule, _ in card_alerts.get(o, []))
        if int(new[o]) == HEALTH_CODES["stale"] and "stale" not in active:
            active.append("stale")
        return ",".join(active)[:300]

    upsert = [CardHealth(card_id=int(lay.card_ids[o]), cluster_id=lay.cluster_id,
                         status=names[int(new[o])], reasons=reasons(o), since=stamp)
              for o in sorted(changed) if int(new[o]) in bad]
    if upsert:
        CardHealth.objects.bulk_create(upsert, batch_size=2000, update_conflicts=True,
                                       unique_fields=["card"],
                                       update_fields=["status", "reasons", "since"])
    for o in touched:
        if int(new[o]) in bad:
            CardHealth.objects.filter(card_id=int(lay.card_ids[o])).update(reasons=reasons(o))
    return synced
