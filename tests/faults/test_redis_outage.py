"""Redis stopped and restarted under load: everything answers 503 meanwhile and
comes back by itself (issue 11, item 1).

Real parts only, on a redis-server of this test's own (``RedisServer``): the
ASGI server (uvicorn), a prefork Celery worker serving both queues as the demo
runs it, Celery beat, an agent thread posting a batch every 0.1 s and a
``websockets`` client logged in through the real login form. While Redis is
down: ingestion and scenario submission answer 503 + ``Retry-After`` within a
second and create nothing, the live socket is closed with 4503 and a new one
too. Once it is back: ingestion resumes, the same worker (never restarted) runs
a new scenario to the end, beat still ticks, a reconnecting client gets a
snapshot and then frames whose ``seq`` is above every one it saw before.
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import websockets
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token

from tests.conftest import ARTIFACTS, ROOT, _worker_env, asgi_server, wait_until
from tests.faults.redis_server import RedisServer
from tests.live.conftest import login_over_http
from twin.core.localnet import stop_process, worker_queues
from twin.live.protocol import CLOSE_UNAVAILABLE
from twin.scenarios.models import ScenarioRun
from twin.telemetry.models import TelemetryAgent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]


def http(url: str, method: str = "GET", body: Any = None,
         headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], Any]:
    """(status, lower-case headers, decoded JSON or None); never raises on a status."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            status, got, raw = response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        status, got, raw = exc.code, exc.headers, exc.read()
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        parsed = None
    return status, {k.lower(): v for k, v in got.items()}, parsed


class Agent(threading.Thread):
    """Posts one batch every 0.1 s, resending the same ``seq`` after a 503 (as
    ``manage.py telemetry_agent`` does); records every answer."""

    def __init__(self, base: str, cluster_id: int, cards: list[int], token: str) -> None:
        super().__init__(daemon=True)
        self.url = f"{base}/api/telemetry/clusters/{cluster_id}/batches/"
        self.cards, self.token = cards, token
        self.answers: list[tuple[float, int, int]] = []  # (time, seq, status)
        self.stopped = threading.Event()

    def run(self) -> None:
        seq = 1
        while not self.stopped.is_set():
            doc = {"seq": seq, "ts": time.time(),
                   "cards": [{"card": c, "power_w": 600.0 + seq % 7, "gpu_util": 80.0}
                             for c in self.cards]}
            try:
                status, _, _ = http(self.url, "POST", doc,
                                    {"Authorization": f"Bearer {self.token}"})
            except OSError:
                status = 0
            self.answers.append((time.monotonic(), seq, status))
            if status in (200, 202):
                seq += 1
            self.stopped.wait(0.1)

    def accepted_since(self, moment: float) -> int:
        return sum(1 for t, _, s in self.answers if t >= moment and s == 202)


def start(args: list[str], env: dict[str, str], log_name: str) -> subprocess.Popen:
    log = open(ARTIFACTS / log_name, "w")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    return proc


@pytest.fixture
def stack(tmp_path: Path, transactional_db) -> Iterator[dict[str, Any]]:
    """Private Redis + uvicorn + prefork worker (both queues) + beat, all on it."""
    from django.db import connection

    redis = RedisServer(tmp_path / "redis")
    redis.start()
    queue = f"twin-fault-{os.getpid()}"
    env = _worker_env(dict(connection.settings_dict))
    env.update(REDIS_URL=redis.url, TWIN_CELERY_QUEUE=queue, TWIN_LOG_LEVEL="WARNING")
    ARTIFACTS.mkdir(exist_ok=True)
    procs: list[subprocess.Popen] = []
    try:
        procs.append(start([sys.executable, "-m", "celery", "-A", "twin", "worker", "-Q",
                            worker_queues(queue), "-c", "2", "-l", "info",
                            "-n", f"{queue}@%h"], env, "fault-worker.log"))
        procs.append(start([sys.executable, "-m", "celery", "-A", "twin", "beat", "-l", "info",
                            "-s", str(tmp_path / "beat-schedule"), "--max-interval", "1"],
                           env, "fault-beat.log"))
        with asgi_server(env, "fault-uvicorn.log", "/api/telemetry/whoami/") as base:
            yield {"redis": redis, "base": base, "worker": procs[0], "beat": procs[1]}
    finally:
        for proc in procs:
            stop_process(proc, timeout=10)
        redis.close()


def test_a_redis_outage_is_503_and_everything_comes_back(stack, tiny_cluster):
    redis, base = stack["redis"], stack["base"]
    cluster = tiny_cluster["cluster"]
    cards = [c.pk for c in tiny_cluster["cards"]]
    _, agent_token = TelemetryAgent.issue(cluster, "fault-agent")
    admin = User.objects.create_superuser("admin", "admin@example.com", "admin-pass-123")
    api = {"Authorization": f"Token {Token.objects.create(user=admin).key}"}
    session = login_over_http(base, "admin", "admin-pass-123")
    ws_url = base.replace("http://", "ws://") + f"/ws/clusters/{cluster.pk}/"
    live_url = f"{base}/api/telemetry/clusters/{cluster.pk}/"
    scenario = {"kind": "topology", "params": {"family": "ring", "nodes": 8}}

    def live_seq() -> int:
        status, _, body = http(live_url, headers=api)
        return body["seq"] if status == 200 else 0

    agent = Agent(base, cluster.pk, cards, agent_token)
    agent.start()
    try:
        # Up and ticking: the worker drains the agent's batches, ticks, beat too.
        wait_until(lambda: live_seq() > 0, 60, "the first tick")
        before = asyncio.run(watch_frames(ws_url, base, session, frames=2))
        last_seq_before = max(before)
        run_ok = http(f"{base}/api/scenarios/", "POST", scenario, api)
        assert run_ok[0] == 202, run_ok

        # --- Redis down -------------------------------------------------------
        down_closing = asyncio.run(connect_and_wait_close(ws_url, base, session,
                                                          stop=redis.stop))
        assert down_closing == CLOSE_UNAVAILABLE  # the open socket: closed with 4503
        stopped_at = time.monotonic()
        runs = ScenarioRun.objects.count()
        for _ in range(3):
            started = time.monotonic()
            status, headers, body = http(
                f"{base}/api/telemetry/clusters/{cluster.pk}/batches/", "POST",
                {"seq": 10**6, "cards": [{"card": cards[0], "power_w": 1.0}]},
                {"Authorization": f"Bearer {agent_token}"})
            # ~1 s: the bound leaves room for a loaded 2-core CI machine.
            assert status == 503 and time.monotonic() - started < 1.5, (status, body)
            assert int(headers["retry-after"]) >= 1 and body["detail"]
            started = time.monotonic()
            status, headers, body = http(f"{base}/api/scenarios/", "POST",
                                         {**scenario, "refresh": True}, api)
            assert status == 503 and time.monotonic() - started < 2.0, (status, body)
            assert int(headers["retry-after"]) >= 1 and body["detail"]
            assert http(live_url, headers=api)[0] == 503
        assert ScenarioRun.objects.count() == runs  # nothing created for a 503
        # A new socket while Redis is down: accepted, then closed with 4503.
        assert asyncio.run(connect_and_wait_close(ws_url, base, session)) == CLOSE_UNAVAILABLE
        assert stack["worker"].poll() is None and stack["beat"].poll() is None
        wait_until(lambda: time.monotonic() - stopped_at > 1.5, 5, "a 1.5 s outage")

        # --- Redis back ---------------------------------------------------------
        redis.start()
        back_at = time.monotonic()
        wait_until(lambda: agent.accepted_since(back_at) >= 3, 30, "ingestion to resume")
        status, _, body = http(f"{base}/api/scenarios/", "POST", {**scenario, "refresh": True},
                               api)
        assert status == 202, body

        def finished() -> str | None:
            run = ScenarioRun.objects.get(pk=body["id"])
            return run.status if run.status in ("succeeded", "failed") else None

        assert wait_until(finished, 45, "the worker to run a new scenario") == "succeeded"
        assert stack["worker"].poll() is None, "the worker died with the broker"
        assert stack["beat"].poll() is None, "beat died with the broker"
        after = asyncio.run(watch_frames(ws_url, base, session, frames=1, timeout=90))
        assert min(after) > last_seq_before, (before, after)  # the seq did not go back
        assert live_seq() > last_seq_before
    finally:
        agent.stopped.set()
        agent.join(5)


async def watch_frames(ws_url: str, base: str, session: str, frames: int,
                       timeout: float = 30.0) -> list[int]:
    """Connect (retrying while the server closes with 4503), subscribe to the
    cluster view, get the snapshot; return the ``seq`` of the next ``frames`` frames."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            async with websockets.connect(
                    ws_url, origin=base,
                    additional_headers={"Cookie": f"sessionid={session}"}) as ws:
                hello = json.loads(await asyncio.wait_for(ws.recv(), 60))
                assert hello["type"] == "hello"
                await ws.send(json.dumps({"action": "subscribe", "view": "cluster"}))
                snap = json.loads(await asyncio.wait_for(ws.recv(), 60))
                assert snap["type"] == "snapshot", snap
                seqs: list[int] = []
                while len(seqs) < frames:
                    message = json.loads(await asyncio.wait_for(
                        ws.recv(), max(deadline - time.monotonic(), 0.1)))
                    if message["type"] == "frame":
                        assert message["seq"] > snap["seq"]
                        seqs.append(message["seq"])
                return seqs
        except websockets.ConnectionClosed as closed:
            assert closed.rcvd is not None and closed.rcvd.code == CLOSE_UNAVAILABLE, (
                f"{closed!r}; the server's log ends:\n{server_log_tail()}")
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)  # the dashboard's backoff, shortened


def server_log_tail(lines: int = 60) -> str:
    """The end of the ASGI server's log: what ended a socket is only written there."""
    path = ARTIFACTS / "fault-uvicorn.log"
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"({path} not readable: {exc})"


async def connect_and_wait_close(ws_url: str, base: str, session: str,
                                 stop: Any = None) -> int:
    """Open a socket; if ``stop`` is given, call it once the socket is live. Return
    the close code the server sends (within 60 s: generous, the machine may be busy with
    the worker, beat and agent of this test — what is asserted is the close frame)."""
    async with websockets.connect(ws_url, origin=base,
                                  additional_headers={"Cookie": f"sessionid={session}"}) as ws:
        try:
            hello = json.loads(await asyncio.wait_for(ws.recv(), 60))
            assert hello["type"] == "hello"
            if stop is not None:
                await asyncio.to_thread(stop)
            while True:
                await asyncio.wait_for(ws.recv(), 60)
        except websockets.ConnectionClosed as closed:
            assert closed.rcvd is not None, ("dropped without a close frame; the server's "
                                             f"log ends:\n{server_log_tail()}")
            return closed.rcvd.code
    raise AssertionError("unreachable")
