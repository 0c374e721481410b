"""Django's "not found" answer, as the API's JSON under ``/api/``.

DRF answers a missing object with ``{"detail": …}``, but a URL that no route
matches (``/api/racks/1.5/``, ``/api/telemetry/cards/abc/``) never reaches DRF:
Django answered it with its HTML page, although the schema documents every
404 of the API as JSON. ``twin/urls.py`` installs :func:`not_found` as
``handler404``; pages outside ``/api/`` keep Django's own.
"""
from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

__all__ = ["not_found"]


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": f"No such URL: {request.path}"}, status=404)
    return defaults.page_not_found(request, exception)
