from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _load_catalogue(sender, using: str = "default", **kwargs) -> None:  # type: ignore[no-untyped-def]
    from twin.hardware.catalogue import load_catalogue

    load_catalogue(using=using)


class HardwareConfig(AppConfig):
    name = "twin.hardware"
    label = "hardware"
    verbose_name = "Hardware"

    #: What the roles of ``twin.core.roles`` may do here (each role includes the one
    #: before; every role views everything). Operators build clusters from presets (a
    #: build adds a cluster; replacing one also needs delete_cluster); hardware admins
    #: edit and delete everything.
    role_permissions = {
        "operator": ("add_cluster", "add_clusterbuild"),
        "hardware admin": ("*",),
    }

    def ready(self) -> None:
        post_migrate.connect(_load_catalogue, sender=self)
        from twin.core.access import register_provider
        from twin.core.tokens import register_resolver
        from twin.hardware.models.grants import grants_of
        from twin.hardware.models.tokens import resolve_token

        register_provider(grants_of)
        register_resolver(resolve_token)
