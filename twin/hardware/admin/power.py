"""The rack power budget in the admin: the models' one rule, across formsets, with its override.

* **Formsets.** Each inline row's model ``clean()`` checks the budget against
  what is in the database, so two new 700 W cards typed into one server form
  would each pass against 1,000 W of headroom and together break it. These
  formsets add up every kept row of the submission (plus what the formset does
  not show) and put the total through the same rule, ``Rack.check_added_draw``:
  refused, with one error naming the total and the budget, only if it takes the
  rack over budget *and* adds draw.
* **The override.** The change forms of everything whose save adds draw or
  lowers a budget (accelerator types, racks, servers, cards, network devices)
  carry an "Allow over budget" checkbox (:class:`BudgetedAdminMixin`). Ticked,
  the save goes through — its inline rows too — and a warning lists the racks
  now over budget.
* **The lock.** The admin saves in one transaction and the models' ``full_clean()``
  locks the racks their check reads (``twin.hardware.models.racks.BudgetedWrite``),
  as it does for the API.
"""
from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest

from twin.core.admin.base import TwinModelForm
from twin.hardware.models import Rack
from twin.hardware.models.budget import OverBudget
from twin.hardware.models.racks import NOTHING, Parts, carried_w

__all__ = [
    "ALLOW_FIELDSET",
    "BudgetedAdminMixin",
    "BudgetedForm",
    "CardsInServerFormSet",
    "DevicesInRackFormSet",
    "DevicesInServerFormSet",
    "ServersInRackFormSet",
]

ALLOW_FIELDSET = ("Power budget", {
    "fields": ("allow_over_budget",),
    "description": "Saves that would take a rack over its power budget are refused unless "
                   "this is ticked.",
})


class BudgetedForm(TwinModelForm):
    """A change form whose save may be allowed to take racks over budget."""

    allow_over_budget = forms.BooleanField(
        label="Allow over budget", required=False,
        help_text="Save even if this takes racks over their power budget; the racks are "
                  "listed after saving.",
    )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        # Read by the model's clean() (and its inline rows'), which runs after this.
        self.instance.allow_over_budget = bool(cleaned.get("allow_over_budget"))
        return cleaned


class BudgetedAdminMixin:
    """Admin of a model whose save adds draw: the checkbox, and a warning after an
    allowed save naming the racks now over budget."""

    form = BudgetedForm

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> list[Any]:
        fieldsets = list(super().get_fieldsets(request, obj))  # type: ignore[misc]
        if not any("allow_over_budget" in opts.get("fields", ()) for _, opts in fieldsets):
            fieldsets.append(ALLOW_FIELDSET)
        return fieldsets

    def save_related(self, request: HttpRequest, form: Any, formsets: Any,
                     change: bool) -> None:
        super().save_related(request, form, formsets, change)  # type: ignore[misc]
        over: OverBudget | None = form.instance.over_budget
        for formset in formsets:
            for found in (getattr(formset, "over_budget", None),
                          *(getattr(f.instance, "over_budget", None) for f in formset.forms)):
                if found is not None:
                    over = found + over
        if over is not None:
            self.message_user(  # type: ignore[attr-defined]
                request, f"Saved over budget: {over.describe()}.", messages.WARNING)


class RackBudgetFormSet(BaseInlineFormSet):
    """Refuses a submission whose rows together take the rack over its budget."""

    #: What one row is, for the message ("cards", "servers", …).
    noun = "rows"
    #: The racks this submission took over budget, when the parent form allowed it.
    over_budget: OverBudget | None = None

    def _construct_form(self, i: int, **kwargs: Any) -> Any:
        form = super()._construct_form(i, **kwargs)
        # The parent's "allow over budget" covers its rows.
        form.instance.allow_over_budget = getattr(self.instance, "allow_over_budget", False)
        return form

    def kept_forms(self) -> list[Any]:
        return [
            form for form in self.forms
            if form.cleaned_data and not self._should_delete_form(form)
            and (form.instance.pk or form.has_changed())
        ]

    def rack(self) -> Rack | None:  # pragma: no cover - overridden
        raise NotImplementedError

    def replaced(self) -> Parts:
        """The stored rows this submission replaces (they are left out of the rack's draw)."""
        return NOTHING

    def added_w(self) -> int:  # pragma: no cover - overridden
        """What the submission puts in their place, in watts."""
        raise NotImplementedError

    def clean(self) -> None:
        super().clean()
        self.over_budget = None
        if any(self.errors):
            return  # a row's own error says it better
        rack = self.rack()
        if rack is None or not rack.pk:
            return
        self.over_budget = rack.check_added_draw(
            self.added_w(), excluding=self.replaced(),
            allow=getattr(self.instance, "allow_over_budget", False),
            message=f"Together these {self.noun} take rack {{rack}} to {{draw:,}} W, over its "
                    f"{{budget:,}} W budget by {{over:,}} W. Remove or lighten some of them, "
                    f"or raise the rack's budget.",
        )


class CardsInServerFormSet(RackBudgetFormSet):
    """Cards edited inside a server: the server's rack must hold them all."""

    noun = "cards"

    def rack(self) -> Rack | None:
        return self.instance.rack if self.instance.rack_id else None

    def replaced(self) -> Parts:
        return Parts.of(servers=[self.instance.pk])

    def added_w(self) -> int:
        server = self.instance
        devices = carried_w([server.pk], kinds=("devices",)).get(server.pk, 0)
        cards = sum(form.cleaned_data["accelerator"].tdp_w for form in self.kept_forms()
                    if form.cleaned_data.get("accelerator"))
        return (server.overhead_w or 0) + devices + cards


class DevicesInServerFormSet(RackBudgetFormSet):
    """NICs and PCIe switches edited inside a server (they count against its rack)."""

    noun = "devices"

    def _construct_form(self, i: int, **kwargs: Any) -> Any:
        form = super()._construct_form(i, **kwargs)
        # A built-in device sits in its server's rack and cluster.
        server = self.instance
        if server.rack_id:
            form.instance.rack_id = server.rack_id
            if not form.instance.cluster_id:
                form.instance.cluster_id = server.rack.cluster_id
        return form

    def rack(self) -> Rack | None:
        return self.instance.rack if self.instance.rack_id else None

    def replaced(self) -> Parts:
        return Parts.of(servers=[self.instance.pk])

    def added_w(self) -> int:
        server = self.instance
        cards = carried_w([server.pk], kinds=("cards",)).get(server.pk, 0)
        devices = sum(form.cleaned_data.get("power_w") or 0 for form in self.kept_forms())
        return (server.overhead_w or 0) + cards + devices


class ServersInRackFormSet(RackBudgetFormSet):
    """Servers edited inside a rack: their overheads plus what they already carry."""

    noun = "servers"

    def rack(self) -> Rack | None:
        return self.instance

    def _existing(self) -> list[int]:
        return [form.instance.pk for form in self.forms if form.instance.pk]

    def replaced(self) -> Parts:
        return Parts.of(servers=self._existing())

    def added_w(self) -> int:
        carried = carried_w(self._existing())
        return sum((form.cleaned_data.get("overhead_w") or 0) + carried.get(form.instance.pk, 0)
                   for form in self.kept_forms())


class DevicesInRackFormSet(RackBudgetFormSet):
    """Rack-mounted switches (not inside a server)."""

    noun = "devices"

    def _construct_form(self, i: int, **kwargs: Any) -> Any:
        form = super()._construct_form(i, **kwargs)
        if not form.instance.cluster_id and self.instance.cluster_id:
            form.instance.cluster_id = self.instance.cluster_id
        return form

    def rack(self) -> Rack | None:
        return self.instance

    def replaced(self) -> Parts:
        return Parts.of(devices=[form.instance.pk for form in self.forms if form.instance.pk])

    def added_w(self) -> int:
        return sum(form.cleaned_data.get("power_w") or 0 for form in self.kept_forms())
