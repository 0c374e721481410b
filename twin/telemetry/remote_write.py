"""Prometheus remote write 1.0: a snappy-compressed protobuf ``WriteRequest`` as samples.

What Prometheus, vmagent, Grafana Agent and the OpenTelemetry collector send to a
``remote_write`` URL (`the 1.0 specification
<https://prometheus.io/docs/specs/remote_write_spec/>`_): the body is the snappy
*block* format (no framing) of a protobuf ``prometheus.WriteRequest``::

    message WriteRequest { repeated TimeSeries timeseries = 1; … metadata = 3; }
    message TimeSeries   { repeated Label labels = 1; repeated Sample samples = 2;
                           … exemplars = 3; histograms = 4; }
    message Label        { string name = 1; string value = 2; }
    message Sample       { double value = 1; int64 timestamp = 2; }  // ms since epoch

Only those fields are read; any other field is skipped by its wire type, as
protobuf requires, so metadata-only requests and exemplars are harmless. The
decoder is hand-written over the wire format (varints, length-delimited fields,
fixed64 doubles) because the twin needs four messages of it, not the protobuf
runtime and generated code. Its cost is in the labels, which repeat from one
request to the next (a DCGM series is the same ten labels every scrape): a
series' label bytes are decoded once and kept in a bounded cache keyed by those
bytes, so a steady sender costs one dictionary lookup per series.

Mapping the series to cards is :func:`twin.telemetry.prometheus.batch_from_exposition`'s,
the same code as for DCGM text (``UUID``, else ``Hostname``/``hostname`` +
``gpu``; MIG slices ignored; DCGM's "not supported" sentinel dropped; NaN never a
reading). Prometheus' *staleness marker* (a NaN with the bit pattern
``0x7ff0000000000002``, sent when a series disappears) is no reading either and
is counted as dropped (``stale_marker``), not rejected.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import cramjam
import numpy as np

from twin.telemetry.prometheus import Sample

__all__ = [
    "STALE_NAN_BITS",
    "BadWriteRequest",
    "Series",
    "decode_samples",
    "decode_write_request",
    "decompress",
    "samples_of",
    "uncompressed_length",
]

STALE_NAN_BITS = 0x7FF0000000000002
"""Prometheus' staleness marker: a signalling NaN with this exact bit pattern
(``prometheus/model/value.StaleNaN``)."""

_DOUBLE = struct.Struct("<d")
_UINT64 = struct.Struct("<Q")
_LABEL_CACHE_MAX = 200_000
_label_cache: dict[bytes, tuple[str, dict[str, str], bool]] = {}
"""Label bytes → (metric name, labels, whether the bytes are Label fields only)."""


class BadWriteRequest(ValueError):
    """The body is no snappy-compressed ``WriteRequest``: a retry cannot fix it (400)."""


@dataclass(frozen=True)
class Series:
    """One ``TimeSeries``: its metric name, labels (``__name__`` included) and samples."""

    name: str
    labels: dict[str, str]
    values: list[float]
    timestamps_ms: list[int]
    stale: int = 0
    """Staleness markers among the samples (left out of ``values``)."""


# --------------------------------------------------------------------------
# snappy
# --------------------------------------------------------------------------

def uncompressed_length(body: bytes) -> int:
    """The uncompressed length a snappy block declares (its leading varint), read
    before decompressing so an oversized body is refused without inflating it."""
    try:
        value, _ = _varint(body, 0, 5)
    except (IndexError, BadWriteRequest):
        raise BadWriteRequest("the body is not snappy-compressed (block format): it does "
                              "not start with the uncompressed length") from None
    return value


def decompress(body: bytes) -> bytes:
    """The snappy block ``body`` decompressed (``BadWriteRequest`` if it is not one).

    Block format, not the framed stream format: the remote write specification
    says so, and a framed body (``sNaPpY`` stream identifier) is named as the
    mistake it is.
    """
    if body[:10] == b"\xff\x06\x00\x00sNaPpY":
        raise BadWriteRequest("the body is snappy's framed (stream) format; remote write "
                              "uses the block format")
    try:
        return bytes(cramjam.snappy.decompress_raw(body))
    except Exception as exc:  # noqa: BLE001 - cramjam raises its own DecompressionError
        raise BadWriteRequest(f"the body is not valid snappy (block format): {exc}") from None


# --------------------------------------------------------------------------
# protobuf wire format
# --------------------------------------------------------------------------

def _varint(buf: bytes, pos: int, max_bytes: int = 10) -> tuple[int, int]:
    """A base-128 varint at ``pos``: (value, position after it)."""
    result = 0
    shift = 0
    for _ in range(max_bytes):
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
    raise BadWriteRequest("a varint longer than 10 bytes")


def _skip(buf: bytes, pos: int, wire: int, end: int) -> int:
    """The position after a field of wire type ``wire`` whose value starts at ``pos``."""
    if wire == 0:
        _, pos = _varint(buf, pos)
    elif wire == 1:
        pos += 8
    elif wire == 2:
        n, pos = _varint(buf, pos)
        pos += n
    elif wire == 5:
        pos += 4
    else:  # 3 and 4 are proto2 groups, 6 and 7 do not exist
        raise BadWriteRequest(f"wire type {wire} at byte {pos}: not a WriteRequest")
    if pos > end:
        raise BadWriteRequest(f"a field runs past the end of its message (byte {end})")
    return pos


def _labels(key: bytes) -> tuple[str, dict[str, str], bool]:
    """(metric name, labels, only labels) of a series' label bytes, cached; the
    flag says the bytes held nothing but ``Label`` fields (see :func:`_fast_key`).

    A label as every sender writes it — ``0A n 0A a <name> 12 b <value>`` with
    lengths under 128 — is sliced out directly; anything else goes through
    :func:`_label_fields`, the general reader.
    """
    hit = _label_cache.get(key)
    if hit is not None:
        return hit
    labels: dict[str, str] = {}
    only = True
    pos, end = 0, len(key)
    try:
        while pos < end:
            n = key[pos + 1] if key[pos] == 0x0A else 0x80
            a = key[pos + 3] if n < 0x80 and key[pos + 2] == 0x0A else 0x80
            b_at = pos + 4 + a
            if (a < 0x80 and b_at + 1 < end and key[b_at] == 0x12 and key[b_at + 1] < 0x80
                    and a + key[b_at + 1] + 4 == n):
                name = key[pos + 4:b_at].decode("utf-8")
                stop = pos + 2 + n
                if stop > end:
                    raise BadWriteRequest("a label runs past the end of its series")
                labels[name] = key[b_at + 2:stop].decode("utf-8")
                pos = stop
                continue
            pos, label, is_label = _label_fields(key, pos, end)
            if is_label:
                labels[label[0]] = label[1]
            else:
                only = False
    except UnicodeDecodeError:
        raise BadWriteRequest("a label name or value is not UTF-8") from None
    hit = (labels.get("__name__", ""), labels, only)
    if len(_label_cache) >= _LABEL_CACHE_MAX:
        _label_cache.clear()
    _label_cache[key] = hit
    return hit


def _label_fields(key: bytes, pos: int, end: int) -> tuple[int, tuple[str, str], bool]:
    """One field at ``pos`` of a series' label bytes, read the general way:
    (position after it, (name, value), whether it was a ``Label``)."""
    tag, pos = _varint(key, pos)
    if tag != 0x0A:
        return _skip(key, pos, tag & 7, end), ("", ""), False
    n, pos = _varint(key, pos)
    stop = pos + n
    if stop > end:
        raise BadWriteRequest("a label runs past the end of its series")
    name = value = ""
    while pos < stop:
        ftag, pos = _varint(key, pos)
        if ftag in (0x0A, 0x12):
            m, pos = _varint(key, pos)
            if pos + m > stop:
                raise BadWriteRequest("a label's name or value runs past the label")
            text = key[pos:pos + m].decode("utf-8")
            pos += m
            if ftag == 0x0A:
                name = text
            else:
                value = text
        else:
            pos = _skip(key, pos, ftag & 7, stop)
    return stop, (name, value), True


def _series(buf: bytes, pos: int, end: int) -> Series:
    """One ``TimeSeries`` from ``buf[pos:end]``."""
    first = last = -1  # the labels' byte span (they come first, together, in practice)
    label_parts: list[bytes] | None = None  # only when something splits them
    values: list[float] = []
    stamps: list[int] = []
    stale = 0
    unpack_double = _DOUBLE.unpack_from
    while pos < end:
        tag = buf[pos]
        if tag == 0x0A:  # Label: its bytes (tag included) go into the cache key
            start = pos
            n = buf[pos + 1]
            if n < 0x80:
                pos += 2 + n
            else:
                n, pos = _varint(buf, pos + 1)
                pos += n
            if pos > end:
                raise BadWriteRequest("a label runs past the end of its series")
            if label_parts is not None:
                label_parts.append(buf[start:pos])
            elif first < 0:
                first, last = start, pos
            elif last == start:
                last = pos
            else:  # a sample or another field between two labels
                label_parts = [buf[first:last], buf[start:pos]]
        elif tag == 0x12:  # Sample
            n, pos = _varint(buf, pos + 1)
            stop = pos + n
            if stop > end:
                raise BadWriteRequest("a sample runs past the end of its series")
            value = 0.0
            bits = 0
            ts = 0
            while pos < stop:
                ftag = buf[pos]
                if ftag == 0x09:
                    if pos + 9 > stop:
                        raise BadWriteRequest("a sample's value runs past the sample")
                    value = unpack_double(buf, pos + 1)[0]
                    bits = _UINT64.unpack_from(buf, pos + 1)[0] if value != value else 0
                    pos += 9
                elif ftag == 0x10:
                    ts, pos = _varint(buf, pos + 1)
                    if ts >= 1 << 63:
                        ts -= 1 << 64
                else:
                    ftag, pos = _varint(buf, pos)
                    pos = _skip(buf, pos, ftag & 7, stop)
            if pos != stop:
                raise BadWriteRequest("a sample's fields run past the sample")
            if bits == STALE_NAN_BITS:
                stale += 1
            else:
                values.append(value)
                stamps.append(ts)
        else:
            tag, pos = _varint(buf, pos)
            if tag >> 3 == 0:
                raise BadWriteRequest(f"field number 0 at byte {pos}: not a WriteRequest")
            pos = _skip(buf, pos, tag & 7, end)
    key = b"".join(label_parts) if label_parts is not None else buf[max(first, 0):max(last, 0)]
    name, labels, _ = _labels(key)
    return Series(name, labels, values, stamps, stale)


SUFFIX = 18
"""Bytes of the sample Prometheus writes after a series' labels: tag, length 16,
the double (tag + 8 bytes) and a millisecond timestamp of this century (tag + a
6-byte varint)."""


def _fast_key(data: bytes, pos: int, stop: int) -> tuple[str, dict[str, str]] | None:
    """The labels of the series ``data[pos:stop]`` when it is the shape every
    Prometheus-compatible sender writes — labels only, then one sample of
    :data:`SUFFIX` bytes — else None (the caller walks it field by field).

    Exact, not a guess: the labels' bytes are cached only once parsed as nothing
    but ``Label`` fields, and a protobuf message is read from its start, so when
    those bytes are followed by a well-formed sample field that sample is the
    series' last field.
    """
    s0 = stop - SUFFIX
    if (s0 <= pos or data[s0] != 0x12 or data[s0 + 1] != 16 or data[s0 + 2] != 0x09
            or data[s0 + 11] != 0x10 or data[stop - 1] >= 0x80
            or not (data[s0 + 12] & data[s0 + 13] & data[s0 + 14] & data[s0 + 15]
                    & data[s0 + 16] & 0x80)):
        return None
    try:
        name, labels, only = _labels(data[pos:s0])
    except (BadWriteRequest, IndexError):  # the "sample" was the end of a label's value
        return None
    return (name, labels) if only else None


def _walk(data: bytes) -> tuple[list[Series | None], list[tuple[int, str, dict[str, str], int]]]:
    """The request's series: those walked field by field (``Series``), and for those
    of the usual shape (:func:`_fast_key`; None in the first list) their index,
    name, labels and the offset of their sample."""
    out: list[Series | None] = []
    fast: list[tuple[int, str, dict[str, str], int]] = []
    pos, end = 0, len(data)
    try:
        while pos < end:
            if data[pos] == 0x0A:  # TimeSeries (its length inline when 1 or 2 bytes)
                n = data[pos + 1]
                if n < 0x80:
                    pos += 2
                elif data[pos + 2] < 0x80:
                    n = (n & 0x7F) | data[pos + 2] << 7
                    pos += 3
                else:
                    n, pos = _varint(data, pos + 1)
                stop = pos + n
                if stop > end:
                    raise BadWriteRequest(f"a series of {n} bytes runs past the end of the "
                                          f"body ({end} bytes): truncated?")
                hit = _fast_key(data, pos, stop)
                if hit is not None:
                    fast.append((len(out), hit[0], hit[1], stop - SUFFIX))
                    out.append(None)
                else:
                    out.append(_series(data, pos, stop))
                pos = stop
            else:
                tag, pos = _varint(data, pos)
                if tag >> 3 == 0:
                    raise BadWriteRequest(f"field number 0 at byte {pos}: not a "
                                          f"WriteRequest")
                pos = _skip(data, pos, tag & 7, end)
    except (IndexError, struct.error):
        raise BadWriteRequest("the protobuf ends in the middle of a field: truncated "
                              "WriteRequest") from None
    return out, fast


def _gather(data: bytes, fast: list[tuple[int, str, dict[str, str], int]]
            ) -> tuple[list[float], list[int], list[bool]]:
    """(value, millisecond time, is a staleness marker) of each fast series' sample,
    read with numpy for all of them at once: a gather of the doubles' bytes, the
    6-byte varints assembled with shifts."""
    raw = np.frombuffer(data, dtype=np.uint8)
    offsets = np.fromiter((f[3] for f in fast), dtype=np.int64, count=len(fast))
    bits = raw[offsets[:, None] + np.arange(3, 11)].copy().view("<u8").ravel()
    ts_bytes = raw[offsets[:, None] + np.arange(12, 18)].astype(np.int64) & 0x7F
    stamps = (ts_bytes << (7 * np.arange(6, dtype=np.int64))).sum(axis=1)
    return (bits.view("<f8").tolist(), stamps.tolist(),
            (bits == STALE_NAN_BITS).tolist())


def decode_write_request(data: bytes) -> list[Series]:
    """The series of an uncompressed ``WriteRequest`` (``BadWriteRequest`` if it is
    not one: truncated, a field past its message, an unknown wire type, non-UTF-8
    labels). Series of the usual shape cost a dictionary lookup each (see
    :func:`_fast_key` and :func:`_gather`)."""
    out, fast = _walk(data)
    if fast:
        for (i, name, labels, _), v, t, st in zip(fast, *_gather(data, fast), strict=True):
            out[i] = Series(name, labels, [], [], 1) if st else Series(name, labels, [v], [t])
    return out  # type: ignore[return-value]  # every None was filled


def decode_samples(data: bytes) -> tuple[list[Sample], int, dict[str, int]]:
    """What the endpoint needs of a request, straight from the bytes: (its samples as
    :class:`~twin.telemetry.prometheus.Sample` for the DCGM mapping, the staleness
    markers left out, ``{"series", "samples"}`` counts). A sample's ``line`` is its
    series' index in the request, so a rejected sample can be found in what was sent."""
    out, fast = _walk(data)
    per: list[Any] = out
    stale = 0
    if fast:
        for (i, name, labels, _), v, t, st in zip(fast, *_gather(data, fast), strict=True):
            if st:
                stale += 1
                per[i] = ()
            else:
                per[i] = (Sample(name, labels, v, t, i),)
    for i, s in enumerate(out):
        if isinstance(s, Series):
            stale += s.stale
            per[i] = [Sample(s.name, s.labels, v, t, i)
                      for v, t in zip(s.values, s.timestamps_ms, strict=True)]
    samples = [sample for group in per for sample in group]
    return samples, stale, {"series": len(out), "samples": len(samples) + stale}


def samples_of(series: list[Series]) -> tuple[list[Sample], int]:
    """(the samples of decoded series as :class:`~twin.telemetry.prometheus.Sample`,
    staleness markers left out); the same as :func:`decode_samples` gives."""
    samples: list[Sample] = []
    stale = 0
    for i, s in enumerate(series):
        stale += s.stale
        for value, ts in zip(s.values, s.timestamps_ms, strict=True):
            samples.append(Sample(s.name, s.labels, value, ts, i))
    return samples, stale
