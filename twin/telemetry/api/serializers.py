"""Serializers of the telemetry API."""
from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from rest_framework import serializers

from twin.core.api.serializers import ValidatedModelSerializer
from twin.telemetry.choices import AlertRuleChoices, HealthChoices, SeverityChoices
from twin.telemetry.metrics import METRICS
from twin.telemetry.models import Alert, CardHealth, ScrapeTarget, TelemetryAgent, TelemetryMinute

__all__ = [
    "AlertGroupSerializer",
    "AlertSerializer",
    "CardHealthSerializer",
    "MetricSerializer",
    "MinuteSerializer",
    "RotateTokenSerializer",
    "ScrapeTargetSerializer",
    "TelemetryAgentSerializer",
]


class TelemetryAgentSerializer(ValidatedModelSerializer):
    """An agent. ``token`` is in the answer to a create (or rotate) only: it is
    stored hashed and can never be read again. After a rotation the replaced token
    (``previous_token_hint``) keeps working until ``previous_token_expires``."""

    url = serializers.HyperlinkedIdentityField(view_name="telemetry:agent-detail")
    token = serializers.SerializerMethodField(
        help_text="The agent's token; returned once, when the agent is created.")

    class Meta:
        model = TelemetryAgent
        fields = ["id", "url", "display", "cluster", "name", "description", "is_active",
                  "token", "token_hint", "previous_token_hint", "previous_token_expires",
                  "token_rotated_at", "old_token_refused_at", "last_sequence", "last_seen",
                  "batches", "samples", "rejected", "duplicates", "gaps", "missed_batches",
                  "restarts", "created", "last_updated"]
        read_only_fields = ["token_hint", "previous_token_hint", "previous_token_expires",
                            "token_rotated_at", "old_token_refused_at", "last_sequence",
                            "last_seen", "batches", "samples", "rejected", "duplicates", "gaps",
                            "missed_batches", "restarts"]

    def get_token(self, obj: TelemetryAgent) -> str | None:
        return getattr(obj, "_new_token", None)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if self.instance is not None and "cluster" in attrs and \
                attrs["cluster"].pk != self.instance.cluster_id:
            raise serializers.ValidationError(
                {"cluster": "An agent cannot move to another cluster; create a new agent."})
        if self.instance is None:
            # The token hash is required by the model: issue it before full_clean().
            attrs = dict(attrs)
            probe = TelemetryAgent()
            self._new_token = probe.set_new_token()
            attrs["token_hash"], attrs["token_hint"] = probe.token_hash, probe.token_hint
        return super().validate(attrs)

    def create(self, validated_data: dict[str, Any]) -> TelemetryAgent:
        instance = super().create(validated_data)
        instance._new_token = self._new_token  # type: ignore[attr-defined]
        return instance


class RotateTokenSerializer(serializers.Serializer):
    """The body of ``rotate-token`` (optional)."""

    grace_s = serializers.FloatField(
        required=False, min_value=0, max_value=7 * 86400,
        help_text="Seconds the replaced token keeps working (default: the server's "
                  "TWIN_AGENT_TOKEN_GRACE_S; 0: it stops at once).")


#: What the model's ``clean()`` takes as an endpoint, as a pattern the schema can carry:
#: an http(s) URL with a host and, if any, a port up to 65535.
ENDPOINT_PATTERN = (r"\A[hH][tT][tT][pP][sS]?://(?:(?:(?![/?#@])[!-~])*@)?(?:(?![/?#@:\[\]])[!-~])+"
                    r"(?::(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}"
                    r"|[1-5][0-9]{4}|[0-9]{1,4}))?(?:[/?#][^\x00\t\n\r]*)?\Z")


class ScrapeTargetSerializer(ValidatedModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="telemetry:target-detail")
    endpoint = serializers.CharField(
        max_length=400, validators=[RegexValidator(ENDPOINT_PATTERN, message=(
            "Give an http:// or https:// URL with a host, e.g. http://node0:9400/metrics."))],
        help_text="e.g. http://node0:9400/metrics (a short host name is fine).")

    class Meta:
        model = ScrapeTarget
        fields = ["id", "url", "display", "cluster", "agent", "endpoint", "interval_s",
                  "timeout_s", "enabled", "last_scraped", "last_status", "last_error",
                  "last_accepted", "last_rejected", "last_duration_ms", "created",
                  "last_updated"]
        read_only_fields = ["last_scraped", "last_status", "last_error", "last_accepted",
                            "last_rejected", "last_duration_ms"]


class AlertSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="telemetry:alert-detail")
    active = serializers.BooleanField(read_only=True)
    acknowledged_by = serializers.SlugRelatedField(slug_field="username", read_only=True,
                                                   allow_null=True)

    class Meta:
        model = Alert
        fields = ["id", "url", "cluster", "rule", "severity", "level", "subject", "card",
                  "rack", "supernode", "value", "peak", "threshold", "message", "started",
                  "ended", "active", "acknowledged_by", "acknowledged_at"]
        read_only_fields = fields


class AlertGroupSerializer(serializers.Serializer):
    """Alerts of one rule and severity in one rack or supernode (``twin.telemetry.grouping``)."""

    rule = serializers.ChoiceField(choices=AlertRuleChoices.choices())
    severity = serializers.ChoiceField(choices=SeverityChoices.choices())
    scope = serializers.ChoiceField(choices=["rack", "supernode", "cluster"],
                                    help_text="What the group shares: a rack, a supernode, "
                                              "or only the cluster (cluster-wide alerts).")
    rack = serializers.IntegerField(allow_null=True)
    rack_name = serializers.CharField(allow_null=True)
    supernode = serializers.IntegerField(allow_null=True)
    supernode_name = serializers.CharField(allow_null=True)
    count = serializers.IntegerField(min_value=1, help_text="Alerts in the group.")
    cards = serializers.IntegerField(min_value=0, help_text="Distinct cards among them.")
    oldest = serializers.DateTimeField()
    newest = serializers.DateTimeField()
    latest_alert = serializers.IntegerField(help_text="Id of the newest alert of the group.")
    message = serializers.CharField(help_text="The newest alert's message.")


class CardHealthSerializer(serializers.ModelSerializer):
    health = serializers.ChoiceField(source="status", choices=HealthChoices.choices(),
                                     read_only=True)

    class Meta:
        model = CardHealth
        fields = ["card", "cluster", "health", "reasons", "since"]
        read_only_fields = fields


class MinuteSerializer(serializers.ModelSerializer):
    mean = serializers.SerializerMethodField()
    max = serializers.SerializerMethodField()

    class Meta:
        model = TelemetryMinute
        fields = ["id", "cluster", "level", "object_id", "minute", "samples", "draw_w", "mean",
                  "max"]
        read_only_fields = fields

    def get_mean(self, obj: TelemetryMinute) -> dict[str, float | None]:
        return obj.mean_values()

    def get_max(self, obj: TelemetryMinute) -> dict[str, float | None]:
        return obj.max_values()


class MetricSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    key = serializers.CharField()
    label = serializers.CharField()
    unit = serializers.CharField()
    min = serializers.FloatField()
    max = serializers.FloatField()
    dcgm = serializers.ListField(child=serializers.CharField())
    dcgm_scale = serializers.FloatField()
    source = serializers.CharField()
    description = serializers.CharField()

    @staticmethod
    def all() -> list[dict[str, Any]]:
        return [m.as_dict() for m in METRICS]
