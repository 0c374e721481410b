"""Filters of the scenario-run list (API and admin share them)."""
from __future__ import annotations

import django_filters as df

from twin.core.choices import JobStatusChoices
from twin.core.filtersets import TwinFilterSet, UtcDateTimeFilter
from twin.scenarios.models import ScenarioRun

__all__ = ["ScenarioRunFilterSet"]


class CharInFilter(df.BaseInFilter, df.CharFilter):
    """``?kind=topology,route``."""


class ScenarioRunFilterSet(TwinFilterSet):
    """``?kind=topology&status=running&status=queued&cluster=3&cached=false``."""

    kind = CharInFilter(field_name="kind", lookup_expr="in",
                           help_text="One kind, or several separated by commas.")
    status = df.MultipleChoiceFilter(choices=JobStatusChoices.choices())
    cached = df.BooleanFilter(field_name="cached_from", lookup_expr="isnull", exclude=True,
                              help_text="true: only runs that reused an earlier result.")
    created_after = UtcDateTimeFilter(field_name="created", lookup_expr="gte")
    created_before = UtcDateTimeFilter(field_name="created", lookup_expr="lt")

    class Meta:
        model = ScenarioRun
        fields = ["kind", "status", "cluster", "created_by", "cached"]
