"""Filterset bases every app's ``filtersets.py`` builds on (one filterset per model,
used by the REST API and by the admin changelist alike).

Integer filters are whole numbers within the database's range for their column
(:class:`IntegerFilter`), refused with a 400 on the parameter otherwise.
django-filter's default for them is a decimal up to 10^50: ``?cluster=1.5``
matched cluster 1, and ``?cluster=99999999999999999999999`` overflowed the
database driver (a 500).
"""
from __future__ import annotations

import datetime as dt
from typing import Any

import django_filters as df
from django import forms
from django.core.exceptions import ValidationError
from django.db import connection, models
from django.db.models import Q, QuerySet
from django_filters.constants import EMPTY_VALUES
from django_filters.fields import IsoDateTimeField
from django_filters.filterset import FILTER_FOR_DBFIELD_DEFAULTS
from drf_spectacular.utils import extend_schema_field

from twin.core.rfc3339 import parse_rfc3339

__all__ = ["INT64_MAX", "INT64_MIN", "MAX_ID", "IdFilter", "IntegerFilter", "RelatedKeyFilter",
           "SearchFilterSet", "TwinFilterSet", "UtcDateTimeFilter"]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
"""The widest integer column (SQLite's INTEGER, PostgreSQL's bigint): ids, and any
integer filter whose column is not known."""

#: The largest id a filter takes: a signed 64-bit primary key.
MAX_ID = INT64_MAX


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


@extend_schema_field({"type": "integer", "minimum": 1, "maximum": MAX_ID})
class IdFilter(df.NumberFilter):
    """An object's id (a foreign key, or a method's ``card``/``device``): any id from 1
    to :data:`MAX_ID`, as the schema says. An id that names no row matches nothing —
    an empty list, as any other filter value that matches nothing — where
    django-filter's default for a foreign key answered 400 ("Select a valid choice")
    and its number filter took 0, 1.5 or 10**30 (a database overflow). Out of range
    or not an integer: 400 on the field."""

    field_class = forms.IntegerField

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(*args, **kwargs)

    def get_max_validator(self) -> None:
        return None  # the form field's own max_value (NumberFilter adds 1e50)


class _UtcDateTimeField(IsoDateTimeField):
    def to_python(self, value: Any) -> dt.datetime | None:
        if isinstance(value, str) and value.strip():
            parsed = parse_rfc3339(value.strip())
            if parsed is None:
                raise ValidationError("Enter an RFC 3339 date-time with its offset, e.g. "
                                      "2024-01-01T00:00:00Z.", code="invalid")
            return parsed
        return super().to_python(value)


class UtcDateTimeFilter(df.IsoDateTimeFilter):
    """An RFC 3339 date-time (what the schema's ``format: date-time`` means: an offset
    is required, ``T``/``Z`` in either case), compared in UTC. Any offset RFC 3339
    allows (up to ±23:59) is taken: PostgreSQL refuses offsets past ±15:59 in a query
    (a 500 for ``?since=2024-01-01T00:00:00+22:00``), so the value goes to it in UTC; a
    moment just outside Python's range (year 1 at +05:00) is clamped to its first or
    last moment, which compares the same with every stored time
    (:func:`twin.core.rfc3339.parse_rfc3339`)."""

    field_class = _UtcDateTimeField


class TwinFilterSet(df.FilterSet):
    """The base of every filterset: filters on integer columns are :class:`IntegerFilter` s
    bounded by the column; foreign keys in ``Meta.fields`` filter by id
    (:class:`IdFilter`), not by a choice among every row; date-times are compared in UTC
    (:class:`UtcDateTimeFilter`)."""

    FILTER_DEFAULTS = {
        **FILTER_FOR_DBFIELD_DEFAULTS,
        **{cls: {"filter_class": IntegerFilter, "extra": integer_bounds}
           for cls in FILTER_FOR_DBFIELD_DEFAULTS if issubclass(cls, models.IntegerField)},
        models.ForeignKey: {"filter_class": IdFilter},
        models.OneToOneField: {"filter_class": IdFilter},
        models.DateTimeField: {"filter_class": UtcDateTimeFilter},
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
