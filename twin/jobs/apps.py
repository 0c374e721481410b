"""App config of the jobs on the twin (submitted work and the cards it holds)."""
from django.apps import AppConfig

__all__ = ["JobsConfig"]


class JobsConfig(AppConfig):
    name = "twin.jobs"
    label = "jobs"
    verbose_name = "Jobs"

    #: What the roles of ``twin.core.roles`` may do here: operators submit and cancel
    #: jobs and upload traces; viewers read (every role views every model).
    role_permissions = {
        "operator": ("add_job", "change_job", "add_trace"),
        "hardware admin": ("*",),
    }

    def ready(self) -> None:
        from twin.core.deletion import register_contents
        from twin.hardware.models import Card, Cluster
        from twin.jobs.models import Allocation, Job

        # A card a job holds, and a cluster with jobs, are not deleted by accident.
        register_contents(Card, "allocations", lambda card: Allocation.objects.filter(card=card))
        register_contents(Cluster, "jobs", lambda cluster: Job.objects.filter(cluster=cluster))
