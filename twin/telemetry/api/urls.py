"""URLs of telemetry under ``/api/telemetry/`` (namespace ``telemetry``).

Agents post to ``clusters/<id>/batches/`` (native JSON/msgpack),
``clusters/<id>/metrics/`` (Prometheus text), ``clusters/<id>/write``
(Prometheus remote write) and ``clusters/<id>/facility/`` (CDU, PDU and power-shelf
readings); ``clusters/<id>/layout/`` gives
the card order for columnar batches and ``whoami/`` tells an agent its cluster.
"""
from __future__ import annotations

from django.urls import path
from rest_framework.routers import DefaultRouter

from twin.telemetry.api import ingest_views, views

__all__ = ["app_name", "urlpatterns"]

app_name = "telemetry"

router = DefaultRouter()
router.register("agents", views.TelemetryAgentViewSet, basename="agent")
router.register("targets", views.ScrapeTargetViewSet, basename="target")
router.register("alerts", views.AlertViewSet, basename="alert")
router.register("health", views.CardHealthViewSet, basename="health")
router.register("history", views.MinuteViewSet, basename="minute")

urlpatterns = [
    path("clusters/<int:cluster_id>/batches/", ingest_views.ingest_batch, name="batches"),
    path("clusters/<int:cluster_id>/metrics/", ingest_views.ingest_prometheus, name="prometheus"),
    path("clusters/<int:cluster_id>/write", ingest_views.ingest_remote_write,
         name="remote_write"),
    path("clusters/<int:cluster_id>/write/", ingest_views.ingest_remote_write),
    path("clusters/<int:cluster_id>/facility/", ingest_views.ingest_facility,
         name="facility"),
    path("clusters/<int:cluster_id>/layout/", ingest_views.layout_view, name="layout"),
    path("clusters/<int:cluster_id>/coolant/", ingest_views.coolant_view, name="coolant"),
    path("clusters/<int:cluster_id>/caps/", ingest_views.caps_view, name="caps"),
    path("clusters/<int:cluster_id>/racks/<int:rack_id>/plant/", views.rack_plant,
         name="rack-plant"),
    path("clusters/<int:cluster_id>/rollup/", views.cluster_rollup, name="rollup"),
    path("clusters/<int:cluster_id>/", views.cluster_live, name="cluster"),
    path("cards/<int:card_id>/", views.card_live, name="card"),
    path("metrics/", views.metric_list, name="metrics"),
    path("whoami/", ingest_views.whoami, name="whoami"),
    *router.urls,
]
