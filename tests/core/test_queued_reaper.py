"""The queued reaper (``JobRunner.reap_queued``, issue 22 item 3): a job whose message
was lost stays ``queued`` for ever unless something sends it again; one nobody takes
at all is failed with the reason; a job sent twice is computed once.

Driven over ``ClusterBuild`` rows with a ``send`` that records what the broker
would get (``enqueue`` takes any callable with ``apply_async``'s signature).
"""
from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from twin.core.jobs import JobRunner, Outcome
from twin.hardware.models import ClusterBuild


class Broker:
    """What was sent: ``(job id, task id)`` in order."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, str]] = []

    def __call__(self, *, args: list[int], task_id: str) -> None:
        self.sent.append((args[0], task_id))


@pytest.fixture
def jobs() -> JobRunner[ClusterBuild]:
    return JobRunner(ClusterBuild, noun="test job", again="try again", smaller="do less",
                     settings_prefix="TWIN_TEST_QUEUED", time_limit_s=60)


@pytest.fixture
def broker() -> Broker:
    return Broker()


def test_a_job_nobody_took_is_sent_again_then_failed_with_the_reason(db, jobs, broker):
    job = ClusterBuild.objects.create(preset="seed-512", name="job")
    jobs.enqueue(job.pk, broker)
    first = broker.sent[-1][1]
    job.refresh_from_db()
    assert job.sent is not None and job.task_id == first

    assert jobs.reap_queued(broker, job.sent + timedelta(seconds=30)) == {
        "resent": [], "failed": []}  # not yet: workers may be busy
    later = job.sent + timedelta(seconds=jobs.queued_s() + 1)
    assert jobs.reap_queued(broker, later) == {"resent": [job.pk], "failed": []}
    job.refresh_from_db()
    assert job.status == "queued" and job.task_id != first and broker.sent[-1] == (
        job.pk, job.task_id)
    assert jobs.reap_queued(broker, later)["resent"] == []  # once per QUEUED_S, not per beat

    past = job.created + timedelta(seconds=jobs.queued_fail_s() + 1)
    assert jobs.reap_queued(broker, past)["failed"] == [job.pk]
    job.refresh_from_db()
    assert job.status == "failed" and "no worker took it" in job.error
    assert "try again" in job.error


def test_a_job_sent_twice_runs_once(db, jobs, broker):
    job = ClusterBuild.objects.create(preset="seed-512", name="job")
    jobs.enqueue(job.pk, broker)
    first = broker.sent[-1][1]
    jobs.reap_queued(broker, timezone.now() + timedelta(seconds=jobs.queued_s() + 1))
    second = broker.sent[-1][1]
    ran: list[str] = []

    def work(row: ClusterBuild, report: Any) -> Outcome:
        ran.append(row.task_id)
        # The other copy is delivered while this one runs: it leaves the job alone.
        other = jobs.execute(row.pk, work, worker="w2@host", task_id=second)
        assert other.status == "running" and other.worker == "w1@host"
        return Outcome({"ok": True})

    ended = jobs.execute(job.pk, work, worker="w1@host", task_id=first)
    assert ended.status == "succeeded" and ran == [first]
    # Delivered again under the task id that runs it: the worker died, so it is lost.
    again = ClusterBuild.objects.create(preset="seed-512", name="again")
    jobs.enqueue(again.pk, broker)
    task = broker.sent[-1][1]
    assert jobs.claim(again.pk, worker="w1@host", task_id=task)
    assert jobs.execute(again.pk, work, worker="w2@host", task_id=task).status == "failed"
