"""Submit, place and cancel jobs on the live twin (the one place allocations are written).

``submit`` saves the job, reads the cluster's free capacity
(:func:`twin.jobs.capacity.live_capacity`), asks the placement policy of
``simulation.scheduling.place`` (``topology-aware`` unless the request names
another) where it goes, and writes its allocations — or leaves it ``queued``
with the reason when it does not fit. Allocating locks the chosen servers and
cards (``select_for_update``, in primary-key order, servers first), then every
allocation is validated under those locks (``Allocation.clean``: shares ≤ one
card, the server's VF limit, no failed card) and the job too (gang: all or
nothing). If a concurrent submit took the capacity between the read and the
locks, that validation fails, the savepoint is rolled back and the placement is
computed again from fresh rows (up to :data:`ATTEMPTS` times): two submits racing
for one card never both get it, and the loser is placed elsewhere or queued.

``cancel`` releases a job's allocations and then tries the cluster's queued jobs
(highest priority first, then oldest), so freed cards are used at once.
``finish_due`` (Celery beat, ``CELERY_BEAT_SCHEDULE["jobs-finish"]``) does the same
for running jobs whose expected duration has passed: they complete, their cards
are released and the queue is tried. A job without a duration runs until cancelled.
"""
from __future__ import annotations

import logging
from collections import defaultdict
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from twin.jobs.capacity import LiveCapacity, live_capacity
from twin.jobs.choices import JobStateChoices
from twin.jobs.constants import FULL_CARD
from twin.jobs.models import Allocation, Job
from twin.jobs.quality import CardPlace, placement_quality

__all__ = ["ATTEMPTS", "DEFAULT_POLICY", "cancel", "choose", "finish_due", "place_job",
           "retry_queued", "submit"]

log = logging.getLogger(__name__)

ATTEMPTS = 3
DEFAULT_POLICY = "topology-aware"


def default_policy() -> str:
    return str(getattr(settings, "TWIN_JOBS_POLICY", DEFAULT_POLICY))


def job_request(job: Job) -> dict[str, Any]:
    """The job as ``simulation.scheduling.place`` reads it (``Workload`` column names)."""
    return {"name": job.name, "tenant": job.tenant, "num_gpu": int(job.cards),
            "gpu_milli": int(job.share_milli),
            "gpu_model": job.accelerator.slug if job.accelerator_id else "",
            "gang": bool(job.gang), "priority": int(job.priority), "qos": job.qos,
            "cpu_milli": 0, "memory_mib": 0}


def choose(live: LiveCapacity, job: Job, policy: str) -> list[tuple[int, int, int]] | None:
    """Where ``job`` goes on ``live`` — ``[(node, slot, milli), …]`` — or None.

    ``simulation.scheduling.place`` sees the cards' used shares and each server's
    tenants (one per running job: its SR-IOV virtual function). A gang job (and any
    one-card job) is placed whole or not at all; a job that is not a gang takes as
    many of its cards as fit now, one placement per card.
    """
    from simulation.scheduling import Nodes, place

    nodes = Nodes.from_records(live.records)
    request = job_request(job)
    used: dict[tuple[int, int], float] = {k: v / FULL_CARD for k, v in live.used_milli().items()}
    tenants: dict[int, int] = defaultdict(int)
    for pieces in live.allocations.values():
        for node in {n for n, _, _ in pieces}:
            tenants[node] += 1

    def one(req: dict[str, Any]) -> list[tuple[int, int, int]] | None:
        got = place(nodes, req, policy, used=dict(used), tenants=dict(tenants))
        return None if got is None else [(int(n), int(c), int(round(share * FULL_CARD)))
                                         for n, c, share in got]

    if job.gang or job.cards == 1:
        return one(request)
    pieces: list[tuple[int, int, int]] = []
    single = {**request, "num_gpu": 1}
    for _ in range(int(job.cards)):
        got = one(single)
        if not got:
            break
        for n, c, milli in got:
            used[n, c] = used.get((n, c), 0.0) + milli / FULL_CARD
            if n not in {p[0] for p in pieces}:
                tenants[n] += 1
        pieces += got
    return pieces or None


def _places(live: LiveCapacity, chosen: list[tuple[int, int, int]]) -> list[tuple[Any, int]]:
    """(card row, milli) for each piece, the card rows locked (servers first)."""
    from twin.hardware.models import Card, Server

    wanted = {(live.server_ids[node], slot): milli for node, slot, milli in chosen}
    servers = sorted({sid for sid, _ in wanted})
    list(Server.objects.select_for_update().filter(pk__in=servers).order_by("pk")
         .values_list("pk", flat=True))
    rows = (Card.objects.select_for_update().filter(server_id__in=servers)
            .select_related("server", "supernode").order_by("pk"))
    found = [(card, wanted[card.server_id, card.slot]) for card in rows
             if (card.server_id, card.slot) in wanted]
    if len(found) != len(wanted):
        raise ValidationError({"card": "A chosen card is gone (the cluster changed)."})
    return found


def place_job(job: Job, live: LiveCapacity, chosen: list[tuple[int, int, int]]) -> None:
    """Write ``job``'s allocations for ``chosen`` (locks, validates; raises ValidationError)."""
    placed = _places(live, chosen)
    job.state = JobStateChoices.RUNNING
    job.started = timezone.now()
    job.save()
    vfs: dict[int, int] = {}
    allocations = []
    for card, milli in placed:
        if card.server_id not in vfs:
            vf = live.free_vf(card.server_id, job.pk)
            if vf is None:
                raise ValidationError({"vf_index": f"Server {card.server} has no free virtual "
                                                   f"function."})
            vfs[card.server_id] = vf
        allocation = Allocation(job=job, card=card, share_milli=milli,
                                vf_index=vfs[card.server_id])
        allocation.full_clean()
        allocation.save()
        allocations.append(allocation)
    job.placement = placement_quality(job.cluster_id, [_card_place(c) for c, _ in placed])
    job.policy = job.policy or default_policy()
    job.message = _describe(job)
    job.full_clean()
    job.save()


def _card_place(card: Any) -> CardPlace:
    sn = card.supernode
    return CardPlace(card=card.pk, server=card.server_id, rack=card.server.rack_id,
                     supernode=card.supernode_id, supernode_index=sn.index, fabric=sn.fabric,
                     index=card.index, slot=card.slot, dims=sn.dims, xyz=(card.x, card.y, card.z))


def _describe(job: Job) -> str:
    q = job.placement
    held = q.get("cards", 0)
    if job.share_milli < FULL_CARD:
        return f"placed by {job.policy}: {job.share_milli} ‰ of one card"
    where = (f"{held} card(s) on {q.get('servers')} server(s), {q.get('supernodes')} "
             f"supernode(s)")
    if not job.gang and held < job.cards:
        where += f" ({held} of {job.cards} asked: not a gang job)"
    return f"placed by {job.policy}: {where}"


def _try_place(job: Job, policy: str) -> bool:
    """One placement of a saved queued job; True if it now runs."""
    for attempt in range(ATTEMPTS):
        live = live_capacity(job.cluster_id)
        chosen = choose(live, job, policy)
        if not chosen:
            job.message = (f"queued: no room for {job.cards} card(s)"
                           if job.share_milli == FULL_CARD else
                           f"queued: no card has {job.share_milli} ‰ free") + \
                          f" under {policy} (cards free, healthy, of the right model, " \
                          f"servers under their VF limit)"
            job.save(update_fields=["message", "last_updated"])
            return False
        try:
            with transaction.atomic():
                place_job(job, live, chosen)
            return True
        except ValidationError as exc:
            log.info("job %s: placement %d lost a race (%s); placing again", job.pk,
                     attempt + 1, exc)
            job.state = JobStateChoices.QUEUED
            job.started = None
    job.message = f"queued: the capacity kept changing during {ATTEMPTS} placements"
    job.save(update_fields=["message", "state", "started", "last_updated"])
    return False


def submit(job: Job, user: Any = None, policy: str | None = None) -> Job:
    """Save a validated new ``job`` and place it now if it fits (in the caller's transaction)."""
    job.state = JobStateChoices.QUEUED
    job.submitted_by = user if user is not None and user.is_authenticated else None
    job.policy = policy or job.policy or default_policy()
    job.save()
    _try_place(job, job.policy)
    return job


def cancel(job: Job) -> bool:
    """Cancel a queued or running job and release its cards; then retry the queue.
    False if it had already finished."""
    with transaction.atomic():
        row = Job.objects.select_for_update().filter(pk=job.pk).first()
        if row is None or row.state in JobStateChoices.FINAL:
            return False
        released = row.state == JobStateChoices.RUNNING
        Allocation.objects.filter(job=row).delete()
        row.state = JobStateChoices.CANCELLED
        row.finished = timezone.now()
        row.message = "cancelled" + (": its cards are released" if released else "")
        row.save()
        if released:
            retry_queued(row.cluster_id)
    job.refresh_from_db()
    return True


def finish_due(now: Any = None) -> list[int]:
    """Complete the running jobs past their expected duration (``started + duration_s``
    ≤ ``now``), release their cards, then place the queued jobs that now fit on each
    cluster that freed cards. Returns the completed jobs' ids.

    Each job is completed under its row lock and only if still running, so a cancel
    or a second beat tick racing with this one never completes a job twice.
    """
    now = now or timezone.now()
    running = (Job.objects.filter(state=JobStateChoices.RUNNING, duration_s__isnull=False,
                                  started__lte=now).order_by("id")
               .values_list("id", "started", "duration_s"))
    due = [pk for pk, started, seconds in running
           if started + timedelta(seconds=seconds) <= now]
    done: list[int] = []
    clusters: set[int] = set()
    for job_id in due:
        with transaction.atomic():
            row = Job.objects.select_for_update().filter(
                pk=job_id, state=JobStateChoices.RUNNING).first()
            if row is None:
                continue
            held = Allocation.objects.filter(job=row).delete()[0]
            row.state = JobStateChoices.COMPLETED
            row.finished = now
            row.message = (f"completed after its expected {row.duration_s} s; "
                           f"{held} card allocation(s) released")
            row.save()
            done.append(row.pk)
            clusters.add(row.cluster_id)
    for cluster_id in sorted(clusters):
        retry_queued(cluster_id)
    return done


def retry_queued(cluster_id: int, limit: int = 50) -> list[int]:
    """Place the cluster's queued jobs that fit now (priority, then age); their ids."""
    placed = []
    queued = Job.objects.filter(cluster_id=cluster_id, state=JobStateChoices.QUEUED) \
        .select_related("accelerator").order_by("-priority", "id")[:limit]
    for job in queued:
        if _try_place(job, job.policy or default_policy()):
            placed.append(job.pk)
    return placed
