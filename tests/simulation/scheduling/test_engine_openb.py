"""The general scheduling engine on the FGD artifact's openb experiment (issue 25 item 5).

The engine's best-fit, dot-product, GPU packing, GPU clustering and FGD are the artifact's
score plugins (simulation/scheduling/scores.py, shared with openb.py); with the artifact's
arrival process (``simulate(..., shuffle=True)``) and measurement
(``SimResult.allocation_at``) it places every pod where openb.py's per-node replay does,
and its allocation ratios at 130 % arrived load sit within 1 point of the published ones
(hkust-adsl/kubernetes-scheduler-simulator commit 8f3d641,
``experiments/analysis/expected_results/analysis_allo_discrete.csv``), FGD first.
"""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from simulation.scheduling import read_alibaba_nodes, read_alibaba_pods
from simulation.scheduling.cluster import Nodes
from simulation.scheduling.engine import simulate
from simulation.scheduling.openb import OPENB_POLICIES, artifact_node_order, replay
from simulation.scheduling.workload import Workload

from .test_openb import PACKING_SEEDS, PUBLISHED_AT_130

FIX = Path(__file__).parent / "fixtures"


def quarter_nodes() -> Nodes:
    """Every fourth node of the openb list (304 nodes, 1,548 cards: the GPU-model mix
    kept). The artifact defines a load level against the cluster's cards
    (``TunePodsByNodeTotalResource``), so the pod list is tuned down to 130 % of these."""
    lines = (FIX / "openb_node_list_gpu_node.csv").read_text().splitlines()
    return read_alibaba_nodes(io.StringIO("\n".join([lines[0], *lines[1::4]])))


def pods(name: str) -> Workload:
    with open(FIX / f"openb_pod_list_{name}.csv") as fh:
        return read_alibaba_pods(fh)


def engine_ratio(nodes: Nodes, work: Workload, policy: str, seed: int,
                 artifact_ties: bool = False) -> float:
    """With ``artifact_ties`` the nodes are first put in the artifact's seeded random tie
    order (``openb.artifact_node_order``): the engine's lowest-index ties are then its."""
    if artifact_ties:
        nodes = artifact_node_order(nodes, seed)
    return simulate(nodes, work, policy, seed=seed, shuffle=True).allocation_at(130)


@pytest.mark.parametrize("policy", OPENB_POLICIES)
def test_engine_places_every_pod_where_the_per_node_replay_does(policy) -> None:  # type: ignore[no-untyped-def]
    """Scoring distinct node states (the engine) is scoring nodes (openb.py): same node for
    every pod, same failures, same ratio — random included (the same generator draws)."""
    nodes = quarter_nodes()
    work = pods("default")
    r = simulate(nodes, work, policy, seed=43, shuffle=True, keep_placements=True)
    o = replay(nodes, work, policy, seed=43, ties="index")
    got = np.array([r.placements[s][0][0] if s in r.placements else -1
                    for s in range(len(o.node))])
    assert r.jobs["arrived"] == len(o.node) and r.jobs["failed"] == o.failed
    assert (got == o.node).all(), (policy, int(np.flatnonzero(got != o.node)[0]))
    assert r.allocation_at(130) == o.allocation_at(130)


@pytest.mark.parametrize("trace", ["default", "multigpu50"])
def test_fgd_ahead_of_best_fit_and_packing_on_a_quarter_cluster(trace) -> None:  # type: ignore[no-untyped-def]
    """Means over the artifact's first five seeds (one seed of GPU packing on multigpu50
    beats FGD by 0.05: the comparison is of means, as the paper's)."""
    nodes = quarter_nodes()
    work = pods(trace)
    mean = {p: float(np.mean([engine_ratio(nodes, work, p, s) for s in PACKING_SEEDS]))
            for p in ("fgd", "best-fit", "gpu-packing")}
    assert mean["fgd"] > mean["best-fit"] + 0.5, mean
    assert mean["fgd"] > mean["gpu-packing"] + 0.5, mean


@pytest.mark.timeout(300)  # 3–5 s per list measured on the loaded shared machine
@pytest.mark.parametrize("trace", ["default", "multigpu50"])
def test_full_trace_within_one_point_of_the_published_ratios_fgd_first(trace) -> None:  # type: ignore[no-untyped-def]
    nodes = read_alibaba_nodes(open(FIX / "openb_node_list_gpu_node.csv"))
    work = pods(trace)
    pub = PUBLISHED_AT_130[trace]
    ours = {
        "fgd": engine_ratio(nodes, work, "fgd", 42, artifact_ties=True),
        "best-fit": engine_ratio(nodes, work, "best-fit", 42, artifact_ties=True),
        "gpu-packing": float(np.mean([engine_ratio(nodes, work, "gpu-packing", s,
                                                   artifact_ties=True)
                                      for s in PACKING_SEEDS])),
    }
    for policy, value in ours.items():
        assert abs(value - pub[policy]) <= 1.0, (trace, policy, value, pub[policy])
    assert ours["fgd"] > ours["best-fit"] and ours["fgd"] > ours["gpu-packing"]
