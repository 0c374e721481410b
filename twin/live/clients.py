"""How many websocket clients every ASGI process holds, for the twin's own ``/metrics``.

Each process counts its open ``ws/clusters/<id>/`` sockets in memory and
publishes the count to Redis under a key of its own (host and pid) that
expires after :data:`TTL_S` unless refreshed — on every connect and
disconnect and by a heartbeat every :data:`REFRESH_S` — so a process that died
drops out of the sum within a minute and a half. ``families()`` sums the live
keys at scrape time, whichever process answers the scrape.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Iterator

from django.conf import settings
from prometheus_client.core import GaugeMetricFamily, Metric

from twin.telemetry.state import redis_client

__all__ = ["REFRESH_S", "TTL_S", "connected", "disconnected", "families", "total"]

log = logging.getLogger(__name__)

TTL_S = 90
REFRESH_S = 30.0
_count = 0
_heartbeat: asyncio.Task[None] | None = None


def _prefix() -> str:
    config = settings.CHANNEL_LAYERS["default"].get("CONFIG", {})
    return f"{config.get('prefix', 'twin')}:live:clients"


def _key() -> str:
    return f"{_prefix()}:{socket.gethostname()}-{os.getpid()}"


def _publish() -> None:
    redis_client().set(_key(), _count, ex=TTL_S)


async def _publish_soon() -> None:
    """Publish off the event loop; Redis away is logged, never a consumer's failure."""
    try:
        await asyncio.to_thread(_publish)
    except Exception:  # noqa: BLE001 - the count is best effort; the socket matters
        log.debug("websocket client count not published", exc_info=True)


async def _beat() -> None:
    while True:
        await asyncio.sleep(REFRESH_S)
        await _publish_soon()


async def connected() -> None:
    """A socket was accepted (and authorised) in this process."""
    global _count, _heartbeat
    _count += 1
    loop = asyncio.get_running_loop()
    if _heartbeat is None or _heartbeat.done() or _heartbeat.get_loop() is not loop:
        _heartbeat = loop.create_task(_beat(), name="live-clients")
    await _publish_soon()


async def disconnected() -> None:
    """A socket counted by :func:`connected` closed."""
    global _count
    _count = max(_count - 1, 0)
    await _publish_soon()


def total() -> int:
    """Open websocket clients of every live process."""
    r = redis_client()
    keys = list(r.scan_iter(match=f"{_prefix()}:*", count=1000))
    return sum(int(v) for v in r.mget(keys) if v) if keys else 0


def families() -> Iterator[Metric]:
    with contextlib.suppress(Exception):  # Redis away: telemetry's families say so
        yield GaugeMetricFamily("twin_websocket_clients",
                                "Open ws/clusters/<id>/ connections, all ASGI processes.",
                                value=total())
