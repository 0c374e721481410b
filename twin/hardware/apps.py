from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _load_catalogue(sender, using: str = "default", **kwargs) -> None:  # type: ignore[no-untyped-def]
    from twin.hardware.catalogue import load_catalogue

    load_catalogue(using=using)


class HardwareConfig(AppConfig):
    name = "twin.hardware"
    label = "hardware"
    verbose_name = "Hardware"

    def ready(self) -> None:
        post_migrate.connect(_load_catalogue, sender=self)
