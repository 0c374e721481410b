"""Filterset bases every app's ``filtersets.py`` builds on (one filterset per model,
used by the REST API and by the admin changelist alike)."""
from __future__ import annotations

import django_filters as df
from django.db.models import Q, QuerySet
from django_filters.constants import EMPTY_VALUES

__all__ = ["RelatedKeyFilter", "SearchFilterSet"]


class SearchFilterSet(df.FilterSet):
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
