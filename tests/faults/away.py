"""Services made unreachable for a test: Redis, the Celery broker, the channel layer.

Each points the setting at a port on 127.0.0.1 where nothing listens (a real
connection refused, as when the server is stopped), and restores it after.
The integration tests (``tests/faults/test_redis_outage.py``) stop and restart
a real server instead.
"""
from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator

from django.conf import settings
from django.test import override_settings

from twin.core.localnet import free_port

__all__ = ["broker_away", "channel_layer_away", "closed_url", "redis_away"]


def closed_url() -> str:
    """A Redis URL where nothing listens."""
    return f"redis://127.0.0.1:{free_port()}/0"


@contextlib.contextmanager
def redis_away() -> Iterator[str]:
    """The telemetry state's Redis (``REDIS_URL``) is away."""
    url = closed_url()
    with override_settings(REDIS_URL=url):
        yield url


@contextlib.contextmanager
def broker_away() -> Iterator[str]:
    """The Celery broker is away (for this process's producers)."""
    from twin.celery import app

    url, old = closed_url(), app.conf.broker_url
    app.conf.broker_url = url
    try:
        yield url
    finally:
        app.conf.broker_url = old


@contextlib.contextmanager
def channel_layer_away() -> Iterator[str]:
    """The channel layer's Redis is away (Channels rebuilds its layer on the change)."""
    from channels.layers import channel_layers

    url = closed_url()
    layers = copy.deepcopy(settings.CHANNEL_LAYERS)
    layers["default"]["CONFIG"]["hosts"] = [{**layers["default"]["CONFIG"]["hosts"][0],
                                            "address": url}]
    channel_layers.backends.clear()
    try:
        with override_settings(CHANNEL_LAYERS=layers):
            channel_layers.backends.clear()
            yield url
    finally:
        channel_layers.backends.clear()
