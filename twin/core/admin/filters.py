"""Admin list filters built from the API's filtersets, so one filterset serves both.

Each filter of a model's ``FilterSet`` (its app's ``filtersets.py``) becomes
one admin ``ListFilter`` that takes its parameter out of the query string and
applies it through the filterset itself. ``?status=failed`` or
``?over_budget=true`` therefore mean the same in ``/api/…`` and in
``/admin/…``, and Django's ChangeList never sees them as unknown lookups (no
``?e=1``).

How a filter shows in the sidebar:

* *choices*: links, for choice and boolean filters and for filters on a small
  related table (clusters, accelerator types) or a column with few values;
* *input*: a text box, when the related table is too big to list (servers of a
  million-card cluster);
* *hidden*: filters the admin did not ask to show are still applied from the
  URL (links from other pages use them) and appear only while active, with a
  link that removes them.

The options of a related model that belongs to a cluster (its admin declares
``cluster_field``) are only those the user may see: a tenant granted cluster A is
not offered cluster B (nor B's racks, supernodes…), so the sidebar does not tell
that B exists (issue 22, item 7; ``docs/access.md``).
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import django_filters as df
from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import FieldDoesNotExist
from django.db import models
from django.http import HttpRequest, QueryDict
from django.utils.text import capfirst
from django_filters.utils import label_for_filter

from twin.core.access import access_for

__all__ = ["FilterSetListFilter", "filterset_list_filters"]

#: Above this many options a filter is a text box instead of a list of links.
CHOICE_LIMIT = 30
_BLANK = ("", None)


def _resolve_path(model: type[models.Model], path: str) -> tuple[type[models.Model], models.Field,
                                                                 bool] | None:
    """The model and field at the end of ``path`` and whether a relation was crossed."""
    field: Any = None
    crossed = False
    for index, part in enumerate(path.split("__")):
        try:
            field = model._meta.get_field(part)
        except FieldDoesNotExist:
            return None
        if field.is_relation and index < len(path.split("__")) - 1:
            model = field.related_model
            crossed = True
    return (model, field, crossed) if field is not None else None


class FilterSetListFilter(admin.ListFilter):
    """One filter of a filterset, as an admin list filter (see the module doc)."""

    filterset_class: type[df.FilterSet]
    parameter_name: str
    visible: bool = True
    choice_limit: int = CHOICE_LIMIT

    def __init__(self, request: HttpRequest, params: dict[str, list[str]],
                 model: type[models.Model], model_admin: admin.ModelAdmin) -> None:
        super().__init__(request, params, model, model_admin)
        self.model = model
        self.model_admin = model_admin
        self.values: list[str] = [v for v in params.pop(self.parameter_name, []) if v != ""]
        if self.values:
            self.used_parameters[self.parameter_name] = self.values
        self.filter = self.filterset_class.base_filters[self.parameter_name]
        self.options = self._options(request) if self.visible else None
        if not self.visible:
            self.template = "admin/core/filters/hidden.html"
        elif self.options is None:
            self.template = "admin/core/filters/input.html"
        else:
            self.template = "admin/filter.html"
        self.hidden_params: list[tuple[str, str]] = []

    # --- what the filter offers -------------------------------------------
    def _options(self, request: HttpRequest) -> list[tuple[str, str]] | None:
        flt = self.filter
        if isinstance(flt, df.BooleanFilter):
            return [("true", "Yes"), ("false", "No")]
        if isinstance(flt, df.ModelChoiceFilter | df.ModelMultipleChoiceFilter):
            return self._object_options(self._visible(request, flt.get_queryset(request)), "pk")
        if isinstance(flt, df.ChoiceFilter | df.MultipleChoiceFilter):
            choices = flt.extra.get("choices", ())
            if callable(choices):
                choices = choices()
            return [(str(value), str(label)) for value, label in choices
                    if value not in _BLANK and not isinstance(label, list | tuple)]
        if flt.method is not None or not flt.field_name:
            return None
        resolved = _resolve_path(self.model, flt.field_name)
        if resolved is None:
            return None
        model, field, crossed = resolved
        if field.is_relation and field.related_model is not None:
            return self._object_options(
                self._visible(request, field.related_model._default_manager.all()), "pk")
        if crossed and field.unique:
            return self._object_options(self._visible(request, model._default_manager.all()),
                                        field.attname)
        if isinstance(flt, df.CharFilter) and not crossed:
            column = model._default_manager.order_by(field.attname).values_list(
                field.attname, flat=True)
            values = list(column.distinct()[: self.choice_limit + 1])
            if len(values) > self.choice_limit:
                return None
            return [(str(v), str(v)) for v in values if v not in _BLANK]
        return None

    def _visible(self, request: HttpRequest, queryset: models.QuerySet) -> models.QuerySet:
        """``queryset`` without other tenants' rows, when its model belongs to a cluster
        (its registered admin names the path: ``cluster_field``)."""
        related_admin = self.model_admin.admin_site._registry.get(queryset.model)
        path = getattr(related_admin, "cluster_field", None)
        if path is None:
            return queryset
        return access_for(request.user, request).filter(queryset, path)

    def _object_options(self, queryset: models.QuerySet, attr: str) -> list[tuple[str, str]] | None:
        # In primary-key order (an index walk): sorting a big table by its Meta.ordering
        # only to learn that it is big would cost a scan.
        objects = list(queryset.select_related().order_by("pk")[: self.choice_limit + 1])
        if len(objects) > self.choice_limit:
            return None
        return [(str(getattr(obj, attr)), str(obj)) for obj in objects]

    # --- ListFilter API -----------------------------------------------------
    def has_output(self) -> bool:
        # Always: a filter without output would not be asked to filter.
        return True

    def expected_parameters(self) -> list[str]:
        return [self.parameter_name]

    def choices(self, changelist: Any) -> Iterator[dict[str, Any]]:
        name = self.parameter_name
        self.hidden_params = [
            (key, value)
            for key, values in changelist.filter_params.items() if key != name
            for value in values
        ]
        clear = changelist.get_query_string(remove=[name])
        if self.options is None:
            if self.values:
                yield {"selected": True, "query_string": clear,
                       "display": f"{', '.join(self.values)} ✖"}
            return
        yield {"selected": not self.values, "query_string": clear, "display": "All"}
        for value, label in self.options:
            yield {"selected": value in self.values,
                   "query_string": changelist.get_query_string({name: value}),
                   "display": label}

    @property
    def value_text(self) -> str:
        return ", ".join(self.values)

    def queryset(self, request: HttpRequest, queryset: models.QuerySet) -> models.QuerySet:
        if not self.values:
            return queryset
        data = QueryDict(mutable=True)
        data.setlist(self.parameter_name, self.values)
        filterset = self.filterset_class(data=data, queryset=queryset, request=request)
        if not filterset.is_valid():
            problems = "; ".join(
                f"{self.title}: {' '.join(errors)}" for errors in filterset.errors.values()
            )
            messages.error(request, f"Filter ignored — {problems}")
            raise IncorrectLookupParameters(problems)
        return filterset.qs


def filterset_list_filters(
    filterset_class: type[df.FilterSet], visible: Sequence[str] = ()
) -> list[type[FilterSetListFilter]]:
    """One list-filter class per filter of ``filterset_class`` (search ``q`` excepted).

    ``visible`` names the filters shown in the sidebar, in that order; the rest
    are applied from the URL and shown only while active.
    """
    declared = filterset_class.base_filters
    unknown = set(visible) - set(declared)
    if unknown:
        raise ValueError(f"{filterset_class.__name__} has no filter {sorted(unknown)}")
    names = [*visible, *(n for n in declared if n not in visible and n != "q")]
    classes: list[type[FilterSetListFilter]] = []
    for name in names:
        # A label the filterset declares, else the parameter's own name ("rack", not
        # django-filter's generated "Server rack").
        flt = declared[name]
        label = getattr(flt, "_label", None)
        if label is None or (flt.field_name and label == label_for_filter(
                filterset_class._meta.model, flt.field_name, flt.lookup_expr, flt.exclude)):
            label = name.replace("_", " ")
        title = capfirst(str(label))
        classes.append(type(
            f"{filterset_class.__name__}_{name}",
            (FilterSetListFilter,),
            {"filterset_class": filterset_class, "parameter_name": name, "title": title,
             "visible": name in visible},
        ))
    return classes
