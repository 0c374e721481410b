"""Top-level URLs: dashboard, admin, REST API and its docs.

The REST API is one namespace, ``api``: its root page, token, schema and docs
(``twin.core.api.urls``) and each domain app's ``api/urls.py``, whose endpoints
the root page lists in this order. Telemetry has its own namespace under
``/api/telemetry/``. A URL under ``/api/`` that no route matches is answered
with JSON, as the API's own 404s are (``twin.core.api.handlers``).
"""
from django.contrib import admin
from django.urls import include, path

from twin.core.api.urls import api_urlpatterns
from twin.hardware.api import urls as hardware_api
from twin.scenarios.api import urls as scenarios_api

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/telemetry/", include("twin.telemetry.api.urls")),
    path("api/", include((api_urlpatterns(hardware_api, scenarios_api), "api"))),
    path("", include("twin.web.urls")),
]

handler404 = "twin.core.api.handlers.not_found"
