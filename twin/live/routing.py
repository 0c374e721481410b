"""Websocket URL routes (consumers arrive with the live-telemetry work)."""

__all__ = ["websocket_urlpatterns"]

websocket_urlpatterns: list = []
