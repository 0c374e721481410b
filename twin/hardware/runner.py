"""Running cluster builds as jobs: the one runner (:class:`twin.core.jobs.JobRunner`)
with the builder as its work.

The API records a queued ``ClusterBuild`` and, once it is committed, sends
the task through :func:`twin.hardware.tasks.enqueue_build`; the worker's
:func:`execute` claims the build, calls
:func:`~twin.hardware.builder.build_cluster` with the runner's rate-limited
``report`` as its progress, and ends it ``succeeded`` (result and cluster in
one update) or ``failed`` with the builder's message and the input it blames.
A heartbeat thread beats while it builds; :func:`reap` on Celery beat and
:func:`fail_orphans` on worker start fail a build whose worker died, so it
never stays ``running``.

The builder writes every row in one transaction, so progress and heartbeat go
through the heartbeat thread's own connection (see the runner's docstring):
on PostgreSQL the API shows them while the build runs, and a build that is
cancelled or reaped meanwhile is rolled back at its next report. Settings:
``TWIN_BUILD_TIME_LIMIT_S`` (default 3600), ``TWIN_BUILD_HEARTBEAT_S``,
``TWIN_BUILD_STALE_S``. This module never imports the tasks.
"""
from __future__ import annotations

from collections.abc import Callable

from twin.core.jobs import JobError, JobRunner, Outcome, Reporter
from twin.hardware.models import ClusterBuild

__all__ = ["JOBS", "build", "cancel", "execute", "fail", "fail_orphans", "heartbeat_s", "reap",
           "stale_s", "time_limit_s"]

JOBS: JobRunner[ClusterBuild] = JobRunner(
    ClusterBuild, noun="build", again="request the build again",
    smaller="build fewer supernodes", settings_prefix="TWIN_BUILD", time_limit_s=3600,
    progress_interval_s=0.5)

time_limit_s = JOBS.time_limit_s
heartbeat_s = JOBS.heartbeat_s
stale_s = JOBS.stale_s
cancel = JOBS.cancel
fail = JOBS.fail
reap = JOBS.reap
fail_orphans = JOBS.fail_orphans


def execute(build_id: int, *, worker: str = "", task_id: str = "",
            echo: Callable[[float, str], None] | None = None) -> ClusterBuild | None:
    """Run queued build ``build_id`` here and now; returns it as it ended
    (see :meth:`twin.core.jobs.JobRunner.execute`)."""
    return JOBS.execute(build_id, build, worker=worker, task_id=task_id, echo=echo)


def build(job: ClusterBuild, report: Reporter) -> Outcome:
    """The work of one build: the builder on the recorded preset and parameters."""
    from twin.hardware.builder import BuildError, build_cluster

    params = dict(job.params or {})
    try:
        result = build_cluster(
            job.preset, name=job.name or None, supernodes=params.get("supernodes"),
            rack_budget_w=params.get("rack_budget_w"), replace=bool(params.get("replace")),
            progress=report)
    except BuildError as exc:
        raise JobError(exc.message, field=exc.field or "") from exc
    return Outcome(result, fields={"cluster_id": result["cluster_id"]},
                   message=f"built {result['cards']:,} cards in {result['seconds']:.1f} s")
