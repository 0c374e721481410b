"""``GET /api/clusters/<id>/summary/`` against figures computed by hand.

The tiny cluster (tests/conftest.py): rack r0 holds one server (1,800 W
overhead) with 8 H100 (700 W), a PCIe switch (60 W) and a NIC (25 W):
5,600 + 1,800 + 85 = 7,485 W. Rack net0 holds a leaf switch: 1,500 W.
"""
from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.facility import conftest as facility_fixtures
from twin.hardware.models import Card, Cluster, Link, Rack

from .conftest import add_supernodes

plant_world = facility_fixtures.plant_world  # the hand-built plant on the tiny cluster

R0, NET0 = 7_485, 1_500


def summary(client, cluster) -> dict:
    response = client.get(reverse("api:cluster-summary", args=[cluster.pk]))
    assert response.status_code == 200, response.content
    return response.json()


def test_counts_of_the_tiny_cluster(reader_client, tiny_cluster):
    counts = summary(reader_client, tiny_cluster["cluster"])["counts"]
    assert counts == {
        "supernodes": 1, "racks": 2, "servers": 1, "cards": 8, "devices": 3, "links": 4,
        "cards_by_status": {"ok": 8, "degraded": 0, "failed": 0, "maintenance": 0},
        "devices_by_kind": {"pcie_switch": 1, "smart_nic": 1, "leaf": 1, "spine": 0,
                            "core": 0, "storage": 0},
        "links_by_kind": {"scale_up": 1, "pcie": 2, "infiniband": 0, "roce": 1},
        "links_by_status": {"up": 4, "degraded": 0, "down": 0},
    }


def test_power_of_the_tiny_cluster(reader_client, tiny_cluster):
    body = summary(reader_client, tiny_cluster["cluster"])
    assert body["name"] == "tiny"
    assert body["power"] == {
        "it_w": R0 + NET0,
        "facility_w": pytest.approx((R0 + NET0) * 1.05),
        "pue": pytest.approx(1.05),
        "pue_source": "nameplate",
        "budget_w": 80_000,
        "utilization": pytest.approx((R0 + NET0) / 80_000, abs=1e-4),
        "racks_over_budget": {"count": 0, "names": []},
    }
    assert body["racks_per_supernode"] == {"min": 1, "max": 1, "avg": 1.0, "network_racks": 1}


def test_facility_power_uses_each_racks_pue(reader_client, tiny_cluster):
    """Facility = Σ rack draw × *that rack's* PUE, not Σ draw × one PUE."""
    Rack.objects.filter(pk=tiny_cluster["net_rack"].pk).update(pue=1.4, cooling="air")
    power = summary(reader_client, tiny_cluster["cluster"])["power"]
    assert power["it_w"] == R0 + NET0
    assert power["facility_w"] == pytest.approx(R0 * 1.05 + NET0 * 1.4)
    assert power["pue"] == pytest.approx((R0 * 1.05 + NET0 * 1.4) / (R0 + NET0), abs=1e-4)


def test_statuses_and_racks_over_budget(reader_client, tiny_cluster):
    cards, links = tiny_cluster["cards"], tiny_cluster["links"]
    Card.objects.filter(pk__in=[cards[0].pk, cards[1].pk]).update(status="failed")
    Card.objects.filter(pk=cards[2].pk).update(status="maintenance")
    Link.objects.filter(pk=links[3].pk).update(status="down")
    # Budgets lowered behind validation's back (as a bulk import might): both over.
    Rack.objects.filter(pk=tiny_cluster["rack"].pk).update(power_budget_w=7_000)
    Rack.objects.filter(pk=tiny_cluster["net_rack"].pk).update(power_budget_w=1_000)
    body = summary(reader_client, tiny_cluster["cluster"])
    assert body["counts"]["cards_by_status"] == {"ok": 5, "degraded": 0, "failed": 2,
                                                 "maintenance": 1}
    assert body["counts"]["links_by_status"] == {"up": 3, "degraded": 0, "down": 1}
    assert body["power"]["budget_w"] == 8_000
    # Worst first: net0 is 500 W over, r0 485 W over.
    assert body["power"]["racks_over_budget"] == {"count": 2, "names": ["net0", "r0"]}


def test_summary_of_an_empty_cluster(reader_client, db):
    body = summary(reader_client, Cluster.objects.create(name="empty"))
    assert body["counts"]["cards"] == 0
    assert body["power"] == {"it_w": 0, "facility_w": 0.0, "pue": None,
                             "pue_source": "nameplate", "budget_w": 0,
                             "utilization": None,
                             "racks_over_budget": {"count": 0, "names": []}}
    assert body["racks_per_supernode"] == {"min": None, "max": None, "avg": None,
                                           "network_racks": 0}


def test_summary_ignores_other_clusters(reader_client, wide_cluster):
    other = Cluster.objects.create(name="other")
    assert summary(reader_client, other)["counts"]["cards"] == 0
    body = summary(reader_client, wide_cluster["cluster"])
    assert body["counts"]["cards"] == 40
    assert body["power"]["it_w"] == R0 + NET0 + 4 * (8 * 700 + 1800)
    assert body["racks_per_supernode"] == {"min": 1, "max": 1, "avg": 1.0, "network_racks": 1}


def test_summary_query_count_does_not_grow_with_the_cluster(reader_client, tiny_cluster):
    """Aggregates only: the same number of queries for 8 cards in 2 racks or 40 in 6."""
    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            summary(reader_client, tiny_cluster["cluster"])
        return len(ctx.captured_queries)

    small = queries()
    add_supernodes(tiny_cluster, 1, 4)
    assert queries() == small <= 12


def test_summary_needs_login(anon_client, tiny_cluster):
    url = reverse("api:cluster-summary", args=[tiny_cluster["cluster"].pk])
    assert anon_client.get(url).status_code == 401


def test_a_cluster_with_a_plant_publishes_the_plant_computed_pue(reader_client, plant_world):
    """PUE from the components (the plant model at the racks' nameplate draw), not the
    racks' stored 1.05; a write to the plant's rows is seen at once (the cache)."""
    from simulation.facility.model import compile_model
    from twin.facility.models import CoolingElement
    from twin.facility.plant import plant_for_cluster

    cluster = plant_world["cluster"]
    plant = plant_for_cluster(cluster)
    expected = compile_model(plant).settle(plant.racks.nameplate_w.copy()).pue
    power = summary(reader_client, cluster)["power"]
    assert power["pue_source"] == "plant"
    assert power["pue"] == pytest.approx(expected, abs=1e-4)
    assert power["pue"] != pytest.approx(1.05, abs=1e-3)
    assert power["facility_w"] == pytest.approx(power["it_w"] * expected, rel=1e-6)
    CoolingElement.objects.filter(pk=plant_world["cdu"].pk).update(pump_kw=3.0)
    again = summary(reader_client, cluster)["power"]
    assert again["pue"] > power["pue"]     # 2 kW more pumping on ~9 kW of IT
