"""The Celery build task end to end: a real worker builds and records the outcome."""
from __future__ import annotations

import time

import pytest

from twin.hardware.models import Card, ClusterBuild, Rack
from twin.hardware.tasks import run_cluster_build

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def wait_done(pk: int, timeout: float = 90.0) -> ClusterBuild:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        build = ClusterBuild.objects.get(pk=pk)
        if build.status in ("succeeded", "failed"):
            return build
        time.sleep(0.2)
    raise AssertionError(f"build {pk} still {build.status} after {timeout} s")


def test_worker_builds_a_cluster(celery_worker):
    build = ClusterBuild.objects.create(preset="seed-512", name="via-worker",
                                        params={"supernodes": 2})
    run_cluster_build.delay(build.pk)
    done = wait_done(build.pk)
    assert done.status == "succeeded", done.error
    assert done.progress == 1.0 and done.started and done.finished
    assert done.started <= done.finished
    assert done.result["cards"] == 1024 and done.result["racks_per_supernode"] == 13
    assert done.cluster_id == done.result["cluster_id"]
    assert done.cluster.name == "via-worker"
    assert Card.objects.filter(supernode__cluster=done.cluster).count() == 1024
    assert Rack.objects.filter(cluster=done.cluster).over_budget().count() == 0
    assert done.task_id


def test_bad_build_fails_with_the_reason(celery_worker):
    build = ClusterBuild.objects.create(preset="seed-512", name="tight",
                                        params={"rack_budget_w": 5000})
    run_cluster_build.delay(build.pk)
    done = wait_done(build.pk)
    assert done.status == "failed"
    assert "at most 4 cards per server would fit" in done.error
    assert done.finished and done.cluster_id is None


def test_duplicate_name_fails_unless_replace(celery_worker):
    first = ClusterBuild.objects.create(preset="seed-512", name="dup")
    run_cluster_build.delay(first.pk)
    assert wait_done(first.pk).status == "succeeded"
    second = ClusterBuild.objects.create(preset="seed-512", name="dup")
    run_cluster_build.delay(second.pk)
    failed = wait_done(second.pk)
    assert failed.status == "failed" and "--replace" in failed.error
    third = ClusterBuild.objects.create(preset="seed-512", name="dup", params={"replace": True})
    run_cluster_build.delay(third.pk)
    assert wait_done(third.pk).status == "succeeded"
