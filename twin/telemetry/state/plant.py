"""The live plant's last step, for readers (the websocket frame, /metrics, the agent):
what ``twin.facility.live`` published at the cluster's last tick."""
from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

from twin.telemetry.config import conf, redis_client

__all__ = ["card_caps", "plant_racks", "plant_summary"]


def plant_summary(cluster_id: int) -> dict[str, Any] | None:
    """PUE, power, CDUs, feeds and PDUs at the last tick (None: no facility or no tick)."""
    from twin.facility import live  # here: the state's readers load before the apps

    raw = redis_client().get(live.summary_key(conf().prefix, cluster_id))
    return None if raw is None else dict(msgpack.unpackb(raw))


def plant_racks(cluster_id: int, version: str) -> dict[str, np.ndarray] | None:
    """Per rack of layout ``version`` (its rack order): coolant ``supply_c``,
    ``return_c``, ``flow_kg_s``, ``flow_ratio``, ``card_c`` and (air racks; NaN for
    liquid ones) ``air_c``, the air reaching the cards, at the last tick (None: none
    yet)."""
    from twin.facility import live

    raw = redis_client().get(live.racks_key(conf().prefix, cluster_id))
    if raw is None:
        return None
    d = msgpack.unpackb(raw)
    if d.pop("v", None) != version:
        return None
    return {k: np.frombuffer(v, dtype="<f4") for k, v in d.items()}


def card_caps(cluster_id: int, version: str) -> np.ndarray | None:
    """Each card's binding power cap (W, float32, layout ``version``'s card order) from
    live capping at the last tick: only under ``apply`` (``propose`` caps bind nothing)
    and only caps of that layout (None otherwise, or when capping is off)."""
    from twin.facility.capping_live import read_caps

    got = read_caps(redis_client(), conf().prefix, cluster_id)
    if got is None or got.get("v") != version or got.get("mode") != "apply":
        return None
    return np.asarray(got["caps_w"], dtype=np.float32)
