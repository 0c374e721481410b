"""The embedded Redis is started only where a broker is needed, and stopped by
whoever started it (issue 22, item 3): ``manage.py migrate`` or ``makemigrations
--check`` on the fresh-user path (no DATABASE_URL, no REDIS_URL) leave no
redis-server behind; a command that may need a broker gets one for its lifetime.

Run on a private embedded port and var directory, never the demo's.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from twin.core.localnet import free_port


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@pytest.fixture
def fresh_env(tmp_path: Path) -> dict[str, str]:
    """What a fresh user has: no DATABASE_URL or REDIS_URL (SQLite in var/, the embedded
    Redis), here with a var directory and an embedded port of the test's own."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE",
                        "TWIN_SQLITE_PATH")}
    env.update(TWIN_VAR_DIR=str(tmp_path / "var"), TWIN_EMBEDDED_REDIS_PORT=str(free_port()),
               TWIN_SECRET_KEY="embedded-test-key")
    yield env
    port = int(env["TWIN_EMBEDDED_REDIS_PORT"])
    if listening(port):  # never leave a daemon behind, even when the test fails
        subprocess.run([sys.executable, "-m", "twin.embedded", "stop"], cwd=ROOT, env=env,
                       timeout=30)


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_migrate_and_makemigrations_leave_no_redis_behind(fresh_env):
    port = int(fresh_env["TWIN_EMBEDDED_REDIS_PORT"])
    done = manage(fresh_env, "migrate", "--noinput", "-v", "0")
    assert done.returncode == 0, done.stderr
    assert not listening(port), "migrate left a redis-server running"
    done = manage(fresh_env, "makemigrations", "--check", "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not listening(port), "makemigrations left a redis-server running"


def test_a_command_that_needs_a_broker_gets_one_and_stops_it(fresh_env):
    port = int(fresh_env["TWIN_EMBEDDED_REDIS_PORT"])
    probe = ("import sys, redis\n"
             "from twin.embedded import embedded_redis_for_command, embedded_url\n"
             "embedded_redis_for_command(['manage.py', 'run_scenario'])\n"
             "print(redis.Redis.from_url(embedded_url()).ping())\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=fresh_env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
    assert not listening(port), "the command did not stop the Redis it started"
    # Its data is kept in an append-only file (a restart keeps the queued messages).
    assert (Path(fresh_env["TWIN_VAR_DIR"]) / f"redis-{port}.aof").exists()
