"""The websocket client count of ``/metrics`` (``twin.live.clients``): an accepted
socket counts, a refused one does not, a closed one stops counting, and the count is
published where every process's scrape sums it."""
from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User

from tests.live.conftest import communicator, receive_type, session_headers
from twin.live import clients
from twin.telemetry.state import redis_client

pytestmark = pytest.mark.django_db(transaction=True)


def test_open_sockets_are_counted_and_closed_ones_are_not(tiny_cluster):
    user = User.objects.create_user("viewer", "viewer@example.com", "viewer-pass-123")
    cluster = tiny_cluster["cluster"].pk
    headers, anonymous = session_headers(user), session_headers(None)
    before = clients.total()

    async def scenario():
        first, second = communicator(cluster, headers), communicator(cluster, headers)
        assert (await first.connect())[0] and (await second.connect())[0]
        await receive_type(first, "hello")
        await receive_type(second, "hello")
        assert clients.total() == before + 2
        refused = communicator(cluster, anonymous)  # closed with 4401: never counted
        assert (await refused.connect())[0]
        await refused.receive_output(timeout=2)
        assert clients.total() == before + 2
        await first.disconnect()
        assert clients.total() == before + 1
        await second.disconnect()
        assert clients.total() == before

    async_to_sync(scenario)()
    # This process's key expires unless refreshed: a dead process drops out.
    ttl = redis_client().ttl(clients._key())
    assert 0 < ttl <= clients.TTL_S
