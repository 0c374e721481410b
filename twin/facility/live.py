"""The plant in the live tick: each tick's measured rack power drives the engine.

The contract (the tick of ``twin.telemetry.processing`` calls :func:`step_live`; the
telemetry layer sits above this one, so it calls in and hands its Redis client and
arrays, and this module imports nothing of telemetry):

* **Compiled once per layout version and facility revision.** ``plant_for_site`` →
  ``compile_model`` is read from the database the first time a process ticks a
  cluster under a layout version (hardware edits bump it), and again when the
  facility's rows changed: the revision is the version of the ``facility`` domain of
  ``twin.core.aggregates``, which every committed write to the site, power, cooling
  and rack-facility tables replaces (from any process, whatever the write: admin,
  API, ``QuerySet.update``), so a steady tick pays one Redis GET and no query, and an
  edit reaches the live plant on the next tick. (Before: four aggregate queries —
  count and newest ``last_updated`` per table — every
  ``FACILITY_LIVE_RECHECK_S`` inside the tick, ~40 ms each on the shared PostgreSQL
  under the read load, ``docs/benchmarks.md`` "serving".) The version is read
  before the rows, so a write between the two leaves a plant under an old version
  that the next tick no longer takes. Redis away: the version cannot be read, and
  the rows' revision (those four queries) is checked at most every
  ``settings.FACILITY_LIVE_RECHECK_S`` (default 10 s) instead. A cluster without a
  facility is remembered as such. A plant the engine refuses (``PlantError``) is
  logged and treated as no facility: never a broken tick.
* **State in Redis**, not in the worker: ticks of one cluster run in any worker
  process (one at a time: the tick lock), so the thermal state (rack and CDU
  temperatures, the supply pipes' delay buffer, the heat-rejection loops) is one
  msgpack blob at :func:`state_key`, read and written each tick. A missing state, one
  of another layout, or a gap over ``MAX_GAP_S`` starts from the steady state under
  the current load (``settle``): the plant is not stepped across a long outage.
* **Under today's weather and what is out of service.** The site's dry and wet bulb
  at the tick's time (``simulation.facility.weather.ambient_at``: the weather series
  interpolated at now, else the design day) drive heat rejection; an element whose
  ``status`` is failed or maintenance is down, and its ``units_failed`` are out (a
  ``degraded`` one that counts none has lost one unit, never its last)
  (redundancy decides what the rest carry: an N+1 CDU that loses one module keeps its
  flow, a second loss cuts the flow of its racks in proportion, a failed CDU stops it).
  A status edit reaches the plant with the facility revision check above.
* **Stepped with the tick's dt** (the time since the state's last step, at least
  ``MIN_DT_S``) and the tick's rack power: cards' summed power + the rack's static
  draw (servers, switches, network devices: ``Rack.objects.draw_by_rack(static_only)``,
  the layout's ``static_w``). A rack none of whose cards reported counts at its static
  draw; a rack with no card at all (a network rack: not in the telemetry layout) at
  its nameplate draw. The hottest card of each rack sets its card temperature (``card_w``).
* **What it publishes** (:func:`summary_key`, msgpack: a fifth of JSON's encoding time
  for the million-card plant's ~6,000 element dicts; :func:`racks_key`, float32 arrays
  per rack in the layout's rack order): PUE now, IT/facility/loss/mechanical power,
  per CDU heat, capacity, load fraction, supply/return and flow, per power element
  input, planned rating and headroom, ``rated`` (every rated element, power and
  cooling: load, rating, available, headroom, load fraction), ``ambient`` and
  ``out_of_service``, and per rack coolant supply/return, flow and
  card temperature (``air_c``, air racks: the air reaching the cards). Measured
  readings (``twin.facility.readings``: native batches and Redfish) stand in
  for the model's figures of their CDU or power element while fresh;
  each element says which quantities are ``measured`` and keeps the model's under
  ``model``. The websocket frame, ``/metrics`` and the simulated agent read
  these (through ``twin.telemetry.state``); the tick's alert rules get the returned
  summary, with ``rack_supply_c`` (liquid racks only) and ``rack_flow_ratio`` (flow /
  design flow) per layout rack added, ``drift``/``model_drift`` (the
  ``model_drift`` rule's subjects and ``|reading − model| / tolerance``), and live capping
  ``rack_air_c`` (air racks only) and ``thermal`` (R liquid, R air, the card limit).
"""
from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import msgpack
import numpy as np

from simulation.facility.capping import it_limits
from simulation.facility.model import (
    ElementLoads,
    FacilityModel,
    compile_model,
    headroom_and_fraction,
)
from simulation.facility.plant import PlantError
from simulation.facility.thermal import Conditions, ThermalState
from simulation.facility.weather import ambient_at
from twin.facility import readings

__all__ = ["MAX_GAP_S", "MIN_DT_S", "LivePlant", "live_plant", "racks_key", "rated_rows",
           "state_key", "step_live", "summary_key"]

log = logging.getLogger(__name__)

MAX_GAP_S = 300.0
"""A gap between steps longer than this restarts the plant from its steady state."""
MIN_DT_S = 0.05

_STATE_FIELDS = ("rack_ret_c", "cdu_ret_c", "cdu_sup_c", "buf", "root_ret_c", "root_sup_c")


def state_key(prefix: str, cluster_id: int) -> str:
    """The thermal state blob of ``cluster_id`` (``<prefix>:c<id>:facility:state``)."""
    return f"{prefix}:c{cluster_id}:facility:state"


def summary_key(prefix: str, cluster_id: int) -> str:
    """The last step's summary (msgpack of the JSON-shaped dict)."""
    return f"{prefix}:c{cluster_id}:facility:summary"


def racks_key(prefix: str, cluster_id: int) -> str:
    """The last step's per-rack arrays (msgpack of float32 bytes, layout rack order)."""
    return f"{prefix}:c{cluster_id}:facility:racks"


@dataclass(frozen=True, eq=False)
class LivePlant:
    """A compiled plant and where each of the layout's racks sits in it."""

    version: str
    model: FacilityModel
    at: np.ndarray
    """Plant rack index of each layout rack (-1: not in the plant)."""
    owner: np.ndarray
    """Layout rack index of each plant rack (-1: not in the layout)."""
    cooling_failed: tuple[int, ...] = ()
    """Units out of service per cooling element (its ``units_failed``)."""
    power_failed: np.ndarray | None = None
    """Units out of service per power element."""
    out_of_service: tuple[dict[str, Any], ...] = ()
    """Elements not plainly in service (``twin.facility.plant.units_out``)."""

    # What every tick reads of the layout, built once (a million-card plant: ~13,000
    # elements, whose keys and slots a per-tick Python loop would rebuild).
    @cached_property
    def power_keys(self) -> tuple[str, ...]:
        return self.model.chain.keys

    @cached_property
    def power_at(self) -> dict[str, int]:
        return {k: i for i, k in enumerate(self.power_keys)}

    @cached_property
    def cdu_keys(self) -> list[str]:
        els = self.model.plant.cooling
        return [els[e].key for e in self.model.net.cdu_elem.tolist()]

    @cached_property
    def cdu_at(self) -> dict[str, int]:
        return {k: i for i, k in enumerate(self.cdu_keys)}

    @cached_property
    def published_power(self) -> np.ndarray:
        """The power elements the summary lists (feeds, PDUs, busways, power shelves)."""
        return np.array([i for i, e in enumerate(self.model.plant.power)
                         if e.kind in readings.POWER_KINDS_READ], dtype=np.int64)

    @cached_property
    def published_kinds(self) -> list[str]:
        return [self.model.plant.power[i].kind for i in self.published_power.tolist()]

    @cached_property
    def power_units_out(self) -> np.ndarray:
        """Units out of service per power element: its failed units, or all of them when
        the element is down (failed or in maintenance): what ``feed_failed`` counts."""
        chain = self.model.chain
        failed = (np.zeros(chain.n, dtype=np.int64) if self.power_failed is None
                  else np.asarray(self.power_failed, dtype=np.int64))
        return np.where(chain.down, chain.units, np.minimum(failed, chain.units))

    @cached_property
    def wanted(self) -> list[tuple[str, str]]:
        """The elements whose fresh readings stand in for the model."""
        return [("cooling", k) for k in self.cdu_keys] + [
            ("power", self.power_keys[i]) for i in self.published_power.tolist()]

    @cached_property
    def rated_labels(self) -> tuple[list[str], list[str], list[str]]:
        """Keys, kinds and chains of :func:`_rated`'s columns."""
        p, c = self.model.plant.power, self.model.plant.cooling
        idx = self.model.rated_cooling.tolist()
        return ([e.key for e in p] + [c[i].key for i in idx],
                [e.kind for e in p] + [c[i].kind for i in idx],
                ["power"] * len(p) + ["cooling"] * len(idx))

    @cached_property
    def drift(self) -> readings.DriftSlots:
        return readings.DriftSlots(self.cdu_keys, [self.power_keys[i] for i in
                                                   self.published_power.tolist()],
                                   self.published_kinds)


_cache: dict[int, tuple[str, tuple[Any, ...], float, LivePlant | None]] = {}
"""Per cluster: (layout version, facility revision, when it was checked (monotonic),
the plant or None). The revision is ``("v", <facility domain version>)``, or the rows'
count and newest ``last_updated`` per table when Redis was away."""
_lock = threading.Lock()


def _revision(cluster_id: int) -> tuple[Any, ...]:
    """What changes when the facility's rows do: per table, the count and the newest
    ``last_updated`` (one aggregate query each). Only used while Redis is away."""
    from django.db.models import Count, Max

    from twin.facility.models import CoolingElement, PowerElement, RackFacility, Site

    out: list[Any] = []
    for model, path in ((Site, "cluster_id"), (PowerElement, "site__cluster_id"),
                        (CoolingElement, "site__cluster_id"),
                        (RackFacility, "site__cluster_id")):
        agg = model.objects.filter(**{path: cluster_id}).aggregate(n=Count("pk"),
                                                                  t=Max("last_updated"))
        out += [agg["n"], agg["t"]]
    return tuple(out)


def _domain_version() -> tuple[Any, ...] | None:
    """``("v", version)`` of the ``facility`` domain (one Redis GET), None: Redis away."""
    from twin.core import aggregates
    from twin.core.unavailable import REDIS_ERRORS

    try:
        return ("v", aggregates.version("facility"))
    except REDIS_ERRORS:
        return None


def live_plant(cluster_id: int, version: str, layout_rack_ids: np.ndarray) -> LivePlant | None:
    """The compiled plant of ``cluster_id`` under layout ``version`` (None: no facility)."""
    from django.conf import settings

    hit = _cache.get(cluster_id)
    now = time.monotonic()
    rev = _domain_version()
    if hit is not None and hit[0] == version:
        if rev is not None and rev == hit[1]:
            return hit[3]
        if rev is None:  # Redis away: the rows' revision, at most every recheck
            recheck = float(getattr(settings, "FACILITY_LIVE_RECHECK_S", 10.0))
            if hit[1][:1] != ("v",) and now - hit[2] < recheck:
                return hit[3]
            rev = _revision(cluster_id)
            if rev == hit[1]:
                _cache[cluster_id] = (version, rev, now, hit[3])
                return hit[3]
    elif rev is None:
        rev = _revision(cluster_id)
    from twin.facility.capacity import positions  # the models: after the apps load
    from twin.facility.models import Site
    from twin.facility.plant import plant_for_site, units_out

    plant: LivePlant | None = None
    site = Site.objects.filter(cluster_id=cluster_id).first()
    if site is not None:
        try:
            model = compile_model(plant_for_site(site))
        except PlantError as err:
            log.warning("cluster %s: its plant cannot be simulated (%s: %s); the live tick "
                        "runs without it", cluster_id, err.field, err.message)
        else:
            ids = np.asarray(layout_rack_ids, dtype=np.int64)
            cooling_failed, power_failed, out = units_out(site)
            plant = LivePlant(version, model, positions(model.plant.racks.ids, ids),
                              positions(ids, model.plant.racks.ids), cooling_failed,
                              power_failed, tuple(out))
    with _lock:
        _cache[cluster_id] = (version, rev, now, plant)
    return plant


def _pack(s: ThermalState, version: str, ts: float) -> bytes:
    out: dict[str, Any] = {"v": version, "ts": ts, "t_s": s.t_s, "pos": s.pos,
                           "buf_shape": list(s.buf.shape)}
    for name in _STATE_FIELDS:
        out[name] = np.ascontiguousarray(getattr(s, name), dtype="<f8").tobytes()
    return msgpack.packb(out)


def _unpack(raw: bytes | None, version: str, model: FacilityModel
            ) -> tuple[ThermalState, float] | None:
    if not raw:
        return None
    d = msgpack.unpackb(raw)
    if d.get("v") != version:
        return None
    arrays = {name: np.frombuffer(d[name], dtype="<f8").copy() for name in _STATE_FIELDS}
    arrays["buf"] = arrays["buf"].reshape(d["buf_shape"])
    init = model.initial()
    if any(arrays[name].shape != getattr(init, name).shape for name in _STATE_FIELDS):
        return None
    return ThermalState(t_s=float(d["t_s"]), pos=int(d["pos"]), **arrays), float(d["ts"])


def step_live(r: Any, prefix: str, cluster_id: int, version: str, layout_rack_ids: np.ndarray,
              rack_w: np.ndarray, hottest_card_w: np.ndarray, now: float
              ) -> dict[str, Any] | None:
    """One step of the cluster's plant under this tick's rack power (W, layout rack
    order, NaN where no card reported: the caller's static draw is then used) and the
    hottest card's power per rack; publishes and returns the summary (None: the
    cluster has no facility)."""
    live = live_plant(cluster_id, version, layout_rack_ids)
    if live is None:
        return None
    model = live.model
    n = len(model.plant.racks)
    has = live.owner >= 0
    w = np.zeros(n)
    card = np.zeros(n)
    w[has] = np.nan_to_num(np.asarray(rack_w, dtype=float)[live.owner[has]], nan=0.0)
    card[has] = np.nan_to_num(np.asarray(hottest_card_w, dtype=float)[live.owner[has]],
                              nan=0.0)
    # racks with no card (network racks) are not in the telemetry layout: they draw
    # their nameplate (switches and other static devices)
    nameplate = model.plant.racks.nameplate_w
    if nameplate is not None:
        w[~has] = nameplate[~has]
    w = np.maximum(w, 0.0)
    dry, wet, ambient = ambient_at(model.plant.site, now)
    cond = Conditions(wet, dry, live.cooling_failed)
    pf = live.power_failed
    prev = _unpack(r.get(state_key(prefix, cluster_id)), version, model)
    if prev is None or not (0.0 <= now - prev[1] <= MAX_GAP_S):
        reading = model.settle(w, cond, power_failed=pf)
        reading = model.step(reading.thermal, w, MIN_DT_S, cond, card_w=card, power_failed=pf)
    else:
        reading = model.step(prev[0], w, max(now - prev[1], MIN_DT_S), cond, card_w=card,
                             power_failed=pf)
    s = reading.thermal
    loads = reading.loads(model)
    fresh = readings.read_fresh(r, prefix, cluster_id, live.wanted, now)
    cdus = _rows(("key", "heat_w", "capacity_w", "available_w", "headroom_w",
                  "load_fraction", "supply_c", "return_c", "flow_kg_s"),
                 [live.cdu_keys, *_cols(
                     loads.cooling_heat_w[:loads.n_cdu], loads.cooling_planned_w[:loads.n_cdu],
                     loads.cooling_available_w[:loads.n_cdu],
                     loads.cooling_headroom_w[:loads.n_cdu],
                     loads.cooling_load_fraction[:loads.n_cdu], loads.cdu_supply_c,
                     loads.cdu_return_c, loads.cdu_flow_kg_s)])
    published = live.published_power
    power = _rows(("key", "input_w", "loss_w", "planned_w", "available_w", "headroom_w",
                   "load_fraction", "units", "units_out"),
                  [[live.power_keys[i] for i in published.tolist()], *_cols(
                      *(a[published] for a in (
                          loads.power_input_w, loads.power_loss_w, loads.power_planned_w,
                          loads.power_available_w, loads.power_headroom_w,
                          loads.power_load_fraction))),
                   model.chain.units[published].tolist(), live.power_units_out[published].tolist()])
    # the readings stand in for the model's figures of the few elements read
    read_cdus = [c for c in cdus if ("cooling", c["key"]) in fresh]
    read_power = [p for p in power if ("power", p["key"]) in fresh]
    readings.overlay(read_cdus, read_power, [readings.POWER_KINDS_READ[0]] * len(read_power),
                     fresh, now)
    pw = reading.power
    kinds = live.published_kinds
    contract = model.plant.site.contract_kw
    summary: dict[str, Any] = {
        "ts": now, "pue": _num(reading.pue), "it_w": _num(pw.it_w),
        "facility_w": _num(pw.facility_w), "losses_w": _num(float(pw.loss_w.sum())),
        "pumps_w": _num(s.pumps_w), "fans_w": _num(s.fans_w), "chillers_w": _num(s.chillers_w),
        "contract_w": None if contract is None else contract * 1e3,
        "contract_headroom_w": None if contract is None else _num(contract * 1e3
                                                                   - pw.facility_w),
        "max_card_c": _num(float(s.card_c.max()) if s.card_c.size else float("nan")),
        "card_limit_c": model.net.params.card_limit_c,
        "cdus": cdus,
        "feeds": [p for p, kind in zip(power, kinds, strict=True) if kind == "feed"],
        "pdus": [p for p, kind in zip(power, kinds, strict=True)
                 if kind in ("pdu", "busway", "power_shelf")],
        "readings": {"elements": len(fresh), "ttl_s": readings.ttl_s()},
        "ambient": {"dry_bulb_c": dry, "wet_bulb_c": wet, "source": ambient},
        "out_of_service": list(live.out_of_service),
        "rated": _rated(live, loads, read_cdus, read_power),
    }
    for e in (*read_cdus, *read_power):  # the readings' figures, rounded as the model's
        e.update(_round(e))
    m = len(layout_rack_ids)
    per_rack = {}
    design = model.net.rack_flow_d
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(design > 0, s.rack_flow_kg_s / np.where(design > 0, design, 1.0),
                         np.nan)
    arrays: dict[str, np.ndarray] = {}
    for name, values in (("supply_c", s.rack_sup_c), ("return_c", s.rack_ret_c),
                         ("flow_kg_s", s.rack_flow_kg_s), ("card_c", s.card_c),
                         ("flow_ratio", ratio), ("air_c", s.rack_air_c)):
        out = np.full(m, np.nan, dtype="<f4")
        ok = live.at >= 0
        out[ok] = values[live.at[ok]]
        arrays[name] = out
        per_rack[name] = out.tobytes()
    pipe = r.pipeline(transaction=False)
    pipe.set(state_key(prefix, cluster_id), _pack(s, version, now))
    pipe.set(summary_key(prefix, cluster_id), msgpack.packb(summary))
    pipe.set(racks_key(prefix, cluster_id), msgpack.packb({"v": version, **per_rack}))
    pipe.execute()
    # for this tick's rules (not stored in the summary): per layout rack, NaN for air
    # racks' flow and racks outside the plant
    summary["rack_supply_c"] = np.where(model.net.liquid_rack[np.maximum(live.at, 0)]
                                        & (live.at >= 0), arrays["supply_c"], np.nan)
    # for capping's air ceiling: the air reaching an air rack's cards (NaN elsewhere),
    # and the engine's junction resistances and card limit
    summary["rack_air_c"] = arrays["air_c"]
    # (R liquid per layout rack: its card's cold plate, thermal.CoolingNetwork)
    summary["thermal"] = (np.where(live.at >= 0, model.net.r_liquid_k_w[np.maximum(live.at, 0)]
                                   if len(model.net.r_liquid_k_w) else 0.0,
                                   model.net.params.r_liquid_k_w),
                          model.net.params.r_air_k_w, model.net.params.card_limit_c)
    summary["rack_flow_ratio"] = arrays["flow_ratio"]
    # for live capping (``capping_live``): each power element's usable input as IT watts
    # at this step's losses, and where the layout's racks sit in the chain
    summary["power_limits"] = (model.chain, it_limits(pw, model.chain, w), live.at, w)
    # for the model_drift rule: |reading − model| / tolerance per readable quantity
    slots, drift = live.drift.evaluate([*(("cooling", c) for c in read_cdus),
                                        *(("power", p) for p in read_power)])
    summary["drift"] = slots
    summary["model_drift"] = np.asarray(drift, dtype=np.float64)
    return summary


def _rated(live: LivePlant, loads: ElementLoads, read_cdus: list[dict[str, Any]],
           read_power: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Every rated element's load against its rating, after the readings' overlay, as
    columns (one list per field, one entry per element, vectorised: a million-card plant
    has ~13,000): ``{key, kind, chain, load_w, rating_w, available_w, headroom_w,
    load_fraction}`` (power: input against the planned rating; cooling: heat against the
    planned capacity at design conditions; ``headroom_w`` against the lesser of planned
    and what the running units give). Power elements first (chain order), then the
    CDUs, heat-rejection roots and CRAHs."""
    load = np.concatenate([loads.power_input_w, loads.cooling_heat_w])
    rating = np.concatenate([loads.power_planned_w, loads.cooling_planned_w])
    available = np.concatenate([loads.power_available_w, loads.cooling_available_w])
    n_power = loads.power_input_w.shape[0]
    for c in read_cdus:  # a measured heat stands in for the model's
        load[n_power + live.cdu_at[str(c["key"])]] = float(c["heat_w"])
    for p in read_power:
        load[live.power_at[str(p["key"])]] = float(p["input_w"])
    headroom, fraction = headroom_and_fraction(load, rating, available)
    keys, kinds, chains = live.rated_labels
    return {"key": keys, "kind": kinds, "chain": chains,
            **dict(zip(("load_w", "rating_w", "available_w", "headroom_w", "load_fraction"),
                       _cols(load, rating, available, headroom, fraction), strict=True))}


def rated_rows(rated: Mapping[str, Sequence[Any]] | None) -> list[dict[str, Any]]:
    """The summary's ``rated`` columns as one dict per element (for readers that label
    each element: ``/metrics``, tests)."""
    if not rated:
        return []
    names = list(rated)
    return [dict(zip(names, values, strict=True))
            for values in zip(*(rated[n] for n in names), strict=True)]


def _cols(*arrays: np.ndarray) -> list[list[float | None]]:
    """Each array as a JSON list, rounded as :func:`_num` (None where not finite)."""
    out = []
    for a in arrays:
        a = np.asarray(a, dtype=float)
        col = np.round(a, 4).astype(object)
        bad = ~np.isfinite(a)
        if bad.any():
            col[bad] = None
        out.append(col.tolist())
    return out


def _rows(names: tuple[str, ...], columns: list[list[Any]]) -> list[dict[str, Any]]:
    """Columns → one dict per element (with empty ``measured`` and ``observed``: what
    :func:`twin.facility.readings.overlay` fills for an element read)."""
    return [dict(zip(names, values, strict=True), measured=[], observed=[])
            for values in zip(*columns, strict=True)]


def _num(x: float) -> float | None:
    return round(float(x), 4) if math.isfinite(x) else None


def _round(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (_num(v) if isinstance(v, float) else _round(v) if isinstance(v, dict) else v)
            for k, v in d.items()}
