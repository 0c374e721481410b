"""Per-stage timings of the live path, ingest → apply → tick → group send
(``TWIN_TELEMETRY_TRACE``).

Why: the live view lags the cards by the sum of several waits and computations in
three kinds of process (the web view that enqueues a batch, the drainer that
applies it, the tick that reads it and tells the browsers), and under load the
wall time of each is mostly waiting for a core. A :class:`Span` splits one of them
into named stages and measures each in wall time *and* in the CPU time of its
thread (``time.thread_time``): wall time says where the lag is, CPU time what the
work costs whatever the machine's load.

A span always measures (two clock reads per stage, about a microsecond); only with
``TELEMETRY_TRACE`` on (``TWIN_TELEMETRY_TRACE=1``) does :meth:`Span.finish` keep
the record: a JSON line on the ``twin.telemetry.trace`` logger (INFO) and the
newest ``TRACE_LEN`` records in the Redis list ``keys.trace()``, which
``benchmarks/serving.py`` reads back to print where a tick's time goes. Record::

    {"kind": "tick", "cluster": 3, "at": <Unix time at the start>,
     "wall_ms": 41.2, "cpu_ms": 18.9,
     "stages": {"read": [wall_ms, cpu_ms], "rollups": [...], ...}, ...fields}
"""
from __future__ import annotations

import json
import logging
import time
from typing import Any

import redis
from django.conf import settings

from twin.telemetry import keys

__all__ = ["TRACE_LEN", "Span", "enabled", "read"]

log = logging.getLogger("twin.telemetry.trace")

TRACE_LEN = 5000
"""Records kept in ``keys.trace()`` (the newest)."""


def enabled() -> bool:
    """Whether spans are kept (``TELEMETRY_TRACE``, from ``TWIN_TELEMETRY_TRACE``)."""
    return bool(getattr(settings, "TELEMETRY_TRACE", False))


class Span:
    """Wall and thread-CPU time of one operation, split into stages by :meth:`mark`."""

    def __init__(self, kind: str, **fields: Any) -> None:
        self.kind = kind
        self.fields = fields
        self.at = time.time()
        self.wall0 = self._wall = time.perf_counter()
        self.cpu0 = self._cpu = time.thread_time()
        self.stages: dict[str, list[float]] = {}

    def mark(self, stage: str) -> None:
        """Close ``stage``: the time since the previous mark (or the start) is its own
        (a stage marked twice adds up)."""
        wall, cpu = time.perf_counter(), time.thread_time()
        got = self.stages.setdefault(stage, [0.0, 0.0])
        got[0] += (wall - self._wall) * 1e3
        got[1] += (cpu - self._cpu) * 1e3
        self._wall, self._cpu = wall, cpu

    @property
    def wall_s(self) -> float:
        """Wall seconds since the start."""
        return time.perf_counter() - self.wall0

    @property
    def cpu_s(self) -> float:
        """CPU seconds this thread spent since the start."""
        return time.thread_time() - self.cpu0

    def record(self, **fields: Any) -> dict[str, Any]:
        return {"kind": self.kind, "at": self.at, "wall_ms": round(self.wall_s * 1e3, 3),
                "cpu_ms": round(self.cpu_s * 1e3, 3),
                "stages": {k: [round(w, 3), round(c, 3)] for k, (w, c) in self.stages.items()},
                **self.fields, **fields}

    def finish(self, r: redis.Redis | None = None, **fields: Any) -> dict[str, Any] | None:
        """Keep the record when tracing is on (the log line, and the Redis list when
        ``r`` is given); the record, or None when tracing is off. Never raises on
        Redis: a trace must not break what it measures."""
        if not enabled():
            return None
        rec = self.record(**fields)
        line = json.dumps(rec, separators=(",", ":"))
        log.info("%s", line)
        if r is not None:
            try:
                pipe = r.pipeline(transaction=False)
                pipe.lpush(keys.trace(), line)
                pipe.ltrim(keys.trace(), 0, TRACE_LEN - 1)
                pipe.execute()
            except redis.RedisError:
                log.warning("trace: could not store a %s record", self.kind)
        return rec


def read(r: redis.Redis, limit: int = TRACE_LEN) -> list[dict[str, Any]]:
    """The kept records, oldest first."""
    return [json.loads(x) for x in reversed(r.lrange(keys.trace(), 0, limit - 1))]
