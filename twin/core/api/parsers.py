"""The API's JSON parser: DRF's, with a nesting limit.

DRF's ``JSONParser`` hands the body to ``json.load``, which recurses once per
level: a body of 100,000 ``[`` raised ``RecursionError`` and answered 500.
:class:`TwinJSONParser` checks the depth first (``twin.core.nesting``) and
answers like any other malformed body: 400 ``{"detail": "JSON parse error -
nesting too deep: …"}``. Everything else (strict JSON: no ``NaN`` or
``Infinity``; the request's charset, text codecs only) is DRF's.
"""
from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser, get_encoding
from rest_framework.utils import json

from twin.core import nesting

__all__ = ["TwinJSONParser"]


class TwinJSONParser(JSONParser):
    """JSON bodies up to ``nesting.MAX_DEPTH`` levels deep."""

    def parse(self, stream: Any, media_type: str | None = None,
              parser_context: dict[str, Any] | None = None) -> Any:
        encoding = get_encoding(parser_context or {})  # text codecs only (DRF's rule)
        raw = stream.read() if stream is not None else b""
        try:
            text = raw.decode(encoding)
            parse_constant = json.strict_constant if self.strict else None
            return nesting.loads(text, parse_constant=parse_constant)
        except ValueError as exc:  # UnicodeDecodeError and nesting.TooDeep included
            raise ParseError(f"JSON parse error - {exc}") from None
