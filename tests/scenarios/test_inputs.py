"""The model → simulation converter (``twin.scenarios.inputs``) on built clusters.

Checked against the simulation's own figures for the same family, and against
an exact graph of the database's link rows (built here, in the test, from
every link): cross-supernode hops and latencies must agree exactly.
"""
from __future__ import annotations

import uuid
from fractions import Fraction

import numpy as np
import pytest

from simulation.topology import (
    AccessSpec,
    FabricSpec,
    NicSpec,
    NodeKind,
    TierSpec,
    Topology,
    build,
    cluster,
    fabric_family,
    hop_stats,
)
from simulation.topology.search import hop_distances, latency_distances
from twin.hardware.models import Card, Cluster, Link, NetworkDevice, SuperNode
from twin.scenarios.inputs import ConversionError, card_node, cluster_input

KIND = {"pcie_switch": NodeKind.PCIE_SWITCH, "smart_nic": NodeKind.NIC,
        "leaf": NodeKind.LEAF, "spine": NodeKind.SPINE, "core": NodeKind.CORE}


def db_topology(cluster_id: int) -> tuple[Topology, dict[int, int]]:
    """Every card, device and link row of a (small) cluster as one exact graph.

    Card ids map to nodes supernode by supernode in card-index order (the
    converter's numbering); parallel links become one link (their Gb/s summed),
    as the simulation models them. Returns the topology and card id → node.
    """
    cards = list(Card.objects.filter(supernode__cluster_id=cluster_id)
                 .order_by("supernode__index", "index").values_list("pk", flat=True))
    # File-system appliances carry no links yet (no storage fabric is modelled), so
    # they are not part of the card-to-card graph either side of the comparison.
    devices = list(NetworkDevice.objects.filter(cluster_id=cluster_id).exclude(kind="storage")
                   .order_by("pk").values_list("pk", "kind", "latency_ns"))
    node = {("c", pk): i for i, pk in enumerate(cards)}
    node.update({("d", pk): len(cards) + i for i, (pk, _, _) in enumerate(devices)})
    links: dict[tuple[int, int], list[float]] = {}
    for a_card, a_dev, b_card, b_dev, gbps, ns in Link.objects.filter(
            cluster_id=cluster_id).values_list("a_card_id", "a_device_id", "b_card_id",
                                               "b_device_id", "bandwidth_gbps", "latency_ns"):
        a = node[("c", a_card) if a_card else ("d", a_dev)]
        b = node[("c", b_card) if b_card else ("d", b_dev)]
        key = (min(a, b), max(a, b))
        if key in links:
            links[key][0] += gbps
        else:
            links[key] = [gbps, ns]
    u, v = np.array(list(links)).T
    figures = np.array(list(links.values()))
    n = len(cards) + len(devices)
    topo = Topology.from_links(
        name="db", family="db", n_nodes=n, n_endpoints=len(cards), link_u=u, link_v=v,
        link_gbps=figures[:, 0], link_ns=figures[:, 1],
        node_kind=np.array([NodeKind.CARD] * len(cards) + [KIND[k] for _, k, _ in devices]),
        node_ns=np.array([0.0] * len(cards) + [ns for _, _, ns in devices]))
    return topo, {pk: i for i, pk in enumerate(cards)}


def test_seed_cluster_converts_with_a_few_aggregate_queries(seed_cluster,
                                                            django_assert_max_num_queries):
    with django_assert_max_num_queries(6):
        info = cluster_input(seed_cluster)
    spec = info.spec
    assert spec.name == "scen-seed" and spec.n_cards == 1024 == Card.objects.count()
    (group,) = spec.supernodes
    assert group.count == 2
    # the builder's 8×8×8 torus at 600 Gb/s, 150 ns per link, no router cost; each H100
    # held to its 900 GB/s bidirectional = 3,600 Gb/s per direction, over NVLink
    assert group.fabric == FabricSpec("torus", (8, 8, 8), 600.0, 150.0, 0.0, card_gbps=3600.0,
                                      technology="nvlink")
    net = spec.network
    assert net.access == AccessSpec(cards_per_switch=8, link_gbps=504.0, link_ns=20.0,
                                    switch_ns=105.0)
    assert net.aggregation == NicSpec(nics_per_switch=2, link_gbps=504.0, link_ns=20.0,
                                      nic_ns=300.0)
    assert net.core == (TierSpec("leaf", 128, 400.0, 50.0, 600.0),
                        TierSpec("spine", 128, 400.0, 100.0, 600.0))
    assert net.technology == "roce"
    assert info.offsets == (0, 512) and info.supernode_indices == (0, 1)
    assert info.notes == ()


def test_supernode_fabric_matches_the_simulation_family(seed_cluster):
    """The seeds' supernode, as converted from the database, is the 8×8×8 torus:
    average 3072/511 hops, diameter 12 — the library's figures for that family."""
    info = cluster_input(seed_cluster)
    fabric = build(fabric_family(info.spec.supernodes[0].fabric))
    stats = hop_stats(fabric)
    assert stats.average_fraction() == Fraction(3072, 511)
    assert stats.diameter == 12
    family = hop_stats(build(fabric_family(FabricSpec("torus", (8, 8, 8)))))
    assert stats.histogram == family.histogram
    topo = cluster(info.spec)
    # as many cards and links as the database holds (parallel leaf–spine links
    # become one per spine, as many of them)
    assert topo.n_endpoints == Card.objects.count()
    assert topo.n_links == Link.objects.filter(cluster=seed_cluster).count() == 4864
    whole = hop_stats(topo)
    assert whole.exact and whole.method == "symmetry"


def test_cross_supernode_paths_equal_the_database_graph(seed_cluster):
    """Hops and latency from cards of supernode 0 to every card of supernode 1 are
    the same on the converted spec and on the graph of the actual link rows."""
    info = cluster_input(seed_cluster)
    sim = cluster(info.spec)
    exact, node_of = db_topology(seed_cluster.pk)
    cards = dict(Card.objects.filter(supernode__cluster=seed_cluster).values_list(
        "pk", "supernode__index"))
    sn1 = np.array(sorted(node_of[pk] for pk, sn in cards.items() if sn == 1))
    for source in (0, 5, 137, 511):
        assert np.array_equal(hop_distances(sim, source)[sn1],
                              hop_distances(exact, source)[sn1])
        assert np.allclose(latency_distances(sim, source)[sn1],
                           latency_distances(exact, source)[sn1])
    # and inside a supernode, card to card over the torus alone never differs
    torus_only = hop_distances(build(fabric_family(info.spec.supernodes[0].fabric)), 0)
    assert int(torus_only.max()) == 12


def test_card_rows_map_to_their_simulation_nodes(seed_cluster):
    info = cluster_input(seed_cluster)
    rows = Card.objects.filter(supernode__cluster=seed_cluster, index__in=[0, 9, 511]).values(
        "index", "x", "y", "z", "supernode__index")
    for row in rows:
        node = card_node(info, row["supernode__index"], "torus3d", row["index"], (8, 8, 8),
                         (row["x"], row["y"], row["z"]))
        assert node == 512 * row["supernode__index"] + row["index"]


def test_hand_built_cluster_converts(tiny_cluster):
    info = cluster_input(tiny_cluster["cluster"].pk)
    spec = info.spec
    assert spec.supernodes[0].fabric.dims == (2, 2, 2) and spec.n_cards == 8
    assert spec.network.access.cards_per_switch == 8
    assert (spec.network.access.link_gbps, spec.network.access.link_ns) == (512.0, 100.0)
    assert spec.network.aggregation.nics_per_switch == 1
    (leaf,) = spec.network.core
    assert (leaf.name, leaf.radix, leaf.link_gbps, leaf.link_ns) == ("leaf", 64, 400.0, 500.0)
    assert cluster(spec).n_endpoints == 8


def test_no_network_devices_means_no_network(tiny_cluster):
    NetworkDevice.objects.filter(cluster=tiny_cluster["cluster"]).delete()
    assert cluster_input(tiny_cluster["cluster"]).spec.network is None


@pytest.mark.parametrize(("change", "text"), [
    ("missing_card", "has 7 cards but its supernodes are designed for 8"),
    ("no_supernodes", "has no supernodes"),
    ("no_nic", "lacks smart NICs"),
    ("no_pcie_switch", "needs one NIC per card"),
])
def test_unrepresentable_clusters_are_refused_with_the_fix(tiny_cluster, change, text):
    world = tiny_cluster
    if change == "missing_card":
        world["cards"][7].delete()
    elif change == "no_supernodes":
        world = {"cluster": Cluster.objects.create(name=f"empty-{uuid.uuid4().hex[:6]}")}
    elif change == "no_nic":
        world["nic"].delete()
    else:  # without a PCIe switch, its one NIC would have to serve 8 cards
        world["switch"].delete()
    with pytest.raises(ConversionError) as caught:
        cluster_input(world["cluster"])
    assert caught.value.field == "cluster"
    assert text in caught.value.message


# --------------------------------------------------------------- DGX SuperPOD
def _card(cluster: Cluster, server: int, slot: int) -> int:
    """Id of the card in ``slot`` of the supernode's ``server``-th server."""
    return Card.objects.get(supernode__cluster=cluster, index=8 * server + slot).pk


def test_dgx_cluster_converts(dgx_cluster, django_assert_max_num_queries):
    with django_assert_max_num_queries(5):
        info = cluster_input(dgx_cluster)
    spec = info.spec
    assert spec.n_cards == 256 == Card.objects.filter(supernode__cluster=dgx_cluster).count()
    (group,) = spec.supernodes
    # NVLink: a full mesh per DGX (28 links), 3,600 Gb/s and 250 ns a link, each GPU held
    # to its own 3,600 Gb/s per direction in total; NVSwitch gen 3 reduces in flight
    assert group.fabric == FabricSpec("server_mesh", (32, 8), 3600.0, 250.0, 0.0,
                                      card_gbps=3600.0, technology="nvlink",
                                      in_switch_reduction=True)
    net = spec.network
    # no PCIe switch: each GPU's own PCIe Gen5 ×16 link to its ConnectX-7
    assert net.access == AccessSpec(cards_per_switch=8, link_gbps=504.0, link_ns=20.0,
                                    switch_ns=0.0, nic_per_card=True)
    assert net.aggregation == NicSpec(nics_per_switch=8, link_gbps=504.0, link_ns=20.0,
                                      nic_ns=300.0)
    assert net.core == (TierSpec("leaf", 64, 400.0, 50.0, 130.0),
                        TierSpec("spine", 64, 400.0, 100.0, 130.0))
    assert net.technology == "infiniband"
    topo = cluster(spec)
    # every database link is in the graph; the 8 × 4 × 8 parallel leaf–spine links
    # become 8 × 32 single ones (same count, same Gb/s per leaf)
    assert topo.n_links == Link.objects.filter(cluster=dgx_cluster).count() == 32 * 28 + 3 * 256
    assert topo.kind_counts() == {"card": 256, "nic": 256, "leaf": 8, "spine": 32}


def test_dgx_topology_scenario_equals_bfs_over_the_link_rows(dgx_cluster):
    """The topology scenario's hops (and latency) are those of a plain BFS
    (Dijkstra) from every card over the graph of the cluster's actual link rows."""
    from scipy.sparse import csgraph

    from twin.scenarios.kinds import get_kind

    kind = get_kind("topology")
    result = kind.run(kind.prepare({}, dgx_cluster), lambda fraction, message: None)
    exact, _ = db_topology(dgx_cluster.pk)
    n = exact.n_endpoints
    hops = csgraph.shortest_path(exact.adjacency(), unweighted=True, indices=np.arange(n))[:, :n]
    off = ~np.eye(n, dtype=bool)
    histogram = np.bincount(hops[off].astype(np.int64)).tolist()
    assert result["hop_histogram"] == histogram
    assert result["diameter_hops"] == int(hops[off].max()) == 5
    assert result["avg_hops_exact"] == "1216/255"  # (7·1 + 31·4 + 217·5) / 255
    assert result["method"] == "symmetry" and result["exact"]
    # pair by pair, too: the converted spec's graph gives every card-to-card distance
    sim = cluster(cluster_input(dgx_cluster).spec)
    assert np.array_equal(
        csgraph.shortest_path(sim.adjacency(), unweighted=True, indices=np.arange(n))[:, :n], hops)
    # latency: link ns + forwarding ns of every node passed, destination excluded
    lat = csgraph.dijkstra(exact.latency_weights(), indices=np.arange(n))[:, :n]
    assert np.allclose(csgraph.dijkstra(sim.latency_weights(), indices=np.arange(n))[:, :n], lat)
    lat = lat - exact.node_ns[:n][None, :]
    assert result["latency_ns"]["max"] == pytest.approx(float(lat[off].max()))
    assert result["latency_ns"]["average"] == pytest.approx(float(lat[off].mean()))
    # one supernode's fabric alone: one DGX's NVLink full mesh
    assert result["fabric"]["family"]["family"] == "full_mesh"
    assert result["fabric"]["diameter_hops"] == 1


@pytest.mark.parametrize(("src", "dst", "hops", "kinds"), [
    # same rail (slot 3 of two DGX): GPU → its NIC → rail leaf → NIC → GPU
    ((0, 3), (5, 3), 4, ["card", "nic", "leaf", "nic", "card"]),
    # other rail: one NVLink hop to the rail's GPU first (or last), then as above
    ((0, 3), (5, 6), 5, None),
    # same DGX: one NVLink hop
    ((7, 1), (7, 4), 1, ["card", "card"]),
])
def test_dgx_route_between_gpus(dgx_cluster, src, dst, hops, kinds):
    from twin.scenarios.kinds import get_kind

    kind = get_kind("route")
    params = {"src": _card(dgx_cluster, *src), "dst": _card(dgx_cluster, *dst)}
    result = kind.run(kind.prepare(params, dgx_cluster), lambda fraction, message: None)
    assert result["reachable"] and result["hops"] == hops
    labels = [label.split()[0] for label in result["labels"]]
    if kinds is not None:
        assert labels == kinds
    else:  # one NVLink hop, then the 4-hop rail path: the only kinds seen
        assert sorted(set(labels)) == ["card", "leaf", "nic"] and labels.count("card") == 3
    exact, node_of = db_topology(dgx_cluster.pk)
    assert int(hop_distances(exact, node_of[params["src"]])[node_of[params["dst"]]]) == hops


def test_one_server_fat_tree_supernode_is_a_full_mesh(tiny_cluster):
    SuperNode.objects.filter(pk=tiny_cluster["supernode"].pk).update(
        fabric="fat_tree", dim_x=1, dim_y=1, dim_z=1)
    fabric = cluster_input(tiny_cluster["cluster"]).spec.supernodes[0].fabric
    assert (fabric.kind, fabric.dims) == ("full_mesh", (8,))
