"""A paginator for tables of millions of rows: it never counts a whole table.

Django's admin asks its paginator for ``count`` on every changelist page. On a
million cards or five million links that is a sequential scan per click. This
paginator counts exactly only up to ``exact_count_limit`` rows (a ``COUNT`` over
a ``LIMIT`` subquery, so its cost is bounded whatever the table's size); past
that it estimates:

* unfiltered: PostgreSQL's ``pg_class.reltuples`` (kept by ANALYZE and
  autovacuum), or the primary-key span where the statistics are missing or on
  SQLite — two index look-ups;
* filtered, on PostgreSQL: the planner's row estimate (``EXPLAIN``); elsewhere
  an exact count of the filtered rows.

An estimated count is flagged (``estimated``) so the template says "about", and
pages past the estimate are served (empty) instead of raising.
"""
from __future__ import annotations

import json
from typing import Any

from django.core.paginator import EmptyPage, Page, Paginator
from django.db import connections
from django.db.models import QuerySet
from django.utils.functional import cached_property

__all__ = ["LargeTablePaginator", "estimated_table_rows"]


def estimated_table_rows(queryset: QuerySet) -> int | None:
    """Rows in the queryset's whole table, estimated without scanning it."""
    model = queryset.model
    db = queryset.db
    connection = connections[db]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass",
                [connection.ops.quote_name(model._meta.db_table)],
            )
            row = cursor.fetchone()
        if row and row[0] and row[0] > 0:
            return int(row[0])
    if model._meta.pk.get_internal_type() not in {"AutoField", "BigAutoField"}:
        return None
    pks = model._default_manager.using(db).order_by("pk").values_list("pk", flat=True)
    low, high = pks.first(), pks.last()
    if low is None or high is None:
        return 0
    return int(high) - int(low) + 1


def planner_rows(queryset: QuerySet) -> int | None:
    """PostgreSQL planner's estimate of the rows a (filtered) queryset returns."""
    connection = connections[queryset.db]
    if connection.vendor != "postgresql":
        return None
    sql, params = queryset.order_by().values("pk").query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        plan: Any = cursor.fetchone()[0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])


class LargeTablePaginator(Paginator):
    """Exact up to ``exact_count_limit`` rows, estimated beyond (see the module doc)."""

    #: Largest count that is always exact; counting this many rows is cheap everywhere.
    exact_count_limit = 10_000

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.estimated = False

    @cached_property
    def count(self) -> int:
        queryset = self.object_list
        if not isinstance(queryset, QuerySet):
            return super().count
        limit = self.exact_count_limit
        bounded = queryset.order_by().values("pk")[: limit + 1].count()
        if bounded <= limit:
            return bounded
        query = queryset.query
        if not query.where and not query.combinator:
            estimate = estimated_table_rows(queryset)
        else:
            estimate = planner_rows(queryset)
            if estimate is None:
                # Not PostgreSQL: the small-database case, where an exact count is cheap.
                return queryset.count()
        if estimate is None:
            return queryset.count()
        self.estimated = True
        return max(estimate, limit + 1)

    def validate_number(self, number: Any) -> int:
        if not self.estimated:
            return super().validate_number(number)
        # An estimate may fall short: serve any page, empty if past the end.
        try:
            return super().validate_number(number)
        except EmptyPage:
            if int(number) < 1:
                raise
            return int(number)

    def page(self, number: Any) -> Page:
        if not self.estimated:
            return super().page(number)
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        return self._get_page(self.object_list[bottom: bottom + self.per_page], number, self)
