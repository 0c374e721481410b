"""Fork now: ``twin.scenarios.snapshot.freeze`` on a cluster fed over the real telemetry
path, the snapshot stored with a run (API ``fork``/``fork_from``, ``run_scenario
--fork``), the same answer when the run is computed again from it, and a cluster
without live state forking its inventory."""
from __future__ import annotations

import json
from collections.abc import Iterator
from io import StringIO
from typing import Any

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from simulation.snapshot import LiveSnapshot
from tests.telemetry.conftest import batches_url, drain_now, flush_namespace
from twin.scenarios.runner import execute, submit
from twin.scenarios.snapshot import freeze

SCENARIOS = "/api/scenarios/"


@pytest.fixture
def live_ns(settings: Any) -> Iterator[None]:
    """An empty telemetry namespace; batches applied in this process (``drain_now``)."""
    settings.TELEMETRY_AUTO_DRAIN = False
    flush_namespace()
    yield
    flush_namespace()


def feed(cluster: Any, cards: list[Any], power: list[float], temp: list[float],
         seq: int = 1) -> None:
    """One columnar batch through the ingest endpoint, applied as the worker would."""
    from twin.telemetry.models import TelemetryAgent

    _, token = TelemetryAgent.issue(cluster, f"agent-{seq}")
    doc = {"seq": seq, "cards": {"ids": [c.pk for c in cards]},
           "columns": {"power_w": power, "gpu_temp_c": temp, "gpu_util": [90.0] * len(cards)}}
    response = Client(HTTP_AUTHORIZATION=f"Bearer {token}").post(
        batches_url(cluster.pk), json.dumps(doc), content_type="application/json")
    assert response.status_code in (200, 202), response.content
    drain_now()


@pytest.fixture
def live_world(tiny_cluster, admin_client_api, live_ns) -> dict[str, Any]:
    """The tiny cluster with card 7 failed, link 0 down, a 4-card job running for an hour,
    an 8-card job queued behind it, and one round of telemetry from cards 0–6."""
    from twin.hardware.models import Card, Link

    world = tiny_cluster
    Card.objects.filter(pk=world["cards"][7].pk).update(status="failed")
    Link.objects.filter(pk=world["links"][0].pk).update(status="down")
    cid = world["cluster"].pk
    running = admin_client_api.post("/api/jobs/", {
        "cluster": cid, "name": "train", "tenant": "t", "cards": 4, "duration_s": 3600},
        format="json").json()
    queued = admin_client_api.post("/api/jobs/", {
        "cluster": cid, "name": "big", "tenant": "u", "cards": 7, "duration_s": 600,
        "priority": 3}, format="json").json()
    assert (running["state"], queued["state"]) == ("running", "queued")
    feed(world["cluster"], world["cards"][:7], [400.0 + 10 * i for i in range(7)],
         [50.0 + i for i in range(7)])
    return {**world, "running": running, "queued": queued}


def test_freeze_captures_down_cards_jobs_and_readings(live_world) -> None:
    from twin.jobs.models import Allocation

    world = live_world
    snap = freeze(world["cluster"])
    assert snap.has_live_state and snap.note == ""
    assert snap.cards_down["failed"] == (world["cards"][7].pk,)
    assert snap.links_down == {"down": (world["links"][0].pk,)}
    (job,) = snap.running
    held = sorted(Allocation.objects.filter(job_id=world["running"]["id"])
                  .values_list("card_id", flat=True))
    assert job.id == world["running"]["id"] and sorted(job.cards) == held
    assert job.share_milli == (1000,) * 4 and job.tenant == "t"
    assert job.started is not None and job.expected_end == pytest.approx(job.started + 3600)
    assert 0 <= job.progress < 0.01
    (pending,) = snap.queue
    assert (pending.id, pending.cards, pending.priority, pending.duration_s) == (
        world["queued"]["id"], 7, 3, 600.0)
    readings = snap.readings
    assert readings is not None and readings.reporting == 7
    order = {int(c): k for k, c in enumerate(readings.card_ids)}
    for i, card in enumerate(world["cards"][:7]):
        assert readings.power_w[order[card.pk]] == pytest.approx(400 + 10 * i)
        assert readings.temp_c[order[card.pk]] == pytest.approx(50 + i)
    assert np.isnan(readings.power_w[order[world["cards"][7].pk]])  # never reported
    assert readings.cap_w is None
    assert snap.racks is not None and world["rack"].pk in snap.racks.ids
    # the JSON form rebuilds the same snapshot
    assert LiveSnapshot.from_dict(json.loads(json.dumps(snap.to_dict()))) == snap


def test_a_cluster_without_live_state_forks_its_inventory(tiny_cluster, live_ns,
                                                          admin_client_api) -> None:
    from twin.hardware.models import Card

    Card.objects.filter(pk=tiny_cluster["cards"][2].pk).update(status="maintenance")
    snap = freeze(tiny_cluster["cluster"])
    assert not snap.has_live_state and snap.readings is None and snap.racks is None
    assert "no live state" in snap.note and "inventory" in snap.note
    assert snap.cards_down == {"maintenance": (tiny_cluster["cards"][2].pk,)}
    response = admin_client_api.post(SCENARIOS, {
        "kind": "failure", "cluster": tiny_cluster["cluster"].pk, "fork": True,
        "params": {"live": True}}, format="json")
    assert response.status_code == 202, response.content
    run = execute(response.json()["id"], worker="test@host")
    assert run is not None and run.status == "succeeded", run.error
    assert run.result["fork"]["has_live_state"] is False
    assert "no live state" in run.result["fork"]["note"]
    body = admin_client_api.get(f"{SCENARIOS}{run.pk}/").json()
    assert body["snapshot"]["has_live_state"] is False and body["snapshot"]["taken_at"]


def test_a_fork_is_stored_and_computed_again_gives_the_same_answer(live_world,
                                                                   admin_client_api) -> None:
    """Fork, run the scheduling kind from the live state; then the twin moves on (the
    job is cancelled, another card fails, new readings). A run from the stored snapshot
    (``fork_from``, recomputed) gives the same answer; a new fork does not."""
    from twin.hardware.models import Card
    from twin.jobs.models import Job
    from twin.jobs.scheduler import cancel

    world = live_world
    cid = world["cluster"].pk
    params = {"from_live": True, "policies": "best-fit,easy-backfill", "mode": "full",
              "jobs": 40, "seed": 3}
    first = admin_client_api.post(SCENARIOS, {"kind": "scheduling", "cluster": cid,
                                              "fork": True, "params": params}, format="json")
    assert first.status_code == 202, first.content
    a = execute(first.json()["id"], worker="test@host")
    assert a is not None and a.status == "succeeded", a.error
    assert a.snapshot and LiveSnapshot.from_dict(a.snapshot).running
    assert a.result["fork"]["running"] == 1 and a.result["fork"]["has_live_state"]
    assert a.inputs["nodes"]["live_jobs"][0]["remaining_s"] > 3500
    whole = admin_client_api.get(f"{SCENARIOS}{a.pk}/snapshot/")
    assert whole.status_code == 200 and whole.json() == a.snapshot

    cancel(Job.objects.get(pk=world["running"]["id"]))
    Card.objects.filter(pk=world["cards"][0].pk).update(status="failed")
    feed(world["cluster"], world["cards"][:7], [100.0] * 7, [30.0] * 7, seq=2)

    again = admin_client_api.post(SCENARIOS, {"kind": "scheduling", "cluster": cid,
                                              "fork_from": a.pk, "refresh": True,
                                              "params": params}, format="json")
    assert again.status_code == 202, again.content
    b = execute(again.json()["id"], worker="test@host")
    assert b is not None and b.status == "succeeded", b.error
    assert b.snapshot == a.snapshot
    assert b.inputs["nodes"]["failed_cards"] == a.inputs["nodes"]["failed_cards"] == 1

    def answer(run: Any) -> list[dict[str, Any]]:
        return [{k: v for k, v in p.items() if k != "wall_s"} for p in run.result["policies"]]

    assert answer(b) == answer(a)
    fresh = submit("scheduling", params, world["cluster"], None, enqueue=False, fork=True)
    assert fresh.inputs["fork"]["digest"] != a.inputs["fork"]["digest"]
    assert fresh.inputs["nodes"]["failed_cards"] == 2 and "live_jobs" in fresh.inputs["nodes"]
    # the cancel let the queued job start: the new fork pins it, not the cancelled one
    assert [j["name"] for j in fresh.inputs["nodes"]["live_jobs"]] == ["big"]
    assert [j["name"] for j in a.inputs["nodes"]["live_jobs"]] == ["train"]


def test_live_options_read_through_the_snapshot_and_store_it(live_world) -> None:
    """Without ``fork`` the failure kind's ``live`` still freezes once, and the run keeps
    that snapshot: one mechanism, whichever way a kind asks for the live state."""
    run = submit("failure", {"live": True}, live_world["cluster"], None, enqueue=False)
    assert run.snapshot is not None
    assert run.inputs["live"] == {"cards": 1, "links": 1}
    assert run.inputs["fork"]["cards_down"] == {"failed": 1}


@pytest.mark.parametrize(("body", "field", "status"), [
    ({"kind": "topology", "params": {"family": "ring", "nodes": 8}, "fork": True}, "fork", 400),
    ({"kind": "failure", "params": {}, "fork": True, "fork_from": 1}, "fork_from", 409),
    # A run id that names no row conflicts with the stored data: 409 (docs/api.md).
    ({"kind": "failure", "params": {}, "fork_from": 99999999}, "fork_from", 409),
])
def test_bad_fork_requests_are_400_per_field(admin_client_api, tiny_cluster, published,
                                             body: dict[str, Any], field: str,
                                             status: int) -> None:
    from twin.scenarios.models import ScenarioRun

    if body["kind"] == "failure":
        body = {**body, "cluster": tiny_cluster["cluster"].pk}
    before = ScenarioRun.objects.count()
    response = admin_client_api.post(SCENARIOS, body, format="json")
    assert response.status_code == status, response.content
    assert field in response.json(), response.json()
    assert ScenarioRun.objects.count() == before and published == []


def test_fork_from_a_run_of_another_cluster_or_without_snapshot(admin_client_api, tiny_cluster,
                                                                live_ns) -> None:
    from twin.hardware.models import Cluster
    from twin.scenarios.kinds import ScenarioInputError

    plain = submit("failure", {}, tiny_cluster["cluster"], None, enqueue=False)
    response = admin_client_api.post(SCENARIOS, {
        "kind": "failure", "cluster": tiny_cluster["cluster"].pk, "fork_from": plain.pk,
        "params": {}}, format="json")
    assert response.status_code == 400
    assert "stores no snapshot" in response.json()["fork_from"][0]
    forked = submit("failure", {}, tiny_cluster["cluster"], None, enqueue=False, fork=True)
    other = Cluster.objects.create(name="other")
    with pytest.raises(ScenarioInputError) as err:
        submit("failure", {}, other, None, enqueue=False, fork=forked)
    assert "another cluster" in err.value.errors["fork_from"][0]


def test_the_command_forks_and_says_when_there_is_no_live_state(tiny_cluster, live_ns) -> None:
    out = StringIO()
    call_command("run_scenario", "failure", "--cluster", "tiny", "--fork", "--no-progress",
                 "--params", '{"live": true}', stdout=out)
    assert "no live state" in out.getvalue()
    with pytest.raises(CommandError, match="--fork-from: no scenario run"):
        call_command("run_scenario", "failure", "--cluster", "tiny", "--fork-from",
                     "99999999", "--params", "{}", stdout=StringIO())


def test_any_kind_can_fork(live_world) -> None:
    """The fork is the runner's, not a kind's: a topology run forked from the live state
    stores the snapshot and its result says what it started from."""
    run = submit("topology", {}, live_world["cluster"], None, enqueue=False, fork=True)
    done = execute(run.pk, worker="test@host")
    assert done is not None and done.status == "succeeded", done.error
    assert done.snapshot is not None and done.result["fork"]["has_live_state"] is True
    assert done.result["fork"]["reporting"] == 7 and "avg_hops" in done.result


def test_the_admin_shows_the_snapshot_summary_not_the_arrays(live_world, client,
                                                             admin_user) -> None:
    run = submit("failure", {"live": True}, live_world["cluster"], None, enqueue=False)
    client.force_login(admin_user)
    page = client.get(f"/admin/scenarios/scenariorun/{run.pk}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "forked from" in text.lower() and run.inputs["fork"]["digest"] in text
    assert "b64" not in text  # the per-card arrays stay in the API's snapshot endpoint
