"""The inputs of a resilience study, validated field by field (JSON in, JSON out).

:func:`resilience_from_params` turns the REST API's dict into
:class:`ResilienceParams` or raises :class:`ResilienceInputError` naming the
dotted field at fault (``checkpoint.tiers[1].write_gbps``), which the twin turns
into a 400 on ``params.<field>``.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from simulation.topology.graph import TopologyError

from .checkpoint import DGX_H100_TIERS, StorageTier
from .failures import CLASSES, DETECTION_S

__all__ = [
    "CheckpointPolicy",
    "Recovery",
    "ResilienceInputError",
    "ResilienceParams",
    "resilience_from_params",
]

MAX_CARDS = 10_000_000
MAX_DAYS = 3650.0


class ResilienceInputError(TopologyError):
    """Bad input: ``.field`` is the dotted path, ``.reason`` (= ``.message``) what is wrong."""

    @property
    def reason(self) -> str:
        return self.message


@dataclass(frozen=True)
class CheckpointPolicy:
    """How checkpoints are taken: mode, the tier chain, in-memory replicas."""

    interval_min: float = 30.0
    mode: str = "async"  #: "sync" (stall until durable) or "async" (stall for the first copy)
    tiers: tuple[StorageTier, ...] = DGX_H100_TIERS
    replicas: int = 1  #: copies in servers' DRAM (Gemini); 1 = none beyond the local one

    def to_dict(self) -> dict[str, Any]:
        return {"interval_min": self.interval_min, "mode": self.mode, "replicas": self.replicas,
                "tiers": [t.to_dict() for t in self.tiers]}


@dataclass(frozen=True)
class Recovery:
    """Times of the recovery actions, in seconds (detection comes from the failure's kind).

    Defaults (assumptions, docs/simulation.md "Resilience"): a cold restart of a
    large job (requeue, relaunch, NCCL init, data loader warm-up) 10 min; a swap to a
    warm standby server 2 min; an elastic reconfiguration (drop a data-parallel
    replica) 1 min."""

    restart_s: float = 600.0
    swap_s: float = 120.0
    reconfigure_s: float = 60.0
    hot_spare: bool = False  #: replacements are warm standbys (swap) rather than cold nodes
    elastic: bool = False  #: with no spare, shrink by a data-parallel replica instead of waiting
    step_s: float = 10.0  #: work lost by an elastic shrink (the step in flight)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ResilienceParams:
    """One study: a job of ``cards`` for ``days`` under a failure mix and a policy."""

    cards: int
    days: float = 30.0
    cards_per_server: int = 8
    hbm_stacks_per_card: int = 5  #: H100 80 GB: 5 × 16 GB HBM3
    params: float = 70e9  #: model parameters (count)
    tp: int = 8
    pp: int = 1
    dp: int = 0  #: 0: cards / (tp·pp)
    zero: int = 1
    checkpoint: CheckpointPolicy = field(default_factory=CheckpointPolicy)
    recovery: Recovery = field(default_factory=Recovery)
    spares: int | None = None  #: spare servers; None: the cluster always has one free
    failure_mix: dict[str, float] = field(default_factory=dict)  #: class → rate multiplier
    repair_h: dict[str, float] = field(default_factory=dict)  #: class → repair hours
    detection_s: dict[str, float] = field(default_factory=dict)  #: kind → seconds
    network_gbps_per_server: float = 400.0  #: GB/s of scale-out per server (8 × 400 Gb/s)
    seed: int = 0
    sweep_runs: int = 3  #: failure histories averaged per interval of the ETTR curve
    sweep_points: int = 17

    @property
    def data_parallel(self) -> int:
        return self.dp or max(1, self.cards // (self.tp * self.pp))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["checkpoint"] = self.checkpoint.to_dict()
        d["recovery"] = self.recovery.to_dict()
        return d


def _number(data: Mapping[str, Any], key: str, path: str, default: float, *,
            lo: float = 0.0, hi: float = math.inf, strict_lo: bool = False,
            integer: bool = False) -> Any:
    value = data.get(key, default)
    where = f"{path}{key}"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ResilienceInputError(where, "must be a number.")
    if integer and value != int(value):
        raise ResilienceInputError(where, "must be a whole number.")
    if value < lo or (strict_lo and value == lo) or value > hi:
        low = f"above {lo:g}" if strict_lo else f"at least {lo:g}"
        raise ResilienceInputError(where, f"must be {low} and at most {hi:g} (got {value:g}).")
    return int(value) if integer else float(value)


def _mapping(data: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        raise ResilienceInputError(f"{path}{key}", "must be an object.")
    return value


def _tier(data: Any, path: str) -> StorageTier:
    known = {t.name: t for t in DGX_H100_TIERS}
    if isinstance(data, str):
        if data not in known:
            raise ResilienceInputError(path, f"unknown tier {data!r}; known: {', '.join(known)}.")
        return known[data]
    if not isinstance(data, Mapping):
        raise ResilienceInputError(path, "must be a tier name or an object.")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ResilienceInputError(f"{path}.name", "must be a non-empty string.")
    base = known.get(name, StorageTier(name, 1.0, 1.0))
    write = _number(data, "write_gbps", f"{path}.", base.write_gbps, lo=0, hi=1e6, strict_lo=True)
    return StorageTier(
        name, write,
        _number(data, "read_gbps", f"{path}.", data.get("write_gbps", base.read_gbps), lo=0,
                hi=1e6, strict_lo=True),
        _number(data, "aggregate_gbps", f"{path}.", base.aggregate_gbps, hi=1e8),
        _number(data, "capacity_gb", f"{path}.", base.capacity_gb, hi=1e12),
        bool(data.get("survives_host_loss", base.survives_host_loss)),
        str(data.get("source", base.source)),
        _number(data, "aggregate_read_gbps", f"{path}.", base.aggregate_read_gbps, hi=1e8),
    )


def _checkpoint(data: Mapping[str, Any], path: str) -> CheckpointPolicy:
    mode = data.get("mode", "async")
    if mode not in ("sync", "async"):
        raise ResilienceInputError(f"{path}mode", "must be 'sync' or 'async'.")
    raw = data.get("tiers", [t.name for t in DGX_H100_TIERS])
    if not isinstance(raw, list) or not raw or len(raw) > 8:
        raise ResilienceInputError(f"{path}tiers", "must be a list of 1 to 8 tiers.")
    tiers = tuple(_tier(t, f"{path}tiers[{i}]") for i, t in enumerate(raw))
    if len({t.name for t in tiers}) != len(tiers):
        raise ResilienceInputError(f"{path}tiers", "names a tier twice.")
    replicas = _number(data, "replicas", path, 1, lo=1, hi=8, integer=True)
    if replicas < 2 and not any(t.survives_host_loss for t in tiers):
        raise ResilienceInputError(
            f"{path}tiers", "no tier survives the loss of a server: add a shared file system "
                            "(survives_host_loss) or keep replicas ≥ 2 in peers' memory.")
    interval = _number(data, "interval_min", path, 30.0, lo=0.01, hi=7 * 24 * 60)
    return CheckpointPolicy(interval, str(mode), tiers, replicas)


def _recovery(data: Mapping[str, Any], path: str) -> Recovery:
    base = Recovery()
    times = {key: _number(data, key, path, getattr(base, key), hi=7 * 86400.0)
             for key in ("restart_s", "swap_s", "reconfigure_s", "step_s")}
    flags = {}
    for key in ("hot_spare", "elastic"):
        value = data.get(key, getattr(base, key))
        if not isinstance(value, bool):
            raise ResilienceInputError(f"{path}{key}", "must be true or false.")
        flags[key] = value
    return Recovery(**times, **flags)


def _per_key(data: Mapping[str, Any], key: str, allowed: tuple[str, ...], hi: float
             ) -> dict[str, float]:
    raw = _mapping(data, key, "")
    out: dict[str, float] = {}
    for name in raw:
        if name not in allowed:
            raise ResilienceInputError(f"{key}.{name}",
                                       f"unknown; known: {', '.join(allowed)}.")
        out[name] = _number(raw, name, f"{key}.", 0.0, hi=hi)
    return out


def resilience_from_params(data: Mapping[str, Any]) -> ResilienceParams:
    """Validate a JSON dict into :class:`ResilienceParams` (errors name the dotted field)."""
    if not isinstance(data, Mapping):
        raise ResilienceInputError("params", "must be an object.")
    if "cards" not in data:
        raise ResilienceInputError("cards", "is required.")
    cards = _number(data, "cards", "", 0, lo=1, hi=MAX_CARDS, integer=True)
    per_server = _number(data, "cards_per_server", "", 8, lo=1, hi=64, integer=True)
    params = _number(data, "params", "", 70e9, lo=0, hi=1e14, strict_lo=True)
    tp = _number(data, "tp", "", min(8, cards), lo=1, hi=cards, integer=True)
    pp = _number(data, "pp", "", 1, lo=1, hi=cards, integer=True)
    if tp * pp > cards:
        raise ResilienceInputError("pp", f"tp × pp = {tp * pp} is more than the {cards} cards.")
    dp = _number(data, "dp", "", 0, lo=0, hi=cards, integer=True)
    if dp and tp * pp * dp > cards:
        raise ResilienceInputError("dp", f"tp × pp × dp = {tp * pp * dp} is more than the "
                                         f"{cards} cards.")
    spares_raw = data.get("spares")
    spares = None if spares_raw is None else _number(data, "spares", "", 0, hi=1e6, integer=True)
    return ResilienceParams(
        cards=cards,
        days=_number(data, "days", "", 30.0, lo=0.01, hi=MAX_DAYS),
        cards_per_server=per_server,
        hbm_stacks_per_card=_number(data, "hbm_stacks_per_card", "", 5, lo=1, hi=64,
                                    integer=True),
        params=params, tp=tp, pp=pp, dp=dp,
        zero=_number(data, "zero", "", 1, lo=0, hi=3, integer=True),
        checkpoint=_checkpoint(_mapping(data, "checkpoint", ""), "checkpoint."),
        recovery=_recovery(_mapping(data, "recovery", ""), "recovery."),
        spares=spares,
        failure_mix=_per_key(data, "failure_mix", CLASSES, 1e4),
        repair_h=_per_key(data, "repair_h", CLASSES, 24 * 365.0),
        detection_s=_per_key(data, "detection_s", tuple(DETECTION_S), 86400.0),
        network_gbps_per_server=_number(data, "network_gbps_per_server", "", 400.0, lo=0,
                                        hi=1e6, strict_lo=True),
        seed=_number(data, "seed", "", 0, lo=0, hi=2**31 - 1, integer=True),
        sweep_runs=_number(data, "sweep_runs", "", 3, lo=1, hi=20, integer=True),
        sweep_points=_number(data, "sweep_points", "", 17, lo=3, hi=41, integer=True),
    )
