"""API tokens on websockets, next to the browser's session cookie.

A wall screen or a script follows the live state without a password: it sends the
token a user got from ``POST /api/token/`` as ``Authorization: Token <key>`` (any
client that sets headers) or as ``?token=<key>`` in the URL (a browser's WebSocket
cannot set headers; the URL may end up in access logs, so prefer the header). A
token given replaces the session's user; a wrong one leaves the client anonymous,
closed with 4401 as any anonymous client. The user's cluster grants apply as over
REST (``twin.core.access``), and a named token's scope (``twin.core.tokens``: only
its clusters; a see-only token may follow, as websockets only read).
"""
from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from django.contrib.auth.models import AnonymousUser

from twin.core.tokens import user_for_key

__all__ = ["TokenAuthMiddleware", "token_of"]


def token_of(scope: dict[str, Any]) -> str | None:
    """The API token a websocket handshake carries, if any."""
    for name, value in scope.get("headers", ()):
        if name.lower() == b"authorization":
            scheme, _, key = value.decode("latin-1").partition(" ")
            if scheme.lower() == "token" and key.strip():
                return key.strip()
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    keys = query.get("token")
    return keys[0] if keys and keys[0] else None


@database_sync_to_async
def _user_of(key: str) -> Any:
    """The token's user (for a named token: a copy carrying its scope), or anonymous."""
    found = user_for_key(key)
    return AnonymousUser() if found is None else found[0]


class TokenAuthMiddleware:
    """Sets ``scope["user"]`` from an API token (inside Channels' session auth)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        key = token_of(scope)
        if key is not None:
            scope = dict(scope, user=await _user_of(key))
        return await self.inner(scope, receive, send)
