"""Long-term history in VictoriaMetrics, when ``TWIN_VICTORIA_URL`` is set.

The database keeps per-minute history for clusters of at most
``TELEMETRY_PERSIST_CARDS_MAX`` (8,192) cards: a million cards would be a
million rows a minute. VictoriaMetrics is a time-series store built for that, so
with it configured:

* **Writing** (:func:`write_tick`, called by every tick): at most once every
  ``TWIN_VICTORIA_STEP_S`` per cluster (a Redis gate shared by the workers) the tick
  queues the ``write_history`` task (``FollowUps.write_history``), so a big
  cluster's write never holds the tick up; that task (:func:`write_from_state`) reads
  the live state back from Redis, keeps the values fresh at the tick's time, and
  sends every finite one, stamped with the tick's time (the values may be up to the
  queue's delay newer). Without a queue (tests, a shell) the tick writes its own
  fresh values inline. One series per card and metric, and 54 per group (rack,
  supernode, the cluster) computed from the same values (:func:`group_values`)::

      twin_card_power_w{cluster="1",supernode="3",rack="12",card="4711"}
      twin_group_mean_power_w{cluster="1",level="rack",group="12"}   (and max_…,
      twin_group_cards, twin_group_draw_w)

  They go as CSV to ``/api/v1/import/csv`` (one line a card: :func:`csv_parts`),
  65,536 lines a request with two in flight, so this process encodes while
  VictoriaMetrics ingests. The POSTs have a ``TWIN_VICTORIA_TIMEOUT_S`` timeout; a
  failure is logged and counted (``keys.victoria_stats``), never raised: the tick goes
  on, the samples of that step are lost (the live state and the database history do
  not depend on it).
* **Reading** (:func:`query_history`, behind ``GET /api/telemetry/history/``): the
  same rows as the database's ``TelemetryMinute`` (mean and max of every metric
  per minute, ``samples``, ``draw_w``) computed by one ``/api/v1/query_range``
  request (:func:`history_query`), for a card, a rack, a supernode or the whole
  cluster, with no cap on the number of cards. A row is a minute up to a 25 h window
  and whole minutes past it (:func:`history_step`, at most ``MAX_POINTS`` rows). A
  card reads its 26 series; a group reads its own group series, so its cost does not
  grow with its cards (a day of a 40-card rack at 10 s would be 9 M card samples a
  part). As in the database a group's mean is the mean over its cards (of each
  step here, of each card's minute there: the same when every card reports every
  step), its max the max, ``samples`` the card-samples, and ``draw_w`` its cards'
  mean power summed plus the group's static draw. VictoriaMetrics away →
  :class:`~twin.core.unavailable.ServiceUnavailable` (503 + ``Retry-After``), as for
  Redis away.

The database history keeps being written as before (it is the embedded default
and what the admin shows); only the endpoint's source changes.
"""
from __future__ import annotations

import datetime as dt
import http.client
import json
import logging
import math
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import redis
from django.conf import settings

from twin.core.collector import collector_paused
from twin.core.unavailable import ServiceUnavailable
from twin.telemetry import keys
from twin.telemetry.config import conf, redis_client
from twin.telemetry.metrics import METRIC_INDEX, METRIC_KEYS, N_METRICS
from twin.telemetry.processing.aggregate import reduce_groups
from twin.telemetry.processing.follow_ups import NO_FOLLOW_UPS, FollowUps
from twin.telemetry.state import Layout, layout

__all__ = ["GROUP_NAMES", "GROUP_SERIES", "MAX_POINTS", "SERIES", "VictoriaUnavailable",
           "csv_body", "csv_format", "csv_parts", "enabled", "group_values", "history_query",
           "history_step", "query_history", "series_text", "write_from_state", "write_samples",
           "write_tick"]

log = logging.getLogger(__name__)

SERIES = "twin_card_"
"""The prefix of the card series: one series per card and metric, named
``twin_card_<metric>`` (``twin_card_power_w{cluster=…,supernode=…,rack=…,card=…}``)."""

GROUP_SERIES = "twin_group_"
"""The prefix of the group series, written with the cards' at every step: per rack,
supernode and the cluster (labels ``cluster``, ``level``, ``group``) the mean and the
max over its cards of every metric (``twin_group_mean_<metric>``,
``twin_group_max_<metric>``), the cards that reported (``twin_group_cards``) and the
sum of their power (``twin_group_draw_w``)."""

NAMES = "|".join(METRIC_KEYS)
"""The ``__name__`` alternation of every metric (VictoriaMetrics turns an alternation
of literals into exact index lookups)."""

GROUP_NAMES = ([f"{GROUP_SERIES}mean_{k}" for k in METRIC_KEYS]
               + [f"{GROUP_SERIES}max_{k}" for k in METRIC_KEYS]
               + [f"{GROUP_SERIES}cards", f"{GROUP_SERIES}draw_w"])

STEP_S = 60
"""The finest row: a minute, as in the database."""

MAX_POINTS = 1_500
"""Rows a history answer holds at most: the step grows past a minute for windows
longer than 25 h (a chart has no use for more points than it has pixels)."""

CHUNK_ROWS = 65_536
"""Lines (cards) a CSV request carries: the writer encodes the next while
VictoriaMetrics ingests the last."""

SMALL_GROUP = 256
"""Lines that hold an unusual set of values go out as exposition text when fewer than
this hold that set (a CSV request per set would cost more than it saves)."""

_POWER = METRIC_INDEX["power_w"]


@dataclass(frozen=True)
class _Table:
    """Rows of one kind (cards, or the groups of one level) with their label values
    rendered once per layout version: ``csv[k]`` starts row k's CSV line, ``text[k]``
    follows the series name in its exposition text lines."""

    labels: tuple[str, ...]
    csv: list[str]
    text: list[str]


_tables: dict[tuple[int, str], dict[str, _Table]] = {}
_writers = ThreadPoolExecutor(max_workers=2, thread_name_prefix="victoria-write")


class VictoriaUnavailable(ServiceUnavailable):
    """503: VictoriaMetrics did not answer (or answered 5xx) within the timeout."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"VictoriaMetrics (the long-term history, TWIN_VICTORIA_URL) is not "
                         f"reachable: {reason}. Retry in a few seconds.",
                         service="victoriametrics")


def enabled() -> bool:
    """Whether the history lives in VictoriaMetrics (``TWIN_VICTORIA_URL`` set)."""
    return bool(getattr(settings, "TWIN_VICTORIA_URL", ""))


def _layout_tables(lay: Layout) -> dict[str, _Table]:
    """The card table and one table per group level, built once per layout version."""
    key = (lay.cluster_id, lay.version)
    cached = _tables.get(key)
    if cached is None:
        cid = lay.cluster_id
        sn = lay.groups["supernode"]
        rk = lay.groups["rack"]
        rows = list(zip(sn.ids[sn.of_card].tolist(), rk.ids[rk.of_card].tolist(),
                        lay.card_ids.tolist(), strict=True))
        cached = {"card": _Table(
            ("supernode", "rack", "card"), [f"{s},{r},{c}," for s, r, c in rows],
            [f'{{cluster="{cid}",supernode="{s}",rack="{r}",card="{c}"}} ' for s, r, c in rows])}
        for level, index in lay.groups.items():
            ids = index.ids.tolist()
            cached[level] = _Table(
                ("level", "group"), [f"{level},{g}," for g in ids],
                [f'{{cluster="{cid}",level="{level}",group="{g}"}} ' for g in ids])
        for old in [k for k in _tables if k[0] == cid]:
            del _tables[old]
        _tables[key] = cached
    return cached


def group_values(lay: Layout, values: np.ndarray) -> dict[str, np.ndarray]:
    """Per group level, the ``(len(GROUP_NAMES), groups)`` values of one step: the mean
    and the max over the group's cards of each metric (NaN where none reported it),
    the cards that reported anything, the sum of their power (NaN when none did).

    Written with the cards' so that a rack's (or the cluster's) history reads 54
    series, not 26 × its cards: a day of a 40-card rack at 10 s is 9 M card samples
    a part, ≈ 140 ms of VictoriaMetrics on this machine for each of mean, max and
    samples, against 0.5 M for the group series."""
    reporting = np.isfinite(values).any(axis=0).astype(np.float32)
    out: dict[str, np.ndarray] = {}
    for level, index in lay.groups.items():
        stats = reduce_groups(values, index)                  # (N_METRICS, 5, groups)
        cards = reduce_groups(reporting, index)[3]
        draw = np.where(stats[_POWER, 4] > 0, stats[_POWER, 3], np.nan)
        out[level] = np.vstack([stats[:, 0], stats[:, 2], cards[None], draw[None]])
    return out


def series_text(lay: Layout, values: np.ndarray, now: float, level: str = "card",
                rows: np.ndarray | None = None) -> tuple[bytes, int]:
    """The Prometheus exposition text of every finite value of ``values`` (cards:
    ``(N_METRICS, n_cards)``; a group level: ``(len(GROUP_NAMES), groups)``) at time
    ``now`` (of the rows ``rows`` only, when given), and how many samples it holds.
    The path for the few rows whose set of values is unusual: a line a sample, labels
    repeated, ≈ 4× the CSV's cost in VictoriaMetrics."""
    table = _layout_tables(lay)[level]
    names = [SERIES + k for k in METRIC_KEYS] if level == "card" else GROUP_NAMES
    stamp = f" {int(now * 1000)}\n"
    lines: list[str] = []
    for i, name in enumerate(names):
        row = values[i] if rows is None else values[i, rows]
        idx = np.flatnonzero(np.isfinite(row))
        if not len(idx):
            continue
        vals = np.round(row[idx].astype(np.float64), 4).tolist()
        ords = idx.tolist() if rows is None else rows[idx].tolist()
        lines.extend([name + table.text[k] + repr(v) + stamp
                      for k, v in zip(ords, vals, strict=True)])
    return "".join(lines).encode(), len(lines)


def csv_parts(values: np.ndarray) -> tuple[list[tuple[list[int], np.ndarray]], np.ndarray]:
    """How one step's rows (``values``: ``(columns ≤ 64, rows)``) go out:
    ``(columns, row indices)`` per CSV request (the rows that hold the same set of
    finite values, in chunks of ``CHUNK_ROWS``), and the rows left for the exposition
    text (sets held by fewer than ``SMALL_GROUP`` rows; rows with no value are
    dropped).

    CSV is one line a card (its labels once, then its values), where the exposition
    text is one line a sample with the labels repeated: VictoriaMetrics ingests it
    ≈ 4× faster and Python builds it ≈ 2× faster. A CSV line must have every column,
    so rows are grouped by the set of values they hold (one set, in a healthy
    cluster)."""
    finite = np.isfinite(values)
    weights = (np.uint64(1) << np.arange(len(values), dtype=np.uint64))[:, None]
    codes = (finite.astype(np.uint64) * weights).sum(axis=0)
    sets, inverse, counts = np.unique(codes, return_inverse=True, return_counts=True)
    parts: list[tuple[list[int], np.ndarray]] = []
    rest: list[np.ndarray] = []
    for j, (code, count) in enumerate(zip(sets.tolist(), counts.tolist(), strict=True)):
        if code == 0:
            continue
        rows = np.flatnonzero(inverse == j)
        if count < SMALL_GROUP:
            rest.append(rows)
            continue
        cols = [i for i in range(len(values)) if code >> i & 1]
        parts.extend((cols, rows[at:at + CHUNK_ROWS]) for at in range(0, len(rows), CHUNK_ROWS))
    leftover = np.concatenate(rest) if rest else np.zeros(0, np.int64)
    return parts, leftover


def csv_format(labels: tuple[str, ...], names: list[str]) -> str:
    """``/api/v1/import/csv``'s column list for lines of :func:`csv_body`: the label
    columns, one column per series name, the time in ms."""
    cols = [f"{i + 1}:label:{label}" for i, label in enumerate(labels)]
    cols += [f"{len(cols) + k + 1}:metric:{name}" for k, name in enumerate(names)]
    return ",".join([*cols, f"{len(cols) + 1}:time:unix_ms"])


def csv_body(table: _Table, values: np.ndarray, cols: list[int], rows: np.ndarray,
             now: float) -> bytes:
    """One CSV line per row of ``rows``: its labels, its values of the columns
    ``cols`` (all finite), the time in ms."""
    matrix = np.round(values[cols][:, rows].T.astype(np.float64), 4).tolist()
    stamp = f",{int(now * 1000)}\n"
    return "".join([table.csv[k] + ",".join(map(repr, row)) + stamp
                    for k, row in zip(rows.tolist(), matrix, strict=True)]).encode()


def _post(path: str, body: bytes, timeout: float) -> None:
    request = urllib.request.Request(settings.TWIN_VICTORIA_URL + path, data=body,
                                     method="POST",
                                     headers={"Content-Type": "text/plain"})
    with urllib.request.urlopen(request, timeout=timeout) as resp:
        resp.read()


def write_samples(lay: Layout, values: np.ndarray, now: float) -> int:
    """Send one step of every card's values (``(N_METRICS, n_cards)``), and the group
    series computed from them (:func:`group_values`), to VictoriaMetrics (raises on
    failure); returns the number of card samples sent.

    CSV requests of ``CHUNK_ROWS`` lines each (:func:`csv_parts`), at most two in
    flight, so this process encodes the next while VictoriaMetrics ingests the last;
    the few rows with an unusual set of values as exposition text."""
    timeout = settings.TWIN_VICTORIA_TIMEOUT_S
    tables = _layout_tables(lay)
    extra = urllib.parse.urlencode({"extra_label": f"cluster={lay.cluster_id}"})
    count = 0
    pending: list[Future[None]] = []

    def send(path: str, body: bytes) -> None:
        if len(pending) >= 2:
            pending.pop(0).result()
        pending.append(_writers.submit(_post, path, body, timeout))

    kinds = [("card", values, [SERIES + k for k in METRIC_KEYS])]
    kinds += [(level, v, GROUP_NAMES) for level, v in group_values(lay, values).items()]
    for level, matrix, names in kinds:
        table = tables[level]
        parts, leftover = csv_parts(matrix)
        for cols, rows in parts:
            fmt = csv_format(table.labels, [names[c] for c in cols])
            send(f"/api/v1/import/csv?{urllib.parse.urlencode({'format': fmt})}&{extra}",
                 csv_body(table, matrix, cols, rows, now))
            if level == "card":
                count += len(rows) * len(cols)
        if len(leftover):
            body, n_text = series_text(lay, matrix, now, level, leftover)
            send("/api/v1/import/prometheus", body)
            if level == "card":
                count += n_text
    for future in pending:
        future.result()
    return count


def write_tick(r: redis.Redis, lay: Layout, fresh_values: np.ndarray, now: float,
               follow_ups: FollowUps = NO_FOLLOW_UPS) -> int | None:
    """From the tick: if this cluster's step is due, queue its write
    (``follow_ups.write_history``) or, when that queues nothing, write the fresh
    values here. None when no step is due, VictoriaMetrics is not configured or the
    write was queued; else the samples written (0 on a failure, which is logged and
    counted in ``keys.victoria_stats``, never raised)."""
    if not enabled() or not lay.n:
        return None
    step_ms = max(int(settings.TWIN_VICTORIA_STEP_S * 1000), 1)
    if not r.set(keys.victoria_gate(lay.cluster_id), 1, nx=True, px=step_ms):
        return None
    if follow_ups.write_history(lay.cluster_id, lay.version, now):
        return None
    return _write_counted(r, lay, fresh_values, now)


def write_from_state(cluster_id: int, version: str, now: float) -> int:
    """The ``write_history`` task: the cards' values fresh at ``now`` read from the
    live state, written as :func:`write_tick` would (0 when the layout changed)."""
    if not enabled():
        return 0
    r = redis_client()
    lay = layout(cluster_id)
    if lay.version != version or not lay.n:
        return 0
    n = lay.n
    pipe = r.pipeline(transaction=False)
    for i in range(N_METRICS):
        pipe.get(keys.metric(cluster_id, version, i))
    pipe.get(keys.seen(cluster_id, version))
    raw = pipe.execute()
    values = np.full((N_METRICS, n), np.nan, dtype=np.float32)
    for i in range(N_METRICS):
        if raw[i] and len(raw[i]) == 4 * n:
            values[i] = np.frombuffer(raw[i], dtype="<f4")
    seen = (np.frombuffer(raw[N_METRICS], dtype="<f8") if raw[N_METRICS]
            and len(raw[N_METRICS]) == 8 * n else np.full(n, np.nan))
    with np.errstate(invalid="ignore"):
        fresh = np.isfinite(seen) & (now - seen <= conf().stale_after_s)
    return _write_counted(r, lay, np.where(fresh, values, np.nan), now)


def _write_counted(r: redis.Redis, lay: Layout, fresh_values: np.ndarray, now: float) -> int:
    started = time.monotonic()
    stats = keys.victoria_stats(lay.cluster_id)
    try:
        count = write_samples(lay, fresh_values, now)
    except (OSError, http.client.HTTPException) as exc:
        log.warning("cluster %s: history write to VictoriaMetrics failed: %s",
                    lay.cluster_id, exc)
        pipe = r.pipeline(transaction=False)
        pipe.hincrby(stats, "failures", 1)
        pipe.hset(stats, "last_error", f"{type(exc).__name__}: {exc}"[:300])
        pipe.execute()
        return 0
    pipe = r.pipeline(transaction=False)
    pipe.hincrby(stats, "writes", 1)
    pipe.hincrby(stats, "samples", count)
    pipe.hset(stats, "last_s", repr(time.monotonic() - started))
    pipe.execute()
    return count


def _query_range(query: str, start: int, end: int, step: int) -> list[dict[str, Any]]:
    params = urllib.parse.urlencode({"query": query, "start": start, "end": end,
                                     "step": f"{step}s"}).encode()
    request = urllib.request.Request(settings.TWIN_VICTORIA_URL + "/api/v1/query_range",
                                     data=params, method="POST", headers={
                                         "Content-Type": "application/x-www-form-urlencoded"})
    try:
        with urllib.request.urlopen(request, timeout=settings.TWIN_VICTORIA_TIMEOUT_S) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        if exc.code >= 500:
            raise VictoriaUnavailable(f"HTTP {exc.code}") from exc
        raise RuntimeError(f"VictoriaMetrics refused {query!r}: HTTP {exc.code} "
                           f"{exc.read()[:300]!r}") from exc
    except (OSError, http.client.HTTPException) as exc:
        raise VictoriaUnavailable(str(getattr(exc, "reason", exc))) from exc
    return list(json.loads(raw)["data"]["result"])


def _selector(cluster_id: int, level: str, object_id: int, names: str) -> str:
    labels = [f'__name__=~"{names}"', f'cluster="{cluster_id}"']
    if level == "card":
        labels.append(f'card="{object_id}"')
    else:
        labels += [f'level="{level}"', f'group="{object_id}"']
    return f"{{{','.join(labels)}}}"


def history_step(since: dt.datetime, until: dt.datetime) -> int:
    """Seconds a row covers: a minute, or whole minutes enough to keep a window to at
    most ``MAX_POINTS`` rows (25 h → 1 min, 7 days → 7 min)."""
    span = max(until.timestamp() - since.timestamp(), 0.0)
    return STEP_S * max(1, math.ceil(span / MAX_POINTS / STEP_S))


def history_query(cluster_id: int, level: str, object_id: int, step: int) -> str:
    """The one MetricsQL expression of a history answer: each part (``mean``, ``max``,
    ``samples``, and ``draw`` for racks and up) tagged ``part=…`` and joined with
    ``or``, so one request answers and 26 series come back a part.

    A card reads its own 26 series. A group reads its group series (:data:`GROUP_NAMES`):
    the mean of the per-step means over its cards, the max of the maxima, the sum of the
    cards that reported at each step (= the sum over cards of their samples) and the
    mean of the per-step power sums — what the database's rows hold when every card
    reports at every step, at a cost that does not grow with the group's cards."""
    window = f"[{step}s]"
    if level == "card":
        sel = _selector(cluster_id, level, object_id, f"{SERIES}({NAMES})")
        parts = {
            "mean": f"avg_over_time({sel}{window}) keep_metric_names",
            "max": f"max_over_time({sel}{window}) keep_metric_names",
            "samples": f"max(count_over_time({sel}{window}))",
        }
    else:
        def sel_(names: str) -> str:
            return _selector(cluster_id, level, object_id, names)
        parts = {
            "mean": f"avg_over_time({sel_(f'{GROUP_SERIES}mean_({NAMES})')}{window}) "
                    "keep_metric_names",
            "max": f"max_over_time({sel_(f'{GROUP_SERIES}max_({NAMES})')}{window}) "
                   "keep_metric_names",
            "samples": f"sum_over_time({sel_(f'{GROUP_SERIES}cards')}{window})",
            "draw": f"avg_over_time({sel_(f'{GROUP_SERIES}draw_w')}{window})",
        }
    return " or ".join(f'label_set({q}, "part", "{name}")' for name, q in parts.items())


def _points(series: dict[str, Any], step: int, first: int, size: int,
            ) -> tuple[np.ndarray, np.ndarray]:
    """A series' rows (index from ``first``) and values, vectorised: a day of a card is
    ≈ 75,000 values, ≈ 0.4 s one by one in Python."""
    flat = list(chain.from_iterable(series["values"]))
    at = np.array(flat[0::2], dtype=np.int64) // step - 1 - first
    vals = np.array(flat[1::2], dtype=np.float64)
    inside = (at >= 0) & (at < size)
    return at[inside], vals[inside]


def query_history(cluster_id: int, level: str, object_id: int, since: dt.datetime,
                  until: dt.datetime, static_w: float | None = None) -> list[dict[str, Any]]:
    """The rows of one card, rack, supernode or the cluster in ``[since, until)``,
    shaped like ``MinuteSerializer`` (``id`` is None: the rows are computed, not
    stored), oldest first. A row covers :func:`history_step` seconds from its
    ``minute`` (one minute up to a 25 h window). ``static_w``: the group's static draw
    added to ``draw_w`` (racks and up)."""
    with collector_paused():  # ≈ 77,000 small lists parsed (twin.core.collector)
        return _query_history(cluster_id, level, object_id, since, until, static_w)


def _query_history(cluster_id: int, level: str, object_id: int, since: dt.datetime,
                   until: dt.datetime, static_w: float | None) -> list[dict[str, Any]]:
    step = history_step(since, until)
    first = int(since.timestamp()) // step
    last = -(-int(until.timestamp()) // step) - 1  # the last row starting before until
    if last < first:
        return []
    # A point at t covers (t − step, t]: the row r is the point at (r + 1) × step.
    start, end = (first + 1) * step, (last + 1) * step
    answer = _query_range(history_query(cluster_id, level, object_id, step), start, end, step)

    size = last - first + 1
    grids = {part: np.full((size, N_METRICS), np.nan) for part in ("mean", "max")}
    present = np.zeros(size, bool)
    samples = np.zeros(size, np.int64)
    draw = np.full(size, np.nan)
    for series in answer:
        labels = series["metric"]
        part = labels.get("part")
        at, vals = _points(series, step, first, size)
        if part in grids:
            col = METRIC_INDEX.get(labels.get("__name__", "").removeprefix(SERIES)
                                   .removeprefix(f"{GROUP_SERIES}{part}_"))
            if col is not None:
                grids[part][at, col] = vals
                present[at] = True
        elif part == "samples":
            samples[at] = vals.astype(np.int64)
        elif part == "draw":
            draw[at] = vals + (static_w or 0.0)
    present |= samples > 0
    out: list[dict[str, Any]] = []
    keys_ = list(METRIC_KEYS)
    means = np.round(grids["mean"], 4).tolist()
    maxes = np.round(grids["max"], 4).tolist()
    for i in np.flatnonzero(present).tolist():
        stamp = dt.datetime.fromtimestamp((first + i) * step, tz=dt.UTC)
        out.append({
            "id": None, "cluster": cluster_id, "level": level, "object_id": object_id,
            "minute": stamp.isoformat().replace("+00:00", "Z"),
            "samples": int(samples[i]),
            "draw_w": None if draw[i] != draw[i] else float(draw[i]),
            "mean": dict(zip(keys_, [None if v != v else v for v in means[i]], strict=True)),
            "max": dict(zip(keys_, [None if v != v else v for v in maxes[i]], strict=True))})
    return out
