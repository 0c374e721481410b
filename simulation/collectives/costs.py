"""Closed-form α–β costs of collective algorithms (uniform links, no contention).

Notation (Hockney's model as used by Thakur, Rabenseifner & Gropp,
"Optimization of Collective Communication Operations in MPICH", IJHPCA
19(1), 2005 — "TRG" below):

* ``p`` ranks; ``size`` S in bytes, in the nccl-tests convention
  (nccl-tests ``doc/PERFORMANCE.md``): the whole buffer for AllReduce and
  Broadcast, the *total* (all ranks') array for ReduceScatter and
  AllGather, the total per-rank send buffer for AllToAll;
* ``alpha`` α: seconds per message (latency); ``beta`` β: seconds per byte
  (1 / per-rank link bandwidth); ``gamma`` γ: seconds per byte reduced.

These are the textbook formulas; :mod:`simulation.collectives.models`
evaluates the same schedules step by step with the α and β each step
actually sees on a topology (path latency, bottleneck link, contention).
The tests check both against hand-worked numbers and against each other on
contention-free fabrics.

For p not a power of two, the recursive halving/doubling formulas add
TRG's fold step (§4.4): the r = p − p′ extra ranks (p′ the largest power of
two ≤ p) first hand half their vector to a partner and then the reduced
half back (2α + Sβ + Sγ/2), and get the result at the end (α + Sβ).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = [
    "busbw_factor",
    "lg",
    "pipelined",
    "rhd_allgather",
    "rhd_allreduce",
    "rhd_alltoall",
    "rhd_broadcast",
    "rhd_reduce_scatter",
    "ring_allgather",
    "ring_allreduce",
    "ring_alltoall",
    "ring_broadcast",
    "ring_reduce_scatter",
    "torus_allgather",
    "torus_allreduce",
    "torus_alltoall",
    "torus_alltoall_load",
    "torus_broadcast",
    "torus_reduce_scatter",
    "nvls_allreduce",
    "nvls_across_allreduce",
    "tree_allreduce",
    "tree_depth",
    "tree_edges_per_rank",
]


def busbw_factor(op: str, p: int) -> float:
    """nccl-tests bus-bandwidth factor: busbw = algbw × factor.

    AllReduce 2(n−1)/n; ReduceScatter, AllGather and AllToAll (n−1)/n;
    Broadcast 1 (nccl-tests ``doc/PERFORMANCE.md``, "Summary").
    """
    if op == "allreduce":
        return 2.0 * (p - 1) / p
    if op in ("reduce_scatter", "allgather", "alltoall"):
        return (p - 1) / p
    if op == "broadcast":
        return 1.0
    raise ValueError(f"unknown collective {op!r}")


def lg(p: int) -> int:
    """⌈log₂ p⌉ (0 for p = 1)."""
    return max(0, math.ceil(math.log2(p))) if p > 1 else 0


def _pow2_floor(p: int) -> int:
    return 1 << (p.bit_length() - 1)


def pipelined(stages: int, alpha: float, work: float) -> float:
    """Time of a pipeline of ``stages`` hops moving ``work`` seconds of data.

    With the message cut into c chunks, T(c) = (stages + c − 1)·(α + work/c)
    (each chunk pays α per stage; the pipeline fills in ``stages`` steps).
    The best real c is √((stages − 1)·work/α) (Johnsson & Ho, "Optimum
    broadcasting and personalized communication in hypercubes", IEEE TC
    38(9), 1989): we take the better of its two integer neighbours (c ≥ 1).
    With α = 0 the limit is ``work``.
    """
    if stages <= 0:
        return 0.0
    if alpha <= 0.0:
        return work
    best_c = math.sqrt(max(stages - 1, 0) * work / alpha)
    cands = {max(1, math.floor(best_c)), max(1, math.ceil(best_c))}
    return min((stages + c - 1) * (alpha + work / c) for c in cands)


# ---------------------------------------------------------------------- ring
def ring_reduce_scatter(
    p: int, size: float, alpha: float, beta: float, gamma: float = 0.0
) -> float:
    """Ring ReduceScatter: (p−1)α + (p−1)/p·Sβ + (p−1)/p·Sγ (TRG §4.3)."""
    f = (p - 1) / p
    return (p - 1) * alpha + f * size * beta + f * size * gamma


def ring_allgather(p: int, size: float, alpha: float, beta: float) -> float:
    """Ring AllGather: (p−1)α + (p−1)/p·Sβ (TRG §4.1)."""
    return (p - 1) * alpha + (p - 1) / p * size * beta


def ring_allreduce(p: int, size: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Ring AllReduce = ring ReduceScatter + ring AllGather.

    2(p−1)α + 2(p−1)/p·Sβ + (p−1)/p·Sγ: bandwidth-optimal (Patarasuk &
    Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
    workstations", JPDC 69(2), 2009); the 2(p−1)/p factor is nccl-tests'
    AllReduce busbw factor.
    """
    return ring_reduce_scatter(p, size, alpha, beta, gamma) + ring_allgather(p, size, alpha, beta)


def ring_broadcast(p: int, size: float, alpha: float, beta: float) -> float:
    """Pipelined chain (ring) Broadcast: ``pipelined(p − 1, α, Sβ)``.

    The root streams chunks down a chain of p − 1 links (NCCL's ring
    broadcast); see :func:`pipelined` for the chunk count.
    """
    return pipelined(p - 1, alpha, size * beta)


def ring_alltoall(p: int, size: float, alpha: float, beta: float) -> float:
    """Pairwise-exchange AllToAll: (p−1)(α + (S/p)β) (TRG §4.5).

    In step j rank i sends its block for rank i+j; S is the whole per-rank
    send buffer, of which (p−1)/p leaves the rank.
    """
    return (p - 1) * (alpha + size / p * beta)


# ------------------------------------------- recursive halving and doubling
def rhd_reduce_scatter(p: int, size: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Recursive-halving ReduceScatter: lg p·α + (p−1)/p·S(β + γ) (TRG §4.3).

    Non-power-of-two p: the extra ranks first send their whole vector to a
    partner (α + Sβ + Sγ) and receive their block at the end (α + (S/p)β).
    """
    q = _pow2_floor(p)
    t = lg(q) * alpha + (q - 1) / q * size * (beta + gamma)
    if q != p:
        t += alpha + size * (beta + gamma) + alpha + size / p * beta
    return t


def rhd_allgather(p: int, size: float, alpha: float, beta: float) -> float:
    """Recursive-doubling (Bruck for any p) AllGather: ⌈lg p⌉α + (p−1)/p·Sβ (TRG §4.1)."""
    return lg(p) * alpha + (p - 1) / p * size * beta


def rhd_allreduce(p: int, size: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Rabenseifner AllReduce: 2 lg p·α + 2(p−1)/p·Sβ + (p−1)/p·Sγ (TRG §4.4).

    Recursive-halving ReduceScatter then recursive-doubling AllGather; for
    p not a power of two, plus the fold (3α + 2Sβ + Sγ/2, module docstring).
    """
    q = _pow2_floor(p)
    t = 2 * lg(q) * alpha + 2 * (q - 1) / q * size * beta + (q - 1) / q * size * gamma
    if q != p:
        t += 3 * alpha + 2 * size * beta + size * gamma / 2
    return t


def rhd_broadcast(p: int, size: float, alpha: float, beta: float) -> float:
    """Scatter + AllGather Broadcast (van de Geijn; TRG §4.2).

    Binomial scatter (⌈lg p⌉α + (p−1)/p·Sβ) then recursive-doubling
    AllGather (⌈lg p⌉α + (p−1)/p·Sβ): 2⌈lg p⌉α + 2(p−1)/p·Sβ.
    """
    return 2 * lg(p) * alpha + 2 * (p - 1) / p * size * beta


def rhd_alltoall(p: int, size: float, alpha: float, beta: float) -> float:
    """Bruck AllToAll: ⌈lg p⌉(α + (S/2)β) (TRG §4.5; Bruck et al. 1997).

    Each of the ⌈lg p⌉ steps forwards about half the buffer.
    """
    return lg(p) * (alpha + size / 2 * beta)


# --------------------------------------------------------- double binary tree
def tree_depth(p: int) -> int:
    """Depth of NCCL's binary tree on p ranks: ⌈log₂ p⌉ (the root has one child)."""
    return lg(p)


def tree_edges_per_rank(p: int) -> int:
    """Most tree edges one rank has over both trees of the double binary tree.

    An interior rank of one tree (parent + 2 children) is a leaf of the
    other (1 edge): 4 once p ≥ 4. With p = 2 each rank has the one edge in
    each tree (2); with p = 3 the busiest rank has 2 + 1 (3).
    """
    return 2 if p == 2 else 3 if p == 3 else 4


def tree_allreduce(p: int, size: float, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """Double-binary-tree AllReduce, pipelined.

    Two binary trees, each reducing then broadcasting half of the data
    (Sanders, Speck & Träff, "Two-tree algorithms for full bandwidth
    broadcast, reduction and scan", Parallel Computing 35(12), 2009; NCCL ≥
    2.4). Up and down passes of both trees run at once, pipelined over 2D
    stages (D = :func:`tree_depth`); per chunk each edge carries S/(2c) each
    way, and a rank with e edges (:func:`tree_edges_per_rank`) sends e of
    them: ``pipelined(2D, α, e·S/2·β + S·γ)``. With e = 4 (p ≥ 4) the
    bandwidth term is 2Sβ, the ring's for large p, with latency
    logarithmic in p; p = 2 gives Sβ, the lower bound 2(p−1)/p·Sβ.
    """
    if p <= 1:
        return 0.0
    e = tree_edges_per_rank(p)
    return pipelined(2 * tree_depth(p), alpha, e * size / 2 * beta + size * gamma)


def nvls_allreduce(p: int, size: float, alpha: float, beta: float) -> float:
    """In-switch (NVLink SHARP) AllReduce: ``pipelined(2, α, S(1 + 1/p)β)``.

    Each rank owns S/p: it reads the switch-reduced S/p (multimem.ld_reduce,
    the switch pulling that slice from every rank: each rank sends S in
    total) and writes it once to a multicast address (multimem.st: each
    rank receives S). Per rank and direction S + S/p, the two halves
    pipelined (NVIDIA, "NVLink SHARP", Hopper architecture white paper,
    2022; NCCL ≥ 2.17 NVLS algorithm). β here is per byte at the NVLS
    transfer rate.
    """
    if p <= 1:
        return 0.0
    return pipelined(2, alpha, size * (1 + 1 / p) * beta)


def nvls_across_allreduce(
    p0: int,
    p1: int,
    size: float,
    alpha: float,
    beta_in: float,
    beta_out: float,
    *,
    in_network: bool,
) -> float:
    """AllReduce over ``p1`` NVLS domains of ``p0`` cards, the two tiers pipelined.

    Inside each domain NVLink SHARP reduces S into S/p0 per card and
    multicasts the result back: S(1 + 1/p0) per card and direction at the NVLS
    rate (:func:`nvls_allreduce`). Between the reduce and the multicast each
    card all-reduces its S/p0 slice with the same slice of the other domains
    through its own NIC (its rail):

    * ``in_network`` (InfiniBand SHARP, NCCL's NVLS algorithm with CollNet):
      the switches reduce in flight, so each card sends its slice up the
      aggregation tree once and receives the result once — S/p0 per card and
      direction (Graham et al., "Scalable Hierarchical Aggregation Protocol
      (SHArP)", COMHPC 2016; NVIDIA Quantum-2 / Quantum-X800 SHARPv3);
      2 pipeline stages across;
    * otherwise NCCL's NVLSTree: a double binary tree across the domains
      (:func:`tree_allreduce`): e·(S/p0)/2 per card and direction, e =
      :func:`tree_edges_per_rank` (2·S/p0 once p1 ≥ 4), over 2⌈log₂ p1⌉ stages.

    The three phases stream chunk by chunk (NCCL pipelines them through one
    kernel), so the bandwidth term is the slower tier's and every stage pays
    α once: ``pipelined(2 + stages_across, α, max(S(1+1/p0)β_in, k·S/p0·β_out))``.
    With p1 = 1 it is :func:`nvls_allreduce`.
    """
    if p1 <= 1:
        return nvls_allreduce(p0, size, alpha, beta_in)
    k = 1.0 if in_network else tree_edges_per_rank(p1) / 2
    stages = 2 if in_network else 2 * tree_depth(p1)
    inner = size * (1 + 1 / p0) * beta_in
    across = k * size / p0 * beta_out
    return pipelined(2 + stages, alpha, max(inner, across))


# ----------------------------------------------------------------- torus
def _dim_phase(k: int, chunk_total: float, alpha: float, beta: float) -> float:
    """One bidirectional ring phase along a torus dimension of size k.

    The data (``chunk_total`` bytes per rank) is split between the two
    directions of the ring (distinct links when k > 2; a dimension of 2 is a
    single link, so no split): (k−1)α + (k−1)/k·S/2·β.
    """
    split = 2.0 if k > 2 else 1.0
    return (k - 1) * alpha + (k - 1) / k * chunk_total / split * beta


def torus_reduce_scatter(
    dims: Sequence[int], size: float, alpha: float, beta: float, gamma: float = 0.0
) -> float:
    """Dimension-by-dimension ReduceScatter on a torus.

    Bidirectional ring ReduceScatter along dimension 1 on S, then along
    dimension 2 on S/k₁, … (Dally & Towles, *Principles and Practices of
    Interconnection Networks*, 2004, dimension-order decomposition; the
    "bucket" algorithm of Chan et al., CCPE 19(13), 2007):
    Σᵢ [(kᵢ−1)α + (kᵢ−1)/kᵢ·Sᵢ/2·β + (kᵢ−1)/kᵢ·Sᵢγ], Sᵢ = S/∏_{j<i} k_j.
    """
    t, s = 0.0, float(size)
    for k in dims:
        t += _dim_phase(k, s, alpha, beta) + (k - 1) / k * s * gamma
        s /= k
    return t


def torus_allgather(dims: Sequence[int], size: float, alpha: float, beta: float) -> float:
    """Dimension-by-dimension AllGather: the ReduceScatter schedule reversed."""
    return torus_reduce_scatter(dims, size, alpha, beta)


def torus_allreduce(
    dims: Sequence[int], size: float, alpha: float, beta: float, gamma: float = 0.0
) -> float:
    """Torus AllReduce = dimension-wise ReduceScatter + AllGather.

    2 Σᵢ [(kᵢ−1)α + (kᵢ−1)/kᵢ·Sᵢ/2·β] + Σᵢ (kᵢ−1)/kᵢ·Sᵢγ. On 8×8×8 this has
    42 latency terms instead of the flat ring's 1022.
    """
    return torus_reduce_scatter(dims, size, alpha, beta, gamma) + torus_allgather(
        dims, size, alpha, beta
    )


def torus_broadcast(dims: Sequence[int], size: float, alpha: float, beta: float) -> float:
    """Torus Broadcast as scatter + AllGather along the dimensions (Chan et al. 2007)."""
    return 2 * torus_allgather(dims, size, alpha, beta)


def torus_alltoall_load(dims: Sequence[int]) -> float:
    """Bytes on the busiest channel per byte of a rank's send buffer (uniform traffic).

    Each rank sends S/p to every rank. In dimension i the traffic travels
    Σ_t d_i = (p/kᵢ)·⌊kᵢ²/4⌋ byte-hops per byte sent, spread evenly over
    the 2p directed channels of that dimension (p when kᵢ = 2): load
    ⌊kᵢ²/4⌋/(2kᵢ) per byte, i.e. kᵢ/8 for even kᵢ — Dally & Towles (2004,
    §3.3.1) channel load of uniform traffic on a k-ary n-cube.
    """
    loads = []
    for k in dims:
        channels = 1.0 if k == 2 else 2.0
        loads.append((k * k // 4) / (channels * k))
    return max(loads)


def torus_alltoall(dims: Sequence[int], size: float, alpha: float, beta: float) -> float:
    """Direct AllToAll on a torus, bounded by channel load.

    (p−1)α + S·λ·β with λ = :func:`torus_alltoall_load` (minimal routing
    spread evenly over the equal-length paths).
    """
    p = math.prod(dims)
    return (p - 1) * alpha + size * torus_alltoall_load(dims) * beta
