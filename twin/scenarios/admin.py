"""Admin of scenario runs: read-only records with a cancel action.

Runs are started over the API or with ``manage.py run_scenario``; the admin
shows them (status badge, progress, timings, inputs and result as JSON) and
can cancel queued or running ones. Nothing here edits a run by hand: its
status is the worker's to set. Like every admin it derives from
``TwinModelAdmin``, so its filters are the API's (``ScenarioRunFilterSet``).
"""
from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from simulation.snapshot import LiveSnapshot
from twin.core.admin.badges import badge
from twin.core.admin.base import TwinModelAdmin
from twin.core.choices import JobStatusChoices
from twin.scenarios.filtersets import ScenarioRunFilterSet
from twin.scenarios.models import ScenarioPart, ScenarioRun

__all__ = ["ScenarioPartInline", "ScenarioRunAdmin"]


class ScenarioPartInline(admin.TabularInline):
    """The parts of a split run (a sweep): where each ran, how far it got, why it failed."""

    model = ScenarioPart
    extra = 0
    can_delete = False
    fields = ("index", "part", "status", "progress", "message", "error", "worker", "started",
              "finished")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).defer("result")


@admin.register(ScenarioRun)
class ScenarioRunAdmin(TwinModelAdmin):
    cluster_field = "cluster"
    list_display = ("id", "kind", "cluster", "status_badge", "progress_pct", "message",
                    "created_by", "created", "duration")
    filterset_class = ScenarioRunFilterSet
    filterset_sidebar = ("status", "kind", "cluster")
    search_fields = ("=id", "message", "error", "params_hash", "task_id")
    raw_id_fields = ("cluster", "cached_from", "created_by")
    actions = ["cancel_runs"]
    inlines = (ScenarioPartInline,)
    readonly_fields = ("kind", "cluster", "status", "progress", "message", "error",
                       "error_field", "cached_from", "params_hash", "task_id", "worker",
                       "heartbeat", "created_by", "created", "started", "finished",
                       "params_json", "inputs_json", "result_json", "snapshot_summary")
    exclude = ("params", "inputs", "result", "snapshot")
    list_select_related = ("cluster", "created_by")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # read-only: a run's fields are the worker's to set

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        qs = super().get_queryset(request)
        if request.resolver_match and request.resolver_match.url_name.endswith("changelist"):
            qs = qs.defer("result", "inputs", "snapshot")
        return qs

    @admin.display(description="status", ordering="status")
    def status_badge(self, run: ScenarioRun) -> str:
        return badge(JobStatusChoices, run.status)

    @admin.display(description="progress", ordering="progress")
    def progress_pct(self, run: ScenarioRun) -> str:
        return f"{run.progress * 100:.0f} %"

    @admin.display(description="duration")
    def duration(self, run: ScenarioRun) -> str:
        seconds = run.duration_s
        return "—" if seconds is None else f"{seconds:.2f} s"

    def _json(self, value: Any) -> str:
        text = json.dumps(value, indent=2, ensure_ascii=False)
        if len(text) > 200_000:
            text = text[:200_000] + "\n… (truncated; the API has all of it)"
        return format_html("<pre style='max-height:40em;overflow:auto'>{}</pre>", text)

    @admin.display(description="params")
    def params_json(self, run: ScenarioRun) -> str:
        return self._json(run.params)

    @admin.display(description="inputs (what the simulation ran on)")
    def inputs_json(self, run: ScenarioRun) -> str:
        return self._json(run.inputs)

    @admin.display(description="result")
    def result_json(self, run: ScenarioRun) -> str:
        return self._json(run.result)

    @admin.display(description="forked from (the live state's summary; whole: the API's "
                               "/api/scenarios/<id>/snapshot/)")
    def snapshot_summary(self, run: ScenarioRun) -> str:
        if not run.snapshot:
            return "—"
        return self._json(LiveSnapshot.from_dict(run.snapshot).summary())

    @admin.action(description="Cancel the selected queued or running runs",
                  permissions=["cancel"])
    def cancel_runs(self, request: HttpRequest, queryset: QuerySet) -> None:
        from twin.scenarios.runner import cancel

        ids = list(queryset.filter(status__in=JobStatusChoices.ACTIVE)
                   .values_list("pk", flat=True))
        done = [run_id for run_id in ids if cancel(run_id)]
        self.message_user(request, f"Cancelled {len(done)} run(s).",
                          messages.SUCCESS if done else messages.WARNING)

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("scenarios.change_scenariorun")
