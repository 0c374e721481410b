"""The dashboard's geometry endpoints: the floor, one supernode, one rack.

Checked against the tiny hand-built cluster (figures by hand, as in
``test_summary``) and the builder's seed-512 preset (an 8×8×8 torus per
supernode: 1,536 scale-up links of which 192 wrap around).
"""
from __future__ import annotations

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from twin.hardware.models import Card, Cluster, Link, NetworkDevice, Rack, Server

from .conftest import add_supernodes

R0, NET0 = 7_485, 1_500  # the tiny cluster's rack draws (see test_summary)


@pytest.fixture
def seed(db) -> Cluster:
    """The builder's seed-512 preset with two supernodes (1,024 cards)."""
    from twin.hardware.builder import build_cluster

    return Cluster.objects.get(pk=build_cluster("seed-512", name="geo-seed",
                                                supernodes=2)["cluster_id"])


def get(client, name: str, pk: int, status: int = 200) -> dict:
    response = client.get(reverse(f"api:{name}", args=[pk]))
    assert response.status_code == status, response.content
    return response.json()


# ------------------------------------------------------------------ floor
def test_floor_of_the_tiny_cluster(reader_client, tiny_cluster):
    t = tiny_cluster
    body = get(reader_client, "cluster-floor", t["cluster"].pk)
    assert body["cluster"] == t["cluster"].pk and body["name"] == "tiny"
    assert body["preset"] == ""
    assert body["counts"] == {"supernodes": 1, "racks": 2, "cards": 8}
    assert body["racks"] == {
        "id": [t["rack"].pk, t["net_rack"].pk], "name": ["r0", "net0"], "row": [0, 1],
        "slot": [0, 0], "supernode": [t["supernode"].pk, None], "budget_w": [40_000, 40_000],
        "cards": [8, 0], "power_w": [R0, NET0],
    }
    assert body["supernodes"] == {
        "id": [t["supernode"].pk], "name": ["sn0"], "index": [0], "fabric": ["torus"],
        "fabric_kind": ["torus3d"], "dims": [[2, 2, 2]], "cards": [8], "card_count": [8],
    }
    assert body["tiers"] == [
        {"kind": "pcie_switch", "label": "PCIe switch", "count": 1, "racks": [t["rack"].pk]},
        {"kind": "smart_nic", "label": "Smart NIC", "count": 1, "racks": [t["rack"].pk]},
        {"kind": "leaf", "label": "Leaf switch", "count": 1, "racks": [t["net_rack"].pk]},
    ]


def test_switches_of_the_tiny_cluster(reader_client, tiny_cluster):
    """The floor's switch markers: fabric switches only (the leaf), with their rack."""
    t = tiny_cluster
    body = get(reader_client, "cluster-switches", t["cluster"].pk)
    leaf = NetworkDevice.objects.get(cluster=t["cluster"], kind="leaf")
    assert body == {"cluster": t["cluster"].pk, "id": [leaf.pk], "name": [leaf.name],
                    "kind": ["leaf"], "rack": [t["net_rack"].pk]}


def test_switches_of_a_built_cluster_in_tier_order(reader_client, seed):
    body = get(reader_client, "cluster-switches", seed.pk)
    kinds = body["kind"]
    assert set(kinds) <= {"leaf", "spine", "core"} and "leaf" in kinds and "spine" in kinds
    assert kinds == sorted(kinds, key=["leaf", "spine", "core"].index)
    assert len(body["id"]) == NetworkDevice.objects.filter(
        cluster=seed, kind__in=["leaf", "spine", "core"]).count()
    assert all(len(column) == len(body["id"]) for k, column in body.items() if k != "cluster")


def test_floor_query_count_does_not_grow_with_racks(reader_client, tiny_cluster,
                                                    django_assert_max_num_queries):
    """A handful of aggregates: the same count for 2 racks or 14 (no per-rack query)."""
    url = reverse("api:cluster-floor", args=[tiny_cluster["cluster"].pk])

    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert reader_client.get(url).status_code == 200
        return len(ctx.captured_queries)

    small = queries()
    add_supernodes(tiny_cluster, 1, 12)
    with django_assert_max_num_queries(7):
        body = reader_client.get(url).json()
    assert body["counts"] == {"supernodes": 13, "racks": 14, "cards": 104}
    assert queries() == small


def test_floor_of_a_built_cluster(reader_client, seed):
    body = get(reader_client, "cluster-floor", seed.pk)
    racks = body["racks"]
    assert body["preset"] == "seed-512"
    assert body["counts"] == {"supernodes": 2, "racks": Rack.objects.filter(cluster=seed)
                              .count(), "cards": 1024}
    assert sum(racks["cards"]) == 1024
    assert body["supernodes"]["dims"] == [[8, 8, 8], [8, 8, 8]]
    assert body["supernodes"]["cards"] == [512, 512]
    # columns line up: every array as long as the ids, in floor order
    assert all(len(column) == len(racks["id"]) for column in racks.values())
    positions = list(zip(racks["row"], racks["slot"], strict=True))
    assert positions == sorted(positions)
    # the nameplate draw is the rack list's (Rack.objects.with_power)
    draw = dict(Rack.objects.filter(cluster=seed).with_power().values_list("id", "power_w"))
    assert dict(zip(racks["id"], racks["power_w"], strict=True)) == draw
    # network tiers from the cards upward, each in the racks that hold them, then the
    # file system's appliances in their storage rack
    assert [t["kind"] for t in body["tiers"]] == ["pcie_switch", "smart_nic", "leaf", "spine",
                                                  "storage"]
    network = {pk for pk, sn in zip(racks["id"], racks["supernode"], strict=True) if sn is None}
    assert set(body["tiers"][2]["racks"]) <= network
    assert set(body["tiers"][0]["racks"]).isdisjoint(network)


# -------------------------------------------------------------- supernode
def test_supernode_geometry_of_the_tiny_cluster(reader_client, tiny_cluster):
    t = tiny_cluster
    body = get(reader_client, "supernode-geometry", t["supernode"].pk)
    cards = t["cards"]
    assert (body["supernode"], body["cluster"], body["fabric"], body["dims"]) == \
        (t["supernode"].pk, t["cluster"].pk, "torus", [2, 2, 2])
    assert body["cards"] == {
        "id": [c.pk for c in cards], "serial": [c.serial for c in cards],
        "index": list(range(8)), "x": [i % 2 for i in range(8)],
        "y": [(i // 2) % 2 for i in range(8)], "z": [i // 4 for i in range(8)],
        "rack": [t["rack"].pk] * 8, "server": [t["server"].pk] * 8, "slot": list(range(8)),
        "status": ["ok"] * 8,
    }
    # the card–card link only (not card 0's PCIe link to its switch)
    assert body["links"] == {"id": [t["links"][0].pk], "a": [0], "b": [1],
                             "kind": ["scale_up"], "status": ["up"], "wrap": [False]}


def test_supernode_geometry_leaves_out_links_to_other_supernodes(reader_client, tiny_cluster):
    other = add_supernodes(tiny_cluster, 1, 1)[0]
    Link.objects.create(cluster=tiny_cluster["cluster"], a_card=tiny_cluster["cards"][2],
                        b_card=other, kind="scale_up", bandwidth_gbps=400, latency_ns=150)
    body = get(reader_client, "supernode-geometry", tiny_cluster["supernode"].pk)
    assert body["links"]["id"] == [tiny_cluster["links"][0].pk]
    assert get(reader_client, "supernode-geometry", other.supernode_id)["links"]["id"] == []


def test_supernode_geometry_of_a_torus_marks_wrap_around_links(reader_client, seed,
                                                              django_assert_max_num_queries):
    sn = seed.supernodes.order_by("index")[1]
    with django_assert_max_num_queries(4):  # 3 + the reader's cluster grants (docs/access.md)
        body = get(reader_client, "supernode-geometry", sn.pk)
    cards, links = body["cards"], body["links"]
    assert cards["index"] == list(range(512))
    assert cards["id"] == list(Card.objects.filter(supernode=sn).order_by("index")
                               .values_list("id", flat=True))
    assert len(links["id"]) == 3 * 512 == Link.objects.filter(
        a_card__supernode=sn, b_card__supernode=sn).count()
    assert set(links["kind"]) == {"scale_up"}
    xyz = list(zip(cards["x"], cards["y"], cards["z"], strict=True))
    for a, b, wrap in zip(links["a"], links["b"], links["wrap"], strict=True):
        steps = sorted(abs(p - q) for p, q in zip(xyz[a], xyz[b], strict=True))
        assert steps in ([0, 0, 1], [0, 0, 7])  # torus neighbours: one step, or 7 around
        assert wrap == (steps[-1] == 7)
    assert sum(links["wrap"]) == 3 * 64  # one wrap link per ring, 64 rings per dimension


# ------------------------------------------------------------------- rack
def test_rack_geometry(reader_client, tiny_cluster, django_assert_max_num_queries):
    t = tiny_cluster
    top = Server.objects.create(rack=t["rack"], supernode=t["supernode"], name="sn0-s9",
                                position=9, overhead_w=500)
    with django_assert_max_num_queries(5):  # 4 + the reader's cluster grants (docs/access.md)
        body = get(reader_client, "rack-geometry", t["rack"].pk)
    assert {k: body[k] for k in ("rack", "name", "cluster", "supernode", "row", "slot",
                                 "budget_w", "power_w")} == {
        "rack": t["rack"].pk, "name": "r0", "cluster": t["cluster"].pk,
        "supernode": t["supernode"].pk, "row": 0, "slot": 0, "budget_w": 40_000,
        "power_w": R0 + 500}
    assert body["power_w"] == Rack.objects.with_power().get(pk=t["rack"].pk).power_w
    assert [(s["id"], s["name"], s["position"]) for s in body["servers"]] == [
        (t["server"].pk, "sn0-s0", 0), (top.pk, "sn0-s9", 9)]
    assert body["servers"][0]["cards"] == [
        {"id": c.pk, "serial": c.serial, "slot": i, "status": "ok", "index": i,
         "tdp_w": c.accelerator.tdp_w}
        for i, c in enumerate(t["cards"])]
    # The live power bar adds the cards' readings to the static part: servers + devices.
    static = sum(s.overhead_w for s in Server.objects.filter(rack=t["rack"])) + sum(
        d.power_w for d in NetworkDevice.objects.filter(rack=t["rack"]))
    assert body["static_w"] == static
    assert body["static_w"] + sum(c.accelerator.tdp_w for c in t["cards"]) == body["power_w"]
    assert body["servers"][1]["cards"] == []
    assert [(d["id"], d["kind"]) for d in body["devices"]] == [
        (t["switch"].pk, "pcie_switch"), (t["nic"].pk, "smart_nic")]


def test_network_rack_geometry(reader_client, tiny_cluster):
    body = get(reader_client, "rack-geometry", tiny_cluster["net_rack"].pk)
    assert body["supernode"] is None and body["servers"] == []
    assert body["devices"] == [{"id": tiny_cluster["leaf"].pk, "name": "leaf0",
                                "kind": "leaf", "server": None}]
    assert body["power_w"] == NET0 and body["static_w"] == NET0


# ------------------------------------------------------------- access rules
def _urls(t: dict) -> list[str]:
    return [reverse("api:cluster-floor", args=[t["cluster"].pk]),
            reverse("api:supernode-geometry", args=[t["supernode"].pk]),
            reverse("api:rack-geometry", args=[t["rack"].pk])]


def test_anonymous_is_401_unless_reads_are_public(anon_client, tiny_cluster):
    for url in _urls(tiny_cluster):
        response = anon_client.get(url)
        assert response.status_code == 401 and response["WWW-Authenticate"] == "Token"
        with override_settings(TWIN_PUBLIC_READ=True):
            assert anon_client.get(url).status_code == 200


def test_writes_are_refused(reader_client, admin_client_api, tiny_cluster):
    """Read-only: a reader's POST is refused (403) before anything; an admin's is 405."""
    for url in _urls(tiny_cluster):
        assert reader_client.post(url, {}, format="json").status_code == 403
        assert admin_client_api.post(url, {}, format="json").status_code == 405


@pytest.mark.parametrize("name", ["cluster-floor", "supernode-geometry", "rack-geometry"])
def test_unknown_objects_are_404(reader_client, db, name):
    get(reader_client, name, 987654321, status=404)
