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

__all__ = ["FacilityModel", "FacilityReading", "compile_model"]

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

    def elements(self, model: FacilityModel) -> dict[str, list[dict[str, Any]]]:
        """Per CDU and per power element, what an operator watches: load against
        rating (the planned one: redundancy counts, and no more than the running units
        give), temperatures, flows, headroom; ``cooling``: every rated cooling element
        (CDUs, towers, dry coolers, chillers, CRAHs) with its heat, planned and available
        capacity (design conditions) and headroom."""
        t, pw, net = self.thermal, self.power, model.net
        els = model.plant.cooling
        failed = (self.cond or Conditions.of(model.plant)).failed(len(els))

        def rated(i: int, heat: float) -> dict[str, Any]:
            e = els[i]
            running = 0 if e.down else max(e.units - int(failed[i]), 0)
            planned = e.capacity_kw * 1e3 * usable_units(e.units, e.redundancy)
            available = e.capacity_kw * 1e3 * running
            limit = min(planned, available)
            return {"key": e.key, "kind": e.kind, "heat_w": heat, "capacity_w": planned,
                    "available_w": available, "headroom_w": limit - heat,
                    "load_fraction": heat / limit if limit > 0 else float("inf")}

        cdus = []
        for k, e in enumerate(net.cdu_elem.tolist()):
            c = rated(e, float(t.cdu_heat_w[k]))
            c.update(supply_c=float(t.cdu_sup_c[k]), return_c=float(t.cdu_ret_c[k]),
                     flow_kg_s=float(t.cdu_flow_kg_s[k]))
            del c["kind"]
            cdus.append(c)
        cooling = [rated(e, float(t.cdu_heat_w[k])) for k, e in enumerate(net.cdu_elem.tolist())]
        cooling += [rated(e, float(t.root_heat_w[k]) if t.root_heat_w.size else 0.0)
                    for k, e in enumerate(net.root_elem.tolist())]
        cooling += [rated(e, float(t.crah_heat_w[k]) if t.crah_heat_w.size else 0.0)
                    for k, e in enumerate(net.crah_elem.tolist())]
        power = []
        for i, key in enumerate(model.chain.keys):
            limit = float(min(pw.planned_w[i], pw.available_w[i]))
            power.append({"key": key, "input_w": float(pw.input_w[i]),
                          "loss_w": float(pw.loss_w[i]), "planned_w": float(pw.planned_w[i]),
                          "available_w": float(pw.available_w[i]),
                          "headroom_w": float(pw.headroom_w[i]),
                          "load_fraction": float(pw.input_w[i]) / limit if limit > 0
                          else float("inf")})
        return {"cdus": cdus, "power": power, "cooling": cooling}


@dataclass(frozen=True, eq=False)
class FacilityModel:
    """A compiled plant: both chains as arrays, ready to step."""

    plant: Plant
    chain: PowerChain
    net: CoolingNetwork
    power_failed: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def initial(self) -> ThermalState:
        return initial_state(self.net)

    def settle(self, rack_w: F64, cond: Conditions | None = None, *,
               power_failed: I64 | None = None) -> FacilityReading:
        """The steady state under ``rack_w`` (W per rack)."""
        c = cond or Conditions.of(self.plant)
        powered = power_flow(self.chain, rack_w, failed_units=power_failed).rack_powered
        s = settle(self.net, np.where(powered, rack_w, 0.0), c)
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
