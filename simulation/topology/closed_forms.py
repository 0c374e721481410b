"""Exact distance distributions and bisection widths of the regular families.

All distributions are integer counts, so averages are exact rationals
(``total / pairs``); tests compare them with a BFS from every node.

Conventions (used everywhere in :mod:`simulation.topology`):

* a *pair* is an ordered pair (s, t) of distinct endpoints (cards, hosts);
  the average over unordered pairs is the same number;
* the hop count is the number of links on a shortest path;
* ``per_node[d]`` counts the nodes at distance ``d`` from one node, including
  the node itself at ``d = 0``; for a vertex-transitive graph the pair
  histogram is ``N × per_node`` without the ``d = 0`` entry.

The seeds' ring: for a ring of ``n`` nodes every node sees two nodes at each
distance 1…⌊(n−1)/2⌋ and, for even ``n``, one at ``n/2``, so the distances
from one node sum to ``n²/4`` (even n) or ``(n²−1)/4`` (odd n). Over the
``n − 1`` other nodes the average is ``n² / (4(n−1))``: **65536/511 ≈ 128.2505
hops for 512 cards** — not the "≈ 1.58" the seed prints (its code actually
prints 171.50: it counts nodes, not links, and walks without wrap-around).
A 8×8×8 torus sums the three per-dimension ring distances: the per-node sum
is ``3 × 16 × 64 = 3072`` over 511 others, **3072/511 ≈ 6.0117 hops**
(6 exactly if a card's distance to itself is counted), diameter 12.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

import numpy as np
import numpy.typing as npt

__all__ = [
    "BisectionFormula",
    "fat_tree_per_host",
    "full_mesh_per_node",
    "mesh_pair_counts",
    "ring_per_node",
    "torus_bisection",
    "torus_per_node",
    "mesh_bisection",
]

Counts = npt.NDArray[np.int64]


def ring_per_node(n: int) -> Counts:
    """Nodes at each hop distance from one node of an ``n``-ring (incl. itself).

    Closed form: 1 at 0; 2 at each d = 1…⌊(n−1)/2⌋; 1 at n/2 when n is even.
    Source: elementary (the cycle C_n is vertex-transitive; going either way
    round, the shorter arc wins). Sum of distances ``⌊n²/4⌋``.
    """
    if n < 1:
        raise ValueError("a ring needs at least one node")
    counts = np.zeros(n // 2 + 1, dtype=np.int64)
    counts[0] = 1
    counts[1 : (n - 1) // 2 + 1] = 2
    if n % 2 == 0 and n >= 2:
        counts[n // 2] = 1
    return counts


def torus_per_node(dims: Sequence[int]) -> Counts:
    """Per-node hop distribution of the torus C_{k1} × … × C_{kn} (k-ary n-cube).

    The hop distance in a Cartesian product is the sum of the per-dimension
    distances (Dally & Towles, *Principles and Practices of Interconnection
    Networks*, 2004, §5.2: minimal routes in a torus correct each dimension
    independently), and the per-dimension distances from a fixed node are
    independent, so the distribution is the convolution of the per-dimension
    ring distributions. A dimension of size 2 is a single link (hypercube).
    """
    out = np.ones(1, dtype=np.int64)
    for k in dims:
        out = np.convolve(out, ring_per_node(int(k)))
    return out


def mesh_pair_counts(dims: Sequence[int]) -> Counts:
    """Ordered pairs at each hop distance in the mesh [k1] × … × [kn] (no wrap).

    A mesh is not vertex-transitive, but pairs factor over dimensions: on a
    path of ``k`` nodes, ``k`` ordered pairs have |x−y| = 0 and ``2(k−d)``
    have |x−y| = d; the mesh distance is the sum over dimensions (Manhattan),
    so the pair distribution is the convolution. Index 0 includes the N self
    pairs; callers drop them. Mean |x−y| on a path over all ordered pairs is
    ``(k²−1)/(3k)`` (tested).
    """
    out = np.ones(1, dtype=np.int64)
    for k in dims:
        k = int(k)
        c = np.empty(k, dtype=np.int64)
        c[0] = k
        c[1:] = 2 * (k - np.arange(1, k, dtype=np.int64))
        out = np.convolve(out, c)
    return out


def full_mesh_per_node(n: int) -> Counts:
    """A full mesh (complete graph K_n): everyone one hop away."""
    return np.array([1, n - 1], dtype=np.int64) if n > 1 else np.array([1], dtype=np.int64)


def fat_tree_per_host(k: int, tiers: int) -> Counts:
    """Hosts at each hop distance from one host of a k-ary fat tree.

    Al-Fares, Loukissas & Vahdat, "A scalable, commodity data center network
    architecture", SIGCOMM 2008 (3 tiers: k pods of k/2 edge and k/2
    aggregation switches, (k/2)² cores, k³/4 hosts); 2 tiers: k leaves of k/2
    hosts under k/2 spines (k²/2 hosts).

    * 2 hops: the other k/2 − 1 hosts on the same edge switch;
    * 4 hops: 2 tiers: every other host; 3 tiers: the (k/2 − 1)·k/2 hosts on
      other edges of the same pod;
    * 6 hops (3 tiers): the (k − 1)·k²/4 hosts in other pods.
    """
    h = k // 2
    if tiers == 2:
        return np.array([1, 0, h - 1, 0, (k - 1) * h], dtype=np.int64)
    if tiers == 3:
        return np.array([1, 0, h - 1, 0, (h - 1) * h, 0, (k - 1) * h * h], dtype=np.int64)
    raise ValueError("tiers must be 2 or 3")


@dataclass(frozen=True)
class BisectionFormula:
    """A bisection width from a formula, with how much we can claim for it.

    ``links`` is the number of links cut by a balanced partition of the
    endpoints; ``exact`` is True when the formula is a theorem for this case
    (then ``links`` is the minimum over all balanced partitions), otherwise it
    is the cut of an explicit partition, i.e. an upper bound.
    """

    links: int
    exact: bool
    source: str


def torus_bisection(dims: Sequence[int]) -> BisectionFormula:
    """Bisection width of the torus C_{k1} × … × C_{kn}.

    Cutting every ring of the longest dimension k_max in two places splits
    the nodes in half and cuts ``2·N/k_max`` links (``N/k_max`` when
    k_max = 2, where the ring is a single link). For the k-ary n-cube with
    even k this is ``2·k^(n−1)``, the bisection width given by Dally & Towles
    (2004, §3.3) and a minimum by the edge-isoperimetric inequality of
    Bollobás & Leader ("Edge-isoperimetric inequalities in the grid",
    Combinatorica 11, 1991, and its torus version). For unequal even radices
    we report the same cut as an upper bound (it matched an exhaustive search
    in every small case we tried); with odd k_max no formula is claimed.
    """
    dims = [int(k) for k in dims]
    n = prod(dims)
    if len(dims) == 1:
        k = dims[0]
        return BisectionFormula(1 if k == 2 else 2, True, "ring: any split of a cycle cuts 2 links")
    kmax = max(dims)
    if kmax % 2:
        raise ValueError("no closed form for a torus whose longest dimension is odd")
    links = (n // kmax) * (1 if kmax == 2 else 2)
    equal = len(set(dims)) == 1
    return BisectionFormula(
        links,
        equal,
        "k-ary n-cube, even k: 2·k^(n−1) (Dally & Towles 2004 §3.3; Bollobás & Leader 1991)"
        if equal
        else "cut across the longest even dimension: 2·N/k_max (upper bound)",
    )


def mesh_bisection(dims: Sequence[int]) -> BisectionFormula:
    """Bisection width of the mesh [k1] × … × [kn] with the longest side even.

    ``N / k_max``: cut every line of the longest dimension once. Exact by
    Azizoğlu & Eğecioğlu, "The bisection width and the isoperimetric number
    of arrays", Discrete Applied Mathematics 138 (2004).
    """
    dims = [int(k) for k in dims]
    kmax = max(dims)
    if kmax % 2:
        raise ValueError("no closed form for a mesh whose longest side is odd")
    return BisectionFormula(
        prod(dims) // kmax, True, "mesh, even longest side: N/k_max (Azizoğlu & Eğecioğlu 2004)"
    )
