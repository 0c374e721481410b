"""Redis (the channel layer) away: both websockets close with 4503 — "reconnect
with backoff" — instead of being accepted and dropped without a close frame
(issue 11, item 1). The real server under a Redis stop and restart is
``tests/faults/test_redis_outage.py``."""
from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.testing.websocket import WebsocketCommunicator
from django.contrib.auth.models import User

from tests.faults.away import channel_layer_away
from tests.live.conftest import communicator, receive_type, session_headers
from twin.live.protocol import CLOSE_UNAVAILABLE
from twin.scenarios.runner import submit

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def user(transactional_db) -> User:
    return User.objects.create_user("viewer", "viewer@example.com", "viewer-pass-123")


def test_the_code_is_4503():
    assert CLOSE_UNAVAILABLE == 4503


def test_the_live_socket_closes_with_4503_when_the_layer_is_away(tiny_cluster, user):
    headers = session_headers(user)

    async def scenario():
        comm = communicator(tiny_cluster["cluster"].pk, headers)
        connected, _ = await comm.connect(timeout=5)
        assert connected  # accepted, so that the code reaches the browser
        closed = await comm.receive_output(timeout=5)
        assert closed == {"type": "websocket.close", "code": CLOSE_UNAVAILABLE,
                          "reason": "service unavailable, retry"}
        await comm.wait(timeout=5)

    with channel_layer_away():
        async_to_sync(scenario)()

    async def works_again():
        comm = communicator(tiny_cluster["cluster"].pk, headers)
        assert (await comm.connect(timeout=5))[0]
        assert (await receive_type(comm, "hello"))["cluster"] == tiny_cluster["cluster"].pk
        await comm.disconnect()

    async_to_sync(works_again)()


def test_the_scenario_socket_closes_with_4503_when_the_layer_is_away(user):
    from twin.asgi import application

    run = submit("topology", {"family": "ring", "nodes": 8}, None, user, enqueue=False)
    headers = session_headers(user)

    async def scenario():
        comm = WebsocketCommunicator(application, f"/ws/scenarios/{run.pk}/", headers=headers)
        assert (await comm.connect(timeout=5))[0]
        closed = await comm.receive_output(timeout=5)
        assert closed["type"] == "websocket.close" and closed["code"] == CLOSE_UNAVAILABLE
        await comm.wait(timeout=5)

    with channel_layer_away():
        async_to_sync(scenario)()
