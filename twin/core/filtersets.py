"""Filterset bases every app's ``filtersets.py`` builds on (one filterset per model,
used by the REST API and by the admin changelist alike).

Integer filters are whole numbers within the database's range for their column
(:class:`IntegerFilter`), refused with a 400 on the parameter otherwise.
django-filter's default for them is a decimal up to 10^50: ``?cluster=1.5``
matched cluster 1, and ``?cluster=99999999999999999999999`` overflowed the
database driver (a 500).
"""
from __future__ import annotations

from typing import Any

import django_filters as df
from django import forms
from django.db import connection, models
from django.db.models import Q, QuerySet
from django_filters.constants import EMPTY_VALUES
from django_filters.filterset import FILTER_FOR_DBFIELD_DEFAULTS
from drf_spectacular.utils import extend_schema_field

__all__ = ["INT64_MAX", "INT64_MIN", "IntegerFilter", "RelatedKeyFilter", "SearchFilterSet",
           "TwinFilterSet"]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
"""The widest integer column (SQLite's INTEGER, PostgreSQL's bigint): ids, and any
integer filter whose column is not known."""


class IntegerFilter(df.NumberFilter):
    """A whole number from ``min_value`` to ``max_value`` (default: 64-bit).

    Out of range or not whole → 400 ``{"<param>": ["Ensure this value is less than
    or equal to …" | "Enter a whole number."]}``; the schema says the same.
    """

    field_class = forms.IntegerField

    def __init__(self, *args: Any, min_value: int = INT64_MIN, max_value: int = INT64_MAX,
                 **kwargs: Any) -> None:
        super().__init__(*args, min_value=min_value, max_value=max_value, **kwargs)
        extend_schema_field({"type": "integer", "format": "int64", "minimum": min_value,
                             "maximum": max_value})(self)

    def get_max_validator(self) -> None:
        return None  # the form field's own max_value (NumberFilter adds 1e50)


def integer_bounds(field: models.Field) -> dict[str, int]:
    """``min_value`` and ``max_value`` of the database's column for ``field``."""
    low, high = connection.ops.integer_field_range(field.get_internal_type())
    return {"min_value": INT64_MIN if low is None else max(low, INT64_MIN),
            "max_value": INT64_MAX if high is None else min(high, INT64_MAX)}


class TwinFilterSet(df.FilterSet):
    """A filterset whose filters on integer columns are :class:`IntegerFilter` s."""

    FILTER_DEFAULTS = {
        **FILTER_FOR_DBFIELD_DEFAULTS,
        **{cls: {"filter_class": IntegerFilter, "extra": integer_bounds}
           for cls in FILTER_FOR_DBFIELD_DEFAULTS if issubclass(cls, models.IntegerField)},
    }


class SearchFilterSet(TwinFilterSet):
    """Adds ``q``: a case-insensitive match on the model's ``search_fields``."""

    q = df.CharFilter(method="search", label="Search")
    search_fields: tuple[str, ...] = ("name",)

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        value = value.strip()
        if not value:
            return queryset
        query = Q()
        for field in self.search_fields:
            query |= Q(**{f"{field}__icontains": value})
        return queryset.filter(query)


class RelatedKeyFilter(df.CharFilter):
    """``field_name="<fk>__<unique column>"``, looked up first, then filtered on ``<fk>_id``.

    A join on the related table hides from the planner how rare the value is:
    ``/api/cards/?accelerator=<a type no card has>`` walked all 1M cards in id
    order (0.8 s). Resolved to ids first, it is an index probe on the foreign
    key (9 ms). The admin still sees an ordinary ``fk__column`` filter.
    """

    def filter(self, qs: QuerySet, value: str) -> QuerySet:
        if value in EMPTY_VALUES:
            return qs
        relation, _, column = self.field_name.rpartition("__")
        related = qs.model._meta.get_field(relation).related_model
        ids = list(related._default_manager.filter(**{column: value.strip()})
                   .values_list("pk", flat=True)[:1000])
        return self.get_method(qs)(**{f"{relation}__in": ids})
