"""Pagination: cursors for the million-row tables, pages (without COUNT surprises) elsewhere."""
from rest_framework.pagination import CursorPagination, PageNumberPagination

__all__ = ["IdCursorPagination", "TwinPageNumberPagination"]


class TwinPageNumberPagination(PageNumberPagination):
    page_size = 100
    page_size_query_param = "limit"
    max_page_size = 1000


class IdCursorPagination(CursorPagination):
    """Keyset pagination on the primary key: constant time at any depth, no COUNT."""

    ordering = "id"
    page_size = 100
    page_size_query_param = "limit"
    max_page_size = 1000
