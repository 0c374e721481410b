"""End to end: agent batch → HTTP endpoint → Redis stream → real Celery worker →
live state → tick → Channels group → websocket frame.

Two clients: Channels' ``WebsocketCommunicator`` in this process (the batch is
posted through Django's test client), and a plain ``websockets`` client against
a real uvicorn (logged in through the real ``/login/`` form; the batch is
posted over HTTP to the same server). Nothing is simulated between the agent
and the browser.
"""
from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from typing import Any

import pytest
import websockets
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth.models import User
from django.test import Client

from tests.live.conftest import communicator, login_over_http, receive_type, session_headers
from tests.telemetry.conftest import telemetry_server  # noqa: F401  (fixture)
from twin.live.protocol import CLOSE_UNAUTHENTICATED
from twin.telemetry.models import TelemetryAgent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

STATIC_W = 1800 + 60 + 25  # tiny rack r0: server overhead + PCIe switch + NIC


def batch_body(cards, seq: int, watts: float) -> bytes:
    return json.dumps({"seq": seq, "ts": time.time(),
                       "cards": [{"card": card.pk, "power_w": watts, "gpu_util": 88.0,
                                  "gpu_temp_c": 61.0} for card in cards]}).encode()


def test_batch_through_the_worker_reaches_a_channels_client(celery_worker, tiny_cluster):
    cluster, rack, cards = tiny_cluster["cluster"], tiny_cluster["rack"], tiny_cluster["cards"]
    user = User.objects.create_user("viewer", "viewer@example.com", "viewer-pass-123")
    headers = session_headers(user)
    _, token = TelemetryAgent.issue(cluster, "e2e-agent")
    agent = Client(HTTP_AUTHORIZATION=f"Bearer {token}")

    def post(seq: int, watts: float) -> dict[str, Any]:
        response = agent.post(f"/api/telemetry/clusters/{cluster.pk}/batches/",
                              batch_body(cards, seq, watts), content_type="application/json")
        assert response.status_code == 202, response.content
        return response.json()

    async def scenario():
        comm = communicator(cluster.pk, headers)
        assert (await comm.connect())[0]
        await comm.send_json_to({"action": "subscribe", "view": "rack", "id": rack.pk,
                                 "metric": "power_w"})
        snap = await receive_type(comm, "snapshot", skip=("hello",))
        await comm.send_json_to({"action": "subscribe", "view": "cluster",
                                 "metric": "power_w"})
        cluster_snap = await receive_type(comm, "snapshot")
        assert snap["values"] == [None] * 8
        for seq, watts in ((1, 610.0), (2, 620.0)):
            await sync_to_async(post)(seq, watts)
            seen: dict[str, dict[str, Any]] = {}
            deadline = time.monotonic() + 20
            # Frames reflect the new batch once the worker has applied and ticked it.
            while len(seen) < 2:
                frame = await receive_type(comm, "frame", timeout=deadline - time.monotonic())
                expected = [watts] * 8 if frame["view"] == "rack" else [8 * watts + STATIC_W]
                if frame["values"] == expected:
                    seen[frame["view"]] = frame
            assert seen["rack"]["seq"] > snap["seq"]
            assert seen["cluster"]["seq"] > cluster_snap["seq"]
            assert seen["rack"]["health"] == [1] * 8
            snap, cluster_snap = seen["rack"], seen["cluster"]
        await comm.disconnect()

    async_to_sync(scenario)()


def test_plain_websockets_client_against_uvicorn(celery_worker, telemetry_server,  # noqa: F811
                                                 tiny_cluster):
    base = telemetry_server
    cluster, rack, cards = tiny_cluster["cluster"], tiny_cluster["rack"], tiny_cluster["cards"]
    User.objects.create_user("browser", "browser@example.com", "browser-pass-123")
    _, token = TelemetryAgent.issue(cluster, "uvicorn-agent")
    session = login_over_http(base, "browser", "browser-pass-123")
    ws_url = base.replace("http://", "ws://") + f"/ws/clusters/{cluster.pk}/"

    def post_over_http(seq: int, watts: float) -> int:
        request = urllib.request.Request(
            f"{base}/api/telemetry/clusters/{cluster.pk}/batches/",
            data=batch_body(cards, seq, watts),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status

    async def scenario():
        # Anonymous: accepted, then closed with 4401.
        async with websockets.connect(ws_url, origin=base) as anonymous:
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(anonymous.recv(), 5)
            assert closed.value.rcvd.code == CLOSE_UNAUTHENTICATED

        async with websockets.connect(ws_url, origin=base,
                                      additional_headers={"Cookie": f"sessionid={session}"}
                                      ) as ws:
            hello = json.loads(await asyncio.wait_for(ws.recv(), 5))
            assert hello["type"] == "hello" and hello["cluster"] == cluster.pk
            await ws.send(json.dumps({"action": "subscribe", "view": "cluster"}))
            snap = json.loads(await asyncio.wait_for(ws.recv(), 5))
            assert snap["type"] == "snapshot" and snap["keys"] == [rack.pk]
            await ws.send("{oops")
            error = json.loads(await asyncio.wait_for(ws.recv(), 5))
            assert error["type"] == "error" and error["code"] == "bad_json"
            # Issue 11: 4 KB of nesting killed the connection; now it is an error and the
            # socket stays. A repeated subscribe is confirmed, not a second snapshot.
            await ws.send("[" * 2048 + "]" * 2048)
            error = json.loads(await asyncio.wait_for(ws.recv(), 5))
            assert error["type"] == "error" and error["code"] == "too_deep"
            await ws.send(json.dumps({"action": "subscribe", "view": "cluster"}))
            again = json.loads(await asyncio.wait_for(ws.recv(), 5))
            assert again["type"] == "subscribed" and again["already"] is True

            assert await asyncio.to_thread(post_over_http, 1, 640.0) == 202
            deadline = time.monotonic() + 20
            while True:
                message = json.loads(await asyncio.wait_for(ws.recv(),
                                                            deadline - time.monotonic()))
                if message["type"] == "frame" and message["values"] == [8 * 640.0 + STATIC_W]:
                    break
            assert message["seq"] > snap["seq"]

    asyncio.run(scenario())
