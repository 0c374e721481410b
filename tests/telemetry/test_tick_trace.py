"""The live tick's own measures (issue 22, item 2): the tick event says how new the
state it read was (``data_ts``), the tick gate follows the tick's CPU time, not its
wall time, and ``TWIN_TELEMETRY_TRACE`` keeps per-stage timings of ingest → apply →
tick (real Redis, real database, the tick run in process)."""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from channels.layers import get_channel_layer

from tests.telemetry.test_state import put
from twin.telemetry import keys, processing, state, trace
from twin.telemetry.config import redis_client
from twin.telemetry.processing import ticks


@pytest.fixture(autouse=True)
def no_auto_drain(settings: Any) -> None:
    settings.TELEMETRY_AUTO_DRAIN = False


def _power(cid: int, watts: float, ts: float) -> None:
    n = state.layout(cid).n
    put(cid, {"power_w": [watts] * n}, ts=ts)


def test_the_tick_event_says_how_new_the_state_it_read_is(transactional_db, tiny_cluster,
                                                          monkeypatch):
    """``data_ts`` is the newest sample time the tick read: a batch is in a tick once
    ``data_ts`` reaches the batch's time (how the serving benchmark measures the lag)."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "1")
    cid = tiny_cluster["cluster"].pk
    layer = get_channel_layer()

    async def join() -> str:
        channel = await layer.new_channel()
        await layer.group_add(state.group_name(cid), channel)
        return channel

    async def last_tick(channel: str) -> dict[str, Any]:
        """The newest tick event waiting (the drain that applied a batch may have
        ticked too: the forced tick's event comes last)."""
        last = None
        while True:
            try:
                message = await asyncio.wait_for(layer.receive(channel),
                                                 10 if last is None else 0.5)
            except TimeoutError:
                assert last is not None
                return last
            if message["type"] == state.TICK_EVENT:
                last = message

    async def run() -> list[dict[str, Any]]:
        channel = await join()
        got = []
        for ts in (time.time() - 2.0, time.time() - 1.0):
            _power(cid, 300.0, ts)  # (blocking calls on the loop: allowed in this test)
            assert processing.tick(cid, force=True)
            got.append(await last_tick(channel))
        await layer.group_discard(state.group_name(cid), channel)
        return got

    got = asyncio.run(run())
    first, second = got
    assert second["data_ts"] - first["data_ts"] == pytest.approx(1.0, abs=1e-3)
    assert second["seq"] > first["seq"]
    assert second["ts"] >= second["data_ts"]


def test_no_card_reported_means_no_data_ts():
    import numpy as np

    from twin.telemetry.processing.tickparts import data_ts

    assert data_ts(np.full(4, np.nan)) is None
    assert data_ts(np.zeros(0)) is None
    assert data_ts(np.array([np.nan, 5.0, 7.5])) == 7.5


def tick_beside_a_busy_thread(cid: int) -> dict[str, float]:
    """One forced tick of ``cid`` while another thread spins (holding the interpreter
    lock: the tick waits for it as for a busy core); the tick's ``tick_stats``."""
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(range(1000))

    busy = threading.Thread(target=spin)
    busy.start()
    try:
        assert processing.tick(cid, force=True)
    finally:
        stop.set()
        busy.join()
    return {k.decode(): float(v) for k, v in
            redis_client().hgetall(keys.tick_stats(cid)).items()}


def test_the_gate_follows_the_ticks_cpu_time_not_its_wall_time(tiny_cluster, settings):
    """A tick that waits for a core (here: for the interpreter lock, held by a busy
    thread) takes longer in wall time than in CPU time; the gate after it is twice its
    CPU time, so a loaded machine does not hold back the next batch's tick."""
    settings.TELEMETRY_MAX_TICK_HZ = 1000  # (the floor out of the way: 1 ms)
    cid = tiny_cluster["cluster"].pk
    _power(cid, 300.0, time.time())
    stats = tick_beside_a_busy_thread(cid)
    wall, cpu = stats["last"], stats["cpu_last"]
    assert cpu < wall, "the tick waited for the lock"
    assert ticks._tick_cost[cid] == pytest.approx(cpu)
    assert ticks.gate_ms(cid) == int(max(0.001, 2 * cpu) * 1000)
    assert ticks.gate_ms(cid) < int(2 * wall * 1000)
    assert stats["cpu_sum"] >= cpu


def test_the_trace_keeps_each_stage_only_when_on(tiny_cluster, settings):
    cid = tiny_cluster["cluster"].pk
    r = redis_client()
    r.delete(keys.trace())
    settings.TELEMETRY_TRACE = False
    _power(cid, 300.0, time.time())
    assert processing.tick(cid, force=True)
    assert trace.read(r) == []

    settings.TELEMETRY_TRACE = True
    ts = time.time()
    _power(cid, 310.0, ts)
    seq = processing.tick(cid, force=True)
    records = trace.read(r)
    apply_rec = next(x for x in records if x["kind"] == "apply")
    tick_rec = next(x for x in records if x["kind"] == "tick")
    assert apply_rec["batch_ts"] == pytest.approx(ts)
    assert apply_rec["cluster"] == cid and apply_rec["queued_ms"] >= 0
    assert tick_rec["seq"] == seq and tick_rec["data_ts"] == pytest.approx(ts)
    for stage in ("read", "rollups", "plant", "capping", "alerts", "write", "alerts_db",
                  "health_db", "failures", "minute", "send"):
        wall, cpu = tick_rec["stages"][stage]
        assert wall >= 0 and cpu >= 0, stage
    assert sum(w for w, _ in tick_rec["stages"].values()) <= tick_rec["wall_ms"] + 0.01
    # The event goes out right after the live state is written, before the stages
    # that wait on the database and the history stores (issue 22, item 2).
    order = list(tick_rec["stages"])
    assert order.index("send") == order.index("write") + 1, order
    for slow in ("alerts_db", "health_db", "failures", "minute", "victoria"):
        assert order.index(slow) > order.index("send"), (slow, order)
    assert tick_rec["cpu_ms"] <= tick_rec["wall_ms"] + 1.0


def test_a_span_adds_a_stage_marked_twice():
    span = trace.Span("x")
    span.mark("a")
    time.sleep(0.01)
    span.mark("b")
    time.sleep(0.01)
    span.mark("a")
    rec = span.record(extra=1)
    assert rec["stages"]["a"][0] >= 10.0 and rec["stages"]["b"][0] >= 10.0
    assert rec["extra"] == 1 and rec["kind"] == "x"
