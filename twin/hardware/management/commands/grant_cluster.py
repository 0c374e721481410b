"""``manage.py grant_cluster <username> <cluster> [see|change]``: limit a user to some
clusters (``twin.core.access``, docs/access.md).

The first grant restricts the user to their granted clusters; ``--remove`` takes a
cluster away (removing the last grant gives the user every cluster back, as for a
user who never had one); ``--list`` prints the user's grants. ``<cluster>`` is a
cluster's name or id.
"""
from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from twin.core.access import CHANGE, SEE
from twin.hardware.models import Cluster, ClusterGrant

__all__ = ["Command"]


class Command(BaseCommand):
    help = "Grant a user 'see' or 'change' on a cluster (the user is then limited to grants)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("cluster", nargs="?", help="A cluster's name or id.")
        parser.add_argument("level", nargs="?", choices=(SEE, CHANGE), default=SEE)
        parser.add_argument("--remove", action="store_true", help="Take the cluster away.")
        parser.add_argument("--list", action="store_true", help="Print the user's grants.")

    def handle(self, *args: Any, **options: Any) -> None:
        username = options["username"]
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}; create it first (manage.py "
                               f"createsuperuser, or the admin's Users page)")
        if not options["list"]:
            if not options["cluster"]:
                raise CommandError("give a cluster (name or id), or --list")
            cluster = self._cluster(options["cluster"])
            with transaction.atomic():
                if options["remove"]:
                    ClusterGrant.objects.filter(user=user, cluster=cluster).delete()
                else:
                    ClusterGrant.objects.update_or_create(
                        user=user, cluster=cluster, defaults={"level": options["level"]})
        grants = list(ClusterGrant.objects.filter(user=user).select_related("cluster")
                      .order_by("cluster__name"))
        listed = ", ".join(f"{g.cluster.name} ({g.level})" for g in grants)
        self.stdout.write(f"{username}: {listed or 'every cluster (no grants)'}")

    @staticmethod
    def _cluster(text: str) -> Cluster:
        cluster = Cluster.objects.filter(name=text).first()
        if cluster is None and text.isdigit():
            cluster = Cluster.objects.filter(pk=int(text)).first()
        if cluster is None:
            names = ", ".join(Cluster.objects.order_by("name").values_list("name", flat=True)[:10])
            raise CommandError(f"no cluster {text!r} (clusters: {names or 'none'})")
        return cluster
