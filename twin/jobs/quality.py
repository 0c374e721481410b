"""How good a job's placement is: what it spans, and what its AllReduce costs there.

A job's cards are scored the way the topology-aware schedulers score them (Slurm's
topology/block plugins, Kubernetes' topology-aware scheduling): how many servers,
racks and supernodes it spans (fewer: more of its traffic stays on the scale-up
fabric), and whether it is **rail-aligned** — every server it uses holds the same
card slots, so the traffic between servers runs between NICs of the same rail
(slot *r* ↔ NIC *r* ↔ rail leaf *r*, NVIDIA's rail-optimised DGX SuperPOD
design) and never crosses to another rail's leaf.

The **predicted AllReduce time** prices one AllReduce of
``TWIN_JOBS_ALLREDUCE_BYTES`` (default 1 GiB: the bf16 gradients of a
0.5 B-parameter model, or one bucket series of a larger one) among the job's
cards *where they are*: the cluster is converted to the simulation's topology by
the scenarios' converter (:func:`twin.hardware.topology.cluster_input`), the job's
cards become rank nodes, and every flow of each algorithm (ring, double binary
tree, recursive halving/doubling, NVLS where the switches reduce) is routed on the
graph (:class:`simulation.collectives.RoutedLevel`, link contention included);
the fastest algorithm is reported, next to the same collective on the same number
of cards placed compactly (the first cards of the first supernode), so the
placement's cost is visible as a ratio. A cluster or a job too large to route
(``ROUTE_CELLS``), or one the converter cannot represent, gets no prediction and
says why.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.conf import settings

from simulation.collectives import CommFabric, RoutedLevel, algorithm_time, supported
from simulation.collectives.efficiency import fabric_efficiency
from simulation.collectives.routed import ROUTE_CELLS
from simulation.topology import Topology, TopologyError, from_spec
from twin.hardware.topology import ClusterInput, ConversionError, card_node, cluster_input

__all__ = ["ALGORITHMS", "MAX_PRICED_CARDS", "allreduce_time", "placement_quality"]

log = logging.getLogger(__name__)

ALGORITHMS = ("ring", "tree", "rhd", "nvls")
"""Single-level AllReduce algorithms priced on a placement (the torus algorithm needs
the ranks to fill a torus, which a scheduled job rarely does; it is tried when they do)."""
MAX_PRICED_CARDS = 65_536
"""Clusters up to this many cards are converted to a graph per placement (a 4,096-card
cluster takes well under a second); larger ones get no prediction."""


@dataclass(frozen=True)
class CardPlace:
    """Where one of the job's cards sits (what the quality reads)."""

    card: int
    server: int
    rack: int
    supernode: int
    supernode_index: int
    fabric: str
    index: int
    slot: int
    dims: tuple[int, int, int]
    xyz: tuple[int | None, int | None, int | None]


def allreduce_time(topo: Topology, ranks: np.ndarray, size: float) -> tuple[float, str]:
    """(seconds, algorithm) of the fastest single-level AllReduce of ``size`` bytes
    among ``ranks`` (node ids of ``topo``), every flow routed on the graph."""
    level = RoutedLevel("placement", topo, ranks.astype(np.int64), 0.0,
                        efficiency=fabric_efficiency(topo))
    domain = int(topo.params.get("nvls_domain", 0))
    if domain and ranks.size <= domain:
        level.nvls_ranks = int(ranks.size)
        level.nvls_efficiency = level.efficiency.nvls
    fabric = CommFabric([level])
    best = min((algorithm_time(fabric, "allreduce", name, size), name) for name in ALGORITHMS
               if supported(level, "allreduce", name) is None)
    return best


def _spans(places: list[CardPlace]) -> dict[str, Any]:
    servers: dict[int, set[int]] = {}
    for p in places:
        servers.setdefault(p.server, set()).add(p.slot)
    slot_sets = {frozenset(s) for s in servers.values()}
    return {
        "cards": len(places),
        "servers": len(servers),
        "racks": len({p.rack for p in places}),
        "supernodes": len({p.supernode for p in places}),
        "rail_aligned": len(servers) > 1 and len(slot_sets) == 1,
        "single_server": len(servers) == 1,
    }


def placement_quality(cluster_id: int, places: list[CardPlace]) -> dict[str, Any]:
    """Spans, rail alignment and the predicted AllReduce time of a placement."""
    out = _spans(places)
    out.update({"allreduce_s": None, "allreduce_algorithm": None, "compact_allreduce_s": None,
                "vs_compact": None, "allreduce_bytes": None, "allreduce_note": ""})
    if len(places) < 2:
        out["allreduce_note"] = "one card: no collective"
        return out
    size = float(getattr(settings, "TWIN_JOBS_ALLREDUCE_BYTES", 1 << 30))
    out["allreduce_bytes"] = int(size)
    try:
        info = cluster_input(cluster_id)
    except ConversionError as exc:
        out["allreduce_note"] = f"not priced: {exc.message}"
        return out
    if info.n_cards > MAX_PRICED_CARDS:
        out["allreduce_note"] = (f"not priced: {info.n_cards:,} cards is past the "
                                 f"{MAX_PRICED_CARDS:,} converted per placement")
        return out
    try:
        topo = from_spec(info.spec)
        if len(places) * topo.indices.size > ROUTE_CELLS:
            out["allreduce_note"] = (f"not priced: {len(places)} ranks on {topo.n_nodes:,} "
                                     f"nodes is too large to route")
            return out
        ranks = _rank_nodes(info, places)
        seconds, algorithm = allreduce_time(topo, ranks, size)
        compact, _ = allreduce_time(topo, np.arange(len(places), dtype=np.int64), size)
    except (ConversionError, TopologyError, ValueError) as exc:
        log.warning("AllReduce of a placement on cluster %s not priced: %s", cluster_id, exc)
        out["allreduce_note"] = f"not priced: {exc}"
        return out
    out.update({"allreduce_s": seconds, "allreduce_algorithm": algorithm,
                "compact_allreduce_s": compact,
                "vs_compact": seconds / compact if compact > 0 else None})
    return out


def _rank_nodes(info: ClusterInput, places: list[CardPlace]) -> np.ndarray:
    return np.asarray([card_node(info, p.supernode_index, p.fabric, p.index, p.dims, p.xyz)
                       for p in places], dtype=np.int64)
