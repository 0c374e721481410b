"""Bisection width (links) and bandwidth (Gb/s per direction).

Definition: split the *endpoints* into two halves (⌊n/2⌋ and ⌈n/2⌉); switches
may go to either side. The bisection width is the least number of links any
such split cuts, the bisection bandwidth the least total bandwidth.

* Regular families: closed forms (:mod:`~simulation.topology.closed_forms`):
  ring 2, torus 2·k^(n−1) (even k), mesh N/k_max, full mesh ⌊n/2⌋·⌈n/2⌉,
  star ⌊n/2⌋, k-ary fat tree hosts/2 (full bisection: a rearrangeably
  non-blocking Clos routes any perfect matching across the cut on
  link-disjoint paths, so every balanced cut has ≥ hosts/2 links, and
  cutting half the host links achieves it).
* Anything else: a partitioning heuristic, reported as an *upper* bound (it
  is the cut of an explicit balanced partition): spectral split (Fiedler
  vector, Fiedler 1973) on graphs up to ``SPECTRAL_LIMIT`` nodes, otherwise
  the split by endpoint id (supernode halves in a cluster, whose cards are
  numbered supernode by supernode); then switches are placed greedily on the
  side where most of their link capacity goes, and endpoints are swapped in
  pairs while that lowers the cut (Kernighan & Lin 1970). When every node is
  an endpoint, the spectral lower bound ``λ₂·n/4`` (λ₂ of the Laplacian,
  weighted by bandwidth for the Gb/s figure; Fiedler 1973, Donath & Hoffman
  1973) brackets the true value.
* :func:`exhaustive_bisection` finds the exact minimum on tiny graphs (the
  tests use it to check the formulas and the heuristic).
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from math import comb
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.sparse import csgraph

from . import closed_forms as cf
from .graph import Topology, TopologyError

__all__ = [
    "Bisection",
    "SPECTRAL_LIMIT",
    "bisection",
    "cut_of",
    "exhaustive_bisection",
]

SPECTRAL_LIMIT = 2000
"""Largest graph (nodes) for the dense spectral split and lower bound."""

Side = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Bisection:
    """A bisection result: the cut found and what is proven about it.

    ``links``/``gbps`` is the cut of the partition found (equal to the
    bisection when ``exact``); ``lower_links``/``lower_gbps`` a proven lower
    bound when one is known (None otherwise).
    """

    links: int
    gbps: float
    exact: bool
    method: str
    source: str
    lower_links: float | None = None
    lower_gbps: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


def cut_of(topo: Topology, side: Side) -> tuple[int, float]:
    """Links and Gb/s crossing a node partition (``side[i]`` True = side A)."""
    crossing = side[topo.link_u] != side[topo.link_v]
    return int(crossing.sum()), float(topo.link_gbps[crossing].astype(np.float64).sum())


def _weighted(topo: Topology, weights: npt.NDArray[np.float64]) -> sp.csr_matrix:
    data = weights[topo.entry_link]
    return sp.csr_matrix((data, topo.indices, topo.indptr), shape=(topo.n_nodes, topo.n_nodes))


def _place_switches(topo: Topology, side: Side, rounds: int = 30) -> Side:
    """Move every non-endpoint to the side holding most of its link capacity."""
    n = topo.n_endpoints
    if n == topo.n_nodes:
        return side
    a = _weighted(topo, topo.link_gbps.astype(np.float64))
    side = side.copy()
    for _ in range(rounds):
        score = a @ np.where(side, 1.0, -1.0)
        new = side.copy()
        sw = slice(n, None)
        new[sw] = np.where(score[sw] > 0, True, np.where(score[sw] < 0, False, side[sw]))
        if np.array_equal(new, side):
            break
        side = new
    return side


def _swap_refine(topo: Topology, side: Side, weight: npt.NDArray[np.float64], passes: int) -> Side:
    """Kernighan–Lin style: swap the best pair of endpoints while the cut drops."""
    n = topo.n_endpoints
    a = _weighted(topo, weight).tocsr()
    side = side.copy()
    for _ in range(passes):
        signed = np.where(side, 1.0, -1.0)
        # gain of moving v: external − internal weight
        ext_minus_int = -(a @ signed) * signed
        gain = ext_minus_int[:n]
        a_idx = np.flatnonzero(side[:n])
        b_idx = np.flatnonzero(~side[:n])
        if a_idx.size == 0 or b_idx.size == 0:
            break
        best_a = a_idx[np.argsort(gain[a_idx])[-8:]]
        best_b = b_idx[np.argsort(gain[b_idx])[-8:]]
        best, pair = 0.0, None
        for x in best_a:
            for y in best_b:
                g = float(gain[x] + gain[y] - 2.0 * a[x, y])
                if g > best + 1e-12:
                    best, pair = g, (x, y)
        if pair is None:
            break
        side[pair[0]], side[pair[1]] = False, True
        side = _place_switches(topo, side, rounds=3)
    return side


def _formula(topo: Topology) -> Bisection | None:
    fam, p, n = topo.family, topo.params, topo.n_endpoints
    if not p:
        return None
    uniform = topo.n_links > 0 and float(topo.link_gbps.min()) == float(topo.link_gbps.max())
    gbps = float(topo.link_gbps[0]) if topo.n_links else 0.0
    try:
        if fam in ("ring", "torus"):
            f = cf.torus_bisection(p["dims"])
        elif fam == "mesh":
            f = cf.mesh_bisection(p["dims"])
        elif fam == "full_mesh":
            f = cf.BisectionFormula((n // 2) * (n - n // 2), True, "complete graph: ⌊n/2⌋·⌈n/2⌉")
        elif fam == "star":
            f = cf.BisectionFormula(n // 2, True, "star: the switch sides with ⌈n/2⌉ cards")
        elif fam == "fat_tree":
            f = cf.BisectionFormula(
                n // 2, True, "k-ary fat tree: full bisection, hosts/2 (Al-Fares et al. 2008)"
            )
        else:
            return None
    except ValueError:
        return None
    if not uniform:
        return None
    return Bisection(
        links=f.links,
        gbps=f.links * gbps,
        exact=f.exact,
        method="closed_form",
        source=f.source,
        lower_links=float(f.links) if f.exact else None,
        lower_gbps=f.links * gbps if f.exact else None,
    )


def _fiedler(
    topo: Topology, weight: npt.NDArray[np.float64]
) -> tuple[float, npt.NDArray[np.float64]]:
    lap = csgraph.laplacian(_weighted(topo, weight)).toarray()
    vals, vecs = np.linalg.eigh(lap)
    return float(vals[1]), vecs[:, 1]


def bisection(topo: Topology, *, refine_passes: int = 50) -> Bisection:
    """Bisection width and bandwidth; exact for the regular families.

    See the module docstring for the heuristic and its bounds.
    """
    formula = _formula(topo)
    if formula is not None:
        return formula
    n = topo.n_endpoints
    if n < 2:
        raise TopologyError("topology", "bisection needs at least two endpoints")
    ones = np.ones(topo.n_links)
    lower_links = lower_gbps = None
    if topo.n_nodes <= SPECTRAL_LIMIT and topo.n_links:
        lam, vec = _fiedler(topo, ones)
        order = np.argsort(vec[:n], kind="stable")
        side = np.zeros(topo.n_nodes, dtype=bool)
        side[order[: n // 2]] = True
        side[n:] = vec[n:] <= np.median(vec[:n])
        method = "spectral + greedy switch placement + pair swaps (upper bound)"
        if n == topo.n_nodes:
            lower_links = (
                lam * n * n / (4.0 * n) if n % 2 == 0 else lam * (n // 2) * (n - n // 2) / n
            )
            lam_w, _ = _fiedler(topo, topo.link_gbps.astype(np.float64))
            lower_gbps = lam_w * (n // 2) * (n - n // 2) / n
    else:
        side = np.zeros(topo.n_nodes, dtype=bool)
        side[: n // 2] = True
        grp = topo.group
        sw = np.arange(topo.n_nodes) >= n
        if int(grp[:n].min()) >= 0:  # group-attached switches follow their group
            first_b_group = int(grp[n // 2]) if n // 2 < n else -1
            side[sw & (grp >= 0) & (grp < first_b_group)] = True
        method = "endpoint-id halves (supernode halves) + greedy switch placement (upper bound)"
    side = _place_switches(topo, side)
    if topo.n_nodes <= SPECTRAL_LIMIT:
        side = _swap_refine(topo, side, ones, refine_passes)
    links, gbps = cut_of(topo, side)
    return Bisection(
        links=links,
        gbps=gbps,
        exact=False,
        method="heuristic",
        source=method,
        lower_links=None if lower_links is None else float(lower_links),
        lower_gbps=None if lower_gbps is None else float(lower_gbps),
    )


def exhaustive_bisection(topo: Topology, *, by: str = "links", limit: int = 20_000) -> Bisection:
    """The exact minimum by enumeration (tiny graphs only; for tests).

    Enumerates every balanced split of the endpoints (endpoint 0 fixed on
    side A); for each, the best placement of the switches is an s–t minimum
    cut (all A endpoints merged into s, all B endpoints into t), solved by
    :func:`scipy.sparse.csgraph.maximum_flow`. ``by`` = ``"links"`` or
    ``"gbps"`` (integer Gb/s capacities).
    """
    n = topo.n_endpoints
    half = n // 2
    # endpoint 0 sits on side A; A holds ⌊n/2⌋ or (odd n) ⌈n/2⌉ endpoints
    a_sizes = sorted({half, n - half})
    count = sum(comb(n - 1, a - 1) for a in a_sizes if a >= 1)
    if count > limit:
        raise TopologyError("topology", f"{count} splits is too many to enumerate (limit {limit})")
    cap = (
        np.ones(topo.n_links, np.int64)
        if by == "links"
        else np.rint(topo.link_gbps).astype(np.int64)
    )
    s_sw = topo.n_nodes - n
    best = None
    for a in a_sizes:
        for rest in itertools.combinations(range(1, n), a - 1):
            a_set = np.zeros(n, dtype=bool)
            a_set[0] = True
            a_set[list(rest)] = True
            value = _split_mincut(topo, a_set, cap, s_sw)
            if best is None or value < best:
                best = value
    assert best is not None
    gb = float(best) if by == "gbps" else float("nan")
    return Bisection(
        links=int(best) if by == "links" else -1,
        gbps=gb,
        exact=True,
        method="exhaustive",
        source="every balanced split, switches placed by s–t min cut",
        lower_links=float(best) if by == "links" else None,
        lower_gbps=gb if by == "gbps" else None,
    )


def _split_mincut(topo: Topology, a_ep: Side, cap: npt.NDArray[np.int64], n_sw: int) -> int:
    n = topo.n_endpoints
    u, v = topo.link_u.astype(np.int64), topo.link_v.astype(np.int64)
    if n_sw == 0:
        return int(cap[a_ep[u] != a_ep[v]].sum())

    # nodes: 0 = s, 1 = t, switches 2…; endpoints map to s or t
    def node(x: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        out = np.where(x < n, np.where(a_ep[np.minimum(x, n - 1)], 0, 1), x - n + 2)
        return out.astype(np.int64)

    a, b = node(u), node(v)
    fixed = (u < n) & (v < n)
    direct = int(cap[fixed & (a != b)].sum())
    keep = ~fixed
    a, b, c = a[keep], b[keep], cap[keep]
    size = n_sw + 2
    rows = np.concatenate([a, b])
    cols = np.concatenate([b, a])
    data = np.concatenate([c, c]).astype(np.int32)
    m = sp.csr_matrix((data, (rows, cols)), shape=(size, size))
    m.sum_duplicates()
    flow = csgraph.maximum_flow(m, 0, 1).flow_value
    return direct + int(flow)
