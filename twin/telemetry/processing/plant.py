"""The tick's hand-off to the physical twin (``twin.facility.live``).

Telemetry sits above the facility app in the layers, so the tick calls in with its
Redis client, key prefix and this tick's rack rollups; a cluster without a facility
costs a dictionary lookup. Whatever the plant does, the tick goes on: an error is
logged and counted, never raised.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import redis

from twin.facility import capping_live, history, live
from twin.telemetry.config import conf
from twin.telemetry.processing.minutes import POWER
from twin.telemetry.state import Layout

__all__ = ["persist_plant_minute", "plant_errors", "record_minute", "step_capping",
           "step_plant"]

log = logging.getLogger(__name__)

plant_errors = 0
"""Ticks whose plant step failed in this process (logged, the tick went on)."""


def step_plant(r: redis.Redis, lay: Layout, rollups: Mapping[str, Any],
               now: float) -> dict[str, Any] | None:
    """Step the cluster's plant with this tick's rack power (None: no facility).
    ``rollups["rack"][POWER]`` is the racks' (mean, min, max, sum, count) of card power:
    the tick's rollups, or the merged rack rollup of a sharded round."""
    global plant_errors
    racks = lay.groups.get("rack")
    if racks is None or not len(racks.ids):
        return None
    try:
        if "rack" in rollups:
            power = rollups["rack"][POWER]
            rack_w = np.where(power[4] > 0, power[3] + racks.static_w, racks.static_w)
            hottest = np.where(power[4] > 0, power[2], 0.0)
        else:
            rack_w = np.asarray(racks.static_w, dtype=float)
            hottest = np.zeros(len(racks.ids))
        started = time.perf_counter()
        out = live.step_live(r, conf().prefix, lay.cluster_id, lay.version, racks.ids,
                             rack_w, hottest, now)
        if out is not None:
            out["step_ms"] = round((time.perf_counter() - started) * 1e3, 3)
        return out
    except Exception:  # the tick must not break on the plant
        plant_errors += 1
        log.exception("cluster %s: the plant step failed; the tick goes on", lay.cluster_id)
        return None


def step_capping(r: redis.Redis, lay: Layout, card_w: np.ndarray,
                 plant: Mapping[str, Any] | None, now: float) -> dict[str, Any] | None:
    """Live power capping (``twin.facility.capping_live``; None: off): the cards'
    measured power (NaN: not fresh), the racks' budgets, the contract in IT watts
    (the plant's IT/facility ratio) and the racks' coolant (liquid racks) or the air
    at their cards (air racks) for the thermal ceiling."""
    global plant_errors
    racks = lay.groups.get("rack")
    if racks is None or not lay.n:
        return None
    try:
        site = None
        coolant = air = thermal = None
        limits = None
        if plant is not None:
            coolant = plant.get("rack_supply_c")
            air = plant.get("rack_air_c")
            thermal = plant.get("thermal")
            limits = plant.get("power_limits")
            it, fac, contract = plant.get("it_w"), plant.get("facility_w"), plant.get("contract_w")
            if contract and it and fac:
                # the contract in IT watts, less what is not the cards (static, network)
                other = float(it) - float(np.nansum(card_w))
                site = max(float(contract) * float(it) / float(fac) - other, 0.0)
        return capping_live.step_caps(
            r, conf().prefix, lay.cluster_id, lay.version, racks.of_card, card_w,
            lay.tdp_w, lay.idle_w, np.maximum(racks.budget_w - racks.static_w, 0.0), now,
            rack_coolant_c=coolant, rack_air_c=air, thermal=thermal, site_limit_w=site,
            power_limits=limits,
            card_ids=lay.card_ids)
    except Exception:  # the tick must not break on capping
        plant_errors += 1
        log.exception("cluster %s: the capping step failed; the tick goes on", lay.cluster_id)
        return None


def record_minute(r: redis.Redis, lay: Layout, plant: Mapping[str, Any] | None,
                  caps: Mapping[str, Any] | None, now: float) -> None:
    """Add this tick's plant step (and the caps' binding count) to the plant's minute
    accumulator (``twin.facility.history``; nothing without a facility). Written as a
    ``PlantMinute`` row with the telemetry minute (:func:`persist_plant_minute`)."""
    global plant_errors
    if plant is None:
        return
    try:
        history.add_sample(r, conf().prefix, lay.cluster_id, plant, caps, now)
    except Exception:  # the tick must not break on the history
        plant_errors += 1
        log.exception("cluster %s: the plant's minute sample failed; the tick goes on",
                      lay.cluster_id)


def persist_plant_minute(r: redis.Redis, cluster_id: int, minute: int) -> bool:
    """Write the plant's minute ``minute`` of ``cluster_id`` (``twin.facility.history``),
    next to the telemetry minute rows; an error is logged, never raised (the telemetry
    rows are written regardless). Whether a row was written."""
    global plant_errors
    try:
        return history.persist_minute(r, conf().prefix, cluster_id, minute)
    except Exception:
        plant_errors += 1
        log.exception("cluster %s: the plant's minute %s was not written", cluster_id, minute)
        return False
