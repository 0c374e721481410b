"""A job submitted to the live twin, and the cards it holds (its allocations).

Capacity invariants, checked in ``clean()`` (admin, API and the submit service
alike) and, where one row can say it, by named database constraints:

* a card's shares add up to at most one card (1000 ‰) — cross-row, so
  ``Allocation.clean`` locks the card row (``select_for_update``) before it
  sums the other allocations on it: two submits racing for one card are
  serialised and the second sees the first's share;
* at most ``Server.vf_limit`` jobs share a server (each gets one SR-IOV virtual
  function of its NICs: ``vf_index`` below that limit, one per job and server,
  never another job's) — the server row is locked the same way;
* failed cards (and cards in maintenance) take nothing;
* a gang job runs on all its cards or on none (``Job.clean``); a job that is not
  running holds nothing.

One row cannot express a sum over rows, so the first two are the service's and
``clean()``'s, under those locks; the constraints repeat what one row can say
(a share of 1–1000 ‰, a fraction only of a single card, one allocation per job
and card, a VF index in range).
"""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q, Sum

from twin.core.bounds import bounded
from twin.core.deletion import GuardedDeletion
from twin.core.models import TimestampedModel
from twin.core.validators import printable, printable_constraint
from twin.hardware.constants import MAX_VFS_PER_SERVER
from twin.jobs.choices import JobStateChoices, QosChoices
from twin.jobs.constants import (
    FULL_CARD,
    MAX_DURATION_S,
    MAX_JOB_CARDS,
    MAX_PRIORITY,
    UNAVAILABLE_CARD_STATES,
)

__all__ = ["MAX_GLOBAL_BATCH", "Allocation", "Job"]

MAX_GLOBAL_BATCH = 1 << 24
"""The largest global batch a job may name (the what-if's add_job bound)."""


def _training_model(value: str) -> None:
    """A slug of ``simulation.training.MODELS`` (empty allowed: not a training job)."""
    from simulation.training.models import MODELS

    if value and value not in MODELS:
        raise ValidationError(f"Not a model of the training catalogue: {value!r} "
                              f"(known: {', '.join(MODELS)}).")


class Job(GuardedDeletion, TimestampedModel):
    """Work a tenant submitted to a cluster: whole cards, or a share of one card.

    ``cards`` whole cards (``share_milli`` = 1000), or one card's ``share_milli``
    thousandths (1–999: GPU sharing, as the Alibaba trace's ``gpu_milli``).
    ``placement`` is what the placement gave (servers and supernodes spanned,
    rail alignment, the predicted AllReduce time), set when it starts running.

    A running job holds its cards: deleting it is refused until it is cancelled
    (its allocations are never deleted with it by accident).
    """

    deletion_cascades = False

    cluster = models.ForeignKey("hardware.Cluster", on_delete=models.CASCADE,
                                related_name="jobs")
    name = models.CharField(max_length=100, validators=[printable])
    tenant = models.CharField(max_length=64, db_index=True, validators=[printable],
                              help_text="Who the job runs for (a team, a customer).")
    cards = models.PositiveIntegerField(
        default=1, validators=bounded(1, MAX_JOB_CARDS, "cards"),
        help_text="Whole cards wanted; 1 with a share below 1000 ‰ for a fraction of one.")
    share_milli = models.PositiveSmallIntegerField(
        "Share of a card (‰)", default=FULL_CARD, validators=bounded(1, FULL_CARD, "‰"),
        help_text="Thousandths of one card (1000 = whole cards; 1–999 only with cards = 1).")
    accelerator = models.ForeignKey(
        "hardware.AcceleratorType", on_delete=models.PROTECT, null=True, blank=True,
        related_name="jobs", help_text="The card model wanted; empty: any.")
    qos = models.CharField("QoS", max_length=12, choices=QosChoices.choices(),
                           default=QosChoices.LS)
    priority = models.PositiveSmallIntegerField(
        default=0, validators=bounded(0, MAX_PRIORITY, ""),
        help_text="Higher first when queued jobs are retried.")
    gang = models.BooleanField(default=True, help_text="All its cards at once, or none.")
    duration_s = models.PositiveIntegerField(
        "Expected duration (s)", null=True, blank=True,
        validators=bounded(1, MAX_DURATION_S, "s"))
    policy = models.CharField(max_length=32, blank=True,
                              help_text="The placement policy that placed (or will place) it.")
    state = models.CharField(max_length=10, choices=JobStateChoices.choices(),
                             default=JobStateChoices.QUEUED, db_index=True)
    message = models.CharField(max_length=300, blank=True,
                               help_text="Why it is queued, or how it was placed.")
    placement = models.JSONField(default=dict, blank=True,
                                 help_text="Quality of its placement (set when it starts).")
    submitted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                     null=True, blank=True, related_name="twin_jobs")
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    checkpoint_interval_s = models.PositiveIntegerField(
        "Checkpoint interval (s)", null=True, blank=True,
        validators=bounded(1, MAX_DURATION_S, "s"),
        help_text="How often the job saves a checkpoint (empty: never). Self-healing "
                  "prices the work a failure loses from it.")
    last_checkpoint_at = models.DateTimeField(
        null=True, blank=True,
        help_text="When its last checkpoint finished (empty: assumed every interval since "
                  "it started).")
    model_params = models.FloatField(
        "Model parameters", null=True, blank=True, validators=bounded(1, 1e15, ""),
        help_text="Parameters of the model it trains (e.g. 7e10): sizes its checkpoint, "
                  "hence its restore time after a failure.")
    training_model = models.CharField(
        max_length=40, blank=True, validators=[_training_model],
        help_text="The training catalogue's model it trains (e.g. llama3-70b; "
                  "GET /api/scenarios/kinds/ lists them). A what-if prices its pace on a "
                  "placement and clock with the training model; empty: its expected duration.")
    global_batch = models.PositiveIntegerField(
        "Global batch (sequences)", null=True, blank=True,
        validators=bounded(1, MAX_GLOBAL_BATCH, ""),
        help_text="Sequences per optimizer step (empty: 2 per card, an assumption).")

    class Meta:
        ordering = ["-id"]
        constraints = [
            printable_constraint("name", "job_name_printable"),
            models.CheckConstraint(
                condition=Q(cards__gte=1) & Q(cards__lte=MAX_JOB_CARDS)
                & Q(share_milli__gte=1) & Q(share_milli__lte=FULL_CARD)
                & Q(priority__lte=MAX_PRIORITY) & Q(duration_s__gte=1)
                & Q(duration_s__lte=MAX_DURATION_S),
                name="job_figures_bounded"),
            models.CheckConstraint(
                condition=Q(checkpoint_interval_s__gte=1)
                & Q(checkpoint_interval_s__lte=MAX_DURATION_S)
                & Q(model_params__gte=1) & Q(model_params__lte=1e15),
                name="job_checkpoint_bounded"),
            models.CheckConstraint(
                condition=Q(global_batch__gte=1) & Q(global_batch__lte=MAX_GLOBAL_BATCH),
                name="job_global_batch_bounded"),
            models.CheckConstraint(condition=Q(share_milli=FULL_CARD) | Q(cards=1),
                                   name="job_fraction_of_one_card"),
            models.CheckConstraint(condition=Q(state__in=JobStateChoices.values()),
                                   name="job_state_valid"),
        ]
        indexes = [models.Index(fields=["cluster", "state"], name="job_cluster_state")]

    def __str__(self) -> str:
        return self.name

    @property
    def demand_milli(self) -> int:
        """Thousandths of a card it asks for in all (8 cards = 8000)."""
        return int(self.cards) * int(self.share_milli)

    def deletion_contents(self) -> dict[str, models.QuerySet]:
        return {"allocations": Allocation.objects.filter(job=self)}

    def deletion_refusal_hint(self) -> str:
        return "Cancel it first (POST …/cancel/): that releases its cards."

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.cards is not None and self.share_milli is not None \
                and self.share_milli < FULL_CARD and self.cards != 1:
            errors["share_milli"] = (f"A share of {self.share_milli} ‰ is a fraction of one "
                                     f"card: ask for 1 card, or for whole cards (1000 ‰).")
        if self.pk:
            held = Allocation.objects.filter(job=self).count()
            if self.state != JobStateChoices.RUNNING and held:
                errors["state"] = (f"A {JobStateChoices.label(self.state).lower()} job holds "
                                   f"no cards; it holds {held}.")
            elif self.state == JobStateChoices.RUNNING:
                if held == 0:
                    errors["state"] = "A running job holds at least one card."
                elif self.gang and held != self.cards:
                    errors["gang"] = (f"A gang job runs on all its {self.cards} cards or on "
                                      f"none; it holds {held}.")
                elif held > (self.cards or 0):
                    errors["cards"] = f"It holds {held} cards, more than the {self.cards} asked."
        if errors:
            raise ValidationError(errors)


class Allocation(TimestampedModel):
    """A job's share of one card, and the SR-IOV virtual function it reaches the
    network through on that card's server (one per job and server)."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="allocations")
    card = models.ForeignKey("hardware.Card", on_delete=models.CASCADE,
                             related_name="allocations")
    share_milli = models.PositiveSmallIntegerField(
        "Share (‰)", default=FULL_CARD, validators=bounded(1, FULL_CARD, "‰"))
    vf_index = models.PositiveSmallIntegerField(
        "VF index", default=0, validators=bounded(0, MAX_VFS_PER_SERVER - 1, ""),
        help_text="The SR-IOV virtual function of the card's server this job uses.")

    class Meta:
        ordering = ["job", "card"]
        constraints = [
            models.UniqueConstraint(fields=["job", "card"], name="allocation_unique_card"),
            models.CheckConstraint(
                condition=Q(share_milli__gte=1) & Q(share_milli__lte=FULL_CARD)
                & Q(vf_index__lte=MAX_VFS_PER_SERVER - 1),
                name="allocation_figures_bounded"),
        ]

    def __str__(self) -> str:
        return f"{self.job} on {self.card}"

    def lock_for_capacity(self) -> None:
        """Lock the card's server and the card (in that order, as the submit service
        does) so the sums below stay true until this row commits."""
        from twin.hardware.models import Card, Server

        card = Card.objects.select_for_update().select_related("server").get(pk=self.card_id)
        list(Server.objects.select_for_update().filter(pk=card.server_id).values_list("pk"))
        self.card = card

    def clean(self) -> None:
        if not (self.card_id and self.job_id):
            return
        self.lock_for_capacity()
        errors = capacity_errors(self.job, self.card, self.share_milli, self.vf_index,
                                 exclude=self.pk)
        if errors:
            raise ValidationError(errors)


def capacity_errors(job: Job, card: Any, share: int | None, vf_index: int | None, *,
                    exclude: int | None = None) -> dict[str, str]:
    """Why ``job`` may not take ``share`` ‰ of ``card`` through VF ``vf_index`` (empty: it
    may). Reads the card's and its server's other allocations: call it with both
    rows locked."""
    errors: dict[str, str] = {}
    others = Allocation.objects.filter(card__server_id=card.server_id).exclude(pk=exclude)
    if card.supernode.cluster_id != job.cluster_id:
        errors["card"] = f"Card {card} is not in the job's cluster {job.cluster}."
    if card.status in UNAVAILABLE_CARD_STATES:
        errors["card"] = f"Card {card} is {card.status}: it takes no work."
    if job.accelerator_id and card.accelerator_id != job.accelerator_id:
        errors["card"] = f"Card {card} is not a {job.accelerator}."
    if job.state != JobStateChoices.RUNNING:
        errors["job"] = f"Only a running job holds cards; {job} is {job.state}."
    if share is not None:
        if share != job.share_milli:
            errors["share_milli"] = f"The job asks for {job.share_milli} ‰ of each card."
        used = others.filter(card=card).aggregate(s=Sum("share_milli"))["s"] or 0
        if used + share > FULL_CARD:
            errors["share_milli"] = (f"Card {card} has {FULL_CARD - used} ‰ free; "
                                     f"{share} ‰ does not fit.")
    if vf_index is not None:
        limit = card.server.vf_limit
        if vf_index >= limit:
            errors["vf_index"] = (f"Server {card.server} has {limit} virtual functions "
                                  f"(0–{limit - 1}).")
        tenants = set(others.exclude(job=job).values_list("job_id", flat=True).distinct())
        mine = set(others.filter(job=job).values_list("vf_index", flat=True))
        if not mine and len(tenants) >= limit:
            errors["vf_index"] = (f"Server {card.server} already runs {len(tenants)} jobs, "
                                  f"its limit of SR-IOV virtual functions.")
        elif mine and mine != {vf_index}:
            errors["vf_index"] = (f"The job uses VF {min(mine)} on server {card.server}; all "
                                  f"its cards there share it.")
        elif others.exclude(job=job).filter(vf_index=vf_index).exists():
            errors["vf_index"] = f"VF {vf_index} of server {card.server} is another job's."
    return errors
