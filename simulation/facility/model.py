"""The whole plant in one call: cooling network + power chain → PUE, every step.

PUE (The Green Grid, White Paper 49, "PUE: A Comprehensive Examination of the
Metric", 2012) is computed from the components, never stored:

    PUE = facility power / IT power
        = (IT + power-chain losses + pumps + fans + chiller compressors) / IT

with the losses from each element's efficiency curve at its load
(:mod:`~simulation.facility.power_chain`) and the mechanical draw from the affinity
laws and COPs of :mod:`~simulation.facility.thermal` at this step's flows and
weather. :func:`compile_model` validates the plant first, so a bad plant is a
:class:`~simulation.facility.plant.PlantError` naming the field, never a crash in a
step.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from simulation.facility.plant import Plant
from simulation.facility.power_chain import PowerChain, PowerFlow, compile_chain, power_flow
from simulation.facility.thermal import (
    Conditions,
    CoolingNetwork,
    ThermalParams,
    ThermalState,
    compile_network,
    initial_state,
    settle,
    step,
)
from simulation.facility.validate import usable_units, validate

__all__ = ["ElementLoads", "FacilityModel", "FacilityReading", "compile_model",
           "headroom_and_fraction"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class FacilityReading:
    """One step of the whole plant: the thermal state, the power flow and PUE."""

    thermal: ThermalState
    power: PowerFlow
    pue: float
    cond: Conditions | None = None
    """The weather and units out of service the step ran under (None: design, none)."""

    def summary(self) -> dict[str, Any]:
        """Site-level figures as plain JSON."""
        out = self.thermal.summary()
        out.update(it_w=self.power.it_w, losses_w=float(self.power.loss_w.sum()),
                   facility_w=self.power.facility_w, pue=self.pue)
        return out

    def loads(self, model: FacilityModel) -> ElementLoads:
        """Every rated element's load against its rating as arrays (vectorised: a
        million-card plant has ~13,000 elements): the CDUs, heat-rejection roots and
        CRAHs (``ElementLoads.cooling_index``), and every power element in chain order.
        A rating is the planned one (:func:`~simulation.facility.validate.usable_units`
        of the units by redundancy) and no more than the running units give."""
        t, pw, net = self.thermal, self.power, model.net
        idx = model.rated_cooling
        n_cdu, n_root = net.cdu_elem.shape[0], net.root_elem.shape[0]
        heat = np.concatenate([
            t.cdu_heat_w, t.root_heat_w if t.root_heat_w.size else np.zeros(n_root),
            t.crah_heat_w if t.crah_heat_w.size else np.zeros(net.crah_elem.shape[0])])
        failed = (self.cond or Conditions.of(model.plant)).failed(net.n_cooling)[idx]
        running = np.where(model.cooling_down[idx], 0,
                           np.maximum(model.cooling_units[idx] - failed, 0))
        cap = model.cooling_capacity_w[idx]
        return ElementLoads(
            cooling_index=idx, n_cdu=n_cdu, cooling_heat_w=heat.astype(float),
            cooling_planned_w=cap * model.cooling_usable[idx],
            cooling_available_w=cap * running,
            cdu_supply_c=t.cdu_sup_c, cdu_return_c=t.cdu_ret_c, cdu_flow_kg_s=t.cdu_flow_kg_s,
            power_input_w=pw.input_w, power_loss_w=pw.loss_w, power_planned_w=pw.planned_w,
            power_available_w=pw.available_w)

    def elements(self, model: FacilityModel) -> dict[str, list[dict[str, Any]]]:
        """Per CDU and per power element, what an operator watches: load against
        rating (the planned one: redundancy counts, and no more than the running units
        give), temperatures, flows, headroom; ``cooling``: every rated cooling element
        (CDUs, towers, dry coolers, chillers, CRAHs) with its heat, planned and available
        capacity (design conditions) and headroom. (:meth:`loads` as dicts.)"""
        ld = self.loads(model)
        els = model.plant.cooling
        head_c, frac_c = ld.cooling_headroom_w, ld.cooling_load_fraction
        cooling = [{"key": els[e].key, "kind": els[e].kind, "heat_w": float(ld.cooling_heat_w[k]),
                    "capacity_w": float(ld.cooling_planned_w[k]),
                    "available_w": float(ld.cooling_available_w[k]),
                    "headroom_w": float(head_c[k]), "load_fraction": float(frac_c[k])}
                   for k, e in enumerate(ld.cooling_index.tolist())]
        cdus = []
        for k in range(ld.n_cdu):
            c = {k2: v for k2, v in cooling[k].items() if k2 != "kind"}
            c.update(supply_c=float(ld.cdu_supply_c[k]), return_c=float(ld.cdu_return_c[k]),
                     flow_kg_s=float(ld.cdu_flow_kg_s[k]))
            cdus.append(c)
        head_p, frac_p = ld.power_headroom_w, ld.power_load_fraction
        power = [{"key": key, "input_w": float(ld.power_input_w[i]),
                  "loss_w": float(ld.power_loss_w[i]), "planned_w": float(ld.power_planned_w[i]),
                  "available_w": float(ld.power_available_w[i]),
                  "headroom_w": float(head_p[i]), "load_fraction": float(frac_p[i])}
                 for i, key in enumerate(model.chain.keys)]
        return {"cdus": cdus, "power": power, "cooling": cooling}


def headroom_and_fraction(load_w: F64, planned_w: F64, available_w: F64) -> tuple[F64, F64]:
    """Headroom = min(planned, available) − load; load fraction = load / that limit
    (∞ where the limit is 0: nothing running, or nothing planned)."""
    limit = np.minimum(planned_w, available_w)
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(limit > 0, load_w / np.where(limit > 0, limit, 1.0), np.inf)
    return limit - load_w, frac


@dataclass(frozen=True, eq=False)
class ElementLoads:
    """:meth:`FacilityReading.loads`: the rated elements' loads and ratings (W) as
    arrays. Cooling: the CDUs first (``n_cdu``, in ``CoolingNetwork.cdu_elem`` order),
    then heat-rejection roots, then CRAHs; ``cooling_index`` is each one's index in
    ``Plant.cooling``. Power: every element, in ``Plant.power`` order."""

    cooling_index: I64
    n_cdu: int
    cooling_heat_w: F64
    cooling_planned_w: F64
    cooling_available_w: F64
    cdu_supply_c: F64
    cdu_return_c: F64
    cdu_flow_kg_s: F64
    power_input_w: F64
    power_loss_w: F64
    power_planned_w: F64
    power_available_w: F64

    @property
    def cooling_headroom_w(self) -> F64:
        return headroom_and_fraction(self.cooling_heat_w, self.cooling_planned_w,
                                     self.cooling_available_w)[0]

    @property
    def cooling_load_fraction(self) -> F64:
        return headroom_and_fraction(self.cooling_heat_w, self.cooling_planned_w,
                                     self.cooling_available_w)[1]

    @property
    def power_headroom_w(self) -> F64:
        return headroom_and_fraction(self.power_input_w, self.power_planned_w,
                                     self.power_available_w)[0]

    @property
    def power_load_fraction(self) -> F64:
        return headroom_and_fraction(self.power_input_w, self.power_planned_w,
                                     self.power_available_w)[1]


@dataclass(frozen=True, eq=False)
class FacilityModel:
    """A compiled plant: both chains as arrays, ready to step."""

    plant: Plant
    chain: PowerChain
    net: CoolingNetwork
    power_failed: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def initial(self) -> ThermalState:
        return initial_state(self.net)

    @cached_property
    def rated_cooling(self) -> I64:
        """The rated cooling elements (CDUs, roots, CRAHs: :meth:`FacilityReading.loads`)
        as indices into ``plant.cooling``."""
        net = self.net
        return np.concatenate([net.cdu_elem, net.root_elem, net.crah_elem]).astype(np.int64)

    @cached_property
    def cooling_capacity_w(self) -> F64:
        """Per cooling element, the capacity of one unit (W, design conditions)."""
        return np.array([c.capacity_kw * 1e3 for c in self.plant.cooling], dtype=float)

    @cached_property
    def cooling_units(self) -> I64:
        return np.array([c.units for c in self.plant.cooling], dtype=np.int64)

    @cached_property
    def cooling_usable(self) -> I64:
        return np.array([usable_units(c.units, c.redundancy) for c in self.plant.cooling],
                        dtype=np.int64)

    @cached_property
    def cooling_down(self) -> npt.NDArray[np.bool_]:
        return np.array([c.down for c in self.plant.cooling], dtype=bool)

    def settle(self, rack_w: F64, cond: Conditions | None = None, *,
               card_w: F64 | None = None,
               power_failed: I64 | None = None) -> FacilityReading:
        """The steady state under ``rack_w`` (W per rack; ``card_w``: each rack's
        hottest card, default :meth:`~simulation.facility.thermal.CoolingNetwork.card_w`)."""
        c = cond or Conditions.of(self.plant)
        powered = power_flow(self.chain, rack_w, failed_units=power_failed).rack_powered
        s = settle(self.net, np.where(powered, rack_w, 0.0), c, card_w=card_w)
        return self._reading(s, rack_w, power_failed, c)

    def step(self, state: ThermalState, rack_w: F64, dt: float,
             cond: Conditions | None = None, *, card_w: F64 | None = None,
             power_failed: I64 | None = None) -> FacilityReading:
        """One step: racks without power (a lost feed) draw nothing and make no heat."""
        c = cond or Conditions.of(self.plant)
        flow0 = power_flow(self.chain, rack_w, failed_units=power_failed)
        it = np.where(flow0.rack_powered, rack_w, 0.0)
        s = step(self.net, state, it, dt, c, card_w)
        return self._reading(s, it, power_failed, c)

    def _reading(self, s: ThermalState, rack_w: F64,
                 power_failed: I64 | None, cond: Conditions | None = None) -> FacilityReading:
        flow = power_flow(self.chain, rack_w, failed_units=power_failed,
                          mechanical_w=s.mechanical_w)
        pue = flow.facility_w / flow.it_w if flow.it_w > 0 else float("nan")
        return FacilityReading(s, flow, pue, cond)


def compile_model(plant: Plant, params: ThermalParams | None = None) -> FacilityModel:
    """Validate ``plant`` and compile both chains (raises PlantError on bad input)."""
    validate(plant)
    return FacilityModel(plant=plant, chain=compile_chain(plant.power, plant.racks.power_parent),
                         net=compile_network(plant, params))
