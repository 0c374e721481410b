"""When Redis or the database is away: a 503 with ``Retry-After``, never a 500.

Every request path that needs Redis (telemetry ingestion, the live read
endpoints, anything that queues a Celery task) or the database raises one of
:data:`OUTAGE_ERRORS` when that service is down. Those are not bugs of the
request, and a client can do nothing but come back later, so
:class:`ServiceUnavailableMiddleware` answers them — for DRF views and plain
Django views alike — with::

    HTTP 503, Retry-After: <RETRY_AFTER_S>
    {"detail": "<which service, and what to do>", "service": "redis" | "database"}

and :func:`server_error` (``handler500`` in ``twin.urls``) does the same for an
outage raised outside a view (in a middleware), where Django would render its
HTML 500 page. Short socket timeouts on the request paths' Redis clients (see
``settings``) make that answer come within a second.

:func:`check_broker` is the fast "is the broker there?" a view asks before it
commits a job whose task it cannot queue; :func:`check_redis` the fast "is Redis
there?" that ``/healthz/`` and the live read endpoints ask first (issue 22, item 6):
a PING on a connection of its own with a timeout of ``REDIS_PROBE_TIMEOUT_S``
(0.5 s), so a frozen Redis (a SIGSTOP, a stalled host: it accepts connections but
never answers) is a 503 within a second, while the clients that carry the real
work keep their longer ``REDIS_SOCKET_TIMEOUT_S``, under which the large
pipelines of a million-card tick never time out; :class:`ServiceUnavailable` is the DRF
exception for that 503. The websocket consumers close with
:data:`CLOSE_UNAVAILABLE` (4503) for the same reasons, which clients treat as
"retry with backoff" (``twin.live.protocol`` documents it).
"""
from __future__ import annotations

import logging
import sys
from typing import Any

from django.db import InterfaceError as DjangoInterfaceError
from django.db import OperationalError as DjangoOperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.deprecation import MiddlewareMixin
from rest_framework.exceptions import APIException

from twin.core.perprocess import PerProcess

__all__ = [
    "CLOSE_UNAVAILABLE",
    "OUTAGE_ERRORS",
    "RETRY_AFTER_S",
    "ServiceUnavailable",
    "ServiceUnavailableMiddleware",
    "check_broker",
    "check_redis",
    "is_outage",
    "outage_service",
    "server_error",
    "unavailable_response",
]

log = logging.getLogger(__name__)

RETRY_AFTER_S = 2
"""What ``Retry-After`` says: long enough for a restarted Redis to load, short
enough that an agent's next batch is not late."""

CLOSE_UNAVAILABLE = 4503
"""Websocket close code: a service behind the socket (the channel layer's Redis,
the database) is away; reconnect with backoff. Mirrors HTTP 503 as 4401/4404
mirror 401/404."""


def _redis_errors() -> tuple[type[BaseException], ...]:
    import redis.exceptions

    return (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
            redis.exceptions.BusyLoadingError)


def _broker_errors() -> tuple[type[BaseException], ...]:
    from kombu.exceptions import OperationalError as KombuOperationalError

    return (KombuOperationalError,)


REDIS_ERRORS = _redis_errors()
DATABASE_ERRORS: tuple[type[BaseException], ...] = (DjangoOperationalError,
                                                    DjangoInterfaceError)
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (*REDIS_ERRORS, *_broker_errors(),
                                                  *DATABASE_ERRORS)
"""Exceptions that mean "a service is away", not "this request is wrong"."""

_MESSAGES = {
    "redis": "Redis (live telemetry state and the task queue) is not reachable; nothing "
             "was stored or queued. Retry in a few seconds.",
    "broker": "the task queue (Celery broker) is not reachable, so the job could not be "
              "queued; nothing was created. Retry in a few seconds.",
    "database": "the database is not reachable; nothing was stored. Retry in a few seconds.",
}


def outage_service(exc: BaseException) -> str | None:
    """``"redis"``, ``"broker"`` or ``"database"`` when ``exc`` says that
    service is away; None for any other error (a bug: a 500 as usual)."""
    if isinstance(exc, REDIS_ERRORS):
        return "redis"
    if isinstance(exc, _broker_errors()):
        return "broker"
    if isinstance(exc, DjangoOperationalError | DjangoInterfaceError):
        # SQLite's "database is locked" is an OperationalError too: still "retry later".
        return "database"
    return None


def is_outage(exc: BaseException) -> bool:
    return outage_service(exc) is not None


def unavailable_response(service: str, detail: str | None = None) -> JsonResponse:
    """The 503 of an outage of ``service``."""
    response = JsonResponse({"detail": detail or _MESSAGES.get(service, _MESSAGES["redis"]),
                             "service": service}, status=503)
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response


class ServiceUnavailable(APIException):
    """DRF's 503 (the ``wait`` attribute becomes ``Retry-After``)."""

    status_code = 503
    default_detail = _MESSAGES["broker"]
    default_code = "service_unavailable"

    def __init__(self, detail: str | None = None, service: str = "broker") -> None:
        super().__init__(detail or _MESSAGES.get(service, self.default_detail))
        self.wait = RETRY_AFTER_S
        self.service = service


class ServiceUnavailableMiddleware(MiddlewareMixin):
    """Turn an outage raised by a view into a 503 JSON answer (see the module).
    A ``MiddlewareMixin`` so the chain stays async-capable under ASGI."""

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        service = outage_service(exception)
        if service is None:
            return None
        log.warning("%s %s: %s is away (%s: %s)", request.method, request.path, service,
                    type(exception).__name__, exception)
        return unavailable_response(service)


def server_error(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    """``handler500``: an outage raised outside a view (a middleware reading the
    session, say) is still a 503; anything else is Django's own 500 page."""
    exc = sys.exc_info()[1]
    service = outage_service(exc) if exc is not None else None
    if service is not None:
        return unavailable_response(service)
    from django.views.defaults import server_error as django_server_error

    return django_server_error(request, *args, **kwargs)


def check_broker(timeout: float = 1.0) -> None:
    """Raise :class:`ServiceUnavailable` unless the Celery broker answers within
    ``timeout`` seconds (one connection attempt, no retries).

    Asked before a job row is committed, so a job whose task cannot be queued
    is never answered "queued".
    """
    from twin.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0,
                                   timeout=timeout)
            conn.default_channel  # noqa: B018 - the Redis transport PINGs here
    except Exception as exc:  # noqa: BLE001 - whatever the transport raises means "not there"
        log.warning("the Celery broker is not reachable: %s", exc)
        raise ServiceUnavailable(service="broker") from exc


def _make_probe(key: tuple[str, float]) -> Any:
    import redis

    url, timeout = key
    return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout,
                                retry_on_timeout=False, max_connections=8)


_probes: PerProcess[Any] = PerProcess(_make_probe)


def _probe_client() -> Any:
    """The probe's own client (per process, URL and timeout): one connection, the short
    timeout on connect and on the reply, no retry."""
    from django.conf import settings

    timeout = float(getattr(settings, "REDIS_PROBE_TIMEOUT_S", 0.5))
    return _probes.get((settings.REDIS_URL, timeout))


def check_redis() -> None:
    """Raise Redis's ``ConnectionError``/``TimeoutError`` (an outage: a 503 through the
    middleware) unless Redis answers a PING within ``REDIS_PROBE_TIMEOUT_S``."""
    _probe_client().ping()
