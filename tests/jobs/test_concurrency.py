"""Two submits racing for the same cards: never both get them.

On PostgreSQL each request runs in its own thread and connection. Both read the
free capacity before either commits, both choose the same cards; the allocation
locks the server and card rows, so the second waits, then re-validates under the
lock, sees the first's allocations, and places again: queued here, as the cluster
has room for one of them only.
"""
from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from twin.jobs.choices import JobStateChoices
from twin.jobs.models import Allocation, Job


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_two_submits_racing_for_the_same_cards(tiny_cluster: dict[str, Any],
                                               admin_user: Any) -> None:
    from twin.jobs import capacity

    barrier = threading.Barrier(2, timeout=30)
    real = capacity.live_capacity

    def read_then_wait(cluster_id: int) -> Any:
        live = real(cluster_id)
        if threading.current_thread().name.startswith("racer"):
            try:
                barrier.wait()  # both have read the same free capacity
            except threading.BrokenBarrierError:
                pass
        return live

    answers: list[int] = []

    def racer(name: str) -> None:
        client = APIClient()
        client.force_authenticate(admin_user)
        try:
            response = client.post("/api/jobs/", {"cluster": tiny_cluster["cluster"].pk,
                                                  "name": name, "tenant": name, "cards": 6},
                                   format="json")
            answers.append(response.status_code)
        finally:
            connection.close()

    from twin.jobs import scheduler

    scheduler.live_capacity = read_then_wait  # the same function, paused after its read
    try:
        threads = [threading.Thread(target=racer, args=(f"racer{i}",), name=f"racer{i}")
                   for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        scheduler.live_capacity = real
    assert answers == [201, 201]
    states = sorted(Job.objects.values_list("state", flat=True))
    assert states == [JobStateChoices.QUEUED, JobStateChoices.RUNNING]
    assert Allocation.objects.count() == 6
    per_card = Allocation.objects.values_list("card_id", flat=True)
    assert len(set(per_card)) == 6


@pytest.mark.django_db
def test_a_placement_that_lost_its_cards_places_again(tiny_cluster: dict[str, Any]) -> None:
    """The retry path on any database: the capacity read is stale (another job took the
    cards after it), so the first allocation fails validation and the job is placed
    again from fresh rows."""
    from twin.jobs import scheduler
    from twin.jobs.models import Job as JobModel

    stale = scheduler.live_capacity(tiny_cluster["cluster"].pk)
    other = JobModel.objects.create(cluster=tiny_cluster["cluster"], name="other", tenant="x",
                                    cards=4)
    scheduler.submit(other)
    assert other.state == JobStateChoices.RUNNING
    calls = []
    real = scheduler.live_capacity

    def first_stale(cluster_id: int) -> Any:
        calls.append(cluster_id)
        return stale if len(calls) == 1 else real(cluster_id)

    job = JobModel(cluster=tiny_cluster["cluster"], name="late", tenant="y", cards=4)
    scheduler.live_capacity = first_stale
    try:
        scheduler.submit(job)
    finally:
        scheduler.live_capacity = real
    assert len(calls) == 2 and job.state == JobStateChoices.RUNNING
    held = set(Allocation.objects.filter(job=job).values_list("card_id", flat=True))
    assert not held & set(Allocation.objects.filter(job=other).values_list("card_id", flat=True))
