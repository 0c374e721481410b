"""Ingestion: parse and validate a batch (:mod:`.enqueue` then puts it on a Redis stream).

The HTTP views (``twin.telemetry.api.ingest_views``) call these functions; the Celery
workers (``twin.telemetry.processing``) consume the stream. Everything a
worker needs is resolved here, while the agent still waits for its answer:
cards are mapped to dense ordinals of the cluster's layout (an unknown card
is a *rejected sample*, listed in the response), values are checked against
each metric's valid range, timestamps against a window around now. A batch
that cannot be read at all raises :class:`BadBatch` (HTTP 400) before
anything is stored.

Formats (all carry the agent's sequence number ``seq``)
--------------------------------------------------------

Row form (JSON or msgpack), for humans and scripts::

    {"seq": 41, "ts": 1718000000.0,            # ts optional: default now
     "cards": [{"card": 123, "gpu_util": 97, "power_w": 655.5},
               {"uuid": "GPU-6c5…", "gpu_temp_c": 71},
               {"host": "node0", "gpu": 3, "ts": 1717999999.5, "metrics": {"power_w": 640}}]}

Columnar form (JSON or msgpack), for high-rate agents: one array per metric,
cards in a declared order — a slice of the cluster layout (``range`` plus the
``layout`` version from ``GET …/layout/``), or explicit ``ids`` / ``uuids``::

    {"seq": 42, "ts": 1718000001.0,
     "cards": {"range": [0, 4096], "layout": "9f2c01ab"},
     "columns": {"gpu_util": [97, 95, …], "power_w": <bytes: float32 LE × 4096>}}

In msgpack a column may be a ``bin`` of little-endian float32 (the fast path:
no per-value decoding); there NaN means "no reading" (float32 has no null).
In lists ``null`` means no reading and ``NaN`` is rejected. Card ``ids`` may
be a ``bin`` of little-endian int64.
"""
from __future__ import annotations

import datetime as dt
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any

import msgpack
import numpy as np
from django.conf import settings

from twin.core import nesting
from twin.telemetry import state
from twin.telemetry.metrics import HI, LO, METRIC_INDEX, validate_value

__all__ = [
    "MAX_LISTED",
    "MAX_SEQ",
    "BadBatch",
    "Batch",
    "check_seq",
    "decode_document",
    "parse_native",
    "parse_seq",
    "parse_seq_header",
    "parse_timestamp",
    "time_window",
]

MAX_LISTED = 1000
"""Rejected samples listed one by one in a response; the rest are only counted."""
ID_MIN, ID_MAX = -(2**63), 2**63 - 1
"""Card ids are 64-bit (the database's and the layout's ``int64``): an id outside is
no id at all, refused with a 400 on its field (an id inside that names no card of
the cluster is a rejected sample)."""

IDENTITY_KEYS = {"card", "uuid", "host", "hostname", "gpu", "ts", "metrics", "serial"}


class BadBatch(Exception):
    """The body cannot be read as a batch: nothing is stored (HTTP ``status``)."""

    def __init__(self, message: str, *, field: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.status = status

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"detail": self.message}
        if self.field:
            out["field"] = self.field
        return out


@dataclass
class Batch:
    """A validated batch: values of some metrics for some cards of one cluster."""

    cluster_id: int
    version: str
    ts: float
    metric_idx: np.ndarray  # uint8 (M,)
    values: np.ndarray  # float32 (M, K); NaN: no value
    start: int | None = None  # cards are ordinals start … start + K − 1
    ordinals: np.ndarray | None = None  # int32 (K,) when not a contiguous range
    card_ts: np.ndarray | None = None  # float64 (K,) when cards carry their own time
    rejected: list[dict[str, Any]] = field(default_factory=list)
    rejected_total: int = 0
    dropped: dict[str, int] = field(default_factory=dict)

    def reject(self, item: dict[str, Any], count: int = 1) -> None:
        self.rejected_total += count
        if len(self.rejected) < MAX_LISTED:
            self.rejected.append(item)

    @property
    def n_cards(self) -> int:
        return int(self.values.shape[1])

    def accepted_cards(self) -> int:
        if self.values.size == 0:
            return 0
        return int(np.isfinite(self.values).any(axis=0).sum())

    def accepted_values(self) -> int:
        return int(np.isfinite(self.values).sum())

    def payload(self, agent_id: int | None) -> bytes:
        """The stream entry: msgpack of raw arrays (see ``processing.apply_entry``)."""
        return msgpack.packb({
            "c": self.cluster_id, "v": self.version, "t": self.ts, "a": agent_id,
            "s": self.start,
            "o": None if self.ordinals is None else self.ordinals.astype("<i4").tobytes(),
            "m": self.metric_idx.astype(np.uint8).tobytes(),
            # A memoryview: msgpack copies the 6.8 MB of a full batch once, not twice.
            "x": memoryview(np.ascontiguousarray(self.values, dtype="<f4")).cast("B"),
            "tc": None if self.card_ts is None else self.card_ts.astype("<f8").tobytes(),
        })


# --------------------------------------------------------------------------
# time
# --------------------------------------------------------------------------

def time_window() -> tuple[float, float]:
    """(max age, max lead) in seconds a sample's timestamp may have."""
    return (float(getattr(settings, "TELEMETRY_MAX_AGE_S", 3600)),
            float(getattr(settings, "TELEMETRY_MAX_FUTURE_S", 300)))


def parse_timestamp(value: Any, *, field: str = "ts") -> float:
    """Unix seconds from a number (seconds; milliseconds if > 1e11) or ISO 8601."""
    if isinstance(value, bool):
        raise BadBatch(f"{field} must be Unix seconds or an ISO 8601 time", field=field)
    if isinstance(value, (int, float)):
        try:
            ts = float(value)
        except OverflowError:  # an integer past the float range (1e308)
            ts = math.inf
        if not math.isfinite(ts):
            raise BadBatch(f"{field} is not a finite number", field=field)
        return ts / 1000.0 if ts > 1e11 else ts
    if isinstance(value, str):
        try:
            parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=dt.UTC)
            return parsed.timestamp()
        except (ValueError, OverflowError):
            raise BadBatch(f"{field} {_short(value)} is not an ISO 8601 time",
                           field=field) from None
    raise BadBatch(f"{field} must be Unix seconds or an ISO 8601 time", field=field)


def timestamp_problem(ts: float, now: float,
                      window: tuple[float, float] | None = None) -> str | None:
    """Why ``ts`` is outside the accepted window around ``now`` (None: inside).
    ``window`` is :func:`time_window` when a loop has read it once already."""
    max_age, max_lead = window or time_window()
    if ts > now + max_lead:
        return f"timestamp {ts - now:.0f} s in the future (limit {max_lead:.0f} s)"
    if ts < now - max_age:
        return f"timestamp {now - ts:.0f} s in the past (limit {max_age:.0f} s)"
    return None


# --------------------------------------------------------------------------
# documents
# --------------------------------------------------------------------------

def decode_document(body: bytes, content_type: str) -> dict[str, Any]:
    """A JSON or msgpack body as a dict (``BadBatch`` otherwise; 415 for other types).

    Nesting is limited (``twin.core.nesting``): JSON is checked before it is
    decoded (100,000 levels were a ``RecursionError``), msgpack right after
    (its decoder stops at about a thousand levels itself, but that is deep
    enough to break anything that walks the document later).
    """
    ctype = (content_type or "").split(";")[0].strip().lower()
    if ctype in ("application/json", ""):
        try:
            doc = nesting.loads(body)
        except ValueError as exc:  # UnicodeDecodeError and TooDeep included
            raise BadBatch(f"the body is not valid {ctype or 'JSON'}: {exc}") from None
    elif ctype in ("application/msgpack", "application/x-msgpack", "application/vnd.msgpack"):
        doc = _unpack(body)
    else:
        raise BadBatch(f"unsupported content type {ctype!r}: send application/json or "
                       "application/msgpack (Prometheus text goes to …/metrics/)",
                       status=415)
    if not isinstance(doc, dict):
        raise BadBatch("the body must be an object with seq, ts and cards (or columns)")
    return doc


def _unpack(body: bytes) -> Any:
    """A msgpack body, or ``BadBatch`` saying why not (msgpack's own messages are
    often empty: ``FormatError()``, ``StackError()``)."""
    try:
        doc = msgpack.unpackb(body, strict_map_key=False, raw=False)
        nesting.check_depth(doc)
    except msgpack.ExtraData:
        reason = "extra bytes after the first msgpack object: send one map per request"
    except msgpack.StackError:
        reason = f"nesting too deep: more than {nesting.MAX_DEPTH} levels of arrays and maps"
    except nesting.TooDeep as exc:
        reason = str(exc)
    except msgpack.FormatError as exc:
        reason = str(exc) or "a byte that starts no msgpack type (0xc1 is reserved)"
    except UnicodeDecodeError as exc:
        reason = f"a str that is not UTF-8 ({exc.reason}): send binary data as bin"
    except TypeError:
        reason = "a map key that is an array or a map: keys must be strings or numbers"
    except ValueError as exc:
        reason = str(exc) or "truncated or malformed data"
    else:
        return doc
    raise BadBatch(f"the body is not valid application/msgpack: {reason}")


MAX_SEQ = 2**63 - 1
"""The largest sequence number: agents' counters, the database column and the
Redis script all hold a signed 64-bit integer (see :mod:`.enqueue`)."""

_SEQ_TEXT = re.compile(r"[0-9]{1,19}")


def check_seq(value: Any, *, field: str = "seq") -> int:
    """``value`` as a sequence number (0 ≤ seq ≤ 2^63 − 1), else ``BadBatch`` on ``field``.

    Checked while parsing, before anything is queued or stored: a number the
    database cannot hold would otherwise fail *after* the batch was queued and
    the number stored in Redis (issue 11: every later batch was then a
    "duplicate").
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEQ:
        raise BadBatch(f"{field} must be an integer from 0 to {MAX_SEQ:,} (2^63 − 1), the "
                       f"agent's batch number, one more for every batch it sends; got "
                       f"{_short(value)}", field=field)
    return value


def parse_seq(doc: dict[str, Any]) -> int:
    """The document's ``seq`` (see :func:`check_seq`)."""
    return check_seq(doc.get("seq"))


def parse_seq_header(text: str, *, field: str = "X-Telemetry-Seq") -> int:
    """A sequence number sent as a header: ASCII digits only (``int()`` would also
    take ``"+5"``, ``" 5"``, ``"5_000"`` and other scripts' digits)."""
    if not _SEQ_TEXT.fullmatch(text):
        raise BadBatch(f"{field} must be an integer from 0 to {MAX_SEQ:,} (2^63 − 1) in "
                       f"decimal digits; got {_short(text)}", field=field)
    return check_seq(int(text), field=field)


def _short(value: Any, limit: int = 40) -> str:
    """A client's value for an error message, cut short (a 10,000-digit number or a
    deeply nested list must not be echoed whole)."""
    if isinstance(value, (list, dict)):
        return f"a {type(value).__name__}"
    if isinstance(value, int) and value.bit_length() > 128:
        return f"a {value.bit_length()}-bit number"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def parse_native(doc: dict[str, Any], lay: state.Layout, now: float | None = None) -> Batch:
    """Validate a row-form or columnar document against the cluster's layout."""
    now = time.time() if now is None else now
    ts = parse_timestamp(doc["ts"]) if doc.get("ts") is not None else now
    if "columns" in doc:
        batch = _parse_columnar(doc, lay, ts)
    elif isinstance(doc.get("cards"), list):
        batch = _parse_rows(doc, lay, ts, now)
    else:
        raise BadBatch("a batch has either cards (a list of per-card objects) or columns "
                       "(one array per metric) with cards declaring their order",
                       field="cards")
    problem = timestamp_problem(ts, now)
    if problem and batch.card_ts is None:
        _reject_everything(batch, lay, problem)
    return batch


def _reject_everything(batch: Batch, lay: state.Layout, reason: str) -> None:
    cards = _card_ids_of(batch, lay)
    finite = np.isfinite(batch.values).any(axis=0) if batch.values.size else np.zeros(0, bool)
    for k in np.flatnonzero(finite)[:MAX_LISTED]:
        batch.rejected.append({"card": int(cards[k]), "reason": reason})
    batch.rejected_total += int(np.isfinite(batch.values).sum())
    batch.values[:] = np.nan


def _card_ids_of(batch: Batch, lay: state.Layout) -> np.ndarray:
    if batch.start is not None:
        return lay.card_ids[batch.start: batch.start + batch.n_cards]
    assert batch.ordinals is not None
    return lay.card_ids[batch.ordinals]


def _resolve_card(row: dict[str, Any], lay: state.Layout) -> tuple[int, Any]:
    """(ordinal or −1, the reference the client used)."""
    if "card" in row:
        ref = row["card"]
        if isinstance(ref, bool) or not isinstance(ref, int):
            return -1, _jsonable(ref)
        if not ID_MIN <= ref <= ID_MAX:
            return -3, ref
        return int(lay.ordinals([ref])[0]), ref
    if "uuid" in row:
        ref = _jsonable(row["uuid"])
        if not isinstance(ref, str):
            return -1, ref
        return lay.uuid_map().get(ref.lower().removeprefix("gpu-"), -1), ref
    host = row.get("host", row.get("hostname"))
    if host is not None and "gpu" in row:
        ref = f"{_plain(host)}/gpu{_plain(row['gpu'])}"
        try:
            gpu = int(row["gpu"])
        except (TypeError, ValueError):
            return -1, ref
        return lay.host_map().get((str(host).lower(), gpu), -1), ref
    return -2, None


def _parse_rows(doc: dict[str, Any], lay: state.Layout, ts: float, now: float) -> Batch:
    rows = doc["cards"]
    per_card: dict[int, dict[int, float]] = {}
    per_card_ts: dict[int, float] = {}
    refs: dict[int, Any] = {}
    batch = Batch(cluster_id=lay.cluster_id, version=lay.version, ts=ts,
                  metric_idx=np.zeros(0, np.uint8), values=np.zeros((0, 0), np.float32))
    any_row_ts = False
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise BadBatch(f"cards[{i}] must be an object", field=f"cards[{i}]")
        ordinal, ref = _resolve_card(row, lay)
        if ordinal == -2:
            raise BadBatch(f"cards[{i}] names no card: give card (id), uuid, or host and gpu",
                           field=f"cards[{i}]")
        if ordinal == -3:
            raise BadBatch(f"cards[{i}].card {_short(ref)} is no card id: ids are 64-bit "
                           f"integers (at most {ID_MAX:,})", field=f"cards[{i}].card")
        metrics = row.get("metrics")
        if metrics is None:
            metrics = {k: v for k, v in row.items() if k not in IDENTITY_KEYS}
        elif not isinstance(metrics, dict):
            raise BadBatch(f"cards[{i}].metrics must be an object", field=f"cards[{i}].metrics")
        if ordinal < 0:
            batch.reject({"index": i, "card": ref, "reason": "unknown card: not in this "
                                                             "cluster"}, max(len(metrics), 1))
            continue
        row_ts = ts
        if row.get("ts") is not None:
            row_ts = parse_timestamp(row["ts"], field=f"cards[{i}].ts")
            any_row_ts = True
        problem = timestamp_problem(row_ts, now)
        if problem:
            batch.reject({"index": i, "card": ref, "reason": problem}, max(len(metrics), 1))
            continue
        if ordinal in per_card:
            batch.reject({"index": i, "card": ref,
                          "reason": "duplicate card in batch: the earlier row is dropped"},
                         len(per_card[ordinal]))
            del per_card[ordinal]
        values: dict[int, float] = {}
        for key, value in metrics.items():
            j = METRIC_INDEX.get(key)
            if j is None:
                batch.reject({"index": i, "card": ref, "metric": key,
                              "reason": "unknown metric"})
                continue
            if value is None:
                continue
            problem = validate_value(j, value)
            if problem:
                batch.reject({"index": i, "card": ref, "metric": key,
                              "value": _jsonable(value), "reason": problem})
                continue
            values[j] = float(value)
        per_card[ordinal] = values
        per_card_ts[ordinal] = row_ts
        refs[ordinal] = ref
    ords = np.array(sorted(per_card), dtype=np.int32)
    used = sorted({j for v in per_card.values() for j in v})
    col = {j: n for n, j in enumerate(used)}
    matrix = np.full((len(used), len(ords)), np.nan, dtype=np.float32)
    for k, o in enumerate(ords):
        for j, v in per_card[int(o)].items():
            matrix[col[j], k] = v
    batch.metric_idx = np.array(used, dtype=np.uint8)
    batch.values = matrix
    batch.ordinals = ords
    if any_row_ts:
        batch.card_ts = np.array([per_card_ts[int(o)] for o in ords], dtype=np.float64)
    return batch


def _jsonable(value: Any) -> Any:
    """A client's value as it may be echoed in a JSON answer: short, and only JSON types."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return value
    if isinstance(value, int):
        return value if value.bit_length() <= 128 else _short(value)
    if isinstance(value, str):
        return value if len(value) <= 200 else value[:199] + "…"
    return _short(value, 100)  # containers, msgpack ext types


def _plain(value: Any, limit: int = 100) -> str:
    """A string or number as text in a reference (``node0/gpu3``), cut short; anything
    else as :func:`_short` describes it."""
    if isinstance(value, str) or (isinstance(value, int) and value.bit_length() <= 1024):
        text = str(value)
        return text if len(text) <= limit else text[: limit - 1] + "…"
    return _short(value)


def _as_float(value: Any) -> float:
    """``float(value)``, with integers past the float range as ±inf."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _declared_cards(cards: Any, lay: state.Layout) -> tuple[int | None, np.ndarray | None,
                                                              np.ndarray | None, list[Any]]:
    """(start, ordinals, unknown-mask, refs) of a columnar batch's card order."""
    if not isinstance(cards, dict):
        raise BadBatch("cards must declare the column order: {\"range\": [start, count], "
                       "\"layout\": version} or {\"ids\": [...]} or {\"uuids\": [...]}",
                       field="cards")
    if "range" in cards:
        rng = cards["range"]
        if (not isinstance(rng, (list, tuple)) or len(rng) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in rng)):
            raise BadBatch("cards.range must be [start, count]", field="cards.range")
        start, count = int(rng[0]), int(rng[1])
        if cards.get("layout") != lay.version:
            raise BadBatch(f"layout version {cards.get('layout')!r} is not the current "
                           f"{lay.version!r}: the hardware changed; fetch …/layout/ again",
                           field="cards.layout", status=409)
        if start < 0 or count < 0 or start + count > lay.n:
            raise BadBatch(f"cards.range [{start}, {count}] is outside the layout's "
                           f"{lay.n} cards", field="cards.range")
        return start, None, None, []
    if "ids" in cards:
        raw = cards["ids"]
        if isinstance(raw, (bytes, bytearray)):
            if len(raw) % 8:
                raise BadBatch("cards.ids as bytes must be int64 values", field="cards.ids")
            ids = np.frombuffer(raw, dtype="<i8")
        elif isinstance(raw, list) and all(isinstance(x, int) and not isinstance(x, bool)
                                           for x in raw):
            try:
                ids = np.array(raw, dtype=np.int64)
            except OverflowError:  # look for the culprit only when there is one
                k, x = next((k, x) for k, x in enumerate(raw) if not ID_MIN <= x <= ID_MAX)
                raise BadBatch(f"cards.ids[{k}] {_short(x)} is no card id: ids are 64-bit "
                               f"integers (at most {ID_MAX:,})", field=f"cards.ids[{k}]") from None
        else:
            raise BadBatch("cards.ids must be a list of card ids", field="cards.ids")
        ords = lay.ordinals(ids)
        return None, ords, ords < 0, ids.tolist()
    if "uuids" in cards:
        raw = cards["uuids"]
        if not isinstance(raw, list):
            raise BadBatch("cards.uuids must be a list", field="cards.uuids")
        umap = lay.uuid_map()
        refs = [_jsonable(u) for u in raw]
        ords = np.array([umap.get(u.lower().removeprefix("gpu-"), -1) if isinstance(u, str)
                         else -1 for u in refs], dtype=np.int64)
        return None, ords, ords < 0, refs
    raise BadBatch("cards must contain range, ids or uuids", field="cards")


def _column(raw: Any, key: str, count: int) -> tuple[np.ndarray, np.ndarray | None]:
    """(values with NaN = no reading, mask of NaN sent *as a value* or None).

    A binary column stays float32 (no copy, no per-value work): the fast path.
    """
    if isinstance(raw, (bytes, bytearray)):
        if len(raw) != 4 * count:
            raise BadBatch(f"column {key} has {len(raw)} bytes; {count} float32 values are "
                           f"{4 * count}", field=f"columns.{key}")
        return np.frombuffer(raw, dtype="<f4"), None
    if not isinstance(raw, list):
        raise BadBatch(f"column {key} must be a list of numbers (or float32 bytes)",
                       field=f"columns.{key}")
    if len(raw) != count:
        raise BadBatch(f"column {key} has {len(raw)} values for {count} cards",
                       field=f"columns.{key}")
    if not all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))
               for v in raw):
        raise BadBatch(f"column {key} must hold numbers or null", field=f"columns.{key}")
    nulls = np.fromiter((v is None for v in raw), dtype=bool, count=count)
    try:
        arr = np.array([0.0 if v is None else v for v in raw], dtype=np.float64)
    except OverflowError:  # an integer past the float range: out of range, like inf
        arr = np.array([0.0 if v is None else _as_float(v) for v in raw], dtype=np.float64)
    nan_sent = np.isnan(arr) & ~nulls  # JSON NaN: a reading to reject, unlike null
    arr[nulls | nan_sent] = np.nan
    return arr, nan_sent


def _parse_columnar(doc: dict[str, Any], lay: state.Layout, ts: float) -> Batch:
    columns = doc["columns"]
    if not isinstance(columns, dict) or not columns:
        raise BadBatch("columns must map metric names to arrays", field="columns")
    start, ords, unknown, refs = _declared_cards(doc.get("cards"), lay)
    count = int(doc["cards"]["range"][1]) if start is not None else len(ords)  # type: ignore
    batch = Batch(cluster_id=lay.cluster_id, version=lay.version, ts=ts,
                  metric_idx=np.zeros(0, np.uint8), values=np.zeros((0, count), np.float32))
    parsed: list[tuple[int, str, np.ndarray, np.ndarray | None]] = []
    for key, raw in columns.items():
        j = METRIC_INDEX.get(key) if isinstance(key, str) else None
        if j is None:
            batch.reject({"metric": _jsonable(key), "reason": "unknown metric"}, count)
            continue
        arr, nan_sent = _column(raw, key, count)
        parsed.append((j, key, arr, nan_sent))
    card_ids = (lay.card_ids[start: start + count] if start is not None
                else np.asarray(refs, dtype=object))
    matrix = np.full((len(parsed), count), np.nan, dtype=np.float32)
    for n, (j, key, arr, nan_sent) in enumerate(parsed):
        # NaN compares false both ways: missing values are never "out of range".
        bad = (arr < LO[j]) | (arr > HI[j])  # > includes +inf, < includes -inf
        if nan_sent is not None:
            bad |= nan_sent
        if unknown is not None:
            bad &= ~unknown
        if not bad.any():
            matrix[n] = arr
            continue
        bad_nan = nan_sent if nan_sent is not None else np.zeros(count, bool)
        for k in np.flatnonzero(bad)[: max(MAX_LISTED - len(batch.rejected), 0)]:
            value = float(arr[k])
            reason = ("NaN is not a reading" if bad_nan[k]
                      else validate_value(j, value) or "out of range")
            batch.rejected.append({"card": _jsonable(card_ids[k]), "metric": key,
                                   "value": _jsonable(value if not bad_nan[k] else "NaN"),
                                   "reason": reason})
        batch.rejected_total += int(bad.sum())
        matrix[n] = np.where(bad, np.nan, arr).astype(np.float32)
    if unknown is not None and unknown.any():
        for k in np.flatnonzero(unknown)[: max(MAX_LISTED - len(batch.rejected), 0)]:
            batch.rejected.append({"card": _jsonable(refs[k]),
                                   "reason": "unknown card: not in this cluster"})
        batch.rejected_total += int(unknown.sum())
    batch.metric_idx = np.array([j for j, *_ in parsed], dtype=np.uint8)
    if start is not None:
        batch.start = start
        batch.values = matrix
        return batch
    assert ords is not None and unknown is not None
    keep = ~unknown
    ords_k = ords[keep]
    matrix = matrix[:, keep]
    # A card listed twice: the last column wins, the earlier one is reported.
    order = np.argsort(ords_k, kind="stable")
    ords_sorted = ords_k[order]
    last = np.ones(len(ords_sorted), dtype=bool)
    if len(ords_sorted) > 1:
        last[:-1] = ords_sorted[1:] != ords_sorted[:-1]
    for k in np.flatnonzero(~last)[: max(MAX_LISTED - len(batch.rejected), 0)]:
        batch.rejected.append({"card": int(lay.card_ids[ords_sorted[k]]),
                               "reason": "duplicate card in batch: the earlier column is "
                                         "dropped"})
    batch.rejected_total += int((~last).sum())
    sel = order[last]
    batch.ordinals = ords_k[sel].astype(np.int32)
    batch.values = matrix[:, sel]
    if len(batch.ordinals) and np.all(np.diff(batch.ordinals) == 1):
        batch.start, batch.ordinals = int(batch.ordinals[0]), None
    return batch
