"""Bad input and the rating rule through the API: a 400 naming the field (409 for the
rating rule, a conflict with the stored load), nothing written; an allowed overload is
saved and listed; the plant endpoint reports headroom."""
from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from twin.facility.models import CoolingElement, PowerElement, RackFacility

POWER, COOLING, RACKS = "api:facility-power", "api:facility-cooling", "api:facility-rack"


def _patch(client: APIClient, name: str, pk: int, body: dict[str, Any]) -> Any:
    return client.patch(reverse(f"{name}-detail", args=[pk]), body, format="json")


def _post(client: APIClient, name: str, body: dict[str, Any]) -> Any:
    return client.post(reverse(f"{name}-list"), body, format="json")


def _errors(response: Any) -> dict[str, Any]:
    assert response.status_code == 400, response.content
    return response.json()


def _over(response: Any) -> dict[str, Any]:
    """A write refused by the rating rule: 409 (a conflict with the stored load), the
    per-field messages of a 400 plus ``detail``."""
    assert response.status_code == 409, response.content
    body = response.json()
    assert body["detail"].startswith("Conflicts with the stored data"), body
    return body


def test_a_pdu_cannot_be_planned_over_its_rating(admin_client_api: APIClient,
                                                 plant_world: dict[str, Any]) -> None:
    """Lowering a PDU under the racks it feeds is a 409 on rating_kw, nothing saved."""
    pdu = plant_world["pdu"]
    errors = _over(_patch(admin_client_api, POWER, pdu.pk, {"rating_kw": 5.0}))
    assert "rating_kw" in errors and "pdu-r0" in errors["rating_kw"][0]
    assert "allow over budget" in errors["rating_kw"][0]
    pdu.refresh_from_db()
    assert pdu.rating_kw == 100.0


def test_the_redundancy_decides_the_usable_rating(admin_client_api: APIClient,
                                                  plant_world: dict[str, Any]) -> None:
    """2 × 8 kW is 16 kW in N but 8 kW in 2N: ~9 kW of racks fit the first, not the second."""
    pdu = plant_world["pdu"]
    ok = _patch(admin_client_api, POWER, pdu.pk, {"rating_kw": 8.0, "redundancy": "N",
                                                  "allow_over_budget": False})
    assert ok.status_code == 200, ok.content
    errors = _over(_patch(admin_client_api, POWER, pdu.pk, {"redundancy": "2N"}))
    assert "rating_kw" in errors
    assert PowerElement.objects.get(pk=pdu.pk).redundancy == "N"


def test_an_upstream_element_over_its_rating_blames_the_parent(
        admin_client_api: APIClient, plant_world: dict[str, Any]) -> None:
    """Moving the CRAH (and its racks' air heat) under a small chiller overloads the chiller."""
    w = plant_world
    chiller = CoolingElement.objects.create(site=w["site"], key="ch-small", kind="chiller",
                                            parent=w["tower"], capacity_kw=1.0)
    errors = _over(_patch(admin_client_api, COOLING, w["crah"].pk,
                            {"parent": chiller.pk}))
    assert "ch-small" in errors["parent"][0]
    assert CoolingElement.objects.get(pk=w["crah"].pk).parent_id == w["loop"].pk


def test_allow_over_budget_saves_and_lists(admin_client_api: APIClient,
                                           plant_world: dict[str, Any]) -> None:
    cdu = plant_world["cdu"]
    response = _patch(admin_client_api, COOLING, cdu.pk,
                      {"capacity_kw": 1.0, "allow_over_budget": True})
    assert response.status_code == 200, response.content
    over = response.json()["over_capacity"]
    assert [o["key"] for o in over] == ["cdu-0"] and over[0]["usable_kw"] == 1.0
    assert CoolingElement.objects.get(pk=cdu.pk).capacity_kw == 1.0
    plant = admin_client_api.get(reverse("api:facility-site-plant",
                                         args=[plant_world["site"].pk])).json()
    assert plant["over_capacity"] == 1
    # An element already over may still be renamed (it adds nothing).
    assert _patch(admin_client_api, COOLING, cdu.pk, {"name": "renamed"}).status_code == 200


def test_a_rack_cannot_be_placed_on_a_full_pdu(admin_client_api: APIClient,
                                              plant_world: dict[str, Any]) -> None:
    w = plant_world
    tiny_pdu = PowerElement.objects.create(site=w["site"], key="pdu-tiny", kind="pdu",
                                           parent=w["ups"], rating_kw=1.0)
    errors = _over(_patch(admin_client_api, RACKS, w["r0_place"].pk,
                            {"power_element": tiny_pdu.pk}))
    assert "pdu-tiny" in errors["power_element"][0]
    assert RackFacility.objects.get(pk=w["r0_place"].pk).power_element_id == w["pdu"].pk


@pytest.mark.parametrize(("name", "body", "field"), [
    (POWER, {"rating_kw": 0}, "rating_kw"),
    (POWER, {"rating_kw": -5}, "rating_kw"),
    (POWER, {"units": 3, "redundancy": "2N"}, "units"),
    (POWER, {"efficiency": [[0.5, 0.9], [0.25, 0.95]]}, "efficiency"),
    (POWER, {"efficiency": [[0.5, 7.0]]}, "efficiency"),
    (POWER, {"kind": "feed"}, "parent"),
])
def test_bad_power_input_is_400_on_the_field(admin_client_api: APIClient,
                                             plant_world: dict[str, Any], name: str,
                                             body: dict[str, Any], field: str) -> None:
    pdu = plant_world["pdu"]
    before = PowerElement.objects.filter(pk=pdu.pk).values().get()
    assert field in _errors(_patch(admin_client_api, name, pdu.pk, body))
    after = PowerElement.objects.filter(pk=pdu.pk).values().get()
    assert after == before


@pytest.mark.parametrize(("body", "field"), [
    ({"capacity_kw": 0}, "capacity_kw"),
    ({"design_flow_kg_s": 0}, "design_flow_kg_s"),
    ({"design_flow_kg_s": -1}, "design_flow_kg_s"),
    ({"units": 1}, "units"),  # N+1 with one unit has no spare
])
def test_bad_cooling_input_is_400_on_the_field(admin_client_api: APIClient,
                                               plant_world: dict[str, Any],
                                               body: dict[str, Any], field: str) -> None:
    cdu = plant_world["cdu"]
    assert field in _errors(_patch(admin_client_api, COOLING, cdu.pk, body))


def test_a_loop_cannot_feed_itself(admin_client_api: APIClient,
                                   plant_world: dict[str, Any]) -> None:
    w = plant_world
    for parent in (w["cdu"].pk, w["tcs"].pk):  # itself, and its own child
        assert "parent" in _errors(_patch(admin_client_api, COOLING, w["cdu"].pk,
                                          {"parent": parent}))
    assert CoolingElement.objects.get(pk=w["cdu"].pk).parent_id == w["loop"].pk


def test_a_liquid_rack_needs_a_cdu(admin_client_api: APIClient,
                                   plant_world: dict[str, Any]) -> None:
    w = plant_world
    errors = _errors(_patch(admin_client_api, RACKS, w["r0_place"].pk,
                            {"cooling_element": w["crah"].pk}))
    assert "CDU" in errors["cooling_element"][0]
    errors = _errors(_patch(admin_client_api, RACKS, w["net_place"].pk,
                            {"rack_class": "liquid"}))
    assert "liquid_fraction" in errors


def test_a_site_and_its_chains_stay_apart(admin_client_api: APIClient,
                                          plant_world: dict[str, Any]) -> None:
    """A parent from another site, a rack of another cluster: 400."""
    from twin.facility.models import Site
    from twin.hardware.models import Cluster, Rack

    other_cluster = Cluster.objects.create(name="elsewhere")
    other = Site.objects.create(cluster=other_cluster, name="elsewhere")
    feed = PowerElement.objects.create(site=other, key="feed-0", kind="feed", rating_kw=10.0)
    errors = _errors(_patch(admin_client_api, POWER, plant_world["ups"].pk,
                            {"parent": feed.pk}))
    assert "another site" in errors["parent"][0]
    stray = Rack.objects.create(cluster=other_cluster, name="x0", row=0, slot=0)
    errors = _errors(_post(admin_client_api, RACKS, {
        "rack": stray.pk, "site": plant_world["site"].pk, "rack_class": "air",
        "liquid_fraction": 0, "power_element": plant_world["pdu"].pk,
        "cooling_element": plant_world["crah"].pk}))
    assert "rack" in errors


def test_bad_site_input(admin_client_api: APIClient, plant_world: dict[str, Any]) -> None:
    url = reverse("api:facility-site-detail", args=[plant_world["site"].pk])
    for body, field in (({"wet_bulb_c": 40.0}, "wet_bulb_c"),
                        ({"contract_kw": 0}, "contract_kw"),
                        ({"weather": [[0, 20, 15], [0, 21, 15]]}, "weather"),
                        ({"weather": [[0, 20, 25]]}, "weather"),
                        ({"weather": "hot"}, "weather")):
        response = admin_client_api.patch(url, body, format="json")
        assert field in _errors(response), body


def test_plant_endpoint_reports_headroom(reader_client: APIClient,
                                         plant_world: dict[str, Any]) -> None:
    body = reader_client.get(reverse("api:facility-site-plant",
                                     args=[plant_world["site"].pk])).json()
    pdu = next(e for e in body["power"] if e["key"] == "pdu-r0")
    assert pdu["usable_kw"] == 100.0
    assert pdu["headroom_kw"] == pytest.approx(100.0 - pdu["load_kw"], abs=1e-3)
    assert pdu["load_kw"] == pytest.approx(body["it_kw"], abs=1e-3)
    assert body["feed_kw"] > body["it_kw"] and body["over_capacity"] == 0
    assert {e["kind"] for e in body["cooling"]} >= {"cdu", "tcs_loop", "crah",
                                                    "cooling_tower"}


def test_moving_a_ups_to_a_small_feed_is_refused(admin_client_api: APIClient,
                                                 plant_world: dict[str, Any]) -> None:
    """The check reads the racks under both roots (the old feed's and the new one's)."""
    w = plant_world
    small = PowerElement.objects.create(site=w["site"], key="feed-1", kind="feed",
                                        rating_kw=2.0)
    big = PowerElement.objects.create(site=w["site"], key="feed-2", kind="feed",
                                      rating_kw=1000.0)
    errors = _over(_patch(admin_client_api, POWER, w["ups"].pk, {"parent": small.pk}))
    assert "feed-1" in errors["parent"][0]
    assert _patch(admin_client_api, POWER, w["ups"].pk, {"parent": big.pk}).status_code == 200
    plant = admin_client_api.get(reverse("api:facility-site-plant", args=[w["site"].pk])).json()
    loads = {e["key"]: e for e in plant["power"]}
    assert loads["feed-0"]["load_kw"] == 0
    assert loads["feed-2"]["load_kw"] == pytest.approx(loads["ups-0"]["input_kw"], abs=1e-3)


def test_a_refused_create_writes_nothing(admin_client_api: APIClient,
                                         plant_world: dict[str, Any]) -> None:
    """A new place for a rack on a PDU without room: 409 on power_element, no row."""
    from twin.hardware.models import Rack, Server

    w = plant_world
    full = PowerElement.objects.create(site=w["site"], key="pdu-full", kind="pdu",
                                       parent=w["ups"], rating_kw=0.5)
    rack = Rack.objects.create(cluster=w["cluster"], name="r9", row=9, slot=0)
    Server.objects.create(rack=rack, name="r9-s0", hostname="node9", overhead_w=1500)
    before = RackFacility.objects.count()
    errors = _over(_post(admin_client_api, RACKS, {
        "rack": rack.pk, "site": w["site"].pk, "rack_class": "air", "liquid_fraction": 0,
        "power_element": full.pk, "cooling_element": w["crah"].pk}))
    assert "pdu-full" in errors["power_element"][0]
    assert RackFacility.objects.count() == before


def test_a_hardware_write_keeps_the_pdu_above_the_rack(admin_client_api: APIClient,
                                                       plant_world: dict[str, Any]) -> None:
    """A card swapped for a hungrier one fits rack r0's 40 kW budget but not the 9 kW PDU
    feeding r0 and net0 (8,985 W today): refused naming the PDU, nothing written;
    allowed over budget it saves; the same swap on a roomy PDU passes."""
    from twin.hardware.models import AcceleratorType, Card

    pdu, card = plant_world["pdu"], plant_world["cards"][0]
    PowerElement.objects.filter(pk=pdu.pk).update(rating_kw=9.0)
    b200 = AcceleratorType.objects.get(slug="b200-sxm-180gb")
    url = reverse("api:card-detail", args=[card.pk])
    refused = admin_client_api.patch(url, {"accelerator": b200.pk}, format="json")
    message = _over(refused)["server"][0]
    assert "pdu-r0" in message and "9.0 kW" in message and "allow over budget" in message
    assert Card.objects.get(pk=card.pk).accelerator.slug == "h100-sxm5-80gb"

    allowed = admin_client_api.patch(url, {"accelerator": b200.pk, "allow_over_budget": True},
                                     format="json")
    assert allowed.status_code == 200, allowed.content
    PowerElement.objects.filter(pk=pdu.pk).update(rating_kw=100.0)
    other = plant_world["cards"][1]
    ok = admin_client_api.patch(reverse("api:card-detail", args=[other.pk]),
                                {"accelerator": b200.pk}, format="json")
    assert ok.status_code == 200, ok.content


def test_a_hardware_write_keeps_the_cdu_above_the_rack(admin_client_api: APIClient,
                                                       plant_world: dict[str, Any]) -> None:
    """The cooling chain too: r0's liquid share (0.8 of its draw) must fit its CDU."""
    from twin.hardware.models import AcceleratorType

    CoolingElement.objects.filter(pk=plant_world["cdu"].pk).update(capacity_kw=6.2)
    b200 = AcceleratorType.objects.get(slug="b200-sxm-180gb")
    refused = admin_client_api.patch(
        reverse("api:card-detail", args=[plant_world["cards"][0].pk]),
        {"accelerator": b200.pk}, format="json")
    assert "cdu-0" in _over(refused)["server"][0]
