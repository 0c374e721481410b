"""``manage.py serve``: the production web server, the one way the demo, docker-compose
and the benchmarks start it.

One Python process answers at most one core's worth of requests (the ASGI app runs
every view in a thread, under one interpreter lock): the demo served ~97 req/s of
dashboard reads on 2 cores with a second user waiting seconds. This runs uvicorn's
process manager with ``--workers N`` (``TWIN_WEB_WORKERS``, default: one per core)
instead: N processes share the listening socket, a worker that dies is started
again by uvicorn's supervisor, and each process holds its own database pool
(``TWIN_DB_POOL_MAX`` connections, set by ``twin/asgi.py``). What the processes
share lives in Redis: websocket groups go through the Channels Redis layer (a
frame sent by any process reaches every socket of every process), the cached
aggregates (``twin.core.aggregates``), the login throttle.

The command replaces itself with uvicorn (``exec``), so signals reach uvicorn's
manager directly; ``--print`` shows the command instead.

``--nice N`` (``TWIN_WEB_NICE``) lowers the processes' CPU priority first: where the
web processes and the telemetry workers share cores (the demo, one machine), a crowd
of readers otherwise takes the cores the live tick needs, and the tick, which is
latency-bound, falls behind (benchmarks/serving.py; live_million ``--web-nice``). At
nice 10 the kernel gives a runnable worker ~9x the web's share when both want a core
(CFS weights 1,024 against 110), and the web all the cores the workers leave idle.
"""
from __future__ import annotations

import os
import shlex
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

__all__ = ["Command", "uvicorn_argv", "web_nice", "web_workers"]


def web_workers() -> int:
    """``TWIN_WEB_WORKERS``, else one process per core the machine has."""
    raw = os.environ.get("TWIN_WEB_WORKERS", "").strip()
    if not raw:
        return max(1, os.cpu_count() or 1)
    try:
        workers = int(raw)
    except ValueError:
        raise CommandError(f"TWIN_WEB_WORKERS={raw!r} is not a whole number of processes "
                           f"(e.g. 2)") from None
    if workers < 1:
        raise CommandError(f"TWIN_WEB_WORKERS={workers}: give at least 1 process")
    return workers


def web_nice() -> int:
    """``TWIN_WEB_NICE``: how much to lower the web processes' priority (0: not)."""
    raw = os.environ.get("TWIN_WEB_NICE", "").strip() or "0"
    try:
        nice = int(raw)
    except ValueError:
        raise CommandError(f"TWIN_WEB_NICE={raw!r} is not a whole number (0-19)") from None
    if not 0 <= nice <= 19:
        raise CommandError(f"TWIN_WEB_NICE={nice}: give 0 (as is) to 19 (lowest)")
    return nice


def uvicorn_argv(host: str, port: int, workers: int, *, access_log: bool = False,
                 log_level: str = "info") -> list[str]:
    """The uvicorn command line: the ASGI app (``twin.asgi``), its processes, no
    lifespan (Django has none), and no access log unless asked (a line written per
    request, hundreds a second under a crowd, is work for nobody)."""
    argv = [sys.executable, "-m", "uvicorn", "twin.asgi:application", "--host", host,
            "--port", str(port), "--lifespan", "off", "--workers", str(workers),
            "--log-level", log_level,
            # A worker stuck this long on its shutdown is killed (a redeploy, Ctrl-C).
            "--timeout-graceful-shutdown", "10"]
    if not access_log:
        argv.append("--no-access-log")
    return argv


class Command(BaseCommand):
    help = "Run the ASGI web server: uvicorn with TWIN_WEB_WORKERS processes."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=os.environ.get("TWIN_WEB_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int,
                            default=int(os.environ.get("TWIN_WEB_PORT", 8000)))
        parser.add_argument("--workers", type=int, default=None,
                            help="processes (default: TWIN_WEB_WORKERS, else one per core)")
        parser.add_argument("--access-log", action="store_true",
                            default=os.environ.get("TWIN_WEB_ACCESS_LOG", "") in {"1", "true"},
                            help="log a line per request (TWIN_WEB_ACCESS_LOG=1)")
        parser.add_argument("--log-level", default="info",
                            choices=["critical", "error", "warning", "info", "debug"])
        parser.add_argument("--nice", type=int, default=None,
                            help="lower the CPU priority by this much, 0-19 (default: "
                                 "TWIN_WEB_NICE, else 0)")
        parser.add_argument("--print", action="store_true", dest="print_only",
                            help="print the command instead of running it")

    def handle(self, *args: Any, **options: Any) -> None:
        workers = options["workers"] if options["workers"] is not None else web_workers()
        if workers < 1:
            raise CommandError(f"--workers {workers}: give at least 1 process")
        argv = uvicorn_argv(options["host"], options["port"], workers,
                            access_log=options["access_log"], log_level=options["log_level"])
        nice = options["nice"] if options["nice"] is not None else web_nice()
        if not 0 <= nice <= 19:
            raise CommandError(f"--nice {nice}: give 0 (as is) to 19 (lowest)")
        if options["print_only"]:
            self.stdout.write(shlex.join((["nice", "-n", str(nice)] if nice else []) + argv))
            return
        if nice:
            os.nice(nice)  # inherited by uvicorn's processes through exec and spawn
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(argv[0], argv)
