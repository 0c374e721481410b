"""What every websocket consumer of the twin does when Redis or the database is away.

A consumer needs the channel layer (Redis) from its first instant — joining its
group on connect, then reading its channel for as long as it lives — and most
read the database on connect. When one of them is away Channels lets the
exception end the ASGI application, and the server drops the TCP connection
without a close frame: the browser learns nothing, and an accepted-then-dropped
socket every second looks like a bug, not an outage.

:class:`CloseWhenUnavailable` catches those outages (``OUTAGE_ERRORS`` of
:mod:`twin.core.unavailable`) wherever they happen in the consumer's life and
closes the socket properly with :data:`~twin.core.unavailable.CLOSE_UNAVAILABLE`
(4503: "a service is away, reconnect with backoff"), accepting it first if need
be (a close before the accept reaches a browser as a bare HTTP 403, without
the code). Clients reconnect and receive a fresh snapshot once it is back.

The close goes out *as soon as* a handler meets the outage, before Channels
cleans up. Its cleanup (``channels.utils.await_many_dispatch``) cancels the
consumer's channel-layer receive and waits for it, and right after a Redis
restart that wait can last until the process's channel next gets a message:
the receive (one per process, shared by every consumer, in
``channels_redis``) was seen to lose its cancellation inside a read on a
fresh connection and go on polling with ``BZPOPMIN``. A client whose first
socket after the restart hit a stale pooled connection then waited for its
close frame — and so never reconnected, the one thing that would have brought
it a message. Closing first lets it reconnect at once; the stuck receive ends
with the next tick the new socket's group brings.

Any other exception that ends an accepted consumer gets a close frame too —
never the bare TCP drop. An outage need not arrive as one of ``OUTAGE_ERRORS``
(a CI run saw the live socket dropped without a close frame right after Redis
was killed: something else ended the consumer, and the client libraries in
between — channels_redis, redis-py, hiredis — raise errors of their own), so
an unexpected error is put to the facts: if the channel layer's Redis does not
answer a ``PING`` within :data:`PROBE_TIMEOUT_S`, it is an outage (4503,
reconnect); otherwise it is a bug, closed with 1011 ("internal error", the
client reconnects as well) and raised on for the server's log.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from channels.exceptions import StopConsumer

from twin.core.unavailable import CLOSE_UNAVAILABLE, outage_service

__all__ = ["CLOSE_INTERNAL_ERROR", "PROBE_TIMEOUT_S", "CloseWhenUnavailable",
           "channel_layer_reachable"]

log = logging.getLogger(__name__)

CLOSE_INTERNAL_ERROR = 1011
"""RFC 6455 §7.4.1: the server met a condition that kept it from going on."""

PROBE_TIMEOUT_S = 0.5
"""How long the channel layer's Redis gets to answer the outage probe: a
Redis that is up answers a PING in well under a millisecond."""


async def channel_layer_reachable(timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Does the channel layer's (first) Redis answer a ``PING`` within
    ``timeout`` seconds? A fresh connection, so no pooled one a restart broke
    can answer for it."""
    import redis.asyncio
    from django.conf import settings

    config = settings.CHANNEL_LAYERS["default"].get("CONFIG", {})
    hosts = config.get("hosts") or []
    if not hosts:
        return True  # not a Redis layer: nothing to probe
    host = hosts[0]
    address = host.get("address") if isinstance(host, dict) else host
    if not isinstance(address, str):
        return True
    client = redis.asyncio.Redis.from_url(address, socket_connect_timeout=timeout,
                                          socket_timeout=timeout, retry=None)
    try:
        return bool(await asyncio.wait_for(client.ping(), timeout * 2))
    except Exception:  # noqa: BLE001 - whatever it raises, it did not answer
        return False
    finally:
        with contextlib.suppress(Exception):
            await client.aclose()


class CloseWhenUnavailable:
    """Mixin for an ``AsyncWebsocketConsumer`` (put it first in the bases)."""

    _ws_accepted = False
    _ws_closed = False
    _ws_outage: str | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)  # type: ignore[misc]
        except Exception as exc:
            await self._end(scope, send, exc)
            if self._ws_outage is None:
                raise  # a bug: for the server's log

    async def dispatch(self, message: Any) -> None:
        try:
            await super().dispatch(message)  # type: ignore[misc]
        except StopConsumer:
            raise
        except Exception as exc:
            # Close now, not after Channels' cleanup (see the module docstring).
            await self._end(self.scope, self.base_send, exc)  # type: ignore[attr-defined]
            raise

    async def _end(self, scope: Any, send: Any, exc: BaseException) -> None:
        """Close for ``exc`` (once): 4503 for an outage, plain or in disguise, else 1011."""
        service = outage_service(exc)
        if self._ws_closed:
            self._ws_outage = self._ws_outage or service  # closed already: nothing to send
            return
        if service is None and not await channel_layer_reachable():
            service = "redis"  # an outage in disguise (see the module docstring)
        self._ws_outage = service
        if service is not None:
            log.warning("websocket %s: %s is away (%s: %s); closing with %d",
                        scope.get("path"), service, type(exc).__name__, exc, CLOSE_UNAVAILABLE)
            await self._close(send, CLOSE_UNAVAILABLE, "service unavailable, retry")
        else:
            log.error("websocket %s: %s: %s; closing with %d", scope.get("path"),
                      type(exc).__name__, exc, CLOSE_INTERNAL_ERROR)
            await self._close(send, CLOSE_INTERNAL_ERROR, "internal error, retry")

    async def accept(self, *args: Any, **kwargs: Any) -> None:
        await super().accept(*args, **kwargs)  # type: ignore[misc]
        self._ws_accepted = True

    async def close(self, *args: Any, **kwargs: Any) -> None:
        await super().close(*args, **kwargs)  # type: ignore[misc]
        self._ws_closed = True

    async def _close(self, send: Any, code: int, reason: str) -> None:
        if self._ws_closed:
            return
        self._ws_closed = True
        try:
            if not self._ws_accepted:
                await send({"type": "websocket.accept"})
                self._ws_accepted = True
            await send({"type": "websocket.close", "code": code, "reason": reason})
        except Exception as exc:  # noqa: BLE001
            # The client may be gone already (the outage hit its disconnect):
            # nothing to tell it, but say so, a missing close frame is a bug report.
            log.warning("websocket close %d not sent: %s: %s", code, type(exc).__name__, exc)
