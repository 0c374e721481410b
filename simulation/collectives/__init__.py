"""Collective-communication cost models on real topologies (see docs/simulation.md).

Quick tour::

    from simulation.topology import torus
    from simulation.collectives import collective_curve
    res = collective_curve(torus([8, 8, 8]), {"op": "allreduce", "sizes": [1 << 20]})
    res.best[0].algorithm, res.best[0].busbw_gbps
"""

from . import costs
from .fabric import (
    CommFabric,
    FlatLevel,
    Level,
    PatternCost,
    RoutedLevel,
    TorusLevel,
    UniformLevel,
    fabric_from_topology,
)
from .models import (
    ALGORITHMS,
    DEFAULT_SIZES,
    OPS,
    CollectivePoint,
    CollectiveResult,
    CollectiveSpec,
    algorithm_time,
    collective_curve,
    supported,
)

__all__ = [
    "ALGORITHMS",
    "DEFAULT_SIZES",
    "OPS",
    "CollectivePoint",
    "CollectiveResult",
    "CollectiveSpec",
    "CommFabric",
    "FlatLevel",
    "Level",
    "PatternCost",
    "RoutedLevel",
    "TorusLevel",
    "UniformLevel",
    "algorithm_time",
    "collective_curve",
    "costs",
    "fabric_from_topology",
    "supported",
]
