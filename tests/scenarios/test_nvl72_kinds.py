"""The scenario kinds on a small GB200 NVL72 cluster (two racks of 72, as the builder writes it).

Conversion (one full-mesh NVLink domain of 72 per rack, NVLink 5, NVLS; InfiniBand
with SHARP, one NIC per GPU), then topology, route, collective and failure runs,
each checked against the database's own link rows or a published figure.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse import csgraph

from simulation.topology import AccessSpec, FabricSpec, cluster
from simulation.topology.search import hop_distances
from tests.scenarios.test_inputs import db_topology
from twin.hardware.models import Card, Cluster, Link
from twin.scenarios.inputs import cluster_input
from twin.scenarios.kinds import get_kind

GIB = 1 << 30


@pytest.fixture
def nvl72_cluster(db) -> Cluster:
    from twin.hardware.builder import build_cluster

    result = build_cluster("gb200-nvl72", name="scen-nvl72", supernodes=2)
    return Cluster.objects.get(pk=result["cluster_id"])


def run(name: str, params: dict, on: Cluster) -> dict:
    kind = get_kind(name)
    return kind.run(kind.prepare(params, on), lambda fraction, message: None)


def card(on: Cluster, rack: int, index: int) -> Card:
    return Card.objects.get(supernode__cluster=on, supernode__index=rack, index=index)


def test_an_nvl72_cluster_converts_to_72_card_nvlink5_domains(nvl72_cluster):
    info = cluster_input(nvl72_cluster)
    (group,) = info.spec.supernodes
    assert group.count == 2
    # the NVLink switch as its non-blocking equivalent: every GPU of the rack one hop
    # from every other, each held to its 900 GB/s per direction; NVLS in the switch
    assert group.fabric == FabricSpec("full_mesh", (72,), 7200.0, 250.0, 0.0, card_gbps=7200.0,
                                      technology="nvlink5", in_switch_reduction=True)
    net = info.spec.network
    assert net.access == AccessSpec(cards_per_switch=4, link_gbps=504.0, link_ns=20.0,
                                    switch_ns=0.0, nic_per_card=True)
    assert (net.technology, net.in_network_reduction) == ("infiniband", True)
    topo = cluster(info.spec)
    assert topo.params["nvls_domain"] == 72
    assert topo.n_links == Link.objects.filter(cluster=nvl72_cluster).count()


def test_topology_hops_are_those_of_the_link_rows(nvl72_cluster):
    result = run("topology", {}, nvl72_cluster)
    exact, _ = db_topology(nvl72_cluster.pk)
    n = exact.n_endpoints
    hops = csgraph.shortest_path(exact.adjacency(), unweighted=True, indices=np.arange(n))[:, :n]
    off = ~np.eye(n, dtype=bool)
    assert result["hop_histogram"] == np.bincount(hops[off].astype(np.int64)).tolist()
    assert result["diameter_hops"] == int(hops[off].max())
    # inside a rack every pair is one NVLink hop apart
    assert result["hops"]["intra_group"]["values"] == [1.0]
    assert result["hops"]["intra_group"]["pairs"] == 2 * 72 * 71


@pytest.mark.parametrize(("a", "b", "hops"), [
    ((0, 5), (0, 70), 1),   # same rack: the NVLink domain
    ((0, 3), (1, 3), None),  # other rack, the same rail: over InfiniBand
])
def test_route_between_gpus(nvl72_cluster, a, b, hops):
    src, dst = card(nvl72_cluster, *a), card(nvl72_cluster, *b)
    result = run("route", {"src": src.pk, "dst": dst.pk}, nvl72_cluster)
    exact, node_of = db_topology(nvl72_cluster.pk)
    want = int(hop_distances(exact, node_of[src.pk])[node_of[dst.pk]])
    assert result["reachable"] and result["hops"] == want
    if hops is not None:
        assert want == hops
    else:
        labels = [label.split()[0] for label in result["labels"]]
        assert labels[0] == labels[-1] == "card" and "nic" in labels and want >= 4


def test_collective_on_one_rack_matches_the_published_nvl72_figure(nvl72_cluster):
    """coreweave/nccl-tests pull request 43: all_reduce_perf on a full GB200 NVL72 rack,
    busbw 834.57 GB/s at 8 GiB (NVLS)."""
    result = run("collective", {"op": "allreduce", "ranks": 72, "sizes": [8 * GIB]},
                 nvl72_cluster)
    (row,) = result["sizes"]
    assert row["algorithm"] == "nvls"
    assert row["busbw_GBps"] == pytest.approx(834.57, rel=0.02)


def test_collective_across_racks_uses_nvls_with_sharp(nvl72_cluster):
    result = run("collective", {"op": "allreduce", "sizes": [8 * GIB]}, nvl72_cluster)
    inner, outer = result["levels"]
    assert (inner["ranks"], inner["nvls"], outer["ranks"]) == (72, True, 2)
    assert outer["in_network_reduction"]
    (row,) = result["sizes"]
    assert row["algorithm"] == "nvls" and result["ranks"] == 144
    # the racks' 400G NICs keep up with NVLS: two racks run near one rack's busbw
    assert 0.9 * 834.57 <= row["busbw_GBps"] <= 834.57 * 1.02


def test_failing_one_gpu_degrades_its_rack_only(nvl72_cluster):
    gone = card(nvl72_cluster, 0, 0)
    result = run("failure", {"cards": [gone.serial]}, nvl72_cluster)
    assert result["connected"] and result["surviving_endpoints"] == 143
    # its 71 NVLinks and its NIC link go; its 71 rack peers lose a neighbour
    assert result["removed_links"] == 72 and result["endpoints_degraded"] == 71
    assert result["pairs_disconnected"] == 0 and result["pairs_longer"] == 0


def test_the_training_model_sees_72_card_nvlink_domains(nvl72_cluster):
    """What the training kinds read of the cluster: one scale-up domain per rack (72),
    NVLink 5 at 900 GB/s per direction, one 400G NIC per GPU, the catalogue figures
    with ``nvlink_domain_cards``; a step prices on it."""
    from twin.scenarios.hardware import cluster_hardware

    hw = cluster_hardware(nvl72_cluster)
    assert (hw.scale_up_kind, hw.scale_up_domain, hw.cards_per_server) == ("full_mesh", 72, 4)
    assert (hw.scale_up_gbps, hw.scale_up_technology) == (7200.0, "nvlink5")
    assert (hw.scale_out_gbps, hw.scale_out_technology) == (400.0, "infiniband")
    assert hw.accelerator["nvlink_domain_cards"] == 72
    assert hw.accelerator["fp4_tflops"] == 10_000
    result = run("training", {"model": "llama3-8b", "global_batch": 144}, nvl72_cluster)
    assert result["step_time_s"] > 0 and 0 < result["mfu"] < 1
