"""Submitting, running, cancelling and reaping scenario runs — one code path for all.

The API, the ``run_scenario`` command and the Celery task all go through
here; the lifecycle itself (compare-and-set transitions, rate-limited progress
that notices a cancellation, heartbeat, reaper, orphan recovery) is the one
every job has, :class:`twin.core.jobs.JobRunner` (``JOBS`` below). What is
scenario-specific stays here:

* :func:`submit` validates with the kind's ``prepare`` (a
  :class:`~twin.scenarios.kinds.ScenarioInputError` leaves nothing behind),
  reuses the result of an earlier identical run unless ``refresh`` is set,
  and otherwise records a queued run whose task is sent once the row is
  committed (``transaction.on_commit``) by the ``enqueue`` the caller passes
  (the API passes :func:`twin.scenarios.tasks.enqueue_run`; this module never
  imports the tasks), so a worker never looks for a row that is not there yet.
  Before a run is queued, ``before_queue`` (the API: a fast broker check) may
  refuse by raising, and a user already holding
  ``TWIN_SCENARIO_MAX_ACTIVE_PER_USER`` queued or running runs gets
  :class:`TooManyActiveRuns` — in both cases nothing is written.
* :func:`execute` runs one queued run in this process with its kind's ``run``:
  the Celery task calls it, and so does the command (with a progress bar).
* :func:`publish` sends progress to the Channels group ``scenario.<id>`` (what
  ``ws/scenarios/<id>/`` streams) on every status change and progress write.
* :func:`cancel`, :func:`fail`, :func:`reap` and :func:`fail_orphans` are the
  runner's, under ``TWIN_SCENARIO_TIME_LIMIT_S``, ``TWIN_SCENARIO_HEARTBEAT_S``
  and ``TWIN_SCENARIO_STALE_S`` — for a split run's parts too (``SWEEPS``).
* A run whose kind splits (a sweep) executed with an ``enqueue_part`` (the
  Celery task passes one) is computed as parts on any worker, then merged:
  :mod:`twin.scenarios.sweeps`; :func:`execute_part` runs one part.
"""
from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Literal

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from simulation.topology import TopologyError
from twin.core.choices import JobStatusChoices as S
from twin.core.jobs import Cancelled, JobError, JobRunner, Outcome, Reporter, Send
from twin.scenarios.kinds import ENGINE_VERSION, REGISTRY, ScenarioInputError, get_kind, jsonable
from twin.scenarios.models import ScenarioRun, group_name
from twin.scenarios.snapshot import (
    Fork,
    fork_summary,
    forking,
    freeze,
    stored_snapshot,
    with_fork,
)
from twin.scenarios.sweeps import Sweeps, active_parts

__all__ = [
    "JOBS",
    "SWEEPS",
    "Cancelled",
    "TooManyActiveRuns",
    "cached_run",
    "cancel",
    "execute",
    "execute_part",
    "fail",
    "fail_orphans",
    "heartbeat_s",
    "max_active_per_user",
    "params_hash",
    "publish",
    "reap",
    "reap_queued",
    "stale_s",
    "submit",
    "time_limit_s",
]

log = logging.getLogger(__name__)

UPDATE_EVENT = "scenario.update"


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


JOBS: JobRunner[ScenarioRun] = JobRunner(
    ScenarioRun, noun="scenario run", again="run the scenario again",
    smaller="simplify the scenario", settings_prefix="TWIN_SCENARIO", time_limit_s=900,
    publish=publish, progress_interval_s=0.25, handed_off=active_parts())
SWEEPS = Sweeps(JOBS, publish)

time_limit_s = JOBS.time_limit_s
heartbeat_s = JOBS.heartbeat_s
stale_s = JOBS.stale_s
fail = JOBS.fail


def cancel(run_id: int) -> bool:
    """Cancel a queued or running run and its parts, if split (their tasks
    revoked); False if it had already finished."""
    changed = JOBS.cancel(run_id)
    if changed:
        SWEEPS.cancel_parts(run_id)
    return changed


def reap(now: datetime | None = None) -> list[int]:
    """Fail the runs whose worker is gone, and the split runs whose part's
    worker is gone; returns the runs' ids."""
    parts = SWEEPS.parts.reap(now)
    failed = set(SWEEPS.parts.model.objects.filter(pk__in=parts, run__status=S.FAILED)
                 .values_list("run_id", flat=True))
    return sorted(failed | set(JOBS.reap(now)))


def reap_queued(send_run: Send, send_part: Send,
                now: datetime | None = None) -> dict[str, list[int]]:
    """Runs and parts still queued long after their task was sent (its message lost
    with a broker restart): sent again, or failed past ``TWIN_SCENARIO_QUEUED_FAIL_S``
    (:meth:`twin.core.jobs.JobRunner.reap_queued`); a part that fails fails its run
    (the parts runner's publish hook)."""
    parts = SWEEPS.parts.reap_queued(send_part, now)
    runs = JOBS.reap_queued(send_run, now)
    return {"resent": runs["resent"], "failed": runs["failed"],
            "parts_resent": parts["resent"], "parts_failed": parts["failed"]}


def fail_orphans(hostname: str) -> list[int]:
    """A worker starting as ``hostname`` fails the runs and the parts an earlier
    life of it owned; returns the runs' ids (a part's run fails with it)."""
    parts = SWEEPS.parts.fail_orphans(hostname)
    failed = set(SWEEPS.parts.model.objects.filter(pk__in=parts)
                 .values_list("run_id", flat=True))
    return sorted(failed | set(JOBS.fail_orphans(hostname)))


# ------------------------------------------------------------------ submit
class TooManyActiveRuns(Exception):
    """The user already has ``limit`` runs queued or running (the API: 429)."""

    def __init__(self, limit: int, active: int) -> None:
        super().__init__(f"you already have {active} scenario runs queued or running; the "
                         f"limit is {limit} per user: wait for one to finish or cancel one")
        self.limit = limit
        self.active = active


def max_active_per_user() -> int:
    """Queued + running runs one user may have at once
    (``TWIN_SCENARIO_MAX_ACTIVE_PER_USER``, default 4; 0: no limit)."""
    return int(getattr(settings, "TWIN_SCENARIO_MAX_ACTIVE_PER_USER", 4))


def _check_active_limit(owner: Any | None) -> None:
    """Inside the submit's transaction: refuse a run past the per-user limit.
    The user's row is locked first, so two submits of one user count in turn
    (PostgreSQL; SQLite's IMMEDIATE transactions are serial anyway)."""
    limit = max_active_per_user()
    if owner is None or limit <= 0:
        return
    get_user_model().objects.select_for_update().filter(pk=owner.pk).values_list("pk").first()
    active = ScenarioRun.objects.filter(created_by=owner, status__in=S.ACTIVE).count()
    if active >= limit:
        raise TooManyActiveRuns(limit, active)


def cached_run(digest: str) -> ScenarioRun | None:
    """The latest original (not itself cached) run that succeeded with these inputs."""
    return (ScenarioRun.objects.filter(params_hash=digest, status=S.SUCCEEDED,
                                       cached_from__isnull=True)
            .order_by("-finished", "-id").first())


def submit(kind_name: Any, params: Any, cluster: Any | None, user: Any | None = None, *,
           refresh: bool = False,
           enqueue: Callable[[int], object] | Literal[False] | None = None,
           before_queue: Callable[[], object] | None = None,
           fork: bool | ScenarioRun = False) -> ScenarioRun:
    """Validate and record a run (see the module docstring).

    ``fork``: True freezes the cluster's live state now into the run's input
    (:func:`twin.scenarios.snapshot.freeze`); a run reuses the snapshot stored
    with that run (the same state, so the same answer). Either way, and when the
    kind reads the live state by itself (:func:`~twin.scenarios.snapshot.live_state`),
    the snapshot is stored with the run (``snapshot``) and summarised in
    ``inputs["fork"]``.

    ``enqueue(run_id)`` sends its task once the row is committed; without it
    (``None`` or ``False``) the run is only recorded, for the caller to
    :func:`execute` (the command, tests). ``before_queue()`` is called, outside
    any transaction, before a run that needs a worker is recorded; whatever it
    raises propagates with nothing written.

    Raises :class:`ScenarioInputError` or :class:`TooManyActiveRuns` (nothing
    written, nothing queued). Returns a queued run, or a succeeded one carrying
    a cached result; a queued run whose task could not be sent on commit comes
    back ``failed`` (``JobRunner.enqueue``), its parameters kept.
    """
    kind = get_kind(kind_name)
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise ScenarioInputError.one("params", "must be a JSON object")
    state = _fork(fork, cluster)
    with forking(state):
        prepared = kind.prepare(params, cluster)
    snapshot = None
    if state.snapshot is not None:
        prepared = {**prepared, "fork": fork_summary(state.snapshot)}
        snapshot = state.snapshot.to_dict()
    inputs = jsonable(prepared)
    digest = params_hash(kind.name, inputs)
    owner = user if user is not None and getattr(user, "is_authenticated", False) else None
    if before_queue is not None and (refresh or cached_run(digest) is None):
        before_queue()
    with transaction.atomic():
        source = None if refresh else cached_run(digest)
        common = {"kind": kind.name, "params": jsonable(dict(params)), "inputs": inputs,
                  "params_hash": digest, "cluster": cluster, "created_by": owner,
                  "snapshot": snapshot}
        if source is not None:
            now = timezone.now()
            return ScenarioRun.objects.create(
                **common, status=S.SUCCEEDED, progress=1.0, result=source.result,
                cached_from=source, started=now, finished=now, heartbeat=now,
                message=f"cached result of run #{source.pk}")
        _check_active_limit(owner)
        run = ScenarioRun.objects.create(**common, task_id=str(uuid.uuid4()),
                                         message="queued")
        if enqueue:
            send = enqueue
            transaction.on_commit(lambda: send(run.pk))
    return run


def _fork(fork: bool | ScenarioRun, cluster: Any | None) -> Fork:
    """The submit's snapshot holder: frozen now, another run's, or empty (filled
    only if the kind reads the live state)."""
    if fork is False or fork is None:
        return Fork(cluster)
    field = "fork" if fork is True else "fork_from"
    if cluster is None:
        raise ScenarioInputError.one(field, "needs a cluster (give \"cluster\": <id>): a "
                                            "fork freezes a cluster's live state")
    if fork is True:
        return Fork(cluster, freeze(cluster))
    if fork.cluster_id != cluster.pk:
        raise ScenarioInputError.one(field, f"run #{fork.pk} was forked from another "
                                            f"cluster ({fork.cluster_id})")
    return Fork(cluster, stored_snapshot(fork, field))


# ----------------------------------------------------------------- execute
def execute(run_id: int, *, worker: str = "", task_id: str = "",
            echo: Callable[[float, str], None] | None = None,
            enqueue_part: Callable[[int], object] | None = None) -> ScenarioRun | None:
    """Run queued run ``run_id`` here and now with its kind; returns it as it
    ended (see :meth:`twin.core.jobs.JobRunner.execute`). With ``enqueue_part``
    (sends a part's task) a run whose kind splits is handed to its parts and
    comes back ``running``."""
    def work(run: ScenarioRun, report: Reporter) -> Outcome:
        return compute(run, report, enqueue_part)

    return JOBS.execute(run_id, work, worker=worker, task_id=task_id, echo=echo)


def execute_part(part_id: int, *, worker: str = "", task_id: str = "") -> Any:
    """Run queued part ``part_id`` of a split run here (the part's Celery task)."""
    return SWEEPS.execute_part(part_id, worker=worker, task_id=task_id)


def compute(run: ScenarioRun, report: Reporter,
            enqueue_part: Callable[[int], object] | None = None) -> Outcome:
    """The work of one run: its kind's ``run`` on the validated inputs, or —
    when the kind splits it and a part can be sent — its parts.

    A :class:`TopologyError` blames the parameter it names; a kind this
    worker does not have blames ``kind``.
    """
    kind = REGISTRY.get(run.kind)
    if kind is None:
        raise JobError(f"unknown kind {run.kind!r}: this worker does not have it", field="kind")
    try:
        if enqueue_part is not None:
            handed = SWEEPS.split(run, kind, enqueue_part)
            if handed is not None:
                return handed
        return Outcome(with_fork(run.inputs, kind.run(run.inputs, report)))
    except TopologyError as exc:
        raise JobError(exc.message, field=f"params.{exc.field}") from exc
