"""Topology builders and metrics against closed forms and hand-worked cases.

Every number asserted here is derived in the comment next to it (or in
simulation/topology/closed_forms.py) — not read back from the code.
"""

from __future__ import annotations

import json
from fractions import Fraction

import networkx as nx
import numpy as np
import pytest

from simulation.topology import (
    AccessSpec,
    ClusterSpec,
    FabricSpec,
    FailureSpec,
    FamilySpec,
    NetworkSpec,
    NicSpec,
    NodeKind,
    SupernodeSpec,
    TierSpec,
    Topology,
    TopologyError,
    analyze,
    bisection,
    check_latency,
    cluster,
    demo_cluster_spec,
    exhaustive_bisection,
    failure_impact,
    fat_tree,
    full_mesh,
    hop_stats,
    latency_stats,
    mesh,
    million_cluster_spec,
    ring,
    route,
    star,
    topology_from_dict,
    torus,
)
from simulation.topology.closed_forms import mesh_pair_counts, ring_per_node, torus_per_node


def nx_hist(topo: Topology) -> list[int]:
    """Plain networkx BFS from every endpoint: the oracle."""
    g = topo.to_networkx()
    hist: dict[int, int] = {}
    for s in range(topo.n_endpoints):
        for t, d in nx.single_source_shortest_path_length(g, s).items():
            if t != s and t < topo.n_endpoints:
                hist[d] = hist.get(d, 0) + 1
    out = [0] * (max(hist) + 1)
    for d, c in hist.items():
        out[d] = c
    return out


# ------------------------------------------------------------ the seeds' error
def test_ring_512_average_is_65536_over_511_not_1_58():
    # per node: two cards at each distance 1…255, one at 256 → sum 2·(255·256/2) + 256 = 65536
    stats = hop_stats(ring(512))
    assert stats.method == "closed_form"
    assert stats.average_fraction() == Fraction(65536, 511)
    assert stats.average == pytest.approx(128.2504892)
    assert stats.diameter == 256
    assert stats.pairs == 512 * 511
    assert stats.histogram[1] == 512 * 2 and stats.histogram[256] == 512


def test_seed_code_reproduces_171_50_not_its_comment():
    # The seed's walk counts path *nodes* and never wraps except from card 0:
    # emulate it in closed form — from i>0 it walks |j−i| links; from 0 it
    # takes the shorter way round — and compare with the brute force on 64.
    def seed_walk(n: int) -> float:
        total = 0
        for i in range(n):
            for j in range(i + 1, n):
                links = min(j, n - j) if i == 0 else j - i
                total += links + 1
        return total / (n * (n - 1) / 2)

    def brute(n: int) -> float:  # the seed's code, verbatim logic
        nb = {i: {(i - 1) % n, (i + 1) % n} for i in range(n)}
        total = 0
        for i in range(n):
            for j in range(i + 1, n):
                cur, path = i, [i]
                while cur != j:
                    cur = min(nb[cur], key=lambda x, j=j: abs(x - j))
                    path.append(cur)
                total += len(path)
        return total / (n * (n - 1) / 2)

    assert seed_walk(64) == pytest.approx(brute(64))
    assert seed_walk(512) == pytest.approx(171.5009784)  # what the seed prints
    assert hop_stats(ring(512)).average < seed_walk(512)


def test_torus_8x8x8_average_is_3072_over_511():
    # per dimension: ring of 8 sums to 16 from a node; over 512 nodes each
    # dimension contributes 16·64 = 1024 → 3072 over the 511 other cards
    stats = hop_stats(torus([8, 8, 8]))
    assert stats.average_fraction() == Fraction(3072, 511)
    assert stats.diameter == 12
    per_node = torus_per_node([8, 8, 8])
    assert per_node.sum() == 512 and int((per_node * np.arange(per_node.size)).sum()) == 3072
    # including each card's distance to itself the average is exactly 6
    assert Fraction(3072, 512) == 6


# ------------------------------------------------------------- closed forms
@pytest.mark.parametrize("n", [2, 3, 4, 7, 8, 9, 16])
def test_ring_closed_form_matches_networkx(n):
    topo = ring(n)
    assert hop_stats(topo).histogram == nx_hist(topo)
    per = ring_per_node(n)
    assert int((per * np.arange(per.size)).sum()) == n * n // 4  # ⌊n²/4⌋


@pytest.mark.parametrize("dims", [[2, 2], [3, 4], [2, 3, 4], [4, 4, 4], [5], [2, 2, 2, 2]])
def test_torus_closed_form_matches_networkx(dims):
    topo = torus(dims)
    assert hop_stats(topo).histogram == nx_hist(topo)


@pytest.mark.parametrize("dims", [[3, 4], [2, 5], [4, 3, 2], [6]])
def test_mesh_closed_form_matches_networkx_and_mean_formula(dims):
    topo = mesh(dims)
    stats = hop_stats(topo)
    assert stats.histogram == nx_hist(topo)
    # mean |x−y| over all ordered pairs of a path of k nodes is (k²−1)/(3k)
    n = int(np.prod(dims))
    mean_all = sum(Fraction(k * k - 1, 3 * k) for k in dims)
    assert stats.average_fraction() == mean_all * n / (n - 1)
    assert mesh_pair_counts(dims).sum() == n * n


def test_full_mesh_star_and_fat_tree_closed_forms():
    assert hop_stats(full_mesh(6)).histogram == [0, 30]
    assert hop_stats(star(5)).histogram == [0, 0, 20]
    # k=4, 3 tiers: per host 1 at 2 hops, 2 at 4, 12 at 6 (16 hosts)
    ft = fat_tree(4, 3)
    stats = hop_stats(ft)
    assert stats.histogram == [0, 0, 16, 0, 32, 0, 192]
    assert stats.histogram == nx_hist(ft)
    assert stats.average_fraction() == Fraction(2 * 1 + 4 * 2 + 6 * 12, 15)
    # k=4, 2 tiers: 8 hosts, per host 1 at 2 hops, 6 at 4
    ft2 = fat_tree(4, 2)
    assert hop_stats(ft2).histogram == [0, 0, 8, 0, 48] == nx_hist(ft2)


def test_fat_tree_structure():
    ft = fat_tree(8, 3)
    kinds = ft.kind_counts()
    # k³/4 hosts, k²/2 edge, k²/2 aggregation, (k/2)² core
    assert kinds == {"card": 128, "leaf": 32, "spine": 32, "core": 16}
    assert ft.n_links == 128 + 32 * 4 + 32 * 4
    assert set(ft.degree()[128:].tolist()) == {8}


def test_sampled_hops_carry_their_bounds():
    import math

    # every torus node sees the same distances: the sample is exact, s.e. 0
    stats = hop_stats(torus([8, 8, 8]), method="sample", samples=16, seed=3)
    assert not stats.exact and stats.average == pytest.approx(3072 / 511)
    b = stats.sample
    assert b is not None and b.stderr == 0.0
    # range [1, 2·12]: Hoeffding half-width 23·√(ln(2/0.05)/(2·16))
    assert b.hoeffding == pytest.approx(23 * math.sqrt(math.log(40) / 32))
    assert (b.diameter_lower, b.diameter_upper) == (12, 24)
    # a mesh is irregular: the estimate lands within the bound of the truth
    topo = mesh([12, 10])
    est = hop_stats(topo, method="sample", samples=20, seed=1)
    truth = hop_stats(topo).average
    assert est.sample is not None and est.sample.hoeffding is not None
    assert abs(est.average - truth) <= est.sample.hoeffding
    assert est.sample.diameter_lower <= 20 <= est.sample.diameter_upper


def test_forcing_an_impossible_method_is_an_error():
    with pytest.raises(TopologyError) as err:
        hop_stats(cluster(small_spec(name="x")), method="closed_form")
    assert err.value.field == "method"


# ------------------------------------------------------------------ latency
def test_latency_closed_form_torus_and_specs():
    topo = torus([8, 8, 8], link_ns=5, switch_ns=10)
    lat = latency_stats(topo)
    avg_h = Fraction(3072, 511)
    # h hops cost 5h + 10(h−1): average 15·avg_h − 10, max at 12 hops = 170
    assert lat.average_ns == pytest.approx(float(15 * avg_h - 10))
    assert lat.max_ns == 170
    assert lat.method == "closed_form"
    assert lat.to_dict()["max_ns"] == latency_stats(topo, method="bfs").max_ns
    checks = {c.name: c for c in check_latency(topo, lat)}
    assert checks["supernode_200ns"].passed and checks["supernode_500ns"].passed
    assert not checks["rdma_2us"].applicable
    slow = torus([8, 8, 8], link_ns=5, switch_ns=20)  # 12·5 + 11·20 = 280 ns
    checks = {c.name: c for c in check_latency(slow)}
    assert checks["supernode_200ns"].worst_ns == 280
    assert not checks["supernode_200ns"].passed and checks["supernode_500ns"].passed
    assert 0 < checks["supernode_200ns"].share_within < 1


def test_latency_fat_tree_hand_worked():
    # 2 hops: 2·5+10 = 20; 4 hops: 4·5+3·10 = 50; 6 hops: 6·5+5·10 = 80;
    # per host 1, 2 and 12 others → average (20 + 100 + 960)/15 = 72
    lat = latency_stats(fat_tree(4, 3, link_ns=5, switch_ns=10))
    assert lat.average_ns == pytest.approx(72.0)
    assert lat.max_ns == 80 and lat.p99_ns == 80 and lat.min_ns == 20
    assert lat.exact


def test_latency_weights_keep_zero_weight_edges():
    # zero link and node latency: csgraph must still see the edges
    lat = latency_stats(ring(6, link_ns=0, switch_ns=0), method="bfs")
    assert lat.max_ns == 0 and lat.pairs == 30


# ---------------------------------------------------------------- bisection
@pytest.mark.parametrize(
    "topo",
    [
        ring(10),
        ring(7),
        torus([4, 4]),
        torus([4, 2]),
        torus([2, 2, 2]),
        mesh([4, 3]),
        mesh([4, 4]),
        full_mesh(6),
        full_mesh(7),
        star(7),
        fat_tree(4, 2),
    ],
    ids=lambda t: t.name,
)
def test_bisection_formulas_match_exhaustive_search(topo):
    formula = bisection(topo)
    assert formula.method == "closed_form"
    assert formula.links == exhaustive_bisection(topo).links


def test_bisection_fat_tree_3_tier_exhaustive():
    # k³/4 = 16 hosts → full bisection 8 links
    ft = fat_tree(4, 3)
    assert bisection(ft).links == 8 == exhaustive_bisection(ft).links
    assert bisection(ft).gbps == 8 * 400


def test_bisection_k_ary_n_cube_formula():
    # 2·k^(n−1): 8-ary 3-cube → 128 links
    b = bisection(torus([8, 8, 8], link_gbps=400))
    assert (b.links, b.gbps, b.exact) == (128, 128 * 400, True)
    assert bisection(torus([16, 16])).links == 32


def test_bisection_heuristic_brackets_the_truth():
    topo = torus([3, 3])  # odd sides: no formula
    b = bisection(topo)
    exact = exhaustive_bisection(topo).links
    assert b.method == "heuristic" and not b.exact
    assert b.lower_links is not None and b.lower_links <= exact <= b.links


def test_bisection_of_demo_cluster_is_full():
    # 8 supernodes × 128 NICs: the pod's 64 aggregation switches each see
    # 8 leaves per half → 512 links = NICs/2 at 400 Gb/s
    topo = cluster(demo_cluster_spec())
    b = bisection(topo)
    assert (b.links, b.gbps) == (512, 512 * 400.0)


# -------------------------------------------------------------------- route
def test_route_torus_opposite_corner():
    topo = torus([8, 8, 8], link_ns=5, switch_ns=10)
    far = 4 * 64 + 4 * 8 + 4
    r = route(topo, 0, far)
    assert (r.hops, r.latency_ns, r.bottleneck_gbps) == (12, 170.0, 400.0)
    assert r.nodes[0] == 0 and r.nodes[-1] == far and len(r.links) == 12
    assert route(topo, 0, far, by="latency").latency_ns == 170.0


def test_route_cluster_crosses_the_network():
    topo = cluster(demo_cluster_spec())
    r = route(topo, 0, topo.n_endpoints - 1)
    kinds = [NodeKind(int(topo.node_kind[x])).name for x in r.nodes]
    # card → PCIe → NIC → leaf → spine → leaf → NIC → PCIe → card
    assert kinds == [
        "CARD",
        "PCIE_SWITCH",
        "NIC",
        "LEAF",
        "SPINE",
        "LEAF",
        "NIC",
        "PCIE_SWITCH",
        "CARD",
    ]
    # links 2·(5+5+25) + 2·25 = 120; nodes 2·100 + 2·250 + 2·300 + 300 = 1600
    assert r.latency_ns == 1720.0 and r.bottleneck_gbps == 400.0


def test_route_bad_input():
    topo = ring(8)
    with pytest.raises(TopologyError) as err:
        route(topo, 0, 8)
    assert err.value.field == "dst"
    with pytest.raises(TopologyError) as err:
        route(topo, 0, 3, by="bandwidth")
    assert err.value.field == "by"


# ------------------------------------------------------------------ failure
def test_failure_one_ring_link_makes_a_path():
    topo = ring(8)
    f = failure_impact(topo, links=[0])
    # a path of 8: Σ over ordered pairs 2·Σ_d (8−d)·d = 168 over 56 pairs = 3
    assert f.connected and f.partitions == 1 and f.pairs_disconnected == 0
    assert f.average_after == pytest.approx(3.0) and f.diameter_after == 7
    assert f.average_before == pytest.approx(16 / 7)
    # both ends lost a link: 56 − 6·5 = 26 ordered pairs touch one of them
    assert f.endpoints_degraded == 2 and f.pairs_with_degraded_endpoint == 26
    g = topo.to_networkx()
    before = dict(nx.all_pairs_shortest_path_length(g))
    g.remove_edge(int(topo.link_u[0]), int(topo.link_v[0]))
    after = dict(nx.all_pairs_shortest_path_length(g))
    longer = sum(after[s][t] > before[s][t] for s in range(8) for t in range(8) if s != t)
    assert f.pairs_longer == longer
    assert f.exact and f.method == "bfs"


def test_failure_two_ring_links_split_it():
    topo = ring(8)
    f = failure_impact(topo, link_pairs=[(0, 1), (4, 5)])
    # {1,2,3,4} and {5,6,7,0}: 64 − 2·16 = 32 ordered pairs cut
    assert not f.connected and f.partitions == 2 and f.largest_partition == 4
    assert f.pairs_disconnected == 32


def test_failure_removing_the_switch_isolates_every_card():
    topo = star(8)
    f = failure_impact(topo, nodes=[8])
    assert f.partitions == 8 and f.isolated_endpoints == 8
    assert f.pairs_disconnected == 8 * 7
    assert f.removed_nodes == {"pcie_switch": 1} and f.removed_links == 8


def test_failure_removing_cards_shrinks_the_pair_set():
    topo = full_mesh(6)
    f = failure_impact(topo, nodes=[0, 1])
    assert f.surviving_endpoints == 4 and f.connected
    assert f.average_after == 1.0
    # every survivor lost the links to the two removed cards
    assert f.endpoints_degraded == 4


def test_failure_random_is_reproducible_and_validated():
    topo = torus([4, 4])
    a = failure_impact(topo, random_links=3, seed=7)
    b = failure_impact(topo, random_links=3, seed=7)
    assert a == b and a.removed_links == 3
    for kwargs, field in [
        ({"random_links": 33}, "random_links"),
        ({"random_cards": 17}, "random_cards"),
        ({"random_switches": 1}, "random_switches"),
        ({"links": [32]}, "links"),
        ({"nodes": [-1]}, "nodes"),
        ({"link_pairs": [(0, 5)]}, "link_pairs[0]"),
    ]:
        with pytest.raises(TopologyError) as err:
            failure_impact(topo, **kwargs)
        assert err.value.field == field


def test_failure_spec_from_dict():
    spec = FailureSpec.from_dict({"links": [0], "link_pairs": [[4, 5]], "seed": 3})
    assert spec.run(ring(8)).partitions == 2
    for data, field in [
        ({"links": [1, "2"]}, "links[1]"),
        ({"random_links": -1}, "random_links"),
        ({"link_pairs": [[1]]}, "link_pairs[0]"),
        ({"cards": [1]}, "cards"),
    ]:
        with pytest.raises(TopologyError) as err:
            FailureSpec.from_dict(data)
        assert err.value.field == field
    with pytest.raises(TopologyError) as err:  # more links than exist
        FailureSpec.from_dict({"random_links": 9}).run(ring(8))
    assert err.value.field == "random_links"


def test_failure_in_a_cluster_reports_groups():
    topo = cluster(demo_cluster_spec())
    nic = int(np.flatnonzero(topo.node_kind == NodeKind.NIC)[0])  # supernode 0
    f = failure_impact(topo, nodes=[nic])
    # supernode 0 lost one of its 128 NIC uplinks of 400 Gb/s
    assert f.groups_degraded == 1
    assert f.worst_groups[0]["group"] == 0
    assert f.worst_groups[0]["lost_share"] == pytest.approx(1 / 128)
    # 512 cards of supernode 0 × 3,584 cards elsewhere, both directions
    assert f.cross_pairs_with_degraded_group == 2 * 512 * 3584
    assert f.connected


# -------------------------------------------------------------- clusters
def small_spec(**over: object) -> ClusterSpec:
    spec = ClusterSpec(
        "small",
        (SupernodeSpec(4, FabricSpec("torus", (2, 2, 4), 400.0, 5.0, 10.0)),),
        NetworkSpec(
            AccessSpec(4, 512.0, 5.0, 100.0),
            NicSpec(2, 512.0, 5.0, 250.0),
            (TierSpec("leaf", 8, 400.0, 25.0, 300.0), TierSpec("spine", 8, 400.0, 25.0, 300.0)),
        ),
    )
    return ClusterSpec(**{**spec.__dict__, **over})  # type: ignore[arg-type]


def test_cluster_symmetry_equals_bfs():
    topo = cluster(small_spec())
    assert topo.endpoint_class is not None and topo.endpoint_class.max() == 0
    fast = hop_stats(topo)
    slow = hop_stats(topo, method="bfs")
    assert fast.method == "symmetry" and fast == slow.__class__(
        **{**slow.__dict__, "method": "symmetry"}
    )
    assert latency_stats(topo).distribution == latency_stats(topo, method="bfs").distribution


def test_cluster_structure_counts():
    topo = cluster(small_spec())
    # 4 supernodes × 16 cards; 4 cards per PCIe switch → 16 switches, 32 NICs;
    # radix 8 → 4 hosts per leaf → 8 leaves, 4 spines
    assert topo.kind_counts() == {"card": 64, "pcie_switch": 16, "nic": 32, "leaf": 8, "spine": 4}
    # torus 2×2×4: a dimension of 2 is one link (8 + 8 links), the 4-ring 16
    # → 32 per supernode; then card–PCIe 64, PCIe–NIC 32, NIC–leaf 32,
    # leaf–spine 8 × 4
    assert topo.n_links == 4 * 32 + 64 + 32 + 32 + 8 * 4


def test_million_cluster_exact_by_symmetry():
    topo = cluster(million_cluster_spec())
    assert topo.n_endpoints == 1_048_576
    assert topo.kind_counts() == {
        "card": 1_048_576,
        "pcie_switch": 131_072,
        "nic": 262_144,
        "leaf": 4096,
        "spine": 4096,
        "core": 4096,
    }
    assert topo.n_links == 3 * 1_048_576 + 1_048_576 + 262_144 + 262_144 + 2 * 4096 * 64
    assert topo.nbytes() < 400 * 2**20
    stats = hop_stats(topo)
    assert stats.method == "symmetry" and stats.exact
    assert stats.pairs == 1_048_576 * 1_048_575 and stats.diameter == 10
    # every cross-supernode pair is 8 (same pod: …leaf-spine-leaf…) or 10 hops
    assert stats.inter_group is not None and stats.inter_group.maximum == 10


def test_analyze_keys_and_json():
    spec = demo_cluster_spec()
    out = analyze(cluster(spec), spec=spec)
    for key in (
        "avg_hops",
        "diameter_hops",
        "bisection_links",
        "bisection_gbps",
        "hop_histogram",
        "latency_ns",
    ):
        assert key in out
    assert out["fabric"]["avg_hops_exact"] == "3072/511"
    json.dumps(out, allow_nan=False)


# ------------------------------------------------------------------- specs
@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"family": "hypercube"}, "family"),
        ({"family": "torus", "dims": [8, 1]}, "dims[1]"),
        ({"family": "torus", "dims": []}, "dims"),
        ({"family": "torus", "dims": [8, "8"]}, "dims[1]"),
        ({"family": "ring"}, "nodes"),
        ({"family": "ring", "nodes": 1}, "nodes"),
        ({"family": "ring", "nodes": 8, "dims": [8]}, "dims"),
        ({"family": "fat_tree", "k": 5}, "k"),
        ({"family": "fat_tree", "k": 4, "tiers": 4}, "tiers"),
        ({"family": "star", "nodes": 4, "link_gbps": 0}, "link_gbps"),
        ({"family": "mesh", "dims": [4, 4], "link_ns": -1}, "link_ns"),
        ({"supernodes": []}, "supernodes"),
        (
            {"supernodes": [{"fabric": {"kind": "torus", "dims": [8, 0]}}]},
            "supernodes[0].fabric.dims[1]",
        ),
        ({"supernodes": [{"fabric": {"kind": "blob", "dims": [8]}}]}, "supernodes[0].fabric.kind"),
        ({"supernodes": [{"fabric": {"dims": [3, 3]}}]}, "network.access.cards_per_switch"),
        ({"supernodes": [{"count": 4097}]}, "network.core"),
        ({"supernodes": [{}], "network": {"core": [{"radix": 8}, {"radix": 16}]}}, "network.core"),
        ({"supernodes": [{}], "network": {"core": [{"radix": 7}]}}, "network.core[0].radix"),
        (
            {"supernodes": [{"fabric": {"kind": "server_mesh", "dims": [256]}}]},
            "supernodes[0].fabric.dims",
        ),
        (
            {"supernodes": [{"fabric": {"kind": "server_mesh", "dims": [16, 16]}}]},
            "supernodes[0].fabric.dims[1]",
        ),
        ({"supernodes": [{}], "network": {"access": {"nic_per_card": True}}},
         "network.aggregation.nics_per_switch"),
        ({"supernodes": [{}], "network": {"access": {"nic_per_card": "yes"}}},
         "network.access.nic_per_card"),
        ("torus", "params"),
    ],
)
def test_bad_specs_name_the_field(data, field):
    with pytest.raises(TopologyError) as err:
        topology_from_dict(data)  # type: ignore[arg-type]
    assert err.value.field == field


def test_specs_round_trip_through_json():
    fam = FamilySpec.from_dict({"family": "torus", "dims": [4, 4, 4], "link_ns": 7})
    assert FamilySpec.from_dict(json.loads(json.dumps(fam.to_dict()))) == fam
    spec = million_cluster_spec()
    again = ClusterSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec
    assert spec.n_cards == 1_048_576


def test_topology_from_dict_builds_both_kinds():
    assert topology_from_dict({"family": "ring", "nodes": 512}).n_endpoints == 512
    topo = topology_from_dict(
        {"supernodes": [{"count": 2, "fabric": {"kind": "switch", "dims": [8]}}], "network": None}
    )
    # no network: two separate supernodes of 8 cards on their own switch
    stats = hop_stats(topo)
    assert stats.unreachable_pairs == 2 * 8 * 8 and stats.diameter == 2


def test_builders_reject_bad_shapes():
    with pytest.raises(TopologyError) as err:
        torus([4, 1])
    assert err.value.field == "dims[1]"
    with pytest.raises(TopologyError):
        Topology.from_links(
            name="x",
            family="custom",
            n_nodes=3,
            n_endpoints=3,
            link_u=[0, 0],
            link_v=[1, 1],
            link_gbps=1,
            link_ns=0,
            node_kind=0,
            node_ns=0,
        )
    with pytest.raises(TopologyError):
        fat_tree(3)


# ---------------------------------------------------- DGX-style (NIC per card)
def dgx_spec(supernodes: int, radix: int = 64, tiers: int = 2) -> ClusterSpec:
    """DGX H100 SuperPOD figures: 32 servers × 8 GPUs per scalable unit, NVLink
    full mesh per server (250 ns), one NIC per GPU (PCIe 20 ns, NIC 300 ns),
    rail leaves and InfiniBand spines (130 ns; links 50 / 100 / 150 ns)."""
    core = tuple(TierSpec(name, radix, 400.0, 50.0 * (i + 1), 130.0)
                 for i, name in enumerate(("leaf", "spine", "core")[:tiers]))
    return ClusterSpec(
        "dgx",
        (SupernodeSpec(supernodes, FabricSpec("server_mesh", (32, 8), 3600.0, 250.0, 0.0)),),
        NetworkSpec(AccessSpec(8, 504.0, 20.0, 0.0, nic_per_card=True),
                    NicSpec(8, 504.0, 20.0, 300.0), core),
    )


@pytest.mark.parametrize("supernodes", [1, 2, 4])
def test_nic_per_card_cluster_hops_closed_form(supernodes):
    """Per card, with c = 8 GPUs per server, S = 32 servers per unit and N units
    on a 2-tier fat tree whose leaves each hold one rail of one unit:
    c − 1 cards at 1 hop (NVLink); S − 1 at 4 (same rail: card → NIC → leaf →
    NIC → card); (S − 1)(c − 1) at 5 (one NVLink hop onto the other rail, never
    the 6-hop way over a spine); (N − 1)·S·c at 6 (NIC → leaf → spine → leaf of
    the destination's rail → NIC)."""
    c, s, n = 8, 32, supernodes
    topo = cluster(dgx_spec(n))
    cards = n * s * c
    per_card = [0, c - 1, 0, 0, s - 1, (s - 1) * (c - 1)] + ([(n - 1) * s * c] if n > 1 else [])
    stats = hop_stats(topo)
    assert stats.method == "symmetry" and stats.exact
    assert stats.histogram == [h * cards for h in per_card]
    assert stats.diameter == (6 if n > 1 else 5)
    assert topo.kind_counts() == {"card": cards, "nic": cards, "leaf": 8 * n, "spine": 32}
    # latency: NVLink 250; rail path 20 + 300 + 50 + 130 + 50 + 300 + 20 = 870;
    # other rail 250 + 870 = 1120; across units 870 + 2·(100 + 130) = 1330 ns
    lat = latency_stats(topo, hops=stats)
    values = [250.0, 870.0, 1120.0] + ([1330.0] if n > 1 else [])
    counts = [h * cards for h in per_card if h]
    assert lat.distribution == {"values_ns": values, "pairs": counts}


def test_nic_per_card_three_tiers_cross_pods():
    """Radix 16 (k/2 = 8 ports down per leaf), 4 units of 8 servers × 8 GPUs: one
    rail of a unit (8 NICs) fills one leaf and a unit's 8 rails fill one pod, so
    per card: 7 at 1 hop, 7 at 4, 49 at 5 (as in one unit) and the 3 × 64 cards
    of the other pods at 8 (card → NIC → leaf → aggregation → core →
    aggregation → leaf → NIC → card, whatever the rail)."""
    spec = ClusterSpec(
        "dgx-small",
        (SupernodeSpec(4, FabricSpec("server_mesh", (8, 8), 3600.0, 250.0, 0.0)),),
        NetworkSpec(AccessSpec(8, 504.0, 20.0, 0.0, nic_per_card=True),
                    NicSpec(8, 504.0, 20.0, 300.0),
                    tuple(TierSpec(t, 16, 400.0, 50.0, 130.0) for t in ("leaf", "spine", "core"))),
    )
    topo = cluster(spec)
    # 8 servers × 8 rails = 64 NIC ports per unit = one pod of 8 leaves (k/2 = 8 each)
    assert topo.params["pods"] == 4 and topo.params["leaves"] == 32
    stats = hop_stats(topo)
    assert stats.method == "symmetry"
    assert stats.histogram == hop_stats(topo, method="bfs").histogram
    per_card = [0, 7, 0, 0, 7, 49, 0, 0, 3 * 64]
    assert stats.histogram == [h * 256 for h in per_card]
    r = route(topo, 0, 64 + 8 * 3)  # card 0 → unit 1, server 3, slot 0 (same rail)
    assert r.hops == 8
    assert [lab.split()[0] for lab in r.labels] == [
        "card", "nic", "leaf", "spine", "core", "spine", "leaf", "nic", "card"]


def test_server_mesh_fabric_alone_is_one_servers_full_mesh():
    spec = dgx_spec(1)
    result = analyze(cluster(spec), spec=spec)
    assert result["fabric"]["family"] == {"family": "full_mesh", "nodes": 8, "link_gbps": 3600.0,
                                          "link_ns": 250.0, "switch_ns": 0.0}
    assert result["diameter_hops"] == 5 and result["avg_hops_exact"] == "1216/255"
    again = ClusterSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec
