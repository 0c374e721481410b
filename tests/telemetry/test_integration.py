"""End to end through a real Celery worker: endpoint → Redis stream → worker → state.

Nothing is applied in this process here: the endpoint kicks drain tasks onto
the session worker's queue, and the worker (a separate process, on the test
database and this session's Redis namespace) consumes the stream, writes the
state, ticks and publishes to Channels.
"""
from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
from channels.layers import get_channel_layer

from tests.telemetry.conftest import batches_url, wait_for
from twin.telemetry import state, tasks
from twin.telemetry.models import ScrapeTarget, TelemetryAgent

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_batch_goes_through_the_worker_to_state_rollups_and_a_tick(celery_worker, agent):
    cid = agent["cluster"].pk
    ids = [c.pk for c in agent["cards"]]
    layer = get_channel_layer()
    group = state.group_name(cid)

    async def join() -> str:
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
        return channel

    channel = asyncio.run(join())
    doc = {"seq": 1, "cards": {"ids": ids},
           "columns": {"power_w": [500 + 10 * i for i in range(8)], "gpu_util": [90] * 8,
                       "gpu_temp_c": [60 + i for i in range(8)]}}
    response = agent["client"].post(batches_url(cid), json.dumps(doc),
                                    content_type="application/json")
    assert response.status_code == 202 and response.json()["accepted"] == 8

    values = wait_for(lambda: (v := state.latest(cid, "power_w", ids)) is not None
                      and np.isfinite(v).all() and v, what="the worker to apply the batch")
    assert values.tolist() == [500 + 10 * i for i in range(8)]
    rollup = wait_for(lambda: (r := state.rollup(cid, "rack", "power_w"))["seq"] >= 1 and r,
                      what="a tick")
    assert rollup["sum"][0] == pytest.approx(sum(500 + 10 * i for i in range(8)))
    assert rollup["draw_w"][0] == pytest.approx(rollup["sum"][0] + 1_885)
    assert state.rollup(cid, "cluster", "gpu_temp_c")["max"][0] == 67

    async def receive() -> dict:
        try:
            return await asyncio.wait_for(layer.receive(channel), 10)
        finally:
            await layer.group_discard(group, channel)

    tick = asyncio.run(receive())
    assert tick["type"] == "telemetry.tick" and tick["cluster"] == cid and tick["seq"] >= 1
    assert tick["layout"] == state.layout(cid).version


def test_duplicates_and_gaps_through_the_worker(celery_worker, agent):
    cid = agent["cluster"].pk
    c0 = agent["cards"][0].pk

    def send(seq: int, util: float) -> dict:
        return agent["client"].post(batches_url(cid), json.dumps(
            {"seq": seq, "cards": [{"card": c0, "gpu_util": util}]}),
            content_type="application/json").json()

    assert send(1, 11)["duplicate"] is False
    assert send(1, 99)["duplicate"] is True
    assert send(3, 33)["gap"] == 1
    wait_for(lambda: state.latest(cid, "gpu_util", [c0])[0] == 33, what="seq 3 applied")
    row = TelemetryAgent.objects.get(pk=agent["agent"].pk)
    assert (row.last_sequence, row.duplicates, row.gaps, row.missed_batches) == (3, 1, 1, 1)


def test_a_scraped_dcgm_exporter_is_ingested_end_to_end(celery_worker, agent, dcgm_exporter):
    cid = agent["cluster"].pk
    ids = [c.pk for c in agent["cards"]]
    target = ScrapeTarget.objects.create(cluster=agent["cluster"], agent=agent["agent"],
                                         endpoint=f"http://{dcgm_exporter}/metrics", interval_s=15)
    missing = ScrapeTarget.objects.create(
        cluster=agent["cluster"], endpoint=f"http://{dcgm_exporter}/nothing-here", interval_s=15)
    assert tasks.scrape_due.delay().get(timeout=30) == 2  # the beat task, run by the worker
    util = wait_for(lambda: (v := state.latest(cid, "gpu_util", ids)) is not None
                    and np.isfinite(v).all() and v, what="the scraped samples")
    assert util.tolist() == [90 + g for g in range(8)]
    assert state.latest(cid, "hbm_free_gib", ids[:1])[0] == pytest.approx(12034 / 1024)
    target.refresh_from_db()
    wait_for(lambda: ScrapeTarget.objects.get(pk=target.pk).last_status != "never",
             what="the target's status")
    target.refresh_from_db()
    assert target.last_status == "partial" and target.last_accepted == 8
    assert target.last_rejected == 1 and "NaN" in target.last_error
    missing = wait_for(lambda: (m := ScrapeTarget.objects.get(pk=missing.pk)).last_status
                       == "error" and m, what="the failed scrape")
    assert "404" in missing.last_error
    assert TelemetryAgent.objects.get(pk=agent["agent"].pk).samples == 8
    # Not due again before its interval: the next beat starts nothing.
    assert tasks.scrape_due.delay().get(timeout=30) == 0
