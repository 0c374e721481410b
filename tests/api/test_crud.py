"""CRUD, auth, permission and filter tests of every hardware endpoint.

Each class declares its data; ``APIViewTests`` (tests/api/base.py) runs the
same list/get/create/update/delete/permission tests on each.
"""
from __future__ import annotations

from typing import Any

from twin.hardware.models import (
    AcceleratorType,
    Card,
    Cluster,
    Link,
    NetworkDevice,
    Rack,
    Server,
    SuperNode,
)

from .base import APIViewTests

World = dict[str, Any]


def _spare_supernode_and_server(world: World) -> tuple[SuperNode, Server]:
    """A second 8-card supernode with one server in rack r0 (r0 has the headroom)."""
    sn = SuperNode.objects.create(cluster=world["cluster"], name="sn1", index=1,
                                  fabric="torus3d", card_count=8, dim_x=2, dim_y=2, dim_z=2,
                                  link_gbps=400, link_latency_ns=150)
    server = Server.objects.create(rack=world["rack"], supernode=sn, name="sn1-s0",
                                   position=1, hostname="node1")
    return sn, server


class TestAcceleratorTypeAPI(APIViewTests):
    basename = "acceleratortype"
    model = AcceleratorType

    def existing(self, world: World) -> AcceleratorType:
        # Not the H100 of the fixture: cards PROTECT it from deletion.
        return AcceleratorType.objects.get(slug="ascend-910b")

    def create_data(self, world: World) -> dict[str, Any]:
        return {"slug": "test-npu", "name": "Test NPU", "vendor": "Acme",
                "bf16_tflops": 300.0, "fp8_tflops": 600.0, "hbm_gib": 64.0, "hbm_tbps": 1.6,
                "tdp_w": 450, "idle_w": 80, "scaleup_links": 7, "scaleup_gbps": 392.0,
                "source": "https://example.com/npu-datasheet"}

    def update_data(self, world: World) -> dict[str, Any]:
        return {"tdp_w": 420, "notes": "derated"}

    def filter_cases(self, world: World) -> list[tuple[dict[str, Any], set[int]]]:
        huawei = set(AcceleratorType.objects.filter(vendor="Huawei").values_list("pk", flat=True))
        return [({"vendor": "Huawei"}, huawei),
                ({"slug": "h100-sxm5-80gb"}, {world["h100"].pk}),
                ({"q": "h100"}, {world["h100"].pk})]


    def test_type_in_use_cannot_be_deleted(self, admin_client_api, tiny_cluster) -> None:
        response = admin_client_api.delete(self.detail_url(tiny_cluster["h100"].pk))
        assert response.status_code == 409
        assert "TINY-0000" in response.json()["detail"]
        assert AcceleratorType.objects.filter(pk=tiny_cluster["h100"].pk).exists()


class TestClusterAPI(APIViewTests):
    basename = "cluster"
    model = Cluster
    expected_fields = ("id", "url", "display", "summary_url")

    def existing(self, world: World) -> Cluster:
        return world["cluster"]

    def create_data(self, world: World) -> dict[str, Any]:
        return {"name": "lab", "description": "a hand-made lab cluster"}

    def update_data(self, world: World) -> dict[str, Any]:
        return {"description": "renamed in the API"}

    def delete_query(self, world: World) -> str:
        return "cascade=true&confirm=tiny"

    def filter_cases(self, world: World) -> list[tuple[dict[str, Any], set[int]]]:
        other = Cluster.objects.create(name="other", preset="seed-512")
        return [({"name": "tiny"}, {world["cluster"].pk}),
                ({"preset": "seed-512"}, {other.pk}),
                ({"q": "oth"}, {other.pk})]

    def test_delete_removes_everything_in_it(self, admin_client_api, tiny_cluster) -> None:
        assert admin_client_api.delete(self.detail_url(tiny_cluster["cluster"].pk),
                                       QUERY_STRING="cascade=true&confirm=tiny").status_code \
            == 204
        for model in (SuperNode, Rack, Server, Card, NetworkDevice, Link):
            assert not model.objects.exists(), model


class TestSuperNodeAPI(APIViewTests):
    basename = "supernode"
    model = SuperNode

    def existing(self, world: World) -> SuperNode:
        return world["supernode"]

    def create_data(self, world: World) -> dict[str, Any]:
        return {"cluster": world["cluster"].pk, "name": "sn9", "index": 9,
                "fabric": "torus3d", "card_count": 512, "dim_x": 8, "dim_y": 8, "dim_z": 8,
                "link_gbps": 600.0, "link_latency_ns": 150.0, "switch_latency_ns": 105.0}

    def update_data(self, world: World) -> dict[str, Any]:
        return {"link_latency_ns": 120.0}

    def delete_query(self, world: World) -> str:
        return "cascade=true"

    def filter_cases(self, world: World) -> list[tuple[dict[str, Any], set[int]]]:
        ring = SuperNode.objects.create(cluster=world["cluster"], name="ring", index=5,
                                        fabric="ring", card_count=4, dim_x=4, link_gbps=100,
                                        link_latency_ns=300)
        return [({"fabric": "ring"}, {ring.pk}),
                ({"cluster": world["cluster"].pk}, {ring.pk, world["supernode"].pk}),
                ({"fabric": ["ring", "torus3d"]}, {ring.pk, world["supernode"].pk})]


class TestRackAPI(APIViewTests):
    basename = "rack"
    model = Rack
    expected_fields = ("id", "url", "display", "power_w", "utilization", "facility_w",
                       "headroom_w")

    def existing(self, world: World) -> Rack:
        return Rack.objects.create(cluster=world["cluster"], name="spare", row=3, slot=0)

    def create_data(self, world: World) -> dict[str, Any]:
        return {"cluster": world["cluster"].pk, "supernode": world["supernode"].pk,
                "name": "r1", "row": 0, "slot": 1, "power_budget_w": 35_000,
                "cooling": "air", "pue": 1.4}

    def update_data(self, world: World) -> dict[str, Any]:
        return {"power_budget_w": 30_000, "pue": 1.1}

    def filter_cases(self, world: World) -> list[tuple[dict[str, Any], set[int]]]:
        r0, net = world["rack"], world["net_rack"]
        Rack.objects.filter(pk=net.pk).update(power_budget_w=1000)  # bypasses clean()
        return [({"cluster": world["cluster"].pk}, {r0.pk, net.pk}),
                ({"over_budget": "true"}, {net.pk}),
                ({"over_budget": "false"}, {r0.pk}),
                ({"row": 1}, {net.pk}),
                ({"supernode": world["supernode"].pk}, {r0.pk})]

    def test_power_fields_come_from_sql(self, reader_client, tiny_cluster) -> None:
        body = reader_client.get(self.detail_url(tiny_cluster["rack"].pk)).json()
        draw = 8 * 700 + 1800 + 60 + 25
        assert body["power_w"] == draw
        assert body["utilization"] == draw / 40_000
        assert abs(body["facility_w"] - draw * 1.05) < 1e-6
        assert body["headroom_w"] == 40_000 - draw

    def test_update_answers_with_fresh_power_fields(self, admin_client_api,
                                                    tiny_cluster) -> None:
        response = admin_client_api.patch(self.detail_url(tiny_cluster["rack"].pk),
                                          {"power_budget_w": 10_000}, format="json")
        assert response.status_code == 200, response.content
        assert response.json()["headroom_w"] == 10_000 - (8 * 700 + 1800 + 60 + 25)

    def test_power_fields_are_read_only(self, admin_client_api, tiny_cluster) -> None:
        url = self.detail_url(tiny_cluster["rack"].pk)
        response = admin_client_api.patch(url, {"power_w": 1, "headroom_w": 5}, format="json")
        assert response.status_code == 200
        assert response.json()["power_w"] == 8 * 700 + 1800 + 60 + 25

    def test_ordering_by_draw(self, reader_client, tiny_cluster) -> None:
        rows = reader_client.get(self.list_url(), {"ordering": "-power_w"}).json()["results"]
        assert [r["id"] for r in rows] == [tiny_cluster["rack"].pk, tiny_cluster["net_rack"].pk]

    def test_delete_of_rack_with_servers_is_409(self, admin_client_api, tiny_cluster) -> None:
        response = admin_client_api.delete(self.detail_url(tiny_cluster["rack"].pk))
        assert response.status_code == 409
        assert "servers" in response.json()["detail"]
        assert Rack.objects.filter(pk=tiny_cluster["rack"].pk).exists()


class TestServerAPI(APIViewTests):
    basename = "server"
    model = Server

    def existing(self, world: World) -> Server:
        return world["server"]

    def create_data(self, world: World) -> dict[str, Any]:
        return {"rack": world["rack"].pk, "supernode": world["supernode"].pk,
                "name": "sn0-s1", "position": 1, "hostname": "node1", "cards_per_server": 8,
                "overhead_w": 1800, "nic_count": 2, "nic_gbps": 400}

    def update_data(self, world: World) -> dict[str, Any]:
        return {"overhead_w": 2000, "hostname": "node0.lab"}

    def delete_query(self, world: World) -> str:
        return "cascade=true"

    def filter_cases(self, world: World) -> list[tuple[dict[str, Any], set[int]]]:
        s = world["server"].pk
        return [({"cluster": world["cluster"].pk}, {s}), ({"rack": world["net_rack"].pk}, set()),
                ({"hostname": "node0"}, {s}), ({"q": "sn0-s"}, {s})]


class TestCardAPI(APIViewTests):
    basename = "card"
    model = Card
    cursor_paginated = True
    expected_fields = ("id", "url", "display", "cluster", "rack", "uuid")

    def existing(self, world: World) -> Card:
        return world["cards"][7]

    def create_data(self, world: World) -> dict[str, Any]:
        sn, server = _spare_supernode_and_server(world)
        return {"supernode": sn.pk, "server": server.pk, "accelerator": world["h100"].pk,
                "index": 0, "slot": 0, "x": 0, "y": 0, "z": 0, "serial": "NEW-0000",
                "status": "ok"}

    def update_data(self, world: World) -> dict[str, Any]:
        return {"status": "failed"}

    def filter_cases(self, world: World) -> list[tuple[dict[str, Any], set[int]]]:
        cards = world["cards"]
        Card.objects.filter(pk=cards[3].pk).update(status="degraded")
        all_ids = {c.pk for c in cards}
        return [({"cluster": world["cluster"].pk}, all_ids),
                ({"cluster": world["cluster"].pk + 1000}, set()),
                ({"rack": world["rack"].pk}, all_ids),
                ({"server": world["server"].pk}, all_ids),
                ({"status": "degraded"}, {cards[3].pk}),
                ({"status": ["degraded", "failed"]}, {cards[3].pk}),
                ({"accelerator": "h100-sxm5-80gb"}, all_ids),
                ({"accelerator": "b200-sxm-180gb"}, set()),
                ({"serial": "TINY-0005"}, {cards[5].pk}),
                ({"q": "tiny-0002"}, {cards[2].pk}),
                ({"x": 1, "y": 1, "z": 1}, {cards[7].pk})]

    def test_card_shows_its_cluster_and_rack(self, reader_client, tiny_cluster) -> None:
        body = reader_client.get(self.detail_url(tiny_cluster["cards"][0].pk)).json()
        assert body["cluster"] == tiny_cluster["cluster"].pk
        assert body["rack"] == tiny_cluster["rack"].pk
        assert body["uuid"] == "00000000-0000-0000-0000-000000000001"


class TestNetworkDeviceAPI(APIViewTests):
    basename = "networkdevice"
    model = NetworkDevice
    expected_fields = ("id", "url", "display", "tier")

    def existing(self, world: World) -> NetworkDevice:
        return world["leaf"]

    def create_data(self, world: World) -> dict[str, Any]:
        return {"cluster": world["cluster"].pk, "rack": world["net_rack"].pk, "kind": "spine",
                "name": "spine0", "model": "51.2T", "ports": 128, "port_gbps": 400,
                "latency_ns": 600.0, "power_w": 2200}

    def update_data(self, world: World) -> dict[str, Any]:
        return {"power_w": 1400, "latency_ns": 550.0}

    def delete_query(self, world: World) -> str:
        return "cascade=true"  # the leaf's link to the NIC

    def filter_cases(self, world: World) -> list[tuple[dict[str, Any], set[int]]]:
        sw, nic, leaf = world["switch"].pk, world["nic"].pk, world["leaf"].pk
        return [({"kind": "leaf"}, {leaf}), ({"kind": ["smart_nic", "pcie_switch"]}, {sw, nic}),
                ({"server": world["server"].pk}, {sw, nic}),
                ({"rack": world["rack"].pk}, {sw, nic}), ({"q": "leaf"}, {leaf})]

    def test_device_in_a_server_takes_the_server_rack(self, admin_client_api,
                                                      tiny_cluster) -> None:
        """``clean()`` derives the rack from the server; the saved row keeps it."""
        body = {"cluster": tiny_cluster["cluster"].pk, "server": tiny_cluster["server"].pk,
                "kind": "smart_nic", "name": "sn0-s0-nic1", "ports": 1, "port_gbps": 400,
                "power_w": 25}
        response = admin_client_api.post(self.list_url(), body, format="json")
        assert response.status_code == 201, response.content
        assert response.json()["rack"] == tiny_cluster["rack"].pk
        assert response.json()["tier"] == "aggregation"
        assert NetworkDevice.objects.get(name="sn0-s0-nic1").rack_id == tiny_cluster["rack"].pk
        assert Rack.objects.with_power().get(pk=tiny_cluster["rack"].pk).power_w == \
            8 * 700 + 1800 + 60 + 25 + 25


class TestLinkAPI(APIViewTests):
    basename = "link"
    model = Link
    cursor_paginated = True
    expected_fields = ("id", "url", "display", "a_kind", "b_kind")

    def existing(self, world: World) -> Link:
        return world["links"][0]

    def create_data(self, world: World) -> dict[str, Any]:
        cards = world["cards"]
        return {"cluster": world["cluster"].pk, "a_card": cards[2].pk, "b_card": cards[3].pk,
                "kind": "scale_up", "bandwidth_gbps": 400.0, "latency_ns": 150.0}

    def update_data(self, world: World) -> dict[str, Any]:
        return {"status": "down", "bandwidth_gbps": 200.0}

    def filter_cases(self, world: World) -> list[tuple[dict[str, Any], set[int]]]:
        up, pcie1, pcie2, roce = (link.pk for link in world["links"])
        return [({"kind": "pcie"}, {pcie1, pcie2}), ({"kind": ["roce", "scale_up"]}, {up, roce}),
                ({"card": world["cards"][0].pk}, {up, pcie1}),
                ({"device": world["nic"].pk}, {pcie2, roce}),
                ({"status": "up", "cluster": world["cluster"].pk}, {up, pcie1, pcie2, roce})]

    def test_end_kinds(self, reader_client, tiny_cluster) -> None:
        rows = reader_client.get(self.list_url()).json()["results"]
        assert [(r["a_kind"], r["b_kind"]) for r in rows] == [
            ("card", "card"), ("card", "pcie_switch"), ("pcie_switch", "smart_nic"),
            ("smart_nic", "leaf")]
