"""Live telemetry: ingestion, processing in Celery, health and alerts."""
from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    name = "twin.telemetry"
    label = "telemetry"
    verbose_name = "Telemetry"

    def ready(self) -> None:
        from twin.telemetry import signals  # noqa: F401  (connects the receivers)
