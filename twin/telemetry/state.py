"""The live state of every card, in Redis, columnar — and the API to read it.

This is the interface the websocket layer (``twin.live``), the REST API and
simulations read. Signatures here are stable; the write side lives in
``twin.telemetry.processing``.

Public API (all functions take a cluster's database id)
=======================================================

``layout(cluster_id) -> Layout``
    The card order of the cluster: ``Layout.card_ids[k]`` is the card at
    ordinal ``k``. Ordinals follow (supernode index, rack row/slot, server
    position, slot), so a supernode's and usually a rack's cards are a
    contiguous range. ``Layout.ordinals(card_ids)`` maps ids to ordinals (−1 for
    cards not in the cluster); ``Layout.members(level, group_id)`` gives the
    ordinals of a supernode's or rack's cards; ``Layout.groups[level]`` lists
    the groups of a rollup level (``ids``, ``names``, and for racks the power
    ``budget_w`` and ``static_w``). Cached per process, checked against a
    version in Redis on each call (one GET).
``latest(cluster_id, metric, card_ids=None) -> np.ndarray``
    float32 latest values of ``metric`` (a key of ``metrics.METRIC_KEYS``) for
    every card in ordinal order, or for ``card_ids`` in the order given. NaN:
    no reading (never reported, or an unknown card id).
``latest_many(cluster_id, metrics, card_ids=None) -> dict[str, np.ndarray]``
    The same for several metrics in one Redis round trip.
``last_seen(cluster_id, card_ids=None) -> np.ndarray``
    float64 Unix time of each card's last sample (NaN: never).
``health(cluster_id, card_ids=None) -> np.ndarray``
    uint8 health code per card, see ``HEALTH_NAMES`` (``unknown`` until a card
    first reports; ``stale`` once it is silent; else the worst active alert).
``card_state(cluster_id, card_id) -> dict``
    One card: ``{"card", "ordinal", "ts", "age_s", "stale", "health",
    "metrics": {key: float | None}}``; ``KeyError`` if the card is not in the
    cluster.
``history(cluster_id, card_id, metric, n=60) -> list[tuple[float, float | None]]``
    The last ``n`` history buckets of one card and metric, oldest first, as
    ``(bucket start, value)``; ``None`` where the card sent nothing in that
    bucket. Kept for ``metrics.HISTORY_METRICS`` only (sparklines); the bucket
    is ``TELEMETRY_HISTORY_STEP_S`` and ``TELEMETRY_HISTORY_LEN`` are kept.
``rollup(cluster_id, level, metric) -> dict``
    Aggregates of ``metric`` per group of ``level`` ("cluster", "supernode" or
    "rack") as computed at the last tick: ``{"level", "metric", "seq", "ts",
    "ids", "names", "mean", "min", "max", "sum", "count", "reporting",
    "cards"}`` — ``ids``/``names`` identify the groups, the statistics are
    float32 arrays aligned with them over the cards that reported the metric
    and are not stale (``count``), ``reporting`` counts the fresh cards,
    ``cards`` all cards. For ``power_w`` also ``budget_w`` (racks: the rack's
    budget; supernode/cluster: the sum of their racks'), ``static_w`` (server
    overhead + network devices, nameplate) and ``draw_w`` = ``sum`` +
    ``static_w``. Before the first tick the statistics are NaN and seq is 0.
``frame_seq(cluster_id) -> int``
    The number of the last tick (monotonic; 0 before the first).
``summary(cluster_id) -> dict``
    Cluster headline: seq, ts, cards, reporting, power draw vs budget, mean and
    max utilisation, max temperature, health counts.

Channels events
===============

After processing telemetry the workers publish at most ``MAX_TICK_HZ`` (2)
ticks per cluster per second to the group ``group_name(cluster_id)`` =
``"telemetry.cluster.<id>"``::

    {"type": "telemetry.tick", "cluster": 7, "seq": 1234, "ts": 1718000000.5,
     "layout": "<version>"}

A consumer builds its frames from ``rollup``/``latest`` when it receives one:
the tick says "state ``seq`` is complete", never carries per-card data. Alert
changes go to the same group::

    {"type": "alert.event", "cluster": 7, "event": "opened" | "closed" |
     "acknowledged", "alert": {"id", "rule", "severity", "card", "rack",
     "supernode", "value", "threshold", "message", "started", "ended",
     "acknowledged_by"}}

Redis layout (prefix ``TELEMETRY_REDIS_PREFIX``, default ``tw``)
===============================================================

Per cluster ``c`` and layout version ``v`` — never one key per sample:

* ``tw:c<c>:layout`` → ``v`` (the layout version; deleted when hardware
  changes, so every process rebuilds the layout and starts fresh keys);
* ``tw:c<c>:<v>:m:<i>`` → float32[n_cards], the latest value of metric ``i``
  (NaN = none), written with SETRANGE per contiguous run of cards;
* ``tw:c<c>:<v>:seen`` → float64[n_cards] last-sample time;
* ``tw:c<c>:<v>:health`` → uint8[n_cards];
* ``tw:c<c>:<v>:h:<i>:<slot>`` → float32[n_cards], history ring slot, and
  ``tw:c<c>:<v>:hb`` (hash slot → bucket number) saying which bucket a slot holds;
* ``tw:c<c>:<v>:r:<level>:<i>`` → float32[5, groups] (mean, min, max, sum,
  count) and ``tw:c<c>:<v>:r:<level>:meta`` (msgpack: seq, ts, reporting);
* ``tw:c<c>:seq`` → tick counter (survives layout changes, so frame sequence
  numbers never go backwards).
"""
from __future__ import annotations

import hashlib
import os
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import msgpack
import numpy as np
import redis
from django.conf import settings

from twin.telemetry.metrics import HISTORY_METRICS, METRIC_INDEX, METRIC_KEYS, N_METRICS

__all__ = [
    "ALERT_EVENT",
    "HEALTH_CODES",
    "HEALTH_NAMES",
    "LEVELS",
    "MAX_TICK_HZ",
    "STATS",
    "TICK_EVENT",
    "GroupIndex",
    "Layout",
    "card_state",
    "conf",
    "forget_cluster",
    "frame_seq",
    "group_name",
    "health",
    "history",
    "invalidate_layout",
    "keys",
    "last_seen",
    "latest",
    "latest_many",
    "layout",
    "redis_client",
    "rollup",
    "summary",
    "touch_layout",
]

TICK_EVENT = "telemetry.tick"
ALERT_EVENT = "alert.event"
MAX_TICK_HZ = 2
LEVELS = ("cluster", "supernode", "rack")
STATS = ("mean", "min", "max", "sum", "count")
HEALTH_NAMES = ("unknown", "ok", "warning", "critical", "stale")
HEALTH_CODES = {name: code for code, name in enumerate(HEALTH_NAMES)}


def group_name(cluster_id: int) -> str:
    """The Channels group that receives a cluster's ticks and alert events."""
    return f"telemetry.cluster.{int(cluster_id)}"


# --------------------------------------------------------------------------
# settings and connection
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class Conf:
    """Telemetry settings (``TELEMETRY_*`` in Django settings), with defaults."""

    prefix: str
    interval_s: float
    stale_intervals: int
    history_len: int
    history_step_s: float
    tick_min_s: float

    @property
    def stale_after_s(self) -> float:
        return self.interval_s * self.stale_intervals


def conf() -> Conf:
    s = settings
    return Conf(
        prefix=getattr(s, "TELEMETRY_REDIS_PREFIX", "tw"),
        interval_s=float(getattr(s, "TELEMETRY_INTERVAL_S", 1.0)),
        stale_intervals=int(getattr(s, "TELEMETRY_STALE_INTERVALS", 5)),
        history_len=int(getattr(s, "TELEMETRY_HISTORY_LEN", 120)),
        history_step_s=float(getattr(s, "TELEMETRY_HISTORY_STEP_S", 1.0)),
        tick_min_s=1.0 / MAX_TICK_HZ,
    )


_client_lock = threading.Lock()
_client: tuple[int, str, redis.Redis] | None = None


def redis_client() -> redis.Redis:
    """One binary-safe Redis client per process (re-made after a fork)."""
    global _client
    url = settings.REDIS_URL
    current = _client
    if current is None or current[0] != os.getpid() or current[1] != url:
        with _client_lock:
            current = _client
            if current is None or current[0] != os.getpid() or current[1] != url:
                client = redis.Redis.from_url(url, socket_keepalive=True,
                                              health_check_interval=30)
                _client = current = (os.getpid(), url, client)
    return current[2]


class keys:  # noqa: N801 - a namespace of key builders
    """Redis key names (see the module docstring)."""

    @staticmethod
    def base(cluster_id: int) -> str:
        return f"{conf().prefix}:c{int(cluster_id)}"

    @staticmethod
    def layout(cluster_id: int) -> str:
        return f"{keys.base(cluster_id)}:layout"

    @staticmethod
    def layout_gen(cluster_id: int) -> str:
        return f"{keys.base(cluster_id)}:layout_gen"

    @staticmethod
    def seq(cluster_id: int) -> str:
        return f"{keys.base(cluster_id)}:seq"

    @staticmethod
    def state(cluster_id: int, version: str) -> str:
        return f"{keys.base(cluster_id)}:{version}"

    @staticmethod
    def metric(cluster_id: int, version: str, index: int) -> str:
        return f"{keys.state(cluster_id, version)}:m:{index}"

    @staticmethod
    def seen(cluster_id: int, version: str) -> str:
        return f"{keys.state(cluster_id, version)}:seen"

    @staticmethod
    def health(cluster_id: int, version: str) -> str:
        return f"{keys.state(cluster_id, version)}:health"

    @staticmethod
    def history(cluster_id: int, version: str, index: int, slot: int) -> str:
        return f"{keys.state(cluster_id, version)}:h:{index}:{slot}"

    @staticmethod
    def history_buckets(cluster_id: int, version: str) -> str:
        return f"{keys.state(cluster_id, version)}:hb"

    @staticmethod
    def rollup(cluster_id: int, version: str, level: str, index: int | str) -> str:
        return f"{keys.state(cluster_id, version)}:r:{level}:{index}"

    @staticmethod
    def clusters() -> str:
        """Set of cluster ids that have live state (the beat tick walks it)."""
        return f"{conf().prefix}:clusters"


# --------------------------------------------------------------------------
# layout
# --------------------------------------------------------------------------

@dataclass
class GroupIndex:
    """The groups of one rollup level and how cards fall into them.

    ``of_card[k]`` is the group position of the card at ordinal ``k``;
    ``perm``/``starts`` let ``np.ufunc.reduceat`` aggregate all groups at once
    (``perm`` is None when cards are already sorted by group).
    """

    level: str
    ids: np.ndarray
    names: list[str]
    of_card: np.ndarray
    perm: np.ndarray | None
    starts: np.ndarray
    cards: np.ndarray
    budget_w: np.ndarray
    static_w: np.ndarray

    def position(self, group_id: int) -> int:
        pos = int(np.searchsorted(self.ids_sorted, group_id))
        if pos < len(self.ids_sorted) and self.ids_sorted[pos] == group_id:
            return int(self.ids_sorted_pos[pos])
        raise KeyError(f"no {self.level} {group_id} with cards in this cluster")

    def __post_init__(self) -> None:
        order = np.argsort(self.ids, kind="stable")
        self.ids_sorted = self.ids[order]
        self.ids_sorted_pos = order


@dataclass
class Layout:
    """The dense card order of one cluster (see the module docstring)."""

    cluster_id: int
    version: str
    fingerprint: str
    card_ids: np.ndarray
    server_ids: np.ndarray
    slots: np.ndarray
    tdp_w: np.ndarray
    idle_w: np.ndarray
    hbm_gib: np.ndarray
    groups: dict[str, GroupIndex]
    probe: tuple[int, int]
    gen: int = 0
    built_at: float = field(default_factory=time.monotonic)
    _id_order: np.ndarray | None = None
    _uuid_map: dict[str, int] | None = None
    _host_map: dict[tuple[str, int], int] | None = None

    @property
    def n(self) -> int:
        return len(self.card_ids)

    def ordinals(self, card_ids: Any) -> np.ndarray:
        """Ordinal of each card id (int64; −1 where the card is not in this cluster)."""
        ids = np.asarray(card_ids, dtype=np.int64).reshape(-1)
        if self._id_order is None:
            self._id_order = np.argsort(self.card_ids, kind="stable")
        sorted_ids = self.card_ids[self._id_order]
        pos = np.searchsorted(sorted_ids, ids)
        pos_clipped = np.minimum(pos, max(len(sorted_ids) - 1, 0))
        if len(sorted_ids) == 0:
            return np.full(len(ids), -1, dtype=np.int64)
        found = sorted_ids[pos_clipped] == ids
        return np.where(found, self._id_order[pos_clipped], -1).astype(np.int64)

    def members(self, level: str, group_id: int) -> np.ndarray:
        """Ordinals of the cards in one supernode or rack (or the whole cluster)."""
        index = self.groups[level]
        g = index.position(group_id)
        return np.flatnonzero(index.of_card == g)

    def uuid_map(self) -> dict[str, int]:
        """Lower-case card UUID (no ``GPU-`` prefix) → ordinal, built on first use."""
        if self._uuid_map is None:
            from twin.hardware.models import Card

            pos = {int(cid): k for k, cid in enumerate(self.card_ids)}
            rows = Card.objects.filter(supernode__cluster_id=self.cluster_id).values_list(
                "id", "uuid")
            self._uuid_map = {str(u).lower(): pos[cid] for cid, u in rows.iterator(4096)
                              if cid in pos}
        return self._uuid_map

    def host_map(self) -> dict[tuple[str, int], int]:
        """(lower-case hostname, GPU index) → ordinal, built on first use."""
        if self._host_map is None:
            from twin.hardware.models import Server

            hosts = dict(Server.objects.filter(rack__cluster_id=self.cluster_id)
                         .exclude(hostname="").values_list("id", "hostname"))
            self._host_map = {
                (hosts[int(s)].lower(), int(slot)): k
                for k, (s, slot) in enumerate(zip(self.server_ids, self.slots, strict=True))
                if int(s) in hosts
            }
        return self._host_map


_layouts: dict[int, Layout] = {}
_layout_lock = threading.Lock()
LAYOUT_PROBE_S = 30.0


def _probe(cluster_id: int) -> tuple[int, int]:
    """A cheap fingerprint of the cluster's cards: (count, max id)."""
    from django.db.models import Count, Max

    from twin.hardware.models import Card

    agg = Card.objects.filter(supernode__cluster_id=cluster_id).aggregate(n=Count("id"),
                                                                        m=Max("id"))
    return int(agg["n"] or 0), int(agg["m"] or 0)


def _build_layout(cluster_id: int) -> Layout:
    """Read the cluster's cards from the database into a fresh layout (no version)."""
    from django.db.models import Sum

    from twin.hardware.models import Card, Cluster, NetworkDevice, Rack, Server, SuperNode

    cluster = Cluster.objects.filter(pk=cluster_id).values("id", "name").first()
    if cluster is None:
        raise KeyError(f"no cluster {cluster_id}")
    sn_rows = list(SuperNode.objects.filter(cluster_id=cluster_id)
                   .values_list("id", "index", "name"))
    rack_rows = list(Rack.objects.filter(cluster_id=cluster_id)
                     .values_list("id", "row", "slot", "name", "power_budget_w"))
    srv_rows = list(Server.objects.filter(rack__cluster_id=cluster_id)
                    .values_list("id", "rack_id", "position"))
    cards = np.array(
        list(Card.objects.filter(supernode__cluster_id=cluster_id)
             .values_list("id", "supernode_id", "server_id", "slot", "accelerator__tdp_w",
                          "accelerator__idle_w", "accelerator__hbm_gib")
             .order_by().iterator(chunk_size=20000)),
        dtype=np.float64,
    ).reshape(-1, 7)
    card_id = cards[:, 0].astype(np.int64)
    sn_id = cards[:, 1].astype(np.int64)
    srv_id = cards[:, 2].astype(np.int64)
    slot = cards[:, 3].astype(np.int64)

    sn_index = {sid: idx for sid, idx, _ in sn_rows}
    rack_pos = {rid: (row, slot_) for rid, row, slot_, _, _ in rack_rows}
    srv_rack = {sid: rid for sid, rid, _ in srv_rows}
    srv_pos = {sid: pos for sid, _, pos in srv_rows}

    def lookup(mapping: dict, arr: np.ndarray, default: Any = 0) -> np.ndarray:
        uniq, inv = np.unique(arr, return_inverse=True)
        return np.array([mapping.get(int(u), default) for u in uniq], dtype=np.int64)[inv]

    card_rack = lookup(srv_rack, srv_id)
    rack_row = lookup({r: p[0] for r, p in rack_pos.items()}, card_rack)
    rack_slot = lookup({r: p[1] for r, p in rack_pos.items()}, card_rack)
    order = np.lexsort((card_id, slot, srv_id, lookup(srv_pos, srv_id), card_rack, rack_slot,
                        rack_row, lookup(sn_index, sn_id)))
    card_id, sn_id, srv_id, slot = card_id[order], sn_id[order], srv_id[order], slot[order]
    card_rack = card_rack[order]
    n = len(card_id)

    static_by_rack: dict[int, float] = {}
    for rid, w in (Server.objects.filter(rack__cluster_id=cluster_id).values("rack_id")
                   .annotate(w=Sum("overhead_w")).values_list("rack_id", "w")):
        static_by_rack[rid] = static_by_rack.get(rid, 0.0) + float(w or 0)
    for rid, w in (NetworkDevice.objects.filter(cluster_id=cluster_id, rack__isnull=False)
                   .values("rack_id").annotate(w=Sum("power_w")).values_list("rack_id", "w")):
        static_by_rack[rid] = static_by_rack.get(rid, 0.0) + float(w or 0)
    budget_by_rack = {rid: float(b) for rid, _, _, _, b in rack_rows}
    rack_names = {rid: name for rid, _, _, name, _ in rack_rows}
    sn_names = {sid: name for sid, _, name in sn_rows}

    def index_for(level: str, of: np.ndarray, names: dict[int, str]) -> GroupIndex:
        # groups in order of first appearance (ordinal order)
        uniq, first = np.unique(of, return_index=True)
        ids = uniq[np.argsort(first, kind="stable")]
        pos = {int(g): i for i, g in enumerate(ids)}
        of_card = np.array([pos[int(g)] for g in of], dtype=np.int32) if n else np.zeros(
            0, np.int32)
        perm_sorted = np.argsort(of_card, kind="stable")
        perm = None if np.array_equal(perm_sorted, np.arange(n)) else perm_sorted
        counts = np.bincount(of_card, minlength=len(ids)).astype(np.int32)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        if level == "rack":
            budget = np.array([budget_by_rack.get(int(g), np.nan) for g in ids])
            static = np.array([static_by_rack.get(int(g), 0.0) for g in ids])
        else:
            rack_group = {}
            for r, g in zip(card_rack, of, strict=True):
                rack_group.setdefault(int(r), int(g))
            budget = np.zeros(len(ids))
            static = np.zeros(len(ids))
            for r, g in rack_group.items():
                budget[pos[g]] += budget_by_rack.get(r, 0.0)
                static[pos[g]] += static_by_rack.get(r, 0.0)
        return GroupIndex(level=level, ids=ids.astype(np.int64),
                          names=[names.get(int(g), str(int(g))) for g in ids],
                          of_card=of_card, perm=perm, starts=starts, cards=counts,
                          budget_w=budget.astype(np.float64),
                          static_w=static.astype(np.float64))

    groups = {
        "cluster": index_for("cluster", np.full(n, cluster_id, dtype=np.int64),
                             {cluster_id: cluster["name"]}),
        "supernode": index_for("supernode", sn_id, sn_names),
        "rack": index_for("rack", card_rack, rack_names),
    }
    fingerprint = hashlib.sha1(card_id.tobytes() + card_rack.tobytes()).hexdigest()[:16]
    return Layout(
        cluster_id=cluster_id, version="", fingerprint=fingerprint, card_ids=card_id,
        server_ids=srv_id, slots=slot,
        tdp_w=cards[order, 4].astype(np.float32), idle_w=cards[order, 5].astype(np.float32),
        hbm_gib=cards[order, 6].astype(np.float32), groups=groups,
        probe=(n, int(card_id.max()) if n else 0),
    )


def layout(cluster_id: int) -> Layout:
    """The cluster's layout, from this process's cache when still current.

    Redis holds ``<version>:<fingerprint>`` under ``tw:c<id>:layout`` and a
    generation counter that hardware changes bump (``touch_layout``). A
    process rebuilds when the generation moved (or every 30 s, if a cheap
    probe of the cards changed); if its build has the published fingerprint
    (same cards, same order) it keeps the version and so the live state. If
    not, the card order changed: it publishes a new version, which starts
    fresh state keys, and drops the old ones.
    """
    cluster_id = int(cluster_id)
    r = redis_client()
    raw, raw_gen = r.mget(keys.layout(cluster_id), keys.layout_gen(cluster_id))
    stored = raw.decode() if raw else ""
    gen = int(raw_gen or 0)
    cached = _layouts.get(cluster_id)
    now = time.monotonic()
    if cached and cached.gen == gen and stored == f"{cached.version}:{cached.fingerprint}":
        if now - cached.built_at < LAYOUT_PROBE_S:
            return cached
        if _probe(cluster_id) == cached.probe:
            cached.built_at = now
            return cached
    with _layout_lock:
        built = _build_layout(cluster_id)
        built.gen = gen
        version, _, fingerprint = stored.partition(":")
        if not stored:
            version = secrets.token_hex(4)
            if not r.set(keys.layout(cluster_id), f"{version}:{built.fingerprint}", nx=True):
                # Another process published first; its build is of the same rows.
                raw = r.get(keys.layout(cluster_id))
                version, _, fingerprint = (raw or b"").decode().partition(":")
                if fingerprint != built.fingerprint:
                    return _replace_version(cluster_id, built, version)
        elif fingerprint != built.fingerprint:
            return _replace_version(cluster_id, built, version)
        built.version = version
        _layouts[cluster_id] = built
        return built


def touch_layout(cluster_id: int) -> None:
    """Hardware of the cluster changed: every process rebuilds its layout on next
    use (the live state survives unless the card order changed)."""
    redis_client().incr(keys.layout_gen(cluster_id))
    _layouts.pop(int(cluster_id), None)


def _replace_version(cluster_id: int, built: Layout, old_version: str) -> Layout:
    """The hardware changed under a published layout: publish ours, drop old state."""
    built.version = secrets.token_hex(4)
    redis_client().set(keys.layout(cluster_id), f"{built.version}:{built.fingerprint}")
    forget_state(cluster_id, old_version)
    _layouts[cluster_id] = built
    return built


def invalidate_layout(cluster_id: int) -> None:
    """Forget the layout (hardware changed): every process rebuilds on next use
    and the old state keys are dropped."""
    r = redis_client()
    raw = r.getdel(keys.layout(cluster_id))
    _layouts.pop(int(cluster_id), None)
    if raw:
        forget_state(cluster_id, raw.decode().partition(":")[0])


def forget_state(cluster_id: int, version: str) -> None:
    """Delete every state key of one layout version (SCAN, not KEYS)."""
    if not version:
        return
    r = redis_client()
    batch = []
    for key in r.scan_iter(match=f"{keys.state(cluster_id, version)}:*", count=1000):
        batch.append(key)
        if len(batch) >= 500:
            r.unlink(*batch)
            batch = []
    if batch:
        r.unlink(*batch)


def forget_cluster(cluster_id: int) -> None:
    """Drop all live state of a deleted cluster."""
    invalidate_layout(cluster_id)
    r = redis_client()
    base = keys.base(cluster_id)
    r.delete(keys.seq(cluster_id), keys.layout_gen(cluster_id), f"{base}:lasttick",
             f"{base}:tickgate", f"{base}:ticklock", f"{base}:trailing")
    r.srem(keys.clusters(), int(cluster_id))


# --------------------------------------------------------------------------
# reads
# --------------------------------------------------------------------------

def _metric_index(metric: str) -> int:
    try:
        return METRIC_INDEX[metric]
    except KeyError:
        raise KeyError(f"unknown metric {metric!r}; known: {', '.join(METRIC_KEYS)}") from None


def _read_span(r: redis.Redis, key: str, ords: np.ndarray | None, itemsize: int,
               dtype: Any, n: int, fill: Any) -> np.ndarray:
    return _read_spans(r, [key], ords, itemsize, dtype, n, fill)[0]


def _read_spans(r: redis.Redis, key_list: list[str], ords: np.ndarray | None, itemsize: int,
                dtype: Any, n: int, fill: Any) -> list[np.ndarray]:
    """Read whole blobs (``ords`` None) or just the cards at ``ords`` (−1: missing).

    For a few cards we fetch the byte span that covers them (GETRANGE), so a
    rack view of 40 cards moves 160 bytes, not the whole cluster's array.
    """
    pipe = r.pipeline(transaction=False)
    if ords is None:
        for key in key_list:
            pipe.get(key)
        out = []
        for raw in pipe.execute():
            arr = np.full(n, fill, dtype=dtype)
            if raw:
                got = np.frombuffer(raw, dtype=dtype)[:n]
                arr[: len(got)] = got
            out.append(arr)
        return out
    valid = ords >= 0
    if not valid.any():
        return [np.full(len(ords), fill, dtype=dtype) for _ in key_list]
    lo, hi = int(ords[valid].min()), int(ords[valid].max())
    for key in key_list:
        pipe.getrange(key, lo * itemsize, (hi + 1) * itemsize - 1)
    out = []
    for raw in pipe.execute():
        arr = np.full(len(ords), fill, dtype=dtype)
        span = np.frombuffer(raw or b"", dtype=dtype)
        idx = ords - lo
        ok = valid & (idx < len(span))
        arr[ok] = span[idx[ok]]
        out.append(arr)
    return out


def _ords(lay: Layout, card_ids: Any) -> np.ndarray | None:
    return None if card_ids is None else lay.ordinals(card_ids)


def latest(cluster_id: int, metric: str, card_ids: Any = None) -> np.ndarray:
    """Latest float32 values of one metric (see the module docstring)."""
    return latest_many(cluster_id, [metric], card_ids)[metric]


def latest_many(cluster_id: int, metrics: list[str] | tuple[str, ...],
                card_ids: Any = None) -> dict[str, np.ndarray]:
    """Latest float32 values of several metrics in one round trip."""
    lay = layout(cluster_id)
    idx = [_metric_index(m) for m in metrics]
    arrays = _read_spans(redis_client(),
                         [keys.metric(cluster_id, lay.version, i) for i in idx],
                         _ords(lay, card_ids), 4, np.float32, lay.n, np.nan)
    return dict(zip(metrics, arrays, strict=True))


def last_seen(cluster_id: int, card_ids: Any = None) -> np.ndarray:
    """float64 Unix time of each card's last sample (NaN: never)."""
    lay = layout(cluster_id)
    return _read_span(redis_client(), keys.seen(cluster_id, lay.version),
                      _ords(lay, card_ids), 8, np.float64, lay.n, np.nan)


def health(cluster_id: int, card_ids: Any = None) -> np.ndarray:
    """uint8 health code per card (index into ``HEALTH_NAMES``)."""
    lay = layout(cluster_id)
    return _read_span(redis_client(), keys.health(cluster_id, lay.version),
                      _ords(lay, card_ids), 1, np.uint8, lay.n, HEALTH_CODES["unknown"])


def _py(value: float) -> float | None:
    return None if value != value else round(float(value), 4)


def card_state(cluster_id: int, card_id: int) -> dict[str, Any]:
    """Everything live about one card (see the module docstring)."""
    lay = layout(cluster_id)
    ords = lay.ordinals([card_id])
    if ords[0] < 0:
        raise KeyError(f"card {card_id} is not in cluster {cluster_id}")
    k = int(ords[0])
    r = redis_client()
    pipe = r.pipeline(transaction=False)
    for i in range(N_METRICS):
        pipe.getrange(keys.metric(cluster_id, lay.version, i), k * 4, k * 4 + 3)
    pipe.getrange(keys.seen(cluster_id, lay.version), k * 8, k * 8 + 7)
    pipe.getrange(keys.health(cluster_id, lay.version), k, k)
    raw = pipe.execute()
    values = {}
    for i, key in enumerate(METRIC_KEYS):
        b = raw[i]
        values[key] = _py(np.frombuffer(b, np.float32)[0]) if len(b) == 4 else None
    seen_b, health_b = raw[N_METRICS], raw[N_METRICS + 1]
    ts = float(np.frombuffer(seen_b, np.float64)[0]) if len(seen_b) == 8 else float("nan")
    code = health_b[0] if health_b else HEALTH_CODES["unknown"]
    now = time.time()
    reported = ts == ts
    return {
        "card": int(card_id), "ordinal": k,
        "ts": ts if reported else None,
        "age_s": round(now - ts, 3) if reported else None,
        "stale": bool(reported and now - ts > conf().stale_after_s),
        "health": HEALTH_NAMES[code] if code < len(HEALTH_NAMES) else "unknown",
        "metrics": values,
    }


def history(cluster_id: int, card_id: int, metric: str,
            n: int = 60) -> list[tuple[float, float | None]]:
    """The card's last ``n`` history buckets of ``metric``, oldest first."""
    i = _metric_index(metric)
    if metric not in HISTORY_METRICS:
        raise KeyError(f"no history is kept for {metric!r}; kept: {', '.join(HISTORY_METRICS)}")
    lay = layout(cluster_id)
    ords = lay.ordinals([card_id])
    if ords[0] < 0:
        raise KeyError(f"card {card_id} is not in cluster {cluster_id}")
    k = int(ords[0])
    c = conf()
    r = redis_client()
    buckets = {int(s): int(b) for s, b in
               r.hgetall(keys.history_buckets(cluster_id, lay.version)).items()}
    now_bucket = int(time.time() // c.history_step_s)
    live = sorted(((b, s) for s, b in buckets.items()
                   if now_bucket - b < c.history_len), reverse=True)[: max(int(n), 0)]
    live.reverse()
    if not live:
        return []
    pipe = r.pipeline(transaction=False)
    for _, slot in live:
        pipe.getrange(keys.history(cluster_id, lay.version, i, slot), k * 4, k * 4 + 3)
    out = []
    for (bucket, _), raw in zip(live, pipe.execute(), strict=True):
        value = _py(np.frombuffer(raw, np.float32)[0]) if len(raw) == 4 else None
        out.append((bucket * c.history_step_s, value))
    return out


def rollup(cluster_id: int, level: str, metric: str) -> dict[str, Any]:
    """Per-group aggregates of ``metric`` at ``level`` from the last tick."""
    if level not in LEVELS:
        raise KeyError(f"unknown level {level!r}; known: {', '.join(LEVELS)}")
    i = _metric_index(metric)
    lay = layout(cluster_id)
    index = lay.groups[level]
    g = len(index.ids)
    r = redis_client()
    raw_stats, raw_meta = r.mget(keys.rollup(cluster_id, lay.version, level, i),
                                 keys.rollup(cluster_id, lay.version, level, "meta"))
    if raw_stats and len(raw_stats) == 5 * g * 4:
        stats = np.frombuffer(raw_stats, np.float32).reshape(5, g).copy()
    else:
        stats = np.full((5, g), np.nan, np.float32)
        stats[4] = 0
    meta = msgpack.unpackb(raw_meta) if raw_meta else {}
    reporting = (np.frombuffer(meta["reporting"], np.int32).copy()
                 if meta.get("reporting") and len(meta["reporting"]) == 4 * g
                 else np.zeros(g, np.int32))
    out: dict[str, Any] = {
        "level": level, "metric": metric, "seq": int(meta.get("seq", 0)),
        "ts": meta.get("ts"), "ids": index.ids.copy(), "names": list(index.names),
        "cards": index.cards.copy(), "reporting": reporting,
    }
    for s, name in enumerate(STATS):
        out[name] = stats[s]
    if metric == "power_w":
        out["budget_w"] = index.budget_w.astype(np.float32)
        out["static_w"] = index.static_w.astype(np.float32)
        out["draw_w"] = np.where(stats[4] > 0, stats[3] + index.static_w, np.nan).astype(
            np.float32)
    return out


def frame_seq(cluster_id: int) -> int:
    """Number of the last tick of the cluster (0 before the first)."""
    raw = redis_client().get(keys.seq(cluster_id))
    return int(raw) if raw else 0


def summary(cluster_id: int) -> dict[str, Any]:
    """The cluster's headline numbers from the last tick."""
    power = rollup(cluster_id, "cluster", "power_w")
    util = rollup(cluster_id, "cluster", "gpu_util")
    temp = rollup(cluster_id, "cluster", "gpu_temp_c")
    codes = np.bincount(health(cluster_id), minlength=len(HEALTH_NAMES))
    return {
        "cluster": int(cluster_id), "seq": power["seq"], "ts": power["ts"],
        "cards": int(power["cards"][0]) if len(power["cards"]) else 0,
        "reporting": int(power["reporting"][0]) if len(power["reporting"]) else 0,
        "power_draw_w": _py(power["draw_w"][0]) if len(power["draw_w"]) else None,
        "power_budget_w": _py(power["budget_w"][0]) if len(power["budget_w"]) else None,
        "gpu_util_mean": _py(util["mean"][0]) if len(util["mean"]) else None,
        "gpu_util_max": _py(util["max"][0]) if len(util["max"]) else None,
        "gpu_temp_max_c": _py(temp["max"][0]) if len(temp["max"]) else None,
        "health": {name: int(codes[c]) for c, name in enumerate(HEALTH_NAMES)},
    }
