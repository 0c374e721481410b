"""Sweeps across workers: a run split into parts (``twin.scenarios.sweeps``).

In-process tests drive the parts by hand (no broker: what the split writes and
what each part's fate does to its run); the ``worker`` tests send them through
the real broker to a real Celery worker: the merged result equals the run
computed whole, progress rises over the parts, a cancel mid-sweep stops the
rest, a failing part fails the run with its error.
"""
from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.test import override_settings
from django.utils import timezone

from tests.conftest import wait_until
from tests.scenarios.conftest import SCENARIOS, communicator, session_headers
from twin.core.choices import JobStatusChoices as S
from twin.scenarios import runner
from twin.scenarios.kinds import REGISTRY
from twin.scenarios.models import ScenarioPart, ScenarioRun
from twin.scenarios.runner import submit

SEARCH = {"model": "mixtral-8x7b", "accelerator": "h100-sxm5-80gb", "cards": 4096,
          "global_batch": 4096, "top": 20, "limits": {"micro_batch": [1, 2, 4, 8, 16]}}
"""~600k configurations: five parts of at least ``PART_CONFIGS``; a few seconds whole."""
SCHEDULING = {"policies": "fgd,best-fit,random,gpu-packing", "jobs": 4000, "servers": 128,
              "gpus_per_server": 8, "seed": 3}
"""Past ``SPLIT_MIN_JOBS`` and ``SPLIT_MIN_NODES``: one part per policy."""
RESILIENCE = {"accelerator": "h100-sxm5-80gb", "cards": 16384, "days": 30,
              "checkpoint_interval_min": 30, "sweep_runs": 3, "seed": 5}
"""17 intervals × 3 histories: past ``SPLIT_MIN_RUNS`` twice, so two parts."""
TIMINGS = ("wall_s", "configs_per_s")


def untimed(value: Any) -> Any:
    """``value`` without the keys that time the computation, numbers as floats: a
    result stored in PostgreSQL's jsonb comes back with a large float that has no
    fraction as an integer (1.3914e18 → 1391401178624950300), equal but not the same type."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def whole(run: ScenarioRun) -> dict:
    """The run computed whole, in this process (the single-process baseline)."""
    return REGISTRY[run.kind].run(run.inputs, lambda f, m: None)


# ------------------------------------------------------------ in process
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind, params", [("training_search", SEARCH),
                                          ("scheduling", SCHEDULING),
                                          ("resilience", RESILIENCE)])
def test_parts_run_by_hand_merge_to_the_whole_result(kind, params, admin_user) -> None:
    run = submit(kind, params, None, admin_user, enqueue=False)
    sent: list[int] = []
    runner.execute(run.pk, worker="here", enqueue_part=sent.append)
    run.refresh_from_db()
    assert run.status == S.RUNNING and len(sent) > 1 and run.message.startswith("split into")
    progress = []
    for part_id in sent:
        part = runner.execute_part(part_id, worker="here")
        assert part.status == S.SUCCEEDED, part.error
        progress.append(ScenarioRun.objects.get(pk=run.pk).progress)
    run.refresh_from_db()
    assert run.status == S.SUCCEEDED, run.error
    assert progress == sorted(progress) and progress[-1] == 1.0
    assert untimed(run.result) == untimed(whole(run))
    assert f"on {len(sent)} parts" in run.message
    assert not ScenarioPart.objects.filter(run=run, result__isnull=False).exists()


@pytest.mark.django_db(transaction=True)
def test_the_split_honours_the_parts_cap_and_zero_runs_whole(admin_user) -> None:
    run = submit("scheduling", SCHEDULING, None, admin_user, enqueue=False)
    sent: list[int] = []
    with override_settings(TWIN_SCENARIO_SPLIT_PARTS=2):
        runner.execute(run.pk, worker="here", enqueue_part=sent.append)
    assert [p.part for p in ScenarioPart.objects.filter(run=run)] == [
        {"policies": [0, 1]}, {"policies": [2, 3]}]
    other = submit("scheduling", SCHEDULING, None, admin_user, enqueue=False, refresh=True)
    with override_settings(TWIN_SCENARIO_SPLIT_PARTS=0):
        done = runner.execute(other.pk, worker="here", enqueue_part=sent.append)
    assert done.status == S.SUCCEEDED and len(sent) == 2


@pytest.mark.django_db(transaction=True)
def test_a_failed_part_fails_the_run_and_cancels_the_rest(admin_user) -> None:
    run = submit("scheduling", SCHEDULING, None, admin_user, enqueue=False)
    sent: list[int] = []
    runner.execute(run.pk, worker="here", enqueue_part=sent.append)
    runner.SWEEPS.parts.claim(sent[1], worker="w2")
    assert runner.SWEEPS.parts.fail(sent[1], "boom: out of memory", field="params.jobs")
    run.refresh_from_db()
    assert run.status == S.FAILED
    assert run.error == "part 2 of 4: boom: out of memory" and run.error_field == "params.jobs"
    states = list(ScenarioPart.objects.filter(run=run).values_list("status", flat=True))
    assert states == [S.CANCELLED, S.FAILED, S.CANCELLED, S.CANCELLED]
    # a part whose task arrives anyway does nothing
    assert runner.execute_part(sent[0], worker="here").status == S.CANCELLED


@pytest.mark.django_db(transaction=True)
def test_the_reaper_judges_a_split_run_by_its_parts(admin_user) -> None:
    """A split run's own heartbeat may go silent while its parts wait or compute;
    the reaper fails it only through a part whose worker went silent."""
    run = submit("scheduling", SCHEDULING, None, admin_user, enqueue=False)
    sent: list[int] = []
    runner.execute(run.pk, worker="gone@host", enqueue_part=sent.append)
    long_ago = timezone.now() - timedelta(hours=1)
    ScenarioRun.objects.filter(pk=run.pk).update(heartbeat=long_ago, started=long_ago)
    assert runner.reap() == [] and runner.fail_orphans("gone@host") == []
    assert ScenarioRun.objects.get(pk=run.pk).status == S.RUNNING  # parts queued: alive
    runner.SWEEPS.parts.claim(sent[0], worker="lost@host")
    ScenarioPart.objects.filter(pk=sent[0]).update(heartbeat=long_ago)
    assert runner.reap() == [run.pk]
    run.refresh_from_db()
    assert run.status == S.FAILED and run.error.startswith("part 1 of 4: the worker running it "
                                                           "(lost@host) stopped")


@pytest.mark.django_db(transaction=True)
def test_a_restarted_worker_fails_the_parts_it_ran(admin_user) -> None:
    run = submit("scheduling", SCHEDULING, None, admin_user, enqueue=False)
    sent: list[int] = []
    runner.execute(run.pk, worker="a@host", enqueue_part=sent.append)
    runner.SWEEPS.parts.claim(sent[2], worker="b@host")
    assert runner.fail_orphans("b@host") == [run.pk]
    run.refresh_from_db()
    assert run.status == S.FAILED and "the worker b@host restarted" in run.error


# ------------------------------------------------------------ real worker
def finished(client: Any, run_id: int) -> dict | None:
    body = client.get(f"{SCENARIOS}{run_id}/").json()
    return body if body["status"] in S.FINAL else None


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_split_search_in_the_worker_equals_the_whole_and_progress_rises(
        celery_worker, admin_user, admin_client_api) -> None:
    from twin.scenarios.tasks import enqueue_run

    run = submit("training_search", SEARCH, None, admin_user, enqueue=False)
    headers = session_headers(admin_user)

    async def watch() -> list[dict]:
        comm = communicator(run.pk, headers)
        connected, _ = await comm.connect()
        assert connected
        messages = [await comm.receive_json_from(timeout=5)]
        await database_sync_to_async(enqueue_run)(run.pk)
        while messages[-1]["type"] != "finished":
            messages.append(await comm.receive_json_from(timeout=120))
        await comm.disconnect()
        return messages

    messages = async_to_sync(watch)()
    final = messages[-1]["run"]
    assert final["status"] == "succeeded", final["error"]
    progress = [m["progress"] for m in messages if m["type"] == "progress"]
    assert progress == sorted(progress) and len({p for p in progress if 0 < p < 1}) >= 3
    parts = list(ScenarioPart.objects.filter(run_id=run.pk).values_list("status", "worker"))
    assert len(parts) > 1 and all(status == S.SUCCEEDED for status, _ in parts)
    assert all(worker.startswith(celery_worker) for _, worker in parts)
    body = admin_client_api.get(f"{SCENARIOS}{run.pk}/").json()
    assert untimed(body["result"]) == untimed(whole(run))
    # the cache is unchanged: the same request is answered from this run
    again = submit("training_search", SEARCH, None, admin_user, enqueue=False)
    assert again.cached_from_id == run.pk and again.result == body["result"]


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_cancel_mid_sweep_stops_the_pending_parts(celery_worker, admin_user,
                                                  admin_client_api) -> None:
    """The split is done here and the parts are sent by hand, so the cancel lands
    between them for sure: a part takes ~0.4 s, and a sweep sent whole could end
    before any cancel reached it (it did, on a busy CI machine)."""
    from twin.scenarios.tasks import enqueue_part

    run = submit("training_search", SEARCH, None, admin_user, enqueue=False, refresh=True)
    held: list[int] = []
    runner.execute(run.pk, worker="here", enqueue_part=held.append)
    assert len(held) > 2
    enqueue_part(held[0])  # through the broker to the real worker
    wait_until(lambda: ScenarioPart.objects.filter(pk=held[0], status=S.SUCCEEDED).exists(),
               timeout=120, what="a first part done")
    response = admin_client_api.post(f"{SCENARIOS}{run.pk}/cancel/")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    for part_id in held[1:]:  # the parts still in the broker when the cancel came
        enqueue_part(part_id)
    wait_until(lambda: not ScenarioPart.objects.filter(run_id=run.pk,
                                                       status__in=S.ACTIVE).exists(),
               timeout=30, what="no part left queued or running")
    states = list(ScenarioPart.objects.filter(run_id=run.pk).order_by("index")
                  .values_list("status", flat=True))
    assert states == [S.SUCCEEDED] + [S.CANCELLED] * (len(held) - 1)
    # the worker goes on to later work; the cancelled parts never ran after
    later = admin_client_api.post(SCENARIOS, {"kind": "route", "params": {
        "family": "ring", "nodes": 16, "src": 0, "dst": 5}}, format="json").json()
    assert wait_until(lambda: finished(admin_client_api, later["id"]),
                      timeout=60)["status"] == "succeeded"
    assert list(ScenarioPart.objects.filter(run_id=run.pk).order_by("index")
                .values_list("status", flat=True)) == states
    assert not ScenarioPart.objects.filter(run_id=run.pk, pk__in=held[1:],
                                           started__isnull=False).exists()
    body = admin_client_api.get(f"{SCENARIOS}{run.pk}/").json()
    assert body["status"] == "cancelled" and body["result"] is None


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_failing_part_in_the_worker_fails_the_run_with_its_error(
        celery_worker, admin_user, admin_client_api) -> None:
    """A trace changed after the run was queued: its parts refuse to replay it."""
    from tests.jobs.test_traces import NODES, PODS_HEADER, upload
    from twin.jobs.models import Trace
    from twin.scenarios.tasks import enqueue_run

    nodes = NODES + "".join(f"big-{i},96000,786432,8,V100M32\n" for i in range(128))
    pods = PODS_HEADER + "".join(f"pod-{i},4000,32768,1,1000,,LS,Running,{100 + i},"
                                 f"{5000 + 7 * i},{101 + i}\n" for i in range(2000))
    trace = upload(admin_client_api, pods=pods, nodes=nodes).json()
    run = submit("scheduling", {"trace": trace["id"], "policies": "fgd,best-fit,random"},
                 None, admin_user, enqueue=False)
    Trace.objects.filter(pk=trace["id"]).update(sha256="0" * 64)
    enqueue_run(run.pk)
    body = wait_until(lambda: finished(admin_client_api, run.pk), timeout=60)
    assert body["status"] == "failed"
    assert body["error"].startswith("part ") and "of 3" in body["error"]
    assert f"trace {trace['id']} was deleted or changed" in body["error"]
    wait_until(lambda: not ScenarioPart.objects.filter(run_id=run.pk,
                                                       status__in=S.ACTIVE).exists(),
               timeout=30, what="the other parts ended")
    assert not ScenarioPart.objects.filter(run_id=run.pk, status=S.SUCCEEDED).exists()


@pytest.mark.django_db(transaction=True)
def test_small_sweeps_run_whole(admin_user) -> None:
    """Below a part's worth of work (``PART_CONFIGS``, ``SPLIT_MIN_JOBS`` and
    ``SPLIT_MIN_NODES``) a run is not split: its parts would cost more than they save."""
    small = [("training_search", {"model": "llama3-8b", "accelerator": "a100-sxm-80gb",
                                  "cards": 64, "global_batch": 128}),
             ("scheduling", {**SCHEDULING, "jobs": 500}),
             ("scheduling", {**SCHEDULING, "servers": 64}),
             ("resilience", {**RESILIENCE, "sweep_runs": 1})]
    for kind, params in small:
        run = submit(kind, params, None, admin_user, enqueue=False)
        sent: list[int] = []
        done = runner.execute(run.pk, worker="here", enqueue_part=sent.append)
        assert done.status == S.SUCCEEDED and sent == [], (kind, params)
