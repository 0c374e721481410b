"""Topology builders and exact metrics for ring, torus, mesh, full mesh, star,
fat tree and whole clusters (pure library; see docs/simulation.md).

Quick tour (a doctest: ``pytest`` runs it)::

    >>> from simulation.topology import ring, torus, hop_stats
    >>> hop_stats(ring(512)).average_fraction()         # ≈ 128.25
    Fraction(65536, 511)
    >>> hop_stats(torus([8, 8, 8])).average_fraction()  # ≈ 6.01
    Fraction(3072, 511)

    >>> from simulation.topology import cluster, demo_cluster_spec, analyze
    >>> result = analyze(cluster(demo_cluster_spec()))  # 4,096 cards
    >>> result["cards"], result["avg_hops_exact"], result["method"]
    (4096, '10408/1365', 'symmetry')

The same on ``million_cluster_spec()`` (1,048,576 cards) is exact by symmetry
too and takes a few seconds (tests/simulation/test_topology.py checks it).
"""

from .analysis import analyze, fabric_family, spec_from_dict, topology_from_dict
from .bisection import Bisection, bisection, cut_of, exhaustive_bisection
from .builders import build, fat_tree, full_mesh, mesh, ring, star, torus
from .cluster import cluster, from_spec
from .failure import FailureImpact, FailureSpec, failure_impact
from .graph import NodeKind, Topology, TopologyError
from .metrics import (
    GroupSplit,
    HopStats,
    LatencyStats,
    SampleBound,
    hop_stats,
    latency_stats,
    pick_method,
)
from .requirements import SEED_REQUIREMENTS, LatencyRequirement, RequirementCheck, check_latency
from .routing import Route, route
from .search import hop_distances, latency_distances
from .spec import (
    AccessSpec,
    ClusterSpec,
    FabricSpec,
    FamilySpec,
    NetworkSpec,
    NicSpec,
    SupernodeSpec,
    TierSpec,
    demo_cluster_spec,
    million_cluster_spec,
)

__all__ = [
    "SEED_REQUIREMENTS",
    "AccessSpec",
    "Bisection",
    "ClusterSpec",
    "FabricSpec",
    "FailureImpact",
    "FailureSpec",
    "FamilySpec",
    "GroupSplit",
    "HopStats",
    "LatencyRequirement",
    "LatencyStats",
    "NetworkSpec",
    "NicSpec",
    "NodeKind",
    "RequirementCheck",
    "Route",
    "SampleBound",
    "SupernodeSpec",
    "TierSpec",
    "Topology",
    "TopologyError",
    "analyze",
    "bisection",
    "build",
    "check_latency",
    "cluster",
    "cut_of",
    "demo_cluster_spec",
    "exhaustive_bisection",
    "fabric_family",
    "failure_impact",
    "fat_tree",
    "from_spec",
    "full_mesh",
    "hop_distances",
    "hop_stats",
    "latency_distances",
    "latency_stats",
    "mesh",
    "million_cluster_spec",
    "pick_method",
    "ring",
    "route",
    "spec_from_dict",
    "star",
    "topology_from_dict",
    "torus",
]
