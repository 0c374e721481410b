"""URLs of the scenarios API (in the ``api`` namespace, see ``twin.core.api.urls``).

``clusters`` adds only the ``route`` action (``cluster-route``) to the hardware
API's clusters; the root page lists ``clusters`` once, as hardware's.
"""
from __future__ import annotations

from twin.core.api.routers import TwinRouter
from twin.scenarios.api import views

__all__ = ["router", "urlpatterns"]

router = TwinRouter()
router.register("scenarios", views.ScenarioRunViewSet)
router.register("clusters", views.ClusterRouteViewSet, basename="cluster")

urlpatterns = [*router.urls]
