"""Django's own error pages (400, 403, 404, 500) in JSON under ``/api/``.

A client of the API reads JSON; Django answers a URL that matches nothing, a
suspicious request or a crash with an HTML page. These handlers
(``handler400`` … ``handler500`` in ``twin/urls.py``) answer ``{"detail": …}``
for paths under ``/api/`` and leave every other path to Django's pages. (With
``DEBUG`` on, Django shows its technical pages instead, as always.)
"""
from __future__ import annotations

from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

from twin.core.api.middleware import API_PREFIX, too_big

__all__ = ["bad_request", "not_found", "permission_denied", "server_error"]


def _api(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


def bad_request(request: HttpRequest, exception: Exception, **kwargs: Any) -> HttpResponse:
    if not _api(request):
        return defaults.bad_request(request, exception, **kwargs)
    if isinstance(exception, RequestDataTooBig):
        return too_big(request)
    return JsonResponse({"detail": "Bad request: the server refused it as malformed or "
                                   "suspicious (a Host header it does not serve, a body it "
                                   "cannot read)."}, status=400)


def permission_denied(request: HttpRequest, exception: Exception,
                      **kwargs: Any) -> HttpResponse:
    if not _api(request):
        return defaults.permission_denied(request, exception, **kwargs)
    return JsonResponse({"detail": str(exception) or "You may not do this."}, status=403)


def not_found(request: HttpRequest, exception: Exception, **kwargs: Any) -> HttpResponse:
    if not _api(request):
        return defaults.page_not_found(request, exception, **kwargs)
    return JsonResponse({"detail": f"No API endpoint at {request.path}: the list is at "
                                   f"{API_PREFIX}."}, status=404)


def server_error(request: HttpRequest, **kwargs: Any) -> HttpResponse:
    if not _api(request):
        return defaults.server_error(request, **kwargs)
    return JsonResponse({"detail": "Internal server error: the failure is logged."},
                        status=500)
