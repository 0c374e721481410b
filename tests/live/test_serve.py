"""The production web server (``manage.py serve``, what scripts/demo runs): several
uvicorn processes, each with its own database pool, websockets fed across processes
through the Redis channel layer."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest
import websockets
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection

from tests.conftest import _worker_env
from twin.core.localnet import free_port, stop_process, wait_http
from twin.telemetry import state

from .conftest import PREFIX, login_over_http

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "var" / "test-artifacts"


def test_serve_runs_uvicorn_with_the_workers_asked_for(capsys, monkeypatch):
    monkeypatch.setenv("TWIN_WEB_WORKERS", "3")
    call_command("serve", "--port", "8123", "--print")
    argv = capsys.readouterr().out.split()
    assert argv[1:4] == ["-m", "uvicorn", "twin.asgi:application"]
    assert argv[argv.index("--workers") + 1] == "3"
    assert argv[argv.index("--port") + 1] == "8123"


def test_serve_lowers_its_priority_when_asked(capsys, monkeypatch):
    monkeypatch.setenv("TWIN_WEB_NICE", "10")
    call_command("serve", "--print")
    assert capsys.readouterr().out.split()[:3] == ["nice", "-n", "10"]
    call_command("serve", "--print", "--nice", "0")
    assert capsys.readouterr().out.split()[0] != "nice"


@pytest.mark.parametrize("value", ["low", "20", "-5"])
def test_serve_refuses_a_bad_nice(monkeypatch, value):
    from django.core.management.base import CommandError

    monkeypatch.setenv("TWIN_WEB_NICE", value)
    with pytest.raises(CommandError, match="TWIN_WEB_NICE"):
        call_command("serve", "--print")


def test_serve_refuses_a_bad_worker_count(monkeypatch):
    from django.core.management.base import CommandError

    monkeypatch.setenv("TWIN_WEB_WORKERS", "many")
    with pytest.raises(CommandError, match="TWIN_WEB_WORKERS"):
        call_command("serve", "--print")


def _workers(proc: subprocess.Popen) -> list[psutil.Process]:
    """uvicorn's worker processes (multiprocessing's spawned children, not its
    resource tracker)."""
    return [child for child in psutil.Process(proc.pid).children()
            if "spawn_main" in " ".join(child.cmdline())]


def test_the_server_serves_with_n_processes_and_a_pool_each(tiny_cluster):
    cluster = tiny_cluster["cluster"]
    User.objects.create_user("crowd", "crowd@example.com", "crowd-pass-123")
    port = free_port()
    env = _worker_env(dict(connection.settings_dict))
    env.update(TWIN_TELEMETRY_PREFIX=PREFIX, TWIN_WEB_WORKERS="2", TWIN_DB_POOL_MAX="3",
               TWIN_WEB_NICE="5")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with open(ARTIFACTS / "serve.log", "w") as log:
        proc = subprocess.Popen([sys.executable, "manage.py", "serve", "--port", str(port)],
                                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_http(f"{base}/healthz/", proc)
            deadline = time.monotonic() + 30
            while len(_workers(proc)) < 2 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert len(_workers(proc)) == 2, "TWIN_WEB_WORKERS=2 must give 2 processes"
            base_nice = psutil.Process().nice()
            assert [w.nice() for w in _workers(proc)] == [base_nice + 5] * 2, "TWIN_WEB_NICE"

            # A crowd: each process holds at most its pool of connections.
            def get(_: int) -> int:
                with urllib.request.urlopen(f"{base}/healthz/", timeout=30) as response:
                    return response.status

            with ThreadPoolExecutor(16) as pool:
                assert list(pool.map(get, range(160))) == [200] * 160
            if connection.vendor == "postgresql":
                db_port = int(connection.settings_dict["PORT"] or 5432)
                held = [sum(1 for c in worker.net_connections(kind="tcp")
                            if c.raddr and c.raddr.port == db_port
                            and c.status == psutil.CONN_ESTABLISHED)
                        for worker in _workers(proc)]
                # TWIN_DB_POOL_MAX=3: at most 3 per process, whatever the crowd
                assert sum(held) >= 1 and max(held) <= 3, held

            # Websockets on every process get what another process publishes.
            session = login_over_http(base, "crowd", "crowd-pass-123")
            ws_url = f"ws://127.0.0.1:{port}/ws/clusters/{cluster.pk}/"

            async def sockets() -> list[dict]:
                conns = [await websockets.connect(ws_url, origin=base, additional_headers={
                    "Cookie": f"sessionid={session}"}) for _ in range(12)]
                try:
                    for ws in conns:
                        hello = json.loads(await asyncio.wait_for(ws.recv(), 10))
                        assert hello["type"] == "hello"
                    await get_channel_layer().group_send(state.group_name(cluster.pk), {
                        "type": "remediation.event", "event": "proposed",
                        "remediation": {"id": 7}})
                    got = []
                    for ws in conns:
                        while True:
                            message = json.loads(await asyncio.wait_for(ws.recv(), 10))
                            if message["type"] == "remediation":
                                got.append(message)
                                break
                    return got
                finally:
                    for ws in conns:
                        await ws.close()

            got = async_to_sync(sockets)()
            assert len(got) == 12 and all(m["remediation"] == {"id": 7} for m in got)
        finally:
            stop_process(proc)


@pytest.mark.postgres_only
def test_web_processes_pool_their_connections_and_workers_do_not():
    """twin/asgi.py gives each web process Django's psycopg pool (8 by default); the
    Celery workers and commands keep their persistent connections."""
    env = _worker_env(dict(connection.settings_dict))
    for name in ("TWIN_DB_POOL_MAX", "TWIN_DB_CONN_MAX_AGE"):
        env.pop(name, None)
    code = ("import json, sys, django; {}; from django.conf import settings; "
            "from django.db import connection; db = settings.DATABASES['default']; "
            "print(json.dumps([db['OPTIONS'].get('pool'), db['CONN_MAX_AGE'], "
            "type(connection.pool).__name__]))")
    web = subprocess.run([sys.executable, "-c", code.format("import twin.asgi")], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=120, check=True)
    pool, max_age, pool_class = json.loads(web.stdout.strip().splitlines()[-1])
    assert pool["max_size"] == 8 and pool["min_size"] == 2 and max_age == 0
    assert pool_class == "ConnectionPool"
    worker = subprocess.run([sys.executable, "-c", code.format("django.setup()")], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=120, check=True)
    pool, max_age, pool_class = json.loads(worker.stdout.strip().splitlines()[-1])
    assert pool is None and max_age > 0 and pool_class == "NoneType"
