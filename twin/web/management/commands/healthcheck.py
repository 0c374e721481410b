"""``manage.py healthcheck web|worker|beat|agent``: exit 0 when that process is healthy.

What docker-compose's health checks run inside each container (and what a
supervisor or an operator can run by hand):

* ``web [--url URL]``: ``GET <URL>/healthz/`` answers 200 (the server serves,
  and reaches the database and Redis).
* ``worker --name NAME``: the Celery worker ``NAME@<this host>`` (started with
  ``-n NAME@%h``) answers a ping through the broker.
* ``beat --schedule PATH [--max-age S]``: beat's schedule file was written
  within ``S`` seconds (beat saves it every few minutes while it runs) and the
  broker answers.
* ``agent --cluster NAME [--max-age S]``: the simulated agent of that cluster
  (``sim-<name>``) had a batch accepted within ``S`` seconds.

Prints one line saying why, and exits 1 when unhealthy.
"""
from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

__all__ = ["Command"]


class Command(BaseCommand):
    help = "Exit 0 when the web server, a worker, beat or the agent is healthy."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("service", choices=["web", "worker", "beat", "agent"])
        parser.add_argument("--url", default="http://127.0.0.1:8000",
                            help="web: the server's base URL")
        parser.add_argument("--name", default="celery",
                            help="worker: its node name without @host (-n NAME@%%h)")
        parser.add_argument("--schedule", default="var/celerybeat-schedule",
                            help="beat: its schedule file (-s)")
        parser.add_argument("--cluster", default="demo", help="agent: the cluster it feeds")
        parser.add_argument("--max-age", type=float, default=None,
                            help="beat, agent: how old the last sign of life may be (s)")
        parser.add_argument("--timeout", type=float, default=5.0)

    def handle(self, *args: Any, **opts: Any) -> None:
        check = getattr(self, f"_{opts['service']}")
        message = check(opts)
        self.stdout.write(f"{opts['service']}: {message}")

    # ------------------------------------------------------------------
    def _web(self, opts: dict[str, Any]) -> str:
        url = opts["url"].rstrip("/") + "/healthz/"
        try:
            with urllib.request.urlopen(url, timeout=opts["timeout"]) as response:
                return f"{response.status} {response.read(200).decode(errors='replace')}"
        except urllib.error.HTTPError as exc:
            raise CommandError(f"{url}: {exc.code} {exc.read(300).decode(errors='replace')}") \
                from exc
        except OSError as exc:
            raise CommandError(f"{url}: {exc}") from exc

    def _worker(self, opts: dict[str, Any]) -> str:
        from twin.celery import app

        node = f"{opts['name']}@{socket.gethostname()}"
        try:
            replies = app.control.ping(destination=[node], timeout=opts["timeout"])
        except Exception as exc:  # noqa: BLE001 - the broker is away: unhealthy
            raise CommandError(f"{node}: cannot ask through the broker: {exc}") from exc
        if not replies:
            raise CommandError(f"{node} did not answer a ping within {opts['timeout']:g} s")
        return f"{node} answered"

    def _beat(self, opts: dict[str, Any]) -> str:
        from twin.core.unavailable import ServiceUnavailable, check_broker

        max_age = opts["max_age"] or 600.0
        base = Path(opts["schedule"])
        files = [p for p in base.parent.glob(base.name + "*") if p.is_file()]
        if not files:
            raise CommandError(f"no schedule file {base}*: beat has not started")
        age = time.time() - max(p.stat().st_mtime for p in files)
        if age > max_age:
            raise CommandError(f"{base} last written {age:.0f} s ago (> {max_age:g} s)")
        try:
            check_broker(timeout=opts["timeout"])
        except ServiceUnavailable as exc:
            raise CommandError(str(exc.detail)) from exc
        return f"schedule written {age:.0f} s ago, broker reachable"

    def _agent(self, opts: dict[str, Any]) -> str:
        from twin.telemetry.models import TelemetryAgent

        max_age = opts["max_age"] or 60.0
        name = f"sim-{opts['cluster']}"[:100]
        agent = TelemetryAgent.objects.filter(name=name, cluster__name=opts["cluster"]).first()
        if agent is None or agent.last_seen is None:
            raise CommandError(f"agent {name} has sent nothing yet")
        age = (timezone.now() - agent.last_seen) / timedelta(seconds=1)
        if age > max_age:
            raise CommandError(f"agent {name}: last batch {age:.0f} s ago (> {max_age:g} s)")
        return f"agent {name}: last batch {age:.0f} s ago"
