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
"""
from __future__ import annotations

import contextlib
import logging
from typing import Any

from twin.core.unavailable import CLOSE_UNAVAILABLE, OUTAGE_ERRORS, outage_service

__all__ = ["CloseWhenUnavailable"]

log = logging.getLogger(__name__)


class CloseWhenUnavailable:
    """Mixin for an ``AsyncWebsocketConsumer`` (put it first in the bases)."""

    _ws_accepted = False
    _ws_closed = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)  # type: ignore[misc]
        except OUTAGE_ERRORS as exc:
            await self._outage(scope, send, exc)

    async def dispatch(self, message: Any) -> None:
        try:
            await super().dispatch(message)  # type: ignore[misc]
        except OUTAGE_ERRORS as exc:
            # Close now, not after Channels' cleanup (see the module docstring).
            await self._outage(self.scope, self.base_send, exc)  # type: ignore[attr-defined]
            raise

    async def _outage(self, scope: Any, send: Any, exc: BaseException) -> None:
        if self._ws_closed:
            return
        log.warning("websocket %s: %s is away (%s: %s); closing with %d", scope.get("path"),
                    outage_service(exc), type(exc).__name__, exc, CLOSE_UNAVAILABLE)
        await self._close_unavailable(send)

    async def accept(self, *args: Any, **kwargs: Any) -> None:
        await super().accept(*args, **kwargs)  # type: ignore[misc]
        self._ws_accepted = True

    async def close(self, *args: Any, **kwargs: Any) -> None:
        await super().close(*args, **kwargs)  # type: ignore[misc]
        self._ws_closed = True

    async def _close_unavailable(self, send: Any) -> None:
        if self._ws_closed:
            return
        self._ws_closed = True
        # The client may be gone already (the outage hit its disconnect): nothing to tell.
        with contextlib.suppress(Exception):
            if not self._ws_accepted:
                await send({"type": "websocket.accept"})
                self._ws_accepted = True
            await send({"type": "websocket.close", "code": CLOSE_UNAVAILABLE,
                        "reason": "service unavailable, retry"})
