"""The Celery → Channels bridge: messages arrive, and repeated sends leak nothing."""
from __future__ import annotations

import asyncio
import gc
import os
import threading

from channels.layers import get_channel_layer

from twin.telemetry import bridge, state


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def live_loops() -> int:
    count = 0
    for o in gc.get_objects():
        try:
            if isinstance(o, asyncio.AbstractEventLoop) and not o.is_closed():
                count += 1
        except ReferenceError:  # a weakref.proxy whose object is gone
            continue
    return count


def test_a_group_member_receives_what_the_bridge_sends():
    layer = get_channel_layer()
    group = state.group_name(987654)
    assert group == "telemetry.cluster.987654"

    async def join() -> str:
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
        return channel

    channel = asyncio.run(join())
    message = {"type": state.TICK_EVENT, "cluster": 987654, "seq": 3, "ts": 1.5}
    assert bridge.group_send(group, message) is True

    async def receive() -> dict:
        got = await asyncio.wait_for(layer.receive(channel), 5)
        await layer.group_discard(group, channel)
        return got

    assert asyncio.run(receive()) == message


def test_repeated_sends_reuse_one_loop_and_one_connection_pool():
    group = state.group_name(123456)
    bridge.group_send(group, {"type": "telemetry.tick", "seq": 0})  # warm up
    gc.collect()
    threads, fds, loops = threading.active_count(), open_fds(), live_loops()
    for seq in range(200):
        assert bridge.group_send(group, {"type": "telemetry.tick", "seq": seq + 1})
    gc.collect()
    assert bridge.loop_thread_count() == 1
    assert threading.active_count() == threads
    assert live_loops() == loops
    assert open_fds() <= fds + 1  # a pooled connection may be re-opened, never one per send
