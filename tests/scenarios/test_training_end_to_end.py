"""The training kinds end to end: POST → broker → the real Celery worker → API + websocket."""
from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async

from tests.scenarios.conftest import SCENARIOS, communicator, session_headers, wait_for
from tests.scenarios.test_training import SEARCH_KEYS, SMALL_SEARCH, STEP_KEYS
from twin.scenarios.runner import submit
from twin.scenarios.tasks import enqueue_run

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def finished(client: Any, run_id: int) -> dict | None:
    body = client.get(f"{SCENARIOS}{run_id}/").json()
    return body if body["status"] in ("succeeded", "failed", "cancelled") else None


def test_a_search_runs_in_the_worker_and_streams_progress(celery_worker, admin_user,
                                                          admin_client_api):
    run = submit("training_search", SMALL_SEARCH, None, admin_user, enqueue=False)
    headers = session_headers(admin_user)

    async def watch() -> list[dict]:
        comm = communicator(run.pk, headers)
        connected, _ = await comm.connect()
        assert connected
        messages = [await comm.receive_json_from(timeout=5)]
        await database_sync_to_async(enqueue_run)(run.pk)
        while messages[-1]["type"] != "finished":
            messages.append(await comm.receive_json_from(timeout=60))
        await comm.disconnect()
        return messages

    messages = async_to_sync(watch)()
    progress = [m["progress"] for m in messages if m["type"] == "progress"]
    assert progress and progress == sorted(progress)
    final = messages[-1]["run"]
    assert final["status"] == "succeeded", final["error"]
    body = admin_client_api.get(f"{SCENARIOS}{run.pk}/").json()
    assert SEARCH_KEYS <= set(body["result"]) and body["result"]["best"]
    assert body["worker"].startswith(celery_worker)
    labels = [row[0] for row in body["rows"]]
    assert "configurations" in labels and "#1" in labels


def test_a_step_posted_on_a_cluster_runs_in_the_worker(celery_worker, admin_client_api,
                                                       tiny_cluster):
    response = admin_client_api.post(SCENARIOS, {
        "kind": "training", "cluster": tiny_cluster["cluster"].pk,
        "params": {"model": "llama3-8b", "global_batch": 8, "tp": 8}}, format="json")
    assert response.status_code == 202, response.content
    body = wait_for(lambda: finished(admin_client_api, response.json()["id"]), timeout=60)
    assert body["status"] == "succeeded", body["error"]
    assert STEP_KEYS <= set(body["result"])
    # the tiny cluster's 2×2×2 torus of H100s is one 8-card scale-up domain
    assert body["result"]["system"]["scale_up_topology"] == "torus"
    assert body["result"]["cluster"]["name"] == "tiny"
