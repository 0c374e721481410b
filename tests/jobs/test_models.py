"""The capacity invariants of jobs and allocations: in ``clean()`` and in the database."""
from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from twin.hardware.choices import CardStatusChoices
from twin.jobs.choices import JobStateChoices
from twin.jobs.models import Allocation, Job


def allocate(job: Job, card: Any, share: int = 1000, vf: int = 0) -> Allocation:
    allocation = Allocation(job=job, card=card, share_milli=share, vf_index=vf)
    allocation.full_clean()
    allocation.save()
    return allocation


def errors_of(allocation: Allocation) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as caught:
        allocation.full_clean()
    return caught.value.message_dict


def test_a_cards_shares_add_up_to_at_most_one(tiny_cluster, running) -> None:
    card = tiny_cluster["cards"][0]
    allocate(running("a", share=600), card, 600, vf=0)
    allocate(running("b", share=400), card, 400, vf=1)  # exactly one card: fine
    third = running("c", share=1)
    errors = errors_of(Allocation(job=third, card=card, share_milli=1, vf_index=2))
    assert "has 0 ‰ free" in errors["share_milli"][0]
    whole = running("d")
    errors = errors_of(Allocation(job=whole, card=card, share_milli=1000, vf_index=3))
    assert "share_milli" in errors


def test_at_most_vf_limit_jobs_per_server(tiny_cluster, running) -> None:
    server = tiny_cluster["server"]
    server.vf_limit = 2
    server.save()
    cards = tiny_cluster["cards"]
    allocate(running("a"), cards[0], vf=0)
    allocate(running("b"), cards[1], vf=1)
    errors = errors_of(Allocation(job=running("c"), card=cards[2], vf_index=0))
    assert "already runs 2 jobs" in errors["vf_index"][0]
    server.vf_limit = 3
    server.save()
    errors = errors_of(Allocation(job=running("d"), card=cards[3], vf_index=5))
    assert "has 3 virtual functions (0–2)" in errors["vf_index"][0]


def test_a_job_keeps_one_vf_per_server_and_never_takes_anothers(tiny_cluster, running) -> None:
    cards = tiny_cluster["cards"]
    mine = running("mine", cards=2)
    allocate(mine, cards[0], vf=3)
    assert "uses VF 3" in errors_of(Allocation(job=mine, card=cards[1], vf_index=4))["vf_index"][0]
    allocate(mine, cards[1], vf=3)
    other = running("other")
    assert "another job's" in errors_of(
        Allocation(job=other, card=cards[2], vf_index=3))["vf_index"][0]


@pytest.mark.parametrize("state", [CardStatusChoices.FAILED, CardStatusChoices.MAINTENANCE])
def test_failed_cards_take_nothing(tiny_cluster, running, state: str) -> None:
    card = tiny_cluster["cards"][5]
    card.status = state
    card.save()
    errors = errors_of(Allocation(job=running("a"), card=card))
    assert f"is {state}" in errors["card"][0]


def test_the_wrong_accelerator_or_a_job_not_running_takes_nothing(tiny_cluster, running) -> None:
    from twin.hardware.models import AcceleratorType

    other = AcceleratorType.objects.exclude(pk=tiny_cluster["h100"].pk).first()
    card = tiny_cluster["cards"][0]
    assert "is not a" in errors_of(
        Allocation(job=running("a", accelerator=other), card=card))["card"][0]
    queued = running("q")
    queued.state = JobStateChoices.QUEUED
    queued.save()
    assert "Only a running job" in errors_of(Allocation(job=queued, card=card))["job"][0]


def test_gang_jobs_get_all_or_nothing(tiny_cluster, running) -> None:
    cards = tiny_cluster["cards"]
    gang = running("gang", cards=4, gang=True)
    for card in cards[:2]:
        allocate(gang, card)
    with pytest.raises(ValidationError) as caught:
        gang.full_clean()
    assert "all its 4 cards or on none; it holds 2" in caught.value.message_dict["gang"][0]
    for card in cards[2:4]:
        allocate(gang, card)
    gang.full_clean()
    elastic = running("elastic", cards=4, gang=False)
    allocate(elastic, cards[4], vf=1)
    elastic.full_clean()  # not a gang: part of its cards is fine


def test_a_job_that_is_not_running_holds_nothing(tiny_cluster, running) -> None:
    job = running("a")
    allocate(job, tiny_cluster["cards"][0])
    job.state = JobStateChoices.COMPLETED
    with pytest.raises(ValidationError) as caught:
        job.full_clean()
    assert "holds no cards" in caught.value.message_dict["state"][0]


def test_a_fraction_is_of_one_card_only(tiny_cluster) -> None:
    job = Job(cluster=tiny_cluster["cluster"], name="x", tenant="t", cards=2, share_milli=500)
    with pytest.raises(ValidationError) as caught:
        job.full_clean()
    assert "fraction of one card" in caught.value.message_dict["share_milli"][0]


@pytest.mark.parametrize("fields", [
    {"cards": 2, "share_milli": 500},           # job_fraction_of_one_card
    {"cards": 0},                                # job_figures_bounded
    {"share_milli": 1001},
    {"state": "exploded"},                       # job_state_valid
])
def test_database_constraints_on_jobs(tiny_cluster, fields: dict[str, Any]) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.create(cluster=tiny_cluster["cluster"], name="x", tenant="t",
                           **{"cards": 1, "share_milli": 1000, **fields})


def test_database_constraints_on_allocations(tiny_cluster, running) -> None:
    job = running("a", cards=2)
    card = tiny_cluster["cards"][0]
    with pytest.raises(IntegrityError), transaction.atomic():
        Allocation.objects.create(job=job, card=card, share_milli=1001)
    with pytest.raises(IntegrityError), transaction.atomic():
        Allocation.objects.create(job=job, card=card, vf_index=256)
    Allocation.objects.create(job=job, card=card)
    with pytest.raises(IntegrityError), transaction.atomic():
        Allocation.objects.create(job=job, card=card)  # allocation_unique_card


def test_server_vf_limit_is_bounded(tiny_cluster) -> None:
    server = tiny_cluster["server"]
    assert server.vf_limit == 32
    server.vf_limit = 0
    with pytest.raises(ValidationError) as caught:
        server.full_clean()
    assert "vf_limit" in caught.value.message_dict


def test_a_held_card_and_a_running_job_are_not_deleted_by_accident(tiny_cluster,
                                                                     running) -> None:
    from twin.core.deletion import check_deletion

    job = running("a")
    card = tiny_cluster["cards"][0]
    allocate(job, card)
    assert check_deletion(card, cascade=False, confirm=None).contains["allocations"] == 1
    refused = check_deletion(job, cascade=True, confirm=None)
    assert not refused.allowed and "Cancel it first" in refused.detail
    assert check_deletion(tiny_cluster["cluster"], cascade=False,
                          confirm=None).contains["jobs"] == 1
