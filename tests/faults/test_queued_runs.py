"""The embedded Redis killed while runs wait in its queue: the runs still finish
(issue 22, item 3).

The embedded server runs as the demo runs it (``python -m twin.embedded serve``:
append-only file in the var directory), on a port and a directory of this test's
own. Four scenario runs are queued through the real ASGI server while no worker
serves their queue; one message is then taken out of the queue (what a crash can
lose: the last second of writes), and the server is killed (SIGKILL) and started
again. A worker started afterwards runs the three runs whose messages the
append-only file kept, and the queued reaper (``twin.scenarios.tasks.reap_scenarios``,
run as beat would) sends the fourth again, so all four succeed.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token

from tests.conftest import ROOT, _worker_env, asgi_server, wait_until
from tests.faults.test_redis_outage import http, start
from twin.core.localnet import free_port, stop_process, worker_queues
from twin.scenarios.models import ScenarioRun

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]


class EmbeddedRedis:
    """``python -m twin.embedded serve`` on a private port and directory."""

    def __init__(self, var_dir: Path) -> None:
        self.port = free_port()
        self.env = {**os.environ, "TWIN_VAR_DIR": str(var_dir),
                    "TWIN_EMBEDDED_REDIS_PORT": str(self.port)}
        self.env.pop("REDIS_URL", None)
        self.var_dir = var_dir
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, socket_timeout=2)

    def start(self) -> None:
        self.var_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.var_dir / "serve.log", "a")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen([sys.executable, "-m", "twin.embedded", "serve"],
                                     cwd=ROOT, env=self.env, stdout=log,
                                     stderr=subprocess.STDOUT)
        log.close()

        def up() -> bool:
            try:
                return bool(self.client().ping())
            except redis.RedisError:
                return False

        wait_until(up, 15, "the embedded Redis")

    def kill(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)  # a crash: no shutdown, no final write
        self.proc.wait()
        self.proc = None

    def close(self) -> None:
        if self.proc is not None:
            stop_process(self.proc, timeout=10)
            self.proc = None


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(tmp_path / "var")
    server.start()
    try:
        yield server
    finally:
        server.close()


def test_runs_queued_when_the_embedded_redis_is_killed_still_finish(embedded, tmp_path):
    from django.db import connection

    queue = f"twin-queued-{os.getpid()}"
    env = _worker_env(dict(connection.settings_dict))
    env.update(REDIS_URL=embedded.url, TWIN_CELERY_QUEUE=queue, TWIN_LOG_LEVEL="WARNING",
               TWIN_SCENARIO_QUEUED_S="2")
    admin = User.objects.create_superuser("admin", "admin@example.com", "admin-pass-123")
    api = {"Authorization": f"Token {Token.objects.create(user=admin).key}"}
    ids = []
    with asgi_server(env, "queued-uvicorn.log", "/healthz/") as base:
        for nodes in (8, 9, 10, 11):
            status, _, body = http(f"{base}/api/scenarios/", "POST",
                                   {"kind": "topology", "params": {"family": "ring",
                                                                   "nodes": nodes}}, api)
            assert status == 202, body
            ids.append(body["id"])
    broker = embedded.client()
    wait_until(lambda: broker.llen(queue) == 4, 10, "four messages in the queue")
    lost = json.loads(broker.rpop(queue))["headers"]["id"]  # the message a crash lost
    assert lost in set(ScenarioRun.objects.values_list("task_id", flat=True))

    embedded.kill()
    embedded.start()
    assert embedded.client().llen(queue) == 3  # the append-only file kept the others

    worker = start([sys.executable, "-m", "celery", "-A", "twin", "worker", "-Q",
                    worker_queues(queue), "-c", "2", "-l", "info", "-n", f"{queue}@%h"],
                   env, "queued-worker.log")
    try:
        def statuses() -> dict[int, str]:
            return dict(ScenarioRun.objects.filter(pk__in=ids).values_list("pk", "status"))

        wait_until(lambda: list(statuses().values()).count("succeeded") == 3, 90,
                   "the three kept runs to finish")
        waiting = [pk for pk, status in statuses().items() if status == "queued"]
        assert len(waiting) == 1  # the lost one: no message, no worker will ever see it
        time.sleep(2.1)  # TWIN_SCENARIO_QUEUED_S after it was sent

        # The reaper, as beat runs it (same task, same broker).
        reaped = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c",
             "from twin.scenarios.tasks import reap_scenarios; reap_scenarios()"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert reaped.returncode == 0, reaped.stderr
        wait_until(lambda: set(statuses().values()) == {"succeeded"}, 60,
                   "the lost run, sent again, to finish")
        run = ScenarioRun.objects.get(pk=waiting[0])
        assert run.task_id != lost and run.result
    finally:
        stop_process(worker, timeout=10)


