"""Running scenarios in-process (the code the Celery task runs), cancelling, reaping.

Kinds are pluggable: the tests register two kinds of their own (through the
same ``register`` a real kind uses) to cancel a run midway and to fail one.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from channels.layers import get_channel_layer
from django.conf import settings
from django.utils import timezone

from simulation.topology import TopologyError
from twin.scenarios import kinds
from twin.scenarios.kinds import ScenarioKind, register
from twin.scenarios.models import ScenarioRun
from twin.scenarios.runner import (
    cancel,
    execute,
    fail_orphans,
    publish,
    reap,
    stale_s,
    submit,
    time_limit_s,
)
from twin.scenarios.tasks import fail_runs_of_restarted_worker


def run_kind(kind: str, params: dict, cluster: Any = None) -> ScenarioRun:
    run = submit(kind, params, cluster, None, enqueue=False)
    finished = execute(run.pk, worker="test@host")
    assert finished is not None
    return finished


def test_topology_result_has_the_promised_keys(db):
    run = run_kind("topology", {"family": "ring", "nodes": 512})
    assert run.status == "succeeded", run.error
    result = run.result
    for key in ("avg_hops", "diameter_hops", "bisection_links", "bisection_gbps",
                "hop_histogram", "latency_ns"):
        assert key in result
    # the seeds' sample code says ≈ 1.58 hops; the truth is 65536/511
    assert result["avg_hops_exact"] == "65536/511" and result["diameter_hops"] == 256
    assert result["bisection_links"] == 2 and result["bisection_gbps"] == 800.0
    assert sum(result["hop_histogram"]) == 512 * 511
    assert run.progress == 1.0 and run.message.startswith("done in")
    assert run.worker == "test@host" and run.started <= run.finished


def test_route_on_a_family_and_between_cluster_cards(tiny_cluster):
    run = run_kind("route", {"family": "torus", "dims": [4, 4], "src": 0, "dst": 10})
    assert run.result["hops"] == 4 and run.result["reachable"] is True  # (0,0) → (2,2)
    assert run.result["nodes"][0] == 0 and run.result["nodes"][-1] == 10
    cards = tiny_cluster["cards"]
    run = run_kind("route", {"src": cards[0].serial, "dst": cards[3].pk, "by": "latency"},
                   tiny_cluster["cluster"])
    assert run.status == "succeeded", run.error
    assert run.result["cards"]["src"]["serial"] == "TINY-0000"
    # (0,0,0) → (1,1,0): two 150 ns torus links, or card → PCIe switch (0 ns) → card
    # over two 100 ns PCIe links — the lowest latency wins
    assert run.result["hops"] == 2 and run.result["latency_ns"] == 200.0
    assert run.result["labels"][1].startswith("pcie_switch")
    by_hops = run_kind("route", {"src": cards[0].pk, "dst": cards[7].pk},
                       tiny_cluster["cluster"])
    assert by_hops.result["hops"] == 2 and by_hops.result["nodes"][-1] == 7


def test_failure_with_ids_and_live_state(tiny_cluster):
    run = run_kind("failure", {"family": "ring", "nodes": 8, "links": [0, 4]})
    assert run.result["partitions"] == 2 and run.result["pairs_disconnected"] == 32
    world = tiny_cluster
    world["cards"][5].status = "failed"
    world["cards"][5].save()
    world["links"][0].status = "down"  # the 0–1 scale-up link
    world["links"][0].save()
    run = run_kind("failure", {"live": True, "cards": ["TINY-0006"]}, world["cluster"])
    assert run.status == "succeeded", run.error
    assert run.inputs["live"] == {"cards": 1, "links": 1}
    assert run.result["removed_nodes"] == {"card": 2}
    assert run.result["surviving_endpoints"] == 6 and run.result["connected"] is True


def test_collective_reports_time_and_bandwidths_per_size(db):
    run = run_kind("collective", {"family": "torus", "dims": [4, 4, 4], "op": "allreduce",
                                  "sizes": [1024, 1 << 20, 1 << 30]})
    assert run.status == "succeeded", run.error
    sizes = run.result["sizes"]
    assert [s["size_bytes"] for s in sizes] == [1024, 1 << 20, 1 << 30]
    for row in sizes:
        assert row["time_s"] > 0
        assert row["algbw_gbps"] == pytest.approx(row["size_bytes"] * 8 / 1e9 / row["time_s"])
        # nccl-tests: busbw = algbw × 2(n−1)/n for AllReduce, n = 64
        assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 2 * 63 / 64)
        assert row["algorithm"] in row["algorithms"]
        assert row["time_s"] == min(a["time_s"] for a in row["algorithms"].values())
    assert sizes[-1]["algorithm"] == "torus"  # bandwidth-optimal on its own torus
    assert run.result["ranks"] == 64


@pytest.fixture
def test_kinds() -> Iterator[None]:
    """Two kinds registered for these tests only."""

    class LateKind(ScenarioKind):
        """Cancels its own run midway, then returns a result anyway (a slow worker)."""

        name = "test_late"

        def prepare(self, params: Any, cluster: Any) -> dict:
            return {"n": 1}

        def run(self, inputs: Any, progress: Any) -> dict:
            progress(0.5, "half way")
            for run_id in ScenarioRun.objects.filter(kind=self.name, status="running") \
                    .values_list("pk", flat=True):
                cancel(run_id)
            return {"late": True}

    class BrokenKind(ScenarioKind):
        name = "test_broken"

        def prepare(self, params: Any, cluster: Any) -> dict:
            return dict(params)

        def run(self, inputs: Any, progress: Any) -> dict:
            if inputs.get("topology_error"):
                raise TopologyError("ranks", "some supernodes are not connected")
            raise ValueError("boom")

    register(LateKind)
    register(BrokenKind)
    try:
        yield
    finally:
        kinds.REGISTRY.pop("test_late", None)
        kinds.REGISTRY.pop("test_broken", None)


def test_a_cancelled_runs_late_result_does_not_overwrite_it(db, test_kinds):
    run = run_kind("test_late", {})
    assert run.status == "cancelled" and run.result is None
    assert run.progress == 0.5 and run.message == "cancelled"


def test_a_run_that_raises_ends_failed_with_the_reason(db, test_kinds):
    run = run_kind("test_broken", {"topology_error": True})
    assert run.status == "failed"
    assert (run.error_field, run.error) == ("params.ranks", "some supernodes are not connected")
    run = run_kind("test_broken", {})
    assert run.status == "failed" and run.error == "ValueError: boom"
    assert run.finished is not None


def test_a_redelivered_run_is_failed_not_run_twice(db):
    run = submit("topology", {"family": "ring", "nodes": 8}, None, None, enqueue=False)
    ScenarioRun.objects.filter(pk=run.pk).update(status="running", worker="w1@host",
                                                 started=timezone.now())
    again = execute(run.pk, worker="w2@host")
    assert again.status == "failed" and "w1@host" in again.error and "was lost" in again.error
    assert again.result is None


def running(worker: str = "w@host", **times: Any) -> ScenarioRun:
    run = submit("topology", {"family": "ring", "nodes": 8}, None, None, enqueue=False)
    ScenarioRun.objects.filter(pk=run.pk).update(status="running", worker=worker, **times)
    return ScenarioRun.objects.get(pk=run.pk)


def test_the_reaper_fails_silent_and_overdue_runs_only(db):
    now = timezone.now()
    silent = running(started=now - timedelta(minutes=5),
                     heartbeat=now - timedelta(seconds=stale_s() + 5))
    alive = running(started=now - timedelta(minutes=5), heartbeat=now - timedelta(seconds=1))
    overdue = running(started=now - timedelta(seconds=time_limit_s() + 120), heartbeat=now)
    queued = submit("topology", {"family": "ring", "nodes": 12}, None, None, enqueue=False)
    assert sorted(reap(now)) == sorted([silent.pk, overdue.pk])
    silent.refresh_from_db()
    overdue.refresh_from_db()
    assert silent.status == "failed" and "no sign of life since" in silent.error
    assert overdue.status == "failed" and "time limit" in overdue.error
    assert ScenarioRun.objects.get(pk=alive.pk).status == "running"
    assert ScenarioRun.objects.get(pk=queued.pk).status == "queued"
    assert reap(now) == []  # idempotent


def test_the_reaper_runs_on_beat():
    entry = settings.CELERY_BEAT_SCHEDULE["scenarios-reap"]
    from twin.celery import app

    assert entry["task"] == "twin.scenarios.reap" and entry["schedule"] <= 60
    assert "twin.scenarios.reap" in app.tasks and "twin.scenarios.run" in app.tasks
    task = app.tasks["twin.scenarios.run"]
    assert task.acks_late and task.reject_on_worker_lost and task.time_limit == time_limit_s()


def test_a_restarted_worker_fails_the_runs_it_owned(db):
    mine = running("w1@host")
    other = running("w2@host")
    fail_runs_of_restarted_worker(sender=SimpleNamespace(hostname="w1@host"))
    assert ScenarioRun.objects.get(pk=mine.pk).status == "failed"
    assert "restarted" in ScenarioRun.objects.get(pk=mine.pk).error
    assert ScenarioRun.objects.get(pk=other.pk).status == "running"
    assert fail_orphans("") == []


def test_publishing_progress_does_not_leak_loops_or_connections():
    layer = get_channel_layer()
    publish(1, "running", 0.1, "warm up")
    threads, fds = threading.active_count(), len(os.listdir("/proc/self/fd"))
    pools = len(layer._layers)  # e.g. a long-lived loop of the telemetry bridge
    for i in range(40):
        assert publish(1, "running", i / 40, "tick")
    assert threading.active_count() == threads
    assert len(os.listdir("/proc/self/fd")) <= fds
    # every per-call loop's connection pool was closed with its loop
    assert len(layer._layers) == pools
    assert all(loop.is_running() for loop in layer._layers)


def test_a_model_change_does_not_rewrite_history(db, monkeypatch):
    """A run stored under an older engine keeps its result; the same inputs under
    the current engine (a new cache key) are computed afresh, not served from it."""
    params = {"family": "ring", "nodes": 2, "link_gbps": 400, "op": "allreduce",
              "sizes": [1 << 30]}
    monkeypatch.setattr("twin.scenarios.runner.ENGINE_VERSION", "1")
    old = run_kind("collective", params)
    old.result["best"][0]["time_s"] = 0.01074  # what engine 1 said (2 ranks 2x too fast)
    old.save(update_fields=["result"])
    monkeypatch.undo()
    new = run_kind("collective", params)
    assert new.cached_from_id is None and new.params_hash != old.params_hash
    assert new.result["best"][0]["time_s"] == pytest.approx((1 << 30) / 50e9, rel=2e-3)
    old.refresh_from_db()
    assert old.result["best"][0]["time_s"] == 0.01074
