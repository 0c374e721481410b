"""Named API tokens: the mechanism (lookup, cache, scope); the rows live in an app.

DRF's ``Token`` is one per user and carries all of its user's access. A *named*
token (``twin.hardware.models.ApiToken``: many per user, each with a name, an
optional expiry, an optional set of clusters it is limited to and a see-only flag)
carries **its user's access ∩ its scope** (``twin.core.access.access_for``). As with
the cluster grants, the core holds the mechanism and imports no app: hardware
registers a *resolver* (:func:`register_resolver`) in its ``AppConfig.ready()``.

How a key is checked, cheaply (every API request with ``Authorization: Token …``
goes through here):

* a named key is ``twk_`` + 43 URL-safe characters (256 random bits); the row stores
  only its SHA-256 (:func:`hash_key`) and its first 12 characters (the prefix shown
  after creation). A fast hash is enough for a 256-bit random secret: no dictionary
  to slow down, unlike a password. DRF's keys (40 hex digits) never start with
  ``twk_``, so a key is looked up in one table, not two;
* the key is hashed once per request; the resolver's answer (the user, the scope,
  the expiry) is kept in a per-process cache for :data:`CACHE_S` seconds, keyed by
  the hash, so a busy client costs one database read every few seconds per process,
  not one per request. Expiry is checked on every request against the cached time;
* **revocation**: the process that revokes (or edits, or deletes) a token drops it
  from its cache at once (:func:`forget`, called by the model's signals); every
  other process refuses it at the latest :data:`CACHE_S` seconds later, when its
  entry expires. A user made inactive is refused within the same delay.

A request authenticated by a named token gets a *copy* of the user (never the
cached object, which other requests share) with :attr:`SCOPE_ATTRIBUTE` set; the
access rules read it there, so every path that already asks ``access_for(user)``
(REST, websockets, ``/metrics``, scenario runs, telemetry reads) applies the scope.
"""
from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from twin.core.access import ClusterAccess
from twin.core.perprocess import TtlCache

__all__ = [
    "CACHE_S",
    "KEY_PREFIX",
    "SCOPE_ATTRIBUTE",
    "Resolved",
    "TokenAuth",
    "TokenScope",
    "clear_cache",
    "forget",
    "hash_key",
    "is_named_key",
    "register_resolver",
    "resolve",
    "scope_of",
    "user_for_key",
]

#: The start of every named key (DRF's keys are hex digits: they never start so).
KEY_PREFIX = "twk_"
#: Seconds a resolved token is trusted by a process before it reads the row again:
#: the longest a revocation takes to reach another process. The same 5 s as the
#: telemetry agents' token cache (``TOKEN_CACHE_S``).
CACHE_S = 5.0
#: Entries kept at most per process (then the cache starts over: a flood of distinct
#: valid keys cannot grow memory without bound).
MAX_ENTRIES = 10_000
#: The attribute a token-authenticated user copy carries its scope in.
SCOPE_ATTRIBUTE = "twin_token_scope"


@dataclass(frozen=True)
class TokenScope:
    """What a token keeps of its user's access: ``clusters`` (``None``: all the user's)
    and ``see_only`` (no change anywhere, and no write through the API)."""

    clusters: frozenset[int] | None = None
    see_only: bool = False

    def limit(self, access: ClusterAccess) -> ClusterAccess:
        """``access`` ∩ this scope (``None`` in ``access`` means every cluster)."""
        see, change = access.see, access.change
        if self.clusters is not None:
            see = self.clusters if see is None else see & self.clusters
            change = self.clusters if change is None else change & self.clusters
        if self.see_only:
            change = frozenset()
        return ClusterAccess(see=see, change=change)


@dataclass(frozen=True)
class TokenAuth:
    """``request.auth`` of a request made with a named token (plain values: it is
    cached and shared between requests, unlike the row)."""

    id: int
    name: str
    prefix: str
    scope: TokenScope


@dataclass(frozen=True)
class Resolved:
    """What the resolver found for a key's hash: a live (not revoked) token."""

    user: Any
    auth: TokenAuth
    expires: datetime | None = None


Resolver = Callable[[str], "Resolved | None"]
_resolver: Resolver | None = None
_cache: TtlCache[Resolved] = TtlCache(max_entries=MAX_ENTRIES)


def register_resolver(resolver: Resolver) -> None:
    """Called by the app that stores the tokens: ``resolver(key_hash)`` returns the
    live token with that hash (``None`` if there is none, or it is revoked)."""
    global _resolver
    _resolver = resolver


def hash_key(key: str) -> str:
    """The stored form of a key: SHA-256, hex (see the module doc for why not slower)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def is_named_key(key: str) -> bool:
    return key.startswith(KEY_PREFIX)


def forget(key_hash: str) -> None:
    """Drop a token from this process's cache (on revoke, edit, delete)."""
    _cache.pop(key_hash)


def clear_cache() -> None:
    _cache.clear()


def _lookup(key_hash: str) -> Resolved | None:
    hit = _cache.get(key_hash)
    if hit is not None:
        return hit
    if _resolver is None:
        return None
    found = _resolver(key_hash)
    if found is None:
        _cache.pop(key_hash)  # unknown keys are not kept (no memory for guesses)
    else:
        _cache.put(key_hash, found, CACHE_S)
    return found


def resolve(key: str) -> tuple[Any, TokenAuth] | None:
    """The user (a per-request copy carrying the scope) and ``request.auth`` for a
    named key, or ``None``: unknown, revoked, expired, or its user inactive."""
    found = _lookup(hash_key(key))
    if found is None or (found.expires is not None and found.expires <= timezone.now()):
        return None
    if not getattr(found.user, "is_active", False):
        return None
    user = copy.copy(found.user)
    setattr(user, SCOPE_ATTRIBUTE, found.auth.scope)
    return user, found.auth


def scope_of(user: Any) -> TokenScope | None:
    """The scope of the token a user was authenticated with (``None``: no named token)."""
    scope = getattr(user, SCOPE_ATTRIBUTE, None)
    return scope if isinstance(scope, TokenScope) else None


def user_for_key(key: str) -> tuple[Any, Any] | None:
    """``(user, auth)`` for any API key — a named token or DRF's one-per-user token —
    for the paths outside DRF's authentication (websockets, ``/metrics``)."""
    key = key.strip()
    if not key:
        return None
    if is_named_key(key):
        return resolve(key)
    from rest_framework.authtoken.models import Token

    token = Token.objects.select_related("user").filter(key=key).first()
    if token is None or not token.user.is_active:
        return None
    return token.user, token
