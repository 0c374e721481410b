from django.apps import AppConfig
from django.db.backends.signals import connection_created
from django.db.models.signals import post_migrate


class CoreConfig(AppConfig):
    name = "twin.core"
    label = "core"
    verbose_name = "Core"

    def ready(self) -> None:
        from twin.core.aggregates import install
        from twin.core.roles import grant_roles

        # Every connection reports its writes to the cached aggregates (twin.core.aggregates).
        connection_created.connect(install, dispatch_uid="twin.core.aggregates.install")

        # After django.contrib.auth's receiver (it is installed first): the apps'
        # permissions exist when the roles are given them.
        post_migrate.connect(grant_roles, dispatch_uid="twin.core.roles.grant_roles")
