"""Live power capping per cluster: the policy (off / propose / apply, and how a cut is
shared) and the audit trail of what the controller decided (``twin.facility.capping_live``)."""
from __future__ import annotations

from django.db import models
from django.db.models import Q

from twin.core.models import TimestampedModel

__all__ = ["CapEvent", "CappingPolicy"]

MODES = (("off", "Off"), ("propose", "Propose (caps computed, not served)"),
         ("apply", "Apply (caps served to agents)"))
SHARES = (("uniform", "Uniform"), ("priority", "By job priority"),
          ("thermal", "By thermal headroom"))


class CappingPolicy(TimestampedModel):
    """How a cluster caps its cards live. ``off`` (the default for a cluster without a
    row) changes nothing; ``propose`` computes and records caps without serving them;
    ``apply`` serves them to agents as binding."""

    cluster = models.OneToOneField("hardware.Cluster", on_delete=models.CASCADE,
                                   related_name="capping_policy")
    mode = models.CharField(max_length=10, choices=MODES, default="off")
    policy = models.CharField(max_length=10, choices=SHARES, default="uniform",
                              help_text="How a group over its limit shares the cut.")

    class Meta:
        ordering = ["cluster_id"]
        verbose_name_plural = "capping policies"
        constraints = [
            models.CheckConstraint(condition=Q(mode__in=[m for m, _ in MODES]),
                                   name="capping_policy_mode_valid"),
            models.CheckConstraint(condition=Q(policy__in=[p for p, _ in SHARES]),
                                   name="capping_policy_policy_valid"),
        ]

    def __str__(self) -> str:
        return f"capping {self.mode} ({self.policy}) on cluster {self.cluster_id}"


class CapEvent(TimestampedModel):
    """One change of the binding set of limits: which limits bound, the caps' summary,
    the throughput they cost, proposed or applied (by the cluster's policy). One row
    per cluster and tick (``tick_ts``): a retried tick writes nothing twice."""

    cluster = models.ForeignKey("hardware.Cluster", on_delete=models.CASCADE,
                                related_name="cap_events")
    tick_ts = models.FloatField(help_text="The tick's time (Unix seconds).")
    mode = models.CharField(max_length=10, choices=MODES[1:])
    policy = models.CharField(max_length=10, choices=SHARES)
    binding = models.CharField(max_length=300, blank=True,
                               help_text="The limits that bind: rack, power, site, thermal.")
    summary = models.JSONField(default=dict, blank=True)
    cards_capped = models.IntegerField(default=0)
    capped_w = models.FloatField(default=0.0, help_text="Σ caps over capped cards (W).")
    throughput_lost = models.FloatField(
        default=0.0, help_text="Share of the cards' throughput the caps cost (DVFS curve).")

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "tick_ts"], name="cap_event_one_per_tick"),
            models.CheckConstraint(condition=Q(mode__in=["propose", "apply"]),
                                   name="cap_event_mode_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.mode} caps on cluster {self.cluster_id}: {self.binding or 'none'}"
