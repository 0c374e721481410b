"""One lifecycle for every background job: queue, claim, report, finish, fail, cancel, reap.

A :class:`JobRunner` is made once per job model (``ScenarioRun``,
``ClusterBuild``) with that model's words and settings; the app's own runner
module keeps only what is specific to it (how a scenario is validated and
cached, how a build is called) and hands the runner a *work* function:

* :meth:`JobRunner.enqueue` sends the job's task (the caller passes the task's
  ``apply_async``, so no runner imports its app's ``tasks``); if the broker
  refuses, the job fails with what to check.
* :meth:`JobRunner.execute` claims a queued job (``queued → running``), calls
  ``work(job, report)`` with a heartbeat thread running, and ends the job
  ``succeeded`` with the :class:`Outcome` it returns or ``failed`` with what
  went wrong. A job already ``running`` was delivered again after its worker
  died (late acks + ``reject_on_worker_lost``): it is failed with that reason
  rather than computed twice.
* :meth:`JobRunner.cancel` marks a queued or running job cancelled and revokes
  its task.
* :meth:`JobRunner.reap` (a periodic Celery beat task) and
  :meth:`JobRunner.fail_orphans` (a worker-startup hook) make sure no job stays
  ``running`` after its worker is gone.
* :meth:`JobRunner.reap_queued` (the same beat task) makes sure no job stays
  ``queued`` because its message is gone (a broker that restarted without it, issue
  22): a job no worker took ``<PREFIX>_QUEUED_S`` after its task was sent is sent
  again under a new task id, and one still queued ``<PREFIX>_QUEUED_FAIL_S`` after it
  was created is failed with that reason. Should the first message turn up after
  all, the second delivery finds the job claimed under the other task id and
  leaves it alone (:meth:`execute`), so a job is never computed twice.

Work may hand its job on instead of finishing it (a split scenario run sends
its parts as tasks of their own): it returns ``Outcome(None, deferred=True)``
and the job stays ``running`` for whoever it was handed to, who finishes or
fails it with :meth:`JobRunner.finish` / :meth:`JobRunner.fail`. While such a
job matches the runner's ``handed_off`` condition (its parts are still queued
or running), the reaper and the orphan check leave it to the parts' own.

Every status change is a compare-and-set ``UPDATE … WHERE status = …``: a job
cancelled (or reaped) while its worker computes keeps that status, and the late
result is dropped. ``report(fraction, message)`` writes progress at most every
``progress_interval_s`` and raises :class:`Cancelled` once the row has left
``running``, so the work stops at its next report. A daemon thread beats the
``heartbeat`` column every ``<PREFIX>_HEARTBEAT_S`` on its own database
connection, so the reaper can tell a long computation from a dead worker.

Work that holds a transaction of its own for its whole length (a cluster build
writes every row in one) cannot write progress on its connection: nobody else
would see it before the commit, and the row lock would block a cancel. While
the work is inside a transaction it opened, the report is handed to the
heartbeat thread instead, which writes it on its connection and notices a
cancellation there. (On SQLite the build's transaction holds the only write
lock, so these writes wait for its commit; PostgreSQL shows them live.)
"""
from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import DatabaseError, connection, connections
from django.db.models import Q
from django.utils import timezone

from twin.core.choices import JobStatusChoices as S
from twin.core.jobs.models import Job

__all__ = [
    "Cancelled",
    "Heartbeat",
    "JobError",
    "JobRunner",
    "Outcome",
    "Publish",
    "Reporter",
    "Send",
    "Work",
]

log = logging.getLogger(__name__)

J = TypeVar("J", bound=Job)

#: ``publish(job_id, status, progress, message)``: tell watchers (a Channels group).
Publish = Callable[[int, str, float, str], object]
#: A task's ``apply_async``: called as ``send(args=[job_id], task_id=…)``.
Send = Callable[..., object]
#: ``work(job, report) -> Outcome``: what :meth:`JobRunner.execute` runs.
Work = Callable[[J, "Reporter"], "Outcome"]


class Cancelled(Exception):
    """The job left ``running`` (cancelled, reaped) while it computed."""


class JobError(Exception):
    """A failure the work can explain: ``message`` for the user, ``field`` the
    input it blames (``params.ranks``), if any."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.field = field


@dataclass(frozen=True)
class Outcome:
    """What finished work hands back: the result, the message to show (default
    ``done in … s``) and other columns to set in the same compare-and-set
    update (a build's ``cluster_id``), so a reader never sees one without the
    other. ``deferred``: the work handed the job on (see the module docstring);
    it stays ``running``."""

    result: Any
    message: str = ""
    fields: Mapping[str, Any] = field(default_factory=dict)
    deferred: bool = False


class JobRunner(Generic[J]):
    """The lifecycle of the jobs of one model (see the module docstring).

    ``noun`` names a job in messages and logs ("scenario run", "build");
    ``again`` is what to do after a lost worker ("run the scenario again");
    ``smaller`` what to do about the time limit ("simplify the scenario").
    Settings (or environment variables) ``<settings_prefix>_TIME_LIMIT_S``,
    ``_HEARTBEAT_S`` and ``_STALE_S`` tune the limits; ``publish`` is called
    on every status change and progress write. ``handed_off``: the jobs
    whose liveness other rows show (see the module docstring), which
    :meth:`reap` and :meth:`fail_orphans` skip.
    """

    def __init__(self, model: type[J], *, noun: str, again: str, smaller: str,
                 settings_prefix: str, time_limit_s: int, publish: Publish | None = None,
                 progress_interval_s: float = 0.25, handed_off: Q | None = None) -> None:
        self.model = model
        self.noun = noun
        self.again = again
        self.smaller = smaller
        self.settings_prefix = settings_prefix
        self.default_time_limit_s = time_limit_s
        self.publish_hook = publish
        self.progress_interval_s = progress_interval_s
        self.handed_off = handed_off

    def __repr__(self) -> str:
        return f"JobRunner({self.model.__name__})"

    # ------------------------------------------------------------ settings
    def _setting(self, name: str, default: float) -> float:
        """A Django setting, else the environment variable of that name, else ``default``."""
        key = f"{self.settings_prefix}_{name}"
        return float(getattr(settings, key, None) or os.environ.get(key) or default)

    def time_limit_s(self) -> int:
        """Hard limit of one job (its Celery task's ``time_limit``)."""
        return int(self._setting("TIME_LIMIT_S", self.default_time_limit_s))

    def heartbeat_s(self) -> float:
        """How often a running job says it is alive."""
        return self._setting("HEARTBEAT_S", 5.0)

    def stale_s(self) -> float:
        """Silence after which the reaper declares a running job's worker dead."""
        return self._setting("STALE_S", 12 * self.heartbeat_s())

    def queued_s(self) -> float:
        """Wait after sending a job's task before the queued reaper sends it again."""
        return self._setting("QUEUED_S", 60.0)

    def queued_fail_s(self) -> float:
        """Time in the queue after which a job no worker took is failed."""
        return self._setting("QUEUED_FAIL_S", 3600.0)

    @property
    def time_limit_setting(self) -> str:
        return f"{self.settings_prefix}_TIME_LIMIT_S"

    # -------------------------------------------------------------- events
    def publish(self, job_id: int, status: str, progress: float, message: str) -> None:
        if self.publish_hook is not None:
            self.publish_hook(job_id, status, progress, message)

    def _progress_of(self, job_id: int) -> float:
        value = self.model.objects.filter(pk=job_id).values_list("progress", flat=True).first()
        return float(value or 0.0)

    # --------------------------------------------------------------- queue
    def enqueue(self, job_id: int, send: Send) -> None:
        """Send the job's task with ``send`` (a task's ``apply_async``) under the
        row's ``task_id`` (one is recorded first if the row has none, so a
        cancel can always revoke it); if the broker refuses, the job fails with
        what to check."""
        row = self.model.objects.filter(pk=job_id).values("task_id").first()
        if row is None:
            return
        task_id = row["task_id"]
        if not task_id:
            task_id = str(uuid.uuid4())
            self.model.objects.filter(pk=job_id).update(task_id=task_id)
        self.model.objects.filter(pk=job_id).update(sent=timezone.now())
        try:
            send(args=[job_id], task_id=task_id)
        except Exception as exc:  # noqa: BLE001 - any broker failure must reach the user
            self.fail(job_id, f"could not queue the {self.noun}: {exc}. Is Redis running "
                              f"(REDIS_URL) and a worker started (celery -A twin worker)?",
                      from_statuses=(S.QUEUED,))

    # ---------------------------------------------------------- transitions
    def claim(self, job_id: int, *, worker: str = "", task_id: str = "") -> bool:
        """``queued → running`` for ``worker``; False if the job was not queued."""
        now = timezone.now()
        fields: dict[str, Any] = {"status": S.RUNNING, "started": now, "heartbeat": now,
                                  "worker": worker[:200], "progress": 0.0,
                                  "message": "starting"}
        if task_id:
            fields["task_id"] = task_id[:64]
        return bool(self.model.objects.filter(pk=job_id, status=S.QUEUED).update(**fields))

    def finish(self, job_id: int, outcome: Outcome, seconds: float) -> bool:
        """``running → succeeded`` with ``outcome``; False (result dropped) if the
        job left ``running`` meanwhile."""
        message = (outcome.message or f"done in {seconds:.2f} s")[:200]
        changed = self.model.objects.filter(pk=job_id, status=S.RUNNING).update(
            **outcome.fields, status=S.SUCCEEDED, result=outcome.result, progress=1.0,
            finished=timezone.now(), message=message)
        if changed:
            self.publish(job_id, S.SUCCEEDED, 1.0, message)
        return bool(changed)

    def fail(self, job_id: int, error: str, *, field: str = "",
             from_statuses: tuple[str, ...] = (S.QUEUED, S.RUNNING),
             where: Q | None = None) -> bool:
        """Mark a job failed with ``error`` unless it has left ``from_statuses``
        (or no longer matches ``where``, checked in the same update)."""
        message = (error.splitlines()[0] if error else "failed")[:200]
        rows = self.model.objects.filter(pk=job_id, status__in=from_statuses)
        if where is not None:
            rows = rows.filter(where)
        changed = rows.update(status=S.FAILED, error=error, error_field=field[:200],
                              finished=timezone.now(), message=message)
        if changed:
            self.publish(job_id, S.FAILED, self._progress_of(job_id), message)
        return bool(changed)

    def cancel(self, job_id: int) -> bool:
        """Cancel a queued or running job; False if it had already finished.

        The status changes first (so a late result cannot overwrite it), then
        the task is revoked — terminating it if a worker already runs it.
        """
        changed = self.model.objects.filter(pk=job_id, status__in=S.ACTIVE).update(
            status=S.CANCELLED, finished=timezone.now(), message="cancelled")
        if not changed:
            return False
        task_id = self.model.objects.filter(pk=job_id).values_list("task_id", flat=True).first()
        if task_id:
            from celery import current_app

            try:
                current_app.control.revoke(task_id, terminate=True, signal="SIGTERM")
            except Exception:  # noqa: BLE001 - the status already says cancelled
                log.warning("could not revoke the task of %s %s", self.noun, job_id,
                            exc_info=True)
        self.publish(job_id, S.CANCELLED, self._progress_of(job_id), "cancelled")
        return True

    # ------------------------------------------------------------ recovery
    def _running(self) -> Any:
        """The running jobs this runner watches itself (not handed off)."""
        rows = self.model.objects.filter(status=S.RUNNING)
        if self.handed_off is not None:
            rows = rows.exclude(pk__in=self.model.objects.filter(self.handed_off)
                                .values("pk"))
        return rows

    def reap(self, now: datetime | None = None) -> list[int]:
        """Fail the running jobs whose worker is gone; returns their ids.

        A job is given up when it ran past the time limit (plus a minute: the
        worker's own limit fires first when it is alive) or when its heartbeat
        has been silent for :meth:`stale_s` seconds — checked again in the
        failing update, so a beat that lands meanwhile saves the job.
        """
        now = now or timezone.now()
        reaped: list[int] = []
        limit = self.time_limit_s()
        overdue = Q(started__lt=now - timedelta(seconds=limit + 60))
        for job_id, worker in self._running().filter(overdue).values_list("pk", "worker"):
            if self.fail(job_id, f"exceeded the time limit of {limit} s on "
                                 f"{worker or 'a worker'} and was given up; {self.smaller} "
                                 f"or raise {self.time_limit_setting}",
                         from_statuses=(S.RUNNING,), where=overdue):
                reaped.append(job_id)
        silent_since = now - timedelta(seconds=self.stale_s())
        silent = (Q(heartbeat__lt=silent_since)
                  | Q(heartbeat__isnull=True, started__lt=silent_since)
                  | Q(heartbeat__isnull=True, started__isnull=True))
        for job_id, worker, beat in self._running().filter(silent) \
                .values_list("pk", "worker", "heartbeat"):
            seen = f"since {beat:%Y-%m-%d %H:%M:%S} UTC" if beat else "at all"
            if self.fail(job_id, f"the worker running it ({worker or 'unknown'}) stopped: no "
                                 f"sign of life {seen}, so it probably died; {self.again}",
                         from_statuses=(S.RUNNING,), where=silent):
                reaped.append(job_id)
        return reaped

    def reap_queued(self, send: Send, now: datetime | None = None) -> dict[str, list[int]]:
        """Queued jobs nobody took: send again the ones sent more than :meth:`queued_s`
        ago (under a new task id), fail the ones queued more than :meth:`queued_fail_s`;
        returns ``{"resent": ids, "failed": ids}``. Every change is a compare-and-set on
        the status (and the task id), so a worker claiming the job meanwhile wins."""
        now = now or timezone.now()
        result: dict[str, list[int]] = {"resent": [], "failed": []}
        give_up = self.queued_fail_s()
        too_old = Q(created__lt=now - timedelta(seconds=give_up))
        for job_id in self.model.objects.filter(too_old, status=S.QUEUED) \
                .values_list("pk", flat=True):
            if self.fail(job_id, f"no worker took it within {give_up:g} s of being queued (its "
                                 f"message was lost, or no worker serves its queue: is Redis "
                                 f"up and a worker started, celery -A twin worker?); "
                                 f"{self.again}", from_statuses=(S.QUEUED,), where=too_old):
                result["failed"].append(job_id)
        since = now - timedelta(seconds=self.queued_s())
        due = Q(sent__lt=since) | Q(sent__isnull=True, created__lt=since)
        for job_id, old in self.model.objects.filter(due, status=S.QUEUED) \
                .values_list("pk", "task_id"):
            task_id = str(uuid.uuid4())
            if not self.model.objects.filter(pk=job_id, status=S.QUEUED, task_id=old).update(
                    task_id=task_id, sent=now, message="sent again: no worker had taken it"):
                continue
            try:
                send(args=[job_id], task_id=task_id)
            except Exception as exc:  # noqa: BLE001 - the broker is away: next beat tries again
                log.warning("could not send %s %s again: %s", self.noun, job_id, exc)
                continue
            log.warning("%s %s was still queued %g s after its task was sent; sent it again",
                        self.noun, job_id, self.queued_s())
            result["resent"].append(job_id)
        return result

    def fail_orphans(self, hostname: str) -> list[int]:
        """A worker starting as ``hostname`` fails the jobs an earlier life of it owned."""
        if not hostname:
            return []
        failed = []
        for job_id in self._running().filter(worker=hostname).values_list("pk", flat=True):
            if self.fail(job_id, f"the worker {hostname} restarted while running it; "
                                 f"{self.again}", from_statuses=(S.RUNNING,)):
                failed.append(job_id)
        return failed

    def on_worker_ready(self, sender: Any = None) -> list[int]:
        """Body of a ``worker_ready`` hook: :meth:`fail_orphans` for the starting
        worker, logged. Never raises: a worker must start even if the database
        is away (the reaper catches those jobs later)."""
        hostname = getattr(sender, "hostname", "") or ""
        try:
            failed = self.fail_orphans(hostname)
        except Exception:  # noqa: BLE001 - see the docstring
            log.warning("could not check for %ss orphaned by %s", self.noun, hostname,
                        exc_info=True)
            return []
        if failed:
            log.warning("failed %d %ss orphaned by %s: %s", len(failed), self.noun, hostname,
                        failed)
        return failed

    # ------------------------------------------------------------- execute
    def execute(self, job_id: int, work: Work[J], *, worker: str = "", task_id: str = "",
                echo: Callable[[float, str], None] | None = None) -> J | None:
        """Run queued job ``job_id`` here and now; returns it as it ended.

        ``work(job, report)`` computes and returns an :class:`Outcome`; it may
        raise :class:`JobError` (failed with its message and field),
        :class:`Cancelled` (left as the canceller set it) or anything else
        (failed with the exception, its traceback logged). Finished and
        cancelled jobs are left alone; a job already ``running`` is failed as
        lost (see the module docstring).
        """
        claimed = self.claim(job_id, worker=worker, task_id=task_id)
        job = self.model.objects.filter(pk=job_id).first()
        if job is None:
            return None
        if not claimed:
            if job.status == S.RUNNING and task_id and job.task_id and job.task_id != task_id:
                # The job was sent again (reap_queued) and the other message got here
                # first: that worker runs it; this copy is a duplicate.
                log.info("%s %s already runs under task %s; duplicate %s dropped", self.noun,
                         job_id, job.task_id, task_id)
                return job
            if job.status == S.RUNNING:
                self.fail(job_id, f"the worker running it ({job.worker or 'unknown'}) was lost "
                                  f"before it finished; {self.again}", from_statuses=(S.RUNNING,))
                job.refresh_from_db()
            return job
        self.publish(job_id, S.RUNNING, 0.0, "starting")
        beat = Heartbeat(self, job_id, self.heartbeat_s())
        beat.start()
        started = time.perf_counter()
        outcome: Outcome | None = None
        try:
            outcome = work(job, Reporter(self, job_id, beat, echo))
        except Cancelled:
            outcome = None
        except JobError as exc:
            self.fail(job_id, exc.message, field=exc.field, from_statuses=(S.RUNNING,))
        except SoftTimeLimitExceeded:
            self.fail(job_id, f"exceeded the time limit of {self.time_limit_s()} s; "
                              f"{self.smaller} or raise {self.time_limit_setting}",
                      from_statuses=(S.RUNNING,))
        except Exception as exc:  # noqa: BLE001 - recorded on the job, with its traceback logged
            log.exception("%s %s failed", self.noun, job_id)
            self.fail(job_id, f"{type(exc).__name__}: {exc}", from_statuses=(S.RUNNING,))
        except BaseException:  # Ctrl-C in a command, SystemExit: never leave it running
            self.fail(job_id, "interrupted", from_statuses=(S.RUNNING,))
            raise
        finally:
            beat.stop()
        if outcome is not None and not outcome.deferred:
            self.finish(job_id, outcome, time.perf_counter() - started)
        job.refresh_from_db()
        return job


class Reporter:
    """The ``report(fraction, message)`` callback work gets: progress written
    at most every ``progress_interval_s`` and published; raises
    :class:`Cancelled` once the job is no longer ``running``.

    Written on this thread's connection, unless the work has opened a
    transaction since it started (see the module docstring): then the
    heartbeat thread writes it, and its finding that the row left ``running``
    is what raises here.
    """

    def __init__(self, runner: JobRunner[Any], job_id: int, beat: Heartbeat,
                 echo: Callable[[float, str], None] | None = None) -> None:
        self.runner = runner
        self.job_id = job_id
        self.beat = beat
        self.echo = echo
        self.last = 0.0
        self.depth = len(connection.atomic_blocks)  # the caller's own (a test's) transaction

    def __call__(self, fraction: float, message: str) -> None:
        fraction = min(max(float(fraction), 0.0), 1.0)
        if self.echo is not None:
            self.echo(fraction, message)
        deferred = len(connection.atomic_blocks) > self.depth
        if deferred and self.beat.left_running.is_set():
            raise Cancelled(self.job_id)
        now = time.monotonic()
        if now - self.last < self.runner.progress_interval_s and fraction < 1.0:
            return
        self.last = now
        if deferred:
            self.beat.post(fraction, message)
            return
        changed = self.runner.model.objects.filter(pk=self.job_id, status=S.RUNNING).update(
            progress=fraction, message=message[:200], heartbeat=timezone.now())
        if not changed:
            raise Cancelled(self.job_id)
        self.runner.publish(self.job_id, S.RUNNING, fraction, message)


class Heartbeat(threading.Thread):
    """Beats ``heartbeat`` every ``interval`` while a job runs, on its own
    database connection; also writes the progress :meth:`post`-ed to it.

    A failed write (a database away, SQLite's write lock held by the work) is
    logged once and tried again at the next beat: the reaper judges by the
    silence, not this thread. Once the row has left ``running`` the thread
    sets :attr:`left_running` and ends.
    """

    def __init__(self, runner: JobRunner[Any], job_id: int, interval: float) -> None:
        super().__init__(name=f"{runner.model._meta.model_name}-heartbeat-{job_id}",
                         daemon=True)
        self.runner = runner
        self.job_id = job_id
        self.interval = interval
        self.done = threading.Event()
        self.wake = threading.Event()
        self.left_running = threading.Event()
        self._lock = threading.Lock()
        self._pending: tuple[float, str] | None = None

    def post(self, fraction: float, message: str) -> None:
        """Have the latest progress written at once (an unwritten older one is dropped)."""
        with self._lock:
            self._pending = (fraction, message)
        self.wake.set()

    def run(self) -> None:
        warned = False
        try:
            while not self.done.is_set():
                self.wake.wait(self.interval)
                self.wake.clear()
                if self.done.is_set():
                    break
                with self._lock:
                    pending, self._pending = self._pending, None
                try:
                    alive = self._beat(pending)
                except DatabaseError:
                    if not warned:
                        log.warning("heartbeat of %s %s could not be written; retrying",
                                    self.runner.noun, self.job_id, exc_info=True)
                        warned = True
                    connections.close_all()  # this thread's; the next beat reconnects
                    continue
                if not alive:
                    self.left_running.set()
                    break
        finally:
            connections.close_all()  # this thread's connections only

    def _beat(self, pending: tuple[float, str] | None) -> bool:
        fields: dict[str, Any] = {"heartbeat": timezone.now()}
        if pending is not None:
            fields.update(progress=pending[0], message=pending[1][:200])
        changed = self.runner.model.objects.filter(pk=self.job_id, status=S.RUNNING).update(
            **fields)
        if changed and pending is not None:
            self.runner.publish(self.job_id, S.RUNNING, *pending)
        return bool(changed)

    def stop(self) -> None:
        self.done.set()
        self.wake.set()
        self.join(timeout=2.0)
