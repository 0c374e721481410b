"""Telemetry settings and the Redis connection, shared by the read and write sides.

Kept apart from the state package so that ``keys`` (which needs the prefix),
``ingest``, ``state`` and ``processing`` can all import it without an import
circle.
"""
from __future__ import annotations

from dataclasses import dataclass

import redis
from django.conf import settings
from redis.backoff import NoBackoff
from redis.connection import Encoder, PythonRespSerializer
from redis.retry import Retry

from twin.core.perprocess import PerProcess

__all__ = ["BUFFER_CUTOFF", "MAX_TICK_HZ", "Conf", "command_packer", "conf", "redis_client"]

MAX_TICK_HZ = 2
"""Ticks per cluster per second, at most (a Redis gate shared by all workers), unless
``TELEMETRY_MAX_TICK_HZ`` says otherwise: a million-card cluster whose agents report
once a second gains nothing from a second round a second but its CPU."""


@dataclass(frozen=True)
class Conf:
    """Telemetry settings (``TELEMETRY_*`` in Django settings), with defaults."""

    prefix: str
    interval_s: float
    stale_intervals: int
    history_len: int
    history_step_s: float
    tick_min_s: float
    lag_allowance_max_s: float
    """Most ingest lag a card's silence is excused for (``processing.tickparts``)."""

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
        tick_min_s=1.0 / float(getattr(s, "TELEMETRY_MAX_TICK_HZ", MAX_TICK_HZ) or MAX_TICK_HZ),
        lag_allowance_max_s=float(getattr(s, "TELEMETRY_LAG_ALLOWANCE_MAX_S", 60.0)),
    )


BUFFER_CUTOFF = 6000
"""redis-py's own cutoff: a value longer than this is sent as it is, not copied."""


def command_packer() -> PythonRespSerializer:
    """redis-py's pure-Python command packer, in place of hiredis's.

    The state is written as large binary values (a 65,536-card batch is 27
    SETRANGEs of 256 KiB). hiredis's packer copies every argument into one new
    string per command — a fresh 256 KiB allocation and copy each, 15 % of the web
    process's time under the million-card load (py-spy); the Python packer hands a
    value longer than ``BUFFER_CUTOFF`` (or a ``memoryview``) to the socket as it
    is. Live, the web process went from 1.45–1.59 to 1.74–1.91 M card-samples per
    CPU-second (``benchmarks/live_million``); alone in one thread the difference is
    small (``benchmarks/ingest_paths``). Small commands it packs about as fast (5.1
    against 4.2 ms for the ≈ 2,100 small SETRANGEs of a million-card tick round).
    Replies are still parsed by hiredis.
    """
    return PythonRespSerializer(BUFFER_CUTOFF, Encoder("utf-8", "strict", False).encode)


def redis_client() -> redis.Redis:
    """One binary-safe Redis client per process (re-made after a fork).

    Short timeouts (``REDIS_CONNECT_TIMEOUT_S``, ``REDIS_SOCKET_TIMEOUT_S``): with
    Redis away a request fails within about a second (503, ``twin.core.unavailable``)
    instead of hanging; one immediate retry on a connection error replaces a
    pooled connection that a Redis restart broke, so the first request after
    the restart already succeeds. Timeouts are not retried: the command may have
    run (the caller's sequence numbers make a resend safe).
    """
    return _clients.get(settings.REDIS_URL)


def _make_client(url: str) -> redis.Redis:
    return redis.Redis.from_url(
        url, socket_keepalive=True, health_check_interval=30,
        socket_connect_timeout=float(getattr(settings, "REDIS_CONNECT_TIMEOUT_S", 1.0)),
        socket_timeout=float(getattr(settings, "REDIS_SOCKET_TIMEOUT_S", 2.0)),
        retry=Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
        command_packer=command_packer())


_clients: PerProcess[redis.Redis] = PerProcess(_make_client)
