"""URLs of the jobs API (in the ``api`` namespace, see ``twin.core.api.urls``).

``jobs/traces`` and ``jobs/allocations`` are registered before ``jobs`` so their
paths are not read as a job id; ``clusters`` adds only the ``allocations`` action
to the hardware API's clusters.
"""
from __future__ import annotations

from twin.core.api.routers import TwinRouter
from twin.jobs.api import views

__all__ = ["router", "urlpatterns"]

router = TwinRouter()
router.register("jobs/traces", views.TraceViewSet)
router.register("jobs/allocations", views.AllocationViewSet)
router.register("jobs", views.JobViewSet)
router.register("clusters", views.ClusterAllocationsViewSet, basename="cluster")

urlpatterns = [*router.urls]
