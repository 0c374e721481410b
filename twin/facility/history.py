"""The plant's minute history: each live plant step adds to a minute accumulator in
Redis; the telemetry minute's write (``twin.telemetry.processing.minutes.persist_minute``,
called from ``hand_on_minute``) turns the finished minute into a :class:`PlantMinute` row.

The contract (the tick calls in, as for the plant itself; this module imports nothing of
telemetry):

* **Accumulated per step** (:func:`add_sample`, one GET and one SET of a small msgpack
  blob at :func:`minute_key` per tick, under the tick lock): Σ IT and facility power and
  the step count (PUE over the minute = Σ facility / Σ IT, the energy ratio The Green
  Grid defines, not a mean of ratios), per CDU the sum and peak of its load fraction
  and supply temperature, per feed the least headroom and the peak load fraction, per
  rated element (every power element, CDU, tower, dry cooler, chiller and CRAH: the
  summary's ``rated``) the least headroom and the peak load fraction, and
  the most limits binding the caps and cards capped at once (``None`` while capping is
  off). A plant whose CDUs, feeds or rated elements change within the minute restarts the minute's
  per-element figures (the row describes the plant as it ended the minute).
* **Written once** (:func:`persist_minute`): one row per cluster and minute (a unique
  constraint; a retried write adds nothing), and the accumulator is deleted. An
  accumulator nobody writes (the cluster stopped ticking) expires after an hour.
"""
from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from typing import Any

import msgpack
import numpy as np

__all__ = ["MINUTE_TTL_S", "add_sample", "minute_key", "persist_minute"]

MINUTE_TTL_S = 3600
"""How long an unwritten minute's accumulator is kept."""


def minute_key(prefix: str, cluster_id: int, minute: int) -> str:
    """The accumulator of minute ``minute`` (Unix minutes) of ``cluster_id``."""
    return f"{prefix}:c{cluster_id}:facility:minute:{minute}"


def _values(items: list[Mapping[str, Any]], name: str) -> np.ndarray:
    return np.array([np.nan if d.get(name) is None else float(d[name]) for d in items],
                    dtype="<f8")


def _column(columns: Mapping[str, Any], name: str) -> np.ndarray:
    """A column of the summary's ``rated`` (None → NaN), vectorised."""
    return np.array(columns.get(name, []), dtype=object).astype("<f8") if columns.get(
        name) else np.zeros(0, "<f8")


def _arr(raw: bytes) -> np.ndarray:
    return np.frombuffer(raw, "<f8").copy()


def _fresh(cdu_keys: list[str], feed_keys: list[str],
           rated_keys: list[list[str]]) -> dict[str, Any]:
    c, f = len(cdu_keys), len(feed_keys)
    nan_c, nan_f = np.full(c, np.nan).tobytes(), np.full(f, np.nan).tobytes()
    nan_r = np.full(len(rated_keys), np.nan).tobytes()
    return {"rated_keys": rated_keys, "rated_headroom_min": nan_r, "rated_load_max": nan_r,
            "n": 0, "n_power": 0, "it": 0.0, "fac": 0.0, "cdu_keys": cdu_keys,
            "feed_keys": feed_keys, "cdu_load": np.zeros(c).tobytes(),
            "cdu_load_n": np.zeros(c).tobytes(), "cdu_load_max": nan_c,
            "cdu_sup": np.zeros(c).tobytes(), "cdu_sup_n": np.zeros(c).tobytes(),
            "cdu_sup_max": nan_c, "feed_headroom_min": nan_f, "feed_load_max": nan_f,
            "caps_binding": None, "cards_capped": None}


def add_sample(r: Any, prefix: str, cluster_id: int, plant: Mapping[str, Any],
               caps: Mapping[str, Any] | None, now: float) -> None:
    """Add one plant step (``twin.facility.live.step_live``'s summary) and the caps'
    step (``capping_live.step_caps``' answer; None: capping off) to the minute of
    ``now``."""
    minute = int(now // 60)
    key = minute_key(prefix, cluster_id, minute)
    cdus, feeds = list(plant.get("cdus") or []), list(plant.get("feeds") or [])
    cdu_keys, feed_keys = [str(c["key"]) for c in cdus], [str(f["key"]) for f in feeds]
    rated = plant.get("rated") or {}
    rated_keys = [list(k) for k in zip(rated.get("key", []), rated.get("kind", []),
                                       rated.get("chain", []), strict=True)]
    raw = r.get(key)
    acc = dict(msgpack.unpackb(raw)) if raw else None
    if (acc is None or acc["cdu_keys"] != cdu_keys or acc["feed_keys"] != feed_keys
            or acc.get("rated_keys") != rated_keys):
        kept = acc
        acc = _fresh(cdu_keys, feed_keys, rated_keys)
        if kept is not None:  # the site-level sums still describe this minute
            for name in ("n", "n_power", "it", "fac", "caps_binding", "cards_capped"):
                acc[name] = kept[name]
    acc["n"] += 1
    it, fac = plant.get("it_w"), plant.get("facility_w")
    if it is not None and fac is not None and math.isfinite(it) and math.isfinite(fac):
        acc["n_power"] += 1
        acc["it"] += float(it)
        acc["fac"] += float(fac)
    with np.errstate(invalid="ignore"):
        for name, values in (("cdu_load", _values(cdus, "load_fraction")),
                             ("cdu_sup", _values(cdus, "supply_c"))):
            ok = np.isfinite(values)
            acc[name] = (_arr(acc[name]) + np.where(ok, values, 0.0)).tobytes()
            acc[f"{name}_n"] = (_arr(acc[f"{name}_n"]) + ok).tobytes()
            acc[f"{name}_max"] = np.fmax(_arr(acc[f"{name}_max"]), values).tobytes()
        acc["feed_headroom_min"] = np.fmin(_arr(acc["feed_headroom_min"]),
                                           _values(feeds, "headroom_w")).tobytes()
        acc["feed_load_max"] = np.fmax(_arr(acc["feed_load_max"]),
                                       _values(feeds, "load_fraction")).tobytes()
        acc["rated_headroom_min"] = np.fmin(_arr(acc["rated_headroom_min"]),
                                            _column(rated, "headroom_w")).tobytes()
        acc["rated_load_max"] = np.fmax(_arr(acc["rated_load_max"]),
                                        _column(rated, "load_fraction")).tobytes()
    if caps is not None:
        acc["caps_binding"] = max(int(acc["caps_binding"] or 0),
                                  int(caps.get("limits_binding", 0)))
        acc["cards_capped"] = max(int(acc["cards_capped"] or 0),
                                  int(caps.get("cards_capped", 0)))
    r.set(key, msgpack.packb(acc), ex=MINUTE_TTL_S)


def _num(x: float, digits: int = 4) -> float | None:
    return round(float(x), digits) if math.isfinite(x) else None


def persist_minute(r: Any, prefix: str, cluster_id: int, minute: int) -> bool:
    """Write minute ``minute`` of ``cluster_id`` as a :class:`PlantMinute` row (once:
    a row already there is kept) and drop its accumulator; False when there is none
    (no facility, or already written)."""
    from twin.facility.models import PlantMinute

    key = minute_key(prefix, cluster_id, minute)
    raw = r.get(key)
    if not raw:
        return False
    acc = dict(msgpack.unpackb(raw))
    with np.errstate(invalid="ignore", divide="ignore"):
        load_n, sup_n = _arr(acc["cdu_load_n"]), _arr(acc["cdu_sup_n"])
        load = np.where(load_n > 0, _arr(acc["cdu_load"]) / np.maximum(load_n, 1), np.nan)
        sup = np.where(sup_n > 0, _arr(acc["cdu_sup"]) / np.maximum(sup_n, 1), np.nan)
    load_max, sup_max = _arr(acc["cdu_load_max"]), _arr(acc["cdu_sup_max"])
    headroom, feed_max = _arr(acc["feed_headroom_min"]), _arr(acc["feed_load_max"])
    r_head = _arr(acc["rated_headroom_min"]) if "rated_keys" in acc else np.zeros(0)
    r_load = _arr(acc["rated_load_max"]) if "rated_keys" in acc else np.zeros(0)
    n_power = int(acc["n_power"])
    it = acc["it"] / n_power if n_power else float("nan")
    fac = acc["fac"] / n_power if n_power else float("nan")
    finite_headroom = headroom[np.isfinite(headroom)]
    PlantMinute.objects.bulk_create([PlantMinute(
        cluster_id=cluster_id, minute=dt.datetime.fromtimestamp(minute * 60, tz=dt.UTC),
        samples=int(acc["n"]),
        pue=_num(acc["fac"] / acc["it"], 5) if n_power and acc["it"] > 0 else None,
        it_w=_num(it, 1), facility_w=_num(fac, 1),
        feed_headroom_w=_num(float(finite_headroom.min()), 1) if finite_headroom.size
        else None,
        cdus=[{"key": k, "load_fraction": _num(load[i]), "load_fraction_max": _num(load_max[i]),
               "supply_c": _num(sup[i], 3), "supply_c_max": _num(sup_max[i], 3)}
              for i, k in enumerate(acc["cdu_keys"])],
        feeds=[{"key": k, "headroom_w": _num(headroom[i], 1),
                "load_fraction_max": _num(feed_max[i])}
               for i, k in enumerate(acc["feed_keys"])],
        rated=[{"key": k, "kind": kind, "chain": chain, "headroom_w": _num(r_head[i], 1),
                "load_fraction_max": _num(r_load[i])}
               for i, (k, kind, chain) in enumerate(acc.get("rated_keys", []))],
        caps_binding=acc["caps_binding"], cards_capped=acc["cards_capped"])],
        ignore_conflicts=True)
    r.delete(key)
    return True
