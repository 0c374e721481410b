"""``manage.py poll_redfish``: read the configured Redfish services into the facility's
readings (``twin.facility.redfish``), once or in a loop.

Without a worker and its beat (which runs the ``twin.telemetry.poll_redfish`` task every
5 s), this is the poller: every enabled ``RedfishSource`` is read when its
``interval_s`` has passed; ``--once`` polls every enabled source now and exits
(status 1 when any binding failed, with what failed on stderr).

    python manage.py poll_redfish            # loop
    python manage.py poll_redfish --once     # one pass, e.g. from cron or a test
"""
from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

__all__ = ["Command"]


class Command(BaseCommand):
    help = "Poll the configured Redfish services (CDUs, PDUs) into the facility readings."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true",
                            help="Poll every enabled source once, now, and exit.")
        parser.add_argument("--every", type=float, default=1.0,
                            help="Loop: how often to look for sources due (s).")

    def handle(self, *args: Any, **options: Any) -> None:
        from twin.facility import redfish
        from twin.facility.models import RedfishSource
        from twin.telemetry.config import conf, redis_client

        r, prefix = redis_client(), conf().prefix
        if options["once"]:
            failed = []
            for source in RedfishSource.objects.filter(enabled=True).select_related("site"):
                res = redfish.poll_source(source, r, prefix)
                self.stdout.write(f"{res.source}: {res.stored} readings stored"
                                  + (f", {res.refused} values refused" if res.refused else ""))
                failed += [f"{res.source} {uri}: {why}" for uri, why in res.errors.items()]
            if failed:
                raise CommandError("; ".join(failed))
            return
        while True:
            for res in redfish.poll_due(r, prefix):
                self.stdout.write(f"{res.source}: {res.stored} readings stored"
                                  + (f", {res.refused} values refused" if res.refused else "")
                                  + (f", {len(res.errors)} failed" if res.errors else ""))
            time.sleep(max(float(options["every"]), 0.1))
