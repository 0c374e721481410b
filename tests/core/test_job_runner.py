"""The one job runner (``twin.core.jobs``): compare-and-set transitions, progress
that notices cancellation, the heartbeat thread, queueing.

The runner is model-agnostic; these tests drive it over ``ClusterBuild`` rows
with work functions of their own (no builder), and record what it publishes.
"""
from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection, transaction

from twin.core.jobs import Cancelled, JobError, JobRunner, Outcome
from twin.hardware.models import Cluster, ClusterBuild


@pytest.fixture
def events() -> list[tuple[int, str, float, str]]:
    return []


@pytest.fixture
def jobs(events: list) -> JobRunner[ClusterBuild]:
    def publish(job_id: int, status: str, progress: float, message: str) -> None:
        events.append((job_id, status, progress, message))

    return JobRunner(ClusterBuild, noun="test job", again="try again", smaller="do less",
                     settings_prefix="TWIN_TEST_JOB", time_limit_s=60, publish=publish,
                     progress_interval_s=0.0)


def queued() -> ClusterBuild:
    return ClusterBuild.objects.create(preset="seed-512", name="job")


def test_a_cancelled_jobs_late_result_is_dropped(db, jobs, events):
    job = queued()

    def work(row: ClusterBuild, report: Any) -> Outcome:
        report(0.5, "half way")
        assert jobs.cancel(row.pk)
        return Outcome({"late": True}, fields={"name": "renamed"})  # a slow worker

    ended = jobs.execute(job.pk, work, worker="w@host", task_id="t-1")
    assert ended.status == "cancelled" and ended.result is None
    assert ended.progress == 0.5 and ended.message == "cancelled" and ended.name == "job"
    assert (ended.worker, ended.task_id) == ("w@host", "t-1")
    assert [e[1:] for e in events] == [("running", 0.0, "starting"),
                                       ("running", 0.5, "half way"),
                                       ("cancelled", 0.5, "cancelled")]
    assert not jobs.cancel(job.pk)  # final: nothing to cancel


def test_report_stops_work_whose_job_left_running(db, jobs):
    job = queued()
    reached: list[str] = []

    def work(row: ClusterBuild, report: Any) -> Outcome:
        report(0.1, "start")
        jobs.fail(row.pk, "reaped meanwhile", from_statuses=("running",))
        report(0.2, "next chunk")  # raises Cancelled: the row is no longer running
        reached.append("after")
        return Outcome({})

    ended = jobs.execute(job.pk, work)
    assert reached == []
    assert ended.status == "failed" and ended.error == "reaped meanwhile"
    assert ended.result is None and ended.progress == 0.1


def test_success_sets_result_message_and_fields_in_one_update(db, jobs, events):
    cluster = Cluster.objects.create(name="made")
    job = queued()
    ended = jobs.execute(job.pk, lambda row, report: Outcome(
        {"n": 1}, message="made it", fields={"cluster_id": cluster.pk}))
    assert (ended.status, ended.result, ended.cluster_id) == ("succeeded", {"n": 1}, cluster.pk)
    assert ended.progress == 1.0 and ended.message == "made it"
    assert ended.started <= ended.finished and ended.is_final
    assert events[-1][1:] == ("succeeded", 1.0, "made it")
    default = jobs.execute(queued().pk, lambda row, report: Outcome({}))
    assert default.message.startswith("done in ")


def test_errors_end_failed_with_the_reason_and_the_input_blamed(db, jobs):
    def explained(row: ClusterBuild, report: Any) -> Outcome:
        raise JobError("too many supernodes for 40 kW racks", field="supernodes")

    def broken(row: ClusterBuild, report: Any) -> Outcome:
        raise ValueError("boom")

    one = jobs.execute(queued().pk, explained)
    assert (one.status, one.error_field) == ("failed", "supernodes")
    assert one.error == one.message == "too many supernodes for 40 kW racks"
    two = jobs.execute(queued().pk, broken)
    assert (two.status, two.error, two.error_field) == ("failed", "ValueError: boom", "")
    assert two.finished is not None


def test_only_a_queued_job_is_run(db, jobs):
    calls: list[int] = []

    def work(row: ClusterBuild, report: Any) -> Outcome:
        calls.append(row.pk)
        return Outcome({})

    done = ClusterBuild.objects.create(preset="p", name="done", status="succeeded")
    assert jobs.execute(done.pk, work).status == "succeeded"
    lost = ClusterBuild.objects.create(preset="p", name="lost", status="running",
                                       worker="w1@host")
    again = jobs.execute(lost.pk, work, worker="w2@host")
    assert again.status == "failed" and "(w1@host) was lost" in again.error
    assert again.error.endswith("try again")
    assert jobs.execute(10**9, work) is None
    assert calls == []


def test_enqueue_sends_under_the_rows_task_id_or_fails_with_what_to_check(db, jobs):
    sent: list[dict] = []
    job = queued()
    jobs.enqueue(job.pk, lambda **kwargs: sent.append(kwargs))
    job.refresh_from_db()
    assert job.task_id and sent == [{"args": [job.pk], "task_id": job.task_id}]

    def refuse(**kwargs: Any) -> None:
        raise ConnectionError("Connection refused")

    other = queued()
    jobs.enqueue(other.pk, refuse)
    other.refresh_from_db()
    assert other.status == "failed"
    assert "could not queue the test job: Connection refused" in other.error
    assert "REDIS_URL" in other.error


def test_the_heartbeat_beats_while_work_computes(transactional_db, jobs, settings):
    settings.TWIN_TEST_JOB_HEARTBEAT_S = 0.05
    job = queued()
    beats: list[Any] = []

    def work(row: ClusterBuild, report: Any) -> Outcome:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and len(set(beats)) < 3:
            beats.append(ClusterBuild.objects.get(pk=row.pk).heartbeat)
            time.sleep(0.02)
        return Outcome({})

    ended = jobs.execute(job.pk, work)
    assert ended.status == "succeeded"
    assert len(set(beats)) >= 3  # the thread moved it on while the work never reported
    assert not [t for t in threading.enumerate() if t.name.endswith(f"-heartbeat-{job.pk}")]


@pytest.mark.skipif(connection.vendor != "postgresql",
                    reason="SQLite has one write lock: the work's transaction holds it, so "
                           "neither its progress nor a cancel can land before it commits")
def test_work_in_its_own_transaction_shows_progress_and_is_rolled_back_on_cancel(
        transactional_db, jobs, settings):
    """A build writes every row in one transaction: its progress goes through the
    heartbeat thread's connection, so others see it, and a cancel reaches it."""
    settings.TWIN_TEST_JOB_HEARTBEAT_S = 0.05
    job = queued()
    seen: dict[str, Any] = {}

    def other_connection(action: Any) -> Any:
        out: list[Any] = []
        thread = threading.Thread(target=lambda: (out.append(action()),
                                                  connection.close()))
        thread.start()
        thread.join()
        return out[0]

    def work(row: ClusterBuild, report: Any) -> Outcome:
        with transaction.atomic():
            Cluster.objects.create(name="half-built")
            report(0.4, "writing rows")
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and "progress" not in seen:
                found = other_connection(lambda: ClusterBuild.objects.get(pk=row.pk).progress)
                if found == 0.4:
                    seen["progress"] = found
            assert other_connection(lambda: jobs.cancel(row.pk))
            while time.monotonic() < deadline:
                report(0.5, "more rows")  # raises Cancelled once the thread saw it
                time.sleep(0.02)
        return Outcome({"built": True})

    ended = jobs.execute(job.pk, work)
    assert seen == {"progress": 0.4}
    assert ended.status == "cancelled" and ended.result is None
    assert not Cluster.objects.filter(name="half-built").exists()  # rolled back


def test_cancelled_is_what_report_raises(db, jobs):
    job = queued()
    raised: list[type] = []

    def work(row: ClusterBuild, report: Any) -> Outcome:
        jobs.cancel(row.pk)
        try:
            report(0.3, "too late")
        except Cancelled as exc:
            raised.append(type(exc))
            raise
        return Outcome({})

    assert jobs.execute(job.pk, work).status == "cancelled"
    assert raised == [Cancelled]
