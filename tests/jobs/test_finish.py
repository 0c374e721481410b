"""Jobs finish: past their expected duration they complete, release their cards, and
the queued jobs that now fit are placed (``scheduler.finish_due``, on Celery beat)."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings

from twin.jobs import scheduler, tasks
from twin.jobs.choices import JobStateChoices
from twin.jobs.models import Allocation, Job

JOBS = "/api/jobs/"


def submit(client: Any, world: dict[str, Any], **fields: Any) -> dict[str, Any]:
    body = {"cluster": world["cluster"].pk, "name": "train", "tenant": "team-a", **fields}
    response = client.post(JOBS, body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_a_job_past_its_duration_completes_and_the_queue_moves(admin_client_api,
                                                                 tiny_cluster) -> None:
    first = submit(admin_client_api, tiny_cluster, cards=6, duration_s=60)
    second = submit(admin_client_api, tiny_cluster, cards=4, name="waits", duration_s=30)
    forever = submit(admin_client_api, tiny_cluster, cards=1, share_milli=500, name="svc")
    assert (first["state"], second["state"], forever["state"]) == ("running", "queued",
                                                                   "running")
    started = Job.objects.get(pk=first["id"]).started
    assert scheduler.finish_due(started + timedelta(seconds=59)) == []
    assert Job.objects.get(pk=first["id"]).state == JobStateChoices.RUNNING

    assert scheduler.finish_due(started + timedelta(seconds=60)) == [first["id"]]
    done = Job.objects.get(pk=first["id"])
    assert done.state == JobStateChoices.COMPLETED and done.finished is not None
    assert "6 card allocation(s) released" in done.message
    assert not Allocation.objects.filter(job=done).exists()
    waits = Job.objects.get(pk=second["id"])
    assert waits.state == JobStateChoices.RUNNING and waits.allocations.count() == 4
    # a job without a duration runs until cancelled; a completed job is never completed again
    later = started + timedelta(days=365)
    assert scheduler.finish_due(later) == [second["id"]]
    assert Job.objects.get(pk=forever["id"]).state == JobStateChoices.RUNNING
    assert scheduler.finish_due(later) == []


def test_a_cancelled_job_is_not_completed(admin_client_api, tiny_cluster) -> None:
    job = submit(admin_client_api, tiny_cluster, cards=2, duration_s=5)
    assert admin_client_api.post(f"{JOBS}{job['id']}/cancel/").status_code == 200
    assert scheduler.finish_due(Job.objects.get(pk=job["id"]).started
                                + timedelta(hours=1)) == []
    assert Job.objects.get(pk=job["id"]).state == JobStateChoices.CANCELLED


def test_the_beat_schedule_runs_the_task() -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["jobs-finish"]
    assert entry["task"] == tasks.finish_jobs.name == "twin.jobs.finish_due"
    assert 0 < float(entry["schedule"]) <= 60


@pytest.mark.django_db(transaction=True)
def test_the_worker_finishes_a_due_job(celery_worker, tiny_cluster) -> None:
    job = Job.objects.create(cluster=tiny_cluster["cluster"], name="old", tenant="t", cards=2,
                             duration_s=1)
    scheduler.submit(job)
    assert Job.objects.get(pk=job.pk).state == JobStateChoices.RUNNING
    Job.objects.filter(pk=job.pk).update(started=Job.objects.get(pk=job.pk).started
                                         - timedelta(seconds=5))
    assert tasks.finish_jobs.delay().get(timeout=30) == [job.pk]
    assert Job.objects.get(pk=job.pk).state == JobStateChoices.COMPLETED
    assert not Allocation.objects.filter(job_id=job.pk).exists()
