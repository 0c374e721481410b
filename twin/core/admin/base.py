"""What every app's admin shares: filtersets, scale defaults, form errors, links.

* ``TwinModelAdmin`` applies the model's API filterset to the changelist
  (``filterset_class``; see ``filters.py``) and to the search box, pages with
  ``LargeTablePaginator`` and never asks for a full-table count (its changelist
  says "about" for an estimated one), so the same admin works on a tiny test
  cluster and on a million cards.
* ``TwinModelForm`` keeps the per-field errors of the models' ``clean()`` on
  their fields, and moves an error on a field the form does not show (an
  inline's hidden foreign key, a read-only field) to the form's top instead of
  crashing with "has no field named …".
* Deleting an object that holds others follows the deletion rule of
  ``twin.core.deletion`` (``deletion.py``: the confirmation page lists what is
  inside, counted per kind).
* Per-cluster access (``access.py``): an admin declares ``cluster_field`` as its
  API viewset does.
* Coloured choice badges are in ``badges.py``.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import django_filters as df
from django import forms
from django.contrib import admin, messages
from django.contrib.admin.actions import delete_selected
from django.contrib.admin.options import ShowFacets
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import models
from django.db.models import Count, OuterRef, Subquery, Sum
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from twin.core.admin.access import ClusterScopedAdminMixin
from twin.core.admin.deletion import GuardedDeletionAdminMixin
from twin.core.admin.filters import filterset_list_filters
from twin.core.admin.pagination import LargeTablePaginator

__all__ = [
    "BULK_DELETE_LIMIT",
    "TwinInlineMixin",
    "TwinModelAdmin",
    "TwinModelForm",
    "admin_link",
    "changelist_link",
    "count_subquery",
    "sum_subquery",
    "watts",
]

#: The stock "delete selected" collects every related row for its confirmation
#: page; past this many objects that is a page of millions of lines.
BULK_DELETE_LIMIT = 1000


def watts(value: float | int | None) -> str:
    """``7,485 W`` with a no-break space (or a dash when the value is unknown)."""
    return "—" if value is None else f"{int(round(value)):,}\u00a0W"


def admin_link(obj: models.Model | None, text: str | None = None) -> SafeString | str:
    """A link to ``obj``'s change page (no query: the URL comes from its pk)."""
    if obj is None:
        return "—"
    opts = obj._meta
    try:
        url = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])
    except NoReverseMatch:
        return str(obj) if text is None else text
    return format_html('<a href="{}">{}</a>', url, str(obj) if text is None else text)


def changelist_link(model: type[models.Model], text: str, **params: Any) -> SafeString:
    """A link to ``model``'s changelist filtered by its filterset's ``params``."""
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    return format_html('<a href="{}?{}">{}</a>', url, urlencode(params), text)


def count_subquery(queryset: models.QuerySet, group: str) -> Coalesce:
    """``COUNT(*)`` of ``queryset`` rows whose ``group`` is the outer row, as a subquery.

    A correlated subquery instead of ``Count()`` over a join: it is evaluated
    only for the page of rows shown (it uses the foreign-key index), where a
    join would aggregate every card of a million-card cluster before ``LIMIT``.
    """
    return Coalesce(
        Subquery(
            queryset.filter(**{group: OuterRef("pk")}).order_by().values(group)
            .annotate(n=Count("*")).values("n")[:1],
            output_field=models.BigIntegerField(),
        ),
        0,
        output_field=models.BigIntegerField(),
    )


def sum_subquery(queryset: models.QuerySet, group: str, field: str) -> Coalesce:
    """``SUM(field)`` of ``queryset`` rows whose ``group`` is the outer row (see above)."""
    return Coalesce(
        Subquery(
            queryset.filter(**{group: OuterRef("pk")}).order_by().values(group)
            .annotate(total=Sum(field)).values("total")[:1],
            output_field=models.BigIntegerField(),
        ),
        0,
        output_field=models.BigIntegerField(),
    )


class TwinModelForm(forms.ModelForm):
    """Model ``clean()`` errors on fields this form hides or lacks go to its top."""

    def add_error(self, field: str | None, error: Any) -> None:
        if field is None and isinstance(error, ValidationError) and hasattr(error, "error_dict"):
            routed: dict[str, list[ValidationError]] = {}
            for name, errors in error.error_dict.items():
                shown = name in self.fields and not self.fields[name].widget.is_hidden
                target = name if name == NON_FIELD_ERRORS or shown else NON_FIELD_ERRORS
                routed.setdefault(target, []).extend(errors)
            error = ValidationError(routed)
        super().add_error(field, error)


class TwinInlineMixin:
    """Inline defaults: no blank extra rows (an "Add another" button instead)."""

    form = TwinModelForm
    extra = 0
    show_change_link = True


class TwinModelAdmin(ClusterScopedAdminMixin, GuardedDeletionAdminMixin, admin.ModelAdmin):
    """Base admin of every app's models (see the module doc)."""

    form = TwinModelForm
    #: Django's changelist with our search form and pagination ("about N" when estimated).
    change_list_template = "admin/core/change_list.html"
    #: The API's filterset for this model; the changelist applies it.
    filterset_class: type[df.FilterSet] | None = None
    #: Filterset filters shown in the sidebar; the others are still accepted from the URL.
    filterset_sidebar: Sequence[str] = ()
    paginator = LargeTablePaginator
    show_full_result_count = False
    show_facets = ShowFacets.NEVER
    list_per_page = 100

    def __init__(self, model: type[models.Model], admin_site: admin.AdminSite) -> None:
        super().__init__(model, admin_site)
        self._filterset_filters = (
            filterset_list_filters(self.filterset_class, self.filterset_sidebar)
            if self.filterset_class is not None else []
        )

    # --- one filterset for API and admin ----------------------------------
    def get_list_filter(self, request: HttpRequest) -> list[Any]:
        return [*self._filterset_filters, *super().get_list_filter(request)]

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest | None = None) -> bool:
        if self.filterset_class is not None and lookup in self.filterset_class.base_filters:
            return True
        return super().lookup_allowed(lookup, value, request)

    def get_search_results(
        self, request: HttpRequest, queryset: models.QuerySet, search_term: str
    ) -> tuple[models.QuerySet, bool]:
        """Search through the filterset's ``q`` where it has one (the API's search)."""
        if self.filterset_class is None or "q" not in self.filterset_class.base_filters:
            return super().get_search_results(request, queryset, search_term)
        if not search_term.strip():
            return queryset, False
        filterset = self.filterset_class(data={"q": search_term}, queryset=queryset,
                                         request=request)
        return filterset.qs, False

    # --- scale ----------------------------------------------------------------
    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        if "delete_selected" in actions:
            _, name, description = actions["delete_selected"]
            actions["delete_selected"] = (bounded_delete_selected, name, description)
        return actions


def bounded_delete_selected(
    modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: models.QuerySet
) -> HttpResponse | None:
    """Django's "delete selected", refused past ``BULK_DELETE_LIMIT`` objects.

    Its confirmation page lists every related object; for "select all" on a
    million cards that page never renders. Rebuild with ``build_cluster --replace``.
    """
    if queryset.order_by().values("pk")[: BULK_DELETE_LIMIT + 1].count() > BULK_DELETE_LIMIT:
        modeladmin.message_user(
            request,
            f"Refused: deleting more than {BULK_DELETE_LIMIT:,} "
            f"{modeladmin.model._meta.verbose_name_plural} at once from the admin. Narrow the "
            f"selection with filters, or rebuild the cluster with "
            f"`manage.py build_cluster --replace`.",
            messages.ERROR,
        )
        return None
    return delete_selected(modeladmin, request, queryset)


bounded_delete_selected.allowed_permissions = ("delete",)  # type: ignore[attr-defined]
bounded_delete_selected.short_description = delete_selected.short_description  # type: ignore[attr-defined]
