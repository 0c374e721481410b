"""Admin of the jobs on the twin: submit and cancel jobs, read allocations and traces.

Adding a job in the admin submits it exactly as ``POST /api/jobs/`` does
(``twin.jobs.scheduler.submit``: placed at once by the placement policy, or
queued); a job is never edited by hand afterwards (its state and cards are the
scheduler's), only cancelled (an action) or, once finished, deleted. Allocations
and traces are read-only records here, and so are remediations (self-healing's
audit trail): an operator applies or rejects a proposed one with the actions.
Filters are the API's filtersets.
"""
from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from twin.core.admin.badges import badge
from twin.core.admin.base import TwinInlineMixin, TwinModelAdmin, TwinModelForm, admin_link
from twin.jobs.choices import (
    FailureCauseChoices,
    JobStateChoices,
    RemediationStateChoices,
    TraceFormatChoices,
)
from twin.jobs.filtersets import (
    AllocationFilterSet,
    JobFilterSet,
    RemediationFilterSet,
    TraceFilterSet,
)
from twin.jobs.models import Allocation, Job, Remediation, Trace

__all__ = ["AllocationAdmin", "JobAdmin", "RemediationAdmin", "TraceAdmin"]


class JobForm(TwinModelForm):
    policy = forms.ChoiceField(required=False, help_text="Empty: topology-aware.")

    class Meta:
        model = Job
        fields = ["cluster", "name", "tenant", "cards", "share_milli", "accelerator", "qos",
                  "priority", "gang", "duration_s", "checkpoint_interval_s", "model_params",
                  "policy"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from twin.jobs.api.serializers import policy_names

        if "policy" in self.fields:
            self.fields["policy"].choices = [("", "—"), *((p, p) for p in policy_names())]


class AllocationInline(TwinInlineMixin, admin.TabularInline):
    model = Allocation
    fields = ("card", "share_milli", "vf_index")
    readonly_fields = fields
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Job)
class JobAdmin(TwinModelAdmin):
    cluster_field = "cluster"
    form = JobForm
    filterset_class = JobFilterSet
    filterset_sidebar = ("state", "qos", "cluster", "gang")
    search_fields = JobFilterSet.search_fields
    list_display = ("name", "tenant", "cluster", "cards", "share_milli", "state_badge",
                    "placement_line", "submitted_by", "created")
    list_select_related = ("cluster", "submitted_by")
    raw_id_fields = ("cluster",)
    actions = ["cancel_jobs"]
    inlines = [AllocationInline]
    readonly_fields = ("state_badge", "message", "placement_json", "submitted_by", "started",
                       "finished", "created", "last_updated")

    def get_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        if obj is None:
            return list(JobForm.Meta.fields)
        return ["cluster", "name", "tenant", "cards", "share_milli", "accelerator", "qos",
                "priority", "gang", "duration_s", "policy", *self.readonly_fields]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        if obj is None:
            return ()
        return (*JobForm.Meta.fields, *self.readonly_fields)

    def get_inlines(self, request: HttpRequest, obj: Any = None) -> list[Any]:
        return [AllocationInline] if obj is not None else []

    def save_model(self, request: HttpRequest, obj: Job, form: Any, change: bool) -> None:
        if change:
            return  # nothing is editable after submission
        from twin.jobs.scheduler import submit

        with transaction.atomic():
            submit(obj, request.user, form.cleaned_data.get("policy") or None)
        level = messages.SUCCESS if obj.state == JobStateChoices.RUNNING else messages.WARNING
        self.message_user(request, f"{obj}: {obj.message}", level)

    @admin.display(description="state", ordering="state")
    def state_badge(self, job: Job) -> str:
        return badge(JobStateChoices, job.state)

    @admin.display(description="placement")
    def placement_line(self, job: Job) -> str:
        q = job.placement or {}
        if not q:
            return "—"
        text = f"{q.get('servers')} srv, {q.get('supernodes')} sn"
        if q.get("rail_aligned"):
            text += ", rail-aligned"
        if q.get("allreduce_s") is not None:
            text += f", AllReduce {q['allreduce_s'] * 1e3:.2f} ms"
        return text

    @admin.display(description="placement quality")
    def placement_json(self, job: Job) -> str:
        return format_html("<pre>{}</pre>", json.dumps(job.placement, indent=2))

    @admin.action(description="Cancel the selected queued or running jobs (releases cards)",
                  permissions=["change"])
    def cancel_jobs(self, request: HttpRequest, queryset: QuerySet) -> None:
        from twin.jobs.scheduler import cancel

        done = [job for job in queryset.filter(state__in=JobStateChoices.ACTIVE) if cancel(job)]
        self.message_user(request, f"Cancelled {len(done)} job(s).",
                          messages.SUCCESS if done else messages.WARNING)


@admin.register(Allocation)
class AllocationAdmin(TwinModelAdmin):
    cluster_field = "job__cluster"
    filterset_class = AllocationFilterSet
    filterset_sidebar = ("cluster",)
    list_display = ("id", "job_link", "card_link", "share_milli", "vf_index", "created")
    list_select_related = ("job", "card")
    readonly_fields = ("job", "card", "share_milli", "vf_index", "created", "last_updated")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # the scheduler writes allocations (submit a job)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # cancel the job instead

    @admin.display(description="job", ordering="job")
    def job_link(self, obj: Allocation) -> str:
        return admin_link(obj.job)

    @admin.display(description="card", ordering="card")
    def card_link(self, obj: Allocation) -> str:
        return admin_link(obj.card)


@admin.register(Trace)
class TraceAdmin(TwinModelAdmin):
    filterset_class = TraceFilterSet
    filterset_sidebar = ("trace_format",)
    search_fields = TraceFilterSet.search_fields
    list_display = ("name", "format_badge", "node_count", "gpu_count", "job_count",
                    "size_bytes", "uploaded_by", "created")
    readonly_fields = ("name", "format", "node_count", "gpu_count", "job_count", "size_bytes",
                       "sha256", "uploaded_by", "created")
    exclude = ("nodes", "workload")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).defer("nodes", "workload")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # uploaded over the API (multipart, parsed and checked row by row)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="format", ordering="format")
    def format_badge(self, trace: Trace) -> str:
        return badge(TraceFormatChoices, trace.format)


@admin.register(Remediation)
class RemediationAdmin(TwinModelAdmin):
    """The audit trail of self-healing, read-only; apply or reject a proposal as an action
    (the same service as ``POST /api/jobs/remediations/<id>/apply/``)."""
    cluster_field = "cluster"

    filterset_class = RemediationFilterSet
    filterset_sidebar = ("state", "cause", "cluster")
    list_display = ("id", "card_link", "cause_badge", "state_badge", "message", "detected_at",
                    "decided_at", "applied_via")
    list_select_related = ("card",)
    readonly_fields = ("cluster", "card", "cause", "detail", "episode", "jobs", "state",
                       "proposal_json", "message", "detected_at", "reading_at", "decided_at",
                       "applied_by", "applied_via", "created", "last_updated")
    exclude = ("proposal",)
    actions = ["apply_proposals", "reject_proposals"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # live telemetry writes them (twin.jobs.healing)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False if obj is not None else super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # an audit trail

    @admin.display(description="card", ordering="card")
    def card_link(self, obj: Remediation) -> str:
        return admin_link(obj.card)

    @admin.display(description="cause", ordering="cause")
    def cause_badge(self, obj: Remediation) -> str:
        return badge(FailureCauseChoices, obj.cause)

    @admin.display(description="state", ordering="state")
    def state_badge(self, obj: Remediation) -> str:
        return badge(RemediationStateChoices, obj.state)

    @admin.display(description="proposal")
    def proposal_json(self, obj: Remediation) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.proposal, indent=2))

    def _decide(self, request: HttpRequest, queryset: QuerySet, how: str) -> None:
        from django.core.exceptions import ValidationError

        from twin.jobs import healing

        if not request.user.has_perm("jobs.change_remediation"):
            self.message_user(request, "You may not decide remediations.", messages.ERROR)
            return
        done = 0
        for rem in queryset.filter(state=RemediationStateChoices.PROPOSED):
            try:
                row = (healing.apply(rem, user=request.user) if how == "apply"
                       else healing.reject(rem, user=request.user))
            except ValidationError as exc:
                self.message_user(request, f"{rem}: {'; '.join(exc.messages)}", messages.ERROR)
                continue
            done += 1
            if row.state == RemediationStateChoices.FAILED:
                self.message_user(request, f"{row}: {row.message}", messages.WARNING)
        self.message_user(request, f"{done} remediation(s) "
                                   f"{'applied' if how == 'apply' else 'rejected'}")

    @admin.action(description="Apply the selected proposals")
    def apply_proposals(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._decide(request, queryset, "apply")

    @admin.action(description="Reject the selected proposals")
    def reject_proposals(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._decide(request, queryset, "reject")
