"""``TELEMETRY_APPLY_ON_INGEST``: the process that parsed a batch writes it into the
live state itself, without the stream (``twin.telemetry.enqueue``).

The answers must be the stream path's (the same sequence rules, the agent row
following Redis), the values visible at once, nothing left on the stream, a tick
following on the real worker, and a write that fails must give the sequence
number back so the agent's retry is applied rather than called a duplicate.
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import redis

from tests.telemetry.conftest import batches_url, drain_now, wait_for
from twin.telemetry import keys, state
from twin.telemetry.models import TelemetryAgent
from twin.telemetry.processing import apply

IDS_UTIL = "gpu_util"


def send(world: dict[str, Any], seq: int, util: float) -> Any:
    ids = [c.pk for c in world["cards"]]
    doc = {"seq": seq, "cards": {"ids": ids}, "columns": {IDS_UTIL: [util] * len(ids)}}
    return world["client"].post(batches_url(world["cluster"].pk), json.dumps(doc),
                                content_type="application/json")


def stream_length() -> int:
    r = state.redis_client()
    return int(r.xlen(keys.stream())) if r.exists(keys.stream()) else 0


def latest(world: dict[str, Any]) -> list[float]:
    ids = [c.pk for c in world["cards"]]
    return state.latest(world["cluster"].pk, IDS_UTIL, ids).tolist()


SCRIPT = [(1, 10.0), (2, 20.0), (2, 99.0), (5, 50.0), (4, 98.0), (1, 11.0), (2, 22.0)]
"""(seq, value): accepted, accepted, duplicate, a gap of 2, duplicate, a restart, accepted."""


def _run(world: dict[str, Any]) -> list[tuple[int, dict[str, Any], list[float]]]:
    out = []
    for seq, util in SCRIPT:
        response = send(world, seq, util)
        drain_now()  # (the stream path's worker; nothing to do when applied)
        body = response.json()
        out.append((response.status_code, {k: body[k] for k in (
            "seq", "duplicate", "gap", "restart", "accepted", "values")}, latest(world)))
    return out


def test_the_answers_and_the_state_are_the_stream_paths(agent, settings, issue_agent):
    """One agent per mode on the same cluster, the same script: equal answers, equal
    state after each batch, equal agent rows; applied batches never touch the stream."""
    settings.TELEMETRY_APPLY_ON_INGEST = False
    queued = _run(agent)
    row, token = issue_agent(agent["cluster"], "direct")
    direct_world = {**agent, "agent": row,
                    "client": type(agent["client"])(HTTP_AUTHORIZATION=f"Bearer {token}")}
    settings.TELEMETRY_APPLY_ON_INGEST = True
    before = stream_length()
    direct = _run(direct_world)
    assert direct == queued
    assert [code for code, *_ in direct] == [202, 202, 200, 202, 200, 202, 202]
    assert direct[3][1]["gap"] == 2 and direct[5][1]["restart"] is True
    assert stream_length() == before == 0
    rows = TelemetryAgent.objects.filter(pk__in=[agent["agent"].pk, row.pk])
    assert len({(r.last_sequence, r.samples, r.duplicates, r.gaps, r.restarts)
                for r in rows}) == 1


def test_values_are_there_as_soon_as_the_answer_is(agent, settings):
    settings.TELEMETRY_APPLY_ON_INGEST = True
    assert send(agent, 1, 42.0).status_code == 202
    assert latest(agent) == [42.0] * len(agent["cards"])  # no drain, no worker
    seen = state.last_seen(agent["cluster"].pk)
    assert np.isfinite(seen).all()


def test_a_failed_write_gives_the_sequence_number_back(agent, settings, monkeypatch):
    """Redis fails during the write: 503, and the retry of the same batch is applied,
    not answered as a duplicate of a batch that was never stored."""
    settings.TELEMETRY_APPLY_ON_INGEST = True
    assert send(agent, 1, 10.0).status_code == 202
    real = apply.apply_batch

    def broken(batch: Any) -> Any:
        raise redis.ConnectionError("Redis went away mid-write")

    monkeypatch.setattr(apply, "apply_batch", broken)
    failed = send(agent, 2, 20.0)
    assert failed.status_code == 503, failed.content
    assert state.redis_client().get(keys.agent_seq(agent["agent"].pk)) == b"1"
    monkeypatch.setattr(apply, "apply_batch", real)
    retried = send(agent, 2, 20.0)
    assert retried.status_code == 202 and retried.json()["duplicate"] is False
    assert latest(agent) == [20.0] * len(agent["cards"])
    assert TelemetryAgent.objects.get(pk=agent["agent"].pk).last_sequence == 2


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_tick_follows_on_the_worker(celery_worker, agent, settings):
    """No drain runs: the endpoint schedules the tick itself, and the real worker runs it."""
    settings.TELEMETRY_APPLY_ON_INGEST = True
    cid = agent["cluster"].pk
    assert send(agent, 1, 77.0).status_code == 202
    roll = wait_for(lambda: (r := state.rollup(cid, "cluster", IDS_UTIL))["seq"] >= 1 and r,
                    what="a tick on the worker")
    assert roll["mean"][0] == pytest.approx(77.0) and stream_length() == 0


def test_a_scrape_is_applied_and_counted_too(agent, settings, dcgm_exporter):
    """The scraper goes through the same enqueue: applied at once, its accepted cards
    counted on the target as for a queued batch, nothing on the stream."""
    from twin.telemetry import scrape, tasks
    from twin.telemetry.models import ScrapeTarget

    settings.TELEMETRY_APPLY_ON_INGEST = True
    cid = agent["cluster"].pk
    ids = [c.pk for c in agent["cards"]]
    target = ScrapeTarget.objects.create(cluster=agent["cluster"], agent=agent["agent"],
                                         endpoint=f"http://{dcgm_exporter}/metrics",
                                         interval_s=15)
    scrape.scrape(target.pk, tasks.after_enqueue)
    target.refresh_from_db()
    assert target.last_status == "partial" and target.last_accepted == 8
    assert state.latest(cid, IDS_UTIL, ids).tolist() == [90 + g for g in range(8)]
    assert stream_length() == 0
