"""How deep a client's document may nest: JSON and msgpack bodies, websocket messages.

Python's ``json`` decoder, and every function that later walks a decoded
document (``repr``, ``json.dumps`` of an error that echoes a value, a
serializer), recurses once per level. A body of 100,000 ``[`` made
``json.loads`` raise ``RecursionError`` (a 500, or a websocket consumer that
died with its connection), and a document just under the interpreter's limit
would fail later, wherever it is walked. None of our documents needs more than
a few levels, so anything deeper than :data:`MAX_DEPTH` is refused before it
is decoded (JSON) or right after (msgpack), with :class:`TooDeep` — a
``ValueError``, so callers that already turn bad JSON into a 400 need nothing
more.

The JSON check does not parse: it keeps only the brackets and the quotes
(``bytes.translate``, after deleting escaped backslashes and quotes), drops
the brackets inside strings and takes the running sum of the rest, in numpy:
about a tenth of the time ``json.loads`` takes on the same body. A body with
no more brackets than the limit (a columnar telemetry batch: a handful) skips
even that.
"""
from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

__all__ = ["MAX_DEPTH", "TooDeep", "check_depth", "check_json_depth", "loads"]

MAX_DEPTH = 64
"""Levels of arrays and objects a client document may have (ours use at most 5)."""

_KEEP = b'[]{}"'
_DELETE = bytes(b for b in range(256) if b not in _KEEP)
_STEP = np.zeros(256, dtype=np.int32)
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1
_IN_STRING = re.compile(rb'"[^"]*"')


_CONTAINERS = (list, dict, tuple)
_SCALARS = {int, float, str, bytes, bool, type(None)}


class TooDeep(ValueError):
    """A document nested deeper than the limit."""

    def __init__(self, limit: int = MAX_DEPTH) -> None:
        super().__init__(f"nesting too deep: more than {limit} levels of arrays and objects")
        self.limit = limit


def check_json_depth(data: bytes | bytearray | memoryview | str, limit: int = MAX_DEPTH) -> None:
    """Raise :class:`TooDeep` if the JSON text ``data`` nests deeper than ``limit``.

    Malformed text is not this function's business (``json.loads`` says what is
    wrong with it); it only never lets a deep one reach the recursive decoder.
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return
    # Escaped backslashes, then escaped quotes, go first: every quote left opens or
    # closes a string. Then only brackets and quotes are kept (bytes.translate);
    # adjacent quotes go in pairs (no bracket between them; the parity of every
    # other quote is kept), then what remains between quotes (brackets inside
    # strings), then a last unmatched quote.
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    marks = raw.translate(None, _DELETE).replace(b'""', b"")
    brackets = _IN_STRING.sub(b"", marks).replace(b'"', b"")
    steps = _STEP[np.frombuffer(brackets, dtype=np.uint8)]
    if len(steps) and int(np.cumsum(steps).max()) > limit:
        raise TooDeep(limit)


def loads(data: bytes | bytearray | str, *, max_depth: int = MAX_DEPTH, **kwargs: Any) -> Any:
    """``json.loads`` that refuses documents deeper than ``max_depth`` (:class:`TooDeep`)."""
    check_json_depth(data, max_depth)
    try:
        return json.loads(data, **kwargs)
    except RecursionError:  # not reachable after the check; kept as the last guard
        raise TooDeep(max_depth) from None


def check_depth(document: Any, limit: int = MAX_DEPTH) -> None:
    """Raise :class:`TooDeep` if a decoded document (msgpack) nests deeper than ``limit``.

    Iterative (no recursion of its own). A list of numbers is looked at in one
    C-level pass (``set(map(type, …))``), so a 65,536-value column costs about a
    millisecond.
    """
    if not isinstance(document, _CONTAINERS):
        return
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        if set(map(type, children)) <= _SCALARS:
            continue
        nested = [child for child in children if isinstance(child, _CONTAINERS)]
        if nested and depth >= limit:
            raise TooDeep(limit)
        stack.extend((child, depth + 1) for child in nested)
