"""The layout: the dense card order of a cluster that every state array follows.

Built from the database, cached per process and shared between processes
through a version in Redis (see ``layout``); hardware changes bump a
generation counter (``touch_layout``) or drop the layout and its state
(``invalidate_layout``, ``forget_cluster``).
"""
from __future__ import annotations

import hashlib
import logging
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from twin.telemetry import keys
from twin.telemetry.config import redis_client

__all__ = [
    "DELETED_KEPT_S",
    "LAYOUT_PROBE_S",
    "PROBE_SCALE_CARDS",
    "GroupIndex",
    "Layout",
    "forget_cluster",
    "forget_state",
    "invalidate_layout",
    "layout",
    "probe_interval",
    "touch_layout",
    "was_deleted",
]

log = logging.getLogger(__name__)


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
    """The dense card order of one cluster (see ``twin.telemetry.state``)."""

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
PROBE_SCALE_CARDS = 65_536
"""Past this many cards the probe interval grows with the cluster (see :func:`probe_interval`)."""
_probing: dict[int, threading.Thread] = {}


def probe_interval(n_cards: int) -> float:
    """Seconds between probes of a cluster's cards: ``LAYOUT_PROBE_S`` up to
    ``PROBE_SCALE_CARDS`` cards, in proportion past it (8 minutes at a million).

    The probe reads every card (385 ms of one PostgreSQL backend at a million
    cards); taken every 30 s it was a burst of CPU twice a minute beside the tick
    rounds. It only catches changes that bypassed ``touch_layout``."""
    return LAYOUT_PROBE_S * max(1.0, n_cards / PROBE_SCALE_CARDS)


def _probe(cluster_id: int) -> tuple[int, int]:
    """A fingerprint of the cluster's cards: (count, max id). A join over every card
    (hence :func:`_probe_in_background`); on PostgreSQL without parallel workers,
    which would take every core of a small machine at once for its 0.1–0.3 s."""
    from django.db import connection, transaction
    from django.db.models import Count, Max

    from twin.hardware.models import Card

    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL max_parallel_workers_per_gather = 0")
        agg = Card.objects.filter(supernode__cluster_id=cluster_id).aggregate(
            n=Count("id"), m=Max("id"))
    return int(agg["n"] or 0), int(agg["m"] or 0)


def _build_layout(cluster_id: int) -> Layout:
    """Read the cluster's cards from the database into a fresh layout (no version)."""
    from twin.hardware.models import Card, Cluster, Rack, Server, SuperNode

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

    # The rack's draw besides its cards (servers' overhead + devices), as hardware defines it.
    static_by_rack = {rid: float(w) for rid, w in Rack.objects.filter(cluster_id=cluster_id)
                      .draw_by_rack(static_only=True).watts().items()}
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
    process rebuilds when the generation moved, or when a probe of the cards
    (:func:`probe_interval`, in the background, one process at a time) found them
    changed; if its build has the published fingerprint
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
        every = probe_interval(cached.n)
        if now - cached.built_at >= every:
            cached.built_at = now
            # One process of the deployment probes an interval; the others keep going.
            if r.set(keys.layout_probe(cluster_id), 1, nx=True, px=max(1, int(every * 1000))):
                _probe_in_background(cluster_id, cached.probe)
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


def _probe_in_background(cluster_id: int, known: tuple[int, int]) -> None:
    """Probe the cards in a thread of this process (one per cluster at a time) and,
    should they differ from ``known``, bump the generation so that every process
    rebuilds at its next call. The caller keeps its cached layout meanwhile.

    Run in the caller, the probe stalled whatever called ``layout`` first once the
    interval was up — at a million cards, in each process every 30 s, a tick shard
    by 0.2–0.3 s (the slowest rounds of ``benchmarks/live_million``) or an ingest
    request. The generation bumps of ``touch_layout`` remain the prompt path;
    the probe only catches changes that bypassed them (bulk SQL)."""
    with _layout_lock:
        running = _probing.get(cluster_id)
        if running is not None and running.is_alive():
            return

        def run() -> None:
            from django.db import connections

            try:
                if _probe(cluster_id) != known:
                    touch_layout(cluster_id)
            except Exception:  # noqa: BLE001 - the next interval probes again
                log.warning("layout probe of cluster %s failed", cluster_id, exc_info=True)
            finally:
                connections.close_all()  # this thread's own connection

        thread = threading.Thread(target=run, name=f"layout-probe-{cluster_id}", daemon=True)
        _probing[cluster_id] = thread
        thread.start()


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
    for key in r.scan_iter(match=keys.state_pattern(cluster_id, version), count=1000):
        batch.append(key)
        if len(batch) >= 500:
            r.unlink(*batch)
            batch = []
    if batch:
        r.unlink(*batch)


#: How long a deleted cluster's agents are told "410 Gone" (then "404 no cluster").
DELETED_KEPT_S = 30 * 24 * 3600


def forget_cluster(cluster_id: int) -> None:
    """Drop all live state of a deleted cluster, and remember that it was deleted."""
    invalidate_layout(cluster_id)
    r = redis_client()
    r.delete(keys.seq(cluster_id), keys.layout_gen(cluster_id), keys.last_tick(cluster_id),
             keys.tick_gate(cluster_id), keys.tick_lock(cluster_id), keys.trailing(cluster_id),
             keys.tick_round(cluster_id),
             keys.tick_stats(cluster_id))
    r.srem(keys.clusters(), int(cluster_id))
    r.set(keys.deleted(cluster_id), 1, ex=DELETED_KEPT_S)


def was_deleted(cluster_id: int) -> bool:
    """Whether a cluster that is not in the database was deleted (within
    ``DELETED_KEPT_S``), rather than never there. Only meaningful once the database
    said it is missing: ids of a rolled-back test or a restored backup come back."""
    return bool(redis_client().exists(keys.deleted(cluster_id)))
