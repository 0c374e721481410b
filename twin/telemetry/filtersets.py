"""Filtersets of the telemetry API (and admin)."""
from __future__ import annotations

import django_filters as df
from django.db.models import QuerySet
from django_filters.widgets import BooleanWidget
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field

from twin.core.filtersets import TwinFilterSet, UtcDateTimeFilter
from twin.telemetry.choices import (
    AlertRuleChoices,
    HealthChoices,
    SeverityChoices,
    SubjectLevelChoices,
)
from twin.telemetry.models import Alert, CardHealth, ScrapeTarget, TelemetryAgent, TelemetryMinute

__all__ = ["AlertFilterSet", "CardHealthFilterSet", "MinuteFilterSet", "ScrapeTargetFilterSet",
           "TelemetryAgentFilterSet"]


class TelemetryAgentFilterSet(TwinFilterSet):
    class Meta:
        model = TelemetryAgent
        fields = ["cluster", "is_active", "name"]


class ScrapeTargetFilterSet(TwinFilterSet):
    class Meta:
        model = ScrapeTarget
        fields = ["cluster", "enabled", "last_status"]


class AlertFilterSet(TwinFilterSet):
    """``?cluster=&rule=&severity=&level=&active=true&acknowledged=false&card=&rack=``."""

    rule = df.MultipleChoiceFilter(choices=AlertRuleChoices.choices())
    severity = df.MultipleChoiceFilter(choices=SeverityChoices.choices())
    level = df.ChoiceFilter(choices=SubjectLevelChoices.choices())
    # BooleanWidget also reads 1/0: the admin's ``?active=1`` (open alerts) keeps working.
    active = df.BooleanFilter(method="filter_active", label="Active (not ended)",
                              widget=BooleanWidget())
    acknowledged = df.BooleanFilter(method="filter_acknowledged", label="Acknowledged")
    started_after = UtcDateTimeFilter(field_name="started", lookup_expr="gte")
    started_before = UtcDateTimeFilter(field_name="started", lookup_expr="lt")

    class Meta:
        model = Alert
        fields = ["cluster", "card", "rack", "supernode"]

    @extend_schema_field(OpenApiTypes.BOOL)
    def filter_active(self, queryset: QuerySet, name: str, value: bool | None) -> QuerySet:
        if value is None:
            return queryset
        return queryset.filter(ended__isnull=value)

    @extend_schema_field(OpenApiTypes.BOOL)
    def filter_acknowledged(self, queryset: QuerySet, name: str,
                            value: bool | None) -> QuerySet:
        if value is None:
            return queryset
        return queryset.filter(acknowledged_at__isnull=not value)


class CardHealthFilterSet(TwinFilterSet):
    status = df.MultipleChoiceFilter(choices=HealthChoices.choices())

    class Meta:
        model = CardHealth
        fields = ["cluster", "card"]


class MinuteFilterSet(TwinFilterSet):
    """``?cluster=&level=rack&object_id=&since=&until=``."""

    level = df.ChoiceFilter(choices=SubjectLevelChoices.choices())
    since = UtcDateTimeFilter(field_name="minute", lookup_expr="gte")
    until = UtcDateTimeFilter(field_name="minute", lookup_expr="lt")

    class Meta:
        model = TelemetryMinute
        fields = ["cluster", "object_id"]
