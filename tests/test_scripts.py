"""``supervise`` (scripts/lib.sh), which scripts/demo runs every child under: a
child that crashes or is killed is started again with a growing backoff, and
stopping the supervisor stops the child (issue 11, item 1: one crash must not
tear the demo down) and every process the child started (its own process group), within
``TWIN_DEMO_STOP_S``."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tests.conftest import ROOT, wait_until


def start_supervised(tmp_path: Path, command: str, **extra_env: str) -> subprocess.Popen:
    """bash that sources lib.sh, supervises ``command`` as "child", prints the
    supervisor's pid and waits for it."""
    script = f"""
set -Eeuo pipefail
source "{ROOT}/scripts/lib.sh"
declare -a CHILDREN=() CHILD_NAMES=()
supervise child bash -c {command!r}
echo "${{CHILDREN[0]}}" > "{tmp_path}/supervisor.pid"
wait "${{CHILDREN[0]}}"
"""
    env = {**os.environ, "TWIN_LOG_DIR": str(tmp_path), "TWIN_DEMO_BACKOFF_MIN": "1",
           "TWIN_DEMO_BACKOFF_MAX": "2", "TWIN_DEMO_BACKOFF_RESET": "60", **extra_env}
    proc = subprocess.Popen(["bash", "-c", script], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: (tmp_path / "supervisor.pid").exists(), 10, "the supervisor")
    return proc


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_crashing_child_is_restarted_with_backoff(tmp_path):
    proc = start_supervised(tmp_path, f'echo start >> "{tmp_path}/runs"; exit 3')
    try:
        started = time.monotonic()
        wait_until(lambda: (tmp_path / "runs").exists()
                   and len((tmp_path / "runs").read_text().split()) >= 3, 15, "three runs")
        # 1 s, then 2 s between runs: not a tight loop.
        assert time.monotonic() - started >= 2.5
        log = (tmp_path / "child.log").read_text()
        assert "child exited (status 3); restarting it in 1 s" in log
        assert "restarting it in 2 s" in log
    finally:
        supervisor = int((tmp_path / "supervisor.pid").read_text())
        os.kill(supervisor, signal.SIGTERM)
        proc.wait(20)
    assert "restarting it in" in proc.stderr.read()


def test_a_killed_child_comes_back_and_stopping_the_supervisor_stops_it(tmp_path):
    proc = start_supervised(tmp_path, f'echo $$ >> "{tmp_path}/pids"; exec sleep 300')
    pids = tmp_path / "pids"
    wait_until(lambda: pids.exists() and pids.read_text().split(), 10, "the child")
    first = int(pids.read_text().split()[0])
    os.kill(first, signal.SIGKILL)  # a crash
    wait_until(lambda: len(pids.read_text().split()) == 2, 10, "the restart")
    second = int(pids.read_text().split()[1])
    assert alive(second) and not alive(first)
    supervisor = int((tmp_path / "supervisor.pid").read_text())
    os.kill(supervisor, signal.SIGTERM)
    proc.wait(20)
    wait_until(lambda: not alive(second), 15, "the child to stop with its supervisor")
    assert not alive(supervisor)
    assert len(pids.read_text().split()) == 2  # not restarted once stopping


def test_the_child_runs_in_its_own_process_group_and_its_grandchildren_stop_with_it(
        tmp_path):
    """The child (a shell that started a background job, as uvicorn and Celery start
    worker processes) leads a process group of its own; stopping the supervisor stops
    the grandchild too, which a SIGTERM to the child alone left running."""
    proc = start_supervised(
        tmp_path, f'echo $$ > "{tmp_path}/child"; sleep 300 & echo $! > "{tmp_path}/grand";'
                  ' wait')
    grand_file = tmp_path / "grand"
    wait_until(lambda: grand_file.exists() and grand_file.read_text().strip(), 10,
               "the grandchild")
    child, grand = int((tmp_path / "child").read_text()), int(grand_file.read_text())
    supervisor = int((tmp_path / "supervisor.pid").read_text())
    assert os.getpgid(child) == child != os.getpgid(supervisor)
    assert os.getpgid(grand) == child
    os.kill(supervisor, signal.SIGTERM)
    proc.wait(30)
    wait_until(lambda: not alive(grand) and not alive(child), 15,
               "the child and its grandchild to stop")


def test_a_child_that_ignores_sigterm_is_killed_after_the_stop_grace_period(tmp_path):
    """``TWIN_DEMO_STOP_S``: the grace a child has between SIGTERM and SIGKILL."""
    proc = start_supervised(
        tmp_path, f'trap "" TERM; echo $$ > "{tmp_path}/child"; while :; do sleep 0.1; done',
        TWIN_DEMO_STOP_S="2")
    wait_until(lambda: (tmp_path / "child").exists()
               and (tmp_path / "child").read_text().strip(), 10, "the child")
    child = int((tmp_path / "child").read_text())
    supervisor = int((tmp_path / "supervisor.pid").read_text())
    started = time.monotonic()
    os.kill(supervisor, signal.SIGTERM)
    proc.wait(30)
    waited = time.monotonic() - started
    wait_until(lambda: not alive(child), 10, "the child to be killed")
    # It held out for the grace period (SIGTERM ignored), then SIGKILL ended it.
    assert waited >= 2.0


def test_stop_children_stops_every_supervisor_and_their_groups(tmp_path):
    """What the demo runs on exit or Ctrl-C: every supervisor, each child's group."""
    script = f"""
set -Eeuo pipefail
source "{ROOT}/scripts/lib.sh"
declare -a CHILDREN=() CHILD_NAMES=()
for n in 1 2; do
    supervise "c$n" bash -c "sleep 300 & echo \\$! > {tmp_path}/grand$n; wait"
done
echo "${{CHILDREN[*]}}" > "{tmp_path}/supervisors"
while [[ ! -s {tmp_path}/grand1 || ! -s {tmp_path}/grand2 ]]; do sleep 0.1; done
stop_children
echo stopped > "{tmp_path}/done"
"""
    env = {**os.environ, "TWIN_LOG_DIR": str(tmp_path), "TWIN_DEMO_STOP_S": "5"}
    proc = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, timeout=60,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "done").read_text().strip() == "stopped"
    pids = [int(p) for p in (tmp_path / "supervisors").read_text().split()]
    pids += [int((tmp_path / f"grand{n}").read_text()) for n in (1, 2)]
    wait_until(lambda: not any(alive(p) for p in pids), 10, "every process to be gone")


def test_the_demo_supervises_its_embedded_redis_and_it_keeps_its_data(tmp_path):
    """Issue 22, item 3: killed, the demo's embedded Redis is started again by its
    supervisor and still holds what it held (append-only file); stopping the
    supervisor stops it. On a port and var directory of this test's own."""
    import redis

    from twin.core.localnet import free_port

    port = free_port()
    var_dir = tmp_path / "var"
    script = f"""
set -Eeuo pipefail
source "{ROOT}/scripts/lib.sh"
declare -a CHILDREN=() CHILD_NAMES=()
supervise_embedded_redis
echo "${{CHILDREN[0]}}" > "{tmp_path}/supervisor.pid"
wait "${{CHILDREN[0]}}"
"""
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(TWIN_LOG_DIR=str(tmp_path), TWIN_VAR_DIR=str(var_dir),
               TWIN_EMBEDDED_REDIS_PORT=str(port), TWIN_DEMO_BACKOFF_MIN="1")
    proc = subprocess.Popen(["bash", "-c", script], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client = redis.Redis(port=port, socket_timeout=1)

    def answers() -> bool:
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False

    try:
        wait_until(lambda: (tmp_path / "supervisor.pid").exists(), 20, "the supervisor")
        wait_until(answers, 20, "the embedded Redis")
        client.set("queued-run", "kept")
        first = int((var_dir / f"redis-{port}.pid").read_text())
        os.kill(first, signal.SIGKILL)  # a crash
        wait_until(lambda: not alive(first), 10, "the old server to be gone")
        wait_until(answers, 20, "the supervisor to start Redis again")
        assert int((var_dir / f"redis-{port}.pid").read_text()) != first
        assert client.get("queued-run") == b"kept"
        assert "redis exited" in (tmp_path / "redis.log").read_text()
    finally:
        if (tmp_path / "supervisor.pid").exists():
            os.kill(int((tmp_path / "supervisor.pid").read_text()), signal.SIGTERM)
        proc.wait(30)
    wait_until(lambda: not answers(), 15, "Redis to stop with its supervisor")
