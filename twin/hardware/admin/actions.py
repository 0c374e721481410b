"""Bulk actions: card and link status, rack budget. Each runs in one transaction.

Status actions are made from the ChoiceSets (one per status), so a new status
gets its action without code here. ``set_rack_budget`` asks for the watts on
an intermediate page, refuses the racks that already draw more (with their
names and draws) and applies the budget to the others.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db import models, transaction
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils import timezone

from twin.core.choices import ChoiceSet
from twin.hardware.models import Rack

__all__ = ["SetBudgetForm", "set_rack_budget", "status_actions"]

#: Racks named in a refusal message; the rest are counted.
NAMED_IN_MESSAGE = 10

Action = Callable[[admin.ModelAdmin, HttpRequest, models.QuerySet], Any]


def status_actions(choices: type[ChoiceSet], field: str = "status") -> list[Action]:
    """One "Mark selected … <status>" action per value of ``choices``."""
    actions: list[Action] = []
    for value, label, _ in choices.CHOICES:
        def action(modeladmin: admin.ModelAdmin, request: HttpRequest,
                   queryset: models.QuerySet, value: str = value, label: str = label) -> None:
            with transaction.atomic():
                updated = queryset.order_by().update(
                    **{field: value, "last_updated": timezone.now()}
                )
            noun = modeladmin.model._meta.verbose_name_plural
            modeladmin.message_user(request, f"Marked {updated:,} {noun} {label}.",
                                    messages.SUCCESS)

        action.__name__ = f"mark_{value}"
        actions.append(admin.action(
            description=f"Mark selected %(verbose_name_plural)s {label}",
            permissions=["change"],
        )(action))
    return actions


class SetBudgetForm(forms.Form):
    power_budget_w = forms.IntegerField(
        label="New power budget (W)", min_value=1, max_value=2_000_000,
        help_text="Racks that already draw more than this keep their budget.",
    )


@admin.action(description="Set power budget of selected racks…", permissions=["change"])
def set_rack_budget(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: models.QuerySet
) -> TemplateResponse | None:
    """Ask for a budget, then set it on every selected rack that fits under it."""
    form = SetBudgetForm(request.POST if "apply" in request.POST else None)
    if form.is_bound and form.is_valid():
        apply_rack_budget(modeladmin, request, queryset, form.cleaned_data["power_budget_w"])
        return None
    selected = Rack.objects.filter(pk__in=queryset.order_by().values("pk")).with_power()
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": "Set the power budget of racks",
        "opts": modeladmin.model._meta,
        "form": form,
        "racks": selected.select_related("cluster")[:50],
        "rack_count": selected.count(),
        "selected_ids": request.POST.getlist(helpers.ACTION_CHECKBOX_NAME),
        "select_across": request.POST.get("select_across", "0"),
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "media": modeladmin.media,
    }
    return TemplateResponse(request, "admin/hardware/rack/set_budget.html", context)


def apply_rack_budget(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: models.QuerySet, budget: int
) -> None:
    """Set ``budget`` on the selected racks whose draw fits; report the others."""
    with transaction.atomic():
        selected = Rack.objects.filter(pk__in=queryset.order_by().values("pk"))
        # Lock the racks so no card lands in one between the check and the update.
        list(selected.select_for_update(of=("self",)).values_list("pk", flat=True))
        refused = list(
            selected.with_power().filter(power_w__gt=budget).order_by("cluster", "row", "slot")
            .values_list("pk", "name", "power_w")
        )
        updated = selected.exclude(pk__in=[pk for pk, _, _ in refused]).update(
            power_budget_w=budget, last_updated=timezone.now()
        )
    if updated:
        modeladmin.message_user(
            request, f"Set the power budget of {updated:,} racks to {budget:,} W.",
            messages.SUCCESS,
        )
    if refused:
        named = ", ".join(f"{name} ({draw:,} W)" for _, name, draw in refused[:NAMED_IN_MESSAGE])
        more = len(refused) - NAMED_IN_MESSAGE
        highest = max(draw for _, _, draw in refused)
        modeladmin.message_user(
            request,
            f"Refused for {len(refused):,} racks that already draw more than {budget:,} W: "
            f"{named}{f' and {more:,} more' if more > 0 else ''}. Move hardware out of them "
            f"first, or choose a budget of at least {highest:,} W.",
            messages.ERROR,
        )
