"""``Authorization: Token <key>`` for both kinds of API key.

:class:`TwinTokenAuthentication` replaces DRF's ``TokenAuthentication`` in
``REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]``: a key that starts with
``twk_`` is a named token (``twin.core.tokens``: hashed once, cached per process for
a few seconds, scoped to some clusters and/or see-only), any other key is DRF's
one-per-user token from ``POST /api/token/``, exactly as before.

A see-only token writes nothing: any method other than GET, HEAD and OPTIONS is a
403 here, before the view runs, on every endpoint (not only those whose objects
belong to a cluster: a see-only token does not start scenario runs, nor create or
revoke tokens).
"""
from __future__ import annotations

from typing import Any

from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed, PermissionDenied
from rest_framework.permissions import SAFE_METHODS

from twin.core.tokens import TokenAuth, is_named_key, resolve

__all__ = ["TwinTokenAuthentication"]


class TwinTokenAuthentication(TokenAuthentication):
    """DRF's token scheme (same header, same 401 with ``WWW-Authenticate: Token``),
    with named tokens looked up by hash through the core's cache."""

    def authenticate(self, request: Any) -> tuple[Any, Any] | None:
        result = super().authenticate(request)
        if result is not None and request.method not in SAFE_METHODS:
            auth = result[1]
            if isinstance(auth, TokenAuth) and auth.scope.see_only:
                raise PermissionDenied(f"Token {auth.prefix}… ({auth.name}) is see-only: it "
                                       f"reads, it does not write.")
        return result

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        if not is_named_key(key):
            return super().authenticate_credentials(key)  # type: ignore[no-any-return]
        found = resolve(key)
        if found is None:
            raise AuthenticationFailed("Invalid token (unknown, revoked or expired).")
        return found
