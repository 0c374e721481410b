"""Rollups of the last tick: per-group aggregates, the tick number, the cluster headline."""
from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

from twin.telemetry import keys
from twin.telemetry.config import redis_client
from twin.telemetry.state.blobs import as_float, metric_index
from twin.telemetry.state.columns import health
from twin.telemetry.state.constants import HEALTH_NAMES, LEVELS, STATS
from twin.telemetry.state.layouts import layout

__all__ = ["frame_seq", "rollup", "summary"]


def rollup(cluster_id: int, level: str, metric: str) -> dict[str, Any]:
    """Per-group aggregates of ``metric`` at ``level`` from the last tick."""
    if level not in LEVELS:
        raise KeyError(f"unknown level {level!r}; known: {', '.join(LEVELS)}")
    i = metric_index(metric)
    lay = layout(cluster_id)
    index = lay.groups[level]
    g = len(index.ids)
    r = redis_client()
    raw_stats, raw_meta = r.mget(keys.rollup(cluster_id, lay.version, level, i),
                                 keys.rollup(cluster_id, lay.version, level, "meta"))
    if raw_stats and len(raw_stats) == 5 * g * 4:
        stats = np.frombuffer(raw_stats, np.float32).reshape(5, g).copy()
    else:
        stats = np.full((5, g), np.nan, np.float32)
        stats[4] = 0
    meta = msgpack.unpackb(raw_meta) if raw_meta else {}
    reporting = (np.frombuffer(meta["reporting"], np.int32).copy()
                 if meta.get("reporting") and len(meta["reporting"]) == 4 * g
                 else np.zeros(g, np.int32))
    out: dict[str, Any] = {
        "level": level, "metric": metric, "seq": int(meta.get("seq", 0)),
        "ts": meta.get("ts"), "ids": index.ids.copy(), "names": list(index.names),
        "cards": index.cards.copy(), "reporting": reporting,
    }
    for s, name in enumerate(STATS):
        out[name] = stats[s]
    if metric == "power_w":
        out["budget_w"] = index.budget_w.astype(np.float32)
        out["static_w"] = index.static_w.astype(np.float32)
        out["draw_w"] = np.where(stats[4] > 0, stats[3] + index.static_w, np.nan).astype(
            np.float32)
    return out


def frame_seq(cluster_id: int) -> int:
    """Number of the last tick of the cluster (0 before the first)."""
    raw = redis_client().get(keys.seq(cluster_id))
    return int(raw) if raw else 0


def summary(cluster_id: int) -> dict[str, Any]:
    """The cluster's headline numbers from the last tick."""
    power = rollup(cluster_id, "cluster", "power_w")
    util = rollup(cluster_id, "cluster", "gpu_util")
    temp = rollup(cluster_id, "cluster", "gpu_temp_c")
    codes = np.bincount(health(cluster_id), minlength=len(HEALTH_NAMES))
    return {
        "cluster": int(cluster_id), "seq": power["seq"], "ts": power["ts"],
        "cards": int(power["cards"][0]) if len(power["cards"]) else 0,
        "reporting": int(power["reporting"][0]) if len(power["reporting"]) else 0,
        "power_draw_w": as_float(power["draw_w"][0]) if len(power["draw_w"]) else None,
        "power_budget_w": as_float(power["budget_w"][0]) if len(power["budget_w"]) else None,
        "gpu_util_mean": as_float(util["mean"][0]) if len(util["mean"]) else None,
        "gpu_util_max": as_float(util["max"][0]) if len(util["max"]) else None,
        "gpu_temp_max_c": as_float(temp["max"][0]) if len(temp["max"]) else None,
        "health": {name: int(codes[c]) for c, name in enumerate(HEALTH_NAMES)},
    }
