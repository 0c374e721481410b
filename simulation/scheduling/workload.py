"""A stream of jobs, in columns, and a synthetic generator with documented distributions.

A job asks for ``num_gpu`` cards of ``gpu_milli`` thousandths each: ``num_gpu = 1``
with ``gpu_milli < 1000`` is a GPU-sharing task (several share one card, as in
the Alibaba GPU trace v2023); otherwise ``gpu_milli = 1000`` (whole cards). A
job of at most the widest node's cards runs on one node (a Kubernetes pod); a
larger one spans nodes and is placed all-or-nothing (gang scheduling).

``gpu_model`` is "" (any) or ``"|"``-separated model names, as the trace's
``gpu_spec``.

Example:
    >>> w = synthetic_workload(1000, seed=1)
    >>> len(w), bool((w.gpu_milli[w.num_gpu > 1] == 1000).all())
    (1000, True)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .errors import SchedulingInputError

__all__ = ["ALIBABA_DEFAULT_MIX", "Workload", "synthetic_workload"]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
BoolA = npt.NDArray[np.bool_]

_INT_COLS = ("num_gpu", "gpu_milli", "cpu_milli", "memory_mib", "priority")
_FLOAT_COLS = ("arrival_s", "duration_s")


@dataclass(eq=False)
class Workload:
    """Columnar jobs (one entry per job, in arrival order)."""

    name: list[str]
    tenant: list[str]
    arrival_s: F64
    duration_s: F64
    num_gpu: I64
    gpu_milli: I64
    cpu_milli: I64
    memory_mib: I64
    gpu_model: list[str]
    priority: I64
    gang: BoolA

    def __post_init__(self) -> None:
        n = len(self.name)
        for col in _INT_COLS:
            setattr(self, col, np.asarray(getattr(self, col), dtype=np.int64))
        for col in _FLOAT_COLS:
            setattr(self, col, np.asarray(getattr(self, col), dtype=np.float64))
        self.gang = np.asarray(self.gang, dtype=bool)
        for col in (*_INT_COLS, *_FLOAT_COLS, "gang", "tenant", "gpu_model"):
            if len(getattr(self, col)) != n:
                raise SchedulingInputError(col, f"needs {n} entries")
        if n:
            if (self.num_gpu < 0).any():
                raise SchedulingInputError("num_gpu", "must be non-negative")
            bad = (self.gpu_milli < 0) | (self.gpu_milli > 1000)
            bad |= (self.num_gpu > 1) & (self.gpu_milli != 1000)
            bad |= (self.num_gpu >= 1) & (self.gpu_milli == 0)
            if bad.any():
                i = int(np.argmax(bad))
                raise SchedulingInputError(
                    f"jobs[{i}].gpu_milli",
                    "must be 1..1000 for one card and exactly 1000 for several")

    def __len__(self) -> int:
        return len(self.name)

    @property
    def gpu_demand(self) -> F64:
        """Cards each job asks for (a shared task counts its fraction)."""
        return np.where(self.num_gpu == 1, self.gpu_milli / 1000.0, self.num_gpu * 1.0)

    def take(self, index: npt.ArrayLike) -> Workload:
        """The jobs at ``index`` (in that order): a sample, a slice, a resampling."""
        idx = np.asarray(index, dtype=np.int64)
        return Workload(
            name=[self.name[i] for i in idx],
            tenant=[self.tenant[i] for i in idx],
            gpu_model=[self.gpu_model[i] for i in idx],
            gang=self.gang[idx],
            **{c: getattr(self, c)[idx] for c in (*_INT_COLS, *_FLOAT_COLS)},
        )

    @classmethod
    def from_records(cls, records: Sequence[Mapping[str, Any]]) -> Workload:
        """Jobs from dicts (the twin's jobs, an API body). Keys as the columns; only
        ``num_gpu`` is required. Raises :class:`SchedulingInputError` on ``jobs[i].key``."""
        cols: dict[str, Any] = {c: [] for c in (
            "name", "tenant", "gpu_model", "gang", *_INT_COLS, *_FLOAT_COLS)}
        defaults: dict[str, Any] = {"arrival_s": 0.0, "duration_s": 3600.0, "cpu_milli": 0,
                                    "memory_mib": 0, "priority": 0}
        for i, rec in enumerate(records):
            path = f"jobs[{i}]"
            if not isinstance(rec, Mapping):
                raise SchedulingInputError(path, "must be an object")
            cols["name"].append(str(rec.get("name", f"job-{i}")))
            cols["tenant"].append(str(rec.get("tenant", "")))
            model = rec.get("gpu_model", "") or ""
            if not isinstance(model, str):
                raise SchedulingInputError(f"{path}.gpu_model", "must be a string")
            cols["gpu_model"].append(model)
            cols["gang"].append(bool(rec.get("gang", True)))
            num = rec.get("num_gpu")
            if isinstance(num, bool) or not isinstance(num, int) or num < 0:
                raise SchedulingInputError(f"{path}.num_gpu", "must be an integer ≥ 0")
            milli = rec.get("gpu_milli", 1000 if num else 0)
            if isinstance(milli, bool) or not isinstance(milli, int):
                raise SchedulingInputError(f"{path}.gpu_milli", "must be an integer")
            cols["num_gpu"].append(num)
            cols["gpu_milli"].append(milli)
            for key in ("cpu_milli", "memory_mib", "priority", "arrival_s", "duration_s"):
                value = rec.get(key, defaults[key])
                if isinstance(value, bool) or not isinstance(value, int | float) or (
                    key != "priority" and value < 0
                ):
                    raise SchedulingInputError(f"{path}.{key}", "must be a number ≥ 0")
                cols[key].append(value)
        return cls(**cols)

    def to_records(self) -> list[dict[str, Any]]:
        """The inverse of :meth:`from_records`."""
        return [
            {
                "name": self.name[i], "tenant": self.tenant[i],
                "arrival_s": float(self.arrival_s[i]), "duration_s": float(self.duration_s[i]),
                "num_gpu": int(self.num_gpu[i]), "gpu_milli": int(self.gpu_milli[i]),
                "cpu_milli": int(self.cpu_milli[i]), "memory_mib": int(self.memory_mib[i]),
                "gpu_model": self.gpu_model[i], "priority": int(self.priority[i]),
                "gang": bool(self.gang[i]),
            }
            for i in range(len(self))
        ]

    def to_dict(self) -> dict[str, Any]:
        """Summary + records, plain JSON."""
        return {"count": len(self), "gpu_demand": float(self.gpu_demand.sum()),
                "jobs": self.to_records()}


ALIBABA_DEFAULT_MIX: dict[str, Any] = {
    # Task-size mix of the Alibaba GPU trace v2023, openb_pod_list_default.csv
    # (8,152 tasks; Weng et al., ATC'23, §2 and the trace README): most tasks ask
    # for one card, a large minority share a card, a few are CPU-only, a few ask
    # for 2, 4 or 8 cards. Shares below are per task.
    "cpu_only": 0.10,
    "shared": 0.35,
    "whole": {1: 0.48, 2: 0.03, 4: 0.02, 8: 0.02},
    # gpu_milli of shared tasks: values seen in the trace (thousandths of a card)
    "shared_milli": [50, 110, 160, 220, 230, 270, 320, 440, 460, 470, 480, 550, 650, 810],
    # CPU per task: cores per card (or per task if CPU-only) drawn from these; at most
    # 11 per card, as the trace's 8-card pods (88,000 milli-cores: they fit a 96-core node)
    "cpu_cores": [2, 4, 6, 8, 11],
    "memory_mib_per_core": 4096,
}
"""The synthetic generator's default distributions (documented in docs/simulation.md)."""


def synthetic_workload(
    n_jobs: int,
    seed: int = 0,
    *,
    mix: Mapping[str, Any] | None = None,
    mean_interarrival_s: float = 60.0,
    mean_duration_s: float = 3600.0,
    tenants: int = 8,
    gpu_models: Sequence[str] = (),
    gang_gpus: int = 0,
) -> Workload:
    """``n_jobs`` jobs drawn from documented distributions (vectorised, seeded).

    * Arrivals: a Poisson process of mean gap ``mean_interarrival_s`` (exponential
      gaps — the standard open-arrival model, e.g. Feitelson, *Workload Modeling for
      Computer Systems Performance Evaluation*, 2015, ch. 8).
    * Durations: log-normal with mean ``mean_duration_s`` and σ = 1.5 (heavy-tailed
      job runtimes as in the Philly and Helios analyses: Jeon et al., ATC'19; Hu et
      al., SC'21).
    * Sizes: ``mix`` (default :data:`ALIBABA_DEFAULT_MIX`): CPU-only / shared /
      whole-card shares; shared ``gpu_milli`` uniform over the trace's values.
    * ``gang_gpus`` > 0 adds a share of 2 % multi-node jobs of that many cards.
    * ``gpu_models``: if given, a third of GPU jobs pin one model (the ATC'23
      paper's §6.5: about a third of production GPU tasks constrain the type).
    """
    if n_jobs < 0:
        raise SchedulingInputError("n_jobs", "must be non-negative")
    m = dict(ALIBABA_DEFAULT_MIX if mix is None else mix)
    rng = np.random.default_rng(seed)
    whole: dict[int, float] = {int(k): float(v) for k, v in dict(m["whole"]).items()}
    kinds = [0, -1, *whole.keys()]  # 0 CPU-only, -1 shared, k whole cards
    probs = np.array([float(m["cpu_only"]), float(m["shared"]), *whole.values()], float)
    if gang_gpus > 0:
        kinds.append(gang_gpus)
        probs = np.append(probs, 0.02)
    probs = probs / probs.sum()
    kind = np.asarray(kinds, np.int64)[rng.choice(len(kinds), size=n_jobs, p=probs)]
    num_gpu = np.where(kind == -1, 1, kind)
    shared_vals = np.asarray(m["shared_milli"], np.int64)
    gpu_milli = np.where(
        kind == -1, shared_vals[rng.integers(0, len(shared_vals), n_jobs)],
        np.where(kind == 0, 0, 1000))
    cores = np.asarray(m["cpu_cores"], np.int64)[rng.integers(0, len(m["cpu_cores"]), n_jobs)]
    cpu_milli = cores * 1000 * np.maximum(num_gpu, 1)
    memory_mib = cpu_milli // 1000 * int(m["memory_mib_per_core"])
    arrival = np.cumsum(rng.exponential(mean_interarrival_s, n_jobs))
    sigma = 1.5
    mu = np.log(mean_duration_s) - sigma**2 / 2
    duration = rng.lognormal(mu, sigma, n_jobs)
    models = [""] * n_jobs
    if gpu_models:
        pin = (rng.random(n_jobs) < 1 / 3) & (num_gpu > 0)
        which = rng.integers(0, len(gpu_models), n_jobs)
        models = [gpu_models[int(which[i])] if pin[i] else "" for i in range(n_jobs)]
    tenant_idx = rng.integers(0, max(1, tenants), n_jobs)
    return Workload(
        name=[f"job-{i:06d}" for i in range(n_jobs)],
        tenant=[f"tenant-{t}" for t in tenant_idx],
        arrival_s=arrival, duration_s=duration, num_gpu=num_gpu, gpu_milli=gpu_milli,
        cpu_milli=cpu_milli, memory_mib=memory_mib, gpu_model=models,
        priority=np.zeros(n_jobs, np.int64), gang=num_gpu > 0,
    )
