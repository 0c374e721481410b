"""Prometheus text exposition (format 0.0.4) as the DCGM exporter writes it.

A line-by-line parser rather than ``prometheus_client``'s: that one stops at
the first broken line, and the twin must keep every parseable line and report
the broken ones (line number, text, reason).

Mapping to cards: the ``UUID`` label (``GPU-<uuid>``) when present, else the
host label (``Hostname`` in some exporter versions, ``hostname`` in others)
with the ``gpu`` index (the server's slot). Samples of MIG instances
(a non-empty ``GPU_I_ID``) describe a slice, not the card, and are ignored.
DCGM's "not supported" sentinel (9223372036854775794) and its other blank
values are dropped; NaN is valid in the format but never becomes a reading, and
``+Inf``/``-Inf`` are rejected as infinite (they are no sentinel, though a
float comparison would put ``+Inf`` past the largest one).
"""
from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from twin.telemetry import state
from twin.telemetry.ingest import (
    MAX_LISTED,
    Batch,
    time_window,
    timestamp_problem,
)
from twin.telemetry.metrics import DCGM_FIELDS, is_dcgm_blank, validate_value

__all__ = ["Sample", "batch_from_exposition", "parse_exposition"]

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}
MAX_BROKEN_LISTED = 200


class Sample(NamedTuple):
    """One sample line (a tuple: the remote-write path makes one per sample)."""

    name: str
    labels: dict[str, str]
    value: float
    timestamp_ms: int | None
    line: int


class _LineError(ValueError):
    pass


def _parse_labels(text: str, pos: int) -> tuple[dict[str, str], int]:
    """Labels from ``text[pos] == '{'``; returns them and the position after ``}``."""
    labels: dict[str, str] = {}
    pos += 1
    n = len(text)
    while True:
        while pos < n and text[pos] in " \t":
            pos += 1
        if pos < n and text[pos] == "}":
            return labels, pos + 1
        m = _LABEL_NAME.match(text, pos)
        if not m:
            raise _LineError(f"bad label name at column {pos + 1}")
        name = m.group(0)
        pos = m.end()
        while pos < n and text[pos] in " \t":
            pos += 1
        if pos >= n or text[pos] != "=":
            raise _LineError(f"expected '=' after label {name}")
        pos += 1
        while pos < n and text[pos] in " \t":
            pos += 1
        if pos >= n or text[pos] != '"':
            raise _LineError(f"label {name} value must be quoted")
        pos += 1
        chars = []
        while True:
            if pos >= n:
                raise _LineError(f"unterminated value of label {name}")
            c = text[pos]
            if c == "\\":
                if pos + 1 >= n or text[pos + 1] not in _ESCAPES:
                    raise _LineError(f"bad escape in label {name}")
                chars.append(_ESCAPES[text[pos + 1]])
                pos += 2
                continue
            if c == '"':
                pos += 1
                break
            chars.append(c)
            pos += 1
        if name in labels:
            raise _LineError(f"label {name} repeated")
        labels[name] = "".join(chars)
        while pos < n and text[pos] in " \t":
            pos += 1
        if pos < n and text[pos] == ",":
            pos += 1
            continue
        if pos < n and text[pos] == "}":
            return labels, pos + 1
        raise _LineError("expected ',' or '}' in labels")


def _parse_value(token: str) -> float:
    low = token.lower()
    if low in ("nan",):
        return math.nan
    if low in ("+inf", "inf"):
        return math.inf
    if low == "-inf":
        return -math.inf
    try:
        return float(token)
    except ValueError:
        raise _LineError(f"value {token!r} is not a number") from None


def parse_line(line: str, lineno: int) -> Sample | None:
    """One exposition line as a sample (None for comments and blank lines)."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    m = _NAME.match(text)
    if not m:
        raise _LineError("line does not start with a metric name")
    name = m.group(0)
    pos = m.end()
    labels: dict[str, str] = {}
    if pos < len(text) and text[pos] == "{":
        labels, pos = _parse_labels(text, pos)
    rest = text[pos:].split()
    if not rest:
        raise _LineError("no value")
    if len(rest) > 2:
        raise _LineError("trailing text after the timestamp")
    value = _parse_value(rest[0])
    ts_ms = None
    if len(rest) == 2:
        try:
            ts_ms = int(rest[1])
        except ValueError:
            raise _LineError(f"timestamp {rest[1]!r} is not an integer") from None
    return Sample(name, labels, value, ts_ms, lineno)


def parse_exposition(text: str) -> tuple[list[Sample], list[dict[str, Any]], int]:
    """(samples, broken lines, count of broken lines) of an exposition."""
    samples: list[Sample] = []
    broken: list[dict[str, Any]] = []
    n_broken = 0
    for lineno, line in _lines(text):
        try:
            sample = parse_line(line, lineno)
        except _LineError as exc:
            n_broken += 1
            if len(broken) < MAX_BROKEN_LISTED:
                broken.append({"line": lineno, "text": line[:200], "reason": str(exc)})
            continue
        if sample is not None:
            samples.append(sample)
    return samples, broken, n_broken


def _lines(text: str) -> Iterator[tuple[int, str]]:
    for i, line in enumerate(text.split("\n"), start=1):
        yield i, line.rstrip("\r")


def _card_of(labels: dict[str, str], lay: state.Layout) -> tuple[int, str]:
    uuid = labels.get("UUID") or labels.get("uuid")
    if uuid:
        key = uuid.lower().removeprefix("gpu-")
        return lay.uuid_map().get(key, -1), f"UUID={uuid}"
    host = labels.get("Hostname") or labels.get("hostname")
    gpu = labels.get("gpu")
    if host and gpu is not None:
        try:
            g = int(gpu)
        except ValueError:
            return -1, f"{host}/gpu{gpu}"
        return lay.host_map().get((host.lower(), g), -1), f"{host}/gpu{gpu}"
    return -2, ""


def batch_from_exposition(samples: list[Sample], lay: state.Layout,
                          now: float | None = None, *, where: str = "line") -> Batch:
    """Map DCGM samples to cards and metrics; reject what is not a reading.

    A rejected sample is reported with its ``Sample.line`` under the key ``where``
    (``line`` of an exposition; ``series``, the index of a remote-write series).
    """
    now = time.time() if now is None else now
    batch = Batch(cluster_id=lay.cluster_id, version=lay.version, ts=now,
                  metric_idx=np.zeros(0, np.uint8), values=np.zeros((0, 0), np.float32))
    cells: dict[int, dict[int, float]] = {}
    card_ts: dict[int, float] = {}
    dropped = {"not_supported": 0, "unmapped_metric": 0, "mig_instance": 0}
    window = time_window()

    def reject(item: dict[str, Any]) -> None:
        batch.reject(item)

    for s in samples:
        mapped = DCGM_FIELDS.get(s.name)
        if mapped is None:
            dropped["unmapped_metric"] += 1
            continue
        if s.labels.get("GPU_I_ID"):
            dropped["mig_instance"] += 1
            continue
        j, scale = mapped
        if math.isfinite(s.value) and is_dcgm_blank(s.value):
            dropped["not_supported"] += 1
            continue
        ordinal, ref = _card_of(s.labels, lay)
        if ordinal == -2:
            reject({where: s.line, "metric": s.name,
                    "reason": "no UUID label and no Hostname/hostname + gpu labels"})
            continue
        if ordinal < 0:
            reject({where: s.line, "card": ref, "metric": s.name,
                    "reason": "unknown card: not in this cluster"})
            continue
        if math.isnan(s.value):
            reject({where: s.line, "card": ref, "metric": s.name, "value": "NaN",
                    "reason": "NaN is not a reading"})
            continue
        value = s.value * scale
        problem = validate_value(j, value)
        if problem:
            reject({where: s.line, "card": ref, "metric": s.name,
                    "value": s.value if math.isfinite(s.value) else str(s.value),
                    "reason": problem})
            continue
        ts = s.timestamp_ms / 1000.0 if s.timestamp_ms is not None else now
        problem = timestamp_problem(ts, now, window)
        if problem:
            reject({where: s.line, "card": ref, "metric": s.name, "reason": problem})
            continue
        cells.setdefault(ordinal, {})[j] = value
        card_ts[ordinal] = max(card_ts.get(ordinal, ts), ts)
    batch.dropped = {k: v for k, v in dropped.items() if v}
    ords = np.array(sorted(cells), dtype=np.int32)
    used = sorted({j for v in cells.values() for j in v})
    col = {j: n for n, j in enumerate(used)}
    matrix = np.full((len(used), len(ords)), np.nan, dtype=np.float32)
    for k, o in enumerate(ords):
        for j, v in cells[int(o)].items():
            matrix[col[j], k] = v
    batch.metric_idx = np.array(used, dtype=np.uint8)
    batch.values = matrix
    batch.ordinals = ords
    times = np.array([card_ts[int(o)] for o in ords], dtype=np.float64)
    if len(times) and not np.all(times == now):
        batch.card_ts = times
    if len(batch.rejected) > MAX_LISTED:
        del batch.rejected[MAX_LISTED:]
    return batch
