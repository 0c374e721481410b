"""The ``api`` namespace: its root page, the token, the OpenAPI schema and its offline
docs, and each app's API URLs (see ``twin/urls.py``)."""
from __future__ import annotations

from types import ModuleType

from django.urls import URLPattern, URLResolver, path
from drf_spectacular.views import (
    SpectacularAPIView,
    SpectacularRedocView,
    SpectacularSwaggerView,
)

from twin.core.api.routers import api_root_urls
from twin.core.api.views import TokenView

__all__ = ["ROOT_LINKS", "api_urlpatterns", "urlpatterns"]

#: What the API root page links besides the apps' endpoints: name → URL name.
ROOT_LINKS = {"token": "token", "schema": "schema", "docs": "docs", "redoc": "redoc"}

urlpatterns = [
    path("token/", TokenView.as_view(), name="token"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api:schema"), name="docs"),
    # Our template: the stock one loads web fonts from Google (a CDN).
    path("redoc/", SpectacularRedocView.as_view(url_name="api:schema",
                                                template_name="api/redoc.html"), name="redoc"),
]


def api_urlpatterns(*apps: ModuleType) -> list[URLPattern | URLResolver]:
    """The URLs of the ``api`` namespace, given the apps' ``api.urls`` modules.

    Each module has ``router`` (a ``TwinRouter``, whose endpoints the root page
    lists, in the order of ``apps``) and ``urlpatterns`` (its routes and any
    other paths).
    """
    return [
        *api_root_urls([app.router for app in apps], ROOT_LINKS),
        *urlpatterns,
        *(pattern for app in apps for pattern in app.urlpatterns),
    ]
