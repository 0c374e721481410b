"""Shared fixtures: users, API clients, a tiny hand-built cluster, a real Celery worker.

The worker is a separate ``celery worker`` process pointed at the *test*
database and a queue of its own, so integration tests exercise the same path
as production: API → Redis broker → worker → database.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from twin.core.localnet import (
    free_port,
    stop_process,
    use_queue,
    wait_celery,
    wait_http,
    worker_queues,
)

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"


def wait_until(check: Callable[[], Any], timeout: float = 20.0, what: str = "condition",
               interval: float = 0.1) -> Any:
    """Poll ``check`` until it returns something truthy; return that, or fail
    after ``timeout`` s. Waiting on the condition, not a fixed sleep, keeps a
    test quick on a fast machine and correct on a slow one."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


async def async_wait_until(check: Callable[[], Any], timeout: float = 20.0,
                           what: str = "condition", interval: float = 0.05) -> Any:
    """:func:`wait_until` inside an event loop: ``check`` runs on the loop (no
    blocking I/O in it), and the loop keeps serving other tasks between polls."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(interval)


_started_embedded_redis = False


def pytest_configure(config: pytest.Config) -> None:
    """With ``REDIS_URL`` unset, the session's broker is the embedded Redis: start it
    (reading the settings no longer does, ``twin.embedded``) and stop it at the end
    if this session started it."""
    global _started_embedded_redis
    from twin.embedded import ensure_for_process

    _started_embedded_redis = ensure_for_process()


def pytest_unconfigure(config: pytest.Config) -> None:
    if _started_embedded_redis:
        from twin.embedded import stop_embedded_redis

        stop_embedded_redis()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``@pytest.mark.postgres_only`` is a skipif on the database vendor, so such a
    test shows as skipped on SQLite instead of passing without checking anything."""
    from django.db import connection

    only_postgres = pytest.mark.skipif(
        connection.vendor != "postgresql",
        reason=f"PostgreSQL only; this run uses {connection.vendor}",
    )
    for item in items:
        if item.get_closest_marker("postgres_only"):
            item.add_marker(only_postgres)


@pytest.fixture
def admin_user(db) -> User:
    return User.objects.create_superuser("admin", "admin@example.com", "admin-pass-123")


@pytest.fixture
def reader(db) -> User:
    """A logged-in user with no model permissions."""
    return User.objects.create_user("reader", "reader@example.com", "reader-pass-123")


@pytest.fixture
def staff_user(db) -> User:
    """Staff with every hardware permission (what an operator has)."""
    user = User.objects.create_user("operator", "op@example.com", "operator-pass-123",
                                    is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="hardware"))
    return User.objects.get(pk=user.pk)


@pytest.fixture
def anon_client() -> APIClient:
    return APIClient()


@pytest.fixture
def reader_client(reader: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(reader)
    return client


@pytest.fixture
def admin_client_api(admin_user: User) -> APIClient:
    """API client authenticated by a real ``Authorization: Token …`` header."""
    token, _ = Token.objects.get_or_create(user=admin_user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def tiny_cluster(db):
    """One cluster: a 2×2×2 torus supernode of 8 H100s in one server in one
    40 kW rack, with a PCIe switch, a smart NIC, a leaf switch in a network
    rack, and the links between them. Built by hand so model tests do not
    depend on the builder."""
    from twin.hardware.models import (
        AcceleratorType,
        Card,
        Cluster,
        Link,
        NetworkDevice,
        Rack,
        Server,
        SuperNode,
    )

    h100 = AcceleratorType.objects.get(slug="h100-sxm5-80gb")
    cluster = Cluster.objects.create(name="tiny")
    sn = SuperNode.objects.create(cluster=cluster, name="sn0", index=0, fabric="torus3d",
                                  card_count=8, dim_x=2, dim_y=2, dim_z=2, link_gbps=400,
                                  link_latency_ns=150)
    rack = Rack.objects.create(cluster=cluster, supernode=sn, name="r0", row=0, slot=0)
    net_rack = Rack.objects.create(cluster=cluster, name="net0", row=1, slot=0)
    server = Server.objects.create(rack=rack, supernode=sn, name="sn0-s0", hostname="node0",
                                   cards_per_server=8, overhead_w=1800)
    cards = [
        Card.objects.create(supernode=sn, server=server, accelerator=h100, index=i, slot=i,
                            x=i % 2, y=(i // 2) % 2, z=i // 4, serial=f"TINY-{i:04d}",
                            uuid=uuid.UUID(int=i + 1))
        for i in range(8)
    ]
    switch = NetworkDevice.objects.create(cluster=cluster, rack=rack, server=server,
                                          kind="pcie_switch", name="sn0-s0-pcie0", ports=48,
                                          port_gbps=512, power_w=60)
    nic = NetworkDevice.objects.create(cluster=cluster, rack=rack, server=server,
                                       kind="smart_nic", name="sn0-s0-nic0", ports=1,
                                       port_gbps=400, power_w=25)
    leaf = NetworkDevice.objects.create(cluster=cluster, rack=net_rack, kind="leaf",
                                        name="leaf0", ports=64, port_gbps=400, power_w=1500)
    links = [
        Link.objects.create(cluster=cluster, a_card=cards[0], b_card=cards[1],
                            kind="scale_up", bandwidth_gbps=400, latency_ns=150),
        Link.objects.create(cluster=cluster, a_card=cards[0], b_device=switch, kind="pcie",
                            bandwidth_gbps=512, latency_ns=100),
        Link.objects.create(cluster=cluster, a_device=switch, b_device=nic, kind="pcie",
                            bandwidth_gbps=512, latency_ns=100),
        Link.objects.create(cluster=cluster, a_device=nic, b_device=leaf, kind="roce",
                            bandwidth_gbps=400, latency_ns=500),
    ]
    return {"cluster": cluster, "supernode": sn, "rack": rack, "net_rack": net_rack,
            "server": server, "cards": cards, "switch": switch, "nic": nic, "leaf": leaf,
            "links": links, "h100": h100}


def _worker_env(db_settings: dict) -> dict[str, str]:
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "twin.settings_test"
    if db_settings["ENGINE"].endswith("sqlite3"):
        env.pop("DATABASE_URL", None)
        env["TWIN_SQLITE_PATH"] = str(db_settings["NAME"])
    else:
        user = db_settings.get("USER") or ""
        password = db_settings.get("PASSWORD") or ""
        auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
        host = db_settings.get("HOST") or "127.0.0.1"
        port = db_settings.get("PORT") or 5432
        env["DATABASE_URL"] = f"postgres://{auth}{host}:{port}/{db_settings['NAME']}"
    from django.conf import settings

    env["REDIS_URL"] = settings.REDIS_URL
    return env


@pytest.fixture(scope="session")
def celery_worker(django_db_setup, django_db_blocker) -> Iterator[str]:
    """A real ``celery worker`` process on queues private to this test session
    (the jobs queue and its telemetry queue, ``twin.core.localnet.worker_queues``).

    Tests that use it need ``transactional_db`` so their rows are committed
    where the worker can see them.
    """
    from django.db import connection

    from twin.celery import app

    queue = f"twin-test-{uuid.uuid4().hex[:8]}"
    use_queue(app, queue)
    with django_db_blocker.unblock():
        db_settings = dict(connection.settings_dict)
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / "celery-worker.log", "w")  # noqa: SIM115
    env = _worker_env(db_settings)
    env["TWIN_CELERY_QUEUE"] = queue
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "twin", "worker", "-Q", worker_queues(queue),
         "-P", "solo", "-l", "info", "--without-gossip", "--without-mingle",
         "-n", f"{queue}@%h"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        wait_celery(app, queue, proc, log.name)
        yield queue
    finally:
        stop_process(proc)
        log.close()


def wait_for_other_sessions_to_close(connection, timeout: float = 10.0) -> None:
    """PostgreSQL ends a backend shortly *after* its client exits; dropping the
    test database before then fails ("being accessed by other users")."""
    if connection.vendor != "postgresql":
        return
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid()"
            )
            if cursor.fetchone()[0] == 0:
                return
            time.sleep(0.1)


@contextlib.contextmanager
def asgi_server(env: dict[str, str], log_name: str, ready_path: str,
                log_level: str = "warning", port: int | None = None) -> Iterator[str]:
    """Run ``uvicorn twin.asgi:application`` on a free port (or on ``port``, to
    start a server again where its clients expect it); yield its base URL.

    Ready once ``ready_path`` answers with any HTTP status (a 401 from an
    authenticated endpoint proves the app is up as well as a 200 does).
    """
    port = port or free_port()
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / log_name, "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "twin.asgi:application", "--host", "127.0.0.1",
         "--port", str(port), "--lifespan", "off", "--log-level", log_level],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_http(f"{base}{ready_path}", proc)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}; see {log.name}") from None
        yield base
    finally:
        stop_process(proc)
        log.close()
