"""Collective cost models: hand-worked numbers, closed forms vs schedules, topology effects.

Hand-worked setting unless stated: p = 4 ranks, S = 10⁶ bytes,
α = 1 µs, β = 1 ns/byte (1 GB/s).
"""

from __future__ import annotations

import json
import math

import pytest

from simulation.collectives import (
    CollectiveSpec,
    TorusLevel,
    algorithm_time,
    collective_curve,
    costs,
    fabric_from_topology,
)
from simulation.collectives.patterns import double_tree_edges, snake_order
from simulation.topology import (
    TopologyError,
    cluster,
    demo_cluster_spec,
    fat_tree,
    full_mesh,
    ring,
    star,
    torus,
)

P, S, A, B = 4, 1e6, 1e-6, 1e-9
US = 1e-6


# ------------------------------------------------------------ closed forms
def test_ring_formulas_hand_worked():
    # AllReduce 2(p−1)α + 2(p−1)/p·Sβ = 6 µs + 1.5 ms
    assert costs.ring_allreduce(P, S, A, B) == pytest.approx(1506 * US)
    # ReduceScatter / AllGather (p−1)α + (p−1)/p·Sβ = 3 µs + 0.75 ms
    assert costs.ring_reduce_scatter(P, S, A, B) == pytest.approx(753 * US)
    assert costs.ring_allgather(P, S, A, B) == pytest.approx(753 * US)
    # with γ = 0.5 ns/byte the reduction adds (p−1)/p·Sγ = 375 µs
    assert costs.ring_allreduce(P, S, A, B, 0.5e-9) == pytest.approx(1881 * US)
    # pairwise AllToAll (p−1)(α + S/p·β) = 3·(1 + 250) µs
    assert costs.ring_alltoall(P, S, A, B) == pytest.approx(753 * US)


def test_rhd_formulas_hand_worked():
    # Rabenseifner 2·lg p·α + 2(p−1)/p·Sβ = 4 µs + 1.5 ms
    assert costs.rhd_allreduce(P, S, A, B) == pytest.approx(1504 * US)
    assert costs.rhd_reduce_scatter(P, S, A, B) == pytest.approx(752 * US)
    assert costs.rhd_allgather(P, S, A, B) == pytest.approx(752 * US)
    # scatter + allgather broadcast: 2·2 µs + 1.5 ms
    assert costs.rhd_broadcast(P, S, A, B) == pytest.approx(1504 * US)
    # Bruck ⌈lg p⌉(α + S/2·β) = 2·(1 + 500) µs
    assert costs.rhd_alltoall(P, S, A, B) == pytest.approx(1002 * US)
    # p = 6: the power-of-two part (4) costs 1504 µs, the fold 3α + 2Sβ = 2003 µs
    assert costs.rhd_allreduce(6, S, A, B) == pytest.approx(3507 * US)


def test_pipelined_tree_and_chain_hand_worked():
    # tree AllReduce, p = 4: depth 2 → 4 stages, work 2Sβ = 2 ms;
    # best c ≈ √(3·2000) ≈ 77.5 → c = 77: 80 × (1 + 2000/77) µs
    assert costs.tree_depth(4) == 2
    assert costs.tree_allreduce(P, S, A, B) == pytest.approx(80 * (1 + 2000 / 77) * US)
    # chain broadcast, p = 4: 3 stages, work 1 ms, c* ≈ 44.7 → c = 45: 47 × (1 + 1000/45) µs
    assert costs.ring_broadcast(P, S, A, B) == pytest.approx(47 * (1 + 1000 / 45) * US)
    # two ranks: one message, no pipelining gain: α + Sβ
    assert costs.ring_broadcast(2, S, A, B) == pytest.approx(1001 * US)
    assert costs.pipelined(5, 0.0, 3.0) == 3.0


def test_torus_formulas_hand_worked():
    # 4×4: dim 1 on S: 3α + ¾·S/2·β = 3 + 375 µs; dim 2 on S/4: 3 + 93.75 µs
    rs = (3 + 375) + (3 + 93.75)
    assert costs.torus_reduce_scatter([4, 4], S, A, B) == pytest.approx(rs * US)
    assert costs.torus_allreduce([4, 4], S, A, B) == pytest.approx(2 * rs * US)
    # a dimension of 2 is one link: no split between directions
    assert costs.torus_reduce_scatter([2], S, A, B) == pytest.approx((1 + 500) * US)
    # uniform load on an 8-ring: ⌊64/4⌋/(2·8) = 1 byte per byte sent (k/8)
    assert costs.torus_alltoall_load([8, 8, 8]) == pytest.approx(1.0)
    # 4×4: load 4/8 → 15α + 0.5·Sβ
    assert costs.torus_alltoall([4, 4], S, A, B) == pytest.approx((15 + 500) * US)


def test_busbw_factors_follow_nccl_tests():
    assert costs.busbw_factor("allreduce", 8) == pytest.approx(2 * 7 / 8)
    for op in ("reduce_scatter", "allgather", "alltoall"):
        assert costs.busbw_factor(op, 8) == pytest.approx(7 / 8)
    assert costs.busbw_factor("broadcast", 8) == 1.0


# ------------------------------------------- schedules on real topologies
def link_for(beta: float) -> float:
    """Gb/s of a link moving one byte per ``beta`` seconds."""
    return 8 / beta / 1e9


@pytest.mark.parametrize("p", range(2, 17))
def test_star_schedules_equal_closed_forms(p):
    # a star of link 8 Gb/s (β = 1 ns/B) and 2 × 500 ns links: α = 1 µs, no
    # contention beyond the card's own link, so every schedule = its formula
    fab = fabric_from_topology(star(p, link_gbps=link_for(B), link_ns=500, switch_ns=0))
    cases = {
        ("allreduce", "ring"): costs.ring_allreduce(p, S, A, B),
        ("reduce_scatter", "ring"): costs.ring_reduce_scatter(p, S, A, B),
        ("allgather", "ring"): costs.ring_allgather(p, S, A, B),
        ("alltoall", "ring"): costs.ring_alltoall(p, S, A, B),
        ("broadcast", "ring"): costs.ring_broadcast(p, S, A, B),
        ("allreduce", "rhd"): costs.rhd_allreduce(p, S, A, B),
        ("reduce_scatter", "rhd"): costs.rhd_reduce_scatter(p, S, A, B),
        ("allgather", "rhd"): costs.rhd_allgather(p, S, A, B),
        ("broadcast", "rhd"): costs.rhd_broadcast(p, S, A, B),
        ("alltoall", "rhd"): costs.rhd_alltoall(p, S, A, B),
        ("allreduce", "tree"): costs.tree_allreduce(p, S, A, B),
    }
    for (op, alg), expected in cases.items():
        assert algorithm_time(fab, op, alg, S) == pytest.approx(expected), (op, alg)


def test_full_mesh_of_independent_links_uses_both_directions():
    # a direct mesh whose links are separate ports (no card limit): two
    # counter-rotating rings on distinct links halve the bandwidth term,
    # 2(p−1)(α + S/(2p)·β) = 6 × (1 + 125) µs
    fab = fabric_from_topology(full_mesh(4, link_gbps=link_for(B), link_ns=1000, switch_ns=0))
    assert algorithm_time(fab, "allreduce", "ring", S) == pytest.approx(756 * US)
    # all-to-all goes out on all 3 links at once: 3α + ¾·S/(3 links) β
    assert algorithm_time(fab, "alltoall", "ring", S) == pytest.approx((3 + 250) * US)


def test_switched_mesh_is_held_to_the_card_limit():
    # the same mesh standing for a switch (NVSwitch): each link at the card's
    # full rate but the card may send only that much in total — every
    # algorithm is back at the closed form of one link per card
    topo = full_mesh(4, link_gbps=link_for(B), link_ns=1000, switch_ns=0).with_card_limits(
        link_for(B)
    )
    fab = fabric_from_topology(topo)
    assert algorithm_time(fab, "allreduce", "ring", S) == pytest.approx(
        costs.ring_allreduce(4, S, A, B)
    )
    assert algorithm_time(fab, "alltoall", "ring", S) == pytest.approx(
        costs.ring_alltoall(4, S, A, B)
    )
    assert algorithm_time(fab, "allreduce", "rhd", S) == pytest.approx(
        costs.rhd_allreduce(4, S, A, B)
    )


def test_torus_schedule_equals_closed_form_on_a_torus():
    topo = torus([4, 4], link_gbps=link_for(B), link_ns=1000, switch_ns=0)
    fab = fabric_from_topology(topo)
    for op in ("allreduce", "reduce_scatter", "allgather", "broadcast"):
        fn = getattr(costs, f"torus_{op}")
        assert algorithm_time(fab, op, "torus", S) == pytest.approx(fn([4, 4], S, A, B)), op
    # all-to-all is direct: no per-message overhead here (0), one worst path
    # (2 + 2 hops of 1 µs) and the channel load ½·Sβ
    assert algorithm_time(fab, "alltoall", "torus", S) == pytest.approx(
        costs.torus_alltoall([4, 4], S, 0.0, B) + 4 * US
    )


def test_contention_on_a_ring_topology_hand_worked():
    # XOR partners 2 apart on an 8-ring: 0→2 and 1→3 both cross link 1→2,
    # so each flow gets half the link, over 2 hops (2 links + 1 router)
    topo = ring(8, link_gbps=100, link_ns=5, switch_ns=10)
    level = fabric_from_topology(topo).levels[0]
    c = level.cost("xor", 2)
    assert (c.hops, c.gbps) == (2, 50.0)
    assert c.alpha_s == pytest.approx(20e-9)
    one = level.cost("xor", 1)
    assert (one.hops, one.gbps) == (1, 100.0)
    ring_cost = level.cost("ring")
    assert (ring_cost.hops, ring_cost.gbps) == (1, 100.0)


def test_snake_order_is_a_hamiltonian_cycle_on_the_torus():
    topo = torus([4, 3, 2])
    order = snake_order((4, 3, 2))
    assert sorted(order.tolist()) == list(range(24))
    for a, b in zip(order, list(order[1:]) + [order[0]], strict=True):
        assert topo.link_between(int(a), int(b)) >= 0


def test_double_tree_interior_nodes_do_not_overlap_for_even_p():
    for p in (2, 4, 8, 12, 16, 64):
        par, ch, depth = double_tree_edges(p)
        half = par.size // 2
        assert set(par[:half].tolist()).isdisjoint(par[half:].tolist())
        assert depth == math.ceil(math.log2(p))
        assert sorted(ch[:half].tolist()) == list(range(1, p))


def test_torus_level_matches_routing():
    topo = torus([8, 8], link_gbps=400, link_ns=5, switch_ns=10)
    routed = fabric_from_topology(topo).levels[0]
    closed = TorusLevel("closed", (8, 8), 400.0, 5.0, 10.0, 0.0)
    # xor 4 and 32 are k/2 apart: ECMP splits them over both directions
    for kind, arg in [
        ("ring", 0),
        ("dim", 0),
        ("dim", 1),
        ("xor", 1),
        ("xor", 2),
        ("xor", 4),
        ("xor", 8),
        ("xor", 16),
        ("xor", 32),
    ]:
        a, b = routed.cost(kind, arg), closed.cost(kind, arg)
        assert (a.hops, a.gbps) == (b.hops, b.gbps), (kind, arg)
        assert a.alpha_s == pytest.approx(b.alpha_s)


# ------------------------------------------------------------------ curves
def test_curve_bandwidths_and_best_algorithm():
    topo = torus([8, 8, 8], link_gbps=400, link_ns=5, switch_ns=10)
    res = collective_curve(topo, {"op": "allreduce", "sizes": [1024, 1 << 30]})
    assert res.ranks == 512
    for pt in res.points:
        assert pt.algbw_gbps == pytest.approx(pt.size_bytes * 8 / pt.time_s / 1e9)
        assert pt.busbw_gbps == pytest.approx(pt.algbw_gbps * 2 * 511 / 512)
        assert pt.busbw_GBps == pytest.approx(pt.busbw_gbps / 8)
    big = {p.algorithm: p for p in res.points if p.size_bytes == 1 << 30}
    # bidirectional rings drive 2 × 400 Gb/s per card: busbw → 800 Gb/s
    assert big["torus"].busbw_gbps == pytest.approx(800, rel=1e-3)
    assert big["ring"].busbw_gbps == pytest.approx(800, rel=1e-3)
    small = {p.algorithm: p for p in res.points if p.size_bytes == 1024}
    # 42 torus steps beat 1022 ring steps on latency
    assert small["torus"].time_s < small["ring"].time_s
    assert res.best[0].algorithm == "torus"
    assert set(res.unsupported) == {"hierarchical", "nvls"}
    assert res.unsupported["hierarchical"] == "needs ranks in more than one supernode"
    json.dumps(res.to_dict(), allow_nan=False)


def test_compression_divides_wire_bytes_only():
    topo = full_mesh(8)
    plain = collective_curve(topo, {"op": "allgather", "algorithm": "ring", "sizes": [1 << 24]})
    packed = collective_curve(
        topo, {"op": "allgather", "algorithm": "ring", "sizes": [1 << 26], "compression": 4}
    )
    # 64 MiB compressed 4:1 moves exactly the bytes of 16 MiB: same time, 4× algbw
    assert packed.points[0].time_s == pytest.approx(plain.points[0].time_s)
    assert packed.points[0].algbw_gbps == pytest.approx(4 * plain.points[0].algbw_gbps)


def test_hierarchical_on_a_cluster():
    topo = cluster(demo_cluster_spec())
    res = collective_curve(topo, {"op": "allreduce", "sizes": [1 << 20, 1 << 30]})
    inner, outer = res.levels
    assert (inner["ranks"], outer["ranks"]) == (512, 8)
    # 2 NICs × 400 Gb/s per 8-card server: 100 Gb/s per card across supernodes
    assert outer["shared_gbps"] == pytest.approx(100.0)
    assert outer["single_flow_gbps"] == pytest.approx(400.0)
    # worst cross-supernode path: 1720 ns (see the route test)
    assert outer["ring_alpha_us"] == pytest.approx(1.72)
    for size in (1 << 20, 1 << 30):
        row = {p.algorithm: p.time_s for p in res.points if p.size_bytes == size}
        assert row["hierarchical"] == min(row.values())
    assert "torus" in res.unsupported


def test_hierarchical_allreduce_is_the_sum_of_its_parts():
    topo = cluster(demo_cluster_spec())
    fab = fabric_from_topology(topo)
    inner, outer = fab.levels
    size = float(1 << 26)
    from simulation.collectives.models import _best_single

    parts = (
        _best_single(inner, "reduce_scatter", size, 0.0)
        + _best_single(outer, "allreduce", size / 512, 0.0)
        + _best_single(inner, "allgather", size, 0.0)
    )
    assert algorithm_time(fab, "allreduce", "hierarchical", size) == pytest.approx(parts)
    # the outer level is uniform: its ring is the closed form at 100 Gb/s
    beta = 8 / 100e9
    assert (
        _best_single(outer, "allreduce", size / 512, 0.0)
        <= costs.ring_allreduce(8, size / 512, outer.cost("ring").alpha_s, beta) + 1e-12
    )


def test_ecmp_splits_over_equal_paths():
    # 4-ring, flow 0→2: two 2-hop paths, half a unit on each
    topo = ring(4, link_gbps=100, link_ns=5, switch_ns=10)
    level = fabric_from_topology(topo).levels[0]
    import numpy as np

    load, hops = level.loads(np.array([0]), np.array([2]))
    assert hops == 2
    assert sorted(load[load > 0].tolist()) == [0.5, 0.5, 0.5, 0.5]


def test_fat_tree_collectives_route_on_the_tree():
    topo = fat_tree(4, 3, link_gbps=400, link_ns=5, switch_ns=10)
    res = collective_curve(topo, {"op": "alltoall", "sizes": [1 << 20]})
    assert {p.algorithm for p in res.points} == {"ring", "rhd"}
    # full bisection: uniform all-to-all leaves every host its 400 Gb/s
    level = fabric_from_topology(topo).levels[0]
    assert level.cost("uniform").gbps == pytest.approx(400.0)


# -------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"op": "allscatter"}, "op"),
        ({"op": "allreduce", "algorithm": "butterfly"}, "algorithm"),
        ({"op": "allreduce", "sizes": [1024, -1]}, "sizes[1]"),
        ({"op": "allreduce", "sizes": []}, "sizes"),
        ({"op": "allreduce", "sizes": [1.5]}, "sizes[0]"),
        ({"op": "allreduce", "ranks": 1}, "ranks"),
        ({"op": "allreduce", "compression": 0.5}, "compression"),
        ({"op": "allreduce", "overhead_ns": -3}, "overhead_ns"),
        ({"op": "allreduce", "colour": "red"}, "colour"),
        ({"op": "allreduce", "scale_up_efficiency": 0}, "scale_up_efficiency"),
        ({"op": "allreduce", "scale_out_efficiency": 1.5}, "scale_out_efficiency"),
        ({"op": "allreduce", "scale_out_efficiency": "x"}, "scale_out_efficiency"),
    ],
)
def test_bad_collective_params_name_the_field(params, field):
    with pytest.raises(TopologyError) as err:
        CollectiveSpec.from_dict(params)
    assert err.value.field == field


def test_more_ranks_than_cards_and_unsupported_choices():
    with pytest.raises(TopologyError) as err:
        collective_curve(ring(8), {"op": "allreduce", "ranks": 9})
    assert err.value.field == "ranks"
    with pytest.raises(TopologyError) as err:
        collective_curve(star(8), {"op": "allreduce", "algorithm": "torus"})
    assert err.value.field == "algorithm"
    with pytest.raises(TopologyError) as err:
        collective_curve(ring(8), {"op": "allgather", "algorithm": "tree"})
    assert err.value.field == "algorithm"
    with pytest.raises(TopologyError) as err:  # NCCL's trees do AllReduce only
        collective_curve(ring(8), {"op": "broadcast", "algorithm": "tree"})
    assert err.value.field == "algorithm"
    with pytest.raises(TopologyError) as err:  # no switch that reduces in flight
        collective_curve(star(8), {"op": "allreduce", "algorithm": "nvls"})
    assert err.value.field == "algorithm"
    with pytest.raises(TopologyError) as err:  # 700 cards are not whole supernodes
        collective_curve(cluster(demo_cluster_spec()), {"op": "allreduce", "ranks": 700})
    assert err.value.field == "ranks"


def test_spec_round_trip():
    spec = CollectiveSpec.from_dict({"op": "broadcast", "sizes": [8, 4096], "compression": 4})
    assert CollectiveSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


def test_dgx_units_route_inside_over_rails_and_share_the_nics_across():
    """Two DGX-style units (NVLink full mesh per 8-GPU server, a NIC per GPU on
    rail leaves): a unit's own cards meet only through their NICs and rail
    leaves, so the inner level is routed on those; across units α is the
    card → NIC → leaf → spine → leaf → NIC → card latency 20 + 300 + 50 + 130 +
    100 + 130 + 100 + 130 + 50 + 300 + 20 = 1,330 ns and each card's share is its
    own 400 Gb/s NIC port (its 504 Gb/s PCIe link is wider)."""
    from simulation.topology import (
        AccessSpec,
        ClusterSpec,
        FabricSpec,
        NetworkSpec,
        NicSpec,
        SupernodeSpec,
        TierSpec,
    )

    spec = ClusterSpec(
        "dgx",
        (SupernodeSpec(2, FabricSpec("server_mesh", (32, 8), 3600.0, 250.0, 0.0)),),
        NetworkSpec(AccessSpec(8, 504.0, 20.0, 0.0, nic_per_card=True),
                    NicSpec(8, 504.0, 20.0, 300.0),
                    (TierSpec("leaf", 64, 400.0, 50.0, 130.0),
                     TierSpec("spine", 64, 400.0, 100.0, 130.0))),
    )
    fab = fabric_from_topology(cluster(spec), 512)
    inner, outer = fab.describe()
    assert inner["name"] == "supernode" and inner["routed"] and inner["ranks"] == 256
    # ring neighbours: NVLink inside a server, rail path between servers (1,120 ns:
    # one NVLink hop 250 + the 870 ns rail path)
    assert inner["ring_alpha_us"] == pytest.approx(1.12)
    assert outer["ring_alpha_us"] == pytest.approx(1.33)
    assert outer["shared_gbps"] == pytest.approx(400.0)
    curve = collective_curve(fab, CollectiveSpec(op="allreduce", ranks=512, sizes=(1 << 20,)))
    assert curve.best[0].time_s > 0
