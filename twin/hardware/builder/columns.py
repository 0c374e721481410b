"""Column values of generated rows: numpy arrays or constants, per table column.

Names, serials and UUIDs are built for a whole batch at once (fixed-width byte
strings, no Python loop over rows); a ``Block`` carries one table's columns for
one batch to a writer.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Block", "Values", "compose", "digits", "ordered_uuids", "uuid_hex"]

Values = dict[str, Any]


def digits(values: np.ndarray | int, width: int) -> int:
    """Width needed to print ``values`` zero-padded to at least ``width``."""
    top = int(np.max(values)) if np.size(values) else 0
    return max(width, len(str(top)))


def compose(n: int, *parts: bytes | tuple[np.ndarray, int]) -> np.ndarray:
    """Fixed-width byte strings built without a Python loop over rows.

    ``parts`` are constant byte strings or ``(integers, width)`` printed
    zero-padded: ``compose(3, b"sn", (np.arange(3), 4))`` →
    ``[b"sn0000", b"sn0001", b"sn0002"]``.
    """
    width = sum(len(p) if isinstance(p, bytes) else p[1] for p in parts)
    buf = np.empty((n, width), dtype=np.uint8)
    col = 0
    for part in parts:
        if isinstance(part, bytes):
            buf[:, col:col + len(part)] = np.frombuffer(part, dtype=np.uint8)
            col += len(part)
            continue
        numbers, w = part
        rest = np.asarray(numbers, dtype=np.int64).copy()
        for k in range(w - 1, -1, -1):
            buf[:, col + k] = 48 + rest % 10
            rest //= 10
        col += w
    return buf.reshape(-1).view(f"S{width}") if n else np.empty(0, dtype=f"S{width}")


def ordered_uuids(counter: np.ndarray, unix_ms: int) -> np.ndarray:
    """Version-7 UUIDs (RFC 9562) as 16-byte strings, in ``counter`` order.

    48-bit Unix milliseconds, then a 30-bit counter (the card's position in
    the build: RFC 9562's "fixed bit-length dedicated counter") in rand_a and
    the top of rand_b, then 44 random bits. Unique across builds (time and
    random bits) and sorted within one, so the unique index on ``uuid`` is
    appended to instead of written at random pages (v4 UUIDs made the card
    COPY markedly slower at a million rows).
    """
    n = len(counter)
    c = np.asarray(counter, dtype=np.uint64)
    if n and int(c.max()) >= 1 << 30:
        raise ValueError("UUID counter exceeds 30 bits")
    raw = np.frombuffer(os.urandom(16 * n), dtype=np.uint8).reshape(n, 16).copy()
    for i in range(6):
        raw[:, i] = (unix_ms >> (8 * (5 - i))) & 0xFF
    raw[:, 6] = 0x70 | ((c >> 26) & 0x0F).astype(np.uint8)
    raw[:, 7] = ((c >> 18) & 0xFF).astype(np.uint8)
    raw[:, 8] = 0x80 | ((c >> 12) & 0x3F).astype(np.uint8)
    raw[:, 9] = ((c >> 4) & 0xFF).astype(np.uint8)
    raw[:, 10] = (((c & 0x0F) << 4).astype(np.uint8)) | (raw[:, 10] & 0x0F)
    return raw.reshape(-1).view("S16")


_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def uuid_hex(values: np.ndarray) -> np.ndarray:
    """16-byte UUIDs as 32-character hex strings (Django's SQLite storage).

    Not ``bytes.hex()`` per item: numpy drops trailing NUL bytes of ``S16``
    items, which would shorten a UUID ending in ``00``.
    """
    raw = values.view(np.uint8).reshape(-1, 16)
    out = np.empty((len(raw), 32), dtype=np.uint8)
    out[:, 0::2] = _HEX[raw >> 4]
    out[:, 1::2] = _HEX[raw & 15]
    return out.reshape(-1).view("S32")


@dataclass
class Block:
    """Rows of one table with column values; every text column of a block has
    one width (the binary packer relies on it)."""

    table: str
    n: int
    values: Values
