"""End to end: POST → Redis broker → real Celery worker → database → API and websocket.

The worker is the session's ``celery worker`` subprocess (``tests/conftest.py``)
on a private queue; the websocket goes through the full ASGI application
(origin check, session auth, router, consumer) on the real Redis channel layer.
"""
from __future__ import annotations

import os
import subprocess
import sys
import uuid
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from tests.conftest import ARTIFACTS, ROOT, _worker_env
from tests.scenarios.conftest import SCENARIOS, communicator, session_headers, wait_for
from twin.core.localnet import stop_process
from twin.scenarios.consumers import CLOSE_NOT_FOUND, CLOSE_UNAUTHENTICATED
from twin.scenarios.models import ScenarioRun
from twin.scenarios.runner import submit
from twin.scenarios.tasks import enqueue_run

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def finished(client: Any, run_id: int) -> dict | None:
    body = client.get(f"{SCENARIOS}{run_id}/").json()
    return body if body["status"] in ("succeeded", "failed", "cancelled") else None


def test_post_run_in_worker_result_over_api_and_websocket(celery_worker, admin_client_api,
                                                          admin_user):
    response = admin_client_api.post(SCENARIOS, {
        "kind": "topology", "params": {"family": "torus", "dims": [8, 8, 8]}}, format="json")
    assert response.status_code == 202, response.content
    run_id = response.json()["id"]
    body = wait_for(lambda: finished(admin_client_api, run_id))
    assert body["status"] == "succeeded", body["error"]
    assert body["result"]["avg_hops_exact"] == "3072/511"
    assert body["result"]["diameter_hops"] == 12 and body["progress"] == 1.0
    assert body["worker"].startswith(celery_worker)  # the session worker's node name
    headers = session_headers(admin_user)

    async def watch() -> dict:
        comm = communicator(run_id, headers)
        connected, _ = await comm.connect()
        assert connected
        message = await comm.receive_json_from(timeout=5)
        await comm.send_json_to({"action": "ping"})
        pong = await comm.receive_json_from(timeout=5)
        await comm.disconnect()
        assert pong == {"type": "pong"}
        return message

    snapshot = async_to_sync(watch)()
    assert snapshot["type"] == "snapshot"
    assert snapshot["run"]["status"] == "succeeded"
    assert snapshot["run"]["result"] == body["result"]


def test_progress_streams_to_the_websocket_while_the_worker_runs(celery_worker, admin_user):
    run = submit("collective", {"family": "torus", "dims": [4, 4, 4], "op": "allreduce",
                                "sizes": [1 << k for k in range(10, 31, 2)]}, None, admin_user,
                 enqueue=False)
    headers = session_headers(admin_user)

    async def watch() -> list[dict]:
        comm = communicator(run.pk, headers)
        connected, _ = await comm.connect()
        assert connected
        messages = [await comm.receive_json_from(timeout=5)]
        assert messages[0]["run"]["status"] == "queued"
        # the same call the API makes on commit: the worker takes it from here
        await database_sync(enqueue_run)(run.pk)
        while messages[-1]["type"] != "finished":
            messages.append(await comm.receive_json_from(timeout=30))
        await comm.disconnect()
        return messages

    messages = async_to_sync(watch)()
    kinds = [m["type"] for m in messages]
    assert kinds[0] == "snapshot" and kinds[-1] == "finished"
    progress = [m for m in messages if m["type"] == "progress"]
    assert progress and all(m["status"] == "running" for m in progress)
    values = [m["progress"] for m in progress]
    assert values == sorted(values) and 0 <= values[0] <= values[-1] <= 1
    final = messages[-1]["run"]
    assert final["status"] == "succeeded", final["error"]
    assert [s["size_bytes"] for s in final["result"]["sizes"]] == [1 << k for k in
                                                                  range(10, 31, 2)]
    assert ScenarioRun.objects.get(pk=run.pk).result == final["result"]


def database_sync(fn: Any) -> Any:
    from channels.db import database_sync_to_async

    return database_sync_to_async(fn)


def test_cancelled_run_stays_cancelled_and_cached_results_are_reused(celery_worker,
                                                                    admin_client_api):
    body = {"kind": "route", "params": {"family": "ring", "nodes": 64, "src": 0, "dst": 40}}
    first = admin_client_api.post(SCENARIOS, body, format="json").json()
    cancelled = admin_client_api.post(f"{SCENARIOS}{first['id']}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    # the worker handles messages in order: once a later run is done, the
    # cancelled one has been seen (and dropped) too
    second = admin_client_api.post(SCENARIOS, body, format="json")
    assert second.status_code == 202
    done = wait_for(lambda: finished(admin_client_api, second.json()["id"]))
    assert done["status"] == "succeeded" and done["result"]["hops"] == 24
    still = admin_client_api.get(f"{SCENARIOS}{first['id']}/").json()
    assert still["status"] == "cancelled" and still["result"] is None
    # the same request again: answered from the cache, no worker involved
    third = admin_client_api.post(SCENARIOS, body, format="json")
    assert third.status_code == 201
    assert third.json()["cached_from"] == done["id"]
    assert third.json()["result"] == done["result"]


def test_websocket_refuses_anonymous_clients_and_unknown_runs(admin_user, transactional_db):
    run = submit("topology", {"family": "ring", "nodes": 8}, None, admin_user, enqueue=False)
    anonymous, logged_in = session_headers(None), session_headers(admin_user)

    async def close_code(run_id: int, headers: list) -> int:
        comm = communicator(run_id, headers)
        connected, _ = await comm.connect()
        assert connected  # accepted, then closed with a reason
        message = await comm.receive_output(timeout=5)
        await comm.wait()
        return message["code"]

    assert async_to_sync(close_code)(run.pk, anonymous) == CLOSE_UNAUTHENTICATED
    assert async_to_sync(close_code)(run.pk + 1000, logged_in) == CLOSE_NOT_FOUND


def start_worker(queue: str, name: str, env: dict[str, str], log: Any) -> subprocess.Popen:
    """A ``celery worker`` of our own (the session's must not be killed), answering pings."""
    from twin.celery import app

    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "twin", "worker", "-Q", queue, "-P", "solo",
         "-l", "info", "--without-gossip", "--without-mingle", "-n", name],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    wait_for(lambda: proc.poll() is not None or app.control.ping(destination=[name],
                                                                  timeout=0.5), timeout=60)
    assert proc.poll() is None, "the worker exited early; see test-artifacts/"
    return proc


def test_a_run_whose_worker_dies_ends_failed_not_running(transactional_db, admin_user):
    """Kill the worker (SIGKILL) mid-run: the run is stuck ``running`` until the same
    worker starts again, whose startup hook fails it with the reason."""
    from django.db import connection

    from twin.scenarios.tasks import run_scenario

    queue = f"twin-test-dies-{uuid.uuid4().hex[:8]}"
    name = f"{queue}@{os.uname().nodename}"
    env = _worker_env(dict(connection.settings_dict))
    ARTIFACTS.mkdir(exist_ok=True)
    workers: list[subprocess.Popen] = []
    with open(ARTIFACTS / "celery-worker-dies.log", "w") as log:
        try:
            workers.append(start_worker(queue, name, env, log))
            # ~15 s of sampled BFS: long enough to be killed in the middle
            run = submit("failure", {"family": "torus", "dims": [32, 32, 32],
                                     "random_links": 5, "samples": 8000}, None, admin_user,
                         enqueue=False)
            run_scenario.apply_async(args=[run.pk], queue=queue, task_id=run.task_id)
            wait_for(lambda: ScenarioRun.objects.get(pk=run.pk).status == "running")
            workers[0].kill()
            workers[0].wait(timeout=20)
            stuck = ScenarioRun.objects.get(pk=run.pk)
            assert stuck.status == "running" and stuck.worker == name
            workers.append(start_worker(queue, name, env, log))
            dead = wait_for(lambda: ScenarioRun.objects.filter(pk=run.pk,
                                                               status="failed").first())
            assert f"the worker {name} restarted while running it" in dead.error
            assert dead.finished is not None and dead.result is None
        finally:
            for proc in workers:
                stop_process(proc)
