"""URLs of the hardware API (in the ``api`` namespace, see ``twin.core.api.urls``)."""
from __future__ import annotations

from twin.core.api.routers import TwinRouter
from twin.hardware.api import builds, tokens, views

__all__ = ["router", "urlpatterns"]

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
router.register("tokens", tokens.ApiTokenViewSet, basename="apitoken")

urlpatterns = [*router.urls]
