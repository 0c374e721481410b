"""Frames: what one websocket subscription sees, built from the live telemetry state.

A *view* is (cluster, view kind, object id, metric). Its content at a moment is
one flat array of values ordered by a stable key list:

* ``cluster``: one value per rack (the racks holding cards, in layout order):
  the rack rollup of ``twin.telemetry.state.rollup(cluster, "rack", metric)``,
  aggregated as :data:`AGGREGATE` says (power is the rack's draw — cards'
  readings plus the nameplate of servers and network devices — to set against
  its budget; temperatures, errors and latencies are the rack's worst card;
  the rest the mean over reporting cards). A million-card cluster sends ~26k
  values, never a million.
* ``supernode`` / ``rack``: one value per card (card ids, in the state's
  ordinal order), with each card's health code.

Two messages carry a view: the **snapshot** (keys + values, sent on subscribe
and again whenever the layout changes) and the **frame** (values only). Both
are complete states, numbered by the telemetry tick ``seq`` they reflect, so a
client never needs a frame it missed: the next one replaces it.

Why the process-wide :class:`FrameCache`: 50 dashboards watching the cluster
view all need the same 1,664 (or 26k) numbers after a tick, and each of them
its own supernode. Consumers register what they follow; the first one to need
tick ``seq`` refreshes every followed view of the cluster in one read (all card
views in a single Redis round trip) and encodes each frame's JSON once; the
others find theirs with ``peek`` on the event loop. All reads here are
synchronous (Redis and, on a layout rebuild, the database): the consumer runs
them through ``database_sync_to_async``.

Card views read through ``state.card_spans`` (one Redis round trip for any
number of views) rather than ``state.latest``/``state.health``, which would
cost three round trips per view. This module never names a Redis key: the
telemetry state is read only through ``twin.telemetry.state``'s functions.
"""
from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from twin.facility.readings import OBSERVED
from twin.live.protocol import SubscriptionKey, ViewChoices
from twin.telemetry import state
from twin.telemetry.metrics import METRIC_INDEX, METRIC_KEYS, METRICS

__all__ = [
    "AGGREGATE",
    "DEFAULT_METRIC",
    "DECIMALS",
    "DECIMALS_BY_UNIT",
    "PLANT_METRICS",
    "Built",
    "FrameCache",
    "UnknownObject",
    "build",
    "build_many",
    "decimals",
    "encode_values",
    "frame_cache",
    "hello_message",
    "view_metrics",
]

DEFAULT_METRIC = {ViewChoices.CLUSTER: "power_w", ViewChoices.SUPERNODE: "power_w",
                  ViewChoices.RACK: "power_w"}

_WORST = {"gpu_temp_c", "mem_temp_c", "xid_errors", "ecc_errors", "pcie_replay",
          "allreduce_latency_us", "link_latency_ns", "rdma_latency_us", "checkpoint_write_s"}
_TOTAL = {"energy_kj"}
AGGREGATE: dict[str, str] = {
    key: "draw" if key == "power_w" else "max" if key in _WORST else
    "sum" if key in _TOTAL else "mean"
    for key in METRIC_KEYS
}
"""How the cluster view folds a rack's cards into one value, per metric.
``draw`` = Σ card power + the rack's static (server overhead + devices) draw."""

PLANT_METRICS: dict[str, tuple[str, str, str]] = {
    "coolant_supply_c": ("Coolant supply", "°C", "plant"),
    "cap_share": ("Power cap / rack budget", "%", "caps"),
}
"""Cluster-view-only metrics read from the plant rather than from the cards (key →
label, unit, aggregate): each rack's coolant supply temperature at the last tick
(``state.plant_racks``, liquid racks their CDU's supply, air racks their inlet air)
and the sum of its cards' live power caps as a share of its budget
(``twin.facility.capping_live``; the frame adds ``binding``, 0/1 per rack: a limit
binds there). One value per rack, like every cluster view, never per card. A rack's
hottest card is the existing ``gpu_temp_c`` (aggregated ``max``)."""

DECIMALS_BY_UNIT = {"W": 1, "%": 1, "°C": 1, "MHz": 0, "code": 0, "count": 0, "GiB": 2,
                    "GB/s": 2, "s": 2, "kJ": 1, "ns": 1, "µs": 3}
"""Values are rounded to what their unit needs (a sensor's own resolution or
better): every digit more is JSON to encode, compress (permessage-deflate)
and parse 2× a second per client — a 26k-rack frame at 3 decimals is ~40 %
larger than at 1."""
DECIMALS = 3
"""Rounding for a unit not listed above."""


def decimals(metric: str) -> int:
    """Decimals a metric's values are sent with (see ``DECIMALS_BY_UNIT``)."""
    return DECIMALS_BY_UNIT.get(_unit(metric), DECIMALS)


class UnknownObject(LookupError):
    """The supernode or rack is not in the cluster (or holds no cards)."""


def view_metrics() -> dict[str, tuple[str, ...]]:
    """Metrics each view streams: every telemetry metric, in every view, and the
    plant's (:data:`PLANT_METRICS`) in the cluster view."""
    out = {view: METRIC_KEYS for view in ViewChoices.values()}
    out[ViewChoices.CLUSTER] = (*METRIC_KEYS, *PLANT_METRICS)
    return out


def hello_message(cluster_id: int, max_hz: float) -> dict[str, Any]:
    """First message on a connection: what can be asked for, and how to read it."""
    return {
        "type": "hello", "cluster": cluster_id, "views": ViewChoices.values(),
        "default_metric": DEFAULT_METRIC, "max_hz": max_hz,
        "health_names": list(state.HEALTH_NAMES),
        "metrics": [{"key": m.key, "label": m.label, "unit": m.unit,
                     "aggregate": AGGREGATE[m.key]} for m in METRICS],
        "plant_metrics": [{"key": k, "label": label, "unit": unit, "aggregate": how,
                           "views": [ViewChoices.CLUSTER]}
                          for k, (label, unit, how) in PLANT_METRICS.items()],
    }


def encode_values(values: np.ndarray, places: int = DECIMALS) -> list[float | int | None]:
    """float array → JSON-ready list, rounded to ``places``; NaN (no reading) →
    ``null``. Whole numbers go out as integers (``655`` rather than ``655.0``)."""
    rounded = np.round(np.asarray(values, dtype=np.float64), places)
    return [None if math.isnan(v) else int(v) if v.is_integer() else v
            for v in rounded.tolist()]


@dataclass
class Built:
    """One view at one tick: the encoded frame, and the snapshot made on demand.

    Read ``frame_text`` and ``snapshot_text`` off the event loop the first time
    (``FrameCache.get`` does it for the frame): encoding 26k values takes
    milliseconds."""

    key: SubscriptionKey
    seq: int
    ts: float | None
    layout: str
    head: dict[str, Any]
    """Fields of the frame (type, view, id, metric, seq, ts, layout, values, health)."""
    extra: dict[str, Any]
    """Fields only the snapshot carries (keys, names, unit, aggregate, budget_w)."""
    _frame: str | None = field(default=None, repr=False)
    _snapshot: str | None = field(default=None, repr=False)

    @property
    def frame_text(self) -> str:
        if self._frame is None:
            self._frame = json.dumps({"type": "frame", **self.head}, separators=(",", ":"))
        return self._frame

    @property
    def snapshot_text(self) -> str:
        if self._snapshot is None:
            self._snapshot = json.dumps({"type": "snapshot", **self.head, **self.extra},
                                        separators=(",", ":"))
        return self._snapshot


def _head(key: SubscriptionKey, seq: int, ts: float | None, layout: str) -> dict[str, Any]:
    return {"view": key.view, "id": key.id, "metric": key.metric, "seq": seq,
            "ts": None if ts is None else round(ts, 3), "layout": layout}


def _build_cluster(cluster_id: int, key: SubscriptionKey, lay: state.Layout) -> Built:
    if key.metric in PLANT_METRICS:
        return _build_plant(cluster_id, key, lay)
    roll = state.rollup(cluster_id, "rack", key.metric)
    how = AGGREGATE[key.metric]
    values = roll["draw_w"] if how == "draw" else roll[how]
    # No card of the rack reported: null, not a 0 that reads as "idle".
    values = np.where(np.asarray(roll["count"]) > 0, values, np.nan)
    head = _head(key, int(roll["seq"]), roll["ts"], lay.version)
    head["values"] = encode_values(values, decimals(key.metric))
    extra: dict[str, Any] = {
        "keys": [int(i) for i in roll["ids"]], "names": list(roll["names"]),
        "unit": _unit(key.metric),
        "aggregate": how,
    }
    if key.metric == "power_w":
        extra["budget_w"] = encode_values(roll["budget_w"], 0)
    summary = state.plant_summary(cluster_id)
    plant = _facility_section(cluster_id, lay, summary)
    if plant is not None:
        extra["facility"] = plant
        head["facility"] = _facility_frame(summary)  # type: ignore[arg-type]
    caps = _caps_section(cluster_id, lay)
    if caps is not None:
        extra["caps"] = caps
    return Built(key, int(roll["seq"]), head["ts"], lay.version, head, extra)


def _build_plant(cluster_id: int, key: SubscriptionKey, lay: state.Layout) -> Built:
    """A cluster view of a plant metric: per rack (the layout's rack order, as every
    cluster view) its coolant supply or its caps' share of its budget; null where the
    plant has no value (no facility, no tick yet, capping off)."""
    roll = state.rollup(cluster_id, "rack", "power_w")   # the tick's seq, ts and racks
    n = len(roll["ids"])
    values = np.full(n, np.nan)
    binding: list[int] | None = None
    if key.metric == "coolant_supply_c":
        racks = state.plant_racks(cluster_id, lay.version)
        if racks is not None and len(racks["supply_c"]) == n:
            values = racks["supply_c"].astype(np.float64)
    else:
        caps = _caps_section(cluster_id, lay)
        if caps is not None:
            budget = np.asarray(roll["budget_w"], dtype=np.float64)
            with np.errstate(divide="ignore", invalid="ignore"):
                values = np.where(budget > 0, np.asarray(caps["rack_caps_w"]) / budget * 100,
                                  np.nan)
            binding = caps["rack_binding"]
    head = _head(key, int(roll["seq"]), roll["ts"], lay.version)
    head["values"] = encode_values(values, decimals(key.metric))
    if binding is not None:
        head["binding"] = binding
    extra: dict[str, Any] = {
        "keys": [int(i) for i in roll["ids"]], "names": list(roll["names"]),
        "unit": _unit(key.metric), "aggregate": PLANT_METRICS[key.metric][2],
        "budget_w": encode_values(roll["budget_w"], 0),
    }
    return Built(key, int(roll["seq"]), head["ts"], lay.version, head, extra)


CDU_LOOP_COLUMNS = (("supply_c", 2), ("return_c", 2), ("flow_kg_s", 3), ("heat_w", 0),
                    ("load_fraction", 4))
"""The CDU loops' figures every cluster frame carries (name, decimals)."""


def _facility_frame(summary: dict[str, Any]) -> dict[str, Any]:
    """What of the plant changes each tick, for every cluster **frame** (the snapshot's
    ``facility`` has the rest): PUE and power, and each CDU loop's figures as columns
    in the snapshot's ``facility.cdus`` order (``cdu_loops``: one list per figure, a
    million-card plant's 4,177 CDUs as numbers, not objects), with the CDUs whose
    figures are measured now (``cdu_measured``: key → quantities) and their leak
    detectors' count (``cdu_leaks``: key → detectors reporting, CDUs read only)."""
    cdus = summary.get("cdus") or []
    out: dict[str, Any] = {k: summary.get(k) for k in ("ts", "pue", "it_w", "facility_w")}
    out["cdu_loops"] = {name: encode_values(np.array(
        [np.nan if c.get(name) is None else float(c[name]) for c in cdus], dtype=np.float64),
        places) for name, places in CDU_LOOP_COLUMNS}
    out["cdu_measured"] = {str(c["key"]): list(c["measured"]) for c in cdus
                           if c.get("measured")}
    out["cdu_leaks"] = {str(c["key"]): c["leaks"] for c in cdus if c.get("leaks") is not None}
    return out


def _facility_section(cluster_id: int, lay: state.Layout,
                      summary: dict[str, Any] | None) -> dict[str, Any] | None:
    """The plant at the last tick (``summary``), compact: PUE, power, per CDU its load
    and temperatures, per feed its headroom, every rated element's headroom, the
    weather, what is out of service, per rack (the frame's rack order) coolant
    supply and card temperature. None for a cluster without a facility."""
    if summary is None:
        return None
    racks = state.plant_racks(cluster_id, lay.version)
    out = {k: summary.get(k) for k in ("ts", "pue", "it_w", "facility_w", "losses_w",
                                       "pumps_w", "fans_w", "chillers_w", "max_card_c",
                                       "contract_headroom_w")}
    # "measured": the quantities a fresh reading gives (they win over the model, whose
    # own figures are under "model"; twin.facility.readings); "observed": readings the
    # model has no figure of (leak detectors, the chassis' temperatures and fans)
    out["cdus"] = [{k: c.get(k) for k in ("key", "load_fraction", "supply_c", "return_c",
                                          "flow_kg_s", "heat_w", "capacity_w", "measured",
                                          "model")}
                   | {k: c[k] for k in ("observed", *OBSERVED["cooling"]) if k in c}
                   for c in summary.get("cdus", [])]
    out["feeds"] = [{k: f.get(k) for k in ("key", "input_w", "headroom_w", "load_fraction",
                                           "measured", "model")}
                    for f in summary.get("feeds", [])]
    out["pdus"] = [{k: p.get(k) for k in ("key", "input_w", "load_fraction", "measured",
                                          "model")} for p in summary.get("pdus", [])]
    # every rated element (power and cooling) against its rating; the weather the plant
    # ran under and what is out of service (twin.facility.live)
    # (columns: one list per field, an entry per element, as the summary keeps them)
    rated = summary.get("rated") or {}
    out["rated"] = {k: rated.get(k, []) for k in ("key", "kind", "chain", "load_w",
                                                   "headroom_w", "load_fraction")}
    out["ambient"] = summary.get("ambient")
    out["out_of_service"] = summary.get("out_of_service", [])
    if racks is not None:
        out["rack_supply_c"] = encode_values(racks["supply_c"], 1)
        out["rack_card_c"] = encode_values(racks["card_c"], 1)
    return out


def _caps_section(cluster_id: int, lay: state.Layout) -> dict[str, Any] | None:
    """Live power capping at the last tick, compact (``twin.facility.capping_live``):
    the cluster's mode and binding summary, per rack its caps' sum and whether a limit
    binds there. None when capping is off."""
    from twin.facility.capping_live import frame_section
    from twin.telemetry.config import conf

    racks = lay.groups.get("rack")
    if racks is None:
        return None
    return frame_section(state.redis_client(), conf().prefix, cluster_id, lay.version,
                         len(racks.names))


def _unit(metric: str) -> str:
    if metric in PLANT_METRICS:
        return PLANT_METRICS[metric][1]
    return METRICS[METRIC_INDEX[metric]].unit


def _card_view(key: SubscriptionKey, lay: state.Layout, ordinals: np.ndarray, seq: int,
               ts: float | None, values: np.ndarray, codes: np.ndarray) -> Built:
    head = _head(key, seq, ts, lay.version)
    head["values"] = encode_values(values, decimals(key.metric))
    head["health"] = codes.tolist()
    extra = {"keys": lay.card_ids[ordinals].tolist(), "unit": _unit(key.metric),
             "aggregate": "card"}
    return Built(key, seq, head["ts"], lay.version, head, extra)


def _read_card_views(lay: state.Layout, views: list[tuple[SubscriptionKey, np.ndarray]]
                     ) -> dict[SubscriptionKey, Built]:
    """Supernode and rack views in **one** Redis round trip, however many
    (``state.card_spans``: the last tick's seq and time, then each view's
    values and health codes)."""
    spans = state.card_spans(lay, [(key.metric, ordinals) for key, ordinals in views])
    return {key: _card_view(key, lay, ordinals, spans.seq, spans.ts, spans.values[j],
                            spans.health[j])
            for j, (key, ordinals) in enumerate(views)}


_members_cache: OrderedDict[tuple[int, str, str, int], np.ndarray | None] = OrderedDict()
_members_lock = threading.Lock()


def _members(lay: state.Layout, level: str, group_id: int) -> np.ndarray | None:
    """Sorted card ordinals of a supernode or rack (None: not in the cluster), cached
    per layout version: finding them scans every card, 1M at full scale."""
    cache_key = (lay.cluster_id, lay.version, level, group_id)
    with _members_lock:
        if cache_key in _members_cache:
            _members_cache.move_to_end(cache_key)
            return _members_cache[cache_key]
    try:
        found: np.ndarray | None = np.sort(lay.members(level, group_id))
    except KeyError:
        found = None
    if found is not None and not len(found):
        found = None
    with _members_lock:
        _members_cache[cache_key] = found
        while len(_members_cache) > 4096:
            _members_cache.popitem(last=False)
    return found


def build_many(cluster_id: int,
               keys: list[SubscriptionKey]) -> dict[SubscriptionKey, Built | Exception]:
    """Read views of one cluster from the live state now: each cluster view from
    its rack rollup, all card views together in one round trip. A view that
    cannot be built maps to its exception (``UnknownObject`` for a supernode or
    rack that is not there) instead of failing the others."""
    try:
        lay = state.layout(cluster_id)
    except KeyError:
        gone = UnknownObject(f"cluster {cluster_id} does not exist")
        return dict.fromkeys(keys, gone)
    out: dict[SubscriptionKey, Built | Exception] = {}
    cards: list[tuple[SubscriptionKey, np.ndarray]] = []
    for key in keys:
        if key.view == ViewChoices.CLUSTER:
            try:
                out[key] = _build_cluster(cluster_id, key, lay)
            except Exception as exc:  # noqa: BLE001 - reported per view
                out[key] = exc
            continue
        ordinals = _members(lay, key.view, int(key.id or 0))
        if ordinals is None:
            out[key] = UnknownObject(
                f"{key.view} {key.id} is not in cluster {cluster_id} or holds no cards")
        else:
            cards.append((key, ordinals))
    if cards:
        try:
            out.update(_read_card_views(lay, cards))
        except Exception as exc:  # noqa: BLE001 - Redis trouble: every card view fails
            out.update(dict.fromkeys((key for key, _ in cards), exc))
    for built in out.values():
        if isinstance(built, Built):
            built.frame_text  # noqa: B018 - encode here, off the event loop
    return out


def build(cluster_id: int, key: SubscriptionKey) -> Built:
    """Read one view now; raises what ``build_many`` would map it to."""
    built = build_many(cluster_id, [key])[key]
    if isinstance(built, Exception):
        raise built
    return built


class FrameCache:
    """The newest :class:`Built` per (cluster, view), shared by a process's consumers.

    Consumers register the views they follow (``want``/``unwant``). When one of
    them needs a view for tick ``seq`` that is not cached yet, ``get_many``
    refreshes **every** followed view of that cluster that is older than
    ``seq`` in the same read, so the next consumers find theirs with ``peek``,
    on the event loop, without a thread hop or a Redis round trip: per process
    and tick, one read however many dashboards are open.
    """

    def __init__(self, max_entries: int = 4096) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[int, SubscriptionKey], Built] = OrderedDict()
        self._wanted: dict[int, dict[SubscriptionKey, int]] = {}
        self._lock = threading.Lock()
        self._cluster_locks: dict[int, threading.Lock] = {}
        self.builds = 0
        """Views read from Redis (for tests and benchmarks)."""
        self.reads = 0
        """``build_many`` calls: each is one round trip for all card views."""
        self.hits = 0

    # -- following -----------------------------------------------------------
    def want(self, cluster_id: int, key: SubscriptionKey) -> None:
        with self._lock:
            followed = self._wanted.setdefault(cluster_id, {})
            followed[key] = followed.get(key, 0) + 1

    def unwant(self, cluster_id: int, key: SubscriptionKey) -> None:
        with self._lock:
            followed = self._wanted.get(cluster_id, {})
            left = followed.get(key, 0) - 1
            if left > 0:
                followed[key] = left
            else:
                followed.pop(key, None)
                if not followed:
                    self._wanted.pop(cluster_id, None)

    def followed(self, cluster_id: int) -> dict[SubscriptionKey, int]:
        with self._lock:
            return dict(self._wanted.get(cluster_id, {}))

    # -- reading -----------------------------------------------------------------
    @staticmethod
    def _fresh(built: Built | None, min_seq: int, layout: str | None) -> bool:
        return (built is not None and min_seq >= 0 and built.seq >= min_seq
                and (layout is None or built.layout == layout))

    def peek(self, cluster_id: int, key: SubscriptionKey, min_seq: int,
             layout: str | None = None) -> Built | None:
        """The cached view if it covers tick ``min_seq``, without reading anything:
        safe on the event loop (the lock is only ever held for dict operations)."""
        with self._lock:
            built = self._entries.get((cluster_id, key))
            if self._fresh(built, min_seq, layout):
                self._entries.move_to_end((cluster_id, key))
                self.hits += 1
                return built
        return None

    def get_many(self, cluster_id: int, keys: list[SubscriptionKey], min_seq: int,
                 layout: str | None = None) -> dict[SubscriptionKey, Built | Exception]:
        """The views at tick ``min_seq`` or later (``-1``: read them fresh, as a
        snapshot does). Blocking: call it from a worker thread."""
        with self._lock:
            cluster_lock = self._cluster_locks.setdefault(cluster_id, threading.Lock())
        with cluster_lock:
            out: dict[SubscriptionKey, Built | Exception] = {}
            with self._lock:
                for key in keys:
                    built = self._entries.get((cluster_id, key))
                    if self._fresh(built, min_seq, layout):
                        out[key] = built  # type: ignore[assignment]
                        self.hits += 1
                stale = [key for key in keys if key not in out]
                if stale and min_seq >= 0:
                    # Refresh the other followed views of this cluster in the same read.
                    stale += [key for key in self._wanted.get(cluster_id, {})
                              if key not in out and key not in stale
                              and not self._fresh(self._entries.get((cluster_id, key)),
                                                  min_seq, layout)]
            if not stale:
                return out
            fresh = build_many(cluster_id, stale)
            with self._lock:
                self.reads += 1
                for key, built in fresh.items():
                    if isinstance(built, Exception):
                        continue
                    self.builds += 1
                    entry_key = (cluster_id, key)
                    old = self._entries.get(entry_key)
                    # Never replace a newer view with an older read.
                    if old is None or old.layout != built.layout or built.seq >= old.seq:
                        self._entries[entry_key] = built
                    self._entries.move_to_end(entry_key)
                while len(self._entries) > self.max_entries:
                    self._entries.popitem(last=False)
            out.update({key: fresh[key] for key in keys if key not in out})
            return out

    def get(self, cluster_id: int, key: SubscriptionKey, min_seq: int = -1,
            layout: str | None = None) -> Built:
        """One view (see ``get_many``); raises ``UnknownObject`` and read errors."""
        built = self.get_many(cluster_id, [key], min_seq, layout)[key]
        if isinstance(built, Exception):
            raise built
        return built

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._wanted.clear()
            self._cluster_locks.clear()
        with _members_lock:
            _members_cache.clear()


frame_cache = FrameCache()
"""The process's cache (each ASGI worker process has its own)."""
