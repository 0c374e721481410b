"""The write side of the live state: what Celery workers do with the stream.

``drain(slot)`` (``stream``) consumes the ingest stream and ``apply_entry``
(``apply``) writes each batch into the columnar state; ``tick(cluster)``
(``ticks``) computes rollups, runs the health rules (``health``), hands new
card failures to self-healing (``failures`` → ``twin.jobs.healing``), samples
the 1-minute history (``minutes``) and publishes ``telemetry.tick``;
``tick_idle`` (``beat``) is the beat's safety net. What they queue as
follow-ups (a fresh drain, a trailing tick, a minute's database write) is
passed in as ``FollowUps`` (``follow_ups``): this package never imports
``twin.telemetry.tasks``, which are thin Celery shims around it.

The Redis keys are named in ``twin.telemetry.keys``; the read side is
``twin.telemetry.state``.
"""
from twin.telemetry.processing.apply import MAX_RUNS, apply_entry, ensure_state
from twin.telemetry.processing.beat import tick_idle
from twin.telemetry.processing.follow_ups import NO_FOLLOW_UPS, FollowUps
from twin.telemetry.processing.minutes import persist_minute
from twin.telemetry.processing.stream import (
    GROUP,
    drain,
    ensure_group,
    kick_idle_stream,
    schedule_trailing_tick,
)
from twin.telemetry.processing.ticks import retry_wait_s, tick

__all__ = [
    "GROUP",
    "MAX_RUNS",
    "NO_FOLLOW_UPS",
    "FollowUps",
    "apply_entry",
    "drain",
    "ensure_group",
    "ensure_state",
    "kick_idle_stream",
    "persist_minute",
    "retry_wait_s",
    "schedule_trailing_tick",
    "tick",
    "tick_idle",
]
