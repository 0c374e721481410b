"""Collective cost on a topology: time vs size, algbw/busbw, best algorithm.

Operations: ``allreduce``, ``reduce_scatter``, ``allgather``, ``alltoall``,
``broadcast``. Algorithms (each a schedule of steps priced on a
:class:`~simulation.collectives.fabric.Level`; with uniform, contention-free
links every one reduces to its closed form in
:mod:`~simulation.collectives.costs`):

``ring``
    NCCL's rings: C directed rings (channels) run at once, each carrying
    S/C — every order of the level both ways: a Hamiltonian order on a torus,
    one order per NIC rail across servers (NCCL's one channel per rail), the
    rank order otherwise. With every flow of every channel routed at once,
    the card's injection limit and the links decide what each gets.
    AllToAll is pairwise exchange, priced with the all-pairs (uniform) load.
``tree``
    NCCL's double binary tree, pipelined (AllReduce only, as in NCCL).
``nvls``
    in-switch reduction (NVLink SHARP, NCCL's NVLS; AllReduce inside one
    switch domain that declares it): each card sends its buffer once to the
    switch, which reduces, and receives the result once — S(1 + 1/p) per
    card and direction instead of the ring's 2(p−1)/p·S, at the NVLS
    transfer efficiency. Over several such domains (NVL72 racks: the
    supernode level is one domain) each card's reduced S/p₀ slice crosses
    the network in the same pipeline: reduced in flight by the switches
    when the network declares it (InfiniBand SHARP: NCCL's NVLS with
    CollNet), else along a double binary tree of NICs (NCCL's NVLSTree) —
    ``costs.nvls_across_allreduce``.
``rhd``
    recursive halving/doubling: Rabenseifner AllReduce, recursive-halving
    ReduceScatter, recursive-doubling AllGather, scatter+allgather
    Broadcast, Bruck AllToAll.
``torus``
    dimension-by-dimension bidirectional rings (needs a torus level whose
    ranks fill it); AllToAll as direct grouped sends: p−1 message overheads,
    one worst-path latency and the Dally–Towles channel load.
``hierarchical``
    inside each supernode, then across (two-level fabrics only): AllReduce
    = ReduceScatter inside + AllReduce across on S/p₀ + AllGather inside;
    each part uses the best single-level algorithm for its size.

Sizes follow nccl-tests (``doc/PERFORMANCE.md``); ``algbw = S/t`` and
``busbw = algbw × factor`` with factor 2(n−1)/n (AllReduce), (n−1)/n
(ReduceScatter, AllGather, AllToAll), 1 (Broadcast). Bandwidths are
reported in Gb/s (bits, like every link speed here) and GB/s (bytes, like
nccl-tests).

Every bandwidth is the link's or card's line rate × the protocol efficiency
of its fabric (:mod:`~simulation.collectives.efficiency`), reported in the
result and overridable (``scale_up_efficiency``, ``scale_out_efficiency``).

Gradient compression (ratio r ≥ 1, e.g. 4 for the seeds' 4:1) divides the
bytes on the wire by r; algbw/busbw stay computed on the uncompressed size
S, so they read as effective bandwidth. Compression/decompression time is
not modelled.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from simulation.topology.graph import Topology, TopologyError

from .costs import busbw_factor, nvls_across_allreduce, pipelined, torus_alltoall_load
from .fabric import CommFabric, fabric_from_topology
from .levels import FlatLevel, Level
from .routed import RoutedLevel

__all__ = [
    "ALGORITHMS",
    "OPS",
    "CollectivePoint",
    "CollectiveResult",
    "CollectiveSpec",
    "DEFAULT_SIZES",
    "algorithm_time",
    "collective_curve",
    "supported",
]

OPS = ("allreduce", "reduce_scatter", "allgather", "alltoall", "broadcast")
ALGORITHMS = ("ring", "tree", "rhd", "torus", "hierarchical", "nvls")
DEFAULT_SIZES = tuple(1 << e for e in range(10, 31, 2))  # 1 KiB … 1 GiB
MAX_SIZE = 1 << 50


def _Bps(gbps: float) -> float:
    return gbps * 1e9 / 8.0


# ------------------------------------------------------------------ input
@dataclass(frozen=True)
class CollectiveSpec:
    """What to price: an operation, an algorithm (or ``auto``), ranks, sizes.

    ``ranks`` None = every card; ``overhead_ns`` is a software cost per
    message added to every step's α (0: the hardware path only);
    ``reduce_gbps`` the reduction throughput (None: free, γ = 0);
    ``scale_up_efficiency`` / ``scale_out_efficiency`` override the protocol
    efficiency of the scale-up fabric / the network (None: the default of
    their declared technology).
    """

    op: str
    algorithm: str = "auto"
    ranks: int | None = None
    sizes: tuple[int, ...] = DEFAULT_SIZES
    compression: float = 1.0
    overhead_ns: float = 0.0
    reduce_gbps: float | None = None
    scale_up_efficiency: float | None = None
    scale_out_efficiency: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        out = asdict(self)
        out["sizes"] = list(self.sizes)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str = "") -> CollectiveSpec:
        """Validate; errors name the field (``op``, ``sizes[2]``, ``ranks``…)."""
        if not isinstance(data, Mapping):
            raise TopologyError(path or "params", "must be an object")
        allowed = {
            "op",
            "algorithm",
            "ranks",
            "sizes",
            "compression",
            "overhead_ns",
            "reduce_gbps",
            "scale_up_efficiency",
            "scale_out_efficiency",
        }
        for key in data:
            if key not in allowed:
                raise TopologyError(
                    f"{path}{key}", f"unknown field (allowed: {', '.join(sorted(allowed))})"
                )
        op = data.get("op")
        if op not in OPS:
            raise TopologyError(
                f"{path}op", f"unknown collective {op!r} (choose from {', '.join(OPS)})"
            )
        algorithm = data.get("algorithm", "auto")
        if algorithm != "auto" and algorithm not in ALGORITHMS:
            raise TopologyError(
                f"{path}algorithm",
                f"unknown algorithm {algorithm!r} (choose auto or {', '.join(ALGORITHMS)})",
            )
        ranks = data.get("ranks")
        if ranks is not None and (
            isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 2
        ):
            raise TopologyError(f"{path}ranks", f"an integer ≥ 2, got {ranks!r}")
        raw_sizes = data.get("sizes", list(DEFAULT_SIZES))
        if not isinstance(raw_sizes, list | tuple) or not raw_sizes:
            raise TopologyError(f"{path}sizes", "a non-empty list of sizes in bytes")
        sizes = []
        for i, s in enumerate(raw_sizes):
            if isinstance(s, bool) or not isinstance(s, int):
                raise TopologyError(f"{path}sizes[{i}]", f"an integer number of bytes, got {s!r}")
            if s <= 0:
                raise TopologyError(f"{path}sizes[{i}]", f"must be > 0 bytes, got {s}")
            if s > MAX_SIZE:
                raise TopologyError(f"{path}sizes[{i}]", f"at most {MAX_SIZE} bytes")
            sizes.append(s)
        compression = _number(data, "compression", path, 1.0)
        if compression < 1.0:
            raise TopologyError(
                f"{path}compression", f"a ratio ≥ 1 (4 means 4:1), got {compression}"
            )
        overhead = _number(data, "overhead_ns", path, 0.0)
        if overhead < 0:
            raise TopologyError(f"{path}overhead_ns", "must be ≥ 0")
        reduce = data.get("reduce_gbps")
        if reduce is not None:
            reduce = _number(data, "reduce_gbps", path, 0.0)
            if reduce <= 0:
                raise TopologyError(f"{path}reduce_gbps", "must be > 0 (or null for free)")
        effs: list[float | None] = []
        for key in ("scale_up_efficiency", "scale_out_efficiency"):
            value = None if data.get(key) is None else _number(data, key, path, 1.0)
            if value is not None and not 0.0 < value <= 1.0:
                raise TopologyError(
                    f"{path}{key}", f"a fraction of line rate in (0, 1], got {value}"
                )
            effs.append(value)
        return cls(op, algorithm, ranks, tuple(sizes), compression, overhead, reduce, *effs)


def _number(data: Mapping[str, Any], key: str, path: str, default: float) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TopologyError(f"{path}{key}", f"must be a finite number, got {value!r}")
    return float(value)


# ------------------------------------------------------------------ output
@dataclass(frozen=True)
class CollectivePoint:
    """One (size, algorithm) result."""

    size_bytes: int
    algorithm: str
    time_s: float
    algbw_gbps: float
    busbw_gbps: float
    algbw_GBps: float
    busbw_GBps: float


@dataclass(frozen=True)
class CollectiveResult:
    """Curves of every supported algorithm and the best one per size."""

    op: str
    ranks: int
    compression: float
    levels: list[dict[str, Any]]
    points: list[CollectivePoint]
    best: list[CollectivePoint]
    unsupported: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    efficiency: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)

    def curve(self, algorithm: str) -> list[CollectivePoint]:
        """The points of one algorithm, by size."""
        return [p for p in self.points if p.algorithm == algorithm]


# ------------------------------------------------------- single-level times
def _pow2_floor(p: int) -> int:
    return 1 << (p.bit_length() - 1)


def _ring(level: Level, op: str, s: float, gamma: float) -> float:
    p = level.ranks
    if op == "alltoall":
        u = level.cost("uniform")
        return (p - 1) * u.alpha_s + s * (p - 1) / p / _Bps(u.gbps)
    c = level.cost("ring")  # one flow of every channel, all at once
    ch = level.ring_channels
    step = c.alpha_s + s / (ch * p) / _Bps(c.gbps)  # C rings, S/C each
    red = (p - 1) / p * s * gamma
    if op in ("reduce_scatter", "allgather"):
        return (p - 1) * step + (red if op == "reduce_scatter" else 0.0)
    if op == "allreduce":
        return 2 * (p - 1) * step + red
    # broadcast: each channel's share streams down a chain of p−1 links
    return pipelined(p - 1, c.alpha_s, s / ch / _Bps(c.gbps))


def _rhd(level: Level, op: str, s: float, gamma: float) -> float:
    """Recursive halving/doubling, step by step (see costs.rhd_* for the formulas)."""
    p = level.ranks
    if op == "alltoall":  # Bruck: ⌈lg p⌉ shifts by 2^j, half the buffer each
        t, d = 0.0, 1
        while d < p:
            t += level.cost("shift", d).time(s / 2)
            d <<= 1
        return t
    q = _pow2_floor(p)
    if q == p:
        # partner at distance d exchanges S·d/p bytes (halving: S/2 at p/2 …)
        gather = sum(
            level.cost("xor", 1 << j).time(s * (1 << j) / p) for j in range(p.bit_length() - 1)
        )
    else:
        # Bruck: shift by 2^j carries min(2^j, p − 2^j) blocks of S/p
        gather, d = 0.0, 1
        while d < p:
            gather += level.cost("shift", d).time(min(d, p - d) * s / p)
            d <<= 1
    if op == "allgather":
        return gather
    if op == "broadcast":  # binomial scatter mirrors the gather
        return 2 * gather
    halving = sum(
        level.cost("xor", 1 << j).time(s * (1 << j) / q) for j in range(q.bit_length() - 1)
    )
    red = (q - 1) / q * s * gamma
    if q == p:
        return halving + red if op == "reduce_scatter" else 2 * halving + red
    nb = level.cost("pair", p - q)  # the fold: p − q pairs of neighbours
    if op == "reduce_scatter":
        return nb.time(s) + s * gamma + halving + red + nb.time(s / p)
    # allreduce: Rabenseifner = halving + doubling, plus TRG's fold
    return 2 * halving + red + 2 * nb.time(s / 2) + s * gamma / 2 + nb.time(s)


def _tree(level: Level, op: str, s: float, gamma: float) -> float:
    """Double binary tree AllReduce: both trees' up and down edges at once,
    each tree carrying half the data (``costs.tree_allreduce``)."""
    depth = level.tree_depth()
    c = level.cost("tree")
    return pipelined(2 * depth, c.alpha_s, s / 2 / _Bps(c.gbps) + s * gamma)


def _nvls(level: Level, op: str, s: float, gamma: float) -> float:
    """NVLS AllReduce (``costs.nvls_allreduce``): S(1 + 1/p) per card and
    direction at the card's scale-up rate × the NVLS transfer efficiency,
    the reduce-scatter (multimem.ld_reduce) and all-gather (multimem.st)
    halves pipelined; the switch reduces, so γ does not apply."""
    assert isinstance(level, RoutedLevel)
    p = level.ranks
    rate = level.card_scale_up_gbps() * level.nvls_efficiency
    alpha = level.cost("ring").alpha_s
    return pipelined(2, alpha, s * (1 + 1 / p) / _Bps(rate))


def _torus(level: Level, op: str, s: float, gamma: float) -> float:
    assert level.dims is not None
    dims = level.dims
    if op == "alltoall":
        # direct (grouped) sends: p−1 message overheads, one worst-path
        # latency, and the busiest channel's bytes (Dally & Towles load)
        nb = min((level.cost("dim", i) for i in range(len(dims))), key=lambda c: c.gbps)
        p = level.ranks
        latency = level.cost("uniform").alpha_s - level.overhead_s
        return (p - 1) * level.overhead_s + latency + s * torus_alltoall_load(dims) / _Bps(nb.gbps)
    rs = 0.0
    red = 0.0
    part = s
    for i, k in enumerate(dims):
        c = level.cost("dim", i)
        split = 2.0 if k > 2 else 1.0
        rs += (k - 1) * c.time(part / (split * k))
        red += (k - 1) / k * part * gamma
        part /= k
    if op == "reduce_scatter":
        return rs + red
    if op == "allgather":
        return rs
    if op == "allreduce":
        return 2 * rs + red
    return 2 * rs  # broadcast: scatter + allgather


def supported(level: Level, op: str, algorithm: str, levels: int = 1) -> str | None:
    """None if ``algorithm`` can run ``op`` on this fabric, else the reason."""
    if algorithm == "hierarchical":
        return None if levels == 2 else "needs ranks in more than one supernode"
    if algorithm == "tree" and op != "allreduce":
        return "the double binary tree only does AllReduce (as in NCCL)"
    if algorithm == "nvls":
        if op != "allreduce":
            return "in-switch reduction (NVLS) is modelled for AllReduce only"
        inner = level.inner if isinstance(level, FlatLevel) else level
        if levels > 2 or inner.nvls_ranks != inner.ranks or not isinstance(inner, RoutedLevel):
            return ("needs every rank in switch domains that reduce in flight (NVLink SHARP), "
                    "each domain one supernode")
    if algorithm == "torus":
        if not level.dims:
            return "the fabric is not a torus"
        if math.prod(level.dims) != level.ranks:
            return f"ranks ({level.ranks}) do not fill the {'×'.join(map(str, level.dims))} torus"
    return None


_SINGLE = {"ring": _ring, "rhd": _rhd, "tree": _tree, "torus": _torus, "nvls": _nvls}


def _best_single(level: Level, op: str, s: float, gamma: float) -> float:
    times = [
        fn(level, op, s, gamma)
        for name, fn in _SINGLE.items()
        if supported(level, op, name) is None
    ]
    return min(times)


def algorithm_time(
    fabric: CommFabric, op: str, algorithm: str, size: float, gamma: float = 0.0
) -> float:
    """Seconds for one collective of ``size`` bytes (already on the wire)."""
    if algorithm == "hierarchical":
        inner, outer = fabric.levels
        p0 = inner.ranks
        if op == "allreduce":
            return (
                _best_single(inner, "reduce_scatter", size, gamma)
                + _best_single(outer, "allreduce", size / p0, gamma)
                + _best_single(inner, "allgather", size, gamma)
            )
        if op == "reduce_scatter":
            return _best_single(inner, op, size, gamma) + _best_single(outer, op, size / p0, gamma)
        if op == "allgather":
            return _best_single(outer, op, size / p0, gamma) + _best_single(inner, op, size, gamma)
        # broadcast: across the root's peers, then inside; alltoall: two phases
        return _best_single(outer, op, size, gamma) + _best_single(inner, op, size, gamma)
    if algorithm == "nvls" and len(fabric.levels) == 2:
        return _nvls_across(fabric, size)
    level = fabric.flat()
    return _SINGLE[algorithm](level, op, size, gamma)


def _nvls_across(fabric: CommFabric, s: float) -> float:
    """NVLS AllReduce over several NVLS domains (``costs.nvls_across_allreduce``):
    inside at the card's NVLS rate, across at the card's share of the network
    (every card of a domain sends its slice at once), reduced in flight when
    the network's switches do (SHARP), else along a tree; the switches reduce,
    so γ does not apply."""
    inner, outer = fabric.levels
    assert isinstance(inner, RoutedLevel)
    rate_in = inner.card_scale_up_gbps() * inner.nvls_efficiency
    alpha = max(inner.cost("ring").alpha_s, outer.cost("uniform").alpha_s)
    return nvls_across_allreduce(
        inner.ranks,
        outer.ranks,
        s,
        alpha,
        1 / _Bps(rate_in),
        1 / _Bps(outer.cost("uniform").gbps),
        in_network=outer.in_network_reduction,
    )


def collective_curve(
    topo: Topology | CommFabric, spec: CollectiveSpec | Mapping[str, Any]
) -> CollectiveResult:
    """Time, algbw and busbw per size for every applicable algorithm.

    ``spec`` may be a :class:`CollectiveSpec` or its dict form. With
    ``algorithm="auto"`` every supported algorithm is priced and ``best``
    holds the fastest per size; otherwise only the one asked for (an
    unsupported choice raises a per-field error).
    """
    if not isinstance(spec, CollectiveSpec):
        spec = CollectiveSpec.from_dict(spec)
    fabric = (
        topo
        if isinstance(topo, CommFabric)
        else fabric_from_topology(
            topo,
            spec.ranks,
            overhead_ns=spec.overhead_ns,
            scale_up_efficiency=spec.scale_up_efficiency,
            scale_out_efficiency=spec.scale_out_efficiency,
        )
    )
    p = fabric.ranks
    flat = fabric.flat()
    gamma = 0.0 if spec.reduce_gbps is None else 1.0 / _Bps(spec.reduce_gbps)
    names = ALGORITHMS if spec.algorithm == "auto" else (spec.algorithm,)
    unsupported: dict[str, str] = {}
    chosen = []
    for name in names:
        reason = supported(flat, spec.op, name, len(fabric.levels))
        if reason is None:
            chosen.append(name)
        else:
            unsupported[name] = reason
    if not chosen:
        raise TopologyError("algorithm", f"{spec.algorithm}: {unsupported[spec.algorithm]}")
    factor = busbw_factor(spec.op, p)
    points: list[CollectivePoint] = []
    best: list[CollectivePoint] = []
    for size in spec.sizes:
        wire = size / spec.compression
        row = []
        for name in chosen:
            t = algorithm_time(fabric, spec.op, name, wire, gamma)
            alg = size / t if t > 0 else math.inf
            row.append(
                CollectivePoint(
                    size_bytes=int(size),
                    algorithm=name,
                    time_s=t,
                    algbw_gbps=alg * 8 / 1e9,
                    busbw_gbps=alg * factor * 8 / 1e9,
                    algbw_GBps=alg / 1e9,
                    busbw_GBps=alg * factor / 1e9,
                )
            )
        points.extend(row)
        best.append(min(row, key=lambda pt: pt.time_s))
    return CollectiveResult(
        op=spec.op,
        ranks=p,
        compression=spec.compression,
        levels=fabric.describe(),
        points=points,
        best=best,
        unsupported=unsupported,
        notes=list(fabric.notes),
        efficiency=fabric.efficiency.describe() if fabric.efficiency else {},
    )
