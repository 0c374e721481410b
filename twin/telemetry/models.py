"""Telemetry rows in the database: agents, scrape targets, alerts, health, 1-minute history.

The *live* state is not here: it is columnar in Redis (``twin.telemetry.state``).
The database keeps what must outlive Redis or be queried: who may send
(agents with hashed tokens), what to pull (scrape targets), what went wrong
(alerts, card health) and a downsampled history with a retention period.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from typing import Any
from urllib.parse import urlsplit

import numpy as np
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone

from twin.core.models import TimestampedModel
from twin.core.validators import printable, printable_constraint
from twin.telemetry.choices import (
    AlertRuleChoices,
    AlertStateChoices,
    HealthChoices,
    ScrapeStatusChoices,
    SeverityChoices,
    SubjectLevelChoices,
)
from twin.telemetry.metrics import METRIC_KEYS

__all__ = [
    "TOKEN_PREFIX",
    "Alert",
    "AlertDelivery",
    "CardHealth",
    "ScrapeTarget",
    "TelemetryAgent",
    "TelemetryMinute",
    "hash_token",
]

TOKEN_PREFIX = "twa_"


def hash_token(token: str) -> str:
    """SHA-256 of a token. Tokens are 256 random bits, so a fast hash is enough
    (a slow password hash protects guessable secrets, not random ones)."""
    return hashlib.sha256(token.encode()).hexdigest()


class TelemetryAgent(TimestampedModel):
    """Something that sends telemetry for one cluster, with its own token.

    Only the token's hash is stored: the token is shown once, when the agent is
    created or its token rotated. A rotation keeps the replaced token working for a
    grace period (``previous_token_*``; ``TWIN_AGENT_TOKEN_GRACE_S`` unless the
    rotation says otherwise), so the agent can be given its new token without a
    gap; a replaced token presented after that is answered 401 naming the rotation
    and remembered (``old_token_refused_at``): ``twin.telemetry.agent_watch`` then
    opens an alert naming the agent. Sequence bookkeeping (``last_sequence``,
    ``gaps``, ``missed_batches``, ``duplicates``) is updated on every batch.
    """

    cluster = models.ForeignKey("hardware.Cluster", on_delete=models.CASCADE,
                                related_name="telemetry_agents")
    name = models.CharField(max_length=100, validators=[printable])
    description = models.CharField(max_length=200, blank=True, validators=[printable])
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    token_hint = models.CharField(max_length=12, editable=False,
                                  help_text="First characters of the token, to tell tokens "
                                            "apart.")
    previous_token_hash = models.CharField(max_length=64, blank=True, db_index=True,
                                           editable=False)
    previous_token_hint = models.CharField(
        max_length=12, blank=True, editable=False,
        help_text="First characters of the token the last rotation replaced.")
    previous_token_expires = models.DateTimeField(
        null=True, blank=True, editable=False,
        help_text="The replaced token works until then (the rotation's grace period).")
    token_rotated_at = models.DateTimeField(null=True, blank=True, editable=False)
    old_token_refused_at = models.DateTimeField(
        null=True, blank=True, editable=False,
        help_text="Last time the replaced token was sent after its grace period.")
    is_active = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                   null=True, blank=True, related_name="+")
    last_sequence = models.BigIntegerField(null=True, blank=True)
    last_seen = models.DateTimeField(null=True, blank=True)
    batches = models.PositiveBigIntegerField(default=0)
    samples = models.PositiveBigIntegerField(default=0, help_text="Card-samples accepted.")
    rejected = models.PositiveBigIntegerField(default=0, help_text="Values rejected.")
    duplicates = models.PositiveBigIntegerField(default=0,
                                                help_text="Batches ignored as repeats.")
    gaps = models.PositiveBigIntegerField(default=0, help_text="Times a sequence number "
                                                               "jumped ahead.")
    missed_batches = models.PositiveBigIntegerField(default=0,
                                                    help_text="Sequence numbers never "
                                                              "received.")
    restarts = models.PositiveIntegerField(default=0, help_text="Times the agent restarted "
                                                                "its sequence at 0 or 1.")

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="agent_unique_name"),
            printable_constraint("name", "agent_name_printable"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.cluster})"

    #: What a rotation changes (``save(update_fields=...)``).
    TOKEN_FIELDS = ("token_hash", "token_hint", "previous_token_hash", "previous_token_hint",
                    "previous_token_expires", "token_rotated_at", "last_updated")

    def set_new_token(self, grace_s: float | None = None) -> str:
        """Give the agent a fresh token and return it (the only time it is readable).

        On a rotation (the agent had a token) the replaced one keeps working for
        ``grace_s`` seconds (default ``TWIN_AGENT_TOKEN_GRACE_S``; 0: at once)."""
        if self.token_hash:
            now = timezone.now()
            grace = settings.TWIN_AGENT_TOKEN_GRACE_S if grace_s is None else grace_s
            self.previous_token_hash, self.previous_token_hint = self.token_hash, self.token_hint
            self.previous_token_expires = now + dt.timedelta(seconds=max(0.0, float(grace)))
            self.token_rotated_at = now
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        self.token_hash = hash_token(token)
        self.token_hint = token[:12]
        return token

    @classmethod
    def issue(cls, cluster: Any, name: str, *, user: Any = None,
              description: str = "") -> tuple[TelemetryAgent, str]:
        """Create an agent and return it with its token."""
        agent = cls(cluster=cluster, name=name, description=description, created_by=user)
        token = agent.set_new_token()
        agent.full_clean()
        agent.save()
        return agent, token


class ScrapeTarget(TimestampedModel):
    """A Prometheus endpoint (e.g. a DCGM exporter at ``http://node:9400/metrics``)
    that the beat task pulls every ``interval_s`` seconds."""

    cluster = models.ForeignKey("hardware.Cluster", on_delete=models.CASCADE,
                                related_name="scrape_targets")
    agent = models.ForeignKey(TelemetryAgent, on_delete=models.SET_NULL, null=True,
                              blank=True, related_name="scrape_targets",
                              help_text="Counts the scraped samples (optional).")
    endpoint = models.CharField(
        max_length=400, help_text="e.g. http://node0:9400/metrics (a short host name is fine).")
    interval_s = models.PositiveIntegerField("Interval (s)", default=15)
    timeout_s = models.FloatField("Timeout (s)", default=5.0)
    enabled = models.BooleanField(default=True)
    last_scraped = models.DateTimeField(null=True, blank=True)
    last_status = models.CharField(max_length=10, choices=ScrapeStatusChoices.choices(),
                                   default=ScrapeStatusChoices.NEVER)
    last_error = models.TextField(blank=True)
    last_accepted = models.PositiveIntegerField(default=0)
    last_rejected = models.PositiveIntegerField(default=0)
    last_duration_ms = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["cluster", "endpoint"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "endpoint"], name="scrape_unique_endpoint"),
            models.CheckConstraint(condition=Q(interval_s__gte=1), name="scrape_interval_min"),
            models.CheckConstraint(condition=Q(timeout_s__gt=0), name="scrape_timeout_pos"),
        ]

    def __str__(self) -> str:
        return self.endpoint

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.endpoint:
            try:
                parts = urlsplit(self.endpoint)
                parts.port  # noqa: B018 - raises on a bad port
            except ValueError:
                parts = None
            if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
                errors["endpoint"] = ("Give an http:// or https:// URL with a host, e.g. "
                                      "http://node0:9400/metrics.")
        if self.interval_s is not None and self.interval_s < 1:
            errors["interval_s"] = "Scrape at most once a second."
        if self.timeout_s is not None and self.interval_s and (
                self.timeout_s <= 0 or self.timeout_s > self.interval_s):
            errors["timeout_s"] = (f"The timeout must be positive and at most the interval "
                                   f"({self.interval_s} s).")
        if self.agent_id and self.cluster_id and self.agent.cluster_id != self.cluster_id:
            errors["agent"] = "The agent belongs to another cluster."
        if errors:
            raise ValidationError(errors)


class AlertQuerySet(models.QuerySet):
    def active(self) -> AlertQuerySet:
        return self.filter(ended__isnull=True)


class Alert(models.Model):
    """One occurrence of a rule firing for one card, rack, supernode or cluster.

    ``ended`` is empty while the condition holds. Opening and closing are damped
    (``twin.telemetry.alerts``): a condition must hold for the rule's minimum
    duration to open, and clear past a hysteresis margin for the clear
    duration to close, so a value wobbling around a threshold does not flap.
    """

    cluster = models.ForeignKey("hardware.Cluster", on_delete=models.CASCADE,
                                related_name="alerts")
    rule = models.CharField(max_length=32, choices=AlertRuleChoices.choices(), db_index=True)
    severity = models.CharField(max_length=10, choices=SeverityChoices.choices(), db_index=True)
    level = models.CharField(max_length=10, choices=SubjectLevelChoices.choices())
    subject = models.CharField(max_length=40, help_text="What fired, e.g. card:123, rack:7.")
    card = models.ForeignKey("hardware.Card", on_delete=models.CASCADE, null=True, blank=True,
                             related_name="alerts")
    rack = models.ForeignKey("hardware.Rack", on_delete=models.CASCADE, null=True, blank=True,
                             related_name="alerts")
    supernode = models.ForeignKey("hardware.SuperNode", on_delete=models.CASCADE, null=True,
                                  blank=True, related_name="alerts")
    value = models.FloatField(null=True, blank=True, help_text="Reading when it opened.")
    peak = models.FloatField(null=True, blank=True, help_text="Worst reading while open.")
    threshold = models.FloatField(null=True, blank=True)
    message = models.CharField(max_length=300)
    started = models.DateTimeField(db_index=True)
    ended = models.DateTimeField(null=True, blank=True, db_index=True)
    acknowledged_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL,
                                        null=True, blank=True, related_name="+")
    acknowledged_at = models.DateTimeField(null=True, blank=True)

    objects = AlertQuerySet.as_manager()

    class Meta:
        ordering = ["-started", "-id"]
        indexes = [models.Index(fields=["cluster", "ended", "severity"],
                                name="alert_cluster_active")]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "rule", "subject"],
                                    condition=Q(ended__isnull=True),
                                    name="alert_one_open_per_subject"),
        ]

    def __str__(self) -> str:
        return f"{self.get_rule_display()} on {self.subject}"

    @property
    def active(self) -> bool:
        return self.ended is None

    def as_event(self) -> dict[str, Any]:
        """The JSON payload of an ``alert.event`` message (see ``state``)."""
        return {
            "id": self.pk, "rule": self.rule, "severity": self.severity, "level": self.level,
            "subject": self.subject, "card": self.card_id, "rack": self.rack_id,
            "supernode": self.supernode_id, "value": self.value, "threshold": self.threshold,
            "message": self.message,
            "started": self.started.isoformat() if self.started else None,
            "ended": self.ended.isoformat() if self.ended else None,
            "acknowledged_by": (self.acknowledged_by.get_username()
                                if self.acknowledged_by_id else None),
        }


class AlertDelivery(models.Model):
    """What one receiver (an Alertmanager or a webhook) was told about one alert.

    One row per alert, receiver and state (firing, resolved): ``sent_at`` is set
    once the receiver answered 2xx, and a state with ``sent_at`` is not sent to
    that receiver again (Alertmanager excepted: it forgets a firing alert that
    is not re-sent, so firing alerts are refreshed every ``TWIN_ALERTS_RESEND_S``;
    see ``twin.telemetry.notify``). Failed attempts count up with their error.
    """

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="deliveries")
    receiver = models.CharField(max_length=40, help_text="e.g. alertmanager:3f2a…, webhook:…")
    state = models.CharField(max_length=10, choices=AlertStateChoices.choices())
    sent_at = models.DateTimeField(null=True, blank=True, db_index=True)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["alert", "receiver", "state"]
        constraints = [
            models.UniqueConstraint(fields=["alert", "receiver", "state"],
                                    name="alert_delivery_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.alert_id} {self.state} → {self.receiver}"


class CardHealth(models.Model):
    """A card's derived health when it is not OK (no row: OK or never reported).

    Kept in step with the live health by the tick (``twin.telemetry.processing``):
    ``stale`` when the card went silent, else the worst severity of its open alerts.
    """

    card = models.OneToOneField("hardware.Card", on_delete=models.CASCADE, primary_key=True,
                                related_name="health")
    cluster = models.ForeignKey("hardware.Cluster", on_delete=models.CASCADE,
                                related_name="card_health")
    status = models.CharField(max_length=10, choices=HealthChoices.choices(), db_index=True)
    reasons = models.CharField(max_length=300, blank=True)
    since = models.DateTimeField()

    class Meta:
        ordering = ["card_id"]
        verbose_name_plural = "card health"

    def __str__(self) -> str:
        return f"{self.card_id}: {self.status}"


class TelemetryMinute(models.Model):
    """Downsampled history: the mean and max of every metric over one minute,
    for one card, rack, supernode or the whole cluster.

    ``mean``/``max`` are float32 vectors in ``metrics.METRIC_KEYS`` order (NaN:
    no reading), so one row holds every metric (26 × 4 bytes) instead of one
    row per metric. Card rows are kept for clusters of up to
    ``TELEMETRY_PERSIST_CARDS_MAX`` (8,192) cards — a million cards would be a
    million rows a minute — larger clusters keep racks, supernodes and the
    cluster. Rows older than ``TELEMETRY_RETENTION_DAYS`` are deleted by the
    cleanup beat task.
    """

    cluster = models.ForeignKey("hardware.Cluster", on_delete=models.CASCADE,
                                related_name="telemetry_minutes")
    level = models.CharField(max_length=10, choices=SubjectLevelChoices.choices())
    object_id = models.BigIntegerField(help_text="Card, rack, supernode or cluster id.")
    minute = models.DateTimeField(db_index=True)
    samples = models.PositiveIntegerField(default=0)
    mean = models.BinaryField()
    max = models.BinaryField()
    draw_w = models.FloatField(null=True, blank=True,
                               help_text="Racks and up: mean measured draw incl. overhead.")

    class Meta:
        ordering = ["cluster", "level", "object_id", "minute"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "level", "object_id", "minute"],
                                    name="minute_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.level}:{self.object_id} @ {self.minute:%Y-%m-%d %H:%M}"

    @staticmethod
    def _decode(raw: bytes | memoryview) -> dict[str, float | None]:
        arr = np.frombuffer(bytes(raw), dtype=np.float32)
        return {key: (None if i >= len(arr) or arr[i] != arr[i] else round(float(arr[i]), 4))
                for i, key in enumerate(METRIC_KEYS)}

    def mean_values(self) -> dict[str, float | None]:
        return self._decode(self.mean)

    def max_values(self) -> dict[str, float | None]:
        return self._decode(self.max)
