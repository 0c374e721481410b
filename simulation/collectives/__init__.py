"""Collective-communication cost models on real topologies (see docs/simulation.md).

Quick tour (a doctest: ``pytest`` runs it)::

    >>> from simulation.topology import torus
    >>> from simulation.collectives import collective_curve
    >>> res = collective_curve(torus([8, 8, 8]), {"op": "allreduce", "sizes": [1 << 20]})
    >>> best = res.best[0]                 # the fastest algorithm for 1 MiB
    >>> best.algorithm, round(best.busbw_gbps)
    ('torus', 792)
"""

from . import costs
from .fabric import CommFabric, fabric_from_topology
from .levels import FlatLevel, Level, PatternCost, TorusLevel, UniformLevel
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
from .routed import RoutedLevel

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
