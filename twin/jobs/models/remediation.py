"""The audit trail of self-healing: what failed, why, what the twin proposed and did.

One row per failure episode of a card: ``episode`` is the id of the open alert
that reported it (``twin.telemetry``'s xid/ecc/stale/link alert), so the same
failure read twice, or by two workers at once, finds the row the first one
wrote — the unique constraint on ``(card, episode)`` refuses a second, and
``twin.jobs.healing`` locks the card row (``select_for_update``) before it
checks. ``proposal`` is the plain JSON the operator sees and applies: per job
the action (spare card, re-route, none), the target card, the restart point and
the expected lost work (see ``twin.jobs.healing``).
"""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from twin.core.models import TimestampedModel
from twin.jobs.choices import FailureCauseChoices, RemediationStateChoices

__all__ = ["Remediation"]


class Remediation(TimestampedModel):
    """A remediation of one card failure: proposed, then applied, rejected or failed."""

    cluster = models.ForeignKey("hardware.Cluster", on_delete=models.CASCADE,
                                related_name="remediations")
    card = models.ForeignKey("hardware.Card", on_delete=models.CASCADE,
                             related_name="remediations")
    cause = models.CharField(max_length=10, choices=FailureCauseChoices.choices(),
                             db_index=True)
    detail = models.CharField(max_length=300, blank=True,
                              help_text="The reading that showed it (e.g. XID 79).")
    episode = models.BigIntegerField(
        help_text="The id of the alert that reported this failure: one remediation per "
                  "card and episode.")
    jobs = models.ManyToManyField("jobs.Job", blank=True, related_name="remediations",
                                  help_text="The jobs that held the card.")
    proposal = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=10, choices=RemediationStateChoices.choices(),
                             default=RemediationStateChoices.PROPOSED, db_index=True)
    detected_at = models.DateTimeField(help_text="When the failing reading was processed.")
    reading_at = models.DateTimeField(null=True, blank=True,
                                      help_text="When the card last reported (the reading).")
    decided_at = models.DateTimeField(null=True, blank=True)
    applied_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                   null=True, blank=True, related_name="+")
    applied_via = models.CharField(
        max_length=40, blank=True,
        help_text="What decided it: 'policy' (the cluster applies automatically) or "
                  "'operator'.")
    message = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["card", "episode"],
                                    name="remediation_one_per_episode"),
            models.CheckConstraint(condition=Q(state__in=RemediationStateChoices.values()),
                                   name="remediation_state_valid"),
            models.CheckConstraint(condition=Q(cause__in=FailureCauseChoices.values()),
                                   name="remediation_cause_valid"),
        ]
        indexes = [models.Index(fields=["cluster", "state"], name="remediation_cluster_state")]

    def __str__(self) -> str:
        return f"{self.get_cause_display()} on card {self.card_id} ({self.state})"

    def as_event(self) -> dict[str, object]:
        """The payload of a ``remediation.event`` message on the cluster's Channels group."""
        return {
            "id": self.pk, "cluster": self.cluster_id, "card": self.card_id,
            "cause": self.cause, "detail": self.detail, "state": self.state,
            "episode": self.episode, "proposal": self.proposal, "message": self.message,
            "detected_at": self.detected_at.isoformat() if self.detected_at else None,
            "decided_at": self.decided_at.isoformat() if self.decided_at else None,
            "applied_via": self.applied_via,
            "applied_by": self.applied_by.get_username() if self.applied_by_id else None,
        }
