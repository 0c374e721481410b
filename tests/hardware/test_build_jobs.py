"""Builds as jobs: a build whose worker died ends failed instead of staying running.

The reaper (Celery beat) fails a running build whose heartbeat went silent or
that ran past its time limit; a worker that starts fails the builds an earlier
life of it left running; a redelivered build is failed, not built twice.
"""
from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from twin.hardware.models import ClusterBuild
from twin.hardware.runner import execute, fail, fail_orphans, reap, stale_s, time_limit_s
from twin.hardware.tasks import fail_builds_of_restarted_worker


def running(worker: str = "w@host", **times: Any) -> ClusterBuild:
    build = ClusterBuild.objects.create(preset="seed-512", name="b", status="running",
                                        worker=worker, started=timezone.now())
    if times:
        ClusterBuild.objects.filter(pk=build.pk).update(**times)
    return ClusterBuild.objects.get(pk=build.pk)


def test_a_build_whose_heartbeat_went_silent_is_reaped_to_failed(db):
    now = timezone.now()
    silent = running("w1@host", started=now - timedelta(minutes=5),
                     heartbeat=now - timedelta(seconds=stale_s() + 5))
    alive = running(started=now - timedelta(minutes=5), heartbeat=now - timedelta(seconds=1))
    overdue = running(started=now - timedelta(seconds=time_limit_s() + 120), heartbeat=now)
    queued = ClusterBuild.objects.create(preset="seed-512", name="q")
    assert sorted(reap(now)) == sorted([silent.pk, overdue.pk])
    silent.refresh_from_db()
    overdue.refresh_from_db()
    assert silent.status == "failed" and silent.finished is not None
    assert silent.error.startswith("the worker running it (w1@host) stopped: no sign of life "
                                   "since ")
    assert silent.error.endswith("so it probably died; request the build again")
    assert silent.message == silent.error  # one line: the list shows all of it
    assert overdue.status == "failed"
    assert f"exceeded the time limit of {time_limit_s()} s" in overdue.error
    assert "TWIN_BUILD_TIME_LIMIT_S" in overdue.error
    assert ClusterBuild.objects.get(pk=alive.pk).status == "running"
    assert ClusterBuild.objects.get(pk=queued.pk).status == "queued"
    assert reap(now) == []  # idempotent


def test_the_reapers_update_checks_the_silence_again(db):
    """A beat that lands between the reaper's query and its update saves the build."""
    now = timezone.now()
    build = running(heartbeat=now - timedelta(seconds=stale_s() + 5))
    silent_since = now - timedelta(seconds=stale_s())
    ClusterBuild.objects.filter(pk=build.pk).update(heartbeat=now)  # the thread beat
    assert not fail(build.pk, "silent", from_statuses=("running",),
                    where=Q(heartbeat__lt=silent_since))
    assert ClusterBuild.objects.get(pk=build.pk).status == "running"


def test_a_restarted_worker_fails_the_builds_it_owned(db):
    mine = running("w1@host")
    other = running("w2@host")
    fail_builds_of_restarted_worker(sender=SimpleNamespace(hostname="w1@host"))
    mine.refresh_from_db()
    assert mine.status == "failed" and mine.finished is not None
    assert mine.error == "the worker w1@host restarted while running it; request the build again"
    assert ClusterBuild.objects.get(pk=other.pk).status == "running"
    assert fail_orphans("") == []


def test_a_redelivered_build_is_failed_not_built_twice(db):
    build = running("w1@host")
    again = execute(build.pk, worker="w2@host")
    assert again.status == "failed" and "(w1@host) was lost" in again.error
    assert again.cluster_id is None and again.result is None


def test_the_build_reaper_runs_on_beat_and_the_task_survives_a_lost_worker():
    from twin.celery import app

    entry = settings.CELERY_BEAT_SCHEDULE["builds-reap"]
    assert entry["task"] == "twin.hardware.reap_builds" and entry["schedule"] <= 60
    assert entry["task"] in app.tasks
    task = app.tasks["twin.hardware.tasks.run_cluster_build"]
    assert task.acks_late and task.reject_on_worker_lost
    assert task.time_limit == time_limit_s() and task.soft_time_limit < task.time_limit
