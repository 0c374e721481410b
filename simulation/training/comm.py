"""Collective times for training groups, priced by the wave-1 collective model.

Where each group lands (ranks ordered tp, dp, pp; see
:mod:`simulation.training.execution`):

* **TP** (and SP) groups of tp ≤ scale-up domain consecutive cards: inside one
  scale-up domain — an 8-card NVLink server (a full mesh of per-card-limited
  links, the switch's non-blocking equivalent, as the twin models a DGX) or a
  torus supernode (ranks on the first cards of the torus, routed);
* **DP / EP** groups stride tp cards: ``k = min(size, domain / tp)`` members
  share a scale-up domain and ``n = size / k`` domains are crossed over the
  scale-out network (one NIC per card, rail-aligned: card r of every server on
  rail r, so a one-per-server group is a rail). k = 1: one uniform level across
  (α = ``scale_out_latency_us``, per-card NIC rate × protocol efficiency); k > 1
  and n > 1: the two-level fabric, priced with the best of the flat and
  hierarchical algorithms;
* **PP** point-to-point sends cross the network when a stage spans a domain
  (tp·dp ≥ domain), else the scale-up fabric.

Speed: each distinct (op, k, n) is priced **once per search** with
:func:`simulation.collectives.models.algorithm_time` (best supported algorithm)
on a grid of sizes 2^10, 2^12 … 2^42 bytes, and configurations read it by linear
interpolation in log-size/log-time (vectorised; exact at grid points, and the
α–β curves are smooth between them). Protocol efficiencies are the collective
model's (:mod:`simulation.collectives.efficiency`).

>>> from simulation.training.system import SystemSpec
>>> s = SystemSpec("x", {"bf16": 312.0}, 80, 2.0, 400, 50, 64, scale_up_gbps=2400.0)
>>> c = CommModel(s)
>>> t = c.time("allreduce", np.array([8]), np.array([1]), np.array([2.0**30]))
>>> round(float(t[0]) * 1e3, 2)    # 1 GiB AllReduce on 8 NVLink-3 cards (ms)
7.46
>>> round(2 * 7 / 8 * 2**30 / float(t[0]) / 1e9)   # busbw GB/s, as docs/simulation.md
252
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from simulation.collectives.efficiency import PROTOCOL_EFFICIENCY
from simulation.collectives.fabric import CommFabric, fabric_from_topology
from simulation.collectives.levels import Level, UniformLevel
from simulation.collectives.models import algorithm_time, supported
from simulation.topology.builders import full_mesh, torus
from simulation.topology.graph import Topology

from .system import SystemSpec

__all__ = ["CommModel", "SIZE_GRID_LOG2"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
SIZE_GRID_LOG2 = np.arange(10, 43, 2, dtype=np.float64)
_SINGLE = ("ring", "tree", "torus", "nvls")
"""NCCL's algorithms (recursive halving/doubling is MPI's, not used by NCCL)."""


class CommModel:
    """Per-system collective tables: ``time(op, k, n, bytes)`` vectorised.

    ``k`` ranks per scale-up domain, ``n`` domains; ``bytes`` in nccl-tests
    convention (the buffer for AllReduce, the total for ReduceScatter and
    AllGather, the per-rank send buffer for AllToAll).
    """

    def __init__(self, system: SystemSpec) -> None:
        self.system = system
        self._rows: dict[tuple[str, int, int], int] = {}
        self._table: list[F64] = []
        self._up_topo: Topology | None = None
        self._levels: dict[tuple[str, int], Level] = {}
        self.out_eff = PROTOCOL_EFFICIENCY.get(system.scale_out_technology, 1.0)

    # ------------------------------------------------------------- levels
    def _scale_up(self) -> Topology:
        if self._up_topo is None:
            s = self.system
            if s.scale_up_topology == "torus":
                per_link = s.scale_up_gbps / (2 * len(s.scale_up_dims))
                topo = torus(list(s.scale_up_dims), link_gbps=per_link, link_ns=5.0,
                             switch_ns=10.0)
            else:
                topo = full_mesh(max(2, s.scale_up_domain), link_gbps=s.scale_up_gbps,
                                 link_ns=s.scale_up_latency_us * 1e3, switch_ns=0.0)
            topo = topo.with_card_limits(s.scale_up_gbps)
            topo.params["scale_up_technology"] = s.scale_up_technology
            self._up_topo = topo
        return self._up_topo

    def _inner(self, k: int) -> Level:
        key = ("up", k)
        if key not in self._levels:
            fab = fabric_from_topology(self._scale_up(), k)
            self._levels[key] = fab.levels[0]
        return self._levels[key]

    def _outer(self, n: int) -> UniformLevel:
        s = self.system
        gbps = s.scale_out_gbps * self.out_eff
        return UniformLevel("scale-out", n, s.scale_out_latency_us * 1e-6, gbps,
                            single_gbps=gbps, note="rail-aligned, one NIC per card")

    def fabric(self, k: int, n: int) -> CommFabric:
        """The collective model's fabric for k ranks per domain × n domains."""
        if n <= 1:
            return CommFabric([self._inner(k)])
        if k <= 1:
            return CommFabric([self._outer(n)])
        return CommFabric([self._inner(k), self._outer(n)])

    # -------------------------------------------------------------- tables
    def _curve(self, op: str, k: int, n: int) -> F64:
        fab = self.fabric(k, n)
        flat = fab.flat()
        algos = [a for a in _SINGLE if supported(flat, op, a, len(fab.levels)) is None]
        if len(fab.levels) == 2:
            algos.append("hierarchical")
        sizes = 2.0**SIZE_GRID_LOG2
        return np.array(
            [min(algorithm_time(fab, op, a, float(sz)) for a in algos) for sz in sizes]
        )

    def row(self, op: str, k: int, n: int) -> int:
        """Index of the table row for (op, k, n), priced on first use."""
        key = (op, int(k), int(n))
        hit = self._rows.get(key)
        if hit is None:
            if k * n <= 1:
                curve = np.zeros(SIZE_GRID_LOG2.size)
            else:
                curve = self._curve(op, int(k), int(n))
            hit = len(self._table)
            self._table.append(np.log(np.maximum(curve, 1e-12)))
            self._rows[key] = hit
        return hit

    def time(self, op: str, k: I64, n: I64, nbytes: F64) -> F64:
        """Seconds per collective, elementwise over the arrays (0 for 1 rank)."""
        k = np.asarray(k, dtype=np.int64)
        n = np.asarray(n, dtype=np.int64)
        nbytes = np.asarray(nbytes, dtype=np.float64)
        keys, inverse = np.unique((k << 32) | n, return_inverse=True)
        rows = np.array([self.row(op, int(c >> 32), int(c & 0xFFFFFFFF)) for c in keys],
                        dtype=np.int64)
        r = rows[inverse.reshape(-1)].reshape(k.shape)
        table = np.asarray(self._table)
        x = np.log2(np.maximum(nbytes, 1.0))
        lo = SIZE_GRID_LOG2[0]
        step = SIZE_GRID_LOG2[1] - lo
        pos = np.clip((x - lo) / step, 0.0, SIZE_GRID_LOG2.size - 1.000001)
        i = pos.astype(np.int64)
        w = pos - i
        logt = table[r, i] * (1 - w) + table[r, i + 1] * w
        # beyond the grid: time grows linearly with size (the β term)
        scale = np.where(x > SIZE_GRID_LOG2[-1], 2.0 ** (x - SIZE_GRID_LOG2[-1]), 1.0)
        out: F64 = np.where((k * n) > 1, np.exp(logt) * scale, 0.0)
        return out

    def p2p(self, across: npt.NDArray[np.bool_], nbytes: F64) -> F64:
        """One stage-to-stage send: α + bytes/bandwidth on the fabric it crosses."""
        s = self.system
        up = self._inner(2).cost("ring")
        out_bps = s.scale_out_gbps * self.out_eff * 1e9 / 8
        t_out = s.scale_out_latency_us * 1e-6 + nbytes / out_bps
        t_up = up.alpha_s + nbytes / (up.gbps * 1e9 / 8)
        res: F64 = np.where(across, t_out, t_up)
        return res


def group_split(size: I64, stride: I64, domain: int | I64) -> tuple[I64, I64]:
    """(k, n): members per scale-up domain and domains crossed, for a group of
    ``size`` ranks ``stride`` cards apart (ranks fill domains in order); ``domain``
    a scalar or one per configuration.

    >>> group_split(np.array([16, 4, 64]), np.array([8, 2, 1]), 8)
    (array([1, 4, 8]), array([16,  1,  8]))
    """
    per = np.maximum(domain // np.maximum(stride, 1), 1)
    k = np.minimum(size, per)
    n = -(-size // k)
    return k.astype(np.int64), n.astype(np.int64)

