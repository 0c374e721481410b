"""Sweeps across workers: a scenario run split into parts, each a Celery task of its own.

A run whose kind splits (``ScenarioKind.parts``: training_search by (tp, pp)
blocks of its configuration space, scheduling by policy) is not computed by the
task that claimed it. That task writes one :class:`ScenarioPart` row per part,
sends one ``twin.scenarios.run_part`` task per row and returns, leaving the run
``running`` (``Outcome(deferred=True)``); any worker on the broker takes a part,
so adding workers — on this machine or others pointed at the same Redis and
database — computes more parts at once. The last part to succeed merges
(``ScenarioKind.merge``) and finishes the run: a group of tasks with a
collecting step, the collection done by whichever worker ends last, so no task
ever waits on another (a chord's callback would need the result backend; a
waiting parent would dead-lock a worker of concurrency 1).

The parts are jobs (:class:`twin.core.jobs.JobRunner`, ``PARTS``), so every
guarantee of a run holds per part, and each part's fate reaches its run:

* **progress**: each part's report is written to its row, and the run's
  progress becomes the mean over its parts (a finished part counts 1) — written
  to the run row and published to ``ws/scenarios/<id>/`` as before, so it
  rises as parts advance on any worker;
* **cancel**: cancelling the run (:meth:`Sweeps.cancel_parts`) cancels every
  queued or running part and revokes its task; a part that starts anyway finds
  its row cancelled and does nothing, and a running one stops at its next
  report (it also stops when it sees its run no longer ``running``);
* **failure**: a part that fails — its error, the time limit, a lost or
  restarted worker (redelivered message, ``worker_ready`` orphans), a silent
  heartbeat (the beat reaper) — fails its run with the part's error and field
  (``part 3 of 8: …``), and the other parts are cancelled;
* **reaper**: while a run has parts queued or running, the run reaper leaves it
  to the parts' reaper (``JobRunner(handed_off=…)``); a run whose parts all
  succeeded but whose merge never ended (the merging worker died) is reaped as
  silent, as any run is. A split run as a whole has no time limit of its own
  beyond each part's (``TWIN_SCENARIO_TIME_LIMIT_S`` per part task).
* **cache**: nothing changes: the cache key is the run's ``params_hash``, and
  the merged result equals the whole run's (each kind's tests check it).

``TWIN_SCENARIO_SPLIT_PARTS`` (setting or environment, default 8) caps the
parts of one run; 0 or 1 runs every kind whole. The ``run_scenario`` command
and code that executes a run in-process without a task to send never split.
"""
from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from simulation.topology import TopologyError
from twin.core.choices import JobStatusChoices as S
from twin.core.jobs import Cancelled, JobError, JobRunner, Outcome, Reporter
from twin.scenarios.kinds import REGISTRY, ScenarioKind, jsonable
from twin.scenarios.models import ScenarioPart, ScenarioRun
from twin.scenarios.snapshot import with_fork

__all__ = ["Sweeps", "active_parts", "max_parts"]

log = logging.getLogger(__name__)


def max_parts() -> int:
    """Most parts one run is split into: the setting, else the environment variable
    ``TWIN_SCENARIO_SPLIT_PARTS``, else 8; 0 or 1: never split."""
    value = getattr(settings, "TWIN_SCENARIO_SPLIT_PARTS", None)
    if value is None:
        value = os.environ.get("TWIN_SCENARIO_SPLIT_PARTS") or 8
    return int(value)


def active_parts() -> Q:
    """Runs (a ``ScenarioRun`` filter) with a part still queued or running."""
    return Q(Exists(ScenarioPart.objects.filter(run=OuterRef("pk"), status__in=S.ACTIVE)))


class Sweeps:
    """Split runs of one run runner ``jobs`` (see the module docstring);
    ``publish`` tells a run's watchers (``runner.publish``)."""

    def __init__(self, jobs: JobRunner[ScenarioRun],
                 publish: Callable[[int, str, float, str], object]) -> None:
        self.jobs = jobs
        self.publish = publish
        self.parts: JobRunner[ScenarioPart] = JobRunner(
            ScenarioPart, noun="scenario part", again="run the scenario again",
            smaller="simplify the scenario", settings_prefix="TWIN_SCENARIO",
            time_limit_s=900, publish=self._part_event, progress_interval_s=0.25)

    # ------------------------------------------------------------- split
    def split(self, run: ScenarioRun, kind: ScenarioKind,
              enqueue_part: Callable[[int], object]) -> Outcome | None:
        """Inside the run's work: write its parts and send them; None when the
        kind does not split this run (it is then computed whole, here)."""
        parts = kind.parts(run.inputs, max_parts()) if max_parts() > 1 else []
        if len(parts) < 2:
            return None
        rows = ScenarioPart.objects.bulk_create(
            ScenarioPart(run=run, index=i, part=jsonable(part), message="queued")
            for i, part in enumerate(parts))
        ids = [row.pk for row in rows] if all(r.pk for r in rows) else list(
            ScenarioPart.objects.filter(run=run).order_by("index").values_list("pk", flat=True))
        self.jobs.model.objects.filter(pk=run.pk, status=S.RUNNING).update(
            message=f"split into {len(ids)} parts", heartbeat=timezone.now())
        self.publish(run.pk, S.RUNNING, 0.0, f"split into {len(ids)} parts")
        for part_id in ids:
            enqueue_part(part_id)
        return Outcome(None, deferred=True)

    # ------------------------------------------------------------ execute
    def execute_part(self, part_id: int, *, worker: str = "",
                     task_id: str = "") -> ScenarioPart | None:
        """Run queued part ``part_id`` here; the last part to succeed merges."""
        part = self.parts.execute(part_id, self._compute_part, worker=worker, task_id=task_id)
        if part is not None and part.status == S.SUCCEEDED:
            self.collect(part.run_id)
        return part

    def _compute_part(self, part: ScenarioPart, report: Reporter) -> Outcome:
        run = ScenarioRun.objects.filter(pk=part.run_id).only("kind", "inputs", "status").get()
        if run.status != S.RUNNING:  # cancelled or failed before this part started
            self._stop(part.pk)
            raise Cancelled(part.pk)
        kind = REGISTRY.get(run.kind)
        if kind is None:
            raise JobError(f"unknown kind {run.kind!r}: this worker does not have it",
                           field="kind")
        try:
            return Outcome(kind.run_part(run.inputs, part.part, report))
        except TopologyError as exc:
            raise JobError(exc.message, field=f"params.{exc.field}") from exc

    def _stop(self, part_id: int) -> None:
        ScenarioPart.objects.filter(pk=part_id, status__in=S.ACTIVE).update(
            status=S.CANCELLED, finished=timezone.now(), message="run no longer running")

    # ------------------------------------------------------------- events
    def _part_event(self, part_id: int, status: str, progress: float, message: str) -> None:
        """The parts runner's publish hook: every part's progress and end reach its run."""
        row = ScenarioPart.objects.filter(pk=part_id).values(
            "run_id", "index", "error", "error_field").first()
        if row is None:
            return
        run_id = row["run_id"]
        if status == S.FAILED:
            total = ScenarioPart.objects.filter(run_id=run_id).count()
            error = row["error"] or message
            if self.jobs.fail(run_id, f"part {row['index'] + 1} of {total}: {error}",
                              field=row["error_field"], from_statuses=(S.RUNNING,)):
                self.cancel_parts(run_id)
            return
        if status == S.RUNNING:
            self._aggregate(run_id, f"part {row['index'] + 1}: {message}", part_id)

    def _aggregate(self, run_id: int, message: str, part_id: int | None = None) -> None:
        """Write the run's progress as the mean of its parts' (a finished one: 1)."""
        rows = list(ScenarioPart.objects.filter(run_id=run_id).values_list("status",
                                                                           "progress"))
        if not rows:
            return
        done = sum(1 for status, _ in rows if status == S.SUCCEEDED)
        fraction = sum(1.0 if status == S.SUCCEEDED else float(p) for status, p in rows)
        fraction = min(fraction / len(rows), 1.0)
        text = f"{done}/{len(rows)} parts done; {message}"[:200]
        changed = ScenarioRun.objects.filter(pk=run_id, status=S.RUNNING).update(
            progress=fraction, message=text, heartbeat=timezone.now())
        if changed:
            self.publish(run_id, S.RUNNING, fraction, text)
        elif part_id is not None:
            self._stop(part_id)  # the run ended: the part's next report raises Cancelled

    # ------------------------------------------------------------- collect
    def collect(self, run_id: int) -> bool:
        """If every part of ``run_id`` succeeded, merge them and finish the run;
        True if this call finished it. Two parts ending together may both merge;
        the run's compare-and-set finish keeps one result."""
        parts = list(ScenarioPart.objects.filter(run_id=run_id).order_by("index")
                     .values_list("status", "result"))
        if not parts or any(status != S.SUCCEEDED for status, _ in parts):
            self._aggregate(run_id, "a part finished")
            return False
        run = ScenarioRun.objects.filter(pk=run_id, status=S.RUNNING).first()
        if run is None:
            return False
        kind = REGISTRY.get(run.kind)
        started = time.perf_counter()
        try:
            if kind is None:
                raise JobError(f"unknown kind {run.kind!r}: this worker does not have it",
                               field="kind")
            result = jsonable(with_fork(run.inputs,
                                        kind.merge(run.inputs, [r for _, r in parts])))
        except JobError as exc:
            self.jobs.fail(run_id, exc.message, field=exc.field, from_statuses=(S.RUNNING,))
            return False
        except TopologyError as exc:
            self.jobs.fail(run_id, exc.message, field=f"params.{exc.field}",
                           from_statuses=(S.RUNNING,))
            return False
        except Exception as exc:  # noqa: BLE001 - recorded on the run, traceback logged
            log.exception("merging the parts of scenario run %s failed", run_id)
            self.jobs.fail(run_id, f"merging the parts: {type(exc).__name__}: {exc}",
                           from_statuses=(S.RUNNING,))
            return False
        wall = (timezone.now() - run.started).total_seconds() if run.started else 0.0
        merged = time.perf_counter() - started
        finished = self.jobs.finish(run_id, Outcome(
            result, message=f"done in {wall:.2f} s on {len(parts)} parts "
                            f"(merged in {merged:.2f} s)"), wall)
        if finished:  # the partial results are in the run's now
            ScenarioPart.objects.filter(run_id=run_id).update(result=None)
        return finished

    # -------------------------------------------------------------- cancel
    def cancel_parts(self, run_id: int) -> list[int]:
        """Cancel the run's queued and running parts (their tasks revoked)."""
        return [part_id for part_id in ScenarioPart.objects.filter(
            run_id=run_id, status__in=S.ACTIVE).values_list("pk", flat=True)
            if self.parts.cancel(part_id)]

    # ------------------------------------------------------------ recovery
    def on_worker_ready(self, sender: Any = None) -> list[int]:
        """A starting worker fails the parts an earlier life of it ran."""
        return self.parts.on_worker_ready(sender)
