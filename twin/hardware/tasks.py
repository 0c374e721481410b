"""Celery tasks of the hardware app: cluster builds requested over the API.

The API creates a ``ClusterBuild`` row and enqueues ``run_cluster_build`` on
commit; the worker records progress on that row (at most every ~0.5 s, so a
million-card build does not spend its time updating it) and always finishes
it as ``succeeded`` or ``failed``: a Python exception never leaves it
``running``.
"""
from __future__ import annotations

import time
from typing import Any

from celery import shared_task
from django.utils import timezone

from twin.core.choices import JobStatusChoices
from twin.hardware.builder import BuildError, build_cluster

__all__ = ["PROGRESS_INTERVAL_S", "run_cluster_build"]

PROGRESS_INTERVAL_S = 0.5


@shared_task(bind=True, acks_late=True)
def run_cluster_build(self: Any, build_id: int) -> dict[str, Any] | None:
    """Run the build recorded in ``ClusterBuild`` ``build_id``; returns its result."""
    from twin.hardware.models import ClusterBuild

    build = ClusterBuild.objects.filter(pk=build_id).first()
    if build is None:  # deleted before a worker picked it up
        return None
    ClusterBuild.objects.filter(pk=build_id).update(
        status=JobStatusChoices.RUNNING, started=timezone.now(), progress=0.0,
        message="starting", task_id=(self.request.id or "")[:64], error="")
    last = 0.0

    def progress(fraction: float, message: str) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last < PROGRESS_INTERVAL_S and fraction < 1.0:
            return
        last = now
        ClusterBuild.objects.filter(pk=build_id).update(progress=fraction, message=message[:200])

    params = dict(build.params or {})
    try:
        result = build_cluster(
            build.preset, name=build.name or None, supernodes=params.get("supernodes"),
            rack_budget_w=params.get("rack_budget_w"), replace=bool(params.get("replace")),
            progress=progress)
    except BuildError as exc:
        _fail(build_id, exc.message)
        return None
    except BaseException as exc:  # noqa: BLE001 - record, then let Celery see it
        _fail(build_id, f"{type(exc).__name__}: {exc}")
        raise
    ClusterBuild.objects.filter(pk=build_id).update(
        status=JobStatusChoices.SUCCEEDED, progress=1.0, result=result,
        cluster_id=result["cluster_id"], finished=timezone.now(),
        message=f"built {result['cards']:,} cards in {result['seconds']:.1f} s")
    return result


def _fail(build_id: int, error: str) -> None:
    from twin.hardware.models import ClusterBuild

    ClusterBuild.objects.filter(pk=build_id).update(
        status=JobStatusChoices.FAILED, error=error, finished=timezone.now(),
        message=error.splitlines()[0][:200] if error else "failed")
