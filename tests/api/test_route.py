"""``GET /api/clusters/<id>/route/`` against closed forms and a BFS over the Link rows.

On the builder's seed-512 preset a card's torus neighbours are its Link rows,
so for two cards in different servers (different y or z) whose x differs by at
most one, the fewest hops are the torus Manhattan distance with wrap-around —
the server's PCIe switch cannot shorten it and the network path (card → PCIe →
NIC → leaf → NIC → PCIe → card) is six hops. Across supernodes the converter's
topology and the graph of the Link rows agree exactly (``tests/scenarios/
test_inputs.py``), so hops and latency must equal a BFS/Dijkstra over the rows.
"""
from __future__ import annotations

import networkx as nx
import pytest
from django.test import override_settings
from django.urls import reverse

from twin.hardware.models import Card, Cluster, Link, NetworkDevice, SuperNode
from twin.scenarios.api import route as route_module


@pytest.fixture
def seed(db) -> Cluster:
    """The builder's seed-512 preset with two supernodes (1,024 cards, 8×8×8 tori)."""
    from twin.hardware.builder import build_cluster

    route_module.clear_cache()
    return Cluster.objects.get(pk=build_cluster("seed-512", name="route-seed",
                                                supernodes=2)["cluster_id"])


def ask(client, cluster: Cluster, status: int = 200, **params) -> dict:
    response = client.get(reverse("api:cluster-route", args=[cluster.pk]), params)
    assert response.status_code == status, response.content
    return response.json()


def db_graph(cluster: Cluster) -> nx.Graph:
    """Every Link row as an edge; weight = link ns + half of each end's forwarding ns,
    so a path's weight is Σ link ns + Σ intermediate devices' ns (cards forward in 0)."""
    ns = dict(NetworkDevice.objects.filter(cluster=cluster).values_list("id", "latency_ns"))
    g = nx.Graph()
    for a_card, a_dev, b_card, b_dev, link_ns in Link.objects.filter(cluster=cluster) \
            .values_list("a_card_id", "a_device_id", "b_card_id", "b_device_id", "latency_ns"):
        a = ("c", a_card) if a_card else ("d", a_dev)
        b = ("c", b_card) if b_card else ("d", b_dev)
        g.add_edge(a, b, w=link_ns + (ns.get(a_dev, 0.0) + ns.get(b_dev, 0.0)) / 2)
    return g


def ring(a: int, b: int, size: int = 8) -> int:
    return min(abs(a - b), size - abs(a - b))


def card_at(cluster: Cluster, sn: int, x: int, y: int, z: int) -> Card:
    return Card.objects.get(supernode__cluster=cluster, supernode__index=sn, x=x, y=y, z=z)


# ------------------------------------------------------------- tiny cluster
def test_tiny_cluster_route_over_the_scale_up_link(reader_client, tiny_cluster):
    t = tiny_cluster
    c0, c1 = t["cards"][0], t["cards"][1]
    body = ask(reader_client, t["cluster"], src=c0.pk, dst=c1.pk)
    assert body["src"] == {"id": c0.pk, "serial": "TINY-0000"}
    assert body["dst"] == {"id": c1.pk, "serial": "TINY-0001"}
    assert (body["by"], body["reachable"], body["hops"]) == ("hops", True, 1)
    assert body["latency_ns"] == 150.0 and body["bottleneck_gbps"] == 400.0
    assert body["path"] == [
        {"node": 0, "kind": "card", "card": c0.pk, "supernode": t["supernode"].pk,
         "label": "TINY-0000"},
        {"node": 1, "kind": "card", "card": c1.pk, "supernode": t["supernode"].pk,
         "label": "TINY-0001"}]
    assert body["cards"] == [c0.pk, c1.pk]
    assert body["links"] == [t["links"][0].pk]  # the Link row of that hop


@pytest.mark.parametrize("by", ["hops", "latency"])
def test_tiny_cluster_route_through_the_servers_switch(reader_client, tiny_cluster, by):
    """Cards 0 and 7 are 3 torus hops apart; via the server's PCIe switch 2 hops and
    100 + 0 + 100 ns (less than 3 × 150). Card–switch hops have no card–card Link row."""
    t = tiny_cluster
    body = ask(reader_client, t["cluster"], src="TINY-0000", dst=t["cards"][7].pk, by=by)
    assert (body["by"], body["hops"], body["latency_ns"]) == (by, 2, 200.0)
    assert [p["kind"] for p in body["path"]] == ["card", "pcie_switch", "card"]
    assert body["path"][1]["card"] is None and body["path"][1]["label"]
    assert body["cards"] == [t["cards"][0].pk, t["cards"][7].pk]
    assert body["links"] == [None, None]


def test_a_card_to_itself(reader_client, tiny_cluster):
    card = tiny_cluster["cards"][3]
    body = ask(reader_client, tiny_cluster["cluster"], src=card.serial, dst=card.pk)
    assert (body["hops"], body["latency_ns"], body["cards"], body["links"]) == \
        (0, 0.0, [card.pk], [])


def test_a_serial_made_of_digits(reader_client, tiny_cluster):
    card = tiny_cluster["cards"][5]
    Card.objects.filter(pk=card.pk).update(serial="424242")
    body = ask(reader_client, tiny_cluster["cluster"], src="424242",
               dst=tiny_cluster["cards"][4].pk)
    assert body["src"] == {"id": card.pk, "serial": "424242"}


# ------------------------------------------------------------ seed-512
TORUS_PAIRS = [  # (x, y, z) → (x, y, z) in one supernode, x differing by at most one
    ((0, 0, 0), (7, 7, 0)),   # 2 hops, both around
    ((0, 0, 0), (1, 6, 7)),   # 1 + 2 + 1
    ((3, 0, 2), (3, 2, 4)),   # 0 + 2 + 2
    ((5, 6, 1), (4, 1, 7)),   # 1 + 3 + 2 — wraps in y and z
    ((2, 4, 4), (2, 4, 5)),   # neighbours
]


def test_torus_routes_are_the_manhattan_distance_with_wrap(reader_client, seed):
    graph = db_graph(seed)
    for sn in (0, 1):
        for a, b in TORUS_PAIRS:
            src, dst = card_at(seed, sn, *a), card_at(seed, sn, *b)
            body = ask(reader_client, seed, src=src.serial, dst=dst.pk)
            expected = sum(ring(p, q) for p, q in zip(a, b, strict=True))
            assert body["hops"] == expected == nx.shortest_path_length(
                graph, ("c", src.pk), ("c", dst.pk)), (a, b)
            assert body["latency_ns"] == pytest.approx(150.0 * expected)
            assert body["bottleneck_gbps"] == 600.0
            assert body["cards"][0] == src.pk and body["cards"][-1] == dst.pk
            assert len(body["cards"]) == expected + 1
            # every hop is a scale-up Link row joining the two cards of that hop
            assert None not in body["links"] and len(body["links"]) == expected
            rows = Link.objects.in_bulk(body["links"])
            for hop, link_id in enumerate(body["links"]):
                ends = {rows[link_id].a_card_id, rows[link_id].b_card_id}
                assert ends == set(body["cards"][hop:hop + 2])
                assert rows[link_id].kind == "scale_up"


@pytest.mark.parametrize("by", ["hops", "latency"])
def test_cross_supernode_routes_equal_the_link_rows(reader_client, seed, by):
    graph = db_graph(seed)
    for a, b in (((0, 0, 0), (0, 0, 0)), ((3, 5, 1), (6, 2, 7)), ((7, 7, 7), (4, 0, 3))):
        src, dst = card_at(seed, 0, *a), card_at(seed, 1, *b)
        body = ask(reader_client, seed, src=src.pk, dst=dst.pk, by=by)
        if by == "hops":
            assert body["hops"] == nx.shortest_path_length(graph, ("c", src.pk),
                                                           ("c", dst.pk))
        else:
            assert body["latency_ns"] == pytest.approx(nx.shortest_path_length(
                graph, ("c", src.pk), ("c", dst.pk), weight="w"))
        kinds = [p["kind"] for p in body["path"]]
        assert {"pcie_switch", "nic", "leaf"} <= set(kinds)
        assert body["path"][0]["card"] == src.pk and body["path"][-1]["card"] == dst.pk
        assert len(body["links"]) == body["hops"]
        # null exactly where a hop touches a switch
        hops = zip(body["path"], body["path"][1:], strict=False)
        for (p, q), link in zip(hops, body["links"], strict=True):
            assert (link is None) == (p["card"] is None or q["card"] is None)


def test_the_topology_is_cached_until_the_model_changes(reader_client, tiny_cluster):
    t = tiny_cluster
    route_module.clear_cache()
    params = {"src": t["cards"][0].pk, "dst": t["cards"][1].pk}

    def cached() -> list:
        return list(route_module._cache.values())

    assert ask(reader_client, t["cluster"], **params)["bottleneck_gbps"] == 400.0
    (topo,) = cached()
    ask(reader_client, t["cluster"], **params)
    assert len(cached()) == 1 and cached()[0] is topo  # not rebuilt
    # a card's status is not part of the simulated topology: still the same
    Card.objects.filter(pk=t["cards"][1].pk).update(status="failed")
    ask(reader_client, t["cluster"], **params)
    assert len(cached()) == 1 and cached()[0] is topo
    # the supernode's link figures are: a new topology, with the new figure
    SuperNode.objects.filter(pk=t["supernode"].pk).update(link_gbps=200)
    assert ask(reader_client, t["cluster"], **params)["bottleneck_gbps"] == 200.0
    assert len(cached()) == 2 and cached()[-1] is not topo
    # bounded: a third spec evicts the least recently used
    SuperNode.objects.filter(pk=t["supernode"].pk).update(link_gbps=100)
    assert ask(reader_client, t["cluster"], **params)["bottleneck_gbps"] == 100.0
    assert len(cached()) == route_module.CACHE_SIZE == 2
    assert all(entry is not topo for entry in cached())


# --------------------------------------------------------------- errors
def test_bad_input_is_400_per_field(reader_client, tiny_cluster, seed):
    t = tiny_cluster
    foreign = Card.objects.filter(supernode__cluster=seed).first()
    # A well-formed id or serial that names no card of the cluster is a 404 on the field
    # (it was a 400: the schema cannot say which cards exist); bad input stays 400.
    cases = [
        ({"dst": t["cards"][1].pk}, {"src"}, "required", 400),
        ({"src": "", "dst": t["cards"][1].pk}, {"src"}, "required", 400),
        ({"src": 987654321, "dst": t["cards"][1].pk}, {"src", "detail"},
         "no card with id 987654321", 404),
        ({"src": t["cards"][0].pk, "dst": "NO-SUCH-CARD"}, {"dst", "detail"},
         "no card with serial 'NO-SUCH-CARD'", 404),
        ({"src": t["cards"][0].pk, "dst": foreign.pk}, {"dst", "detail"},
         "in cluster 'tiny'", 404),
        ({"src": t["cards"][0].pk, "dst": t["cards"][1].pk, "by": "bandwidth"}, {"by"},
         "'hops' or 'latency'", 400),
        ({"by": "x"}, {"src", "dst", "by"}, "", 400),
    ]
    for params, fields, words, status in cases:
        body = ask(reader_client, t["cluster"], status=status, **params)
        body.pop("detail", None)
        fields = fields - {"detail"}
        assert set(body) == fields, (params, body)
        assert all(isinstance(v, list) and v for v in body.values()), body
        assert words in " ".join(sum(body.values(), [])), (params, body)


def test_a_cluster_the_simulation_cannot_represent_is_400(reader_client, db):
    body = ask(reader_client, Cluster.objects.create(name="empty"), status=400, src=1, dst=2)
    assert "has no supernodes" in body["cluster"][0]


def test_unknown_cluster_is_404(reader_client, db):
    response = reader_client.get(reverse("api:cluster-route", args=[987654321]),
                                 {"src": 1, "dst": 2})
    assert response.status_code == 404


def test_reads_need_a_login_unless_public(anon_client, reader_client, tiny_cluster):
    t = tiny_cluster
    url = reverse("api:cluster-route", args=[t["cluster"].pk])
    params = {"src": t["cards"][0].pk, "dst": t["cards"][1].pk}
    assert anon_client.get(url, params).status_code == 401
    with override_settings(TWIN_PUBLIC_READ=True):
        assert anon_client.get(url, params).json()["hops"] == 1
    assert reader_client.post(url, params, format="json").status_code == 403
