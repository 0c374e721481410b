"""Fork now: freeze a cluster's live state into a :class:`~simulation.snapshot.LiveSnapshot`.

:func:`freeze` reads, in bulk (``values_list`` and numpy, never one ORM object
per card), the inventory's unavailable cards, servers and links, the running
jobs with their allocations and the queue (database), and the latest readings
per card, each card's health and the racks' draw (``twin.telemetry.state``, the
live state's read API: never its Redis keys). It also freezes the facility elements
and network devices whose ``status`` is not ``ok`` (database), the cards' binding
power caps from live capping (``state.card_caps``: under ``apply`` only) and the
plant's temperatures at the last tick (``state.plant_racks`` per rack: coolant supply
and return, hottest card; ``state.plant_summary`` per CDU, and the PUE). A cluster
without live telemetry (never reported, or Redis unreachable) forks its inventory:
``has_live_state`` is False and ``note`` says why.

A scenario run holds the snapshot its inputs came from (``ScenarioRun.snapshot``)
so it can be computed again later from the same state. One mechanism for every
kind: ``runner.submit`` opens :func:`forking` around the kind's ``prepare``; a
kind that needs the live state calls :func:`live_state` (the failure kind's
``live``, the scheduling kind's ``from_live``), which gives the snapshot this
submit forked (``"fork": true``, or ``"fork_from": <run>`` to reuse that run's),
or freezes one now; whichever was used is stored with the run and summarised in
its inputs (``inputs["fork"]``) and result (``result["fork"]``).
"""
from __future__ import annotations

import contextvars
import logging
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from simulation.snapshot import (
    CardReadings,
    LiveSnapshot,
    PendingJob,
    PlantReadings,
    RackPower,
    RunningJob,
)
from simulation.topology import TopologyError

__all__ = ["READINGS", "Fork", "fork_summary", "forking", "freeze", "live_state",
           "stored_snapshot", "with_fork"]

log = logging.getLogger(__name__)

READINGS = {"power_w": "power_w", "temp_c": "gpu_temp_c", "util": "gpu_util"}
"""Snapshot field → telemetry metric key."""

CARD_REASONS = ("failed", "maintenance", "critical", "degraded", "warning", "stale")
"""Worst first: a card is listed under the first that applies."""


@dataclass
class Fork:
    """The snapshot one submit uses: given (``fork``/``fork_from``) or frozen on demand."""

    cluster: Any | None
    snapshot: LiveSnapshot | None = None


_current: contextvars.ContextVar[Fork | None] = contextvars.ContextVar("twin_fork", default=None)


@contextmanager
def forking(fork: Fork) -> Iterator[Fork]:
    """Make ``fork`` the snapshot :func:`live_state` answers inside the block."""
    token = _current.set(fork)
    try:
        yield fork
    finally:
        _current.reset(token)


def live_state(cluster: Any) -> LiveSnapshot:
    """The live state a kind's ``prepare`` reads: the submit's snapshot, frozen now if
    it has none yet (and then kept, so the run stores what it was computed from)."""
    fork = _current.get()
    if fork is None:
        return freeze(cluster)
    if fork.snapshot is None or fork.snapshot.cluster_id != cluster.pk:
        fork.snapshot = freeze(cluster)
    return fork.snapshot


def fork_summary(snapshot: LiveSnapshot) -> dict[str, Any]:
    """What a run's inputs say about its snapshot: its state (counts, digest), not the
    instant — two forks of an unchanged cluster give the same inputs (and cache key)."""
    summary = snapshot.summary()
    summary.pop("taken_at")
    summary.pop("seq")
    return summary


def with_fork(inputs: Mapping[str, Any], result: Any) -> Any:
    """``result`` with the run's snapshot summary (``fork``) when it was forked, so the
    result says what it started from (and when there was no live state)."""
    if isinstance(result, dict) and isinstance(inputs, Mapping) and "fork" in inputs:
        return {**result, "fork": inputs["fork"]}
    return result


def stored_snapshot(run: Any, path: str = "fork_from") -> LiveSnapshot:
    """The snapshot stored with scenario run ``run`` (for ``fork_from``)."""
    from twin.scenarios.kinds import ScenarioInputError

    if not run.snapshot:
        raise ScenarioInputError.one(path, f"run #{run.pk} was not forked from a live state "
                                           f"(it stores no snapshot)")
    try:
        return LiveSnapshot.from_dict(run.snapshot)
    except TopologyError as exc:
        raise ScenarioInputError.one(path, f"run #{run.pk}'s snapshot is unreadable: "
                                           f"{exc}") from exc


# ------------------------------------------------------------------ freeze
def freeze(cluster: Any) -> LiveSnapshot:
    """The cluster's live state now (see the module doc)."""
    taken_at = time.time()
    cid = int(cluster.pk)
    status_down = _inventory_cards(cid)
    readings, health_down, racks, seq, note, plant = _live(cid)
    cards_down: dict[str, set[int]] = defaultdict(set)
    seen: set[int] = set()
    for reason in CARD_REASONS:
        ids = status_down.get(reason, set()) | health_down.get(reason, set())
        ids -= seen
        if ids:
            cards_down[reason] = ids
            seen |= ids
    running, queue = _jobs(cid, taken_at)
    if readings is None:
        name = getattr(cluster, "name", cid)
        note = (f"cluster {name!r} has no live state ({note}): the snapshot is its "
                f"inventory only (cards and links down, jobs), no readings")
    return LiveSnapshot(
        taken_at=taken_at, cluster_id=cid, cluster_name=str(getattr(cluster, "name", "")),
        has_live_state=readings is not None,
        cards_down={k: tuple(sorted(v)) for k, v in cards_down.items()},
        servers_down=_servers_down(cid, status_down, readings, health_down),
        links_down=_links_down(cid), devices_down=_devices_down(cid),
        facility_down=_facility_down(cid),
        running=running, queue=queue, readings=readings, racks=racks, seq=seq, note=note,
        plant=plant)


def _inventory_cards(cid: int) -> dict[str, set[int]]:
    """Card ids per non-ok inventory status (rare rows: one query)."""
    from twin.hardware.choices import CardStatusChoices
    from twin.hardware.models import Card

    out: dict[str, set[int]] = defaultdict(set)
    rows = (Card.objects.filter(server__rack__cluster_id=cid)
            .exclude(status=CardStatusChoices.OK).order_by().values_list("id", "status"))
    for card_id, status in rows:
        out[str(status)].add(int(card_id))
    return out


def _live(cid: int) -> tuple[CardReadings | None, dict[str, set[int]], RackPower | None,
                             int, str, PlantReadings | None]:
    """Readings (with the binding caps), health-down cards, rack draw, tick seq, the
    plant's temperatures — or None and why not."""
    from redis.exceptions import RedisError

    from twin.telemetry import state

    try:
        lay = state.layout(cid)
        seen = state.last_seen(cid)
        if lay.n == 0 or not np.isfinite(seen).any():
            return None, {}, None, 0, "no card has ever reported", None
        values = state.latest_many(cid, list(READINGS.values()))
        codes = state.health(cid)
        rollup = state.rollup(cid, "rack", "power_w")
        caps = state.card_caps(cid, lay.version)
        plant = _plant(cid, lay)
    except RedisError as exc:
        log.warning("fork of cluster %s: live state unreadable (%s)", cid, exc)
        return None, {}, None, 0, f"the live state could not be read: {exc}", None
    card_ids = lay.card_ids.astype(np.int64)
    if caps is not None and len(caps) != len(card_ids):
        caps = None
    readings = CardReadings(card_ids, *(values[READINGS[k]] for k in ("power_w", "temp_c",
                                                                      "util")), cap_w=caps)
    health_down: dict[str, set[int]] = {}
    for name in ("critical", "warning", "stale"):
        picked = card_ids[codes == state.HEALTH_CODES[name]]
        if picked.size:
            health_down[name] = set(picked.tolist())
    racks = RackPower(tuple(int(v) for v in rollup["ids"]),
                      tuple(_opt(v) for v in rollup["draw_w"].tolist()),
                      tuple(_opt(v) for v in rollup["budget_w"].tolist()))
    return readings, health_down, racks, int(rollup["seq"]), "", plant


def _plant(cid: int, lay: Any) -> PlantReadings | None:
    """The plant's last tick: per layout rack its coolant and hottest card, per CDU its
    temperatures, flow and heat, the PUE (None: no facility, or no tick yet)."""
    from twin.telemetry import state

    racks = state.plant_racks(cid, lay.version)
    summary = state.plant_summary(cid)
    if racks is None or summary is None:
        return None
    ids = tuple(int(v) for v in lay.groups["rack"].ids)

    def col(name: str) -> tuple[float | None, ...]:
        values = racks.get(name)
        if values is None or len(values) != len(ids):
            return (None,) * len(ids)
        return tuple(_opt(float(v)) for v in values.tolist())

    cdus = tuple({"key": str(c["key"]), **{k: _opt(float(c[k])) if isinstance(
        c.get(k), int | float) else None for k in PlantReadings.CDU_FIELDS}}
        for c in summary.get("cdus") or [] if isinstance(c, dict) and "key" in c)
    pue = summary.get("pue")
    return PlantReadings(ids, col("supply_c"), col("return_c"), col("card_c"), cdus,
                         float(pue) if isinstance(pue, int | float) else None)


def _facility_down(cid: int) -> dict[str, tuple[str, ...]]:
    """Facility elements whose status is not ok, per status, as ``"<chain>:<key>"``."""
    from twin.facility.models import CoolingElement, PowerElement

    out: dict[str, list[str]] = defaultdict(list)
    for model, chain in ((CoolingElement, "cooling"), (PowerElement, "power")):
        for key, status in (model.objects.filter(site__cluster_id=cid).exclude(status="ok")
                            .order_by("key").values_list("key", "status")):
            out[str(status)].append(f"{chain}:{key}")
    return {k: tuple(sorted(v)) for k, v in out.items()}


def _devices_down(cid: int) -> dict[str, tuple[int, ...]]:
    """Network devices whose status is not ok, per status."""
    from twin.hardware.models import NetworkDevice

    out: dict[str, list[int]] = defaultdict(list)
    for did, status in (NetworkDevice.objects.filter(cluster_id=cid).exclude(status="ok")
                        .order_by("id").values_list("id", "status")):
        out[str(status)].append(int(did))
    return {k: tuple(v) for k, v in out.items()}


def _opt(value: float) -> float | None:
    return None if not np.isfinite(value) else float(value)


def _servers_down(cid: int, status_down: Mapping[str, set[int]],
                  readings: CardReadings | None,
                  health_down: Mapping[str, set[int]]) -> dict[str, tuple[int, ...]]:
    """Servers all of whose cards are unavailable (``down``) or, live, silent (``stale``)."""
    from django.db.models import Count, Q

    from twin.hardware.models import Card
    from twin.jobs.constants import UNAVAILABLE_CARD_STATES

    out: dict[str, tuple[int, ...]] = {}
    if any(status_down.get(s) for s in UNAVAILABLE_CARD_STATES):
        rows = (Card.objects.filter(server__rack__cluster_id=cid).order_by()
                .values("server_id")
                .annotate(n=Count("id"), bad=Count("id", filter=Q(
                    status__in=UNAVAILABLE_CARD_STATES)))
                .filter(bad__gt=0).values_list("server_id", "n", "bad"))
        down = sorted(int(s) for s, n, bad in rows if n == bad)
        if down:
            out["down"] = tuple(down)
    stale = health_down.get("stale")
    if readings is not None and stale:
        from twin.telemetry import state

        servers = state.layout(cid).server_ids.astype(np.int64)
        silent = np.isin(readings.card_ids, np.fromiter(stale, np.int64, len(stale)))
        uniq, inv = np.unique(servers, return_inverse=True)
        quiet = np.bincount(inv, weights=silent) == np.bincount(inv)
        ids = sorted(set(uniq[quiet].tolist()) - set(out.get("down", ())))
        if ids:
            out["stale"] = tuple(int(s) for s in ids)
    return out


def _links_down(cid: int) -> dict[str, tuple[int, ...]]:
    from twin.hardware.choices import LinkStatusChoices
    from twin.hardware.models import Link

    out: dict[str, list[int]] = defaultdict(list)
    for link_id, status in (Link.objects.filter(cluster_id=cid)
                            .exclude(status=LinkStatusChoices.UP).order_by("id")
                            .values_list("id", "status")):
        out[str(status)].append(int(link_id))
    return {k: tuple(v) for k, v in out.items()}


def _jobs(cid: int, now: float) -> tuple[tuple[RunningJob, ...], tuple[PendingJob, ...]]:
    """Running jobs with their cards, and the queue (priority, then submission)."""
    from twin.jobs.choices import JobStateChoices
    from twin.jobs.models import Allocation, Job

    pieces: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for job_id, card_id, milli in (Allocation.objects.filter(
            job__cluster_id=cid, job__state=JobStateChoices.RUNNING)
            .order_by("job_id", "card_id").values_list("job_id", "card_id", "share_milli")):
        pieces[int(job_id)].append((int(card_id), int(milli)))
    running = []
    for jid, name, tenant, prio, started, duration, model, batch in (
            Job.objects.filter(cluster_id=cid, state=JobStateChoices.RUNNING).order_by("id")
            .values_list("id", "name", "tenant", "priority", "started", "duration_s",
                         "training_model", "global_batch")):
        t0 = started.timestamp() if started else None
        end = t0 + float(duration) if t0 is not None and duration else None
        progress = (min(1.0, max(0.0, (now - t0) / float(duration)))
                    if t0 is not None and duration else None)
        cards = pieces.get(int(jid), [])
        running.append(RunningJob(int(jid), name, tenant, int(prio),
                                  tuple(c for c, _ in cards), tuple(m for _, m in cards),
                                  t0, end, progress, model or None, batch))
    queue = tuple(
        PendingJob(int(jid), name, tenant, int(prio), int(cards), int(share), bool(gang),
                   None if duration is None else float(duration),
                   created.timestamp() if created else None, model or None, batch)
        for jid, name, tenant, prio, cards, share, gang, duration, created, model, batch in (
            Job.objects.filter(cluster_id=cid, state=JobStateChoices.QUEUED)
            .order_by("-priority", "created", "id")
            .values_list("id", "name", "tenant", "priority", "cards", "share_milli", "gang",
                         "duration_s", "created", "training_model", "global_batch")))
    return tuple(running), queue
