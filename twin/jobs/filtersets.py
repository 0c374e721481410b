"""One filterset per model, used by the REST API and by the admin changelists."""
from __future__ import annotations

import django_filters as df

from twin.core.filtersets import IdFilter, RelatedKeyFilter, SearchFilterSet, TwinFilterSet
from twin.jobs.choices import JobStateChoices, QosChoices, TraceFormatChoices
from twin.jobs.models import Allocation, Job, Trace

__all__ = ["AllocationFilterSet", "JobFilterSet", "TraceFilterSet"]


class JobFilterSet(SearchFilterSet):
    """``?cluster=1&state=running&state=queued&tenant=team-a&q=llama``."""

    search_fields = ("name", "tenant")
    state = df.MultipleChoiceFilter(choices=JobStateChoices.choices())
    qos = df.MultipleChoiceFilter(choices=QosChoices.choices())
    accelerator = RelatedKeyFilter(field_name="accelerator__slug", label="Accelerator (slug)")
    card = IdFilter(field_name="allocations__card", label="Holds this card", distinct=True)

    class Meta:
        model = Job
        fields = ["cluster", "state", "tenant", "qos", "gang", "submitted_by"]


class AllocationFilterSet(TwinFilterSet):
    """``?cluster=1``, ``?job=7``, ``?server=3``, ``?tenant=team-a``."""

    cluster = IdFilter(field_name="job__cluster")
    server = IdFilter(field_name="card__server")
    tenant = df.CharFilter(field_name="job__tenant")

    class Meta:
        model = Allocation
        fields = ["job", "card"]


class TraceFilterSet(SearchFilterSet):
    """``?trace_format=helios`` (``format`` is DRF's response-format parameter)."""

    trace_format = df.MultipleChoiceFilter(field_name="format",
                                           choices=TraceFormatChoices.choices())

    class Meta:
        model = Trace
        fields = ["trace_format", "uploaded_by"]
