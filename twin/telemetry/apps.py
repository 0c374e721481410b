"""Live telemetry: ingestion, processing in Celery, health and alerts."""
from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    name = "twin.telemetry"
    label = "telemetry"
    verbose_name = "Telemetry"

    #: What the roles of ``twin.core.roles`` may do here: operators acknowledge alerts
    #: and manage the agents and scrape targets that feed the live state.
    role_permissions = {"operator": (
        "change_alert",
        "add_telemetryagent", "change_telemetryagent", "delete_telemetryagent",
        "add_scrapetarget", "change_scrapetarget", "delete_scrapetarget",
    )}

    def ready(self) -> None:
        from twin.telemetry import signals  # noqa: F401  (connects the receivers)
