"""What a capacity plan takes: the site, the candidate space and the workload.

Plain frozen dataclasses with ``to_dict``/``from_dict`` (the JSON the REST API
accepts); ``from_dict`` raises :class:`CapacityInputError` naming the field.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from simulation.capacity.errors import CapacityInputError

__all__ = ["CandidateSpace", "Site", "Workload"]


def _number(data: Mapping[str, Any], key: str, path: str, default: float | None = None,
            low: float = 0.0, strict: bool = True) -> float:
    value = data.get(key, default)
    if value is None:
        raise CapacityInputError(f"{path}{key}", "required")
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(float(value)):
        raise CapacityInputError(f"{path}{key}", f"a finite number, got {value!r}")
    if float(value) < low or (strict and float(value) == low):
        raise CapacityInputError(f"{path}{key}", f"must be {'>' if strict else '≥'} {low:g}, "
                                                 f"got {value!r}")
    return float(value)


def _list(data: Mapping[str, Any], key: str, path: str, default: tuple[Any, ...],
          kind: type) -> tuple[Any, ...]:
    value = data.get(key, default)
    if isinstance(value, str) and kind is str:
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list | tuple) or not value:
        raise CapacityInputError(f"{path}{key}", "a non-empty list")
    out = []
    for i, item in enumerate(value):
        ok = isinstance(item, str) if kind is str else (
            not isinstance(item, bool) and isinstance(item, int | float)
            and math.isfinite(float(item)) and float(item) > 0)
        if kind is int and ok and float(item) != int(item):
            ok = False
        if not ok:
            what = "name" if kind is str else "positive number"
            raise CapacityInputError(f"{path}{key}[{i}]", f"a {what}, got {item!r}")
        out.append(kind(item))
    return tuple(out)


@dataclass(frozen=True)
class Site:
    """The site's limits: facility power (utility feed), heat it can reject, racks
    the floor holds; ``pue`` the facility's power usage effectiveness at load (1.1
    for a liquid-cooled hall — assumption, replace by the plant's figure)."""

    power_kw: float
    cooling_kw: float
    floor_racks: int
    pue: float = 1.1

    def to_dict(self) -> dict[str, Any]:
        return {"power_kw": self.power_kw, "cooling_kw": self.cooling_kw,
                "floor_racks": self.floor_racks, "pue": self.pue}

    @classmethod
    def from_dict(cls, data: Any, path: str = "site.") -> Site:
        if not isinstance(data, Mapping):
            raise CapacityInputError(path.rstrip("."), "an object: power_kw, cooling_kw, "
                                                       "floor_racks, pue")
        unknown = set(data) - {"power_kw", "cooling_kw", "floor_racks", "pue"}
        if unknown:
            raise CapacityInputError(f"{path}{sorted(unknown)[0]}", "unknown field")
        racks = _number(data, "floor_racks", path)
        if racks != int(racks):
            raise CapacityInputError(f"{path}floor_racks", "a whole number of racks")
        return cls(_number(data, "power_kw", path), _number(data, "cooling_kw", path),
                   int(racks), _number(data, "pue", path, 1.1, low=1.0, strict=False))


@dataclass(frozen=True)
class CandidateSpace:
    """The designs to try: every combination of an accelerator (catalogue slug),
    a rack power class (kW), a number of cards, a scale-out switch and an optic
    (names of the price table's ``switches`` and ``optics``)."""

    accelerators: tuple[str, ...]
    rack_kw: tuple[float, ...] = (40.0, 132.0)
    cards: tuple[int, ...] = (1152, 2304, 4608)
    switches: tuple[str, ...] = ("ib-ndr-64",)
    optics: tuple[str, ...] = ("transceiver",)

    @property
    def size(self) -> int:
        return (len(self.accelerators) * len(self.rack_kw) * len(self.cards)
                * len(self.switches) * len(self.optics))

    def to_dict(self) -> dict[str, Any]:
        return {"accelerators": list(self.accelerators), "rack_kw": list(self.rack_kw),
                "cards": list(self.cards), "switches": list(self.switches),
                "optics": list(self.optics)}

    @classmethod
    def from_dict(cls, data: Any, path: str = "candidates.") -> CandidateSpace:
        if not isinstance(data, Mapping):
            raise CapacityInputError(path.rstrip("."), "an object: accelerators, rack_kw, "
                                                       "cards, switches, optics")
        unknown = set(data) - {"accelerators", "rack_kw", "cards", "switches", "optics"}
        if unknown:
            raise CapacityInputError(f"{path}{sorted(unknown)[0]}", "unknown field")
        base = cls(accelerators=("h100-sxm5-80gb",))
        return cls(_list(data, "accelerators", path, (), str),
                   _list(data, "rack_kw", path, base.rack_kw, float),
                   _list(data, "cards", path, base.cards, int),
                   _list(data, "switches", path, base.switches, str),
                   _list(data, "optics", path, base.optics, str))


@dataclass(frozen=True)
class Workload:
    """Either ``tokens`` of training of ``model`` (a training-catalogue slug) at
    ``global_batch`` sequences per step, priced by the training model; or a trace's
    ``gpu_hours`` measured on ``reference`` (an accelerator slug), scaled to each
    candidate by the ratio of BF16 peaks (an assumption: the trace's jobs scale like
    dense matmul throughput)."""

    model: str | None = None
    tokens: float | None = None
    global_batch: int = 1152
    precision: str = "bf16"
    gpu_hours: float | None = None
    reference: str | None = None

    @property
    def is_trace(self) -> bool:
        return self.gpu_hours is not None

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "tokens": self.tokens, "global_batch": self.global_batch,
                "precision": self.precision, "gpu_hours": self.gpu_hours,
                "reference": self.reference}

    @classmethod
    def from_dict(cls, data: Any, path: str = "workload.") -> Workload:
        if not isinstance(data, Mapping):
            raise CapacityInputError(path.rstrip("."), "an object: model + tokens, or "
                                                       "gpu_hours + reference")
        unknown = set(data) - {"model", "tokens", "global_batch", "precision", "gpu_hours",
                               "reference"}
        if unknown:
            raise CapacityInputError(f"{path}{sorted(unknown)[0]}", "unknown field")
        if data.get("gpu_hours") is not None:
            if data.get("model") is not None:
                raise CapacityInputError(f"{path}gpu_hours", "give a model + tokens or a "
                                                             "trace's gpu_hours, not both")
            ref = data.get("reference")
            if not isinstance(ref, str) or not ref:
                raise CapacityInputError(f"{path}reference", "the accelerator slug the "
                                                             "trace's GPU-hours were measured on")
            return cls(gpu_hours=_number(data, "gpu_hours", path), reference=ref)
        model = data.get("model")
        if not isinstance(model, str) or not model:
            raise CapacityInputError(f"{path}model", "a training-catalogue model slug "
                                                     "(or give gpu_hours + reference)")
        batch = _number(data, "global_batch", path, 1152)
        if batch != int(batch):
            raise CapacityInputError(f"{path}global_batch", "a whole number of sequences")
        precision = data.get("precision", "bf16")
        if precision not in ("bf16", "fp16", "fp8"):
            raise CapacityInputError(f"{path}precision", f"bf16, fp16 or fp8, got {precision!r}")
        return cls(model=model, tokens=_number(data, "tokens", path), global_batch=int(batch),
                   precision=str(precision))
