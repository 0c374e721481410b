"""App config of the scenario runs."""
from django.apps import AppConfig

__all__ = ["ScenariosConfig"]


class ScenariosConfig(AppConfig):
    name = "twin.scenarios"
    label = "scenarios"
    verbose_name = "Scenario runs"

    def ready(self) -> None:
        # The worker-startup hook (fail the runs a restarted worker owned) is a
        # Celery signal receiver; importing the tasks module connects it.
        from twin.scenarios import tasks  # noqa: F401
