"""Admin of telemetry: agents (token shown once), scrape targets, alerts, card health.

Every admin derives from ``TwinModelAdmin``: its sidebar and URL filters are
the API's filtersets (``twin.telemetry.filtersets``: ``?active=true`` means the
same in ``/admin/`` and ``/api/telemetry/alerts/``) and it never asks for a
full count. Card-sized tables (alerts, health, minutes) use raw-id widgets.
"""
from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from twin.core.admin.badges import badge
from twin.core.admin.base import TwinModelAdmin
from twin.telemetry import bridge, state
from twin.telemetry.choices import HealthChoices, ScrapeStatusChoices, SeverityChoices
from twin.telemetry.filtersets import (
    AlertFilterSet,
    CardHealthFilterSet,
    MinuteFilterSet,
    ScrapeTargetFilterSet,
    TelemetryAgentFilterSet,
)
from twin.telemetry.models import (
    Alert,
    AlertDelivery,
    CardHealth,
    ScrapeTarget,
    TelemetryAgent,
    TelemetryMinute,
)

__all__ = ["AlertAdmin", "CardHealthAdmin", "ScrapeTargetAdmin", "TelemetryAgentAdmin",
           "TelemetryMinuteAdmin"]


@admin.register(TelemetryAgent)
class TelemetryAgentAdmin(TwinModelAdmin):
    cluster_field = "cluster"
    list_display = ("name", "cluster", "is_active", "token_hint", "previous_token_hint",
                    "previous_token_expires", "last_seen", "last_sequence", "batches", "gaps",
                    "missed_batches", "duplicates")
    filterset_class = TelemetryAgentFilterSet
    filterset_sidebar = ("is_active", "cluster")
    search_fields = ("name",)
    readonly_fields = ("token_hint", "previous_token_hint", "previous_token_expires",
                       "token_rotated_at", "old_token_refused_at", "last_sequence", "last_seen",
                       "batches", "samples",
                       "rejected", "duplicates", "gaps", "missed_batches", "restarts",
                       "created_by")
    actions = ["rotate_tokens"]

    def save_model(self, request: HttpRequest, obj: TelemetryAgent, form: Any,
                   change: bool) -> None:
        if not change:
            token = obj.set_new_token()
            obj.created_by = request.user
            super().save_model(request, obj, form, change)
            messages.warning(request, f"Token of agent {obj.name} (shown once, copy it now): "
                                      f"{token}")
            return
        super().save_model(request, obj, form, change)

    @admin.action(description="Rotate the token of the selected agents (shown once; the old "
                              "one works for the grace period)")
    def rotate_tokens(self, request: HttpRequest, queryset: QuerySet) -> None:
        for agent in queryset:
            token = agent.set_new_token()
            agent.save(update_fields=list(TelemetryAgent.TOKEN_FIELDS))
            messages.warning(request, f"New token of {agent.name}: {token} (the old one "
                                      f"works until {agent.previous_token_expires:%H:%M:%S} UTC)")


@admin.register(ScrapeTarget)
class ScrapeTargetAdmin(TwinModelAdmin):
    cluster_field = "cluster"
    list_display = ("endpoint", "cluster", "enabled", "interval_s", "last_scraped", "status_badge",
                    "last_accepted", "last_rejected")
    filterset_class = ScrapeTargetFilterSet
    filterset_sidebar = ("enabled", "last_status", "cluster")
    search_fields = ("endpoint",)
    raw_id_fields = ("agent",)
    readonly_fields = ("last_scraped", "last_status", "last_error", "last_accepted",
                       "last_rejected", "last_duration_ms")

    @admin.display(description="Last status", ordering="last_status")
    def status_badge(self, obj: ScrapeTarget) -> str:
        return badge(ScrapeStatusChoices, obj.last_status)


class AlertDeliveryInline(admin.TabularInline):
    """What each receiver (Alertmanager, webhook) was told, read-only."""

    model = AlertDelivery
    extra = 0
    can_delete = False
    fields = readonly_fields = ("receiver", "state", "sent_at", "attempts", "last_error")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Alert)
class AlertAdmin(TwinModelAdmin):
    cluster_field = "cluster"
    list_display = ("started", "severity_badge", "rule", "subject", "message", "ended",
                    "acknowledged_by")
    filterset_class = AlertFilterSet
    filterset_sidebar = ("active", "severity", "rule", "level", "cluster")
    search_fields = ("subject", "message")
    raw_id_fields = ("card", "rack", "supernode")
    readonly_fields = [f.name for f in Alert._meta.fields if f.name != "id"]
    list_select_related = ("acknowledged_by",)
    date_hierarchy = "started"
    actions = ["acknowledge"]
    inlines = [AlertDeliveryInline]

    @admin.display(description="Severity", ordering="severity")
    def severity_badge(self, obj: Alert) -> str:
        return badge(SeverityChoices, obj.severity)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Acknowledge the selected alerts", permissions=["change"])
    def acknowledge(self, request: HttpRequest, queryset: QuerySet) -> None:
        now = timezone.now()
        pending = list(queryset.filter(acknowledged_at__isnull=True))
        for alert in pending:
            alert.acknowledged_by, alert.acknowledged_at = request.user, now
        Alert.objects.bulk_update(pending, ["acknowledged_by", "acknowledged_at"])
        for alert in pending[:200]:
            bridge.group_send(state.group_name(alert.cluster_id), {
                "type": state.ALERT_EVENT, "cluster": alert.cluster_id,
                "event": "acknowledged", "alert": alert.as_event()})
        messages.success(request, f"Acknowledged {len(pending)} alert(s).")


@admin.register(CardHealth)
class CardHealthAdmin(TwinModelAdmin):
    """Cards that are not OK, with why (derived live; edit nothing here)."""
    cluster_field = "cluster"

    list_display = ("card", "cluster", "status_badge", "reasons", "since")
    filterset_class = CardHealthFilterSet
    filterset_sidebar = ("status", "cluster")
    search_fields = ("card__serial",)
    raw_id_fields = ("card",)
    readonly_fields = ("card", "cluster", "status", "reasons", "since")

    @admin.display(description="Health", ordering="status")
    def status_badge(self, obj: CardHealth) -> str:
        return badge(HealthChoices, obj.status)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(TelemetryMinute)
class TelemetryMinuteAdmin(TwinModelAdmin):
    cluster_field = "cluster"
    list_display = ("minute", "level", "object_id", "samples", "draw_w", "gpu_util",
                    "power_w", "gpu_temp_c")
    filterset_class = MinuteFilterSet
    filterset_sidebar = ("level", "cluster")
    readonly_fields = ("cluster", "level", "object_id", "minute", "samples", "draw_w",
                       "means")
    exclude = ("mean", "max")

    def _mean(self, obj: TelemetryMinute, key: str) -> float | None:
        return obj.mean_values().get(key)

    @admin.display(description="GPU util (%)")
    def gpu_util(self, obj: TelemetryMinute) -> float | None:
        return self._mean(obj, "gpu_util")

    @admin.display(description="Power (W)")
    def power_w(self, obj: TelemetryMinute) -> float | None:
        return self._mean(obj, "power_w")

    @admin.display(description="GPU temp (°C)")
    def gpu_temp_c(self, obj: TelemetryMinute) -> float | None:
        return self._mean(obj, "gpu_temp_c")

    @admin.display(description="Means")
    def means(self, obj: TelemetryMinute) -> str:
        return ", ".join(f"{k}={v}" for k, v in obj.mean_values().items() if v is not None)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
