"""RFC 3339 date-times, exactly: what an OpenAPI ``format: date-time`` means.

Python's ``fromisoformat`` (and django-filter's ISO field on top of it) reads more
than RFC 3339 — a bare date, a space for the ``T``, no offset (a naive time,
read in the server's zone) — and less: an offset past ±15:59 that PostgreSQL
refuses, a moment that only exists in UTC after the offset is applied. The
API's query checks (``twin.core.api.strict``) and its date-time filters
(``twin.core.filtersets.UtcDateTimeFilter``) both read date-times here, so they
agree with each other and with the schema.
"""
from __future__ import annotations

import datetime as dt
import re

__all__ = ["parse_rfc3339"]

_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def parse_rfc3339(value: str) -> dt.datetime | None:
    """An RFC 3339 ``date-time`` (section 5.6: ``T`` or ``t``, an offset or ``Z``
    required, offsets up to ±23:59) as an aware datetime in UTC; ``None`` if
    ``value`` is not one. A moment outside Python's range (year 1 with a positive
    offset, year 9999 with a negative one) is clamped to the first or last
    representable moment, which compares the same with every stored time."""
    match = _RFC3339.fullmatch(value)
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(part) for part in match.groups()[:6])
    fraction, zone = match.group(7) or "", match.group(8).upper()
    offset = dt.timedelta(0)
    if zone != "Z":
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        if hours > 23 or minutes > 59:
            return None
        offset = (1 if zone[0] == "+" else -1) * dt.timedelta(hours=hours, minutes=minutes)
    try:
        naive = dt.datetime(year, month, day, hour, minute, min(second, 59),
                            int((fraction[1:] + "000000")[:6]) if fraction else 0)
    except ValueError:
        return None
    if second > 60:
        return None
    try:
        return (naive - offset).replace(tzinfo=dt.UTC)
    except OverflowError:
        return (dt.datetime.min if offset > dt.timedelta(0) else dt.datetime.max
                ).replace(tzinfo=dt.UTC)
