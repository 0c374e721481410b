"""Bad input through the API: 400 on the field at fault, and nothing written.

Each case snapshots the tables before the request and compares after, so a
half-written row (or a changed one) fails the test, not only a missing error.
"""
from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

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

MODELS = (AcceleratorType, Cluster, SuperNode, Rack, Server, Card, NetworkDevice, Link)
R0_DRAW = 8 * 700 + 1800 + 60 + 25


def snapshot() -> dict[str, list[tuple]]:
    """Every row of every hardware table, for before/after comparison."""
    return {m.__name__: sorted(m.objects.order_by().values_list()) for m in MODELS}


def assert_400_on(client: Any, method: str, url: str, body: Any, field: str,
                  contains: str = "", status: int = 400) -> dict[str, Any]:
    before = snapshot()
    response = getattr(client, method)(url, body, format="json")
    assert response.status_code == status, response.content
    errors = response.json()
    assert field in errors, errors
    assert all(isinstance(msg, str) and msg for msg in errors[field])
    if contains:
        assert contains in " ".join(errors[field]), errors[field]
    assert snapshot() == before, "a refused request changed the database"
    return errors


def url(basename: str, pk: int | None = None) -> str:
    if pk is None:
        return reverse(f"api:{basename}-list")
    return reverse(f"api:{basename}-detail", args=[pk])


@pytest.fixture
def spare(tiny_cluster):
    """A second supernode with an empty server in rack r0, ready for new cards."""
    sn = SuperNode.objects.create(cluster=tiny_cluster["cluster"], name="sn1", index=1,
                                  fabric="torus3d", card_count=8, dim_x=2, dim_y=2, dim_z=2,
                                  link_gbps=400, link_latency_ns=150)
    server = Server.objects.create(rack=tiny_cluster["rack"], supernode=sn, name="sn1-s0",
                                   position=1)
    return {**tiny_cluster, "sn1": sn, "s1": server}


def card_body(world: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    return {"supernode": world["sn1"].pk, "server": world["s1"].pk,
            "accelerator": world["h100"].pk, "index": 0, "slot": 0, "serial": "NEW-0",
            **overrides}


# --- the 40 kW budget (a conflict with the racks' stored draw: 409) ---------------


def test_card_over_rack_budget(admin_client_api, spare):
    draw = R0_DRAW + 1800  # with the spare server
    Rack.objects.filter(pk=spare["rack"].pk).update(power_budget_w=draw + 699)
    errors = assert_400_on(admin_client_api, "post", url("card"), card_body(spare), "server",
                           "over its", status=409)
    assert f"{draw + 700:,} W" in errors["server"][0]
    # One watt more of budget and the same card fits.
    Rack.objects.filter(pk=spare["rack"].pk).update(power_budget_w=draw + 700)
    assert admin_client_api.post(url("card"), card_body(spare), format="json").status_code == 201


def test_card_moved_into_full_rack(admin_client_api, spare):
    """An update that moves a card to a server in a full rack is refused too."""
    full = Rack.objects.create(cluster=spare["cluster"], name="full", row=0, slot=7,
                               power_budget_w=1800)
    server = Server.objects.create(rack=full, supernode=spare["supernode"], name="sn0-s9")
    card = spare["cards"][7]
    assert_400_on(admin_client_api, "patch", url("card", card.pk),
                  {"server": server.pk, "slot": 0}, "server", "over its 1,800 W budget", status=409)


def test_server_over_rack_budget(admin_client_api, tiny_cluster):
    body = {"rack": tiny_cluster["rack"].pk, "name": "heavy", "position": 2,
            "overhead_w": 40_000 - R0_DRAW + 1}
    assert_400_on(admin_client_api, "post", url("server"), body, "rack", "over its 40,000 W",
                  status=409)


def test_server_overhead_raised_over_budget(admin_client_api, tiny_cluster):
    assert_400_on(admin_client_api, "patch", url("server", tiny_cluster["server"].pk),
                  {"overhead_w": 40_000}, "overhead_w", "over its", status=409)


def test_device_over_rack_budget(admin_client_api, tiny_cluster):
    body = {"cluster": tiny_cluster["cluster"].pk, "rack": tiny_cluster["rack"].pk,
            "kind": "leaf", "name": "leaf9", "ports": 64, "port_gbps": 400,
            "power_w": 40_000 - R0_DRAW + 1}
    assert_400_on(admin_client_api, "post", url("networkdevice"), body, "rack", "over its",
                  status=409)


def test_device_power_raised_over_budget(admin_client_api, tiny_cluster):
    assert_400_on(admin_client_api, "patch", url("networkdevice", tiny_cluster["leaf"].pk),
                  {"power_w": 40_001}, "power_w", "over its", status=409)


def test_rack_budget_below_its_draw(admin_client_api, tiny_cluster):
    assert_400_on(admin_client_api, "patch", url("rack", tiny_cluster["rack"].pk),
                  {"power_budget_w": R0_DRAW - 1}, "power_budget_w", f"{R0_DRAW:,} W", status=409)


# --- links ------------------------------------------------------------------------


def link_body(world: dict[str, Any], **ends: Any) -> dict[str, Any]:
    return {"cluster": world["cluster"].pk, "kind": "roce", "bandwidth_gbps": 400,
            "latency_ns": 500, **ends}


def test_link_card_to_leaf_is_incompatible(admin_client_api, tiny_cluster):
    body = link_body(tiny_cluster, a_card=tiny_cluster["cards"][1].pk,
                     b_device=tiny_cluster["leaf"].pk)
    assert_400_on(admin_client_api, "post", url("link"), body, "b_device",
                  "A card cannot be linked to a leaf")


def test_link_kind_not_allowed_between_cards(admin_client_api, tiny_cluster):
    cards = tiny_cluster["cards"]
    body = link_body(tiny_cluster, a_card=cards[4].pk, b_card=cards[5].pk)  # kind roce
    assert_400_on(admin_client_api, "post", url("link"), body, "kind", "scale_up")


def test_link_end_with_card_and_device(admin_client_api, tiny_cluster):
    body = link_body(tiny_cluster, a_card=tiny_cluster["cards"][1].pk,
                     a_device=tiny_cluster["nic"].pk, b_device=tiny_cluster["leaf"].pk)
    assert_400_on(admin_client_api, "post", url("link"), body, "a_card", "exactly one")


def test_link_loop(admin_client_api, tiny_cluster):
    card = tiny_cluster["cards"][1].pk
    body = link_body(tiny_cluster, a_card=card, b_card=card, kind="scale_up")
    assert_400_on(admin_client_api, "post", url("link"), body, "b_card", "loop")


def test_link_retargeted_to_incompatible_end(admin_client_api, tiny_cluster):
    link = tiny_cluster["links"][3]  # nic - leaf, roce
    assert_400_on(admin_client_api, "patch", url("link", link.pk),
                  {"a_device": None, "a_card": tiny_cluster["cards"][2].pk}, "b_device",
                  "A card cannot be linked to a leaf")


# --- supernodes, cards -------------------------------------------------------------


def test_torus_dims_not_multiplying_to_card_count(admin_client_api, tiny_cluster):
    body = {"cluster": tiny_cluster["cluster"].pk, "name": "bad", "index": 3,
            "fabric": "torus3d", "card_count": 512, "dim_x": 8, "dim_y": 8, "dim_z": 4,
            "link_gbps": 400, "link_latency_ns": 150}
    assert_400_on(admin_client_api, "post", url("supernode"), body, "dim_x", "256 cards")


def test_card_count_changed_without_dims(admin_client_api, tiny_cluster):
    assert_400_on(admin_client_api, "patch", url("supernode", tiny_cluster["supernode"].pk),
                  {"card_count": 16}, "dim_x", "not the 16 declared")


def test_duplicate_card_serial(admin_client_api, spare):
    """A taken serial is a conflict with the stored data: 409, per field (it was 400)."""
    errors = assert_400_on(admin_client_api, "post", url("card"),
                           card_body(spare, serial="TINY-0000"), "serial", "already exists",
                           status=409)
    assert "detail" in errors


def test_serial_changed_to_a_taken_one(admin_client_api, tiny_cluster):
    card = tiny_cluster["cards"][1]
    assert_400_on(admin_client_api, "patch", url("card", card.pk), {"serial": "TINY-0002"},
                  "serial", "already exists", status=409)


def test_card_index_outside_supernode(admin_client_api, spare):
    assert_400_on(admin_client_api, "post", url("card"), card_body(spare, index=8), "index",
                  "indices 0–7")


def test_card_coordinate_outside_torus(admin_client_api, spare):
    assert_400_on(admin_client_api, "post", url("card"), card_body(spare, x=2), "x", "0–1")


def test_card_slot_taken(admin_client_api, spare):
    Card.objects.create(supernode=spare["sn1"], server=spare["s1"], accelerator=spare["h100"],
                        index=5, slot=0, serial="TAKEN")
    errors = assert_400_on(admin_client_api, "post", url("card"), card_body(spare),
                           "non_field_errors", status=409)
    assert "server, slot" in errors["non_field_errors"][0]


# --- negative or wrong figures ----------------------------------------------------


@pytest.mark.parametrize(("basename", "key", "field", "value"), [
    ("networkdevice", "leaf", "power_w", -5),
    ("networkdevice", "leaf", "latency_ns", -1.0),
    ("networkdevice", "leaf", "port_gbps", -400),
    ("link", "link", "bandwidth_gbps", -1.0),
    ("link", "link", "bandwidth_gbps", 0.0),
    ("link", "link", "latency_ns", -0.5),
    ("supernode", "supernode", "link_gbps", -400.0),
    ("supernode", "supernode", "link_latency_ns", -1.0),
    ("supernode", "supernode", "switch_latency_ns", -1.0),
    ("rack", "rack", "power_budget_w", -40_000),
    ("rack", "rack", "pue", 0.9),
    ("server", "server", "overhead_w", -1),
    ("acceleratortype", "h100", "bf16_tflops", -1.0),
    ("acceleratortype", "h100", "tdp_w", -700),
    ("acceleratortype", "h100", "idle_w", 701),
])
def test_negative_or_impossible_figures(admin_client_api, tiny_cluster, basename, key, field,
                                        value):
    obj = tiny_cluster["links"][0] if key == "link" else tiny_cluster[key]
    assert_400_on(admin_client_api, "patch", url(basename, obj.pk), {field: value}, field)


def test_wrong_types(admin_client_api, spare):
    """A value of the wrong JSON type is refused before anything else is looked at (it
    was coerced: ``"index": "3"`` was taken as 3); a reference to a row that does not
    exist in an otherwise good body is a conflict with the stored data (409)."""
    errors = assert_400_on(admin_client_api, "post", url("card"),
                           card_body(spare, index="first", server=999_999), "index")
    assert errors == {"index": ["Must be an integer."]}
    assert_400_on(admin_client_api, "post", url("card"), card_body(spare, index="3"), "index")
    response = admin_client_api.post(url("card"), card_body(spare, server=999_999),
                                     format="json")
    assert response.status_code == 409, response.content
    assert "server" in response.json() and "detail" in response.json()


def test_malformed_json(admin_client_api, tiny_cluster):
    before = snapshot()
    response = admin_client_api.generic("PATCH", url("rack", tiny_cluster["rack"].pk),
                                        '{"power_budget_w": 1', content_type="application/json")
    assert response.status_code == 400
    assert "JSON parse error" in response.json()["detail"]
    assert snapshot() == before


def test_a_refused_batch_of_fields_changes_none_of_them(admin_client_api, tiny_cluster):
    """A PATCH with one good and one bad field leaves both untouched."""
    assert_400_on(admin_client_api, "patch", url("rack", tiny_cluster["rack"].pk),
                  {"name": "renamed", "pue": 0.5}, "pue")
    assert Rack.objects.get(pk=tiny_cluster["rack"].pk).name == "r0"
