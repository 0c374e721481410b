"""Hop-count and latency metrics over all pairs of endpoints — exact where possible.

Which pairs: ordered pairs (s, t) of distinct endpoints (cards, hosts);
switches are only ever intermediate. Averages over unordered pairs are the
same numbers. Unreachable pairs (after a failure) are counted apart and left
out of averages and diameters.

How (``method`` in every result says which one ran):

``closed_form``
    ring, torus, mesh, full mesh, star and fat tree from
    :mod:`~simulation.topology.closed_forms` — no search at all.
``symmetry``
    the topology carries endpoint symmetry classes (automorphism orbits,
    e.g. every card of the million-card cluster is in one class): one
    search per class, weighted by the class size. Exact.
``bfs``
    one search from every endpoint (up to ``exact_limit`` endpoints). Exact.
``sample``
    ``samples`` random source endpoints; the result carries a
    :class:`SampleBound`: the standard error of the mean and a Hoeffding
    half-width at the given confidence, and diameter bounds
    ``max ecc ≤ D ≤ 2·min ecc`` (triangle inequality).

Latency is the lowest-latency path: link ns plus the forwarding ns of every
node passed through (see :meth:`Topology.latency_weights`). In the regular
direct families with uniform latencies, a path of h hops costs
``h·link_ns + (h−1)·switch_ns`` and the latency distribution follows from
the hop histogram; a star costs ``2·link_ns + switch_ns``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from . import closed_forms as cf
from .graph import FloatArray, Topology, TopologyError
from .search import hop_distances, latency_distances

__all__ = [
    "EXACT_LIMIT",
    "GroupSplit",
    "HopStats",
    "LatencyStats",
    "SampleBound",
    "hop_stats",
    "latency_stats",
    "hoeffding",
    "pick_method",
    "sample_bound",
]

EXACT_LIMIT = 4096
"""Endpoints up to which an irregular graph gets one search per endpoint."""
DEFAULT_SAMPLES = 32
DEFAULT_CONFIDENCE = 0.95

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class SampleBound:
    """Error bound of a sampled average (``sources`` random source endpoints).

    ``stderr``: empirical standard error of the per-source means.
    ``hoeffding``: half-width h with P(|estimate − truth| ≥ h) ≤ 1 − confidence
    for a per-source mean confined to [1, range_max] (Hoeffding 1963, valid
    for sampling with or without replacement); ``range_max`` is
    2·(smallest eccentricity seen), a sure upper bound on every distance.
    ``diameter_lower``/``diameter_upper``: max eccentricity seen ≤ D ≤
    2·min eccentricity seen.
    """

    sources: int
    confidence: float
    stderr: float | None
    hoeffding: float | None
    diameter_lower: float
    diameter_upper: float | None


@dataclass(frozen=True)
class GroupSplit:
    """The same statistic restricted to pairs inside one group (supernode) or across."""

    pairs: int
    average: float
    maximum: float
    values: list[float] = field(default_factory=list)
    """Distinct values (hops or ns) …"""
    counts: list[int] = field(default_factory=list)
    """… and how many pairs have each."""

    def share_within(self, limit: float) -> float:
        """Share of these pairs whose value is ≤ ``limit``."""
        total = sum(self.counts)
        if not total:
            return 1.0
        return sum(c for v, c in zip(self.values, self.counts, strict=True) if v <= limit) / total


@dataclass(frozen=True)
class HopStats:
    """Hop-count distribution over ordered pairs of distinct endpoints.

    ``histogram[h]`` = number of pairs at h hops (``histogram[0] = 0``).
    ``total_hops / pairs`` is the exact average (as a fraction:
    :meth:`average_fraction`). When sampled, counts are estimates scaled to
    all pairs and ``exact`` is False.
    """

    histogram: list[int]
    pairs: int
    total_hops: int
    average: float
    diameter: int
    unreachable_pairs: int
    method: str
    exact: bool
    sample: SampleBound | None = None
    intra_group: GroupSplit | None = None
    inter_group: GroupSplit | None = None

    def average_fraction(self) -> Fraction:
        """The exact average as a rational number (meaningful when ``exact``)."""
        return Fraction(self.total_hops, self.pairs) if self.pairs else Fraction(0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True)
class LatencyStats:
    """Latency (ns) over ordered pairs of distinct reachable endpoints.

    ``p99_ns`` is the nearest-rank 99th percentile: the smallest latency L
    such that at least 99 % of pairs have latency ≤ L.
    """

    average_ns: float
    p50_ns: float
    p99_ns: float
    max_ns: float
    min_ns: float
    pairs: int
    method: str
    exact: bool
    sample: SampleBound | None = None
    intra_group: GroupSplit | None = None
    inter_group: GroupSplit | None = None
    distribution: dict[str, list[float]] = field(default_factory=dict)
    """``{"values_ns": [...], "pairs": [...]}``: distinct latencies and counts."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


# ------------------------------------------------------------------ helpers
def pick_method(topo: Topology, exact_limit: int = EXACT_LIMIT) -> str:
    """Which method :func:`hop_stats` will use for this topology."""
    if topo.family in ("ring", "torus", "mesh", "full_mesh", "star", "fat_tree") and topo.params:
        return "closed_form"
    if topo.endpoint_class is not None:
        return "symmetry"
    if topo.n_endpoints <= exact_limit:
        return "bfs"
    return "sample"


METHODS = ("closed_form", "symmetry", "bfs", "sample")


def _check_method(topo: Topology, method: str) -> str:
    if method not in METHODS:
        raise TopologyError("method", f"one of {', '.join(METHODS)}, got {method!r}")
    if method == "closed_form" and pick_method(topo) != "closed_form":
        raise TopologyError("method", f"no closed form for a {topo.family} topology")
    if method == "symmetry" and topo.endpoint_class is None:
        raise TopologyError("method", "this topology has no known symmetry classes")
    return method


def _classes(topo: Topology) -> tuple[list[int], list[int]]:
    """Representative endpoint and size of every symmetry class."""
    assert topo.endpoint_class is not None
    cls = topo.endpoint_class
    uniq, first, counts = np.unique(cls, return_index=True, return_counts=True)
    return [int(i) for i in first], [int(c) for c in counts]


def _sources(topo: Topology, method: str, samples: int, seed: int) -> tuple[list[int], list[int]]:
    if method == "symmetry":
        return _classes(topo)
    if method == "bfs":
        return list(range(topo.n_endpoints)), [1] * topo.n_endpoints
    rng = np.random.default_rng(seed)
    k = min(samples, topo.n_endpoints)
    picked = rng.choice(topo.n_endpoints, size=k, replace=False)
    return [int(s) for s in picked], [1] * k


def _groups(topo: Topology) -> npt.NDArray[np.int32] | None:
    g = topo.group[: topo.n_endpoints]
    if g.size == 0 or int(g.min()) < 0 or int(g.max()) == int(g.min()):
        return None
    return g


def hoeffding(range_width: float, n: int, confidence: float) -> float:
    """Half-width t with 2·exp(−2 n t² / R²) = 1 − confidence (Hoeffding 1963)."""
    return range_width * math.sqrt(math.log(2.0 / (1.0 - confidence)) / (2.0 * n))


def sample_bound(
    means: list[float],
    ecc: list[float],
    low: float,
    slack: float,
    connected: bool,
    confidence: float,
) -> SampleBound:
    """Bounds for an average estimated from per-source means.

    Every distance lies in [``low``, 2·min ecc + ``slack``] (triangle
    inequality through the most central sampled source; ``slack`` is the
    forwarding latency that source adds, 0 for hops), which is the range
    Hoeffding's inequality needs. Unknown (None) when the graph is not
    connected or only one source was drawn.
    """
    n = len(means)
    arr = np.asarray(means, dtype=np.float64)
    stderr = float(arr.std(ddof=1) / math.sqrt(n)) if n > 1 else None
    upper = 2.0 * min(ecc) + slack if ecc and connected else None
    return SampleBound(
        sources=n,
        confidence=confidence,
        stderr=stderr,
        hoeffding=hoeffding(upper - low, n, confidence) if upper is not None and n else None,
        diameter_lower=float(max(ecc)) if ecc else 0.0,
        diameter_upper=upper,
    )


# ----------------------------------------------------------------- hop stats
def _closed_form_hops(topo: Topology) -> tuple[I64, int]:
    """(pair histogram incl. index 0 = 0, pairs) for the regular families."""
    p = topo.params
    fam = topo.family
    n = topo.n_endpoints
    if fam in ("ring", "torus"):
        hist = cf.torus_per_node(p["dims"]) * n
    elif fam == "mesh":
        hist = cf.mesh_pair_counts(p["dims"])
    elif fam == "full_mesh":
        hist = cf.full_mesh_per_node(n) * n
    elif fam == "star":
        hist = np.array([n, 0, n * (n - 1)], dtype=np.int64)
    else:
        hist = cf.fat_tree_per_host(p["k"], p["tiers"]) * n
    hist = hist.astype(np.int64)
    hist[0] = 0
    return hist, n * (n - 1)


def hop_stats(
    topo: Topology,
    *,
    exact_limit: int = EXACT_LIMIT,
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
    method: str | None = None,
) -> HopStats:
    """Hop-count histogram, average and diameter over all endpoint pairs.

    ``method`` forces one of ``closed_form``/``symmetry``/``bfs``/``sample``
    (the tests use this to check the fast paths against plain BFS).
    """
    method = _check_method(topo, method or pick_method(topo, exact_limit))
    n = topo.n_endpoints
    if method == "closed_form":
        hist, pairs = _closed_form_hops(topo)
        return _finish_hops(hist, pairs, 0, method, True, None, None, None)

    sources, weights = _sources(topo, method, samples, seed)
    groups = _groups(topo)
    hist = np.zeros(1, dtype=np.int64)
    intra = np.zeros(1, dtype=np.int64)
    unreachable = 0
    per_source_mean: list[float] = []
    ecc: list[int] = []
    for src, w in zip(sources, weights, strict=True):
        d = hop_distances(topo, src)[:n]
        reach = d > 0
        counts = np.bincount(d[reach], minlength=1).astype(np.int64)
        hist = _add(hist, counts * w)
        unreachable += int(n - 1 - int(reach.sum())) * w
        if groups is not None:
            same = reach & (groups == groups[src])
            intra = _add(intra, np.bincount(d[same], minlength=1).astype(np.int64) * w)
        if method == "sample":
            per_source_mean.append(float(d[reach].mean()) if reach.any() else 0.0)
            ecc.append(int(d.max()))
    bound = None
    if method == "sample":
        scale = n / len(sources)
        hist = np.rint(hist * scale).astype(np.int64)
        intra = np.rint(intra * scale).astype(np.int64)
        unreachable = int(round(unreachable * scale))
        bound = sample_bound(
            per_source_mean, [float(e) for e in ecc], 1.0, 0.0, unreachable == 0, confidence
        )
    pairs = int(hist.sum())
    split = None
    if groups is not None:
        inter = _add(hist.copy(), -intra)
        split = (_split(intra), _split(inter))
    exact = method != "sample"
    return _finish_hops(
        hist,
        pairs,
        unreachable,
        method,
        exact,
        bound,
        split[0] if split else None,
        split[1] if split else None,
    )


def _add(a: I64, b: I64) -> I64:
    if b.size > a.size:
        a = np.pad(a, (0, b.size - a.size))
    a[: b.size] += b
    return a


def _split(hist: I64) -> GroupSplit:
    pairs = int(hist.sum())
    total = int((hist * np.arange(hist.size)).sum())
    nz = np.flatnonzero(hist)
    return GroupSplit(
        pairs=pairs,
        average=total / pairs if pairs else 0.0,
        maximum=float(nz[-1]) if nz.size else 0.0,
        values=[float(v) for v in nz],
        counts=[int(hist[v]) for v in nz],
    )


def _finish_hops(
    hist: I64,
    pairs: int,
    unreachable: int,
    method: str,
    exact: bool,
    bound: SampleBound | None,
    intra: GroupSplit | None,
    inter: GroupSplit | None,
) -> HopStats:
    hist = np.trim_zeros(hist, "b") if hist.any() else np.zeros(1, np.int64)
    total = int((hist * np.arange(hist.size, dtype=np.int64)).sum())
    pairs = int(hist.sum())
    return HopStats(
        histogram=[int(x) for x in hist],
        pairs=pairs,
        total_hops=total,
        average=total / pairs if pairs else 0.0,
        diameter=int(hist.size - 1),
        unreachable_pairs=int(unreachable),
        method=method,
        exact=exact,
        sample=bound,
        intra_group=intra,
        inter_group=inter,
    )


# ------------------------------------------------------------- latency stats
def _uniform(arr: npt.NDArray[np.float32]) -> bool:
    return arr.size == 0 or float(arr.min()) == float(arr.max())


def _quantile(values: FloatArray, counts: I64, q: float) -> float:
    """Nearest-rank quantile of a weighted distribution (values sorted)."""
    if values.size == 0:
        return 0.0
    cum = np.cumsum(counts)
    rank = math.ceil(q * float(cum[-1]))
    return float(values[int(np.searchsorted(cum, max(rank, 1)))])


def latency_stats(
    topo: Topology,
    *,
    exact_limit: int = EXACT_LIMIT,
    samples: int = DEFAULT_SAMPLES,
    seed: int = 0,
    confidence: float = DEFAULT_CONFIDENCE,
    method: str | None = None,
    hops: HopStats | None = None,
) -> LatencyStats:
    """Average, p50, p99 and maximum latency over all endpoint pairs (ns).

    Closed form for ring/torus/mesh/full mesh with uniform link and router
    latencies (L(h) = h·link + (h−1)·router over the hop histogram) and for a
    star; otherwise the lowest-latency search (Dijkstra) per source chosen as
    in :func:`hop_stats`.
    """
    method = _check_method(topo, method or pick_method(topo, exact_limit))
    n = topo.n_endpoints
    direct = topo.family in ("ring", "torus", "mesh", "full_mesh")
    if method == "closed_form" and (
        topo.family == "star" or (direct and _uniform(topo.link_ns) and _uniform(topo.node_ns))
    ):
        h = hops if hops is not None and hops.exact else hop_stats(topo, method="closed_form")
        link = float(topo.link_ns[0]) if topo.n_links else 0.0
        router = float(topo.node_ns[n]) if topo.family == "star" else float(topo.node_ns[0])
        hs = np.arange(len(h.histogram), dtype=np.float64)
        values = hs * link + np.maximum(hs - 1, 0) * router
        counts = np.asarray(h.histogram, dtype=np.int64)
        keep = counts > 0
        return _finish_latency(values[keep], counts[keep], "closed_form", True, None, None, None)
    if method == "closed_form":  # fat tree or non-uniform: every host is in one class
        method = "symmetry" if topo.endpoint_class is not None else "bfs"

    sources, weights = _sources(topo, method, samples, seed)
    groups = _groups(topo)
    connected = True
    chunks: list[tuple[FloatArray, I64]] = []
    intra_chunks: list[tuple[FloatArray, I64]] = []
    per_source_mean: list[float] = []
    ecc: list[float] = []
    for src, w in zip(sources, weights, strict=True):
        d = latency_distances(topo, src)[:n]
        mask = np.isfinite(d)
        connected = connected and bool(mask.all())
        mask[src] = False
        vals, cnt = np.unique(d[mask], return_counts=True)
        chunks.append((vals, cnt.astype(np.int64) * w))
        if groups is not None:
            same = mask & (groups == groups[src])
            v2, c2 = np.unique(d[same], return_counts=True)
            intra_chunks.append((v2, c2.astype(np.int64) * w))
        if method == "sample":
            per_source_mean.append(float(d[mask].mean()) if mask.any() else 0.0)
            ecc.append(float(d[mask].max()) if mask.any() else 0.0)
    values, counts = _merge(chunks)
    intra = inter = None
    scale = n / len(sources) if method == "sample" else 1.0
    if groups is not None:
        iv, ic = _merge(intra_chunks)
        allv = np.union1d(values, iv)
        rest = np.zeros(allv.size, np.int64)
        rest[np.searchsorted(allv, values)] += counts
        rest[np.searchsorted(allv, iv)] -= ic
        keep = rest > 0
        intra = _lat_split(iv, ic)
        inter = _lat_split(allv[keep], rest[keep])
    bound = None
    if method == "sample":
        counts = np.rint(counts * scale).astype(np.int64)
        lo = float(values.min()) if values.size else 0.0
        slack = float(topo.node_ns.max()) if topo.n_nodes else 0.0
        bound = sample_bound(per_source_mean, ecc, lo, slack, connected, confidence)
        if intra is not None and inter is not None:
            intra = _scaled(intra, scale)
            inter = _scaled(inter, scale)
    return _finish_latency(values, counts, method, method != "sample", bound, intra, inter)


def _scaled(split: GroupSplit, scale: float) -> GroupSplit:
    counts = [int(round(c * scale)) for c in split.counts]
    return GroupSplit(sum(counts), split.average, split.maximum, split.values, counts)


def _merge(chunks: Iterable[tuple[FloatArray, I64]]) -> tuple[FloatArray, I64]:
    chunks = list(chunks)
    if not chunks:
        return np.zeros(0), np.zeros(0, np.int64)
    vals = np.concatenate([c[0] for c in chunks])
    cnts = np.concatenate([c[1] for c in chunks])
    uniq, inv = np.unique(vals, return_inverse=True)
    out = np.zeros(uniq.size, dtype=np.int64)
    np.add.at(out, inv, cnts)
    return uniq, out


def _lat_split(values: FloatArray, counts: I64) -> GroupSplit:
    pairs = int(counts.sum())
    return GroupSplit(
        pairs=pairs,
        average=float((values * counts).sum() / pairs) if pairs else 0.0,
        maximum=float(values.max()) if values.size else 0.0,
        values=[float(v) for v in values],
        counts=[int(c) for c in counts],
    )


def _finish_latency(
    values: FloatArray,
    counts: I64,
    method: str,
    exact: bool,
    bound: SampleBound | None,
    intra: GroupSplit | None,
    inter: GroupSplit | None,
) -> LatencyStats:
    pairs = int(counts.sum())
    avg = float((values * counts).sum() / pairs) if pairs else 0.0
    return LatencyStats(
        average_ns=avg,
        p50_ns=_quantile(values, counts, 0.5),
        p99_ns=_quantile(values, counts, 0.99),
        max_ns=float(values.max()) if values.size else 0.0,
        min_ns=float(values.min()) if values.size else 0.0,
        pairs=pairs,
        method=method,
        exact=exact,
        sample=bound,
        intra_group=intra,
        inter_group=inter,
        distribution={
            "values_ns": [float(v) for v in values],
            "pairs": [int(c) for c in counts],
        },
    )
