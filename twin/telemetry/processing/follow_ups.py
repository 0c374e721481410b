"""What the write side may queue, passed in by its caller.

Draining, ticking and the minute history each start follow-up work: a fresh
drain when one runs out of time, a trailing tick after the last batch, the
database write of a finished minute, the VictoriaMetrics write of a step, the
delivery of alerts a tick opened or closed. Which queue that goes to (Celery, in
``twin.telemetry.tasks``) is the caller's business, so this package never
imports the tasks: the tasks pass ``FollowUps`` that queue Celery tasks;
everyone else (tests, benchmarks, a shell) gets ``NO_FOLLOW_UPS``, which
queues nothing, as the tasks' ``dispatch`` does when ``TELEMETRY_AUTO_DRAIN``
is off.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["NO_FOLLOW_UPS", "FollowUps"]


def _nothing(*_args: object, **_kwargs: object) -> bool:
    return False


@dataclass(frozen=True)
class FollowUps:
    """How to queue each kind of follow-up; each returns whether it queued it
    (False: the caller does the work inline, or leaves it to the beat)."""

    drain: Callable[[int], bool] = _nothing
    """Start ``drain(slot)``."""
    tick: Callable[[int, float], bool] = _nothing
    """Tick ``cluster_id`` after ``countdown`` seconds (a trailing tick)."""
    tick_shard: Callable[[int, str, int], bool] = _nothing
    """Run shard ``shard`` of ``cluster_id``'s tick round ``round_id`` (``shards.run_shard``)."""
    persist_minute: Callable[[int, str, int], bool] = _nothing
    """Write minute ``minute`` of ``(cluster_id, layout version)`` to the database."""
    write_history: Callable[[int, str, float], bool] = _nothing
    """Send the fresh samples of ``(cluster_id, layout version)`` at time ``now`` to
    VictoriaMetrics (``twin.telemetry.victoria.write_from_state``)."""
    heal: Callable[[int, list[dict[str, Any]]], bool] = _nothing
    """Hand ``cluster_id``'s new card failures to self-healing (``failures.handle_failures``)."""
    notify: Callable[[], bool] = _nothing
    """Deliver opened and closed alerts to the receivers (``twin.telemetry.notify``)."""


NO_FOLLOW_UPS = FollowUps()
