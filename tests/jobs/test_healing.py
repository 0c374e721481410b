"""Self-healing (``twin.jobs.healing``): the proposal, the cluster's policy, idempotency.

On the DGX preset's scalable unit (one supernode: 32 servers × 8 H100 on rails).
Jobs are submitted through the real scheduler; failures are handed in as the
telemetry tick hands them (card, cause, episode = the alert's id).
"""
from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from simulation.resilience import Recovery
from twin.hardware.choices import CardStatusChoices, SelfHealingChoices
from twin.hardware.models import Card
from twin.jobs import healing
from twin.jobs.choices import RemediationStateChoices
from twin.jobs.models import Allocation, Job, Remediation
from twin.jobs.scheduler import submit


def job_on(cluster: Any, cards: int, name: str = "train", **fields: Any) -> Job:
    job = Job(cluster=cluster, name=name, tenant="team-a", cards=cards, **fields)
    job.full_clean()
    submit(job)
    assert job.state == "running", job.message
    return job


def held(job: Job) -> list[Card]:
    return list(Card.objects.filter(allocations__job=job).select_related("server")
                .order_by("server_id", "slot"))


def test_xid79_marks_the_card_failed_and_proposes_a_spare_on_its_own_server(dgx_cluster):
    job = job_on(dgx_cluster, 4)
    failed = held(job)[0]
    rem = healing.handle_failure(failed.pk, "xid79", 101, detail="XID 79")
    assert rem is not None and rem.state == RemediationStateChoices.PROPOSED
    assert Card.objects.get(pk=failed.pk).status == CardStatusChoices.FAILED
    assert list(rem.jobs.values_list("pk", flat=True)) == [job.pk]
    entry = rem.proposal["jobs"][0]
    spare = entry["spare"]
    assert entry["action"] == "spare" and spare["scope"] == "server"
    assert spare["server"] == failed.server_id and spare["card"] not in {c.pk for c in held(job)}
    assert rem.proposal["applicable"] is True
    # propose only (the default policy): nothing moved yet
    assert Allocation.objects.filter(job=job, card=failed).exists()


def test_a_full_server_gets_a_rail_aligned_spare_in_its_supernode(dgx_cluster):
    job = job_on(dgx_cluster, 8)
    failed = held(job)[3]
    rem = healing.handle_failure(failed.pk, "ecc", 7, detail="2 uncorrectable ECC errors")
    spare = rem.proposal["jobs"][0]["spare"]
    assert spare["scope"] == "supernode" and spare["server"] != failed.server_id
    assert spare["supernode"] == failed.supernode_id
    assert spare["slot"] == failed.slot and spare["rail_aligned"] is True


def test_no_spare_in_the_supernode_the_proposal_says_so_and_apply_fails(dgx_cluster):
    dgx_cluster.self_healing = SelfHealingChoices.APPLY
    dgx_cluster.save()
    total = Card.objects.filter(supernode__cluster=dgx_cluster).count()
    job = job_on(dgx_cluster, total, name="everything")
    failed = held(job)[10]
    rem = healing.handle_failure(failed.pk, "silent", 5, detail="no telemetry for 12 s")
    entry = rem.proposal["jobs"][0]
    assert entry["action"] == "none" and entry["spare"] is None
    assert "no free card" in entry["note"] and rem.proposal["applicable"] is False
    assert entry["restore_s"] == pytest.approx(Recovery().restart_s)
    rem.refresh_from_db()
    assert rem.state == RemediationStateChoices.FAILED and "no spare" in rem.message
    assert Allocation.objects.filter(job=job, card=failed).exists()


def test_policy_apply_moves_the_share_in_one_go_and_nothing_twice(dgx_cluster):
    dgx_cluster.self_healing = SelfHealingChoices.APPLY
    dgx_cluster.save()
    job = job_on(dgx_cluster, 8)
    failed = held(job)[0]
    rem = healing.handle_failure(failed.pk, "xid79", 42)
    rem.refresh_from_db()
    assert rem.state == RemediationStateChoices.APPLIED and rem.applied_via == "policy"
    spare = rem.proposal["jobs"][0]["spare"]["card"]
    assert not Allocation.objects.filter(card=failed).exists()
    moved = Allocation.objects.get(job=job, card_id=spare)
    assert moved.full_clean() is None  # still a valid allocation under the capacity rules
    assert Allocation.objects.filter(job=job).count() == 8
    assert "moved off failed card" in Job.objects.get(pk=job.pk).message
    # the same reading again (same episode), a new episode on the failed card: nothing
    assert healing.handle_failure(failed.pk, "xid79", 42) is None
    assert healing.handle_failure(failed.pk, "ecc", 43) is None
    assert Remediation.objects.count() == 1
    assert Allocation.objects.filter(job=job).count() == 8


def test_restart_point_and_lost_work_from_the_checkpoints(dgx_cluster):
    job = job_on(dgx_cluster, 8, checkpoint_interval_s=600, model_params=70e9)
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(started=now - dt.timedelta(seconds=1500))
    job.refresh_from_db()
    entry = healing.propose(held(job)[0], "xid79", now)["jobs"][0]
    assert entry["restart_point"] == "checkpoint"
    assert entry["lost_work_s"] == pytest.approx(300.0)  # 1500 s since start, every 600 s
    assert entry["restore_s"] > Recovery().swap_s  # + reading the 70 B model's shard back
    assert "pfs" in entry["restore"]  # the spare is on another server: the file system
    assert entry["lost_card_hours"] == pytest.approx((300 + entry["restore_s"]) * 8 / 3600,
                                                     rel=1e-3)
    Job.objects.filter(pk=job.pk).update(last_checkpoint_at=now - dt.timedelta(seconds=42))
    job.refresh_from_db()
    assert healing.propose(held(job)[0], "xid79", now)["jobs"][0]["lost_work_s"] == \
        pytest.approx(42.0)
    Job.objects.filter(pk=job.pk).update(last_checkpoint_at=None, checkpoint_interval_s=None)
    entry = healing.propose(held(job)[0], "xid79", now)["jobs"][0]
    assert entry["restart_point"] == "start" and entry["lost_work_s"] == pytest.approx(1500.0)


def test_a_link_fault_is_rerouted_and_the_card_stays_in_service(dgx_cluster):
    job = job_on(dgx_cluster, 2)
    card = held(job)[0]
    rem = healing.handle_failure(card.pk, "link", 9, detail="link latency 900 ns")
    assert rem.proposal["jobs"][0]["action"] == "reroute"
    assert rem.proposal["jobs"][0]["lost_work_s"] == 0.0
    assert Card.objects.get(pk=card.pk).status == CardStatusChoices.OK
    assert healing.handle_failure(card.pk, "link", 10) is None  # one open proposal per card


def test_operator_apply_and_reject(dgx_cluster):
    a, b = job_on(dgx_cluster, 8, name="a"), job_on(dgx_cluster, 8, name="b")
    first = healing.handle_failure(held(a)[0].pk, "xid79", 1)
    second = healing.handle_failure(held(b)[0].pk, "xid79", 2)
    applied = healing.apply(first)
    assert applied.state == RemediationStateChoices.APPLIED and applied.applied_via == "operator"
    rejected = healing.reject(second, reason="replacing the server")
    assert rejected.state == RemediationStateChoices.REJECTED
    assert Allocation.objects.filter(job=b, card=held(b)[0]).exists()
    with pytest.raises(Exception, match="only a proposed one"):
        healing.apply(second)


def test_a_spare_taken_after_the_proposal_fails_the_apply_with_the_reason(dgx_cluster):
    job = job_on(dgx_cluster, 8)
    rem = healing.handle_failure(held(job)[0].pk, "xid79", 3)
    spare = Card.objects.get(pk=rem.proposal["jobs"][0]["spare"]["card"])
    Card.objects.filter(pk=spare.pk).update(status=CardStatusChoices.MAINTENANCE)
    out = healing.apply(rem)
    assert out.state == RemediationStateChoices.FAILED and "maintenance" in out.message
    assert Allocation.objects.filter(job=job).count() == 8


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_two_workers_handling_one_failure_write_one_remediation(dgx_cluster):
    dgx_cluster.self_healing = SelfHealingChoices.APPLY
    dgx_cluster.save()
    job = job_on(dgx_cluster, 8)
    failed = held(job)[0].pk
    barrier = threading.Barrier(2)
    results: list[Any] = []

    def worker() -> None:
        try:
            barrier.wait()
            results.append(healing.handle_failure(failed, "xid79", 77))
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(r is not None for r in results) == 1
    assert Remediation.objects.filter(card_id=failed).count() == 1
    assert Allocation.objects.filter(job=job).count() == 8


def test_every_job_sharing_the_failed_card_gets_a_place(dgx_cluster):
    dgx_cluster.self_healing = SelfHealingChoices.APPLY
    dgx_cluster.save()
    a = job_on(dgx_cluster, 1, name="half-a", share_milli=500)
    b = job_on(dgx_cluster, 1, name="half-b", share_milli=500)
    card = held(a)[0]
    assert held(b)[0].pk == card.pk  # best-fit shares the card
    rem = healing.handle_failure(card.pk, "ecc", 11)
    rem.refresh_from_db()
    assert rem.state == RemediationStateChoices.APPLIED
    assert sorted(e["job"] for e in rem.proposal["jobs"]) == sorted([a.pk, b.pk])
    for job in (a, b):
        moved = Allocation.objects.get(job=job)
        assert moved.card_id != card.pk and moved.share_milli == 500
        moved.full_clean()  # the spare holds at most one card's worth
    assert not Allocation.objects.filter(card=card).exists()
