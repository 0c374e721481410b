"""Pagination: cursors for the million-row tables, pages (without COUNT surprises) elsewhere.

Both document their parameters with the bounds they honour: ``page`` from 1
(page 0 or one past the end is a 404), ``limit`` from 1 to ``max_page_size``
(a larger one is capped, a smaller or malformed one gives the default size).
"""
from typing import Any

from rest_framework.pagination import CursorPagination, PageNumberPagination

__all__ = ["HistoryPagination", "IdCursorPagination", "TwinPageNumberPagination"]


def _bounded(parameters: list[dict[str, Any]], bounds: dict[str, dict[str, int]]
             ) -> list[dict[str, Any]]:
    for parameter in parameters:
        parameter["schema"].update(bounds.get(parameter["name"], {}))
    return parameters


class TwinPageNumberPagination(PageNumberPagination):
    page_size = 100
    page_size_query_param = "limit"
    max_page_size = 1000

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return _bounded(super().get_schema_operation_parameters(view), {
            self.page_query_param: {"minimum": 1},
            self.page_size_query_param: {"minimum": 1, "maximum": self.max_page_size}})


class HistoryPagination(TwinPageNumberPagination):
    """The history's pages: ``limit`` up to 1,500 rows, so a chart gets a day of
    minutes (1,440 rows) — or any window, whose rows the VictoriaMetrics path keeps
    to at most 1,500 — in one request, not 2–15 requests that each compute the
    whole window again."""

    max_page_size = 1_500


class IdCursorPagination(CursorPagination):
    """Keyset pagination on the primary key: constant time at any depth, no COUNT."""

    ordering = "id"
    page_size = 100
    page_size_query_param = "limit"
    max_page_size = 1000

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return _bounded(super().get_schema_operation_parameters(view), {
            self.page_size_query_param: {"minimum": 1, "maximum": self.max_page_size}})
