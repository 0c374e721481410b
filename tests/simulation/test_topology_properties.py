"""Property tests: every fast path equals plain BFS on small graphs.

* closed forms (ring, torus, mesh) == networkx BFS from every node;
* symmetry classes of a cluster (one search per class) == our BFS from
  every card, for hops *and* latency, over random cluster shapes;
* our BFS (csgraph + level recovery) == networkx on random graphs;
* the bisection heuristic's bounds bracket the exhaustive minimum.
"""

from __future__ import annotations

from math import prod

import networkx as nx
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulation.topology import (
    AccessSpec,
    ClusterSpec,
    FabricSpec,
    NetworkSpec,
    NicSpec,
    SupernodeSpec,
    TierSpec,
    Topology,
    TopologyError,
    bisection,
    cluster,
    exhaustive_bisection,
    hop_distances,
    hop_stats,
    latency_stats,
    mesh,
    ring,
    torus,
)

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def nx_hist(topo: Topology) -> list[int]:
    g = topo.to_networkx()
    counts: dict[int, int] = {}
    for s, lengths in nx.all_pairs_shortest_path_length(g):
        if s >= topo.n_endpoints:
            continue
        for t, d in lengths.items():
            if t != s and t < topo.n_endpoints:
                counts[d] = counts.get(d, 0) + 1
    out = [0] * (max(counts) + 1 if counts else 1)
    for d, c in counts.items():
        out[d] = c
    return out


@FAST
@given(st.integers(min_value=2, max_value=80))
def test_ring_closed_form_equals_bfs(n):
    topo = ring(n)
    assert hop_stats(topo).histogram == nx_hist(topo)


@FAST
@given(st.lists(st.integers(min_value=2, max_value=7), min_size=1, max_size=3))
def test_torus_closed_form_equals_bfs(dims):
    topo = torus(dims)
    fast = hop_stats(topo)
    assert fast.histogram == nx_hist(topo)
    assert fast == hop_stats(topo, method="bfs").__class__(
        **{**hop_stats(topo, method="bfs").__dict__, "method": "closed_form"}
    )
    assert latency_stats(topo).distribution == latency_stats(topo, method="bfs").distribution


@FAST
@given(st.lists(st.integers(min_value=2, max_value=6), min_size=1, max_size=3))
def test_mesh_closed_form_equals_bfs(dims):
    topo = mesh(dims)
    assert hop_stats(topo).histogram == nx_hist(topo)
    # mesh symmetry classes (reflections) are sound too
    assert hop_stats(topo, method="symmetry").histogram == hop_stats(topo).histogram


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["torus", "ring", "full_mesh", "switch"]),
    dims=st.lists(st.sampled_from([2, 3, 4]), min_size=1, max_size=3),
    n1=st.sampled_from([2, 4, 6, 8]),
    cps_pick=st.integers(min_value=0, max_value=20),
    rails=st.integers(min_value=1, max_value=3),
    tiers=st.integers(min_value=1, max_value=3),
    k=st.sampled_from([2, 4, 6, 8]),
    count=st.integers(min_value=1, max_value=12),
)
def test_cluster_symmetry_classes_equal_bfs(kind, dims, n1, cps_pick, rails, tiers, k, count):
    fabric_dims = tuple(dims) if kind == "torus" else (n1,)
    n = prod(fabric_dims)
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    cps = divisors[cps_pick % len(divisors)]
    core = tuple(TierSpec(f"t{i}", k, 400.0, 20.0 + 7 * i, 300.0 + 11 * i) for i in range(tiers))
    spec = ClusterSpec(
        "prop",
        (SupernodeSpec(count, FabricSpec(kind, fabric_dims, 400.0, 5.0, 10.0)),),
        NetworkSpec(AccessSpec(cps, 512.0, 5.0, 100.0), NicSpec(rails, 512.0, 5.0, 250.0), core),
    )
    try:
        topo = cluster(spec)
    except TopologyError:
        return  # the core is too small for this many NICs: a validation case
    if topo.endpoint_class is None:
        assert hop_stats(topo, exact_limit=10_000).method == "bfs"
        return
    fast, slow = hop_stats(topo), hop_stats(topo, method="bfs")
    assert fast.method == "symmetry"
    assert fast.histogram == slow.histogram
    assert fast.intra_group == slow.intra_group and fast.inter_group == slow.inter_group
    lf, ls = latency_stats(topo), latency_stats(topo, method="bfs")
    assert lf.distribution == ls.distribution
    assert lf.intra_group == ls.intra_group and lf.inter_group == ls.inter_group


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["server_mesh", "server_mesh", "torus", "full_mesh", "switch"]),
    servers=st.integers(min_value=2, max_value=4),
    per=st.integers(min_value=2, max_value=4),
    tiers=st.integers(min_value=1, max_value=3),
    k=st.sampled_from([4, 6, 8, 16]),
    count=st.integers(min_value=1, max_value=6),
)
def test_nic_per_card_symmetry_classes_equal_bfs(kind, servers, per, tiers, k, count):
    """DGX-style clusters (a NIC per card on rail leaves): the symmetric fast path
    equals a search from every card, whatever the fabric."""
    fabric_dims = (servers, per) if kind in ("server_mesh", "torus") else (servers * per,)
    core = tuple(TierSpec(f"t{i}", k, 400.0, 20.0 + 7 * i, 300.0 + 11 * i) for i in range(tiers))
    spec = ClusterSpec(
        "prop",
        (SupernodeSpec(count, FabricSpec(kind, fabric_dims, 3600.0, 250.0, 0.0)),),
        NetworkSpec(AccessSpec(per, 504.0, 20.0, 0.0, nic_per_card=True),
                    NicSpec(per, 504.0, 20.0, 300.0), core),
    )
    try:
        topo = cluster(spec)
    except TopologyError:
        return  # the core is too small for this many NICs: a validation case
    assert topo.kind_counts().get("pcie_switch", 0) == 0
    if topo.endpoint_class is None:
        assert kind == "torus" or hop_stats(topo, exact_limit=10_000).method == "bfs"
        return
    fast, slow = hop_stats(topo), hop_stats(topo, method="bfs")
    assert fast.method == "symmetry"
    assert fast.histogram == slow.histogram
    assert fast.intra_group == slow.intra_group and fast.inter_group == slow.inter_group
    lf, ls = latency_stats(topo), latency_stats(topo, method="bfs")
    assert lf.distribution == ls.distribution
    assert lf.intra_group == ls.intra_group and lf.inter_group == ls.inter_group


@FAST
@given(
    st.integers(min_value=5, max_value=40),
    st.floats(min_value=0.05, max_value=0.4),
    st.integers(min_value=0, max_value=10_000),
)
def test_bfs_levels_equal_networkx(n, p, seed):
    g = nx.gnp_random_graph(n, p, seed=seed)
    edges = np.array(list(g.edges()), dtype=np.int64).reshape(-1, 2)
    topo = Topology.from_links(
        name="random",
        family="custom",
        n_nodes=n,
        n_endpoints=n,
        link_u=edges[:, 0],
        link_v=edges[:, 1],
        link_gbps=1.0,
        link_ns=1.0,
        node_kind=0,
        node_ns=0.0,
    )
    for s in range(0, n, max(1, n // 5)):
        ours = hop_distances(topo, s)
        ref = nx.single_source_shortest_path_length(g, s)
        expected = np.array([ref.get(t, -1) for t in range(n)])
        assert np.array_equal(ours, expected)


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=6, max_value=12), st.integers(min_value=0, max_value=10_000))
def test_bisection_heuristic_brackets_exhaustive(n, seed):
    g = nx.connected_watts_strogatz_graph(n, 4, 0.3, seed=seed)
    edges = np.array(list(g.edges()), dtype=np.int64)
    topo = Topology.from_links(
        name="ws",
        family="custom",
        n_nodes=n,
        n_endpoints=n,
        link_u=edges[:, 0],
        link_v=edges[:, 1],
        link_gbps=100.0,
        link_ns=1.0,
        node_kind=0,
        node_ns=0.0,
    )
    found = bisection(topo)
    exact = exhaustive_bisection(topo).links
    assert found.links >= exact
    assert found.lower_links is not None and found.lower_links <= exact + 1e-9
