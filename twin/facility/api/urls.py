"""URLs of the facility API (in the ``api`` namespace, under ``/api/facility/``)."""
from __future__ import annotations

from twin.core.api.routers import TwinRouter
from twin.facility.api import views

__all__ = ["router", "urlpatterns"]

router = TwinRouter()
router.register("facility/sites", views.SiteViewSet, basename="facility-site")
router.register("facility/power", views.PowerElementViewSet, basename="facility-power")
router.register("facility/cooling", views.CoolingElementViewSet, basename="facility-cooling")
router.register("facility/racks", views.RackFacilityViewSet, basename="facility-rack")
router.register("facility/capping", views.CappingPolicyViewSet, basename="facility-capping")
router.register("facility/cap-events", views.CapEventViewSet, basename="facility-cap-event")
router.register("facility/history", views.PlantHistoryViewSet, basename="facility-history")
router.register("facility/redfish-sources", views.RedfishSourceViewSet,
                basename="facility-redfish-source")
router.register("facility/redfish-bindings", views.RedfishBindingViewSet,
                basename="facility-redfish-binding")

urlpatterns = [*router.urls]
