"""Every Redis key of telemetry, named in one place.

Only ``twin.telemetry`` reads and writes these keys; other apps (``twin.live``,
the API) go through the functions of ``twin.telemetry.state``. All keys start
with ``TELEMETRY_REDIS_PREFIX`` (default ``tw``), so one Redis can hold several
installations (and test sessions) side by side.

Live state, per cluster ``c`` and layout version ``v`` — never one key per sample:

* ``tw:c<c>:layout`` → ``<v>:<fingerprint>`` (the layout version; replaced when
  the card order changes, so every process rebuilds the layout and starts
  fresh keys) and ``tw:c<c>:layout_gen``, a counter hardware changes bump;
  ``tw:c<c>:layout_probe`` is held while one process's probe of the cards is due
  (``state.layouts``: one probe per interval in the whole deployment);
* ``tw:c<c>:<v>:m:<i>`` → float32[n_cards], the latest value of metric ``i``
  (NaN = none), written with SETRANGE per contiguous run of cards;
* ``tw:c<c>:<v>:seen`` → float64[n_cards] last-sample time;
* ``tw:c<c>:<v>:health`` → uint8[n_cards];
* ``tw:c<c>:<v>:h:<i>:<slot>`` → float32[n_cards], history ring slot, and
  ``tw:c<c>:<v>:hb`` (hash slot → bucket number) saying which bucket a slot holds;
* ``tw:c<c>:<v>:r:<level>:<i>`` → float32[5, groups] (mean, min, max, sum,
  count) and ``tw:c<c>:<v>:r:<level>:meta`` (msgpack: seq, ts, reporting);
* ``tw:c<c>:seq`` → tick counter (survives layout changes, so frame sequence
  numbers never go backwards);
* ``tw:clusters`` → set of cluster ids that have live state (the beat walks it);
* ``tw:c<c>:deleted`` → set when the cluster is deleted (for a month), so its
  agents are told 410 Gone rather than 404.

What the tick keeps between runs:

* ``tw:c<c>:tickgate`` (at most ``MAX_TICK_HZ`` ticks a second),
  ``tw:c<c>:ticklock`` (one tick at a time), ``tw:c<c>:lasttick`` (Unix time of
  the last tick), ``tw:c<c>:tickstats`` (tick durations: count, sum, last, and the
ticking thread's CPU seconds: cpu_sum, cpu_last; a sharded round's is its critical
  path, ``processing.shards.round_cpu``) and
  ``tw:c<c>:trailing`` (a trailing tick is queued);
* ``tw:c<c>:round`` and ``tw:c<c>:round:<id>:{pending,part:<k>}``: the sharded
  tick round in progress (``processing.shards``), and per shard
  ``tw:c<c>:<v>:alerts:<shards>:<k>`` / ``:failing:<shards>:<k>``;
* ``tw:c<c>:<v>:alerts`` (the rules' damping state), ``:ewma`` / ``:ewma_ts``
  (utilisation average for the sudden-drop rule), ``:health_db`` (the health
  the ``CardHealth`` table reflects);
* ``tw:c<c>:<v>:acc:{sum,max,cnt,minute,last}`` accumulate the current minute,
  ``tw:c<c>:<v>:acc:<minute>:{sum,max,cnt}`` hold a finished one until it is
  written to the database.

Ingestion: ``tw:ingest`` (the stream), ``tw:ingest:bytes`` (bytes queued),
``tw:ingest:errors`` (entries that could not be applied), ``tw:trace`` (per-stage
timings, ``twin.telemetry.trace``, with ``TWIN_TELEMETRY_TRACE`` on), ``tw:drain:<slot>``
(a drain slot held) and ``tw:agent:<id>:seq`` (an agent's last sequence number).

Long-term history (``twin.telemetry.victoria``): ``tw:c<c>:vmgate`` (one write
to VictoriaMetrics every ``TWIN_VICTORIA_STEP_S``) and ``tw:c<c>:vmstats``
(writes, samples, failures, last error and write time).

Alerts out: ``tw:notify:lock:<receiver>`` (one run sends to a receiver at a
time) and ``tw:notify:queued`` (a delivery run was just queued).
"""
from __future__ import annotations

from twin.telemetry.config import conf

__all__ = [
    "MINUTE_PARTS",
    "agent_seq",
    "alerts",
    "base",
    "clusters",
    "deleted",
    "drain_kick",
    "ingest_refused",
    "ewma",
    "ewma_ts",
    "failing",
    "health",
    "health_db",
    "history",
    "history_buckets",
    "ingest_errors",
    "notify_lock",
    "notify_queued",
    "last_tick",
    "layout",
    "layout_gen",
    "layout_probe",
    "metric",
    "minute_acc",
    "rollup",
    "seen",
    "seq",
    "shard_alerts",
    "shard_failing",
    "state",
    "state_pattern",
    "stream",
    "stream_bytes",
    "tick_gate",
    "tick_lock",
    "tick_part",
    "tick_pending",
    "tick_round",
    "tick_stats",
    "trace",
    "victoria_gate",
    "victoria_stats",
    "trailing",
]

MINUTE_PARTS = ("sum", "max", "cnt")
"""The accumulators of a minute (``minute_acc``) that a finished minute keeps."""


# -- per cluster -----------------------------------------------------------

def base(cluster_id: int) -> str:
    return f"{conf().prefix}:c{int(cluster_id)}"


def layout(cluster_id: int) -> str:
    return f"{base(cluster_id)}:layout"


def layout_gen(cluster_id: int) -> str:
    return f"{base(cluster_id)}:layout_gen"


def layout_probe(cluster_id: int) -> str:
    return f"{base(cluster_id)}:layout_probe"


def deleted(cluster_id: int) -> str:
    return f"{base(cluster_id)}:deleted"


def seq(cluster_id: int) -> str:
    return f"{base(cluster_id)}:seq"


def tick_gate(cluster_id: int) -> str:
    return f"{base(cluster_id)}:tickgate"


def victoria_gate(cluster_id: int) -> str:
    """Set (with a TTL of ``TWIN_VICTORIA_STEP_S``) when the cluster's samples were
    last sent to VictoriaMetrics, so all workers write once a step."""
    return f"{base(cluster_id)}:vmgate"


def victoria_stats(cluster_id: int) -> str:
    """Hash of the VictoriaMetrics writes of the cluster: ``writes``, ``samples``,
    ``failures``, ``last_error``, ``last_s`` (seconds the last write took)."""
    return f"{base(cluster_id)}:vmstats"


def tick_lock(cluster_id: int) -> str:
    return f"{base(cluster_id)}:ticklock"


def last_tick(cluster_id: int) -> str:
    return f"{base(cluster_id)}:lasttick"


def tick_stats(cluster_id: int) -> str:
    """Hash of the cluster's tick durations (``count``, ``sum`` seconds, ``last``),
    written by every worker's tick and read by the twin's own ``/metrics``."""
    return f"{base(cluster_id)}:tickstats"


def trailing(cluster_id: int) -> str:
    return f"{base(cluster_id)}:trailing"


def tick_round(cluster_id: int) -> str:
    """Hash of the sharded tick round in progress (``processing.shards``): its id,
    start, ``now``, layout version, shard count and what the round start decided."""
    return f"{base(cluster_id)}:round"


def tick_pending(cluster_id: int, round_id: str) -> str:
    """Shards of round ``round_id`` still to finish (the one that takes it to 0 merges)."""
    return f"{base(cluster_id)}:round:{round_id}:pending"


def tick_part(cluster_id: int, round_id: str, shard: int) -> str:
    """msgpack: what shard ``shard`` of round ``round_id`` hands the merge."""
    return f"{base(cluster_id)}:round:{round_id}:part:{shard}"


def clusters() -> str:
    """Set of cluster ids that have live state (the beat tick walks it)."""
    return f"{conf().prefix}:clusters"


# -- per cluster and layout version ------------------------------------------

def state(cluster_id: int, version: str) -> str:
    return f"{base(cluster_id)}:{version}"


def state_pattern(cluster_id: int, version: str) -> str:
    """SCAN pattern of every key of one layout version."""
    return f"{state(cluster_id, version)}:*"


def metric(cluster_id: int, version: str, index: int) -> str:
    return f"{state(cluster_id, version)}:m:{index}"


def seen(cluster_id: int, version: str) -> str:
    return f"{state(cluster_id, version)}:seen"


def health(cluster_id: int, version: str) -> str:
    return f"{state(cluster_id, version)}:health"


def history(cluster_id: int, version: str, index: int, slot: int) -> str:
    return f"{state(cluster_id, version)}:h:{index}:{slot}"


def history_buckets(cluster_id: int, version: str) -> str:
    return f"{state(cluster_id, version)}:hb"


def rollup(cluster_id: int, version: str, level: str, index: int | str) -> str:
    return f"{state(cluster_id, version)}:r:{level}:{index}"


def alerts(cluster_id: int, version: str) -> str:
    return f"{state(cluster_id, version)}:alerts"


def shard_alerts(cluster_id: int, version: str, shard: int | str, shards: int) -> str:
    """Damping state of one tick shard's card and rack rules (``shard`` of ``shards``;
    ``"c"``: the cluster rules), kept apart from ``alerts`` (the unsharded tick's)."""
    return f"{state(cluster_id, version)}:alerts:{shards}:{shard}"


def shard_failing(cluster_id: int, version: str, shard: int, shards: int) -> str:
    """``failing`` of one tick shard's cards."""
    return f"{state(cluster_id, version)}:failing:{shards}:{shard}"


def failing(cluster_id: int, version: str) -> str:
    """Packed bits: the cards whose failure the last tick already handed to self-healing."""
    return f"{state(cluster_id, version)}:failing"


def ewma(cluster_id: int, version: str) -> str:
    return f"{state(cluster_id, version)}:ewma"


def ewma_ts(cluster_id: int, version: str) -> str:
    return f"{state(cluster_id, version)}:ewma_ts"


def health_db(cluster_id: int, version: str) -> str:
    return f"{state(cluster_id, version)}:health_db"


def minute_acc(cluster_id: int, version: str, part: str, minute: int | None = None) -> str:
    """An accumulator of the current minute (``part``: sum, max, cnt, minute,
    last), or with ``minute`` one of a finished minute's (sum, max, cnt)."""
    acc = f"{state(cluster_id, version)}:acc"
    return f"{acc}:{part}" if minute is None else f"{acc}:{int(minute)}:{part}"


# -- ingestion -------------------------------------------------------------

def stream() -> str:
    return f"{conf().prefix}:ingest"


def stream_bytes() -> str:
    return f"{conf().prefix}:ingest:bytes"


def ingest_refused() -> str:
    """Since when (Redis server time, ms) the ingest path has been refusing batches
    as "busy"; gone once it has accepted for a while (``enqueue``)."""
    return f"{conf().prefix}:ingest:refused"


def ingest_errors() -> str:
    return f"{conf().prefix}:ingest:errors"


def trace() -> str:
    """List of the newest per-stage timing records (``twin.telemetry.trace``, kept only
    with ``TWIN_TELEMETRY_TRACE`` on)."""
    return f"{conf().prefix}:trace"


def drain_kick(slot: int) -> str:
    return f"{conf().prefix}:drain:{slot}"


def notify_lock(receiver: str) -> str:
    """Held while one run sends alerts to ``receiver`` (``twin.telemetry.notify``)."""
    return f"{conf().prefix}:notify:lock:{receiver}"


def notify_queued() -> str:
    """Set for a second when a delivery run is queued (a burst queues one)."""
    return f"{conf().prefix}:notify:queued"


def agent_seq(agent_id: int) -> str:
    return f"{conf().prefix}:agent:{int(agent_id)}:seq"
