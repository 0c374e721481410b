"""DRF's exception handler, with conflicts told apart from bad input.

A request can be well formed — every value of the type, range and format the
schema documents — and still be refused because of what is stored: the name or
the row/slot is taken, the id it refers to names no row. That is not bad input
(400: the client must change the request) but a conflict with the current state
(409: the state must change first), and a client that generated a request from the
schema must be able to tell them apart.

Serializers and models keep raising ``ValidationError`` as they always did,
with per-field messages; this handler looks at the error codes, and when every
message is one of :data:`CONFLICT_CODES` the answer is **409** on a write
(**404** on a read: what the query names does not exist), with the same
per-field body plus ``detail``. A request that is also wrong in itself stays 400.
"""
from __future__ import annotations

from typing import Any

from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler

__all__ = ["CONFLICT_CODES", "is_conflict", "twin_exception_handler"]

#: Error codes that say "conflicts with what is stored", not "malformed": uniqueness
#: (DRF's validators, ``full_clean()``'s unique checks and constraints: a name or a
#: row/slot taken), an id that names no row (``PrimaryKeyRelatedField``), a slot
#: occupied, a deletion's ``confirm`` that is not the object's stored name, a write
#: that would take a rack over its power budget or an element above it (PDU, CDU,
#: feed) over its rating (``over_budget``: the racks' stored draw is the conflict;
#: ``allow_over_budget`` or a change to what is stored resolves it).
CONFLICT_CODES = frozenset({"unique", "unique_together", "does_not_exist", "occupied",
                            "does_not_match", "over_budget"})

_SAFE = {"GET", "HEAD", "OPTIONS"}


def _codes(detail: Any) -> list[str | None]:
    if isinstance(detail, dict):
        return [code for value in detail.values() for code in _codes(value)]
    if isinstance(detail, list):
        return [code for value in detail for code in _codes(value)]
    return [getattr(detail, "code", None)]


def is_conflict(exc: ValidationError) -> bool:
    """Every message of ``exc`` is about the stored data (:data:`CONFLICT_CODES`)."""
    codes = _codes(exc.detail)
    return bool(codes) and all(code in CONFLICT_CODES for code in codes)


def twin_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    response = exception_handler(exc, context)
    if response is None or not isinstance(exc, ValidationError) or not is_conflict(exc):
        return response
    request = context.get("request")
    read = request is not None and request.method in _SAFE
    body = response.data if isinstance(response.data, dict) else \
        {"non_field_errors": response.data}
    detail = ("What the request names does not exist." if read else
              "Conflicts with the stored data (see the fields): nothing was written.")
    response.data = {"detail": detail, **body}
    response.status_code = status.HTTP_404_NOT_FOUND if read else status.HTTP_409_CONFLICT
    return response
