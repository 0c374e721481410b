"""The price table and the parts list a capacity plan prices, each default with its source.

Every default below carries ``source``: a public figure (named) or the words
"assumption — replace", which the user should overwrite with their own quotes.
Prices are US dollars; power is nameplate watts. ``docs/capacity.md`` lists them.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from simulation.capacity.errors import CapacityInputError

__all__ = ["ASSUMPTION", "DEFAULT_OPTICS", "DEFAULT_SWITCHES", "DEFAULT_SYSTEMS",
           "PRICE_SOURCES", "Optic", "PriceTable", "Switch", "SystemPrice"]

ASSUMPTION = "assumption — replace"


@dataclass(frozen=True)
class SystemPrice:
    """How an accelerator is bought and racked: ``cards_per_server`` cards in a
    server drawing ``overhead_w`` besides its cards (CPUs, NICs, fans, a share of
    in-rack switches); ``whole_rack`` servers come only as a rack of
    ``servers_per_rack`` (an NVL72); ``price_per_card`` the system price per card."""

    cards_per_server: int
    overhead_w: float
    price_per_card: float
    source: str
    servers_per_rack: int = 4
    whole_rack: bool = False
    scale_up_switches: float = 0.0
    """Scale-up (NVLink) switch chips or trays per server, in the system price: the
    HGX baseboard's NVSwitch chips, or an NVL72 rack's switch trays per compute tray
    (NVIDIA DGX user guides: 6 NVSwitch chips in a DGX A100, 4 in a DGX H100, 2 in a
    DGX B200; GB200 NVL72: 9 switch trays for 18 compute trays)."""


@dataclass(frozen=True)
class Switch:
    """A scale-out switch: ``radix`` ports at 400 Gb/s, its price and nameplate."""

    radix: int
    price: float
    power_w: float
    source: str


@dataclass(frozen=True)
class Optic:
    """What joins two ports: ``ends`` priced items per link (2 transceivers, or 1
    cable with its ends built in), each ``price`` and ``power_w``."""

    ends: int
    price: float
    power_w: float
    source: str


DEFAULT_SYSTEMS: dict[str, SystemPrice] = {
    "h100-sxm5-80gb": SystemPrice(
        8, 4_400.0, 31_250.0, "DGX H100 datasheet: 10.2 kW max = 8 × 700 W + 4.6 kW overhead "
        "(less NICs priced in the fabric); price: HGX H100 8-GPU servers reported at ~$250k "
        f"(press reports, 2023–24) — {ASSUMPTION}", servers_per_rack=4, scale_up_switches=4),
    "h200-sxm-141gb": SystemPrice(
        8, 4_400.0, 37_500.0, f"as H100 (same HGX board power); price ~$300k per server — "
        f"{ASSUMPTION}", servers_per_rack=4, scale_up_switches=4),
    "b200-sxm-180gb": SystemPrice(
        8, 6_300.0, 50_000.0, "DGX B200 datasheet: ~14.3 kW max = 8 × 1,000 W + ~6.3 kW; "
        f"price ~$400k per 8-GPU server — {ASSUMPTION}", servers_per_rack=4,
        scale_up_switches=2),
    "gb200-186gb": SystemPrice(
        4, 1_850.0, 3_000_000.0 / 72, "GB200 NVL72: 18 trays × (4 × 1,200 W + 1,850 W) = "
        "119.7 kW (NVIDIA ~120 kW; twin/hardware/presets.py); price ~$3M per rack (analyst "
        f"estimates reported in the press, 2024) — {ASSUMPTION}",
        servers_per_rack=18, whole_rack=True, scale_up_switches=0.5),
    "gb300-288gb": SystemPrice(
        4, 1_850.0, 3_700_000.0 / 72, f"as GB200 NVL72 with 1,400 W GPUs; price ~$3.7M per "
        f"rack — {ASSUMPTION}", servers_per_rack=18, whole_rack=True,
        scale_up_switches=0.5),
    "a100-sxm-80gb": SystemPrice(
        8, 3_300.0, 15_000.0, "DGX A100 datasheet: 6.5 kW max = 8 × 400 W + 3.3 kW; price "
        f"— {ASSUMPTION}", servers_per_rack=4, scale_up_switches=6),
    "ascend-910b": SystemPrice(
        8, 2_500.0, 20_000.0, f"overhead and price — {ASSUMPTION}", servers_per_rack=4),
}
"""Per accelerator: server shape, overhead and price (catalogue slugs)."""

DEFAULT_SWITCHES: dict[str, Switch] = {
    "ib-ndr-64": Switch(64, 30_000.0, 1_700.0, "NVIDIA Quantum-2 QM9700: 64 × 400G NDR "
                        f"ports, ~1.7 kW max (datasheet); price — {ASSUMPTION}"),
    "eth-51t-128": Switch(128, 50_000.0, 2_200.0, "51.2 Tb/s Ethernet (Tomahawk 5 / "
                          "Spectrum-4 class): 128 × 400G; ~2.2 kW (vendor datasheets, "
                          f"typical); price — {ASSUMPTION}"),
}

DEFAULT_OPTICS: dict[str, Optic] = {
    "transceiver": Optic(2, 1_000.0, 10.0, "400G OSFP/QSFP-DD optics: ~8–12 W each "
                         f"(IEEE 802.3 400GBASE-DR4 module datasheets); price — {ASSUMPTION}"),
    "aoc": Optic(1, 1_200.0, 16.0, f"400G active optical cable (two ends ~8 W); price — "
                 f"{ASSUMPTION}"),
    "dac": Optic(1, 300.0, 0.0, "400G passive copper (no power; ≤ ~3 m, in-rack or "
                 f"adjacent racks only — not checked); price — {ASSUMPTION}"),
}

PRICE_SOURCES: dict[str, str] = {
    "energy_per_kwh": "US industrial average retail price of electricity, ~8.1 ¢/kWh in "
                      "2024 (EIA, Electric Power Monthly, tables 5.3 and 5.6.B, U.S. total, "
                      "industrial sector); replace by the site's tariff",
    "depreciation_years": "IT equipment straight-line over 5 years (hyperscalers report "
                          f"5–6 years for servers in their 10-K filings) — {ASSUMPTION}",
    "facility_per_kw": "Data-centre shell, power and cooling ~$10M per MW of IT (industry "
                       f"construction-cost reports) — {ASSUMPTION}",
    "facility_years": f"Facility straight-line over 20 years — {ASSUMPTION}",
    "maintenance_share": f"Yearly maintenance/support 5 % of IT capex — {ASSUMPTION}",
}


@dataclass(frozen=True)
class PriceTable:
    """What money the plan counts (defaults: :data:`PRICE_SOURCES`; the parts'
    prices sit in ``systems``, ``switches`` and ``optics``)."""

    energy_per_kwh: float = 0.081
    depreciation_years: float = 5.0
    facility_per_kw: float = 10_000.0
    facility_years: float = 20.0
    maintenance_share: float = 0.05
    systems: dict[str, SystemPrice] = field(default_factory=lambda: dict(DEFAULT_SYSTEMS))
    switches: dict[str, Switch] = field(default_factory=lambda: dict(DEFAULT_SWITCHES))
    optics: dict[str, Optic] = field(default_factory=lambda: dict(DEFAULT_OPTICS))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (round-trips through :meth:`from_dict`), with the sources."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)
                               if f.name not in ("systems", "switches", "optics")}
        for name in ("systems", "switches", "optics"):
            out[name] = {k: {f.name: getattr(v, f.name) for f in fields(v)}
                         for k, v in getattr(self, name).items()}
        out["sources"] = dict(PRICE_SOURCES)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, path: str = "prices.") -> PriceTable:
        """The table from JSON: any key absent takes its default; a part's entry
        replaces only the fields it gives. Negative, infinite or non-numeric figures
        raise :class:`CapacityInputError` naming the field."""
        data = dict(data or {})
        data.pop("sources", None)
        base = cls()
        known = {f.name for f in fields(cls)}
        for key in data:
            if key not in known:
                raise CapacityInputError(f"{path}{key}", f"unknown price (known: "
                                                         f"{', '.join(sorted(known))})")
        scalars = {name: _amount(data.get(name, getattr(base, name)), f"{path}{name}")
                   for name in known - {"systems", "switches", "optics"}}
        for name in ("depreciation_years", "facility_years"):
            if scalars[name] <= 0:
                raise CapacityInputError(f"{path}{name}", "must be more than 0 years")
        systems = _parts(data.get("systems"), base.systems, SystemPrice, f"{path}systems.")
        switches = _parts(data.get("switches"), base.switches, Switch, f"{path}switches.")
        optics = _parts(data.get("optics"), base.optics, Optic, f"{path}optics.")
        return cls(**scalars, systems=systems, switches=switches, optics=optics)


def _amount(value: Any, path: str) -> float:
    """A finite number ≥ 0, or an error on ``path``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CapacityInputError(path, f"a number ≥ 0, got {value!r}")
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise CapacityInputError(path, f"a finite number ≥ 0, got {value!r}")
    return number


def _parts(given: Any, defaults: Mapping[str, Any], cls: type, path: str) -> dict[str, Any]:
    """``defaults`` updated by ``given`` ({name: {field: value}}), checked field by field."""
    out: dict[str, Any] = dict(defaults)
    if given is None:
        return out
    if not isinstance(given, Mapping):
        raise CapacityInputError(path.rstrip("."), "an object of {name: {field: value}}")
    names = {f.name: f for f in fields(cls)}
    for key, entry in given.items():
        if not isinstance(entry, Mapping):
            raise CapacityInputError(f"{path}{key}", "an object of its fields")
        current = {f: getattr(out[key], f) for f in names} if key in out else {}
        for fname, value in entry.items():
            if fname not in names:
                raise CapacityInputError(f"{path}{key}.{fname}", f"unknown field (known: "
                                                                 f"{', '.join(names)})")
            if fname == "source":
                current[fname] = str(value)
            elif fname == "whole_rack":
                current[fname] = bool(value)
            else:
                number = _amount(value, f"{path}{key}.{fname}")
                if fname in ("cards_per_server", "servers_per_rack", "radix", "ends"):
                    if number < 1 or number != int(number):
                        raise CapacityInputError(f"{path}{key}.{fname}",
                                                 f"a whole number ≥ 1, got {value!r}")
                    current[fname] = int(number)
                else:
                    current[fname] = number
        current.setdefault("source", ASSUMPTION)
        missing = [f for f, spec in names.items() if f not in current
                   and spec.default is spec.default_factory]  # no default
        if missing:
            raise CapacityInputError(f"{path}{key}.{missing[0]}", "required for a new part")
        out[key] = cls(**current)
    return out
