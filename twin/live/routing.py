"""Websocket URL routes, mounted by ``twin.asgi`` behind the session auth stack."""
from django.urls import path

from twin.live.consumers import ClusterConsumer

__all__ = ["websocket_urlpatterns"]

websocket_urlpatterns = [
    path("ws/clusters/<int:cluster_id>/", ClusterConsumer.as_asgi(), name="live-cluster"),
]

# Scenario-run progress (twin.scenarios.consumers), appended by the scenarios app.
from twin.scenarios.consumers import ScenarioConsumer  # noqa: E402

websocket_urlpatterns.append(
    path("ws/scenarios/<int:run_id>/", ScenarioConsumer.as_asgi(), name="scenario-run"))

