"""The cyclic garbage collector in long-lived processes: what it may skip, and when.

A full collection walks every container object the process holds. A web or worker
process holds ≈ 170,000 from its start alone (Django, DRF, Channels, Celery, the
apps' modules), so each full collection took 70–150 ms (measured in a telemetry
worker of the million-card cluster, ``docs/benchmarks.md``) — a stall of whatever
was running: a tick shard of a round that has 500 ms, or a history query that has
200. Two tools, both CPython's own:

* :func:`freeze_startup_objects` (``gc.freeze``) once the process has imported what
  it will keep: later collections walk only what was made since.
* :func:`collector_paused` around work that allocates many small containers and
  keeps none in a cycle (parsing a large JSON answer, building and rendering
  thousands of rows): the collection it would set off, walking the whole heap,
  does not happen during it.
"""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused", "freeze_startup_objects"]


def freeze_startup_objects() -> int:
    """Collect once, then move every object the process holds now out of the
    collector's sight; returns how many were frozen.

    Frozen objects are never collected — right for what lives as long as the
    process. Should a frozen object later become cyclic garbage it stays
    allocated; reference counting still frees everything else.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector paused for the block (it runs again right after).

    For blocks that allocate many containers holding no cycles: ≈ 77,000 small
    lists of a 24 h history answer set off collections that took 120–250 ms of its
    ``json.loads`` alone, 8–14 ms without (docs/benchmarks.md, history). The pause
    holds for every thread of the process while the block runs; the blocks are
    bounded (one answer), so nothing accumulates for long.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
