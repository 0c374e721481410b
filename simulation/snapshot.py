"""The live twin frozen at one instant: the input every "what if, from now" starts from.

A :class:`LiveSnapshot` is plain data (no Django): what was down or degraded and
why, the jobs running (where, since when, until when expected) and queued (what
they ask for), and the latest readings per card (power, temperature, utilisation,
an optional power cap) and per rack (draw against budget). The twin freezes one
(``twin.scenarios.snapshot.freeze``) and stores it with a scenario run, so the run
can be computed again later from exactly the same state: same snapshot and seed,
same answer.

Why one snapshot and not "each kind reads the live state its own way": the
failure kind needs the down cards and links, the scheduling kind the running jobs
and their expected ends, a facility or capacity model the power and temperatures;
freezing all of them at one instant makes them agree with each other, and
storing them makes a run reproducible after the live twin has moved on.

JSON shape (``to_dict``/``from_dict``) is compact for large clusters:

* id lists (cards in layout order, down elements) are run-length packed as
  ``[[first, count], …]`` of consecutive ids — a cluster built in layout order is
  a handful of runs whatever its size, a job on whole servers a few
  (:func:`pack_ids`); a job's shares are one number when they are all equal;
* per-card readings are little-endian float32 in base64 (``{"dtype": "<f4",
  "b64": …}``, 5.3 bytes a card), NaN where a card never reported
  (:func:`pack_floats`). 65,536 cards with three metrics are ~1 MB of JSON (plus ~20 bytes a running
  job: ``benchmarks/fork.py``).

Example:
    >>> snap = LiveSnapshot(taken_at=0.0, cluster_id=1, cluster_name="demo",
    ...                     has_live_state=False, cards_down={"failed": (7, 8, 9)})
    >>> d = snap.to_dict()
    >>> d["cards_down"]
    {'failed': [[7, 3]]}
    >>> LiveSnapshot.from_dict(d) == snap
    True
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from simulation.topology import TopologyError

__all__ = [
    "CardReadings",
    "LiveSnapshot",
    "PendingJob",
    "PlantReadings",
    "RackPower",
    "RunningJob",
    "pack_floats",
    "pack_ids",
    "unpack_floats",
    "unpack_ids",
]

SNAPSHOT_VERSION = 1
"""The JSON shape's version (``from_dict`` refuses another)."""


# ------------------------------------------------------------------ packing
def pack_ids(ids: Sequence[int] | npt.NDArray[np.int64]) -> list[list[int]]:
    """Run-length pack ``ids`` (in their order) as ``[[first, count], …]``.

    >>> pack_ids([3, 4, 5, 9, 10, 2])
    [[3, 3], [9, 2], [2, 1]]
    """
    arr = np.asarray(ids, dtype=np.int64)
    if arr.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(arr) != 1) + 1
    starts = np.concatenate(([0], breaks))
    counts = np.diff(np.concatenate((starts, [arr.size])))
    return [[int(a), int(c)] for a, c in zip(arr[starts].tolist(), counts.tolist(), strict=True)]


def unpack_ids(runs: Any, path: str = "ids") -> npt.NDArray[np.int64]:
    """The ids :func:`pack_ids` packed (int64, in order)."""
    if not isinstance(runs, list):
        raise TopologyError(path, "a list of [first id, count] runs")
    parts = []
    for i, run in enumerate(runs):
        if (not isinstance(run, list | tuple) or len(run) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in run)
                or run[1] < 1):
            raise TopologyError(f"{path}[{i}]", f"a [first id, count ≥ 1] pair, got {run!r}")
        parts.append(np.arange(run[0], run[0] + run[1], dtype=np.int64))
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def pack_floats(values: npt.ArrayLike) -> dict[str, str]:
    """float32 values as little-endian base64 (exact, NaN kept)."""
    arr = np.ascontiguousarray(values, dtype="<f4")
    return {"dtype": "<f4", "b64": base64.b64encode(arr.tobytes()).decode("ascii")}


def unpack_floats(data: Any, n: int, path: str) -> npt.NDArray[np.float32]:
    """The float32 array :func:`pack_floats` packed; it must hold ``n`` values."""
    if not isinstance(data, Mapping) or data.get("dtype") != "<f4" or \
            not isinstance(data.get("b64"), str):
        raise TopologyError(path, 'a {"dtype": "<f4", "b64": "…"} packed array')
    try:
        raw = base64.b64decode(data["b64"], validate=True)
    except ValueError as exc:
        raise TopologyError(path, "b64 is not base64") from exc
    if len(raw) != 4 * n:
        raise TopologyError(path, f"{len(raw) // 4:,} values for {n:,} cards")
    return np.frombuffer(raw, dtype="<f4").astype(np.float32)


def _ids(value: Any, path: str) -> tuple[int, ...]:
    return tuple(int(v) for v in unpack_ids(value, path).tolist())


def _down(value: Any, path: str) -> dict[str, tuple[int, ...]]:
    if not isinstance(value, Mapping):
        raise TopologyError(path, "an object {reason: packed ids}")
    return {str(k): _ids(v, f"{path}.{k}") for k, v in value.items()}


def _num(value: Any, path: str, *, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            not math.isfinite(value):
        raise TopologyError(path, f"a finite number, got {value!r}")
    return float(value)


def _req(data: Mapping[str, Any], key: str, path: str) -> Any:
    if key not in data:
        raise TopologyError(f"{path}{key}", "missing")
    return data[key]


# ------------------------------------------------------------------ parts
@dataclass(frozen=True)
class RunningJob:
    """A job holding cards at the snapshot: where, since when, until when expected.

    ``cards`` are card ids and ``share_milli`` their thousandths (1000: the whole
    card), in the same order. ``expected_end`` is ``started + duration`` (Unix
    seconds; None: no expected duration), ``progress`` the elapsed share of it.
    """

    id: int
    name: str
    tenant: str
    priority: int
    cards: tuple[int, ...]
    share_milli: tuple[int, ...]
    started: float | None
    expected_end: float | None
    progress: float | None
    training_model: str | None = None
    """The training catalogue's slug of the model it trains (None: not known)."""
    global_batch: int | None = None
    """Its global batch in sequences (None: not known)."""

    def remaining_s(self, at: float) -> float | None:
        """Expected seconds left at ``at`` (None: unknown; never negative)."""
        return None if self.expected_end is None else max(0.0, self.expected_end - at)

    def to_dict(self) -> dict[str, Any]:
        """``cards`` run-length packed (a job on whole servers is one run);
        ``share_milli`` one number when every card has the same share."""
        uniform = len(set(self.share_milli)) == 1
        return {"id": self.id, "name": self.name, "tenant": self.tenant,
                "priority": self.priority, "cards": pack_ids(self.cards),
                "share_milli": self.share_milli[0] if uniform else list(self.share_milli),
                "started": self.started, "expected_end": self.expected_end,
                "progress": self.progress, **_training(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str = "") -> RunningJob:
        cards = _ids(_req(data, "cards", path), f"{path}cards")
        raw = _req(data, "share_milli", path)
        share = (tuple(int(s) for s in raw) if isinstance(raw, list)
                 else (int(raw),) * len(cards))
        if len(share) != len(cards):
            raise TopologyError(f"{path}share_milli", "one share per card")
        return cls(int(_req(data, "id", path)), str(data.get("name", "")),
                   str(data.get("tenant", "")), int(data.get("priority", 0)), cards, share,
                   _num(data.get("started"), f"{path}started", optional=True),
                   _num(data.get("expected_end"), f"{path}expected_end", optional=True),
                   _num(data.get("progress"), f"{path}progress", optional=True),
                   *_training_from(data, path))


@dataclass(frozen=True)
class PendingJob:
    """A queued job at the snapshot and its demand (``cards`` whole cards, or one
    card's ``share_milli``)."""

    id: int
    name: str
    tenant: str
    priority: int
    cards: int
    share_milli: int
    gang: bool
    duration_s: float | None
    submitted: float | None
    training_model: str | None = None
    global_batch: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "tenant": self.tenant,
                "priority": self.priority, "cards": self.cards,
                "share_milli": self.share_milli, "gang": self.gang,
                "duration_s": self.duration_s, "submitted": self.submitted,
                **_training(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str = "") -> PendingJob:
        return cls(int(_req(data, "id", path)), str(data.get("name", "")),
                   str(data.get("tenant", "")), int(data.get("priority", 0)),
                   int(_req(data, "cards", path)), int(data.get("share_milli", 1000)),
                   bool(data.get("gang", True)),
                   _num(data.get("duration_s"), f"{path}duration_s", optional=True),
                   _num(data.get("submitted"), f"{path}submitted", optional=True),
                   *_training_from(data, path))


def _training(job: RunningJob | PendingJob) -> dict[str, Any]:
    """A job's training workload for its JSON: only when known, so a snapshot of jobs
    without one keeps the JSON (and the digest) it had before the fields existed."""
    out: dict[str, Any] = {}
    if job.training_model is not None:
        out["training_model"] = job.training_model
    if job.global_batch is not None:
        out["global_batch"] = job.global_batch
    return out


def _training_from(data: Mapping[str, Any], path: str) -> tuple[str | None, int | None]:
    model = data.get("training_model")
    if model is not None and (not isinstance(model, str) or not model):
        raise TopologyError(f"{path}training_model", "a training model's slug")
    batch = data.get("global_batch")
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int)
                              or batch < 1):
        raise TopologyError(f"{path}global_batch", "a whole number of sequences ≥ 1")
    return model, batch


def _same(a: npt.NDArray[Any] | None, b: npt.NDArray[Any] | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))


@dataclass(frozen=True, eq=False)
class CardReadings:
    """Latest readings per card, aligned with ``card_ids`` (the live layout's order).

    float32, NaN where a card never reported (or, for ``cap_w``, has no cap).
    ``cap_w`` is None when the snapshot carries no caps: the twin has live power
    capping (``twin.facility.capping_live``), but its freeze
    (``twin.scenarios.snapshot.freeze``) does not read the live caps yet.
    """

    card_ids: npt.NDArray[np.int64]
    power_w: npt.NDArray[np.float32]
    temp_c: npt.NDArray[np.float32]
    util: npt.NDArray[np.float32]
    cap_w: npt.NDArray[np.float32] | None = None

    def __post_init__(self) -> None:
        n = len(self.card_ids)
        for name in ("power_w", "temp_c", "util", "cap_w"):
            arr = getattr(self, name)
            if arr is not None and len(arr) != n:
                raise TopologyError(f"readings.{name}", f"{len(arr):,} values for {n:,} cards")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CardReadings):
            return NotImplemented
        return all(_same(getattr(self, k), getattr(other, k))
                   for k in ("card_ids", "power_w", "temp_c", "util", "cap_w"))

    __hash__ = None  # type: ignore[assignment]

    @property
    def reporting(self) -> int:
        """Cards with a power reading."""
        return int(np.isfinite(self.power_w).sum())

    def to_dict(self) -> dict[str, Any]:
        return {"card_ids": pack_ids(self.card_ids), "power_w": pack_floats(self.power_w),
                "temp_c": pack_floats(self.temp_c), "util": pack_floats(self.util),
                "cap_w": None if self.cap_w is None else pack_floats(self.cap_w)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str = "readings.") -> CardReadings:
        ids = unpack_ids(_req(data, "card_ids", path), f"{path}card_ids")
        n = len(ids)
        cap = data.get("cap_w")
        power, temp, util = (unpack_floats(_req(data, k, path), n, f"{path}{k}")
                             for k in ("power_w", "temp_c", "util"))
        return cls(ids, power, temp, util,
                   None if cap is None else unpack_floats(cap, n, f"{path}cap_w"))


@dataclass(frozen=True)
class RackPower:
    """Per rack at the last tick: draw (cards + nameplate static) and budget, watts."""

    ids: tuple[int, ...]
    draw_w: tuple[float | None, ...]
    budget_w: tuple[float | None, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"ids": list(self.ids), "draw_w": list(self.draw_w),
                "budget_w": list(self.budget_w)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str = "racks.") -> RackPower:
        ids = tuple(int(v) for v in _req(data, "ids", path))
        cols = []
        for key in ("draw_w", "budget_w"):
            col = tuple(_num(v, f"{path}{key}[{i}]", optional=True)
                        for i, v in enumerate(_req(data, key, path)))
            if len(col) != len(ids):
                raise TopologyError(f"{path}{key}", "one value per rack")
            cols.append(col)
        return cls(ids, cols[0], cols[1])


def _opt_floats(values: Any, n: int, path: str) -> tuple[float | None, ...]:
    if not isinstance(values, list) or len(values) != n:
        raise TopologyError(path, f"a list of {n} numbers (null: no reading)")
    return tuple(_num(v, f"{path}[{i}]", optional=True) for i, v in enumerate(values))


@dataclass(frozen=True)
class PlantReadings:
    """The plant at the last tick (``twin.facility.live``): per rack (layout rack ids)
    coolant supply and return and the hottest card, °C (None: the rack is not in the
    plant); per CDU its supply, return (°C), flow (kg/s) and heat (W); the PUE."""

    rack_ids: tuple[int, ...]
    supply_c: tuple[float | None, ...]
    return_c: tuple[float | None, ...]
    card_c: tuple[float | None, ...]
    cdus: tuple[Mapping[str, Any], ...] = ()
    pue: float | None = None

    CDU_FIELDS = ("supply_c", "return_c", "flow_kg_s", "heat_w")

    def to_dict(self) -> dict[str, Any]:
        return {"rack_ids": list(self.rack_ids), "supply_c": list(self.supply_c),
                "return_c": list(self.return_c), "card_c": list(self.card_c),
                "cdus": [dict(c) for c in self.cdus], "pue": self.pue}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str = "plant.") -> PlantReadings:
        if not isinstance(data, Mapping):
            raise TopologyError(path.rstrip("."), "a JSON object")
        ids = _req(data, "rack_ids", path)
        if not isinstance(ids, list):
            raise TopologyError(f"{path}rack_ids", "a list of rack ids")
        n = len(ids)
        cols = [_opt_floats(_req(data, k, path), n, f"{path}{k}")
                for k in ("supply_c", "return_c", "card_c")]
        cdus = []
        for i, c in enumerate(data.get("cdus") or []):
            if not isinstance(c, Mapping) or not isinstance(c.get("key"), str):
                raise TopologyError(f"{path}cdus[{i}]", '{"key", "supply_c", …}')
            cdus.append({"key": c["key"], **{
                k: _num(c.get(k), f"{path}cdus[{i}].{k}", optional=True)
                for k in cls.CDU_FIELDS}})
        return cls(tuple(int(v) for v in ids), cols[0], cols[1], cols[2], tuple(cdus),
                   _num(data.get("pue"), f"{path}pue", optional=True))


def _facility(value: Any, path: str) -> dict[str, tuple[str, ...]]:
    """``facility_down``: reason → element keys (``"cooling:cdu-0"``); a bare list (the
    first shape) is read as ``failed``."""
    if isinstance(value, list):
        value = {"failed": value} if value else {}
    if not isinstance(value, Mapping):
        raise TopologyError(path, 'an object {reason: ["cooling:cdu-0", …]}')
    out = {}
    for k, keys in value.items():
        if not isinstance(keys, list) or not all(isinstance(x, str) for x in keys):
            raise TopologyError(f"{path}.{k}", "a list of element keys")
        out[str(k)] = tuple(keys)
    return out


# ------------------------------------------------------------------ the snapshot
@dataclass(frozen=True)
class LiveSnapshot:
    """The live state of one cluster at ``taken_at`` (Unix seconds).

    ``has_live_state`` is False when the cluster had no live telemetry: the
    snapshot is then the inventory's state only (down cards and links, jobs),
    ``readings`` and ``racks`` are None and ``note`` says so. The ``*_down``
    maps go from a reason (``failed``, ``maintenance``, ``degraded``, ``down``,
    ``stale``, ``critical``, ``warning``) to the ids it applies to (an element
    is listed under its worst reason only). ``devices_down`` maps a reason to
    network device ids (switches, NICs…); ``facility_down`` a reason (``failed``,
    ``maintenance``: the whole element out; ``degraded``: one unit out) to facility
    elements as ``"<chain>:<key>"`` (``"cooling:cdu-0"``, ``"power:feed-a"``).
    ``readings.cap_w`` holds each card's binding power cap (live capping under
    ``apply``; NaN: none) and ``plant`` the plant's temperatures at the last tick.
    """

    taken_at: float
    cluster_id: int
    cluster_name: str
    has_live_state: bool
    cards_down: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    servers_down: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    links_down: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    devices_down: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    facility_down: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    running: tuple[RunningJob, ...] = ()
    queue: tuple[PendingJob, ...] = ()
    readings: CardReadings | None = None
    racks: RackPower | None = None
    seq: int = 0
    note: str = ""
    plant: PlantReadings | None = None

    def down_cards(self, *reasons: str) -> set[int]:
        """Card ids down for any of ``reasons`` (all reasons if none given)."""
        keys = reasons or tuple(self.cards_down)
        return {c for k in keys for c in self.cards_down.get(k, ())}

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON (compact: see the module doc)."""
        def down(m: Mapping[str, tuple[int, ...]]) -> dict[str, list[list[int]]]:
            return {k: pack_ids(sorted(v)) for k, v in sorted(m.items())}

        return {
            "version": SNAPSHOT_VERSION, "taken_at": self.taken_at,
            "cluster": {"id": self.cluster_id, "name": self.cluster_name},
            "has_live_state": self.has_live_state, "seq": self.seq, "note": self.note,
            "cards_down": down(self.cards_down), "servers_down": down(self.servers_down),
            "links_down": down(self.links_down), "devices_down": down(self.devices_down),
            "facility_down": {k: sorted(v) for k, v in sorted(self.facility_down.items())
                              if v},
            "running": [j.to_dict() for j in self.running],
            "queue": [j.to_dict() for j in self.queue],
            "readings": None if self.readings is None else self.readings.to_dict(),
            "racks": None if self.racks is None else self.racks.to_dict(),
            **({} if self.plant is None else {"plant": self.plant.to_dict()}),
        }

    @classmethod
    def from_dict(cls, data: Any, path: str = "snapshot.") -> LiveSnapshot:
        """Validate and rebuild; a :class:`TopologyError` names the dotted field."""
        if not isinstance(data, Mapping):
            raise TopologyError(path.rstrip("."), "a JSON object")
        if data.get("version") != SNAPSHOT_VERSION:
            raise TopologyError(f"{path}version", f"version {SNAPSHOT_VERSION} expected, "
                                                  f"got {data.get('version')!r}")
        cluster = _req(data, "cluster", path)
        if not isinstance(cluster, Mapping):
            raise TopologyError(f"{path}cluster", '{"id", "name"}')
        readings, racks = data.get("readings"), data.get("racks")
        return cls(
            taken_at=float(_num(_req(data, "taken_at", path), f"{path}taken_at") or 0.0),
            cluster_id=int(_req(cluster, "id", f"{path}cluster.")),
            cluster_name=str(cluster.get("name", "")),
            has_live_state=bool(_req(data, "has_live_state", path)),
            cards_down=_down(data.get("cards_down", {}), f"{path}cards_down"),
            servers_down=_down(data.get("servers_down", {}), f"{path}servers_down"),
            links_down=_down(data.get("links_down", {}), f"{path}links_down"),
            devices_down=_down(data.get("devices_down", {}), f"{path}devices_down"),
            facility_down=_facility(data.get("facility_down", {}), f"{path}facility_down"),
            running=tuple(RunningJob.from_dict(j, f"{path}running[{i}].")
                          for i, j in enumerate(data.get("running", []))),
            queue=tuple(PendingJob.from_dict(j, f"{path}queue[{i}].")
                        for i, j in enumerate(data.get("queue", []))),
            readings=None if readings is None else CardReadings.from_dict(
                readings, f"{path}readings."),
            racks=None if racks is None else RackPower.from_dict(racks, f"{path}racks."),
            seq=int(data.get("seq", 0)), note=str(data.get("note", "")),
            plant=None if data.get("plant") is None else PlantReadings.from_dict(
                data["plant"], f"{path}plant."))

    def digest(self) -> str:
        """SHA-256 of the canonical JSON: equal digests, equal snapshots."""
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def summary(self) -> dict[str, Any]:
        """What a run's inputs and result say about it (small: no per-card data)."""
        def count(m: Mapping[str, tuple[int, ...]]) -> dict[str, int]:
            return {k: len(v) for k, v in sorted(m.items()) if v}

        return {"taken_at": self.taken_at, "cluster": self.cluster_id,
                "has_live_state": self.has_live_state, "seq": self.seq, "note": self.note,
                "cards_down": count(self.cards_down), "servers_down": count(self.servers_down),
                "links_down": count(self.links_down), "devices_down": count(self.devices_down),
                "facility_down": {k: len(v) for k, v in sorted(self.facility_down.items()) if v},
                "caps": 0 if self.readings is None or self.readings.cap_w is None
                else int(np.isfinite(self.readings.cap_w).sum()),
                "plant": self.plant is not None, "running": len(self.running),
                "queued": len(self.queue),
                "reporting": 0 if self.readings is None else self.readings.reporting,
                "digest": self.digest()}
