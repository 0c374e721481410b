"""A remote-write 1.0 *encoder* for the tests: protobuf wire format by the book.

Written independently of the decoder under test (``twin.telemetry.remote_write``)
from the specification's message definitions; the real-sender test
(``test_remote_write_prometheus.py``) checks both against Prometheus itself.
"""
from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping

import cramjam

__all__ = ["STALE_NAN", "encode_request", "field", "snappy", "varint"]

STALE_NAN = struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000002))[0]


def varint(value: int) -> bytes:
    """Base-128 varint; negative int64 as its two's complement (ten bytes)."""
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def label(name: str, value: str) -> bytes:
    return field(1, field(1, name.encode()) + field(2, value.encode()))


def sample(value: float, ts_ms: int) -> bytes:
    body = varint(1 << 3 | 1) + struct.pack("<d", value) + varint(2 << 3 | 0) + varint(ts_ms)
    return field(2, body)


def series(labels: Mapping[str, str], samples: Iterable[tuple[float, int]]) -> bytes:
    """One ``TimeSeries`` (labels sorted by name, as Prometheus sends them)."""
    body = b"".join(label(k, v) for k, v in sorted(labels.items()))
    body += b"".join(sample(v, t) for v, t in samples)
    return field(1, body)


def encode_request(items: Iterable[tuple[Mapping[str, str], Iterable[tuple[float, int]]]]
                   ) -> bytes:
    """An uncompressed ``WriteRequest`` of ``(labels incl. __name__, [(value, ts_ms)])``."""
    return b"".join(series(labels, samples) for labels, samples in items)


def snappy(data: bytes) -> bytes:
    """Snappy block format, as remote write sends it."""
    return bytes(cramjam.snappy.compress_raw(data))
