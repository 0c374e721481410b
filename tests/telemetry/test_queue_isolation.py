"""Telemetry has a queue of its own, so scenario runs can never starve it
(issue 11, item 2): telemetry tasks are routed to ``TWIN_TELEMETRY_QUEUE``,
jobs to the default queue, and a worker serving only the telemetry queue keeps
the live state current while no job worker exists at all."""
from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import numpy as np
import pytest
from django.conf import settings

from tests.conftest import ARTIFACTS, ROOT, _worker_env, wait_until
from tests.telemetry.conftest import PREFIX, batches_url
from twin.core.localnet import stop_process, telemetry_queue, use_queue, wait_celery
from twin.scenarios.models import ScenarioRun
from twin.telemetry import state


def route(name: str) -> str:
    from twin.celery import app

    return app.amqp.router.route({}, name)["queue"].name


def test_telemetry_tasks_go_to_their_own_queue_and_jobs_to_the_default_one():
    from twin.celery import app

    default = app.conf.task_default_queue
    assert settings.TWIN_TELEMETRY_QUEUE == telemetry_queue(settings.CELERY_TASK_DEFAULT_QUEUE)
    for name in ("twin.telemetry.drain", "twin.telemetry.tick_cluster",
                 "twin.telemetry.tick_all", "twin.telemetry.scrape_due",
                 "twin.telemetry.scrape_target", "twin.telemetry.persist_minute",
                 "twin.telemetry.cleanup"):
        assert route(name) == telemetry_queue(default), name
    for name in ("twin.scenarios.run", "twin.scenarios.reap", "twin.hardware.reap_builds",
                 "twin.hardware.tasks.run_cluster_build"):
        assert route(name) == default, name


@pytest.fixture
def telemetry_only_worker(transactional_db) -> Iterator[str]:
    """A worker serving only the telemetry queue of a queue pair private to this test."""
    from django.db import connection

    from twin.celery import app

    saved = app.conf.task_default_queue
    queue = f"twin-iso-{uuid.uuid4().hex[:8]}"
    use_queue(app, queue)
    env = _worker_env(dict(connection.settings_dict))
    env.update(TWIN_CELERY_QUEUE=queue, TWIN_TELEMETRY_PREFIX=PREFIX)
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / "celery-telemetry-only.log", "w")  # noqa: SIM115
    name = telemetry_queue(queue)
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "twin", "worker", "-Q", telemetry_queue(queue),
         "-P", "solo", "-l", "info", "--without-gossip", "--without-mingle", "-n",
         f"{name}@%h"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_celery(app, name, proc, log.name)
        yield queue
    finally:
        stop_process(proc)
        log.close()
        use_queue(app, saved)


@pytest.mark.django_db(transaction=True)
def test_a_telemetry_worker_alone_keeps_the_live_state_while_runs_wait(
        telemetry_only_worker, agent, admin_client_api, settings):
    settings.TELEMETRY_AUTO_DRAIN = True  # the ingest view queues the drain task
    cluster, cards = agent["cluster"], agent["cards"]
    response = admin_client_api.post("/api/scenarios/", {
        "kind": "topology", "params": {"family": "ring", "nodes": 8}}, format="json")
    assert response.status_code == 202, response.content
    for seq, watts in ((1, 610.0), (2, 620.0)):
        doc = {"seq": seq, "ts": time.time(),
               "cards": [{"card": c.pk, "power_w": watts} for c in cards]}
        answer = agent["client"].post(batches_url(cluster.pk), json.dumps(doc),
                                      content_type="application/json")
        assert answer.status_code == 202, answer.content
        wait_until(lambda w=watts: np.all(state.latest(cluster.pk, "power_w") == w), 20,
                   f"the telemetry worker to apply {watts} W")
    assert state.frame_seq(cluster.pk) > 0  # ticked (alerts are evaluated in the tick)
    # The scenario run went to the jobs queue, which nobody serves here.
    assert ScenarioRun.objects.get(pk=response.json()["id"]).status == "queued"
