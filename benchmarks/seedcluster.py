"""What the telemetry benchmarks share: Django set up on the benchmark's database,
a cluster of ``cards`` seed-512 cards under a name of the benchmark's own
(rebuilt when its card count differs), so a rerun reuses the last build, and the
real services they measure (uvicorn and a prefork Celery worker on a private queue)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

__all__ = ["ensure_cluster", "isolate", "setup", "start_services"]

ROOT = Path(__file__).resolve().parent.parent


def isolate(bench: str, *, services: bool = False) -> str:
    """Private namespaces for one run of benchmark ``bench``; returns the run's id.

    Set in the environment, so every child process inherits them: a telemetry key
    prefix of its own (a demo or another run on the same Redis is untouched), with
    ``services`` also a channel prefix and a Celery queue, and without DATABASE_URL
    the benchmark's own SQLite file under var/ (kept: a rerun reuses its cluster).
    """
    import secrets

    run_id = secrets.token_hex(4)
    os.environ["TWIN_TELEMETRY_PREFIX"] = f"tw{bench}{run_id}"
    if services:
        os.environ["TWIN_CHANNEL_PREFIX"] = f"twin{bench}{run_id}"
        os.environ["TWIN_CELERY_QUEUE"] = f"twin-{bench}-{run_id}"
    if not os.environ.get("DATABASE_URL"):
        var = Path(os.environ.get("TWIN_VAR_DIR", ROOT / "var"))
        var.mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("TWIN_SQLITE_PATH", str(var / f"{bench}-bench.sqlite3"))
    return run_id


def setup() -> None:
    """Django set up and migrated (the benchmark's own database)."""
    warnings.filterwarnings("ignore", message="No directory at")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def ensure_cluster(name: str, cards: int) -> Any:
    """The cluster ``name`` with ``cards`` cards (seed-512 supernodes), built if missing."""
    from twin.hardware.builder import build_cluster, delete_cluster
    from twin.hardware.models import Card, Cluster

    if cards % 512:
        sys.exit("--cards must be a multiple of 512 (seed-512 supernodes)")
    cluster = Cluster.objects.filter(name=name).first()
    if cluster and Card.objects.filter(supernode__cluster=cluster).count() != cards:
        delete_cluster(cluster.pk)
        cluster = None
    if cluster is None:
        print(f"building {cards:,} cards …", flush=True)
        build_cluster("seed-512", name=name, supernodes=cards // 512)
        cluster = Cluster.objects.get(name=name)
    return cluster


def start_services(queue: str, workers: int, web_workers: int, env_extra: dict[str, str],
                   log_prefix: str = "", web_nice: int = 0) -> tuple[str, list[subprocess.Popen]]:
    """uvicorn (``web_workers`` processes, at ``nice`` ``web_nice``) and a prefork
    worker (``workers`` processes) serving ``queue``, with this process's settings
    plus ``env_extra``; returns the base URL once both answer. Logs in
    ``var/bench-logs/``."""
    from django.conf import settings

    from twin.celery import app
    from twin.core.localnet import free_port, use_queue, wait_http, worker_queues

    env = dict(os.environ)
    env.update(TWIN_CELERY_QUEUE=queue, REDIS_URL=settings.REDIS_URL, TWIN_LOG_LEVEL="WARNING",
               **env_extra)
    port = free_port()
    logs = ROOT / "var" / "bench-logs"
    logs.mkdir(parents=True, exist_ok=True)
    web_log, worker_log = logs / f"{log_prefix}web.log", logs / f"{log_prefix}worker.log"
    web = subprocess.Popen(
        [*(["nice", "-n", str(web_nice)] if web_nice else []),
         sys.executable, "-m", "uvicorn", "twin.asgi:application", "--host", "127.0.0.1",
         "--port", str(port), "--lifespan", "off", "--log-level", "warning", "--no-access-log",
         "--workers", str(web_workers)],
        cwd=ROOT, env=env, stdout=open(web_log, "w"), stderr=subprocess.STDOUT)  # noqa: SIM115
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "twin", "worker", "-Q", worker_queues(queue), "-c",
         str(workers), "-P", "prefork", "-l", "warning", "--without-gossip",
         "--without-mingle", "--without-heartbeat", "-n", f"{queue}@%h"],
        cwd=ROOT, env=env, stdout=open(worker_log, "w"),  # noqa: SIM115
        stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/api/telemetry/whoami/", web)
    except RuntimeError as exc:
        sys.exit(f"uvicorn did not start ({exc}); see {web_log}")
    use_queue(app, queue)
    deadline = time.monotonic() + 60
    while not app.control.ping(destination=[f"{queue}@{os.uname().nodename}"], timeout=0.5):
        if time.monotonic() > deadline or worker.poll() is not None:
            sys.exit(f"the worker did not start; see {worker_log}")
    return base, [web, worker]
