"""Top-level URLs: dashboard, admin, REST API and its docs.

The REST API is one namespace, ``api``: its root page, token, schema and docs
(``twin.core.api.urls``) and each domain app's ``api/urls.py``, whose endpoints
the root page lists in this order. Telemetry has its own namespace under
``/api/telemetry/``.

``handler500`` answers an outage of Redis or the database raised outside a view
with the same 503 JSON as the views get (``twin.core.unavailable``).
"""
from django.contrib import admin
from django.urls import include, path

from twin.core.api.urls import api_urlpatterns
from twin.core.throttling import throttle_logins
from twin.facility.api import urls as facility_api
from twin.hardware.api import urls as hardware_api
from twin.jobs.api import urls as jobs_api
from twin.scenarios.api import urls as scenarios_api

handler500 = "twin.core.unavailable.server_error"

urlpatterns = [
    # The admin's login shares the login rate limit (twin.core.throttling).
    path("admin/login/", throttle_logins(admin.site.login)),
    path("admin/", admin.site.urls),
    path("api/telemetry/", include("twin.telemetry.api.urls")),
    path("api/", include((api_urlpatterns(hardware_api, jobs_api, facility_api,
                                                   scenarios_api), "api"))),
    path("", include("twin.web.urls")),
]

# Under /api/ Django's error pages are JSON (twin.core.api.errors); elsewhere, pages.
handler400 = "twin.core.api.errors.bad_request"
handler403 = "twin.core.api.errors.permission_denied"
handler404 = "twin.core.api.errors.not_found"
handler500 = "twin.core.api.errors.server_error"
