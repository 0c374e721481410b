"""Local servers for tests and benchmarks: a free port, waiting for it, stopping it.

The test fixtures and the benchmarks all launch ``uvicorn``, Celery and agent
subprocesses; they share these helpers so "ready" and "stopped" mean the same
thing everywhere.
"""
from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any

__all__ = ["free_port", "stop_process", "telemetry_queue", "use_queue", "wait_celery",
           "wait_http", "worker_queues"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_http(url: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """Return once ``url`` answers with any HTTP status; raise if ``proc`` dies first.

    Any status counts: a 401 from an authenticated endpoint proves the app is up
    as well as a 200 does.
    """
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not answer within {timeout:g} s")
        time.sleep(0.2)


def stop_process(proc: subprocess.Popen, timeout: float = 20.0) -> None:
    """SIGTERM (a worker finishes its task, the agent its send), SIGKILL after
    ``timeout``; always reaped, so no zombie outlives a test."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_celery(app: Any, queue: str, proc: subprocess.Popen, log: str,
                timeout: float = 60.0) -> None:
    """Return once the worker ``queue@<host>`` (started with ``-n queue@%h``)
    answers a ping; raise, naming ``log``, if ``proc`` dies or ``timeout`` passes.
    A task sent before then could sit in the queue while a test's clock runs."""
    deadline = time.monotonic() + timeout
    while not app.control.ping(destination=[f"{queue}@{socket.gethostname()}"], timeout=0.5):
        if proc.poll() is not None:
            raise RuntimeError(f"the Celery worker exited early; see {log}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the Celery worker did not answer within {timeout:g} s; "
                               f"see {log}")


def telemetry_queue(queue: str) -> str:
    """The telemetry queue that goes with default queue ``queue`` (what the
    settings derive from ``TWIN_CELERY_QUEUE`` unless
    ``TWIN_CELERY_TELEMETRY_QUEUE`` names another)."""
    return f"{queue}-telemetry"


def worker_queues(queue: str) -> str:
    """``celery worker -Q`` for one worker serving both queues of a process
    started with ``TWIN_CELERY_QUEUE=queue`` (tests and benchmarks; the demo and
    docker-compose run one worker per queue)."""
    return f"{queue},{telemetry_queue(queue)}"


def use_queue(app: Any, queue: str) -> None:
    """Make this process send its tasks as one started with
    ``TWIN_CELERY_QUEUE=queue`` would: jobs to ``queue``, telemetry to its
    telemetry queue (Celery caches the routes, so they are rebuilt here)."""
    app.conf.task_default_queue = queue
    app.conf.task_routes = {"twin.telemetry.*": {"queue": telemetry_queue(queue)}}
    app.amqp.flush_routes()
    app.amqp.__dict__.pop("router", None)
