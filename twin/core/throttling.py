"""Login attempts are rate-limited: the API token, the dashboard's and the admin's login.

One budget per client address (``TWIN_LOGIN_RATE``, default 10 attempts a minute)
is shared by ``POST /api/token/``, ``POST /login/`` and ``POST /admin/login/``:
a password guesser gains nothing by switching doors. Only attempts count (a
POST); showing the form does not. Past the budget the answer is **429** with
``Retry-After`` (seconds) — JSON ``{"detail", "retry_after"}`` for the API and
for any client that does not ask for HTML, a short page for a browser.

The counts live in the ``throttle`` cache (``settings.CACHES``): Redis, so every
web worker process shares them — a per-process memory cache would let each
worker grant its own budget. If that cache is unreachable (Redis away) the
throttle falls back to this process's memory for the time being instead of
failing the login: still throttled, per process, and nothing answers 500.

The client address is ``REMOTE_ADDR``, or with ``TWIN_NUM_PROXIES`` = n trusted
proxies in front, the n-th address from the right of ``X-Forwarded-For``
(DRF's ``NUM_PROXIES``): the header is never trusted without that setting, or a
guesser would send a new address with every attempt.
"""
from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from functools import wraps
from typing import Any

import redis
from django.conf import settings
from django.core.cache import InvalidCacheBackendError, caches
from django.core.cache.backends.locmem import LocMemCache
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from rest_framework.exceptions import Throttled
from rest_framework.throttling import SimpleRateThrottle

__all__ = ["LoginRateThrottle", "LoginThrottled", "throttle_logins", "too_many_logins"]

log = logging.getLogger(__name__)

#: Where the throttle keeps its counts when the ``throttle`` cache cannot be reached.
_local = LocMemCache("twin-throttle-fallback", {"MAX_ENTRIES": 100_000})
_warned_at = 0.0


class _SharedCache:
    """The ``throttle`` cache (else ``default``), this process's memory while it fails."""

    def _backend(self) -> Any:
        try:
            return caches["throttle"]
        except InvalidCacheBackendError:
            return caches["default"]

    def _fallback(self, exc: Exception) -> LocMemCache:
        global _warned_at
        if time.monotonic() - _warned_at > 60:
            _warned_at = time.monotonic()
            log.warning("login throttle: shared cache unreachable (%s); counting attempts in "
                        "this process until it returns", exc)
        return _local

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self._backend().get(key, default)
        except (redis.RedisError, OSError) as exc:
            return self._fallback(exc).get(key, default)

    def set(self, key: str, value: Any, timeout: float | None = None) -> None:
        try:
            self._backend().set(key, value, timeout)
        except (redis.RedisError, OSError) as exc:
            self._fallback(exc).set(key, value, timeout)


class LoginRateThrottle(SimpleRateThrottle):
    """Login attempts per client address (see the module doc)."""

    scope = "login"
    cache = _SharedCache()

    def get_rate(self) -> str | None:
        # Read on every request (not frozen at import like DRF's THROTTLE_RATES).
        return getattr(settings, "TWIN_LOGIN_RATE", "10/min") or None

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        if request.method != "POST":
            return None
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


def _message(wait: float | None) -> tuple[str, int]:
    seconds = max(1, math.ceil(wait or 1))
    return (f"Too many login attempts from your address: try again in {seconds} s.", seconds)


class LoginThrottled(Throttled):
    """429 whose body says when to try again (``retry_after``, in seconds, as a number)."""

    def __init__(self, wait: float | None) -> None:
        text, seconds = _message(wait)
        super().__init__(wait=seconds, detail=text)
        self.detail = {"detail": text, "retry_after": seconds}  # type: ignore[assignment]


def too_many_logins(request: HttpRequest, wait: float | None) -> HttpResponse:
    """The 429 of a throttled Django login view: a page for a browser, else JSON."""
    text, seconds = _message(wait)
    if "text/html" in request.headers.get("Accept", ""):
        response = HttpResponse(render_to_string("core/too_many_logins.html",
                                                 {"message": text}, request=request),
                                status=429)
    else:
        response = JsonResponse({"detail": text, "retry_after": seconds}, status=429)
    response["Retry-After"] = str(seconds)
    return response


def throttle_logins(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Wrap a Django login view: its POSTs count against the login budget."""

    @wraps(view)
    def throttled(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        throttle = LoginRateThrottle()
        if not throttle.allow_request(request, None):
            return too_many_logins(request, throttle.wait())
        return view(request, *args, **kwargs)

    return throttled
