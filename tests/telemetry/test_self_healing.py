"""Self-healing from live telemetry: a failing reading posted to the real ingestion
endpoint, drained and ticked (the worker's code, in this process), becomes a
remediation; the real worker does the same end to end.

The tiny cluster is one server of 8 H100s: a spare is another card of that server.
"""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from channels.layers import get_channel_layer

from tests.telemetry.conftest import batches_url, drain_now, wait_for
from twin.hardware.choices import CardStatusChoices, SelfHealingChoices
from twin.hardware.models import Card
from twin.jobs.models import Allocation, Job, Remediation
from twin.jobs.scheduler import submit
from twin.telemetry import keys, processing, state
from twin.telemetry.alerts import rules
from twin.telemetry.models import Alert

seq_of: dict[int, int] = {}


def post(agent: dict[str, Any], rows: dict[int, dict[str, float]], ts: float | None = None
         ) -> None:
    """One batch through the ingestion endpoint: every card healthy unless ``rows`` says."""
    cid = agent["cluster"].pk
    seq_of[cid] = seq_of.get(cid, 0) + 1
    cards = [{"card": c.pk, "metrics": {"gpu_util": 90, "xid_errors": 0, "ecc_errors": 0,
                                        "link_latency_ns": 160, **rows.get(c.pk, {})}}
             for c in agent["cards"]]
    doc: dict[str, Any] = {"seq": seq_of[cid], "cards": cards}
    if ts is not None:
        doc["ts"] = ts
    response = agent["client"].post(batches_url(cid), json.dumps(doc),
                                    content_type="application/json")
    assert response.status_code == 202, response.content


def step(agent: dict[str, Any], rows: dict[int, dict[str, float]]) -> None:
    post(agent, rows)
    drain_now()
    processing.tick(agent["cluster"].pk, force=True)


@pytest.fixture
def world(agent: dict[str, Any], settings: Any) -> dict[str, Any]:
    """The tiny cluster with a 4-card job on it, alerts undamped, policy ``apply``."""
    seq_of.clear()
    settings.TELEMETRY_THRESHOLDS = {r.key: {"min_s": 0.0, "clear_s": 0.0} for r in rules()}
    cluster = agent["cluster"]
    cluster.self_healing = SelfHealingChoices.APPLY
    cluster.save()
    job = Job(cluster=cluster, name="train", tenant="team-a", cards=4, checkpoint_interval_s=60)
    job.full_clean()
    submit(job)
    assert job.state == "running"
    agent["job"] = job
    agent["held"] = list(Card.objects.filter(allocations__job=job).order_by("slot"))
    return agent


@pytest.mark.parametrize(("reading", "cause"), [
    ({"xid_errors": 79}, "xid79"),
    ({"ecc_errors": 2}, "ecc"),
    ({"xid_errors": 64}, "ecc"),  # row-remapping failure
    ({"xid_errors": 48}, "ecc"),  # double-bit ECC
])
def test_each_fatal_reading_is_healed(world, reading, cause):
    failed = world["held"][1]
    step(world, {failed.pk: reading})
    rem = Remediation.objects.get(card=failed)
    assert rem.cause == cause and rem.state == "applied" and rem.applied_via == "policy"
    assert Card.objects.get(pk=failed.pk).status == CardStatusChoices.FAILED
    spare = rem.proposal["jobs"][0]["spare"]["card"]
    assert Allocation.objects.filter(job=world["job"], card_id=spare).exists()
    assert not Allocation.objects.filter(card=failed).exists()
    alert = Alert.objects.get(pk=rem.episode)
    assert alert.card_id == failed.pk and alert.ended is not None
    assert f"remediated ({rem.pk})" in alert.message


def test_a_silent_card_is_healed_but_a_silent_rack_is_not(world, settings):
    settings.TWIN_HEAL_SILENT_S = 20.0
    cid = world["cluster"].pk
    failed = world["held"][2]
    step(world, {})
    # the failed card's last reading is 30 s old; the rest of its rack reports now
    post(world, {}, ts=time.time() - 30)
    drain_now()
    others = [c for c in world["cards"] if c.pk != failed.pk]
    seq_of[cid] += 1
    world["client"].post(batches_url(cid), json.dumps(
        {"seq": seq_of[cid], "cards": [{"card": c.pk, "metrics": {"gpu_util": 90}}
                                       for c in others]}), content_type="application/json")
    drain_now()
    processing.tick(cid, force=True)
    rem = Remediation.objects.get(card=failed)
    assert rem.cause == "silent" and "no telemetry for 3" in rem.detail
    assert rem.state == "applied"
    # the whole rack going silent (an agent or network fault) takes no card out
    Remediation.objects.all().delete()
    Card.objects.filter(pk=failed.pk).update(status=CardStatusChoices.OK)
    post(world, {}, ts=time.time() - 60)
    drain_now()
    processing.tick(cid, force=True)
    assert not Remediation.objects.exists()


def test_a_recoverable_xid_and_a_slow_link_take_no_card_out(world):
    card = world["held"][0]
    step(world, {card.pk: {"xid_errors": 13}})  # a graphics engine exception
    assert not Remediation.objects.exists()
    step(world, {card.pk: {"xid_errors": 0, "link_latency_ns": 900}})
    rem = Remediation.objects.get(card=card)
    assert rem.cause == "link" and rem.proposal["jobs"][0]["action"] == "reroute"
    assert Card.objects.get(pk=card.pk).status == CardStatusChoices.OK


def test_the_same_failing_reading_again_applies_nothing_twice(world):
    cid = world["cluster"].pk
    failed = world["held"][0]
    step(world, {failed.pk: {"xid_errors": 79}})
    step(world, {failed.pk: {"xid_errors": 79}})
    # even with the tick's memory of handed-over cards gone (Redis restarted)
    state.redis_client().delete(keys.failing(cid, state.layout(cid).version))
    step(world, {failed.pk: {"xid_errors": 79}})
    assert Remediation.objects.count() == 1
    assert Allocation.objects.filter(job=world["job"]).count() == 4
    assert Alert.objects.filter(rule="xid", card=failed, ended__isnull=True).count() == 0


def test_propose_only_waits_for_the_operator(world, admin_client_api):
    cluster = world["cluster"]
    cluster.self_healing = SelfHealingChoices.PROPOSE
    cluster.save()
    failed = world["held"][0]
    step(world, {failed.pk: {"xid_errors": 79}})
    rem = Remediation.objects.get(card=failed)
    assert rem.state == "proposed"
    assert Card.objects.get(pk=failed.pk).status == CardStatusChoices.FAILED
    assert Allocation.objects.filter(card=failed).exists()
    assert Alert.objects.get(pk=rem.episode).ended is None
    answer = admin_client_api.post(f"/api/jobs/remediations/{rem.pk}/apply/")
    assert answer.status_code == 200 and answer.json()["state"] == "applied"
    assert answer.json()["applied_by"] == "admin" and answer.json()["applied_via"] == "operator"
    assert not Allocation.objects.filter(card=failed).exists()
    assert Alert.objects.get(pk=rem.episode).ended is not None


def test_the_remediation_is_pushed_to_the_cluster_group(world,
                                                       django_capture_on_commit_callbacks):
    cid = world["cluster"].pk
    layer = get_channel_layer()
    group = state.group_name(cid)

    async def join() -> str:
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
        return channel

    channel = asyncio.run(join())
    failed = world["held"][0]
    with django_capture_on_commit_callbacks(execute=True):  # published once committed
        step(world, {failed.pk: {"xid_errors": 79}})

    async def events() -> list[dict[str, Any]]:
        got = []
        try:
            while True:
                msg = await asyncio.wait_for(layer.receive(channel), 2)
                got.append(msg)
        except TimeoutError:
            return got
        finally:
            await layer.group_discard(group, channel)

    got = [m for m in asyncio.run(events()) if m["type"] == state.REMEDIATION_EVENT]
    assert [m["event"] for m in got] == ["proposed", "applied"]
    assert got[-1]["remediation"]["card"] == failed.pk
    assert got[-1]["remediation"]["proposal"]["jobs"][0]["action"] == "spare"


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_end_to_end_through_the_real_worker(celery_worker, agent, settings):
    """Endpoint → stream → the worker's drain and tick → its heal task → applied."""
    cluster = agent["cluster"]
    cluster.self_healing = SelfHealingChoices.APPLY
    cluster.save()
    job = Job(cluster=cluster, name="train", tenant="team-a", cards=4)
    job.full_clean()
    submit(job)
    failed = Card.objects.filter(allocations__job=job).order_by("slot").first()
    seq_of.clear()
    post(agent, {})
    started = time.monotonic()
    post(agent, {failed.pk: {"xid_errors": 79}})
    rem = wait_for(lambda: Remediation.objects.filter(card=failed, state="applied").first(),
                   timeout=30, what="the worker to heal the card")
    took = time.monotonic() - started
    assert rem.cause == "xid79" and took < 10
    assert not Allocation.objects.filter(card=failed).exists()
    assert Allocation.objects.filter(job=job).count() == 4
