"""Connection rules and client-message validation of ``ws/clusters/<id>/``.

Every refusal is checked from the client's side: the close code, or an
``error`` message after which the same connection still answers.
"""
from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User

from tests.live.conftest import communicator, receive_type, session_headers
from twin.live.protocol import CLOSE_NOT_FOUND, CLOSE_UNAUTHENTICATED, MAX_SUBSCRIPTIONS
from twin.telemetry.metrics import METRIC_KEYS

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def user(transactional_db) -> User:
    return User.objects.create_user("viewer", "viewer@example.com", "viewer-pass-123")


def test_anonymous_client_is_closed_with_4401(tiny_cluster):
    headers = session_headers(None)

    async def scenario():
        comm = communicator(tiny_cluster["cluster"].pk, headers)
        connected, _ = await comm.connect()
        assert connected  # accepted so that the close code reaches the browser
        closed = await comm.receive_output(timeout=2)
        assert closed == {"type": "websocket.close", "code": CLOSE_UNAUTHENTICATED}
        await comm.wait()

    async_to_sync(scenario)()


def test_a_stale_session_cookie_is_anonymous(tiny_cluster, user):
    headers = session_headers(None) + [(b"cookie", b"sessionid=not-a-session")]

    async def scenario():
        comm = communicator(tiny_cluster["cluster"].pk, headers)
        assert (await comm.connect())[0]
        closed = await comm.receive_output(timeout=2)
        assert closed["code"] == CLOSE_UNAUTHENTICATED
        await comm.wait()

    async_to_sync(scenario)()


def test_unknown_cluster_is_closed_with_4404(tiny_cluster, user):
    headers = session_headers(user)

    async def scenario():
        comm = communicator(tiny_cluster["cluster"].pk + 1000, headers)
        assert (await comm.connect())[0]
        closed = await comm.receive_output(timeout=2)
        assert closed == {"type": "websocket.close", "code": CLOSE_NOT_FOUND}
        await comm.wait()

    async_to_sync(scenario)()


def test_foreign_origin_is_rejected_before_the_consumer(tiny_cluster, user):
    headers = [(b"origin", b"http://evil.example") if name == b"origin" else (name, value)
               for name, value in session_headers(user)]

    async def scenario():
        comm = communicator(tiny_cluster["cluster"].pk, headers)
        connected, code = await comm.connect()
        assert not connected  # AllowedHostsOriginValidator: handshake refused (HTTP 403)
        await comm.wait()

    async_to_sync(scenario)()


def test_hello_lists_views_and_metrics(tiny_cluster, user):
    headers = session_headers(user)

    async def scenario():
        comm = communicator(tiny_cluster["cluster"].pk, headers)
        assert (await comm.connect())[0]
        hello = await comm.receive_json_from(timeout=3)
        assert hello["type"] == "hello"
        assert hello["cluster"] == tiny_cluster["cluster"].pk
        assert hello["views"] == ["cluster", "supernode", "rack"]
        assert [m["key"] for m in hello["metrics"]] == list(METRIC_KEYS)
        assert hello["max_hz"] == 2
        power = next(m for m in hello["metrics"] if m["key"] == "power_w")
        assert power == {"key": "power_w", "label": "Power draw", "unit": "W",
                         "aggregate": "draw"}
        await comm.disconnect()

    async_to_sync(scenario)()


BAD_MESSAGES = [
    ("{not json", "bad_json", None),
    ("[1, 2]", "bad_json", None),
    (json.dumps({"view": "cluster"}), "unknown_action", "action"),
    (json.dumps({"action": "explode"}), "unknown_action", "action"),
    (json.dumps({"action": "subscribe", "view": "galaxy"}), "unknown_view", "view"),
    (json.dumps({"action": "subscribe", "view": "cluster", "metric": "happiness"}),
     "unknown_metric", "metric"),
    (json.dumps({"action": "subscribe", "view": "rack"}), "invalid_id", "id"),
    (json.dumps({"action": "subscribe", "view": "rack", "id": "12"}), "invalid_id", "id"),
    (json.dumps({"action": "subscribe", "view": "rack", "id": True}), "invalid_id", "id"),
    (json.dumps({"action": "subscribe", "view": "rack", "id": -3}), "invalid_id", "id"),
    (json.dumps({"action": "subscribe", "view": "cluster", "id": 4}), "invalid_id", "id"),
    (json.dumps({"action": "subscribe", "view": "cluster", "pad": "x" * 5000}), "too_large",
     None),
    ("[" * 2048 + "]" * 2048, "too_deep", None),
    ('{"action": ' + "[" * 2000 + "]" * 2000 + "}", "too_deep", None),
    (json.dumps({"action": "subscribe", "view": "rack", "id": [[[[[[[[[[1]]]]]]]]]]}),
     "too_deep", None),
]


def test_bad_messages_get_an_error_and_the_connection_stays(tiny_cluster, user):
    headers = session_headers(user)

    async def scenario():
        comm = communicator(tiny_cluster["cluster"].pk, headers)
        assert (await comm.connect())[0]
        await receive_type(comm, "hello")
        for text, code, field in BAD_MESSAGES:
            await comm.send_to(text_data=text)
            error = await comm.receive_json_from(timeout=3)
            assert error["type"] == "error", text
            assert error["code"] == code, (text, error)
            assert error.get("field") == field, (text, error)
            assert error["message"]
        await comm.send_to(bytes_data=b"\x00\x01")
        assert (await comm.receive_json_from())["code"] == "bad_frame"
        # Still open and answering:
        await comm.send_json_to({"action": "ping"})
        assert (await comm.receive_json_from())["type"] == "pong"
        await comm.disconnect()

    async_to_sync(scenario)()


def test_unknown_rack_or_supernode_is_an_error_not_a_close(tiny_cluster, user):
    rack, net_rack = tiny_cluster["rack"], tiny_cluster["net_rack"]

    headers = session_headers(user)

    async def scenario():
        comm = communicator(tiny_cluster["cluster"].pk, headers)
        assert (await comm.connect())[0]
        await receive_type(comm, "hello")
        for view, object_id in (("rack", rack.pk + 999), ("supernode", 424242),
                                ("rack", net_rack.pk)):  # a rack with no cards
            await comm.send_json_to({"action": "subscribe", "view": view, "id": object_id})
            error = await comm.receive_json_from(timeout=3)
            assert error["type"] == "error" and error["code"] == "unknown_id", error
            assert error["field"] == "id"
        await comm.send_json_to({"action": "subscribe", "view": "rack", "id": rack.pk})
        snapshot = await receive_type(comm, "snapshot")
        assert snapshot["id"] == rack.pk
        await comm.disconnect()

    async_to_sync(scenario)()


def test_subscriptions_per_connection_are_capped(tiny_cluster, user):
    metrics = list(METRIC_KEYS)[: MAX_SUBSCRIPTIONS + 1]

    headers = session_headers(user)

    async def scenario():
        comm = communicator(tiny_cluster["cluster"].pk, headers)
        assert (await comm.connect())[0]
        await receive_type(comm, "hello")
        for metric in metrics[:MAX_SUBSCRIPTIONS]:
            await comm.send_json_to({"action": "subscribe", "view": "cluster",
                                     "metric": metric})
            assert (await receive_type(comm, "snapshot"))["metric"] == metric
        await comm.send_json_to({"action": "subscribe", "view": "cluster",
                                 "metric": metrics[-1]})
        error = await comm.receive_json_from(timeout=3)
        assert error["code"] == "too_many_subscriptions"
        # Re-subscribing to a followed view is allowed at the cap, and idempotent: it is
        # confirmed without resending the snapshot (issue 11; it used to be resent).
        await comm.send_json_to({"action": "subscribe", "view": "cluster",
                                 "metric": metrics[0]})
        again = await receive_type(comm, "subscribed")
        assert again["metric"] == metrics[0] and again["already"] is True
        await comm.send_json_to({"action": "unsubscribe", "view": "cluster",
                                 "metric": metrics[0]})
        gone = await receive_type(comm, "unsubscribed")
        assert gone["removed"] == [{"view": "cluster", "id": None, "metric": metrics[0]}]
        assert len(gone["active"]) == MAX_SUBSCRIPTIONS - 1
        await comm.send_json_to({"action": "unsubscribe"})
        assert (await receive_type(comm, "unsubscribed"))["active"] == []
        await comm.disconnect()

    async_to_sync(scenario)()


def test_a_4_kb_nested_message_is_an_error_and_the_socket_keeps_working(tiny_cluster, user):
    """Issue 11: 4 KB of nested arrays was a RecursionError that killed the consumer and
    its connection. Now it is an ``error`` message and the same socket carries on."""
    headers = session_headers(user)
    deep = "[" * 2048 + "]" * 2048
    assert len(deep) == 4096

    async def scenario():
        comm = communicator(tiny_cluster["cluster"].pk, headers)
        assert (await comm.connect())[0]
        await receive_type(comm, "hello")
        for _ in range(3):
            await comm.send_to(text_data=deep)
            error = await receive_type(comm, "error")
            assert error["code"] == "too_deep" and "8 levels" in error["message"]
        await comm.send_json_to({"action": "ping"})
        assert (await receive_type(comm, "pong"))["type"] == "pong"
        await comm.send_json_to({"action": "subscribe", "view": "cluster"})
        assert (await receive_type(comm, "snapshot"))["view"] == "cluster"
        await comm.disconnect()

    async_to_sync(scenario)()


def test_the_scenario_socket_survives_a_nested_message_too(tiny_cluster, user):
    from twin.scenarios.models import ScenarioRun

    run = ScenarioRun.objects.create(kind="topology", cluster=tiny_cluster["cluster"],
                                     params={}, created_by=user)
    headers = session_headers(user)

    async def scenario():
        from channels.testing import WebsocketCommunicator

        from twin.asgi import application

        comm = WebsocketCommunicator(application, f"/ws/scenarios/{run.pk}/", headers=headers)
        assert (await comm.connect())[0]
        assert (await comm.receive_json_from(timeout=3))["type"] == "snapshot"
        await comm.send_to(text_data="[" * 2048 + "]" * 2048)
        assert (await comm.receive_json_from(timeout=3))["code"] == "bad_message"
        await comm.send_json_to({"action": "ping"})
        assert (await comm.receive_json_from(timeout=3))["type"] == "pong"
        await comm.disconnect()

    async_to_sync(scenario)()
