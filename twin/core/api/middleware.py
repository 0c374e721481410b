"""Errors Django itself answers with an HTML page, answered in JSON under ``/api/``.

A body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (``TWIN_MAX_BODY_BYTES``, 8 MiB)
makes Django raise ``RequestDataTooBig`` when the API reads it; nothing in DRF
handles it, so a 9 MiB ``POST`` was a generic HTML "Bad Request (400)". Under
``/api/`` it is now a 413 with a JSON body that says the limit, as the
telemetry endpoints already answer, and too many form fields a 400 in JSON.
Other paths (admin, dashboard) keep Django's pages. The error pages Django
renders itself (an unknown URL, a crash) are ``twin.core.api.errors``'.
"""
from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.http import HttpRequest, JsonResponse
from django.utils.deprecation import MiddlewareMixin

__all__ = ["API_PREFIX", "ApiErrorsMiddleware", "too_big"]

API_PREFIX = "/api/"


def too_big(request: HttpRequest) -> JsonResponse:
    """413: the body is over ``DATA_UPLOAD_MAX_MEMORY_SIZE``, said with the limit."""
    limit = int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
    try:
        size = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        size = 0
    said = f"is {size:,} bytes" if size > limit else "is too large"
    return JsonResponse({"detail": f"The request body {said}; the API accepts at most "
                                   f"{limit:,} bytes. Send less per request.",
                         "limit": limit}, status=413)


class ApiErrorsMiddleware(MiddlewareMixin):
    """JSON for the request errors Django raises while a view reads the request."""

    def process_exception(self, request: HttpRequest, exception: Exception) -> JsonResponse | None:
        if not request.path.startswith(API_PREFIX):
            return None
        if isinstance(exception, RequestDataTooBig):
            return too_big(request)
        if isinstance(exception, TooManyFieldsSent):
            limit = int(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS)
            return JsonResponse({"detail": f"The request has more than {limit:,} form fields; "
                                           "send JSON, or fewer fields.", "limit": limit},
                                status=400)
        return None
