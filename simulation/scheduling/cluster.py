"""The cluster a scheduler sees: nodes with cards, in columns (numpy arrays).

One row per node (a server): its healthy GPUs, GPU model, CPU (milli-cores),
memory (MiB), where it sits (server, rack, supernode ids, for topology-aware
placement) and how many tenants SR-IOV lets it hold (``vf_limit``: each task on
a node gets one virtual function of its NIC/GPU; the seeds' figure is 32 per
machine). ``failed`` is a (nodes × max GPUs) mask: a failed card takes nothing.

Columns rather than a list of node objects so that a policy scores every node
at once (numpy) instead of looping over them in Python.

Example:
    >>> nodes = Nodes.from_records([{"name": "a", "gpus": 8, "gpu_model": "H100"},
    ...                             {"name": "b", "gpus": 4, "failed_gpus": [1]}])
    >>> nodes.healthy_gpus().tolist(), nodes.total_gpus
    ([8, 3], 11)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from .errors import SchedulingInputError

__all__ = ["DEFAULT_VF_LIMIT", "OPENB_NODE_MIX", "Nodes", "openb_like_nodes"]

I64 = npt.NDArray[np.int64]
BoolA = npt.NDArray[np.bool_]

DEFAULT_VF_LIMIT = 32
"""Tenants per machine via SR-IOV virtual functions (the seeds: "up to 32 tasks per machine")."""

_DEFAULT_CPU = 128_000
_DEFAULT_MEM = 1 << 20


def _int(rec: Mapping[str, Any], key: str, path: str, default: int | None, lo: int = 0) -> int:
    value = rec.get(key, default)
    if value is None:
        raise SchedulingInputError(f"{path}.{key}", "is required")
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise SchedulingInputError(f"{path}.{key}", f"must be an integer, not {value!r}")
    if int(value) < lo:
        raise SchedulingInputError(f"{path}.{key}", f"must be at least {lo}")
    return int(value)


@dataclass(eq=False)
class Nodes:
    """Columnar cluster. Arrays have one entry per node; ``failed`` is nodes × ``max_gpus``.

    Attributes:
        names: node names (serial numbers in a trace, card-holder names in the twin).
        gpus: GPU slots per node (healthy or not).
        gpu_model: index into ``models`` per node ("" = no GPU / unknown).
        models: the model names.
        cpu_milli, memory_mib: allocatable CPU and memory.
        server, rack, supernode: location ids (a node is one server; servers of a
            rack / supernode share the id; ordering of ids within a supernode is the
            compact order — consecutive servers form a compact sub-block).
        vf_limit: tenants per node (SR-IOV virtual functions).
        failed: True where a card is failed (never allocated).
    """

    names: list[str]
    gpus: I64
    gpu_model: I64
    models: list[str]
    cpu_milli: I64
    memory_mib: I64
    server: I64
    rack: I64
    supernode: I64
    vf_limit: I64
    failed: BoolA = field(default_factory=lambda: np.zeros((0, 0), bool))

    def __post_init__(self) -> None:
        n = len(self.names)
        for name in ("gpus", "gpu_model", "cpu_milli", "memory_mib", "server", "rack",
                     "supernode", "vf_limit"):
            arr = np.asarray(getattr(self, name), dtype=np.int64)
            if arr.shape != (n,):
                raise SchedulingInputError(name, f"needs {n} entries, has {arr.shape}")
            setattr(self, name, arr)
        g = int(self.gpus.max()) if n else 0
        if self.failed.shape != (n, g):
            failed = np.zeros((n, g), bool)
            if self.failed.size:
                rows = min(n, self.failed.shape[0])
                cols = min(g, self.failed.shape[1]) if self.failed.ndim == 2 else 0
                failed[:rows, :cols] = self.failed[:rows, :cols]
            self.failed = failed

    # ------------------------------------------------------------------ sizes
    def __len__(self) -> int:
        return len(self.names)

    @property
    def max_gpus(self) -> int:
        """The widest node's GPU slots."""
        return int(self.failed.shape[1])

    def slot_exists(self) -> BoolA:
        """nodes × max_gpus: True where the node has that GPU slot."""
        return np.arange(self.max_gpus)[None, :] < self.gpus[:, None]

    def healthy(self) -> BoolA:
        """nodes × max_gpus: a card that exists and has not failed."""
        return self.slot_exists() & ~self.failed

    def healthy_gpus(self) -> I64:
        """Healthy cards per node."""
        result: I64 = self.healthy().sum(axis=1).astype(np.int64)
        return result

    @property
    def total_gpus(self) -> int:
        """Healthy cards in the cluster: the denominator of the allocation rate."""
        return int(self.healthy().sum())

    # ------------------------------------------------------------ conversions
    @classmethod
    def from_records(cls, records: Sequence[Mapping[str, Any]]) -> Nodes:
        """Nodes from dicts: ``name, gpus, gpu_model, cpu_milli, memory_mib, server, rack,
        supernode, vf_limit, failed_gpus`` (GPU indices); every key but ``gpus`` optional.

        Missing CPU/memory mean "plenty" (128 cores, 1 TiB): the twin's cluster model
        does not track them. ``server`` defaults to the row index, ``rack`` and
        ``supernode`` to 0. Raises :class:`SchedulingInputError` naming ``nodes[i].key``.
        """
        if not isinstance(records, Sequence) or isinstance(records, str | bytes):
            raise SchedulingInputError("nodes", "must be a list of node records")
        models: dict[str, int] = {}
        cols: dict[str, list[int]] = {k: [] for k in (
            "gpus", "gpu_model", "cpu_milli", "memory_mib", "server", "rack", "supernode",
            "vf_limit")}
        names: list[str] = []
        failed_lists: list[list[int]] = []
        for i, rec in enumerate(records):
            path = f"nodes[{i}]"
            if not isinstance(rec, Mapping):
                raise SchedulingInputError(path, "must be an object")
            names.append(str(rec.get("name", f"node-{i}")))
            gpus = _int(rec, "gpus", path, None)
            cols["gpus"].append(gpus)
            model = rec.get("gpu_model", "") or ""
            if not isinstance(model, str):
                raise SchedulingInputError(f"{path}.gpu_model", "must be a string")
            cols["gpu_model"].append(models.setdefault(model, len(models)))
            cols["cpu_milli"].append(_int(rec, "cpu_milli", path, _DEFAULT_CPU))
            cols["memory_mib"].append(_int(rec, "memory_mib", path, _DEFAULT_MEM))
            cols["server"].append(_int(rec, "server", path, i))
            cols["rack"].append(_int(rec, "rack", path, 0))
            cols["supernode"].append(_int(rec, "supernode", path, 0))
            cols["vf_limit"].append(_int(rec, "vf_limit", path, DEFAULT_VF_LIMIT, lo=1))
            bad = rec.get("failed_gpus", []) or []
            if not isinstance(bad, Sequence) or any(
                isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < gpus for x in bad
            ):
                raise SchedulingInputError(
                    f"{path}.failed_gpus", f"must be a list of GPU indices in [0, {gpus})")
            failed_lists.append([int(x) for x in bad])
        n = len(names)
        g = max(cols["gpus"], default=0)
        failed = np.zeros((n, g), bool)
        for i, bad_idx in enumerate(failed_lists):
            failed[i, bad_idx] = True
        model_names = [""] * len(models)
        for name, idx in models.items():
            model_names[idx] = name
        return cls(
            names=names,
            models=model_names,
            failed=failed,
            **{k: np.asarray(v, dtype=np.int64) for k, v in cols.items()},
        )

    def to_records(self) -> list[dict[str, Any]]:
        """The inverse of :meth:`from_records`."""
        out = []
        for i, name in enumerate(self.names):
            out.append({
                "name": name,
                "gpus": int(self.gpus[i]),
                "gpu_model": self.models[int(self.gpu_model[i])] if self.models else "",
                "cpu_milli": int(self.cpu_milli[i]),
                "memory_mib": int(self.memory_mib[i]),
                "server": int(self.server[i]),
                "rack": int(self.rack[i]),
                "supernode": int(self.supernode[i]),
                "vf_limit": int(self.vf_limit[i]),
                "failed_gpus": [int(x) for x in np.flatnonzero(self.failed[i])],
            })
        return out

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON summary and records: ``{"count", "gpus", "models", "nodes": [...]}``."""
        return {
            "count": len(self),
            "gpus": self.total_gpus,
            "models": sorted({m for m in self.models if m}),
            "nodes": self.to_records(),
        }

    @classmethod
    def uniform(
        cls,
        count: int,
        gpus: int = 8,
        *,
        gpu_model: str = "",
        cpu_milli: int = _DEFAULT_CPU,
        memory_mib: int = _DEFAULT_MEM,
        servers_per_rack: int = 4,
        servers_per_supernode: int = 64,
        vf_limit: int = DEFAULT_VF_LIMIT,
    ) -> Nodes:
        """``count`` identical servers, numbered in racks and supernodes (no Python loop).

        The default shape is the seeds' supernode: 64 servers × 8 cards = 512 cards.
        """
        if count < 0 or gpus < 0:
            raise SchedulingInputError("count", "must be non-negative")
        idx = np.arange(count, dtype=np.int64)
        return cls(
            names=[f"node-{i}" for i in range(count)],
            gpus=np.full(count, gpus, np.int64),
            gpu_model=np.zeros(count, np.int64),
            models=[gpu_model],
            cpu_milli=np.full(count, cpu_milli, np.int64),
            memory_mib=np.full(count, memory_mib, np.int64),
            server=idx,
            rack=idx // max(1, servers_per_rack),
            supernode=idx // max(1, servers_per_supernode),
            vf_limit=np.full(count, vf_limit, np.int64),
        )


OPENB_NODE_MIX: tuple[tuple[str, int, int, int, float], ...] = (
    # (model, gpus, cpu_milli, memory_mib, share of nodes) — the node shapes of the
    # Alibaba GPU trace v2023 node list (openb_node_list_gpu_node.csv, 1,213 GPU
    # nodes); shares rounded from its rows
    ("G2", 8, 96_000, 393_216, 0.50),
    ("T4", 2, 104_000, 524_288, 0.25),
    ("P100", 2, 64_000, 262_144, 0.11),
    ("V100M16", 4, 32_000, 131_072, 0.05),
    ("G3", 8, 128_000, 786_432, 0.05),
    ("V100M32", 8, 96_000, 786_432, 0.04),
)
"""Node shapes for :func:`openb_like_nodes`."""


def openb_like_nodes(count: int = 1213, seed: int = 0) -> Nodes:
    """A heterogeneous cluster shaped like the Alibaba trace's GPU nodes (:data:`OPENB_NODE_MIX`),
    in shuffled order (seeded), one rack per 4 servers."""
    rng = np.random.default_rng(seed)
    shares = np.array([m[4] for m in OPENB_NODE_MIX])
    kind = rng.choice(len(OPENB_NODE_MIX), size=count, p=shares / shares.sum())
    return Nodes.from_records([
        {"name": f"node-{i:04d}", "gpu_model": OPENB_NODE_MIX[k][0], "gpus": OPENB_NODE_MIX[k][1],
         "cpu_milli": OPENB_NODE_MIX[k][2], "memory_mib": OPENB_NODE_MIX[k][3], "rack": i // 4}
        for i, k in enumerate(kind.tolist())])
