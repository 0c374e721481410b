"""What-if events, the horizon and the run's options: plain dataclasses, JSON in and out.

An event happens ``at_s`` seconds after the fork (the snapshot's instant) and, with
``duration_s``, reverts that long after (a drained server comes back, a cap is lifted);
without it, it lasts to the end of the horizon. ``target`` names what it hits by the
inventory's id (a card, server, rack or network switch id; a job id of the snapshot or
of an ``add_job`` event's ``job.id``), or a facility element's key (a CDU, a feed).

Kinds and their ``value``:

=================  ==========================================================
``fail_card``      the card fails: jobs on it lose the work since their last
(``_server``,      checkpoint and go back to the queue (self-healing: they
``_rack``,         restart elsewhere, ``restart_s`` later); the card is out
``_switch``)       until ``duration_s`` (none: the horizon)
``drain_*``        the same elements drained: jobs checkpoint first (no work
                   lost) and move; the cards take no new work
``add_job``        ``job`` = {id, cards, duration_s, priority, share_milli,
                   training_model, global_batch}
``cancel_job``     the job leaves (running or queued)
``resize_job``     ``value`` = new card count: it checkpoints, restarts at that
                   size, its remaining work scaled by old/new cards
``change_policy``  ``policy`` = a scheduling policy name, from then on
``change_spares``  ``value`` = cards in the hot-spare pool from then on
``cap_power``      ``value`` = W per card on rack ``target`` (or every rack
                   when ``target`` is empty): the clock falls (DVFS curve)
change_contract    ``value`` = the site's new utility contract (kW of facility
                   power): the cards' budget is value / ``pue`` less the
                   racks' static non-card load; every card is capped to its
                   share (the clock falls as under a cap)
``cdu_trip``,      facility events: applied through the facility engine when
``feed_trip``,     the run has a plant, refused otherwise
``raise_wet_bulb``
=================  ==========================================================
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from simulation.scheduling import POLICIES
from simulation.training.models import MODELS

__all__ = ["CARD_ELEMENTS", "EVENT_KINDS", "FACILITY_KINDS", "MAX_CONTRACT_KW", "MAX_EVENTS",
           "MAX_HORIZON_S",
           "MIN_HORIZON_S", "Event", "WhatIfInputError", "WhatIfSpec"]

CARD_ELEMENTS = ("card", "server", "rack", "switch")
FACILITY_KINDS = ("cdu_trip", "feed_trip", "raise_wet_bulb")
EVENT_KINDS: tuple[str, ...] = (
    *(f"fail_{e}" for e in CARD_ELEMENTS), *(f"drain_{e}" for e in CARD_ELEMENTS),
    "add_job", "cancel_job", "resize_job", "change_policy", "change_spares", "cap_power",
    "change_contract", *FACILITY_KINDS)
MIN_HORIZON_S = 3600.0
"""One hour: the issue's shortest horizon."""
MAX_HORIZON_S = 28 * 86400.0
"""Four weeks: the issue's "hours to weeks"."""
MAX_EVENTS = 200
MAX_CONTRACT_KW = 1e7
"""10 GW: the facility app's bound on a site's contract (``Site.contract_kw``)."""


class WhatIfInputError(ValueError):
    """A what-if input that cannot be run; ``field`` is the dotted path to blame."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(field, message)  # both args: SimPy re-raises it from them
        self.field = field
        self.message = message

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def _number(value: Any, path: str, *, lo: float = 0.0, hi: float = math.inf,
            optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            not math.isfinite(value) or not lo <= value <= hi:
        raise WhatIfInputError(path, f"a number from {lo:g} to {hi:g}, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Event:
    """One perturbation (see the module doc for the kinds)."""

    at_s: float
    kind: str
    target: int | str | None = None
    value: float | None = None
    duration_s: float | None = None
    policy: str | None = None
    job: Mapping[str, Any] | None = None

    @property
    def element(self) -> str | None:
        """``card``/``server``/``rack``/``switch`` for a fail or drain event."""
        head, _, tail = self.kind.partition("_")
        return tail if head in ("fail", "drain") else None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"at_s": self.at_s, "kind": self.kind}
        for key in ("target", "value", "duration_s", "policy"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.job is not None:
            out["job"] = dict(self.job)
        return out

    @classmethod
    def from_dict(cls, data: Any, path: str = "events[0]") -> Event:
        """Validate one event; errors name ``<path>.<field>``."""
        if not isinstance(data, Mapping):
            raise WhatIfInputError(path, "an object {at_s, kind, target, ...}")
        extra = sorted(set(data) - {"at_s", "kind", "target", "value", "duration_s", "policy",
                                    "job"})
        if extra:
            raise WhatIfInputError(f"{path}.{extra[0]}", "unknown field")
        kind = data.get("kind")
        if kind not in EVENT_KINDS:
            raise WhatIfInputError(f"{path}.kind", f"one of {', '.join(EVENT_KINDS)}, "
                                                   f"got {kind!r}")
        at = _number(data.get("at_s"), f"{path}.at_s", hi=MAX_HORIZON_S)
        duration = _number(data.get("duration_s"), f"{path}.duration_s", lo=1.0,
                           hi=MAX_HORIZON_S, optional=True)
        target = data.get("target")
        needs_id = kind.startswith(("fail_", "drain_")) or kind in ("cancel_job", "resize_job")
        if needs_id and (isinstance(target, bool) or not isinstance(target, int)):
            raise WhatIfInputError(f"{path}.target", f"the id of the {kind.split('_')[1]} "
                                                     f"(an integer), got {target!r}")
        if kind in FACILITY_KINDS and kind != "raise_wet_bulb" and \
                (not isinstance(target, str) or not target):
            raise WhatIfInputError(f"{path}.target", "the key of a facility element")
        if kind == "change_contract" and target not in (None, ""):
            raise WhatIfInputError(f"{path}.target", "the site's contract: no target")
        if kind == "cap_power" and target not in (None, "") and \
                (isinstance(target, bool) or not isinstance(target, int)):
            raise WhatIfInputError(f"{path}.target", "a rack id, or empty for every rack")
        value = data.get("value")
        if kind == "cap_power":
            value = _number(value, f"{path}.value", lo=1.0, hi=10_000.0)
        elif kind == "resize_job":
            value = _number(value, f"{path}.value", lo=1.0, hi=1_048_576.0)
            if value is None or value != int(value):
                raise WhatIfInputError(f"{path}.value", "a whole number of cards")
        elif kind == "change_spares":
            value = _number(value, f"{path}.value", lo=0.0, hi=1_048_576.0)
            if value is None or value != int(value):
                raise WhatIfInputError(f"{path}.value", "a whole number of cards")
        elif kind == "raise_wet_bulb":
            value = _number(value, f"{path}.value", lo=0.0, hi=30.0)
        elif kind == "change_contract":
            value = _number(value, f"{path}.value", lo=0.001, hi=MAX_CONTRACT_KW)
        elif value is not None:
            raise WhatIfInputError(f"{path}.value", f"{kind} takes no value")
        policy = data.get("policy")
        if kind == "change_policy":
            if policy not in POLICIES:
                raise WhatIfInputError(f"{path}.policy", f"one of {', '.join(sorted(POLICIES))}"
                                                         f", got {policy!r}")
        elif policy is not None:
            raise WhatIfInputError(f"{path}.policy", "only change_policy takes a policy")
        job = data.get("job")
        if kind == "add_job":
            job = _job(job, f"{path}.job")
        elif job is not None:
            raise WhatIfInputError(f"{path}.job", "only add_job takes a job")
        return cls(float(at or 0.0), str(kind), target, value, duration, policy, job)


def _job(data: Any, path: str) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise WhatIfInputError(path, "an object {id, cards, duration_s, priority}")
    extra = sorted(set(data) - {"id", "name", "cards", "duration_s", "priority", "share_milli",
                                "training_model", "global_batch"})
    if extra:
        raise WhatIfInputError(f"{path}.{extra[0]}", "unknown field")
    cards = data.get("cards")
    if isinstance(cards, bool) or not isinstance(cards, int) or not 1 <= cards <= 1_048_576:
        raise WhatIfInputError(f"{path}.cards", f"an integer from 1, got {cards!r}")
    share = data.get("share_milli", 1000)
    if isinstance(share, bool) or not isinstance(share, int) or not 1 <= share <= 1000 or \
            (cards > 1 and share != 1000):
        raise WhatIfInputError(f"{path}.share_milli", "1..1000 thousandths of one card "
                                                      "(whole cards for several)")
    prio = data.get("priority", 0)
    if isinstance(prio, bool) or not isinstance(prio, int):
        raise WhatIfInputError(f"{path}.priority", "an integer")
    job_id = data.get("id")
    if job_id is not None and (isinstance(job_id, bool) or not isinstance(job_id, int)):
        raise WhatIfInputError(f"{path}.id", "an integer (to name it in later events)")
    model = data.get("training_model")
    if model is not None and model not in MODELS:
        raise WhatIfInputError(f"{path}.training_model", f"a model of the training catalogue "
                                                         f"({', '.join(MODELS)}), got {model!r}")
    batch = data.get("global_batch")
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int)
                              or not 1 <= batch <= 1 << 24):
        raise WhatIfInputError(f"{path}.global_batch", f"sequences per step, an integer from "
                                                       f"1, got {batch!r}")
    out = {"id": job_id, "name": str(data.get("name", "")), "cards": cards,
           "duration_s": _number(data.get("duration_s"), f"{path}.duration_s", lo=1.0,
                                 hi=365 * 86400.0),
           "priority": prio, "share_milli": share}
    if model is not None:
        out["training_model"] = model
        out["global_batch"] = batch
    return out


@dataclass(frozen=True)
class WhatIfSpec:
    """A what-if: the horizon, the events, the seed and the models' knobs.

    ``failure_rate``: a multiplier on the per-card and per-server interruption rates
    calibrated on Llama 3's Table 5 (:func:`simulation.resilience.calibrate`); 0: no
    random failures. ``checkpoint_interval_s`` and ``restart_s``: a failed job loses
    the work since its last checkpoint (taken every interval since it started) and
    restarts ``restart_s`` later elsewhere. ``default_duration_s``: the expected
    duration of a job that has none (a running job without one holds its cards to
    the horizon). ``spares``: cards in the hot-spare pool (a failed job swaps them in
    and resumes in place instead of being requeued). ``compute_share``: the share of a
    step that is compute-bound (time ∝ 1/clock under a cap; the rest does not slow).
    ``points``: samples the time series keep. ``contract_kw``: the site's utility
    contract in force at the fork (facility kW; None: none), ``pue`` the facility's
    power usage effectiveness that turns it into the IT budget (contract / pue, less
    the racks' static non-card load for the cards; 1.1 for a liquid-cooled hall, an
    assumption as in ``simulation.capacity.Site``) — see ``change_contract``.
    """

    horizon_s: float = 86400.0
    events: tuple[Event, ...] = ()
    seed: int = 0
    policy: str = "fifo-first-fit"
    failure_rate: float = 1.0
    checkpoint_interval_s: float = 1800.0
    restart_s: float = 300.0
    default_duration_s: float = 4 * 3600.0
    compute_share: float = 0.7
    spares: int = 0
    points: int = 300
    job_rows: int = 200
    contract_kw: float | None = None
    pue: float = 1.1

    def to_dict(self) -> dict[str, Any]:
        return {"horizon_s": self.horizon_s, "events": [e.to_dict() for e in self.events],
                "seed": self.seed, "policy": self.policy, "failure_rate": self.failure_rate,
                "checkpoint_interval_s": self.checkpoint_interval_s,
                "restart_s": self.restart_s, "default_duration_s": self.default_duration_s,
                "compute_share": self.compute_share, "spares": self.spares,
                "points": self.points,
                "job_rows": self.job_rows, "contract_kw": self.contract_kw, "pue": self.pue}

    @classmethod
    def from_dict(cls, data: Any) -> WhatIfSpec:
        """Validate; a :class:`WhatIfInputError` names the field (``horizon_s``,
        ``events[3].target``...)."""
        if not isinstance(data, Mapping):
            raise WhatIfInputError("input", "a JSON object")
        known = set(cls().to_dict())
        extra = sorted(set(data) - known)
        if extra:
            raise WhatIfInputError(extra[0], f"unknown field (allowed: {', '.join(sorted(known))})")
        d = cls()
        horizon = _number(data.get("horizon_s", d.horizon_s), "horizon_s", lo=MIN_HORIZON_S,
                          hi=MAX_HORIZON_S)
        raw = data.get("events", [])
        if not isinstance(raw, list) or len(raw) > MAX_EVENTS:
            raise WhatIfInputError("events", f"a list of at most {MAX_EVENTS} events")
        events = tuple(Event.from_dict(e, f"events[{i}]") for i, e in enumerate(raw))
        for i, e in enumerate(events):
            if e.at_s > float(horizon or 0):
                raise WhatIfInputError(f"events[{i}].at_s", f"after the horizon "
                                                            f"({horizon:g} s)")
        seed = data.get("seed", d.seed)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise WhatIfInputError("seed", f"an integer ≥ 0, got {seed!r}")
        policy = data.get("policy", d.policy)
        if policy not in POLICIES:
            raise WhatIfInputError("policy", f"one of {', '.join(sorted(POLICIES))}")
        spares = data.get("spares", d.spares)
        if isinstance(spares, bool) or not isinstance(spares, int) or spares < 0:
            raise WhatIfInputError("spares", f"an integer ≥ 0, got {spares!r}")
        points = data.get("points", d.points)
        rows = data.get("job_rows", d.job_rows)
        for name, v in (("points", points), ("job_rows", rows)):
            if isinstance(v, bool) or not isinstance(v, int) or not 2 <= v <= 2000:
                raise WhatIfInputError(name, f"an integer from 2 to 2000, got {v!r}")

        def num(key: str, lo: float, hi: float) -> float:
            return float(_number(data.get(key, getattr(d, key)), key, lo=lo, hi=hi) or 0.0)

        contract = _number(data.get("contract_kw"), "contract_kw", lo=0.001,
                           hi=MAX_CONTRACT_KW, optional=True)
        return cls(float(horizon or 0.0), events, seed, str(policy),
                   num("failure_rate", 0.0, 1000.0), num("checkpoint_interval_s", 1.0, 1e7),
                   num("restart_s", 0.0, 86400.0), num("default_duration_s", 1.0, 1e8),
                   num("compute_share", 0.0, 1.0), int(spares), int(points), int(rows),
                   contract, num("pue", 1.0, 5.0))
