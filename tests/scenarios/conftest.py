"""Fixtures of the scenario-run tests: a built cluster, a publish recorder, websocket helpers.

This session's Channels groups get a prefix of their own (as the live tests'
do, with the same environment variable, so whichever conftest loads first
wins and both agree), set before the session's Celery worker starts so it
inherits it. Without the real worker no Celery message may leave a test:
``published`` records every task message this process sends (Celery's own
``before_task_publish`` signal), and the bad-input tests assert it stays empty.
"""
from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from celery.signals import before_task_publish
from channels.layers import channel_layers
from channels.testing.websocket import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

CHANNEL_PREFIX = os.environ.setdefault("TWIN_CHANNEL_PREFIX", f"twintest{uuid.uuid4().hex[:8]}")
settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"] = CHANNEL_PREFIX
channel_layers.backends.clear()

SCENARIOS = "/api/scenarios/"
ORIGIN = b"http://testserver"


@pytest.fixture
def published() -> Iterator[list[str]]:
    """Names of the Celery tasks this process publishes during the test."""
    names: list[str] = []

    def record(sender: Any = None, **kwargs: Any) -> None:
        names.append(str(sender))

    before_task_publish.connect(record, weak=False)
    try:
        yield names
    finally:
        before_task_publish.disconnect(record)


@pytest.fixture
def seed_cluster(db) -> Any:
    """The builder's seed-512 preset with two supernodes: 1,024 cards, 4,864 links."""
    from twin.hardware.builder import build_cluster
    from twin.hardware.models import Cluster

    result = build_cluster("seed-512", name="scen-seed", supernodes=2)
    return Cluster.objects.get(pk=result["cluster_id"])


@pytest.fixture
def dgx_cluster(db) -> Any:
    """One DGX H100 SuperPOD scalable unit as the builder writes it: 32 DGX of
    8 GPUs (NVLink full mesh per server), one 400G NIC per GPU, 8 rail leaves,
    4 spines (8 parallel links per leaf–spine pair)."""
    from twin.hardware.builder import build_cluster
    from twin.hardware.models import Cluster

    result = build_cluster("dgx-h100-superpod", name="scen-dgx", supernodes=1)
    return Cluster.objects.get(pk=result["cluster_id"])


def post(client: Any, body: dict, callbacks_fixture: Any) -> tuple[Any, list]:
    """POST a scenario; returns the response and the on-commit callbacks it queued
    (captured, not run: no task leaves a test that has no worker)."""
    with callbacks_fixture(execute=False) as callbacks:
        response = client.post(SCENARIOS, body, format="json")
    return response, callbacks


def session_headers(user: User | None) -> list[tuple[bytes, bytes]]:
    """What a logged-in browser sends: Origin, Host and its session cookie."""
    headers = [(b"origin", ORIGIN), (b"host", b"testserver")]
    if user is not None:
        client = Client()
        client.force_login(user)
        headers.append((b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()))
    return headers


def communicator(run_id: int, headers: list[tuple[bytes, bytes]]) -> WebsocketCommunicator:
    """A communicator on the full ASGI application (origin check, session, router)."""
    from twin.asgi import application

    return WebsocketCommunicator(application, f"/ws/scenarios/{run_id}/", headers=headers)


def wait_for(predicate: Any, timeout: float = 30.0, interval: float = 0.1) -> Any:
    """Poll ``predicate`` until it returns something truthy (or fail after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s")
