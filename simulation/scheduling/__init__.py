"""Cluster scheduling simulation: policies, a discrete-event replay, trace readers.

Quick tour (a doctest: ``pytest`` runs it)::

    >>> from simulation.scheduling import Nodes, simulate, synthetic_workload
    >>> nodes = Nodes.uniform(16, 8)                     # 128 cards
    >>> work = synthetic_workload(400, seed=0)
    >>> r = simulate(nodes, work, "fgd")                 # arrival-only, to 130 % load
    >>> r.curve[-1][0] >= 1.3, 0.8 < r.gpu_allocation_rate <= 1.0
    (True, True)

See docs/simulation.md ("Scheduling") for the policies, the fragmentation measure,
the FGD comparison and the AllReduce check. :mod:`.openb` replays an Alibaba pod list by
the FGD artifact's own rules, to compare with its published figures.
"""

from .allreduce import AllReducePrice, default_allreduce, torus_allreduce
from .cluster import DEFAULT_VF_LIMIT, Nodes
from .engine import MODES, SimResult, place, simulate
from .errors import SchedulingInputError, TraceError
from .fragmentation import TaskTypes, node_fragmentation
from .policies import POLICIES
from .traces import read_alibaba_nodes, read_alibaba_pods, read_helios, read_philly
from .workload import ALIBABA_DEFAULT_MIX, Workload, synthetic_workload

__all__ = [
    "ALIBABA_DEFAULT_MIX",
    "DEFAULT_VF_LIMIT",
    "MODES",
    "POLICIES",
    "AllReducePrice",
    "Nodes",
    "SchedulingInputError",
    "SimResult",
    "TaskTypes",
    "TraceError",
    "Workload",
    "default_allreduce",
    "node_fragmentation",
    "place",
    "read_alibaba_nodes",
    "read_alibaba_pods",
    "read_helios",
    "read_philly",
    "simulate",
    "synthetic_workload",
    "torus_allreduce",
]
