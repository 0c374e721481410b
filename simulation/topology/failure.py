"""Failure impact: remove links, cards or switches and measure what changed.

Removing a node removes every link at it; a removed card leaves the set of
pairs. Reported (ordered pairs of distinct *surviving* endpoints throughout):

* connectivity: partitions (components holding surviving endpoints), the
  largest one, isolated endpoints, and the disconnected pairs
  ``S² − Σ sizeᵢ²`` — exact, from one connected-components pass;
* the new average hop count and diameter over connected pairs, next to the
  old ones: exact (one BFS per surviving endpoint) up to ``exact_limit``
  endpoints, otherwise from ``samples`` random sources with the same error
  bounds as :func:`~simulation.topology.metrics.hop_stats`;
* pairs whose shortest path got longer: exact or, when sampled, estimated
  from the same sources (BFS before and after, paired);
* who lost bandwidth, summarised: endpoints whose own links lost capacity
  and the pairs that involve one (the max-flow between two endpoints is
  bounded by each endpoint's attached capacity, so those pairs lost
  bandwidth headroom); groups (supernodes) whose links to the shared network
  lost capacity and the cross-group pairs that involve them. Pairs whose
  max-flow dropped for other reasons (a cut deeper inside the network) are
  not enumerated: that needs n−1 max-flows (Gomory–Hu), a stated limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.sparse import csgraph

from .graph import NodeKind, Topology, TopologyError
from .metrics import (
    DEFAULT_CONFIDENCE,
    DEFAULT_SAMPLES,
    EXACT_LIMIT,
    SampleBound,
    hop_stats,
    sample_bound,
)
from .search import hop_distances

__all__ = ["FailureImpact", "FailureSpec", "failure_impact"]


@dataclass(frozen=True)
class FailureImpact:
    """What a set of failures did (see the module docstring)."""

    removed_links: int
    removed_nodes: dict[str, int]
    surviving_endpoints: int
    connected: bool
    partitions: int
    largest_partition: int
    isolated_endpoints: int
    pairs_disconnected: int
    average_before: float
    diameter_before: int
    average_after: float
    diameter_after: int
    exact: bool
    method: str
    sample: SampleBound | None
    pairs_longer: int
    endpoints_degraded: int
    pairs_with_degraded_endpoint: int
    groups_degraded: int
    cross_pairs_with_degraded_group: int
    worst_groups: list[dict[str, float]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True)
class FailureSpec:
    """The failure scenario as plain data (what the REST API accepts).

    ``{"links": [3, 17], "nodes": [5], "random_links": 100, "seed": 1}``;
    ``link_pairs`` as ``[[a, b], …]``. Ranges are checked against the
    topology by :func:`failure_impact` (a per-field error names the list).
    """

    links: tuple[int, ...] = ()
    link_pairs: tuple[tuple[int, int], ...] = ()
    nodes: tuple[int, ...] = ()
    random_links: int = 0
    random_cards: int = 0
    random_switches: int = 0
    seed: int = 0
    samples: int = DEFAULT_SAMPLES

    @classmethod
    def from_dict(cls, data: Any, path: str = "") -> FailureSpec:
        """Validate types and signs; errors name the field."""
        if not isinstance(data, dict):
            raise TopologyError(path or "params", "must be an object")
        allowed = [f for f in cls.__dataclass_fields__]
        for key in data:
            if key not in allowed:
                raise TopologyError(
                    f"{path}{key}", f"unknown field (allowed: {', '.join(allowed)})"
                )

        def ints(key: str) -> tuple[int, ...]:
            raw = data.get(key, [])
            if not isinstance(raw, list | tuple):
                raise TopologyError(f"{path}{key}", "a list of integer ids")
            for i, x in enumerate(raw):
                if isinstance(x, bool) or not isinstance(x, int):
                    raise TopologyError(f"{path}{key}[{i}]", f"an integer id, got {x!r}")
            return tuple(raw)

        def count(key: str, default: int, minimum: int = 0) -> int:
            x = data.get(key, default)
            if isinstance(x, bool) or not isinstance(x, int) or x < minimum:
                raise TopologyError(f"{path}{key}", f"an integer ≥ {minimum}, got {x!r}")
            return x

        pairs_raw = data.get("link_pairs", [])
        if not isinstance(pairs_raw, list | tuple):
            raise TopologyError(f"{path}link_pairs", "a list of [a, b] node pairs")
        pairs = []
        for i, pair in enumerate(pairs_raw):
            ok = isinstance(pair, list | tuple) and len(pair) == 2
            if not ok or any(isinstance(x, bool) or not isinstance(x, int) for x in pair):
                raise TopologyError(
                    f"{path}link_pairs[{i}]", f"a pair [a, b] of node ids, got {pair!r}"
                )
            pairs.append((int(pair[0]), int(pair[1])))
        return cls(
            links=ints("links"),
            link_pairs=tuple(pairs),
            nodes=ints("nodes"),
            random_links=count("random_links", 0),
            random_cards=count("random_cards", 0),
            random_switches=count("random_switches", 0),
            seed=count("seed", 0),
            samples=count("samples", DEFAULT_SAMPLES, 2),
        )

    def run(self, topo: Topology, *, exact_limit: int = EXACT_LIMIT) -> FailureImpact:
        """Apply this scenario to ``topo``."""
        return failure_impact(
            topo,
            links=list(self.links),
            link_pairs=list(self.link_pairs),
            nodes=list(self.nodes),
            random_links=self.random_links,
            random_cards=self.random_cards,
            random_switches=self.random_switches,
            seed=self.seed,
            samples=self.samples,
            exact_limit=exact_limit,
        )


def _as_ids(values: Sequence[int] | None, limit: int, name: str) -> npt.NDArray[np.int64]:
    if not values:
        return np.zeros(0, np.int64)
    arr = np.asarray(values)
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise TopologyError(name, "a list of integer ids")
    arr = arr.astype(np.int64)
    bad = arr[(arr < 0) | (arr >= limit)]
    if bad.size:
        raise TopologyError(name, f"id {int(bad[0])} does not exist (valid: 0…{limit - 1})")
    return np.unique(arr)


def _random(
    rng: np.random.Generator, pool: npt.NDArray[np.int64], count: int, name: str, what: str
) -> npt.NDArray[np.int64]:
    if count < 0:
        raise TopologyError(name, "must be ≥ 0")
    if count > pool.size:
        raise TopologyError(name, f"cannot remove {count} {what}: only {pool.size} exist")
    return rng.choice(pool, size=count, replace=False) if count else np.zeros(0, np.int64)


def failure_impact(
    topo: Topology,
    *,
    links: Sequence[int] | None = None,
    link_pairs: Sequence[tuple[int, int]] | None = None,
    nodes: Sequence[int] | None = None,
    random_links: int = 0,
    random_cards: int = 0,
    random_switches: int = 0,
    seed: int = 0,
    exact_limit: int = EXACT_LIMIT,
    samples: int = DEFAULT_SAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
) -> FailureImpact:
    """Remove the chosen and/or random links, cards and switches; report impact.

    ``links`` are link ids, ``link_pairs`` node pairs (a, b) that must be
    linked, ``nodes`` any node ids. Random picks are drawn (with ``seed``)
    among the elements not already chosen.
    """
    rng = np.random.default_rng(seed)
    dead_links = np.zeros(topo.n_links, dtype=bool)
    dead_links[_as_ids(links, topo.n_links, "links")] = True
    for i, pair in enumerate(link_pairs or ()):
        a, b = (int(x) for x in pair)
        topo.check_node(a, f"link_pairs[{i}]")
        topo.check_node(b, f"link_pairs[{i}]")
        lid = topo.link_between(a, b)
        if lid < 0:
            raise TopologyError(f"link_pairs[{i}]", f"there is no link between {a} and {b}")
        dead_links[lid] = True
    dead_nodes = np.zeros(topo.n_nodes, dtype=bool)
    dead_nodes[_as_ids(nodes, topo.n_nodes, "nodes")] = True
    alive_links = np.flatnonzero(~dead_links).astype(np.int64)
    dead_links[_random(rng, alive_links, random_links, "random_links", "links")] = True
    cards = np.flatnonzero(~dead_nodes[: topo.n_endpoints]).astype(np.int64)
    dead_nodes[_random(rng, cards, random_cards, "random_cards", "cards")] = True
    switches = np.flatnonzero(~dead_nodes[topo.n_endpoints :]).astype(np.int64) + topo.n_endpoints
    dead_nodes[_random(rng, switches, random_switches, "random_switches", "switches")] = True
    dead_links |= dead_nodes[topo.link_u] | dead_nodes[topo.link_v]

    after = topo.without_links(dead_links)
    n = topo.n_endpoints
    alive = ~dead_nodes[:n]
    survivors = np.flatnonzero(alive)
    s = int(survivors.size)

    # connectivity
    _, labels = csgraph.connected_components(after.adjacency(), directed=True, connection="weak")
    sizes = np.bincount(labels[survivors])
    sizes = sizes[sizes > 0]
    pairs_disconnected = s * s - int((sizes.astype(np.int64) ** 2).sum())

    # before: exact (closed form / symmetry) or as hop_stats decides
    before = hop_stats(topo, exact_limit=exact_limit, samples=samples, seed=seed)

    # after, and paired "got longer"
    exact = s <= exact_limit
    if exact:
        sources = survivors
    else:
        sources = rng.choice(survivors, size=min(samples, s), replace=False)
    hist = np.zeros(1, np.int64)
    longer = 0
    means: list[float] = []
    ecc: list[int] = []
    for src in sources:
        d_after = hop_distances(after, int(src))[:n]
        d_before = hop_distances(topo, int(src))[:n]
        ok = alive & (d_after > 0)
        hist = _add(hist, np.bincount(d_after[ok]).astype(np.int64))
        longer += int((ok & (d_after > d_before)).sum())
        if ok.any():
            means.append(float(d_after[ok].mean()))
            ecc.append(int(d_after[ok].max()))
    bound = None
    if not exact and sources.size:
        scale = s / sources.size
        longer = int(round(longer * scale))
        bound = sample_bound(
            means, [float(e) for e in ecc], 1.0, 0.0, pairs_disconnected == 0, confidence
        )
    total = int((hist * np.arange(hist.size)).sum())
    npairs = int(hist.sum())
    avg_after = total / npairs if npairs else 0.0

    # bandwidth losses, summarised
    lost = np.zeros(topo.n_nodes, np.float64)
    gb = topo.link_gbps.astype(np.float64)
    np.add.at(lost, topo.link_u[dead_links], gb[dead_links])
    np.add.at(lost, topo.link_v[dead_links], gb[dead_links])
    degraded = alive & (lost[:n] > 0)
    n_deg = int(degraded.sum())
    pairs_deg = s * (s - 1) - (s - n_deg) * (s - n_deg - 1)

    grp = topo.group
    worst: list[dict[str, float]] = []
    groups_degraded = cross_pairs = 0
    if n and int(grp[:n].min()) >= 0:
        up = (grp[topo.link_u] >= 0) != (grp[topo.link_v] >= 0)  # group ↔ shared network
        owner = np.where(grp[topo.link_u] >= 0, grp[topo.link_u], grp[topo.link_v]).astype(np.int64)
        n_groups = int(grp.max()) + 1
        cap = np.bincount(owner[up], weights=gb[up], minlength=n_groups)
        cap_lost = np.bincount(
            owner[up & dead_links], weights=gb[up & dead_links], minlength=n_groups
        )
        hit = np.flatnonzero(cap_lost > 0)
        groups_degraded = int(hit.size)
        alive_per_group = np.bincount(grp[:n][alive], minlength=n_groups).astype(np.int64)
        sq = alive_per_group**2
        healthy = np.ones(n_groups, dtype=bool)
        healthy[hit] = False
        m = int(alive_per_group[healthy].sum())
        # cross-group pairs minus cross-group pairs between healthy groups
        cross_pairs = (s * s - int(sq.sum())) - (m * m - int(sq[healthy].sum()))
        order = hit[np.argsort(-(cap_lost[hit] / cap[hit]))][:10]
        worst = [
            {
                "group": int(g),
                "uplink_gbps": float(cap[g]),
                "lost_gbps": float(cap_lost[g]),
                "lost_share": float(cap_lost[g] / cap[g]),
            }
            for g in order
        ]
    kinds = {
        NodeKind(k).name.lower(): int(c)
        for k, c in enumerate(
            np.bincount(topo.node_kind[dead_nodes].astype(np.int64), minlength=len(NodeKind))
        )
        if c
    }
    return FailureImpact(
        removed_links=int(dead_links.sum()),
        removed_nodes=kinds,
        surviving_endpoints=s,
        connected=sizes.size <= 1,
        partitions=int(sizes.size),
        largest_partition=int(sizes.max()) if sizes.size else 0,
        isolated_endpoints=int((sizes == 1).sum()),
        pairs_disconnected=pairs_disconnected,
        average_before=before.average,
        diameter_before=before.diameter,
        average_after=avg_after,
        diameter_after=int(hist.size - 1) if npairs else 0,
        exact=exact,
        method="bfs" if exact else "sample",
        sample=bound,
        pairs_longer=longer,
        endpoints_degraded=n_deg,
        pairs_with_degraded_endpoint=pairs_deg,
        groups_degraded=groups_degraded,
        cross_pairs_with_degraded_group=cross_pairs,
        worst_groups=worst,
    )


def _add(a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    if b.size > a.size:
        a = np.pad(a, (0, b.size - a.size))
    a[: b.size] += b
    return a
