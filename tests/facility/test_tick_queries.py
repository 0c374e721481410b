"""The live tick asks the database nothing in steady state (issue 22, item 2).

Under a crowd of readers every query on the tick's path waits for the shared
PostgreSQL (~40 ms each, ``docs/benchmarks.md`` "serving"), so what the tick reads
from the database is cached per process and invalidated by writes (the versions of
``twin.core.aggregates``' domains, one Redis GET each): the live plant (``facility``)
and the priority capping weights (``jobs``), as the capping policy (``capping``)
already was. Real Redis, real database, the tick run in process; the queries are
counted on the tick's connection with Django's ``CaptureQueriesContext``.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import redis
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.telemetry.test_state import put
from twin.facility import capping_live, live
from twin.telemetry import processing, state
from twin.telemetry.config import conf, redis_client

pytestmark = pytest.mark.usefixtures("plant_namespace")


def _world(world: dict[str, Any]) -> tuple[int, list[int], Any]:
    """The plant world with a running priority-100 job on every card and priority
    capping applied: a tick steps the plant and the caps with the job weights."""
    from twin.facility.models import CappingPolicy
    from twin.jobs.models import Allocation, Job

    cluster, cards = world["cluster"], world["cards"]
    job = Job.objects.create(cluster=cluster, name="steady", tenant="t", cards=len(cards),
                             priority=100, state="running")
    for c in cards:
        Allocation.objects.create(job=job, card=c)
    CappingPolicy.objects.create(cluster=cluster, mode="apply", policy="priority")
    return cluster.pk, [c.pk for c in cards], job


def _tick(cid: int, ids: list[int]) -> list[str]:
    """Apply a batch (every card at 500 W), then one tick; the tick's SQL."""
    put(cid, {"power_w": [500.0] * len(ids)}, cards=ids)
    with CaptureQueriesContext(connection) as got:
        assert processing.tick(cid, force=True)
    return [q["sql"] for q in got.captured_queries]


def test_a_steady_tick_makes_no_query(plant_world: dict[str, Any], settings: Any) -> None:
    """With a plant, capping on under the priority policy and a running job: once
    warm, a tick makes 0 queries, whatever ``FACILITY_LIVE_RECHECK_S`` says (before:
    the plant's four revision queries every recheck and the job weights' query every
    tick). A write to a job is seen by the next tick (one query: the weights), then
    the ticks are quiet again."""
    settings.FACILITY_LIVE_RECHECK_S = 0.0  # (was: the revision queried every tick)
    cid, ids, job = _world(plant_world)
    _tick(cid, ids)  # warm: layout, plant, policy, weights
    for _ in range(3):
        assert _tick(cid, ids) == []
    summary = state.plant_summary(cid)
    caps = capping_live.read_summary(redis_client(), conf().prefix, cid)
    assert summary is not None and caps is not None and caps["policy"] == "priority"
    lay = state.layout(cid)
    assert capping_live._weight_cache[cid][3].tolist() == [2.0] * lay.n  # 1 + 100/100

    job.priority = 300
    job.save(update_fields=["priority"])
    sql = _tick(cid, ids)
    assert len(sql) == 1 and "jobs_allocation" in sql[0]
    assert capping_live._weight_cache[cid][3].tolist() == [4.0] * lay.n
    assert _tick(cid, ids) == []


def test_a_facility_edit_reaches_the_plant_on_the_next_tick(plant_world: dict[str, Any],
                                                            settings: Any) -> None:
    """Not after ``FACILITY_LIVE_RECHECK_S``, and without ``last_updated`` moving:
    the write itself replaces the ``facility`` domain's version."""
    from twin.facility.models import CoolingElement

    settings.FACILITY_LIVE_RECHECK_S = 3600.0
    cid, ids, _ = _world(plant_world)
    _tick(cid, ids)
    before = live._cache[cid][3]
    assert _tick(cid, ids) == []
    assert live._cache[cid][3] is before
    CoolingElement.objects.filter(pk=plant_world["cdu"].pk).update(capacity_kw=5.0)
    assert _tick(cid, ids) != []  # the plant read again
    assert live._cache[cid][3] is not before
    s = state.plant_summary(cid)
    assert s is not None and s["cdus"][0]["load_fraction"] > 0.5
    assert _tick(cid, ids) == []


def test_with_redis_away_the_plant_checks_its_rows_every_recheck(
        plant_world: dict[str, Any], settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The facility version lives in Redis; when it cannot be read, the plant falls
    back to its rows' revision (count and newest ``last_updated`` per table: four
    queries), checked at most every ``FACILITY_LIVE_RECHECK_S``."""
    from django.utils import timezone

    from twin.core import aggregates
    from twin.facility.models import CoolingElement

    cid = plant_world["cluster"].pk
    lay = state.layout(cid)
    rack_ids = lay.groups["rack"].ids

    def away(domain: str) -> str:
        raise redis.ConnectionError("Redis away (test)")

    monkeypatch.setattr(aggregates, "version", away)
    settings.FACILITY_LIVE_RECHECK_S = 3600.0
    first = live.live_plant(cid, lay.version, rack_ids)
    assert first is not None and live._cache[cid][1][:1] != ("v",)
    with CaptureQueriesContext(connection) as got:
        assert live.live_plant(cid, lay.version, rack_ids) is first
    assert got.captured_queries == []  # within the recheck: the cached plant
    settings.FACILITY_LIVE_RECHECK_S = 0.0
    with CaptureQueriesContext(connection) as got:
        assert live.live_plant(cid, lay.version, rack_ids) is first
    assert len(got.captured_queries) == 4  # the revision, unchanged
    CoolingElement.objects.filter(pk=plant_world["cdu"].pk).update(
        capacity_kw=5.0, last_updated=timezone.now())
    again = live.live_plant(cid, lay.version, rack_ids)
    assert again is not None and again is not first
    assert np.array_equal(again.at, first.at)


def test_a_steady_capped_tick_prices_its_jobs_without_a_query(
        plant_world: dict[str, Any], settings: Any) -> None:
    """Caps binding on the cards of a job that names a training model: the tick
    prices the caps' cost with the job's op mix (``job_op_mixes``), whose allocation
    rows are cached under the ``jobs`` version too: once warm, 0 queries a tick."""
    from tests.facility.test_capping_live import _budget

    settings.FACILITY_LIVE_RECHECK_S = 0.0
    cid, ids, job = _world(plant_world)
    job.training_model, job.global_batch = "llama3-8b", 16
    job.save(update_fields=["training_model", "global_batch"])
    capping_live._mixes.clear()
    _budget(plant_world, 1000.0)
    _tick(cid, ids)  # warm: layout, plant, policy, weights, allocation rows, the mix
    _tick(cid, ids)
    for _ in range(2):
        assert _tick(cid, ids) == []
    caps = capping_live.read_summary(redis_client(), conf().prefix, cid)
    assert caps is not None and caps["cards_capped"] > 0
    assert caps["throughput_basis"]["op_mix_cards"] > 0
    assert capping_live._rows_cache[cid][1]  # the cached rows
