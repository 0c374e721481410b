"""URLs of the REST API, its OpenAPI schema and its offline docs (namespace ``api``)."""
from __future__ import annotations

from typing import Any

from django.urls import path
from drf_spectacular.views import (
    SpectacularAPIView,
    SpectacularRedocView,
    SpectacularSwaggerView,
)
from rest_framework.routers import DefaultRouter

from twin.api import builds, views
from twin.scenarios.api import ScenarioRunViewSet

__all__ = ["app_name", "urlpatterns"]

app_name = "api"


class TwinRouter(DefaultRouter):
    """The default router, whose root page also links the schema, docs and token."""

    extra_root_links = {"token": "token", "schema": "schema", "docs": "docs", "redoc": "redoc"}

    def get_api_root_view(self, api_urls: Any = None) -> Any:
        api_root_dict = {prefix: self.routes[0].name.format(basename=basename)
                         for prefix, _viewset, basename in self.registry}
        api_root_dict.update(self.extra_root_links)
        return self.APIRootView.as_view(api_root_dict=api_root_dict)


router = TwinRouter()
router.register("accelerators", views.AcceleratorTypeViewSet)
router.register("clusters", views.ClusterViewSet)
router.register("supernodes", views.SuperNodeViewSet)
router.register("racks", views.RackViewSet)
router.register("servers", views.ServerViewSet)
router.register("cards", views.CardViewSet)
router.register("devices", views.NetworkDeviceViewSet)
router.register("links", views.LinkViewSet)
router.register("builds", builds.ClusterBuildViewSet)
router.register("presets", builds.PresetViewSet, basename="preset")
router.register("scenarios", ScenarioRunViewSet)

urlpatterns = [
    path("token/", views.TokenView.as_view(), name="token"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api:schema"), name="docs"),
    # Our template: the stock one loads web fonts from Google (a CDN).
    path("redoc/", SpectacularRedocView.as_view(url_name="api:schema",
                                                template_name="api/redoc.html"), name="redoc"),
    *router.urls,
]
