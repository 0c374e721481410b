"""``GET /healthz/``: is this web process serving, and can it reach what it needs?

For load balancers and docker-compose's health checks (``manage.py healthcheck
web`` reads it). No login, no data: ``{"status": "ok" | "degraded", "database":
"ok" | "<error>", "redis": "ok" | "<error>"}`` — 200 when both answer, 503
(with ``Retry-After``) when one does not. Each probe is one round trip with a
short timeout (Redis: ``twin.core.unavailable.check_redis``, 0.5 s), so the answer
comes within a second even while a service is away or frozen.
"""
from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from twin.core.unavailable import RETRY_AFTER_S, check_redis

__all__ = ["healthz", "probe"]


def probe() -> dict[str, str]:
    """``{"database": ..., "redis": ...}``: "ok" or what went wrong."""
    result: dict[str, str] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        result["database"] = "ok"
    except Exception as exc:  # noqa: BLE001 - any failure is the answer
        result["database"] = f"{type(exc).__name__}: {exc}"[:200]
    try:
        check_redis()
        result["redis"] = "ok"
    except Exception as exc:  # noqa: BLE001 - any failure is the answer
        result["redis"] = f"{type(exc).__name__}: {exc}"[:200]
    return result


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    checks = probe()
    healthy = all(value == "ok" for value in checks.values())
    response = JsonResponse({"status": "ok" if healthy else "degraded", **checks},
                            status=200 if healthy else 503)
    if not healthy:
        response["Retry-After"] = str(RETRY_AFTER_S)
    return response
