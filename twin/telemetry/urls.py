"""URLs of telemetry under ``/api/telemetry/`` (namespace ``telemetry``).

Agents post to ``clusters/<id>/batches/`` (native JSON/msgpack) and
``clusters/<id>/metrics/`` (Prometheus text); ``clusters/<id>/layout/`` gives
the card order for columnar batches and ``whoami/`` tells an agent its cluster.
"""
from __future__ import annotations

from django.urls import path
from rest_framework.routers import DefaultRouter

from twin.telemetry import api, views

__all__ = ["app_name", "urlpatterns"]

app_name = "telemetry"

router = DefaultRouter()
router.register("agents", api.TelemetryAgentViewSet, basename="agent")
router.register("targets", api.ScrapeTargetViewSet, basename="target")
router.register("alerts", api.AlertViewSet, basename="alert")
router.register("health", api.CardHealthViewSet, basename="health")
router.register("history", api.MinuteViewSet, basename="minute")

urlpatterns = [
    path("clusters/<int:cluster_id>/batches/", views.ingest_batch, name="batches"),
    path("clusters/<int:cluster_id>/metrics/", views.ingest_prometheus, name="prometheus"),
    path("clusters/<int:cluster_id>/layout/", views.layout_view, name="layout"),
    path("clusters/<int:cluster_id>/rollup/", api.cluster_rollup, name="rollup"),
    path("clusters/<int:cluster_id>/", api.cluster_live, name="cluster"),
    path("cards/<int:card_id>/", api.card_live, name="card"),
    path("metrics/", api.metric_list, name="metrics"),
    path("whoami/", views.whoami, name="whoami"),
    *router.urls,
]
