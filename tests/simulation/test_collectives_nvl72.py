"""Collectives on a 72-card NVLink domain (GB200 NVL72) and across such domains.

Each closed form of ``costs`` is checked against the step-by-step model; each
published figure within a stated tolerance, its source in the test's docstring.
"""
from __future__ import annotations

import math
from typing import Any

import pytest

from simulation.collectives import algorithm_time, collective_curve, costs, fabric_from_topology
from simulation.collectives.efficiency import (
    NVLS_EFFICIENCY,
    NVLS_EFFICIENCY_BY_TECHNOLOGY,
    PROTOCOL_EFFICIENCY,
)
from simulation.topology import ClusterSpec, TopologyError, cluster

GIB = 1 << 30
NVL5 = 900e9  # NVLink 5: 1.8 TB/s bidirectional per GPU = 900 GB/s per direction


def nvl72(racks: int = 1, *, sharp: bool = True, nic_gbps: float = 400.0) -> Any:
    """``racks`` NVL72 racks as the twin converts the gb200-nvl72 preset: one full-mesh
    NVLink domain of 72 GPUs per rack (the NVLink switch's non-blocking equivalent),
    one NIC per GPU on a rail-optimised InfiniBand leaf–spine."""
    return cluster(ClusterSpec.from_dict({
        "name": "nvl72",
        "supernodes": [{"count": racks, "fabric": {
            "kind": "full_mesh", "dims": [72], "link_gbps": 7200, "link_ns": 250,
            "switch_ns": 0, "card_gbps": 7200, "technology": "nvlink5",
            "in_switch_reduction": True}}],
        "network": {
            "access": {"cards_per_switch": 4, "link_gbps": 504, "link_ns": 20, "switch_ns": 0,
                       "nic_per_card": True},
            "aggregation": {"nics_per_switch": 4, "link_gbps": 504, "link_ns": 20,
                            "nic_ns": 300},
            "core": [{"name": "leaf", "radix": 64, "link_gbps": nic_gbps, "link_ns": 50,
                      "switch_ns": 130},
                     {"name": "spine", "radix": 64, "link_gbps": nic_gbps, "link_ns": 100,
                      "switch_ns": 130}],
            "technology": "infiniband", "in_network_reduction": sharp}}))


def busbw(topo: Any, ranks: int, algorithm: str, size: int = 8 * GIB) -> float:
    res = collective_curve(topo, {"op": "allreduce", "ranks": ranks, "sizes": [size],
                                  "algorithm": algorithm})
    return res.best[0].busbw_GBps


# ------------------------------------------------------------ closed forms
def test_nvls_across_reduces_to_nvls_in_one_domain_and_takes_the_slower_tier():
    s, a, b_in, b_out = float(GIB), 2e-6, 1 / 400e9, 1 / 50e9
    assert costs.nvls_across_allreduce(72, 1, s, a, b_in, b_out, in_network=True) == \
        costs.nvls_allreduce(72, s, a, b_in)
    # α = 0: the bandwidth term alone, the slower of the two tiers
    inner = s * (1 + 1 / 72) * b_in
    assert costs.nvls_across_allreduce(72, 8, s, 0.0, b_in, b_out, in_network=True) == \
        pytest.approx(max(inner, s / 72 * b_out))
    # a slow network: SHARP sends the slice once, a double binary tree twice (p1 ≥ 4)
    slow = 1 / 2e9
    sharp = costs.nvls_across_allreduce(72, 8, s, 0.0, b_in, slow, in_network=True)
    tree = costs.nvls_across_allreduce(72, 8, s, 0.0, b_in, slow, in_network=False)
    assert sharp == pytest.approx(s / 72 * slow) and tree == pytest.approx(2 * s / 72 * slow)
    # with latency: 2 stages inside plus 2 (SHARP) or 2⌈log₂ p1⌉ (tree) across
    assert costs.nvls_across_allreduce(72, 8, s, a, b_in, slow, in_network=True) == \
        costs.pipelined(4, a, s / 72 * slow)
    assert costs.nvls_across_allreduce(72, 8, s, a, b_in, slow, in_network=False) == \
        costs.pipelined(2 + 6, a, 2 * s / 72 * slow)


def test_a_72_card_domain_prices_nvls_by_its_closed_form():
    """Every GPU of the rack at its full NVLink 5 rate: NVLS moves S(1 + 1/p) per GPU
    and direction at 900 GB/s × the NVLink 5 NVLS efficiency, for any p ≤ 72."""
    topo = nvl72()
    assert topo.params["nvls_domain"] == 72
    rate = NVL5 * NVLS_EFFICIENCY_BY_TECHNOLOGY["nvlink5"]
    for p in (2, 8, 36, 72):
        fab = fabric_from_topology(topo, p)
        (level,) = fab.levels
        assert level.nvls_ranks == p and level.card_scale_up_gbps() == 7200
        got = algorithm_time(fab, "allreduce", "nvls", GIB)
        assert got == pytest.approx(
            costs.nvls_allreduce(p, GIB, level.cost("ring").alpha_s, 1 / rate), rel=1e-9)


def test_the_ring_on_a_72_card_domain_runs_at_the_nvlink5_line_rate():
    """Ring busbw tends to the card's per-direction rate × the NVLink 5 protocol
    efficiency: 900 × 0.86 = 774 GB/s (nvbandwidth measures ~770 GB/s GPU to GPU on
    GB200, Azure/AI-benchmarking-guide issue 7)."""
    assert busbw(nvl72(), 72, "ring") == pytest.approx(
        NVL5 / 1e9 * PROTOCOL_EFFICIENCY["nvlink5"], rel=0.01)


# ------------------------------------------------------- published figures
@pytest.mark.parametrize("size, published", [(4 * GIB, 839.16), (8 * GIB, 834.57)])
def test_nvls_on_a_full_nvl72_rack_matches_nccl_tests(size, published):
    """coreweave/nccl-tests pull request 43 ("Add a GB200 NVL72 example"): all_reduce_perf
    on a full GB200 NVL72 rack (72 GPUs, NVLS), out-of-place busbw 839.16 GB/s at 4 GiB and
    834.57 GB/s at 8 GiB. The NVLink 5 NVLS efficiency is calibrated on the 8 GiB point
    (docs/simulation.md); the 4 GiB point checks it. NCCL picks NVLS there: so does the
    model."""
    topo = nvl72()
    assert busbw(topo, 72, "nvls", size) == pytest.approx(published, rel=0.02)
    res = collective_curve(topo, {"op": "allreduce", "sizes": [size]})
    assert res.best[0].algorithm == "nvls"


def test_nvidias_gb200_figures_within_15_percent():
    """NVIDIA, GTC25 S72583: GB200 NVL72 AllReduce busbw ~850 GB/s with NVLS, ~680 GB/s
    with the ring (as quoted in docs/simulation.md). NVLS within 3 %; the ring runs
    14 % high (the NVLink 5 efficiency is a copy figure; docs/simulation.md), inside the
    15 % band the other nccl-tests rows hold."""
    topo = nvl72()
    assert busbw(topo, 72, "nvls") == pytest.approx(850, rel=0.03)
    assert busbw(topo, 72, "ring") == pytest.approx(680, rel=0.15)


def test_the_hopper_calibration_is_unchanged():
    """NVLink 4 keeps the H100's NVLS efficiency (NVIDIA/nccl-tests issue 212: ~480 GB/s
    busbw on 8 H100); NVLink 5's is its own, not the H100's 0.69, which would predict
    busbw ≈ 1,208 GB/s on the NVL72 rack instead of the 835 measured."""
    assert NVLS_EFFICIENCY_BY_TECHNOLOGY["nvlink"] == NVLS_EFFICIENCY == 0.69
    hopper_guess = NVL5 * 0.69 / (1 + 1 / 72) * 2 * 71 / 72 / 1e9
    assert hopper_guess == pytest.approx(1208, rel=0.01)


# ------------------------------------------------------- across NVL72 racks
def test_nvls_across_racks_uses_sharp_when_the_network_reduces():
    topo = nvl72(4, sharp=True, nic_gbps=100.0)  # a slow network makes the tier visible
    fab = fabric_from_topology(topo, 4 * 72)
    inner, outer = fab.levels
    assert outer.in_network_reduction and inner.nvls_ranks == 72 and outer.ranks == 4
    got = algorithm_time(fab, "allreduce", "nvls", GIB)
    rate_in = inner.card_scale_up_gbps() * inner.nvls_efficiency * 1e9 / 8
    rate_out = outer.cost("uniform").gbps * 1e9 / 8
    alpha = max(inner.cost("ring").alpha_s, outer.cost("uniform").alpha_s)
    assert got == pytest.approx(costs.nvls_across_allreduce(
        72, 4, GIB, alpha, 1 / rate_in, 1 / rate_out, in_network=True), rel=1e-9)
    # without SHARP the same racks run NVLSTree: the slice crosses twice, slower
    no_sharp = fabric_from_topology(nvl72(4, sharp=False, nic_gbps=100.0), 4 * 72)
    assert not no_sharp.levels[1].in_network_reduction
    assert algorithm_time(no_sharp, "allreduce", "nvls", GIB) > got
    # the per-card network share is the NIC's 100 Gb/s × the InfiniBand efficiency
    assert outer.cost("uniform").gbps == pytest.approx(100 * PROTOCOL_EFFICIENCY["infiniband"])


def test_every_algorithm_runs_on_two_racks_of_72():
    """72 is not a power of two: recursive halving's partners may sit in the other rack
    (rank 8 ^ 64 = 72); those flows are priced on the network."""
    res = collective_curve(nvl72(2), {"op": "allreduce", "sizes": [1 << 20, GIB]})
    algorithms = {p.algorithm for p in res.points}
    assert {"ring", "tree", "rhd", "hierarchical", "nvls"} <= algorithms
    for point in res.points:
        assert math.isfinite(point.time_s) and point.time_s > 0
    # crossing the network costs: rhd over 144 ranks is slower than inside one rack
    one = collective_curve(nvl72(1), {"op": "allreduce", "sizes": [GIB], "algorithm": "rhd"})
    two = [p for p in res.points if p.algorithm == "rhd" and p.size_bytes == GIB][0]
    assert two.time_s > one.best[0].time_s


def test_in_network_reduction_is_validated_on_its_field():
    bad = {"supernodes": [{"fabric": {"kind": "full_mesh", "dims": [8]}}],
           "network": {"access": {"cards_per_switch": 8}, "in_network_reduction": "yes"}}
    with pytest.raises(TopologyError) as err:
        ClusterSpec.from_dict(bad)
    assert err.value.field == "network.in_network_reduction"
