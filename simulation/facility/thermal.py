"""The cooling chain as a lumped thermal-hydraulic network with transients.

Heat path (ExaDigiT/RAPS ``cooling.json``; Modelica Buildings names; HPE
sustain-lc "Blade Group and CDU Modeling"): card → cold plate → rack coolant →
technology-cooling loop (TCS) → CDU heat exchanger → facility-water loop (FWS) →
heat rejection (cooling tower against the wet bulb, dry cooler against the dry bulb,
chiller with a COP). Air-cooled racks, and the air share of liquid racks, go to
CRAH units whose coils sit on the facility water: a liquid rack's air share to the
CRAH its ``RackSet.air_parent`` names, or, where none is named (-1, or no
``air_parent`` at all), spread over every CRAH by capacity (to its CDU's water when
the site has no CRAH: rear-door exchangers). The state is arrays (racks, CDUs,
heat-rejection roots); :func:`step` advances all of them at once.

**Rack (cold plates + rack coolant), a first-order lag** (sustain-lc's blade group):

    C_r dT_r/dt = Q_r − G_r (T_r − T_in),   G_r = ṁ_r c_p

with C_r the heat capacity of the rack's coolant and cold plates, T_r its outlet
(return) temperature, T_in the CDU supply after the supply pipe's transport delay.
At steady state T_r = T_in + Q_r / (ṁ_r c_p) (coolant rise); after a step in Q the
response is 1 − e^(−t/τ), τ = C_r / G_r. Integrated *exactly* for inputs held over
the step (exponential integrator: T += (Q + G (T_in − T)) · dt/C · φ(G dt/C),
φ(x) = (1 − e^(−x))/x), so any dt is stable and zero flow is the limit
T += Q dt / C (the coolant heats until something trips).

**A rack's share of its CDU's flow** is its share of the CDU's design heat to liquid
(:func:`design_flow_split`): the loop is balanced for one design ΔT at every rack's
design load (its hardware's nameplate × its liquid share; :func:`design_load_w`), the
rule behind the published flow per kW (ASHRAE TC 9.9; OCP: 1.5 L/min of PG25 per kW
for ΔT ≤ 10 K). C_r scales with the same design load (the rack's plumbing and cold
plates are its hardware's).

**Loop mixing and transport delay.** Returns mix by flow (Σ ṁ T / Σ ṁ) into the
CDU's return volume (half the loop's coolant, a mixed tank, same exponential
update); the supply half is a plug-flow pipe: the racks see the CDU supply of
ρ V_supply / ṁ seconds ago (a ring buffer of past supplies).

**CDU heat exchanger by effectiveness–NTU** (Incropera et al., *Fundamentals of
Heat and Mass Transfer*, 7th ed., §11.4, counterflow):

    ε = (1 − e^(−NTU(1−C_r))) / (1 − C_r e^(−NTU(1−C_r))),   ε = NTU/(1+NTU) at C_r = 1
    Q = ε C_min (T_TCS,return − T_FWS,supply)

The design point fixes UA: with balanced flows (C_TCS = C_FWS = C) a CDU rated Q_d
at approach a (FWS supply → TCS supply) has ε = ΔT/(ΔT + a), ΔT = Q_d/C, so
NTU = ΔT/a and **UA = Q_d / a**. Off design UA scales with each side's film
coefficient, h ∝ ṁ^0.8 (Dittus–Boelter), half the resistance on each side. The CDU
holds its TCS supply setpoint with its facility-side valve: Q = min(Q_max, C_TCS ·
(T_return − T_set)); above Q_max the supply floats up.

**Units.** ``capacity_kw`` is per unit (:mod:`~simulation.facility.plant`); a CDU's
units are its modules (exchanger and pump), so its rated capacity is capacity × usable
units, with ``design_flow_kg_s`` and ``pump_kw`` for the whole CDU; a tower's units are
cells, a CRAH's its fans-and-coils.

**Pumps and fans: affinity laws** (pump power ∝ speed³ ∝ flow³ in a fixed system
curve; same for fans and airflow; e.g. ASHRAE Handbook — HVAC Systems and Equipment,
ch. 44 "Centrifugal Pumps"). With redundancy the running units carry the design flow
until fewer than the usable count run, then the flow falls in proportion (parallel
identical pumps).

**Heat rejection.** A cooling tower (dry cooler) is a conductance k = Q_d / a_d to the
wet (dry) bulb, so Q = k (T_supply − T_wb) and T_supply = (G T_return + k T_wb) /
(G + k) at full fan: its approach grows with load and with a hotter day. Below
capacity the fan slows to hold the supply setpoint, capacity ∝ airflow (ASHRAE
Handbook — HVAC Systems and Equipment, ch. 40 "Cooling Towers"), fan power ∝ speed³.
A chiller holds its setpoint up to its capacity and draws Q / COP, COP = 0.40 × the
Carnot COP between the supply and the dry bulb + 10 K (0.40 reproduces the ASHRAE
90.1-2019 minimum full-load COP 2.96 of an air-cooled chiller at the AHRI 550/590
point: 6.7 °C leaving water, 35 °C ambient).

**Card temperature** = mean coolant temperature of its rack + P_card · R (junction
to coolant; for air racks junction to the air at the cards: the inlet air + half the
rack's own air rise P_rack / (ṁ_air c_p), its airflow sized for its budget at the
design rise, :mod:`simulation.facility.air`), R from :class:`ThermalParams`
(docs/facility.md gives the figures and their basis). Where the racks give their
card's TDP (``RackSet.card_tdp_w``) a liquid card's R is
min(``r_liquid_k_w``, ``card_rise_at_tdp_c`` / TDP): a cold plate is engineered for
its part, so the junction rise over the coolant at TDP stays ≈ 28 K (0.04 K/W × an
H100's 700 W; a GB200 cold plate's stated target is a GPU rise < 30 K, R < 0.03 K/W —
Kenfa Tech, "Deep Dive into NVIDIA GB200 Liquid Cooling Plate Design"), and a card not
measured draws TDP × min(1, P_rack / P_nameplate) (its share of its rack's draw)
instead of P_rack / ``cards_per_rack`` (an NVL72 rack over 40 "cards" made each
3.3 kW: 160 °C, issue 24).

Pump and fan work is not added to the coolant (it is < 1 % of the heat); power-chain
losses are dissipated to room air outside this network. Fluid properties:
:mod:`simulation.facility.fluids`.

>>> import numpy as np
>>> from simulation.facility.plant import CoolingElement, Plant, PowerElement, RackSet, Site
>>> racks = RackSet(ids=np.arange(2), power_parent=np.zeros(2, dtype=np.int64),
...     cooling_parent=np.ones(2, dtype=np.int64), budget_w=np.full(2, 40e3),
...     liquid_fraction=np.ones(2))
>>> plant = Plant(Site(wet_bulb_c=20.0, dry_bulb_c=30.0),
...     (PowerElement("feed", "feed", 200.0),),
...     (CoolingElement("tower", "cooling_tower", 400.0, approach_c=4.0),
...      CoolingElement("cdu", "cdu", 100.0, parent="tower", approach_c=3.0,
...                     design_flow_kg_s=2.0, volume_l=100.0)), racks)
>>> net = compile_network(plant)
>>> s = settle(net, np.full(2, 30e3), Conditions.of(plant))
>>> round(float(s.rack_ret_c[0] - s.rack_sup_c[0]), 2)     # 30 kW / (1 kg/s · 3940)
7.61
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from simulation.facility.air import card_air_c, design_airflow_kg_s
from simulation.facility.fluids import PG25, WATER, Fluid
from simulation.facility.plant import Plant, RackSet
from simulation.facility.validate import HEAT_REJECTION_KINDS, usable_units

__all__ = [
    "ASHRAE_W_CLASSES",
    "Conditions",
    "CoolingNetwork",
    "ThermalParams",
    "ThermalState",
    "compile_network",
    "design_flow_split",
    "design_load_w",
    "Hydraulics",
    "effectiveness_counterflow",
    "hydraulics",
    "initial_state",
    "settle",
    "step",
]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

ASHRAE_W_CLASSES: dict[str, float] = {"W17": 17.0, "W27": 27.0, "W32": 32.0,
                                      "W40": 40.0, "W45": 45.0}
"""ASHRAE TC 9.9 liquid-cooling classes: the highest facility-water supply (°C) each
class allows ("Water-Cooled Servers — Common Designs, Components and Processes",
2019; W+ is above 45 °C)."""

_K_TOWER, _K_DRY, _K_CHILLER = 0, 1, 2
_BUFFER = 64


@dataclass(frozen=True)
class ThermalParams:
    """Coefficients the plant data does not carry (docs/facility.md cites each).

    ``r_liquid_k_w`` / ``r_air_k_w``: card junction to coolant / to the air at the
    card (K/W);
    ``rack_coolant_l_per_kw``: coolant in a rack's manifolds and cold plates per kW of
    design load (:func:`design_load_w`); ``cold_plate_j_k_per_kw``: copper of its cold
    plates, per kW of the same; ``card_limit_c``:
    the card's slowdown temperature; ``cards_per_rack``: to get a card's power from the
    rack's when it is not given; ``air_supply_c`` / ``air_rise_c``: CRAH supply air and
    its design rise (also the rise an air rack's fans are sized for at its budget);
    ``chiller_carnot_fraction`` and ``condenser_approach_c``: the
    chiller's COP; ``film_exponent``: h ∝ ṁ^n; ``crah_water_rise_c``: the chilled-water
    rise across a CRAH coil whose design flow is not given (0): its flow is then its
    capacity / (c_p × this), the classic 10 °F design ΔT (ASHRAE Handbook — HVAC
    Systems and Equipment, ch. 13)."""

    r_liquid_k_w: float = 0.04
    r_air_k_w: float = 0.065
    card_rise_at_tdp_c: float = 28.0
    """Junction rise over the coolant of a cold-plated card at its TDP (K) where the
    racks give the card's TDP: R = min(``r_liquid_k_w``, this / TDP) (module doc)."""
    rack_coolant_l_per_kw: float = 0.3
    cold_plate_j_k_per_kw: float = 400.0
    card_limit_c: float = 85.0
    cards_per_rack: int = 40
    air_supply_c: float = 25.0
    air_rise_c: float = 12.0
    chiller_carnot_fraction: float = 0.40
    condenser_approach_c: float = 10.0
    chiller_default_setpoint_c: float = 18.0
    film_exponent: float = 0.8
    crah_water_rise_c: float = 5.6
    tcs_fluid: Fluid = PG25
    fws_fluid: Fluid = WATER


@dataclass(frozen=True, eq=False)
class CoolingNetwork:
    """A validated plant's cooling chain as index arrays (build with
    :func:`compile_network`). Racks → CDUs (or CRAHs) → roots (heat rejection);
    facility loops carry pumps between CDUs and roots."""

    params: ThermalParams
    # racks
    rack_cdu: I64
    rack_crah: I64
    rack_air_crah: I64
    rack_liquid: F64
    rack_flow_d: F64
    rack_cap_j_k: F64
    liquid_rack: npt.NDArray[np.bool_]
    # CDUs
    cdu_elem: I64
    cdu_root: I64
    cdu_floop: I64
    cdu_cap_w: F64
    cdu_flow_d: F64
    cdu_fws_flow_d: F64
    cdu_ua_d: F64
    cdu_setpoint_c: F64
    cdu_pump_w: F64
    cdu_units: I64
    cdu_usable: I64
    cdu_down: npt.NDArray[np.bool_]
    cdu_pipe_kg: F64
    cdu_tank_j_k: F64
    # facility loops
    floop_elem: I64
    floop_pump_w: F64
    floop_units: I64
    floop_usable: I64
    floop_down: npt.NDArray[np.bool_]
    # CRAHs
    crah_elem: I64
    crah_root: I64
    crah_cap_w: F64
    crah_fan_w: F64
    crah_flow_d: F64
    crah_units: I64
    crah_down: npt.NDArray[np.bool_]
    air_share_crah: F64
    # roots
    root_elem: I64
    root_kind: I64
    root_cap_w: F64
    root_approach_c: F64
    root_setpoint_c: F64
    root_fan_w: F64
    root_units: I64
    root_usable: I64
    root_down: npt.NDArray[np.bool_]
    root_tank_j_k: F64
    root_parent: I64
    n_cooling: int = 0
    rack_air_kg_s: F64 | None = None
    """Each rack's airflow, sized for its budget at ``params.air_rise_c``
    (:func:`simulation.facility.air.design_airflow_kg_s`); None: no rise through the
    rack (air racks' cards then see the CRAH's supply air)."""
    rack_card_tdp_w: F64 | None = None
    """Each rack's card TDP (W, 0: no card; ``RackSet.card_tdp_w``); None: not given."""
    rack_card_share: F64 | None = None
    """Card W per rack W at nameplate (TDP / the rack's nameplate draw); None: not given."""

    @cached_property
    def r_liquid_k_w(self) -> F64:
        """Each rack's junction-to-coolant resistance (K/W): ``params.r_liquid_k_w``,
        or min(that, ``card_rise_at_tdp_c`` / TDP) where the card's TDP is given."""
        p = self.params
        r = np.full(self.n_racks, p.r_liquid_k_w)
        if self.rack_card_tdp_w is None:
            return r
        tdp = self.rack_card_tdp_w
        out: F64 = np.where(tdp > 0, np.minimum(r, p.card_rise_at_tdp_c
                                                / np.where(tdp > 0, tdp, 1.0)), r)
        return out

    def card_w(self, rack_w: F64) -> F64:
        """A card's power when it is not measured: TDP × min(1, rack W / nameplate W)
        where the racks give their card (0 W on a rack without cards), else rack W /
        ``params.cards_per_rack``."""
        plain: F64 = rack_w / self.params.cards_per_rack
        if self.rack_card_tdp_w is None or self.rack_card_share is None:
            return plain
        tdp = self.rack_card_tdp_w
        share = np.where(self.rack_card_share > 0, self.rack_card_share,
                         1.0 / self.params.cards_per_rack)
        out: F64 = np.where(tdp > 0, np.minimum(rack_w * share, tdp), 0.0)
        return out

    @property
    def n_racks(self) -> int:
        return int(self.rack_cdu.shape[0])


@dataclass(frozen=True)
class Conditions:
    """What the plant sees this step: weather and the units out of service
    (per cooling element, index as in ``Plant.cooling``)."""

    wet_bulb_c: float
    dry_bulb_c: float
    cooling_failed: tuple[int, ...] = ()

    @classmethod
    def of(cls, plant: Plant) -> Conditions:
        """The site's design day, nothing failed."""
        return cls(plant.site.wet_bulb_c, plant.site.dry_bulb_c)

    def failed(self, n: int) -> I64:
        out = np.zeros(n, dtype=np.int64)
        if self.cooling_failed:
            out[: len(self.cooling_failed)] = self.cooling_failed[:n]
        return out


@dataclass(frozen=True, eq=False)
class ThermalState:
    """Every temperature (°C), flow (kg/s), heat (W) and power (W) of one instant.

    The first block is the state integrated over time; the rest are what the last
    step computed from it (readings an operator would see)."""

    t_s: float
    rack_ret_c: F64
    cdu_ret_c: F64
    cdu_sup_c: F64
    buf: F64
    pos: int
    root_ret_c: F64
    root_sup_c: F64
    rack_sup_c: F64 = field(default_factory=lambda: np.zeros(0))
    rack_flow_kg_s: F64 = field(default_factory=lambda: np.zeros(0))
    card_c: F64 = field(default_factory=lambda: np.zeros(0))
    rack_air_c: F64 = field(default_factory=lambda: np.zeros(0))
    """Air reaching an air rack's cards (°C, :func:`simulation.facility.air.card_air_c`;
    NaN for liquid racks)."""
    cdu_flow_kg_s: F64 = field(default_factory=lambda: np.zeros(0))
    cdu_heat_w: F64 = field(default_factory=lambda: np.zeros(0))
    crah_heat_w: F64 = field(default_factory=lambda: np.zeros(0))
    root_heat_w: F64 = field(default_factory=lambda: np.zeros(0))
    liquid_in_w: float = 0.0
    air_in_w: float = 0.0
    unremoved_air_w: float = 0.0
    rejected_w: float = 0.0
    pumps_w: float = 0.0
    fans_w: float = 0.0
    chillers_w: float = 0.0

    @property
    def mechanical_w(self) -> float:
        """Pumps + fans + chiller compressors: the cooling plant's electrical draw."""
        return self.pumps_w + self.fans_w + self.chillers_w

    def summary(self) -> dict[str, Any]:
        """Plain JSON of the site-level figures."""
        return {"t_s": self.t_s, "liquid_in_w": self.liquid_in_w, "air_in_w": self.air_in_w,
                "rejected_w": self.rejected_w, "pumps_w": self.pumps_w,
                "fans_w": self.fans_w, "chillers_w": self.chillers_w,
                "max_card_c": float(self.card_c.max()) if self.card_c.size else float("nan")}


def effectiveness_counterflow(ntu: F64, cr: F64) -> F64:
    """ε of a counterflow exchanger (Incropera 7th ed., Table 11.3):
    (1 − e^(−N(1−C)))/(1 − C e^(−N(1−C))), and N/(1+N) when C = 1.

    >>> [round(float(x), 4) for x in effectiveness_counterflow(np.array([1.0, 1.0]),
    ...                                                         np.array([1.0, 0.0]))]
    [0.5, 0.6321]
    """
    ntu = np.asarray(ntu, dtype=float)
    cr = np.asarray(cr, dtype=float)
    one = np.abs(1.0 - cr) < 1e-9
    e = np.exp(-ntu * (1.0 - cr))
    with np.errstate(invalid="ignore", divide="ignore"):
        general = (1.0 - e) / (1.0 - cr * e)
    out: F64 = np.where(one, ntu / (1.0 + ntu), general)
    return out


def _phi(x: F64) -> F64:
    """(1 − e^(−x)) / x, with φ(0) = 1."""
    small = x < 1e-12
    safe = np.where(small, 1.0, x)
    out: F64 = np.where(small, 1.0, -np.expm1(-safe) / safe)
    return out


def design_load_w(racks: RackSet) -> F64:
    """Each rack's design load (W): the nameplate draw of its installed hardware, what the
    builder sizes its CDU, flow and loop for (``RackSet.nameplate_w``); its budget where
    the plant gives no nameplate or the rack has none (no hardware yet: the planning
    figure)."""
    budget = np.asarray(racks.budget_w, dtype=float)
    if racks.nameplate_w is None:
        return budget
    plate = np.asarray(racks.nameplate_w, dtype=float)
    out: F64 = np.where(plate > 0, plate, budget)
    return out


def design_flow_split(rack_cdu: I64, design_heat_w: F64, budget_w: F64,
                      cdu_flow_kg_s: F64) -> F64:
    """Each rack's design flow (kg/s): its CDU's design flow split in proportion to the
    racks' design heat to liquid, ṁ_i = ṁ_CDU · Q_i / Σ_CDU Q (0 for a rack on no CDU).

    Why: a technology cooling loop is balanced so every rack's coolant rises by the same
    design ΔT at its design load, each rack's valve set to ṁ_i = Q_i / (c_p ΔT_d): the
    rules of thumb give flow per kW of design heat at a design ΔT (ASHRAE TC 9.9, *Liquid
    Cooling Guidelines for Datacom Equipment Centers*: a TCS designed to a supply
    temperature and ΔT; OCP's cold-plate guidance 1.5 L/min of PG25 per kW for ΔT ≤
    10 K, 1.25–2.0 L/min per kW in the OCP OAI liquid-cooling guideline — flow ∝ kW at a
    given ΔT; docs/facility.md cites both). The CDU's pump gives the loop its design
    flow, so the racks share it by Q_i / ΣQ, and at design load every rack rises by
    ΣQ / (ṁ_CDU c_p). It was split by budget: a rack whose budget is far above its
    hardware (a network rack given a GPU rack's budget) took a GPU rack's flow from the
    racks that need it (issue 24). A CDU whose racks carry no design heat to liquid
    splits by budget."""
    n_cdu = cdu_flow_kg_s.shape[0]
    on = rack_cdu >= 0
    out: F64 = np.zeros(rack_cdu.shape[0])
    if not n_cdu or not on.any():
        return out
    at = np.maximum(rack_cdu, 0)
    q = np.where(on, np.maximum(design_heat_w, 0.0), 0.0)
    b = np.where(on, budget_w, 0.0)
    q_sum = np.bincount(at, weights=q, minlength=n_cdu)
    b_sum = np.bincount(at, weights=b, minlength=n_cdu)
    by_heat = q_sum[at] > 0
    share = np.where(by_heat, q / np.where(by_heat, q_sum[at], 1.0),
                     b / np.where(b_sum[at] > 0, b_sum[at], 1.0))
    out = np.where(on, share * cdu_flow_kg_s[at], 0.0)
    return out


def compile_network(plant: Plant, params: ThermalParams | None = None) -> CoolingNetwork:
    """Index arrays of a validated plant (:func:`~simulation.facility.validate.validate`)."""
    p = params or ThermalParams()
    els = plant.cooling
    index = {c.key: i for i, c in enumerate(els)}
    parent = [index[c.parent] if c.parent is not None else -1 for c in els]

    def ancestor(i: int, kinds: tuple[str, ...]) -> int:
        while i >= 0 and els[i].kind not in kinds:
            i = parent[i]
        return i

    roots = [i for i, c in enumerate(els) if c.kind in HEAT_REJECTION_KINDS]
    cdus = [i for i, c in enumerate(els) if c.kind == "cdu"]
    floops = [i for i, c in enumerate(els) if c.kind == "facility_loop"]
    crahs = [i for i, c in enumerate(els) if c.kind == "crah"]
    pos_root = {e: k for k, e in enumerate(roots)}
    pos_cdu = {e: k for k, e in enumerate(cdus)}
    pos_floop = {e: k for k, e in enumerate(floops)}
    pos_crah = {e: k for k, e in enumerate(crahs)}
    tcs, fws = p.tcs_fluid, p.fws_fluid

    r = plant.racks
    n = len(r)
    rack_cdu = np.full(n, -1, dtype=np.int64)
    rack_crah = np.full(n, -1, dtype=np.int64)
    parent_of = np.asarray(r.cooling_parent, dtype=np.int64)
    elem_to_cdu = np.array([pos_cdu.get(ancestor(i, ("cdu",)), -1) if els[i].kind in
                            ("cdu", "tcs_loop") else -1 for i in range(len(els))] or [-1],
                           dtype=np.int64)
    elem_to_crah = np.array([pos_crah.get(i, -1) for i in range(len(els))] or [-1],
                            dtype=np.int64)
    rack_air_crah = np.full(n, -1, dtype=np.int64)
    if n:
        rack_cdu = elem_to_cdu[parent_of]
        rack_crah = elem_to_crah[parent_of]
        if r.air_parent is not None:
            named = np.asarray(r.air_parent, dtype=np.int64)
            rack_air_crah = np.where((named >= 0) & (rack_cdu >= 0),
                                     elem_to_crah[np.maximum(named, 0)], -1)
    liquid = np.asarray(r.liquid_fraction, dtype=float)
    budget = np.asarray(r.budget_w, dtype=float)
    is_liq = rack_cdu >= 0
    design_w = design_load_w(r)
    cdu_flow_d = np.array([els[i].design_flow_kg_s for i in cdus], dtype=float)
    rack_flow_d = design_flow_split(rack_cdu, liquid * design_w, budget, cdu_flow_d)
    rack_cap = tcs.heat_capacity_j_k(1.0) * p.rack_coolant_l_per_kw * design_w / 1e3 \
        + p.cold_plate_j_k_per_kw * design_w / 1e3

    def root_setpoint(i: int) -> float:
        c = els[i]
        if c.supply_setpoint_c is not None:
            return c.supply_setpoint_c
        if c.kind == "cooling_tower":
            return plant.site.wet_bulb_c + c.approach_c
        if c.kind == "dry_cooler":
            return plant.site.dry_bulb_c + c.approach_c
        return p.chiller_default_setpoint_c

    root_set = np.array([root_setpoint(i) for i in roots], dtype=float)
    cdu_root = np.array([pos_root[ancestor(i, HEAT_REJECTION_KINDS)] for i in cdus],
                        dtype=np.int64)
    cdu_floop = np.array([pos_floop.get(ancestor(i, ("facility_loop",)), -1) for i in cdus],
                         dtype=np.int64)
    tcs_vol = np.array([els[i].volume_l for i in cdus], dtype=float)
    for i, c in enumerate(els):
        if c.kind == "tcs_loop":
            k = pos_cdu[ancestor(i, ("cdu",))]
            tcs_vol[k] += c.volume_l
    cdu_set = np.array([els[i].supply_setpoint_c if els[i].supply_setpoint_c is not None
                        else root_set[cdu_root[k]] + els[i].approach_c
                        for k, i in enumerate(cdus)], dtype=float)
    crah_cap = np.array([els[i].capacity_kw * 1e3 * els[i].units for i in crahs], dtype=float)
    root_vol = np.array([els[i].volume_l for i in roots], dtype=float)
    for i in floops:
        root_vol[pos_root[ancestor(i, HEAT_REJECTION_KINDS)]] += els[i].volume_l
    kind_code = {"cooling_tower": _K_TOWER, "dry_cooler": _K_DRY, "chiller": _K_CHILLER}
    card_tdp = card_share = None
    if r.card_tdp_w is not None:
        card_tdp = np.maximum(np.asarray(r.card_tdp_w, dtype=float), 0.0)
        plate = (np.asarray(r.nameplate_w, dtype=float) if r.nameplate_w is not None
                 else budget)
        card_share = np.where(plate > 0, card_tdp / np.where(plate > 0, plate, 1.0), 0.0)
    air_share = crah_cap / crah_cap.sum() if crah_cap.size and crah_cap.sum() > 0 \
        else np.zeros(len(crahs))
    return CoolingNetwork(
        params=p, rack_cdu=rack_cdu, rack_crah=rack_crah, rack_air_crah=rack_air_crah,
        rack_liquid=liquid,
        rack_flow_d=rack_flow_d, rack_cap_j_k=rack_cap, liquid_rack=is_liq,
        cdu_elem=np.array(cdus, dtype=np.int64), cdu_root=cdu_root, cdu_floop=cdu_floop,
        cdu_cap_w=np.array([els[i].capacity_kw * 1e3 * usable_units(els[i].units,
                                                                    els[i].redundancy)
                            for i in cdus], dtype=float),
        cdu_flow_d=cdu_flow_d, cdu_fws_flow_d=cdu_flow_d * tcs.cp_j_kg_k / fws.cp_j_kg_k,
        cdu_ua_d=np.array([els[i].capacity_kw * 1e3 * usable_units(els[i].units,
                                                                   els[i].redundancy)
                           / els[i].approach_c for i in cdus], dtype=float),
        cdu_setpoint_c=cdu_set,
        cdu_pump_w=np.array([els[i].pump_kw * 1e3 for i in cdus], dtype=float),
        cdu_units=np.array([els[i].units for i in cdus], dtype=np.int64),
        cdu_usable=np.array([usable_units(els[i].units, els[i].redundancy) for i in cdus],
                            dtype=np.int64),
        cdu_down=np.array([els[i].down for i in cdus], dtype=bool),
        cdu_pipe_kg=tcs_vol / 2 / 1e3 * tcs.rho_kg_m3,
        cdu_tank_j_k=tcs.heat_capacity_j_k(1.0) * tcs_vol / 2,
        floop_elem=np.array(floops, dtype=np.int64),
        floop_pump_w=np.array([els[i].pump_kw * 1e3 for i in floops], dtype=float),
        floop_units=np.array([els[i].units for i in floops], dtype=np.int64),
        floop_usable=np.array([usable_units(els[i].units, els[i].redundancy)
                               for i in floops], dtype=np.int64),
        floop_down=np.array([els[i].down for i in floops], dtype=bool),
        crah_elem=np.array(crahs, dtype=np.int64),
        crah_root=np.array([pos_root[ancestor(i, HEAT_REJECTION_KINDS)] for i in crahs],
                           dtype=np.int64),
        crah_cap_w=crah_cap,
        crah_fan_w=np.array([els[i].fan_kw * 1e3 for i in crahs], dtype=float),
        crah_flow_d=np.where(
            np.array([els[i].design_flow_kg_s for i in crahs], dtype=float) > 0,
            np.array([els[i].design_flow_kg_s for i in crahs], dtype=float),
            crah_cap / (fws.cp_j_kg_k * p.crah_water_rise_c)),
        crah_units=np.array([els[i].units for i in crahs], dtype=np.int64),
        crah_down=np.array([els[i].down for i in crahs], dtype=bool),
        air_share_crah=air_share,
        root_elem=np.array(roots, dtype=np.int64),
        root_kind=np.array([kind_code[els[i].kind] for i in roots], dtype=np.int64),
        root_cap_w=np.array([els[i].capacity_kw * 1e3 for i in roots], dtype=float),
        root_approach_c=np.array([els[i].approach_c for i in roots], dtype=float),
        root_setpoint_c=root_set,
        root_fan_w=np.array([els[i].fan_kw * 1e3 for i in roots], dtype=float),
        root_units=np.array([els[i].units for i in roots], dtype=np.int64),
        root_usable=np.array([usable_units(els[i].units, els[i].redundancy) for i in roots],
                             dtype=np.int64),
        root_down=np.array([els[i].down for i in roots], dtype=bool),
        root_tank_j_k=fws.heat_capacity_j_k(1.0) * root_vol,
        root_parent=np.array([pos_root[parent[i]] if parent[i] >= 0 else -1 for i in roots],
                             dtype=np.int64),
        n_cooling=len(els),
        rack_air_kg_s=design_airflow_kg_s(budget, p.air_rise_c),
        rack_card_tdp_w=card_tdp, rack_card_share=card_share)


def initial_state(net: CoolingNetwork) -> ThermalState:
    """Everything at its supply setpoint, no heat yet (use :func:`settle` for a
    steady state under load)."""
    sup = net.cdu_setpoint_c.copy()
    rack_in = np.where(net.liquid_rack, sup[np.maximum(net.rack_cdu, 0)]
                       if sup.size else 0.0, net.params.air_supply_c)
    return ThermalState(
        t_s=0.0, rack_ret_c=rack_in.astype(float), cdu_ret_c=sup.copy(), cdu_sup_c=sup,
        buf=np.repeat(sup[:, None], _BUFFER, axis=1), pos=0,
        root_ret_c=net.root_setpoint_c.copy(), root_sup_c=net.root_setpoint_c.copy())


def _running_fraction(units: I64, usable: I64, failed: I64,
                      down: npt.NDArray[np.bool_]) -> F64:
    running = np.where(down, 0, np.maximum(units - failed, 0))
    out: F64 = np.minimum(running / np.maximum(usable, 1), 1.0)
    return out


@dataclass(frozen=True, eq=False)
class Hydraulics:
    """Everything a step needs that depends on flows, failures, weather and dt but not
    on temperatures: computed once per change of conditions (a what-if reuses it
    between events; the live tick computes it every step)."""

    dt: float
    cond: Conditions
    cdu_flow: F64
    rack_flow: F64
    g_rack: F64
    rack_gain: F64
    d_steps: I64
    gw_cdu: F64
    c_t: F64
    c_f: F64
    tank_gain: F64
    eps_cmin: F64
    crah_run: I64
    crah_avail: F64
    g_root: F64
    root_gain: F64
    cap: F64
    k: F64
    amb: F64
    at_set: F64
    root_fan_w: F64
    pumps_w: float


def hydraulics(net: CoolingNetwork, dt: float, cond: Conditions) -> Hydraulics:
    """Flows from the running pumps (affinity: power ∝ flow³), heat-exchanger
    effectiveness at those flows (ε-NTU, UA ∝ ṁ^0.8 per side), the exponential
    integrator's gains for ``dt``, the transport delays, and the rejection plant's
    running capacity against this weather."""
    p = net.params
    cp_t, cp_f = p.tcs_fluid.cp_j_kg_k, p.fws_fluid.cp_j_kg_k
    failed = cond.failed(net.n_cooling)
    n_cdu = net.cdu_elem.shape[0]
    cdu_ff = _running_fraction(net.cdu_units, net.cdu_usable, failed[net.cdu_elem],
                               net.cdu_down)
    fl_ff = _running_fraction(net.floop_units, net.floop_usable, failed[net.floop_elem],
                              net.floop_down)
    fws_ff = (np.where(net.cdu_floop >= 0, fl_ff[np.maximum(net.cdu_floop, 0)]
                       if fl_ff.size else 1.0, 1.0) if n_cdu else np.ones(0))
    fws_ff = np.where(cdu_ff > 0, fws_ff, 0.0)
    cdu_flow = net.cdu_flow_d * cdu_ff
    pumps_w = float(np.dot(net.cdu_pump_w, cdu_ff ** 3) + np.dot(net.floop_pump_w, fl_ff ** 3))
    liq = net.liquid_rack
    cdu_of = np.maximum(net.rack_cdu, 0)
    delay = np.where(cdu_flow > 0, net.cdu_pipe_kg / np.maximum(cdu_flow, 1e-12) / dt,
                     _BUFFER - 1)
    d_steps = np.clip(np.rint(delay), 0, _BUFFER - 1).astype(np.int64)
    rack_flow = net.rack_flow_d * (cdu_ff[cdu_of] if n_cdu else 0.0)
    g = rack_flow * cp_t
    rack_gain = dt / net.rack_cap_j_k * _phi(g * dt / net.rack_cap_j_k)
    gw = np.bincount(net.rack_cdu[liq], weights=g[liq], minlength=n_cdu).astype(float)
    c_t = cdu_flow * cp_t
    tank_gain = -np.expm1(-c_t * dt / np.maximum(net.cdu_tank_j_k, 1e-9))
    c_f = net.cdu_fws_flow_d * fws_ff * cp_f
    ft = np.where(c_t > 0, cdu_ff, 1.0)
    ffw = np.where(c_f > 0, fws_ff, 1.0)
    ua = np.where((c_t > 0) & (c_f > 0), net.cdu_ua_d / (0.5 * ft ** -p.film_exponent
                                                          + 0.5 * ffw ** -p.film_exponent), 0.0)
    c_min = np.minimum(c_t, c_f)
    c_max = np.maximum(c_t, c_f)
    safe_min = np.where(c_min > 0, c_min, 1.0)
    eps = effectiveness_counterflow(ua / safe_min, np.where(c_max > 0, c_min /
                                                            np.where(c_max > 0, c_max, 1), 0))
    crah_run = np.where(net.crah_down, 0, np.maximum(net.crah_units - failed[net.crah_elem], 0))
    crah_avail = net.crah_cap_w * crah_run / np.maximum(net.crah_units, 1)
    n_root = net.root_elem.shape[0]
    g_root = (np.bincount(net.cdu_root, weights=c_f, minlength=n_root)
              + np.bincount(net.crah_root, weights=net.crah_flow_d * cp_f * (crah_run > 0),
                            minlength=n_root)).astype(float)
    root_gain = -np.expm1(-g_root * dt / np.maximum(net.root_tank_j_k, 1e-9))
    run = np.where(net.root_down, 0, np.maximum(net.root_units - failed[net.root_elem], 0))
    cap = net.root_cap_w * run
    amb = np.where(net.root_kind == _K_TOWER, cond.wet_bulb_c, cond.dry_bulb_c)
    k = cap / np.maximum(net.root_approach_c, 1e-9)
    at_set = k * np.maximum(net.root_setpoint_c - amb, 0.0)
    root_fan = np.where(net.root_kind == _K_CHILLER, 0.0,
                        net.root_fan_w * run / np.maximum(net.root_units, 1))
    return Hydraulics(
        dt=dt, cond=cond, cdu_flow=cdu_flow, rack_flow=rack_flow, g_rack=g,
        rack_gain=rack_gain, d_steps=d_steps, gw_cdu=gw, c_t=c_t, c_f=c_f,
        tank_gain=tank_gain, eps_cmin=np.where(c_min > 0, eps * c_min, 0.0),
        crah_run=crah_run, crah_avail=crah_avail, g_root=g_root, root_gain=root_gain,
        cap=cap, k=k, amb=amb, at_set=at_set, root_fan_w=root_fan, pumps_w=pumps_w)


def step(net: CoolingNetwork, state: ThermalState, rack_w: F64, dt: float,
         cond: Conditions, card_w: F64 | None = None,
         hyd: Hydraulics | None = None) -> ThermalState:
    """Advance the network by ``dt`` seconds with rack heat ``rack_w`` (W, the rack's
    electrical power: it all becomes heat) and card power ``card_w`` (W, the hottest
    card of each rack; default :meth:`CoolingNetwork.card_w`). ``hyd`` reuses
    :func:`hydraulics` for the same dt and conditions. Returns the new state."""
    p = net.params
    h = hyd if hyd is not None and hyd.dt == dt and hyd.cond == cond \
        else hydraulics(net, dt, cond)
    n_cdu = net.cdu_elem.shape[0]
    liq = net.liquid_rack
    # racks: delayed supply, heat split liquid/air, exponential lag
    delayed = net_buf_read(state.buf, state.pos, h.d_steps)
    rack_in = np.where(liq, delayed[np.maximum(net.rack_cdu, 0)] if n_cdu else 0.0,
                       p.air_supply_c)
    q_liq = rack_w * net.rack_liquid
    q_air = rack_w - q_liq
    rack_ret = state.rack_ret_c + (q_liq + h.g_rack * (rack_in - state.rack_ret_c)) \
        * h.rack_gain
    rack_ret = np.where(liq, rack_ret, rack_in)
    # CDU: mix returns by flow, return volume lag, e-NTU exchanger, supply setpoint
    gtw = np.bincount(net.rack_cdu[liq], weights=(h.g_rack * rack_ret)[liq], minlength=n_cdu)
    mix = np.where(h.gw_cdu > 0, gtw / np.where(h.gw_cdu > 0, h.gw_cdu, 1.0), state.cdu_ret_c)
    cdu_ret = state.cdu_ret_c + (mix - state.cdu_ret_c) * h.tank_gain
    fsup = state.root_sup_c[net.cdu_root] if n_cdu else np.zeros(0)
    q_max = np.maximum(h.eps_cmin * (cdu_ret - fsup), 0.0)
    q_set = np.maximum(h.c_t * (cdu_ret - net.cdu_setpoint_c), 0.0)
    q_hx = np.minimum(q_max, q_set)
    cdu_sup = np.where(h.c_t > 0, cdu_ret - q_hx / np.where(h.c_t > 0, h.c_t, 1.0), cdu_ret)
    pos = (state.pos + 1) % _BUFFER
    buf = state.buf.copy()
    if n_cdu:
        buf[:, pos] = cdu_sup
    # CRAHs: air heat of air racks, and the air share of liquid racks
    n_crah = net.crah_elem.shape[0]
    air_racks = net.rack_crah >= 0
    named = liq & (net.rack_air_crah >= 0)
    unnamed = liq & ~named
    liquid_air = float(q_air[unnamed].sum())
    crah_in: F64 = (np.bincount(net.rack_crah[air_racks], weights=q_air[air_racks],
                                minlength=n_crah)
                    + np.bincount(net.rack_air_crah[named], weights=q_air[named],
                                  minlength=n_crah)
                    + liquid_air * net.air_share_crah)
    crah_q = np.minimum(crah_in, h.crah_avail)
    crah_frac = np.where(h.crah_avail > 0, crah_q / np.where(h.crah_avail > 0,
                                                             h.crah_avail, 1), 0)
    fans_w = float(np.dot(net.crah_fan_w, crah_frac ** 3))
    unremoved = float(crah_in.sum() - crah_q.sum()) if n_crah else 0.0
    # roots: heat in, return volume lag, rejection against ambient
    n_root = net.root_elem.shape[0]
    q_root: F64 = (np.bincount(net.cdu_root, weights=q_hx, minlength=n_root)
                   + np.bincount(net.crah_root, weights=crah_q, minlength=n_root)
                   ).astype(float)
    if n_crah == 0 and liquid_air > 0 and n_cdu:
        # no CRAH: the liquid racks' air share goes to their CDU's water (rear doors)
        air_cdu = np.bincount(net.rack_cdu[unnamed], weights=q_air[unnamed], minlength=n_cdu)
        q_root = q_root + np.bincount(net.cdu_root, weights=air_cdu, minlength=n_root)
    has_g = h.g_root > 0
    g_safe = np.where(has_g, h.g_root, 1.0)
    mix_r = np.where(has_g, state.root_sup_c + q_root / g_safe, state.root_ret_c)
    root_ret = state.root_ret_c + (mix_r - state.root_ret_c) * h.root_gain
    need = np.maximum(h.g_root * (root_ret - net.root_setpoint_c), 0.0)
    # chillers: hold the setpoint up to capacity; COP a fraction of Carnot between the
    # evaporator and the condenser: the parent's leaving water (its ambient + design
    # approach) for a water-cooled chiller on a tower or dry cooler, else the dry bulb;
    # + the condenser approach
    is_ch = net.root_kind == _K_CHILLER
    ch_sup = root_ret - np.minimum(need, h.cap) / g_safe
    ch_q = np.where(has_g & is_ch, h.g_root * (root_ret - ch_sup), 0.0)
    up = np.maximum(net.root_parent, 0)
    on_tower = net.root_parent >= 0
    condenser_c = np.where(on_tower, h.amb[up] + net.root_approach_c[up] if n_root else 0.0,
                           h.cond.dry_bulb_c) + p.condenser_approach_c
    t_evap = np.where(has_g, ch_sup, state.root_sup_c) + 273.15
    lift = np.maximum(condenser_c + 273.15 - t_evap, 1.0)
    cop = np.clip(p.chiller_carnot_fraction * t_evap / lift, 1.0, 15.0)
    ch_w = np.where(is_ch, ch_q / cop, 0.0)
    chillers_w = float(ch_w.sum())
    # a water-cooled chiller's condenser heat (Q + W) takes its parent's cells
    extra = np.bincount(net.root_parent[on_tower], weights=(ch_q + ch_w)[on_tower],
                        minlength=n_root).astype(float)
    # towers and dry coolers: a conductance k = capacity / approach to the ambient
    load = need + extra
    holds = load <= h.at_set
    k_free = h.k * np.clip(1.0 - extra / np.where(h.cap > 0, h.cap, 1.0), 0.0, 1.0)
    float_sup = (h.g_root * root_ret + k_free * h.amb) / np.maximum(h.g_root + k_free, 1e-9)
    hx_sup = np.where(holds, np.minimum(root_ret, net.root_setpoint_c), float_sup)
    fan = np.where(holds, load / np.where(h.at_set > 0, h.at_set, 1.0),
                   np.where(h.k > 0, 1.0, 0.0))
    sup = np.where(has_g, np.where(is_ch, ch_sup, hx_sup), state.root_sup_c)
    q_rej = np.where(has_g, h.g_root * (root_ret - sup), 0.0) + np.where(is_ch, 0.0, extra)
    fans_w += float(np.dot(h.root_fan_w, fan ** 3))
    # cards: mean coolant + P R (liquid), the air at the cards + P R (air racks): the
    # inlet air + the share of the rack's own air rise upstream of them (``air``)
    cw = card_w if card_w is not None else net.card_w(rack_w)
    if n_crah:
        crah_over = np.where(crah_in > 0, 1.0 - crah_q / np.where(crah_in > 0, crah_in, 1), 0.0)
        air_in = p.air_supply_c + p.air_rise_c * crah_over[np.maximum(net.rack_crah, 0)]
    else:
        air_in = np.full(rack_w.shape, p.air_supply_c)
    at_cards = (air_in if net.rack_air_kg_s is None
                else card_air_c(air_in, rack_w, net.rack_air_kg_s))
    card = np.where(liq, 0.5 * (rack_in + rack_ret) + cw * net.r_liquid_k_w,
                    at_cards + cw * p.r_air_k_w)
    return ThermalState(
        t_s=state.t_s + dt, rack_ret_c=rack_ret, cdu_ret_c=cdu_ret, cdu_sup_c=cdu_sup,
        buf=buf, pos=pos, root_ret_c=root_ret, root_sup_c=sup, rack_sup_c=rack_in,
        rack_flow_kg_s=h.rack_flow, card_c=card,
        rack_air_c=np.where(liq, np.nan, at_cards), cdu_flow_kg_s=h.cdu_flow, cdu_heat_w=q_hx,
        crah_heat_w=crah_q, root_heat_w=q_rej, liquid_in_w=float(q_liq[liq].sum()),
        air_in_w=float(q_air.sum() + q_liq[~liq].sum()), unremoved_air_w=unremoved,
        rejected_w=float(q_rej[~on_tower].sum()), pumps_w=h.pumps_w, fans_w=fans_w,
        chillers_w=chillers_w)


def net_buf_read(buf: F64, pos: int, d_steps: I64) -> F64:
    """The supply each CDU sent ``d_steps`` steps ago (the transport delay)."""
    if buf.shape[0] == 0:
        return np.zeros(0)
    out: F64 = buf[np.arange(buf.shape[0]), (pos - d_steps) % buf.shape[1]]
    return out


def settle(net: CoolingNetwork, rack_w: F64, cond: Conditions,
           state: ThermalState | None = None, *, card_w: F64 | None = None,
           tol_c: float = 1e-9, max_steps: int = 5000) -> ThermalState:
    """The steady state under constant load: step with a long dt (the exponential
    integrator makes every lag reach its target) until no temperature moves by more
    than ``tol_c``. Starts from ``state`` or :func:`initial_state`."""
    s = state or initial_state(net)
    h = hydraulics(net, 1e5, cond)
    for _ in range(max_steps):
        nxt = step(net, s, rack_w, 1e5, cond, card_w, h)
        moved = max(float(np.max(np.abs(nxt.rack_ret_c - s.rack_ret_c), initial=0.0)),
                    float(np.max(np.abs(nxt.cdu_sup_c - s.cdu_sup_c), initial=0.0)),
                    float(np.max(np.abs(nxt.root_ret_c - s.root_ret_c), initial=0.0)))
        s = nxt
        if moved < tol_c:
            break
    buf = np.repeat(s.cdu_sup_c[:, None], _BUFFER, axis=1)
    return replace(s, buf=buf, t_s=0.0)
