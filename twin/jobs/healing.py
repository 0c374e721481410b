"""Self-healing: a failed card's jobs moved to a spare in the same scale-up domain.

Live telemetry (``twin.telemetry.processing.failures``) calls :func:`handle_failure`
with a card, a cause (``FailureCauseChoices``) and the episode — the id of the open
alert that reported it. In one transaction, under the card row's lock:

1. the card is marked ``failed`` (a queryset update: no signal, so the live
   layout is not rebuilt for a status change) unless the cause is a network
   fault (``link``: the card keeps working, its traffic is re-routed);
2. its jobs are read from their allocations;
3. a remediation is proposed (:func:`propose`): for each job on the card, a spare
   found by the jobs app's placement (``simulation.scheduling.place`` with the
   job's request for one card of its share, ``topology-aware``) on the capacity
   of the card's **own server** first (the same NVLink/scale-up island), else of
   its **supernode** — rail-aligned first (the same slot, so the job's servers
   still hold the same card slots), then any slot; with the restart point (its
   last checkpoint) and the expected lost work and restore time (below). No
   spare in either: the proposal says so;
4. if the cluster's policy (``Cluster.self_healing``) is ``apply``, it is applied
   at once (:func:`apply`): each job's allocation moves to its spare (validated
   under the spare's and its server's locks, as every allocation is), the alert
   is closed as remediated (the closers telemetry registers with
   :func:`on_decided`), the remediation is marked applied;
5. the unique ``(card, episode)`` constraint and the card lock make a repeat of
   the same reading — or two workers handling it at once — a no-op.

Lost work and restore. A job restarts from its last checkpoint: ``last_checkpoint_at``
when the job reports it, else the last multiple of ``checkpoint_interval_s`` since
it started (checkpoints every interval), else from its start. The work lost is the
time since then (Young, "A first order approximation to the optimum checkpoint
interval", CACM 1974: on average half an interval). The restore is a hot-spare
swap (``simulation.resilience.Recovery.swap_s``) plus reading the job's
checkpoint shard back (``simulation.resilience.checkpoint_times`` from the
model's size, ``model_params``): from host DRAM when the spare is on the same
server, else from the first tier that survives the loss of a host (the
parallel file system). Without a spare the job waits for a cold restart
(``Recovery.restart_s``).
"""
from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from twin.hardware.choices import CardStatusChoices, SelfHealingChoices
from twin.jobs.choices import (
    FailureCauseChoices,
    JobStateChoices,
    RemediationActionChoices,
    RemediationStateChoices,
)
from twin.jobs.constants import UNAVAILABLE_CARD_STATES
from twin.jobs.models import Allocation, Job, Remediation

__all__ = ["HEAL_POLICY", "apply", "handle_failure", "on_decided", "propose", "reject"]

log = logging.getLogger(__name__)

HEAL_POLICY = "topology-aware"
"""The placement policy spares are chosen with (compact, rail-aligned placement)."""

_listeners: list[Callable[[Remediation, str], None]] = []


def on_decided(listener: Callable[[Remediation, str], None]) -> Callable[[Remediation, str], None]:
    """Register ``listener(remediation, event)``, called inside the transaction that
    proposes (``event`` = "proposed"), applies, rejects or fails a remediation.

    A higher layer hooks in here (telemetry closes the alert as remediated and, on
    commit, publishes ``remediation.event`` to the cluster's Channels group), so
    this app never imports it."""
    _listeners.append(listener)
    return listener


def _notify(rem: Remediation, event: str) -> None:
    for listener in _listeners:
        listener(rem, event)


# -- the proposal --------------------------------------------------------------


def _restart_point(job: Job, now: dt.datetime) -> tuple[dt.datetime | None, str]:
    """(when the job restarts from, what that is): see the module docstring."""
    if job.last_checkpoint_at is not None and job.last_checkpoint_at <= now:
        return job.last_checkpoint_at, "checkpoint"
    if job.started is None:
        return None, "none"
    interval = job.checkpoint_interval_s
    if interval:
        done = int((now - job.started).total_seconds() // interval)
        if done >= 1:
            return job.started + dt.timedelta(seconds=done * interval), "checkpoint"
    return job.started, "start"


def _restore(job: Job, same_server: bool, cards_per_server: int) -> tuple[float, str]:
    """(restore seconds, how): hot-spare swap + reading the checkpoint shard back."""
    from simulation.resilience import Recovery, checkpoint_size, checkpoint_times

    swap = Recovery().swap_s
    if not job.model_params:
        return swap, "hot-spare swap (model size unknown: no checkpoint read priced)"
    cards = max(1, int(job.cards))
    tp = min(cards, max(1, cards_per_server))
    size = checkpoint_size(float(job.model_params), tp=tp, dp=max(1, cards // tp), zero=1)
    times = checkpoint_times(size, cards=cards, cards_per_server=max(1, cards_per_server))
    from simulation.resilience import DGX_H100_TIERS

    tier = DGX_H100_TIERS[0] if same_server else next(
        t for t in DGX_H100_TIERS if t.survives_host_loss)
    return swap + times.restore_one_s[tier.name], f"hot-spare swap + checkpoint from {tier.name}"


def _spare(card: Any, job: Job, share: int, taken: dict[tuple[int, int], int]
           ) -> tuple[Any, str, bool] | None:
    """(spare card row, scope, rail aligned) for one card of ``job`` at ``share`` ‰, or None.

    The jobs app's placement (``simulation.scheduling.place``) on the capacity of the
    card's server, then of its supernode (the same slot first: rail-aligned)."""
    from simulation.scheduling import Nodes, place
    from twin.hardware.models import Card
    from twin.jobs.capacity import live_capacity
    from twin.jobs.constants import FULL_CARD
    from twin.jobs.scheduler import job_request

    request = {**job_request(job), "num_gpu": 1, "gpu_milli": int(share)}
    scopes = (("server", {"server_id": card.server_id}, False),
              ("supernode", {"supernode_id": card.supernode_id}, True),
              ("supernode", {"supernode_id": card.supernode_id}, False))
    reads: dict[str, Any] = {}
    for scope, narrow, rail in scopes:
        live = reads.get(scope) or live_capacity(job.cluster_id, **narrow)
        reads[scope] = live
        if not live.server_ids:
            continue
        node_of = live.node_of_server
        records = [dict(r) for r in live.records]
        if rail:  # only the failed card's slot on every server: its rail
            for rec in records:
                rec["failed_gpus"] = sorted(set(rec["failed_gpus"])
                                            | (set(range(rec["gpus"])) - {card.slot}))
        used = {k: v / FULL_CARD for k, v in live.used_milli().items()}
        for (server_id, slot), milli in taken.items():
            if server_id in node_of:
                key = (node_of[server_id], slot)
                used[key] = used.get(key, 0.0) + milli / FULL_CARD
        tenants: dict[int, int] = {}
        for other, pieces in live.allocations.items():
            if other == job.pk:
                continue
            for node in {n for n, _, _ in pieces}:
                tenants[node] = tenants.get(node, 0) + 1
        got = place(Nodes.from_records(records), request, HEAL_POLICY, used=used,
                    tenants=tenants)
        if not got:
            continue
        node, slot, _ = got[0]
        target = (Card.objects.select_related("server", "supernode")
                  .get(server_id=live.server_ids[int(node)], slot=int(slot)))
        return target, scope, rail or int(slot) == card.slot
    return None


def propose(card: Any, cause: str, now: dt.datetime | None = None) -> dict[str, Any]:
    """The remediation of ``card`` failing by ``cause`` (plain JSON; see the module doc)."""
    now = now or timezone.now()
    allocations = list(Allocation.objects.filter(card=card, job__state=JobStateChoices.RUNNING)
                       .select_related("job", "job__accelerator").order_by("job_id"))
    cps = int(card.server.cards_per_server)
    taken: dict[tuple[int, int], int] = {}
    entries = []
    for alloc in allocations:
        job = alloc.job
        restart_at, point = _restart_point(job, now)
        lost_s = max(0.0, (now - restart_at).total_seconds()) if restart_at else 0.0
        entry: dict[str, Any] = {
            "job": job.pk, "name": job.name, "tenant": job.tenant, "cards": int(job.cards),
            "share_milli": int(alloc.share_milli), "vf_index": int(alloc.vf_index),
            "spare": None}
        if cause == FailureCauseChoices.LINK:
            entry.update(action=RemediationActionChoices.REROUTE, restart_point="none",
                         restart_from=None, lost_work_s=0.0, restore_s=0.0,
                         restore="none: the collectives re-route around the slow links",
                         lost_card_hours=0.0)
            entries.append(entry)
            continue
        found = _spare(card, job, int(alloc.share_milli), taken)
        if found is None:
            from simulation.resilience import Recovery

            restore_s, how = Recovery().restart_s, "cold restart once capacity frees"
            entry["action"] = RemediationActionChoices.NONE
            entry["note"] = (f"no free card for {alloc.share_milli} ‰ in server "
                             f"{card.server} or supernode {card.supernode}")
        else:
            target, scope, rail = found
            taken[target.server_id, target.slot] = (taken.get((target.server_id, target.slot), 0)
                                                    + int(alloc.share_milli))
            restore_s, how = _restore(job, target.server_id == card.server_id, cps)
            entry["action"] = RemediationActionChoices.SPARE
            entry["spare"] = {"card": target.pk, "serial": target.serial,
                              "server": target.server_id, "slot": int(target.slot),
                              "supernode": target.supernode_id, "scope": scope,
                              "rail_aligned": bool(rail)}
        entry.update(
            restart_point=point,
            restart_from=restart_at.isoformat() if restart_at else None,
            lost_work_s=round(lost_s, 3), restore_s=round(restore_s, 3), restore=how,
            lost_card_hours=round((lost_s + restore_s) * int(job.cards) / 3600.0, 4))
        entries.append(entry)
    moved = sum(1 for e in entries if e["action"] == RemediationActionChoices.SPARE)
    stuck = sum(1 for e in entries if e["action"] == RemediationActionChoices.NONE)
    if not entries:
        summary = "no job on the card: take it out of service"
    elif cause == FailureCauseChoices.LINK:
        summary = f"re-route {len(entries)} job(s) around the card's links"
    else:
        summary = f"move {moved} job(s) to spare cards" + (
            f"; {stuck} job(s) have no spare in the server or supernode" if stuck else "")
    return {"cause": cause, "card": card.pk, "serial": card.serial, "server": card.server_id,
            "slot": int(card.slot), "supernode": card.supernode_id, "policy": HEAL_POLICY,
            "computed_at": now.isoformat(), "jobs": entries, "summary": summary,
            "applicable": stuck == 0}


# -- detection → proposal → (policy) apply ----------------------------------------


def handle_failure(card_id: int, cause: str, episode: int, *, detail: str = "",
                   reading_at: dt.datetime | None = None) -> Remediation | None:
    """Mark, propose and (by policy) apply, in one transaction; None if this card's
    episode was already handled (or the card is already out of service)."""
    from twin.hardware.models import Card

    if cause not in FailureCauseChoices.values():
        raise ValueError(f"unknown cause {cause!r}")
    with transaction.atomic():
        card = (Card.objects.select_for_update().select_related("server", "supernode__cluster")
                .filter(pk=card_id).first())
        if card is None:
            return None
        if Remediation.objects.filter(card=card, episode=episode).exists():
            return None
        if cause in FailureCauseChoices.CARD_FAILED:
            if card.status in UNAVAILABLE_CARD_STATES:
                return None
            Card.objects.filter(pk=card.pk).update(status=CardStatusChoices.FAILED,
                                                   last_updated=timezone.now())
            card.status = CardStatusChoices.FAILED
        elif Remediation.objects.filter(card=card, cause=cause,
                                        state=RemediationStateChoices.PROPOSED).exists():
            return None
        now = timezone.now()
        proposal = propose(card, cause, now)
        cluster = card.supernode.cluster
        try:
            with transaction.atomic():
                rem = Remediation.objects.create(
                    cluster=cluster, card=card, cause=cause, detail=detail[:300],
                    episode=episode, proposal=proposal, detected_at=now, reading_at=reading_at,
                    message=proposal["summary"][:300])
        except IntegrityError:
            return None  # another worker wrote this episode first
        rem.jobs.set([e["job"] for e in proposal["jobs"]])
        _notify(rem, "proposed")
        if cluster.self_healing == SelfHealingChoices.APPLY:
            _apply_locked(rem, user=None, via="policy")
    return rem


def apply(rem: Remediation, *, user: Any = None, via: str = "operator") -> Remediation:
    """Apply a proposed remediation (the operator's action): raises ValidationError if
    it is no longer proposed."""
    with transaction.atomic():
        row = Remediation.objects.select_for_update().get(pk=rem.pk)
        if row.state != RemediationStateChoices.PROPOSED:
            raise ValidationError({"state": f"Remediation {row.pk} is {row.state}: only a "
                                            f"proposed one can be applied."})
        _apply_locked(row, user=user, via=via)
    return row


def reject(rem: Remediation, *, user: Any = None, reason: str = "") -> Remediation:
    """Decline a proposed remediation (nothing moves; the card stays out of service)."""
    with transaction.atomic():
        row = Remediation.objects.select_for_update().get(pk=rem.pk)
        if row.state != RemediationStateChoices.PROPOSED:
            raise ValidationError({"state": f"Remediation {row.pk} is {row.state}: only a "
                                            f"proposed one can be rejected."})
        row.state = RemediationStateChoices.REJECTED
        row.decided_at = timezone.now()
        row.applied_by = user if user is not None and user.is_authenticated else None
        row.applied_via = "operator"
        row.message = (f"rejected{': ' + reason if reason else ''}")[:300]
        row.save()
        _notify(row, "rejected")
    return row


def _apply_locked(rem: Remediation, *, user: Any, via: str) -> None:
    """Move each job's allocation to its spare (under the spare's locks), in the
    caller's transaction; mark the remediation applied, or failed with the reason."""
    from twin.hardware.models import Card, Server

    proposal = rem.proposal or {}
    entries = proposal.get("jobs", [])
    stuck = [e for e in entries if e.get("action") == RemediationActionChoices.NONE]
    rem.decided_at = timezone.now()
    rem.applied_by = user if user is not None and getattr(user, "is_authenticated", False) \
        else None
    rem.applied_via = via
    if stuck:
        rem.state = RemediationStateChoices.FAILED
        rem.message = (f"not applied: {len(stuck)} job(s) have no spare card in the server "
                       f"or supernode")[:300]
        rem.save()
        _notify(rem, "failed")
        return
    moves = [e for e in entries if e.get("action") == RemediationActionChoices.SPARE]
    try:
        with transaction.atomic():
            spares = sorted({e["spare"]["card"] for e in moves})
            servers = sorted({e["spare"]["server"] for e in moves})
            list(Server.objects.select_for_update().filter(pk__in=servers).order_by("pk")
                 .values_list("pk", flat=True))
            cards = {c.pk: c for c in Card.objects.select_for_update()
                     .select_related("server", "supernode").filter(pk__in=spares).order_by("pk")}
            for e in moves:
                alloc = (Allocation.objects.select_related("job")
                         .filter(job_id=e["job"], card_id=rem.card_id).first())
                if alloc is None:
                    raise ValidationError({"job": f"Job {e['job']} no longer holds card "
                                                  f"{rem.card_id}."})
                target = cards.get(e["spare"]["card"])
                if target is None:
                    raise ValidationError({"card": f"Spare card {e['spare']['card']} is gone."})
                alloc.card = target
                alloc.vf_index = _vf_for(alloc.job, target)
                alloc.full_clean()
                alloc.save()
                Job.objects.filter(pk=alloc.job_id).update(
                    message=f"moved off failed card {proposal.get('serial', rem.card_id)} to "
                            f"{target.serial} (remediation {rem.pk})"[:300],
                    last_updated=timezone.now())
    except ValidationError as exc:
        rem.state = RemediationStateChoices.FAILED
        rem.message = f"not applied: {'; '.join(exc.messages)}"[:300]
        rem.save()
        _notify(rem, "failed")
        return
    if rem.cause in FailureCauseChoices.CARD_FAILED:  # out of service (a link fault is not)
        Card.objects.filter(pk=rem.card_id).exclude(
            status__in=UNAVAILABLE_CARD_STATES).update(status=CardStatusChoices.FAILED)
    rem.state = RemediationStateChoices.APPLIED
    rem.message = (f"applied: {len(moves)} job(s) moved to spare cards"
                   if moves else proposal.get("summary", "applied"))[:300]
    rem.save()
    _notify(rem, "applied")
    jobs = [e["job"] for e in moves]
    if jobs:
        transaction.on_commit(lambda: _refresh_placement(jobs))


def _vf_for(job: Job, target: Any) -> int:
    """The SR-IOV VF the job uses on the spare's server: its own there, else the lowest free."""
    rows = list(Allocation.objects.filter(card__server_id=target.server_id)
                .values_list("job_id", "vf_index"))
    mine = {vf for j, vf in rows if j == job.pk}
    if mine:
        return min(mine)
    used = {vf for _, vf in rows}
    free = next((i for i in range(int(target.server.vf_limit)) if i not in used), None)
    if free is None:
        raise ValidationError({"vf_index": f"Server {target.server} has no free virtual "
                                           f"function."})
    return free


def _refresh_placement(job_ids: list[int]) -> None:
    """Re-count the moved jobs' spans (servers, supernodes, rail alignment) after the
    commit. The predicted AllReduce is kept from the job's placement, with a note: it
    routes on the whole cluster's graph (seconds at 65,536 cards), which the worker
    that heals must not spend before the next failure."""
    from twin.hardware.models import Card
    from twin.jobs.quality import placement_spans
    from twin.jobs.scheduler import _card_place

    for job in Job.objects.filter(pk__in=job_ids, state=JobStateChoices.RUNNING):
        cards = Card.objects.filter(allocations__job=job).select_related(
            "server", "supernode").order_by("pk")
        placement = {**(job.placement or {}), **placement_spans([_card_place(c) for c in cards])}
        if placement.get("allreduce_s") is not None:
            placement["allreduce_note"] = ("predicted before a card was replaced by "
                                           "self-healing")
        Job.objects.filter(pk=job.pk).update(placement=placement)
