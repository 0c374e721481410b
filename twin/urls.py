"""Top-level URLs: dashboard, admin, REST API and its docs."""
from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/telemetry/", include("twin.telemetry.urls")),
    path("api/", include("twin.api.urls")),
    path("", include("twin.web.urls")),
]
