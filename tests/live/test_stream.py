"""Streaming: snapshot → tick → frame, on the real Redis channel layer and live state.

Telemetry reaches the state exactly as a worker writes it: a batch parsed by
``twin.telemetry.ingest`` and applied by ``processing.apply_entry``, then
``processing.tick`` computes the rollups and publishes ``telemetry.tick`` to
the cluster's group through the Celery→Channels bridge. The consumer under test
is the full ASGI application (origin check, session auth, router).
"""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth.models import User

from tests.conftest import async_wait_until
from tests.live.conftest import communicator, receive_type, session_headers
from twin.live import frames
from twin.telemetry import bridge, ingest, processing, state

pytestmark = pytest.mark.django_db(transaction=True)

STATIC_W = 1800 + 60 + 25  # tiny rack r0: server overhead + PCIe switch + NIC


@pytest.fixture
def user(transactional_db) -> User:
    return User.objects.create_user("viewer", "viewer@example.com", "viewer-pass-123")


@pytest.fixture
def headers(user) -> list[tuple[bytes, bytes]]:
    return session_headers(user)


def report(cluster_id: int, readings: dict[int, dict[str, float]], *,
           ts: float | None = None) -> int:
    """Apply one native batch as a worker does and tick; return the tick's seq."""
    lay = state.layout(cluster_id)
    doc = {"seq": 1, "ts": ts or time.time(),
           "cards": [{"card": card_id, **values} for card_id, values in readings.items()]}
    batch = ingest.parse_native(doc, lay)
    assert not batch.rejected, batch.rejected
    assert processing.apply_entry(batch.payload(None)) == cluster_id
    seq = processing.tick(cluster_id, force=True)
    assert seq is not None
    return seq


areport = sync_to_async(report)


def power_of(cards, watts: float) -> dict[int, dict[str, float]]:
    return {card.pk: {"power_w": watts, "gpu_util": 50.0, "gpu_temp_c": 60.0}
            for card in cards}


async def subscribe(comm, **message: Any) -> dict[str, Any]:
    await comm.send_json_to({"action": "subscribe", **message})
    return await receive_type(comm, "snapshot", skip=("hello",))


async def collect(comm, into: list[tuple[float, dict[str, Any]]]) -> None:
    """Record every message with its arrival time (cancel to stop)."""
    while True:
        message = await comm.receive_json_from(timeout=30)
        into.append((time.monotonic(), message))


def test_cluster_view_snapshot_then_frame_with_rack_draw(tiny_cluster, headers):
    cluster, rack, cards = tiny_cluster["cluster"], tiny_cluster["rack"], tiny_cluster["cards"]

    async def scenario():
        comm = communicator(cluster.pk, headers)
        assert (await comm.connect())[0]
        snap = await subscribe(comm, view="cluster", metric="power_w")
        # Keys are the racks holding cards; no telemetry yet → null, not 0.
        assert snap["keys"] == [rack.pk] and snap["names"] == ["r0"]
        assert snap["budget_w"] == [40000.0]
        assert snap["values"] == [None]
        assert snap["aggregate"] == "draw" and snap["unit"] == "W"
        before = snap["seq"]

        seq = await areport(cluster.pk, power_of(cards, 500.0))
        frame = await receive_type(comm, "frame")
        assert frame["seq"] == seq > before
        assert frame["view"] == "cluster" and frame["id"] is None
        assert frame["values"] == [8 * 500.0 + STATIC_W]
        assert "keys" not in frame  # frames are values only
        assert frame["layout"] == snap["layout"]
        assert abs(frame["ts"] - time.time()) < 5
        await comm.disconnect()

    async_to_sync(scenario)()


def test_rack_and_supernode_views_stream_card_values_in_key_order(tiny_cluster, headers):
    cluster, rack, sn = tiny_cluster["cluster"], tiny_cluster["rack"], tiny_cluster["supernode"]
    cards = tiny_cluster["cards"]
    readings = {card.pk: {"gpu_temp_c": 40.0 + i, "power_w": 300.0 + 10 * i}
                for i, card in enumerate(cards)}

    async def scenario():
        comm = communicator(cluster.pk, headers)
        assert (await comm.connect())[0]
        rack_snap = await subscribe(comm, view="rack", id=rack.pk, metric="gpu_temp_c")
        sn_snap = await subscribe(comm, view="supernode", id=sn.pk, metric="power_w")
        assert sorted(rack_snap["keys"]) == sorted(c.pk for c in cards)
        assert sn_snap["keys"] == rack_snap["keys"]  # one rack holds the whole supernode
        assert rack_snap["health"] == [0] * 8  # unknown until a card first reports

        seq = await areport(cluster.pk, readings)
        got = {}
        while len(got) < 2:
            frame = await receive_type(comm, "frame")
            got[frame["view"]] = frame
        for view, metric in (("rack", "gpu_temp_c"), ("supernode", "power_w")):
            frame = got[view]
            assert frame["seq"] == seq and frame["metric"] == metric
            expected = [readings[card_id][metric] for card_id in rack_snap["keys"]]
            assert frame["values"] == expected
            assert frame["health"] == [1] * 8  # ok
        await comm.disconnect()

    async_to_sync(scenario)()


def test_frames_are_rate_limited_and_the_last_state_always_arrives(tiny_cluster, headers):
    cluster, cards = tiny_cluster["cluster"], tiny_cluster["cards"]

    async def scenario():
        comm = communicator(cluster.pk, headers)
        assert (await comm.connect())[0]
        await subscribe(comm, view="cluster", metric="power_w")
        received: list[tuple[float, dict[str, Any]]] = []
        collector = asyncio.create_task(collect(comm, received))
        started = time.monotonic()
        seqs = []
        for i in range(14):  # forced ticks every ~100 ms: 5× the allowed frame rate
            seqs.append(await areport(cluster.pk, power_of(cards, 400.0 + i)))
            await asyncio.sleep(0.1)  # the pace of the ticks is the input under test
        elapsed = time.monotonic() - started
        await async_wait_until(
            lambda: any(m["type"] == "frame" and m["seq"] == seqs[-1] for _, m in received),
            timeout=5, what="the trailing frame")
        collector.cancel()
        frames_in = [(t, m) for t, m in received if m["type"] == "frame"]
        assert len(frames_in) >= 2
        assert len(frames_in) <= elapsed / 0.5 + 2
        gaps = [b[0] - a[0] for a, b in zip(frames_in, frames_in[1:], strict=False)]
        assert min(gaps) >= 0.45, gaps
        got = [m["seq"] for _, m in frames_in]
        assert got == sorted(set(got))  # strictly increasing
        # The trailing frame carries the newest state: nothing is lost to the limit.
        assert got[-1] == seqs[-1]
        assert frames_in[-1][1]["values"] == [8 * 413.0 + STATIC_W]
        await comm.disconnect()

    async_to_sync(scenario)()


def test_a_repeated_or_old_tick_sends_nothing(tiny_cluster, headers):
    cluster, cards = tiny_cluster["cluster"], tiny_cluster["cards"]

    async def scenario():
        comm = communicator(cluster.pk, headers)
        assert (await comm.connect())[0]
        await subscribe(comm, view="cluster")
        seq = await areport(cluster.pk, power_of(cards, 450.0))
        frame = await receive_type(comm, "frame")
        assert frame["seq"] == seq
        layer = get_channel_layer()
        lay = await sync_to_async(state.layout)(cluster.pk)
        for again in (seq, seq - 1):
            await layer.group_send(state.group_name(cluster.pk), {
                "type": state.TICK_EVENT, "cluster": cluster.pk, "seq": again,
                "ts": time.time(), "layout": lay.version})
        assert await comm.receive_nothing(timeout=1.0)
        await comm.disconnect()

    async_to_sync(scenario)()


def test_one_read_per_tick_for_many_clients_and_views(tiny_cluster, user):
    cluster, cards, rack = tiny_cluster["cluster"], tiny_cluster["cards"], tiny_cluster["rack"]
    all_headers = [session_headers(user) for _ in range(6)]
    views = [{"view": "cluster", "metric": "gpu_util"},
             {"view": "rack", "id": rack.pk, "metric": "gpu_util"},
             {"view": "supernode", "id": tiny_cluster["supernode"].pk, "metric": "power_w"}]

    async def scenario():
        comms = [communicator(cluster.pk, h) for h in all_headers]
        for i, comm in enumerate(comms):
            assert (await comm.connect())[0]
            await subscribe(comm, **views[i % 3])
        assert len(frames.frame_cache.followed(cluster.pk)) == 3
        reads, builds = frames.frame_cache.reads, frames.frame_cache.builds
        seq = await areport(cluster.pk, power_of(cards, 500.0))
        texts: dict[str, set[str]] = {}
        for comm in comms:
            frame = await receive_type(comm, "frame")
            assert frame["seq"] == seq
            texts.setdefault(frame["view"], set()).add(repr(frame))
        assert {view: len(t) for view, t in texts.items()} == {
            "cluster": 1, "rack": 1, "supernode": 1}
        # Six clients on three views: one Redis read of the three, one encoding each.
        assert frames.frame_cache.reads - reads == 1
        assert frames.frame_cache.builds - builds == 3
        for comm in comms:
            await comm.disconnect()
        assert frames.frame_cache.followed(cluster.pk) == {}

    async_to_sync(scenario)()


def test_reconnect_heals_with_a_snapshot_of_the_newest_state(tiny_cluster, headers):
    cluster, cards = tiny_cluster["cluster"], tiny_cluster["cards"]

    async def scenario():
        comm = communicator(cluster.pk, headers)
        assert (await comm.connect())[0]
        await subscribe(comm, view="cluster")
        await areport(cluster.pk, power_of(cards, 300.0))
        await receive_type(comm, "frame")
        await comm.disconnect()
        # Frames the client missed while away:
        await areport(cluster.pk, power_of(cards, 310.0))
        last = await areport(cluster.pk, power_of(cards, 320.0))
        comm = communicator(cluster.pk, headers)
        assert (await comm.connect())[0]
        snap = await subscribe(comm, view="cluster")
        assert snap["seq"] == last
        assert snap["values"] == [8 * 320.0 + STATIC_W]
        await comm.disconnect()

    async_to_sync(scenario)()


def test_a_layout_change_resends_the_snapshot(tiny_cluster, headers):
    cluster, cards = tiny_cluster["cluster"], tiny_cluster["cards"]

    async def scenario():
        comm = communicator(cluster.pk, headers)
        assert (await comm.connect())[0]
        snap = await subscribe(comm, view="rack", id=tiny_cluster["rack"].pk)
        await areport(cluster.pk, power_of(cards, 300.0))
        await receive_type(comm, "frame")
        # Hardware changed: the state starts over under a new layout version.
        await sync_to_async(state.invalidate_layout)(cluster.pk)
        seq = await areport(cluster.pk, power_of(cards[:4], 333.0))
        again = await receive_type(comm, "snapshot")
        assert again["layout"] != snap["layout"] and again["seq"] == seq
        assert sorted(again["keys"]) == sorted(snap["keys"])
        by_card = dict(zip(again["keys"], again["values"], strict=True))
        assert [by_card[c.pk] for c in cards] == [333.0] * 4 + [None] * 4
        await comm.disconnect()

    async_to_sync(scenario)()


def test_alerts_reach_the_client_batched(tiny_cluster, headers):
    cluster, cards = tiny_cluster["cluster"], tiny_cluster["cards"]

    async def scenario():
        comm = communicator(cluster.pk, headers)
        assert (await comm.connect())[0]
        await receive_type(comm, "hello")
        # A real alert: XID errors open a critical alert at the first tick (XID 13, a
        # recoverable one: XID 79 would also take the card out through self-healing).
        readings = power_of(cards, 500.0)
        readings[cards[2].pk]["xid_errors"] = 13.0
        await areport(cluster.pk, readings)
        message = await receive_type(comm, "alerts", timeout=5)
        assert message["dropped"] == 0
        [event] = message["events"]
        assert event["event"] == "opened"
        assert event["alert"]["card"] == cards[2].pk
        assert event["alert"]["severity"] == "critical"
        # A burst of events arrives as at most one message per half second.
        received: list[tuple[float, dict[str, Any]]] = []
        collector = asyncio.create_task(collect(comm, received))
        group = state.group_name(cluster.pk)
        for i in range(30):
            await sync_to_async(bridge.group_send)(group, {
                "type": state.ALERT_EVENT, "cluster": cluster.pk, "event": "closed",
                "alert": {"id": 1000 + i}})
        await async_wait_until(
            lambda: sum(len(m["events"]) for _, m in received if m["type"] == "alerts") >= 30,
            timeout=5, what="the 30 alert events")
        collector.cancel()
        batches = [(t, m) for t, m in received if m["type"] == "alerts"]
        assert [e["alert"]["id"] for _, m in batches for e in m["events"]] == \
            list(range(1000, 1030))
        assert 1 <= len(batches) <= 3
        gaps = [b[0] - a[0] for a, b in zip(batches, batches[1:], strict=False)]
        assert all(g >= 0.45 for g in gaps), gaps
        await comm.disconnect()

    async_to_sync(scenario)()


def test_a_remediation_reaches_the_client_at_once(tiny_cluster, headers):
    """Self-healing's decisions (``remediation.event``) are forwarded as they come."""
    cluster = tiny_cluster["cluster"]

    async def scenario():
        comm = communicator(cluster.pk, headers)
        assert (await comm.connect())[0]
        await receive_type(comm, "hello")
        payload = {"id": 5, "card": tiny_cluster["cards"][0].pk, "state": "applied"}
        await sync_to_async(bridge.group_send)(state.group_name(cluster.pk), {
            "type": state.REMEDIATION_EVENT, "cluster": cluster.pk, "event": "applied",
            "remediation": payload})
        message = await receive_type(comm, "remediation", timeout=3,
                                     skip=("frame", "snapshot"))
        assert message == {"type": "remediation", "event": "applied", "remediation": payload}
        await comm.disconnect()

    async_to_sync(scenario)()


def test_disconnect_leaves_no_task_and_no_group_membership(tiny_cluster, headers):
    cluster, cards = tiny_cluster["cluster"], tiny_cluster["cards"]

    async def scenario():
        comm = communicator(cluster.pk, headers)
        assert (await comm.connect())[0]
        await subscribe(comm, view="cluster")
        pumps = [t for t in asyncio.all_tasks() if t.get_name().startswith("live-pump-")]
        assert len(pumps) == 1
        await comm.disconnect()
        await asyncio.sleep(0)  # one turn of the loop, no more: the pump ends at once
        assert pumps[0].done()
        assert not [t for t in asyncio.all_tasks()
                    if t.get_name().startswith("live-pump-") and not t.done()]
        layer = get_channel_layer()
        group_key = layer._group_key(state.group_name(cluster.pk))
        async with layer.connection(layer.consistent_hash(group_key)) as conn:
            assert await conn.zcard(group_key) == 0
        # Ticks after the disconnect go nowhere and break nothing.
        await areport(cluster.pk, power_of(cards, 200.0))

    async_to_sync(scenario)()


def test_an_idle_consumer_survives_the_channel_layers_blocking_read(tiny_cluster, headers):
    """redis-py ≥ 8 reads with a 5 s socket timeout by default while channels_redis
    blocks 5 s in BZPOPMIN: without ``socket_timeout`` raised in CHANNEL_LAYERS,
    every consumer idle for 5 s died with ``redis.TimeoutError`` (close 1011)."""
    cluster, cards = tiny_cluster["cluster"], tiny_cluster["cards"]

    async def scenario():
        comm = communicator(cluster.pk, headers)
        assert (await comm.connect())[0]
        await subscribe(comm, view="cluster")
        assert await comm.receive_nothing(timeout=7.0)  # idle longer than the 5 s block
        seq = await areport(cluster.pk, power_of(cards, 250.0))
        frame = await receive_type(comm, "frame")
        assert frame["seq"] == seq
        await comm.disconnect()

    async_to_sync(scenario)()


def test_resubscribing_a_followed_view_is_idempotent(tiny_cluster, headers):
    """Issue 11: every repeated subscribe resent the full snapshot (8.5 MB in 10 s on a
    big cluster). A repeat is now a small confirmation; the subscription, its frames and
    what the process follows are unchanged."""
    cluster, rack, cards = tiny_cluster["cluster"], tiny_cluster["rack"], tiny_cluster["cards"]

    async def scenario():
        comm = communicator(cluster.pk, headers)
        assert (await comm.connect())[0]
        snap = await subscribe(comm, view="rack", id=rack.pk, metric="power_w")
        for _ in range(5):
            await comm.send_json_to({"action": "subscribe", "view": "rack", "id": rack.pk,
                                     "metric": "power_w"})
            again = await receive_type(comm, "subscribed")
            assert again == {"type": "subscribed", "view": "rack", "id": rack.pk,
                             "metric": "power_w", "seq": snap["seq"],
                             "layout": snap["layout"], "already": True}
            assert len(json.dumps(again)) < 200
        assert await comm.receive_nothing(timeout=0.3)
        assert sum(frames.frame_cache.followed(cluster.pk).values()) == 1
        # Still subscribed once: one tick, one frame (not a snapshot, not two).
        seq = await areport(cluster.pk, power_of(cards, 420.0))
        frame = await receive_type(comm, "frame")
        assert frame["seq"] == seq and frame["values"] == [420.0] * len(cards)
        # After a frame, a repeat reports the seq the client now holds.
        await comm.send_json_to({"action": "subscribe", "view": "rack", "id": rack.pk,
                                 "metric": "power_w"})
        assert (await receive_type(comm, "subscribed"))["seq"] == seq
        # A fresh snapshot is one unsubscribe away.
        await comm.send_json_to({"action": "unsubscribe"})
        await receive_type(comm, "unsubscribed")
        fresh = await subscribe(comm, view="rack", id=rack.pk, metric="power_w")
        assert fresh["seq"] == seq and fresh["values"] == [420.0] * len(cards)
        await comm.disconnect()

    async_to_sync(scenario)()
