"""Submitting, running, cancelling and reaping scenario runs — one code path for all.

The API, the ``run_scenario`` command and the Celery task all go through
here:

* :func:`submit` validates with the kind's ``prepare`` (a
  :class:`~twin.scenarios.kinds.ScenarioInputError` leaves nothing behind),
  reuses the result of an earlier identical run unless ``refresh`` is set,
  and otherwise records a queued run whose task is sent once the row is
  committed (``transaction.on_commit``), so a worker never looks for a row
  that is not there yet.
* :func:`execute` runs one queued run in this process: the Celery task calls
  it, and so does the command (with a progress bar).
* :func:`cancel` marks a run cancelled and revokes its task.
* :func:`reap` (a periodic Celery beat task) and :func:`fail_orphans` (a
  worker-startup hook) make sure no run stays ``running`` after its worker is
  gone.

Every status change is a compare-and-set ``UPDATE … WHERE status = …``: a run
cancelled (or reaped) while its worker computes keeps that status, and the
late result is dropped. Progress goes to the database at most every
``PROGRESS_INTERVAL_S`` and to the Channels group ``scenario.<id>`` (what
``ws/scenarios/<id>/`` streams) with the same rate. A daemon thread beats the
``heartbeat`` column every ``HEARTBEAT_S`` while a run computes, so the reaper
can tell a long computation from a dead worker.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import async_to_sync
from celery.exceptions import SoftTimeLimitExceeded
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connections, transaction
from django.db.models import Q
from django.utils import timezone

from simulation.topology import TopologyError
from twin.scenarios.choices import ScenarioStatusChoices as S
from twin.scenarios.kinds import ENGINE_VERSION, REGISTRY, ScenarioInputError, get_kind, jsonable
from twin.scenarios.models import ScenarioRun, group_name

__all__ = [
    "Cancelled",
    "cancel",
    "execute",
    "fail",
    "fail_orphans",
    "heartbeat_s",
    "params_hash",
    "publish",
    "reap",
    "stale_s",
    "submit",
    "time_limit_s",
]

log = logging.getLogger(__name__)

PROGRESS_INTERVAL_S = 0.25
UPDATE_EVENT = "scenario.update"


def _setting(name: str, default: float) -> float:
    """A Django setting, else the environment variable of that name, else ``default``."""
    return float(getattr(settings, name, None) or os.environ.get(name) or default)


def time_limit_s() -> int:
    """Hard limit of one run (the Celery task's ``time_limit``)."""
    return int(_setting("TWIN_SCENARIO_TIME_LIMIT_S", 900))


def heartbeat_s() -> float:
    """How often a running run says it is alive."""
    return _setting("TWIN_SCENARIO_HEARTBEAT_S", 5.0)


def stale_s() -> float:
    """Silence after which the reaper declares a running run's worker dead."""
    return _setting("TWIN_SCENARIO_STALE_S", 12 * heartbeat_s())


class Cancelled(Exception):
    """The run left ``running`` (cancelled, reaped) while it computed."""


def params_hash(kind: str, inputs: Mapping[str, Any]) -> str:
    """Cache key: the kind, its validated inputs (with the cluster as converted)
    and the engine version — equal keys mean equal results."""
    blob = json.dumps({"engine": ENGINE_VERSION, "kind": kind, "inputs": inputs},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(blob.encode()).hexdigest()


# ------------------------------------------------------------------ events
def publish(run_id: int, status: str, progress: float, message: str) -> bool:
    """Tell ``ws/scenarios/<id>/`` watchers; False (logged) if the layer is down.

    ``async_to_sync`` from a thread without a loop runs the send on a fresh
    event loop that is closed afterwards; the Redis layer drops that loop's
    connection pool when it closes, so nothing accumulates per call.
    """
    layer = get_channel_layer()
    if layer is None:
        return False
    event = {"type": UPDATE_EVENT, "id": run_id, "status": status,
             "progress": round(float(progress), 4), "message": message}
    try:
        async_to_sync(layer.group_send)(group_name(run_id), event)
    except Exception:  # noqa: BLE001 - a dead Redis must not fail the run
        log.warning("could not publish progress of scenario run %s", run_id, exc_info=True)
        return False
    return True


# ------------------------------------------------------------------ submit
def cached_run(digest: str) -> ScenarioRun | None:
    """The latest original (not itself cached) run that succeeded with these inputs."""
    return (ScenarioRun.objects.filter(params_hash=digest, status=S.SUCCEEDED,
                                       cached_from__isnull=True)
            .order_by("-finished", "-id").first())


def submit(kind_name: Any, params: Any, cluster: Any | None, user: Any | None = None, *,
           refresh: bool = False, enqueue: bool = True) -> ScenarioRun:
    """Validate and record a run (see the module docstring).

    Raises :class:`ScenarioInputError` (nothing written, nothing queued).
    Returns a queued run, or a succeeded one carrying a cached result.
    """
    kind = get_kind(kind_name)
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise ScenarioInputError.one("params", "must be a JSON object")
    inputs = jsonable(kind.prepare(params, cluster))
    digest = params_hash(kind.name, inputs)
    owner = user if user is not None and getattr(user, "is_authenticated", False) else None
    with transaction.atomic():
        source = None if refresh else cached_run(digest)
        common = {"kind": kind.name, "params": jsonable(dict(params)), "inputs": inputs,
                  "params_hash": digest, "cluster": cluster, "created_by": owner}
        if source is not None:
            now = timezone.now()
            return ScenarioRun.objects.create(
                **common, status=S.SUCCEEDED, progress=1.0, result=source.result,
                cached_from=source, started=now, finished=now, heartbeat=now,
                message=f"cached result of run #{source.pk}")
        run = ScenarioRun.objects.create(**common, task_id=str(uuid.uuid4()),
                                         message="queued")
        if enqueue:
            transaction.on_commit(lambda: enqueue_run(run.pk))
    return run


def enqueue_run(run_id: int) -> None:
    """Send the task; if the broker refuses, the run fails with what to check."""
    from twin.scenarios.tasks import run_scenario

    run = ScenarioRun.objects.filter(pk=run_id).values("task_id").first()
    if run is None:
        return
    try:
        run_scenario.apply_async(args=[run_id], task_id=run["task_id"] or None)
    except Exception as exc:  # noqa: BLE001 - any broker failure must reach the user
        fail(run_id, f"could not queue the run: {exc}. Is Redis running (REDIS_URL) and a "
                     f"worker started (celery -A twin worker)?", from_statuses=(S.QUEUED,))


# ------------------------------------------------------------------ cancel
def cancel(run_id: int) -> bool:
    """Cancel a queued or running run; False if it had already finished.

    The status changes first (so a late result cannot overwrite it), then
    the task is revoked — terminating it if a worker already runs it.
    """
    now = timezone.now()
    changed = ScenarioRun.objects.filter(pk=run_id, status__in=S.ACTIVE).update(
        status=S.CANCELLED, finished=now, message="cancelled")
    if not changed:
        return False
    task_id = ScenarioRun.objects.filter(pk=run_id).values_list("task_id", flat=True).first()
    if task_id:
        from twin.celery import app

        try:
            app.control.revoke(task_id, terminate=True, signal="SIGTERM")
        except Exception:  # noqa: BLE001 - the status already says cancelled
            log.warning("could not revoke the task of scenario run %s", run_id, exc_info=True)
    publish(run_id, S.CANCELLED, _progress_of(run_id), "cancelled")
    return True


def _progress_of(run_id: int) -> float:
    value = ScenarioRun.objects.filter(pk=run_id).values_list("progress", flat=True).first()
    return float(value or 0.0)


# ----------------------------------------------------------------- failing
def fail(run_id: int, error: str, *, field: str = "",
         from_statuses: tuple[str, ...] = (S.QUEUED, S.RUNNING)) -> bool:
    """Mark a run failed with ``error`` unless it has left ``from_statuses``."""
    message = (error.splitlines()[0] if error else "failed")[:200]
    changed = ScenarioRun.objects.filter(pk=run_id, status__in=from_statuses).update(
        status=S.FAILED, error=error, error_field=field[:200], finished=timezone.now(),
        message=message)
    if changed:
        publish(run_id, S.FAILED, _progress_of(run_id), message)
    return bool(changed)


def reap(now: datetime | None = None) -> list[int]:
    """Fail the running runs whose worker is gone; returns their ids.

    A run is given up when it ran past the time limit (plus a minute: the
    worker's own limit fires first when it is alive) or when its heartbeat
    has been silent for :func:`stale_s` seconds.
    """
    now = now or timezone.now()
    reaped: list[int] = []
    limit = time_limit_s()
    over = ScenarioRun.objects.filter(status=S.RUNNING,
                                      started__lt=now - timedelta(seconds=limit + 60))
    for run_id, worker in over.values_list("pk", "worker"):
        if fail(run_id, f"exceeded the time limit of {limit} s on {worker or 'a worker'} and "
                        f"was given up; simplify the scenario or raise "
                        f"TWIN_SCENARIO_TIME_LIMIT_S", from_statuses=(S.RUNNING,)):
            reaped.append(run_id)
    silent_since = now - timedelta(seconds=stale_s())
    stale = ScenarioRun.objects.filter(status=S.RUNNING).filter(
        Q(heartbeat__lt=silent_since) | Q(heartbeat__isnull=True, started__lt=silent_since)
        | Q(heartbeat__isnull=True, started__isnull=True))
    for run_id, worker, beat in stale.values_list("pk", "worker", "heartbeat"):
        seen = f"since {beat:%Y-%m-%d %H:%M:%S} UTC" if beat else "at all"
        if fail(run_id, f"the worker running it ({worker or 'unknown'}) stopped: no sign of "
                        f"life {seen}, so it probably died; run the scenario again",
                from_statuses=(S.RUNNING,)):
            reaped.append(run_id)
    return reaped


def fail_orphans(hostname: str) -> list[int]:
    """A worker starting as ``hostname`` fails the runs an earlier life of it owned."""
    if not hostname:
        return []
    failed = []
    for run_id in ScenarioRun.objects.filter(status=S.RUNNING, worker=hostname).values_list(
            "pk", flat=True):
        if fail(run_id, f"the worker {hostname} restarted while running it; run the scenario "
                        f"again", from_statuses=(S.RUNNING,)):
            failed.append(run_id)
    return failed


# ----------------------------------------------------------------- execute
class Reporter:
    """The ``progress`` callback a kind gets: database + websocket, rate limited;
    raises :class:`Cancelled` once the run is no longer ``running``."""

    def __init__(self, run_id: int, echo: Callable[[float, str], None] | None = None) -> None:
        self.run_id = run_id
        self.echo = echo
        self.last = 0.0

    def __call__(self, fraction: float, message: str) -> None:
        fraction = min(max(float(fraction), 0.0), 1.0)
        if self.echo is not None:
            self.echo(fraction, message)
        now = time.monotonic()
        if now - self.last < PROGRESS_INTERVAL_S and fraction < 1.0:
            return
        self.last = now
        changed = ScenarioRun.objects.filter(pk=self.run_id, status=S.RUNNING).update(
            progress=fraction, message=message[:200], heartbeat=timezone.now())
        if not changed:
            raise Cancelled(self.run_id)
        publish(self.run_id, S.RUNNING, fraction, message)


class Heartbeat(threading.Thread):
    """Beats ``heartbeat`` while a run computes (its own database connection)."""

    def __init__(self, run_id: int, interval: float) -> None:
        super().__init__(name=f"scenario-heartbeat-{run_id}", daemon=True)
        self.run_id = run_id
        self.interval = interval
        self.done = threading.Event()

    def run(self) -> None:
        try:
            while not self.done.wait(self.interval):
                ScenarioRun.objects.filter(pk=self.run_id, status=S.RUNNING).update(
                    heartbeat=timezone.now())
        except Exception:  # noqa: BLE001 - the reaper will notice the silence
            log.warning("heartbeat of scenario run %s stopped", self.run_id, exc_info=True)
        finally:
            connections.close_all()  # this thread's connections only

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=2.0)


def execute(run_id: int, *, worker: str = "",
            echo: Callable[[float, str], None] | None = None) -> ScenarioRun | None:
    """Run queued run ``run_id`` here and now; returns it as it ended.

    A run that is already ``running`` was delivered again after its worker
    died (late acks + ``reject_on_worker_lost``): it is failed with that
    reason rather than computed twice. Finished and cancelled runs are left
    alone.
    """
    now = timezone.now()
    claimed = ScenarioRun.objects.filter(pk=run_id, status=S.QUEUED).update(
        status=S.RUNNING, started=now, heartbeat=now, worker=worker[:200], progress=0.0,
        message="starting")
    run = ScenarioRun.objects.filter(pk=run_id).first()
    if run is None:
        return None
    if not claimed:
        if run.status == S.RUNNING:
            fail(run_id, f"the worker running it ({run.worker or 'unknown'}) was lost before it "
                         f"finished; run the scenario again", from_statuses=(S.RUNNING,))
            run.refresh_from_db()
        return run
    publish(run_id, S.RUNNING, 0.0, "starting")
    kind = REGISTRY.get(run.kind)
    if kind is None:
        fail(run_id, f"unknown kind {run.kind!r}: this worker does not have it",
             field="kind", from_statuses=(S.RUNNING,))
        run.refresh_from_db()
        return run
    beat = Heartbeat(run_id, heartbeat_s())
    beat.start()
    started = time.perf_counter()
    try:
        result = kind.run(run.inputs, Reporter(run_id, echo))
    except Cancelled:
        result = None
    except TopologyError as exc:
        fail(run_id, exc.message, field=f"params.{exc.field}", from_statuses=(S.RUNNING,))
        result = None
    except SoftTimeLimitExceeded:
        fail(run_id, f"exceeded the time limit of {time_limit_s()} s; simplify the scenario "
                     f"or raise TWIN_SCENARIO_TIME_LIMIT_S", from_statuses=(S.RUNNING,))
        result = None
    except Exception as exc:  # noqa: BLE001 - recorded on the run, with its traceback logged
        log.exception("scenario run %s failed", run_id)
        fail(run_id, f"{type(exc).__name__}: {exc}", from_statuses=(S.RUNNING,))
        result = None
    except BaseException:  # Ctrl-C in the command, SystemExit: never leave it running
        fail(run_id, "interrupted", from_statuses=(S.RUNNING,))
        raise
    finally:
        beat.stop()
    if result is not None:
        seconds = time.perf_counter() - started
        message = f"done in {seconds:.2f} s"
        finished = ScenarioRun.objects.filter(pk=run_id, status=S.RUNNING).update(
            status=S.SUCCEEDED, result=result, progress=1.0, finished=timezone.now(),
            message=message)
        if finished:
            publish(run_id, S.SUCCEEDED, 1.0, message)
    run.refresh_from_db()
    return run
