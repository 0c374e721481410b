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
