from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "twin.core"
    label = "core"
    verbose_name = "Core"
