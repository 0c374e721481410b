"""Websockets and per-cluster access: API tokens accepted, other tenants' clusters and
runs closed with the code of an unknown one (``twin.core.ws_auth``, ``twin.core.access``).
"""
from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.testing.websocket import WebsocketCommunicator
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token

from tests.live.conftest import ORIGIN, communicator, session_headers
from twin.hardware.models import Cluster, ClusterGrant
from twin.live.protocol import CLOSE_NOT_FOUND, CLOSE_UNAUTHENTICATED
from twin.scenarios.models import ScenarioRun

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def tenant(transactional_db, tiny_cluster) -> User:
    """A user granted the tiny cluster only (see)."""
    user = User.objects.create_user("wall", "wall@example.com", "wall-pass-123")
    ClusterGrant.objects.create(user=user, cluster=tiny_cluster["cluster"], level="see")
    return user


def token_headers(user: User) -> list[tuple[bytes, bytes]]:
    """A script's handshake: no cookie, the API token in ``Authorization``."""
    key = Token.objects.get_or_create(user=user)[0].key
    return [(b"origin", ORIGIN), (b"host", b"testserver"),
            (b"authorization", f"Token {key}".encode())]


def first_message(path: str, headers: list[tuple[bytes, bytes]]) -> dict:
    from twin.asgi import application

    async def scenario() -> dict:
        comm = WebsocketCommunicator(application, path, headers=headers)
        assert (await comm.connect())[0]
        out = await comm.receive_output(timeout=3)
        await comm.disconnect()
        return out

    return async_to_sync(scenario)()


def test_an_api_token_in_the_header_opens_the_live_socket(tiny_cluster, tenant):
    headers = token_headers(tenant)

    async def scenario():
        comm = communicator(tiny_cluster["cluster"].pk, headers)
        assert (await comm.connect())[0]
        hello = await comm.receive_json_from(timeout=3)
        assert hello["type"] == "hello" and hello["cluster"] == tiny_cluster["cluster"].pk
        await comm.disconnect()

    async_to_sync(scenario)()


def test_an_api_token_in_the_query_opens_the_live_socket(tiny_cluster, tenant):
    key = Token.objects.get_or_create(user=tenant)[0].key
    out = first_message(f"/ws/clusters/{tiny_cluster['cluster'].pk}/?token={key}",
                        session_headers(None))
    assert out["type"] == "websocket.send" and '"hello"' in out["text"]


def test_a_wrong_token_is_anonymous(tiny_cluster, tenant):
    headers = session_headers(None) + [(b"authorization", b"Token not-a-token")]
    out = first_message(f"/ws/clusters/{tiny_cluster['cluster'].pk}/", headers)
    assert out == {"type": "websocket.close", "code": CLOSE_UNAUTHENTICATED}
    out = first_message(f"/ws/clusters/{tiny_cluster['cluster'].pk}/?token=nope",
                        session_headers(None))
    assert out == {"type": "websocket.close", "code": CLOSE_UNAUTHENTICATED}


@pytest.mark.parametrize("how", ["session", "token"])
def test_another_tenants_cluster_is_closed_as_unknown(tiny_cluster, tenant, how):
    other = Cluster.objects.create(name="other-tenant")
    headers = session_headers(tenant) if how == "session" else token_headers(tenant)
    out = first_message(f"/ws/clusters/{other.pk}/", headers)
    assert out == {"type": "websocket.close", "code": CLOSE_NOT_FOUND}


def test_another_tenants_scenario_run_is_closed_as_unknown(tiny_cluster, tenant):
    other = Cluster.objects.create(name="other-tenant")
    theirs = ScenarioRun.objects.create(kind="topology", status="succeeded", cluster=other)
    mine = ScenarioRun.objects.create(kind="topology", status="succeeded",
                                      cluster=tiny_cluster["cluster"])
    headers = token_headers(tenant)
    assert first_message(f"/ws/scenarios/{theirs.pk}/", headers) == {
        "type": "websocket.close", "code": CLOSE_NOT_FOUND}
    out = first_message(f"/ws/scenarios/{mine.pk}/", headers)
    assert out["type"] == "websocket.send" and '"snapshot"' in out["text"]
