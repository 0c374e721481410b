"""The live state of every card, in Redis, columnar — and the API to read it.

This is the interface the websocket layer (``twin.live``), the REST API and
simulations read. Signatures here are stable; the write side lives in
``twin.telemetry.processing``.

Public API (functions take a cluster's database id; ``card_spans`` a layout)
=========================================================================

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
``card_spans(layout, [(metric, ordinals), …]) -> CardSpans``
    Latest values of groups of cards (one metric each) and their health, with
    the seq and time of the last tick, in one Redis round trip however many
    groups: what the live supernode and rack views read.
``was_deleted(cluster_id) -> bool``
    Whether a cluster missing from the database was deleted (its state was
    forgotten within the last 30 days) rather than never there.
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

Self-healing (``twin.jobs.healing``) sends each decision on a failed card::

    {"type": "remediation.event", "cluster": 7, "event": "proposed" | "applied" |
     "rejected" | "failed", "remediation": {"id", "card", "cause", "detail",
     "state", "episode", "proposal", "message", "detected_at", "decided_at",
     "applied_via", "applied_by"}}

Where things are
================

The Redis keys behind all of this are named in ``twin.telemetry.keys`` (and only
telemetry uses them). This package: ``constants`` (events, levels, health
codes), ``layouts`` (the card order), ``blobs`` (reading byte spans),
``columns`` (latest values, last seen, health, one card), ``history_ring``
(sparklines) and ``rollups`` (per-group aggregates, the cluster headline).
Settings and the Redis client are ``twin.telemetry.config``'s.
"""
from twin.telemetry.config import MAX_TICK_HZ, conf, redis_client
from twin.telemetry.state.columns import (
    CardSpans,
    card_spans,
    card_state,
    health,
    last_seen,
    latest,
    latest_many,
)
from twin.telemetry.state.constants import (
    ALERT_EVENT,
    HEALTH_CODES,
    HEALTH_NAMES,
    LEVELS,
    REMEDIATION_EVENT,
    STATS,
    TICK_EVENT,
    group_name,
)
from twin.telemetry.state.history_ring import history
from twin.telemetry.state.layouts import (
    GroupIndex,
    Layout,
    forget_cluster,
    invalidate_layout,
    layout,
    touch_layout,
    was_deleted,
)
from twin.telemetry.state.plant import card_caps, plant_racks, plant_summary
from twin.telemetry.state.rollups import frame_seq, rollup, summary

__all__ = [
    "ALERT_EVENT",
    "REMEDIATION_EVENT",
    "HEALTH_CODES",
    "HEALTH_NAMES",
    "LEVELS",
    "MAX_TICK_HZ",
    "STATS",
    "TICK_EVENT",
    "CardSpans",
    "GroupIndex",
    "Layout",
    "card_spans",
    "card_state",
    "conf",
    "forget_cluster",
    "frame_seq",
    "group_name",
    "health",
    "history",
    "invalidate_layout",
    "last_seen",
    "latest",
    "latest_many",
    "layout",
    "card_caps",
    "plant_racks",
    "plant_summary",
    "redis_client",
    "rollup",
    "summary",
    "touch_layout",
    "was_deleted",
]
