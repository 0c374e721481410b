"""App config of the scenario runs."""
from django.apps import AppConfig

__all__ = ["ScenariosConfig"]


class ScenariosConfig(AppConfig):
    name = "twin.scenarios"
    label = "scenarios"
    verbose_name = "Scenario runs"

    #: What the roles of ``twin.core.roles`` may do here: operators start runs and
    #: cancel anyone's (everyone may cancel their own).
    role_permissions = {"operator": ("add_scenariorun", "change_scenariorun")}

    def ready(self) -> None:
        # The worker-startup hook (fail the runs a restarted worker owned) is a
        # Celery signal receiver; importing the tasks module connects it.
        from twin.scenarios import tasks  # noqa: F401
