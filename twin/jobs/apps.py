"""App config of the jobs on the twin (submitted work and the cards it holds)."""
from django.apps import AppConfig

__all__ = ["JobsConfig"]


class JobsConfig(AppConfig):
    name = "twin.jobs"
    label = "jobs"
    verbose_name = "Jobs"
