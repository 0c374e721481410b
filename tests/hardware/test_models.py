"""Model validation: every bad input gets a per-field message from ``clean()``, and
the database's own constraints hold when ``clean()`` is bypassed (bulk writes).

Each constraint test runs the bad write inside ``transaction.atomic()`` so the
test's own transaction survives the IntegrityError on PostgreSQL.
"""
from __future__ import annotations

import itertools
import uuid
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from twin.hardware.catalogue import load_catalogue
from twin.hardware.choices import DeviceKindChoices, FabricChoices, LinkKindChoices
from twin.hardware.constants import (
    CARD_ENDPOINT,
    COMPATIBLE_ENDPOINTS,
    DEFAULT_RACK_BUDGET_W,
    allowed_link_kinds,
)
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

ENDPOINTS = [CARD_ENDPOINT, *DeviceKindChoices.values()]


def errors_of(obj: Any) -> dict[str, list[str]]:
    """``full_clean()``'s per-field messages (empty if the object is valid)."""
    try:
        obj.full_clean()
    except ValidationError as err:
        return err.message_dict
    return {}


def violates_constraint(create: Any) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        create()


def supernode(cluster: Cluster, **overrides: Any) -> SuperNode:
    fields = {"cluster": cluster, "name": "snx", "index": 7, "fabric": FabricChoices.TORUS_3D,
              "card_count": 512, "dim_x": 8, "dim_y": 8, "dim_z": 8, "link_gbps": 400,
              "link_latency_ns": 150}
    fields.update(overrides)
    return SuperNode(**fields)


def link(tiny: dict[str, Any], **ends: Any) -> Link:
    fields = {"cluster": tiny["cluster"], "kind": LinkKindChoices.SCALE_UP,
              "bandwidth_gbps": 400, "latency_ns": 150}
    fields.update(ends)
    return Link(**fields)


# --- the fixture itself is valid -------------------------------------------------------
def test_tiny_cluster_is_valid(tiny_cluster) -> None:
    for obj in [tiny_cluster["cluster"], tiny_cluster["supernode"], tiny_cluster["rack"],
                tiny_cluster["net_rack"], tiny_cluster["server"], *tiny_cluster["cards"],
                tiny_cluster["switch"], tiny_cluster["nic"], tiny_cluster["leaf"],
                *tiny_cluster["links"]]:
        assert errors_of(obj) == {}, obj
    assert tiny_cluster["rack"].power_budget_w == DEFAULT_RACK_BUDGET_W == 40_000
    assert tiny_cluster["rack"].draw_w() == 7_485


# --- power budget ---------------------------------------------------------------------------
def _fill(rack: Rack, headroom: int = 0) -> Rack:
    Rack.objects.filter(pk=rack.pk).update(power_budget_w=rack.draw_w() + headroom)
    rack.refresh_from_db()
    return rack


def test_card_over_budget_names_the_rack_draw_and_headroom(tiny_cluster) -> None:
    rack = _fill(tiny_cluster["rack"], headroom=500)
    server = tiny_cluster["server"]
    Server.objects.filter(pk=server.pk).update(cards_per_server=9)
    server.refresh_from_db()
    card = Card(supernode=tiny_cluster["supernode"], server=server,
                accelerator=tiny_cluster["h100"], index=7, slot=8, serial="EXTRA")
    message = errors_of(card)["server"][0]
    assert f"would draw {rack.power_budget_w + 200:,} W" in message
    assert "headroom: 500 W" in message and "raise the rack's budget" in message
    # An A100 (400 W) fits in the same 500 W.
    card.accelerator = AcceleratorType.objects.get(slug="a100-sxm-80gb")
    assert "server" not in errors_of(card)


def test_existing_card_is_not_counted_twice(tiny_cluster) -> None:
    _fill(tiny_cluster["rack"])
    card = tiny_cluster["cards"][3]
    card.status = "failed"
    assert errors_of(card) == {}


def test_new_server_over_budget_is_refused_on_rack(tiny_cluster) -> None:
    rack = tiny_cluster["rack"]
    server = Server(rack=rack, supernode=tiny_cluster["supernode"], name="big",
                    overhead_w=40_000 - 7_485 + 1)
    assert "over its 40,000 W budget" in errors_of(server)["rack"][0]
    server.overhead_w -= 1
    assert errors_of(server) == {}


def test_existing_server_raising_its_overhead_is_refused_on_overhead(tiny_cluster) -> None:
    server = tiny_cluster["server"]
    server.overhead_w = 1800 + 40_000 - 7_485 + 1
    assert set(errors_of(server)) == {"overhead_w"}


def test_server_moved_into_a_full_rack_is_refused_on_rack(tiny_cluster) -> None:
    small = Rack.objects.create(cluster=tiny_cluster["cluster"], name="small", row=2, slot=0,
                                power_budget_w=5_000)
    server = tiny_cluster["server"]
    server.rack = small
    message = errors_of(server)["rack"][0]
    assert "would draw 7,485 W" in message and "5,000 W budget" in message


def test_device_over_budget_new_moved_and_resized(tiny_cluster) -> None:
    net = _fill(tiny_cluster["net_rack"], headroom=100)
    spine = NetworkDevice(cluster=tiny_cluster["cluster"], rack=net, kind="spine",
                          name="spine0", ports=64, port_gbps=400, power_w=101)
    assert "headroom: 100 W" in errors_of(spine)["rack"][0]
    spine.power_w = 100
    assert errors_of(spine) == {}

    leaf = tiny_cluster["leaf"]
    leaf.power_w += 101
    assert set(errors_of(leaf)) == {"power_w"}

    leaf.refresh_from_db()
    tiny = Rack.objects.create(cluster=tiny_cluster["cluster"], name="tiny-net", row=3, slot=0,
                               power_budget_w=1_000)
    leaf.rack = tiny
    assert "rack" in errors_of(leaf)


def test_device_inside_a_server_takes_the_server_rack(tiny_cluster) -> None:
    nic = NetworkDevice(cluster=tiny_cluster["cluster"], server=tiny_cluster["server"],
                        rack=tiny_cluster["net_rack"], kind="smart_nic", name="nic9", ports=1,
                        port_gbps=400, power_w=25)
    assert "that server's rack" in errors_of(nic)["rack"][0]


def test_edits_that_add_no_draw_pass_in_a_rack_already_over_budget(tiny_cluster) -> None:
    """A rack can end up over budget behind clean()'s back (a catalogue TDP corrected
    upwards, a bulk write). Marking its cards failed or renaming its server must still
    work; only edits that add draw are refused."""
    rack = tiny_cluster["rack"]
    Rack.objects.filter(pk=rack.pk).update(power_budget_w=7_000)
    card = Card.objects.get(pk=tiny_cluster["cards"][2].pk)
    server = Server.objects.get(pk=tiny_cluster["server"].pk)
    card.status = "failed"
    assert errors_of(card) == {}
    server.hostname = "node0-renamed"
    assert errors_of(server) == {}
    server.overhead_w -= 100  # less draw, still over: allowed, it is an improvement
    assert errors_of(server) == {}
    server.overhead_w += 200  # more draw than now: refused
    assert "overhead_w" in errors_of(server)
    nic = NetworkDevice.objects.get(pk=tiny_cluster["nic"].pk)
    nic.name = "sn0-s0-nic0-renamed"
    assert errors_of(nic) == {}
    nic.power_w += 1
    assert "power_w" in errors_of(nic)
    card.accelerator = AcceleratorType.objects.get(slug="b200-sxm-180gb")
    assert "server" in errors_of(card)  # 1,000 W instead of 700 W


def test_lowering_budget_below_draw(tiny_cluster) -> None:
    rack = tiny_cluster["rack"]
    rack.power_budget_w = 7_484
    assert "already draws 7,485 W" in errors_of(rack)["power_budget_w"][0]
    rack.power_budget_w = 7_485
    assert errors_of(rack) == {}


def test_rack_budget_must_be_positive(tiny_cluster) -> None:
    rack = tiny_cluster["net_rack"]
    violates_constraint(lambda: Rack.objects.filter(pk=rack.pk).update(power_budget_w=0))
    rack.power_budget_w = -1
    assert "power_budget_w" in errors_of(rack)


# --- PUE ------------------------------------------------------------------------------------------
def test_pue_below_one(tiny_cluster) -> None:
    rack = tiny_cluster["rack"]
    rack.pue = 0.95
    assert "cannot be below 1.0" in errors_of(rack)["pue"][0]
    violates_constraint(lambda: Rack.objects.filter(pk=rack.pk).update(pue=0.95))
    rack.pue = 1.0
    assert errors_of(rack) == {}


# --- links --------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["leaf", "spine", "core"])
def test_card_cannot_link_to_a_switch(tiny_cluster, kind: str) -> None:
    device = NetworkDevice.objects.create(
        cluster=tiny_cluster["cluster"], rack=tiny_cluster["net_rack"], kind=kind,
        name=f"{kind}9", ports=64, port_gbps=400, power_w=100,
    ) if kind != "leaf" else tiny_cluster["leaf"]
    bad = link(tiny_cluster, a_card=tiny_cluster["cards"][1], b_device=device, kind="roce")
    message = errors_of(bad)["b_device"][0]
    assert f"A card cannot be linked to a {kind}" in message


def test_link_end_with_both_or_neither(tiny_cluster) -> None:
    cards, leaf = tiny_cluster["cards"], tiny_cluster["leaf"]
    both = link(tiny_cluster, a_card=cards[2], a_device=leaf, b_card=cards[3])
    assert "exactly one of a card or a network device" in errors_of(both)["a_card"][0]
    neither = link(tiny_cluster, b_card=cards[3])
    assert "a_card" in errors_of(neither)
    neither_b = link(tiny_cluster, a_card=cards[3])
    assert "b_card" in errors_of(neither_b)
    violates_constraint(lambda: link(tiny_cluster, a_card=cards[2], a_device=leaf,
                                     b_card=cards[3]).save())
    violates_constraint(lambda: link(tiny_cluster, b_card=cards[3]).save())
    violates_constraint(lambda: link(tiny_cluster, a_card=cards[3], b_card=cards[4],
                                     b_device=leaf).save())


def test_self_loop(tiny_cluster) -> None:
    card, switch = tiny_cluster["cards"][2], tiny_cluster["switch"]
    assert "cannot loop back" in errors_of(link(tiny_cluster, a_card=card, b_card=card))[
        "b_card"][0]
    loop = link(tiny_cluster, a_device=switch, b_device=switch, kind="pcie")
    assert "cannot loop back" in errors_of(loop)["b_device"][0]


def test_link_kind_must_suit_the_ends(tiny_cluster) -> None:
    cards = tiny_cluster["cards"]
    roce = link(tiny_cluster, a_card=cards[2], b_card=cards[3], kind="roce")
    assert "must be one of: scale_up" in errors_of(roce)["kind"][0]
    roce.kind = "scale_up"
    assert errors_of(roce) == {}


def test_link_end_in_another_cluster(tiny_cluster) -> None:
    other = Cluster.objects.create(name="other")
    switch = NetworkDevice.objects.create(cluster=other, kind="pcie_switch", name="far",
                                          ports=48, port_gbps=512, power_w=60)
    bad = link(tiny_cluster, a_card=tiny_cluster["cards"][2], b_device=switch, kind="pcie")
    assert "another cluster" in errors_of(bad)["b_device"][0]


@pytest.mark.parametrize(("field", "value"), [("bandwidth_gbps", 0), ("bandwidth_gbps", -400),
                                              ("latency_ns", -1)])
def test_link_figures(tiny_cluster, field: str, value: float) -> None:
    cards = tiny_cluster["cards"]
    bad = link(tiny_cluster, a_card=cards[2], b_card=cards[3], **{field: value})
    assert field in errors_of(bad)
    violates_constraint(lambda: link(tiny_cluster, a_card=cards[2], b_card=cards[3],
                                     **{field: value}).save())


def test_compatibility_map_is_symmetric_and_uses_known_names() -> None:
    kinds = set(LinkKindChoices.values())
    for ends, allowed in COMPATIBLE_ENDPOINTS.items():
        assert ends <= set(ENDPOINTS), ends
        assert allowed and allowed <= kinds, ends
    for a, b in itertools.product(ENDPOINTS, repeat=2):
        assert allowed_link_kinds(a, b) == allowed_link_kinds(b, a), (a, b)
    assert allowed_link_kinds("card", "card") == {"scale_up"}
    assert allowed_link_kinds("card", "leaf") == frozenset()
    assert allowed_link_kinds("smart_nic", "leaf") == {"roce", "infiniband"}


def test_link_validation_is_symmetric(tiny_cluster) -> None:
    """Swapping the ends never changes whether a link is valid."""
    cards, switch, nic, leaf = (tiny_cluster[k] for k in ("cards", "switch", "nic", "leaf"))
    ends = [("card", cards[5]), ("device", switch), ("device", nic), ("device", leaf)]
    for (ka, a), (kb, b) in itertools.product(ends, repeat=2):
        if a is b:
            continue
        for kind in LinkKindChoices.values():
            forward = link(tiny_cluster, kind=kind, **{f"a_{ka}": a, f"b_{kb}": b})
            backward = link(tiny_cluster, kind=kind, **{f"a_{kb}": b, f"b_{ka}": a})
            assert bool(errors_of(forward)) == bool(errors_of(backward)), (a, b, kind)


# --- supernode geometry ----------------------------------------------------------------------
def test_torus_dims_must_multiply_to_the_card_count(tiny_cluster) -> None:
    bad = supernode(tiny_cluster["cluster"], dim_z=7)
    message = errors_of(bad)["dim_x"][0]
    assert "8×8×7 hold 448 cards, not the 512 declared" in message
    assert errors_of(supernode(tiny_cluster["cluster"])) == {}


def test_3d_torus_needs_two_along_every_axis(tiny_cluster) -> None:
    flat = supernode(tiny_cluster["cluster"], dim_x=512, dim_y=1, dim_z=1)
    assert "at least 2" in errors_of(flat)["dim_z"][0]


def test_2d_torus_has_dim_z_one(tiny_cluster) -> None:
    bad = supernode(tiny_cluster["cluster"], fabric=FabricChoices.TORUS_2D, dim_x=16, dim_y=16,
                    dim_z=2)
    assert "dim_z = 1" in errors_of(bad)["dim_z"][0]
    good = supernode(tiny_cluster["cluster"], fabric=FabricChoices.TORUS_2D, dim_x=32,
                     dim_y=16, dim_z=1)
    assert errors_of(good) == {}


def test_ring_is_one_dimensional(tiny_cluster) -> None:
    bad = supernode(tiny_cluster["cluster"], fabric=FabricChoices.RING, dim_x=256, dim_y=2,
                    dim_z=1)
    assert "one-dimensional" in errors_of(bad)["dim_y"][0]
    short = supernode(tiny_cluster["cluster"], fabric=FabricChoices.RING, dim_x=500, dim_y=1,
                      dim_z=1)
    assert "dim_x" in errors_of(short)
    good = supernode(tiny_cluster["cluster"], fabric=FabricChoices.RING, dim_x=512, dim_y=1,
                     dim_z=1)
    assert errors_of(good) == {}


def test_undimensioned_fabric_may_leave_dims_at_one(tiny_cluster) -> None:
    star = supernode(tiny_cluster["cluster"], fabric=FabricChoices.PCIE_STAR, dim_x=1, dim_y=1,
                     dim_z=1)
    assert errors_of(star) == {}


@pytest.mark.parametrize(("field", "value"), [("link_gbps", 0), ("link_gbps", -1),
                                              ("link_latency_ns", -1),
                                              ("switch_latency_ns", -5)])
def test_supernode_link_figures(tiny_cluster, field: str, value: float) -> None:
    bad = supernode(tiny_cluster["cluster"], **{field: value})
    assert field in errors_of(bad)
    violates_constraint(lambda: supernode(tiny_cluster["cluster"], **{field: value}).save())


def test_supernode_dims_positive_in_the_database(tiny_cluster) -> None:
    violates_constraint(lambda: supernode(tiny_cluster["cluster"], dim_x=0).save())


# --- cards --------------------------------------------------------------------------------
def _card(tiny: dict[str, Any], **overrides: Any) -> Card:
    fields = {"supernode": tiny["supernode"], "server": tiny["server"],
              "accelerator": tiny["h100"], "index": 3, "slot": 3, "serial": "C-NEW"}
    fields.update(overrides)
    return Card(**fields)


def test_duplicate_serial(tiny_cluster) -> None:
    existing = tiny_cluster["cards"][0]
    dup = _card(tiny_cluster, serial=existing.serial)
    assert "serial" in errors_of(dup)
    Card.objects.filter(pk=tiny_cluster["cards"][7].pk).delete()
    violates_constraint(lambda: Card.objects.create(
        supernode=tiny_cluster["supernode"], server=tiny_cluster["server"],
        accelerator=tiny_cluster["h100"], index=7, slot=7, serial=existing.serial))


def test_duplicate_index_and_slot(tiny_cluster) -> None:
    card = tiny_cluster["cards"][5]
    card.index = 4
    assert errors_of(card)  # (supernode, index) is unique
    violates_constraint(lambda: Card.objects.filter(pk=card.pk).update(index=4))
    violates_constraint(lambda: Card.objects.filter(pk=card.pk).update(slot=4))


def test_card_index_beyond_the_supernode(tiny_cluster) -> None:
    card = tiny_cluster["cards"][5]
    card.index = 8
    assert "indices 0–7" in errors_of(card)["index"][0]


def test_card_coordinates_outside_the_torus(tiny_cluster) -> None:
    card = tiny_cluster["cards"][5]
    card.x, card.y, card.z = 2, 1, 5
    errors = errors_of(card)
    assert "x=2 is outside 0–1" in errors["x"][0]
    assert "z=5 is outside 0–1" in errors["z"][0]
    assert "y" not in errors


def test_card_slot_beyond_the_server(tiny_cluster) -> None:
    card = tiny_cluster["cards"][5]
    card.slot = 8
    assert "slots 0–7" in errors_of(card)["slot"][0]


def test_card_in_a_server_of_another_supernode(tiny_cluster) -> None:
    cluster = tiny_cluster["cluster"]
    other = SuperNode.objects.create(cluster=cluster, name="sn1", index=1, fabric="torus3d",
                                     card_count=8, dim_x=2, dim_y=2, dim_z=2, link_gbps=400,
                                     link_latency_ns=150)
    card = _card(tiny_cluster, supernode=other, index=0)
    assert "another supernode" in errors_of(card)["server"][0]


def test_server_cards_per_server_not_below_installed(tiny_cluster) -> None:
    server = tiny_cluster["server"]
    server.cards_per_server = 4
    assert "8 cards are installed" in errors_of(server)["cards_per_server"][0]
    violates_constraint(lambda: Server.objects.filter(pk=server.pk).update(cards_per_server=0))


def test_cross_cluster_references(tiny_cluster) -> None:
    other = Cluster.objects.create(name="other")
    rack = tiny_cluster["rack"]
    rack.cluster = other
    assert "another cluster" in errors_of(rack)["supernode"][0]
    far_rack = Rack.objects.create(cluster=other, name="far", row=0, slot=0)
    server = Server(rack=far_rack, supernode=tiny_cluster["supernode"], name="x")
    assert "different clusters" in errors_of(server)["supernode"][0]
    device = NetworkDevice(cluster=tiny_cluster["cluster"], rack=far_rack, kind="leaf",
                           name="l9", ports=8, port_gbps=400, power_w=10)
    assert "another cluster" in errors_of(device)["rack"][0]


# --- negative power ------------------------------------------------------------------------------
def test_negative_power_figures(tiny_cluster) -> None:
    leaf = tiny_cluster["leaf"]
    leaf.power_w = -5
    assert "power_w" in errors_of(leaf)
    violates_constraint(lambda: NetworkDevice.objects.filter(pk=leaf.pk).update(power_w=-5))
    server = tiny_cluster["server"]
    server.overhead_w = -1
    assert "overhead_w" in errors_of(server)
    violates_constraint(lambda: Server.objects.filter(pk=server.pk).update(overhead_w=-1))
    leaf.refresh_from_db()
    leaf.latency_ns = -1
    assert "latency_ns" in errors_of(leaf)
    violates_constraint(lambda: NetworkDevice.objects.filter(pk=leaf.pk).update(latency_ns=-1))


# --- the catalogue -------------------------------------------------------------------------------
def test_catalogue_is_loaded_with_real_figures(db) -> None:
    slugs = set(AcceleratorType.objects.values_list("slug", flat=True))
    assert {"h100-sxm5-80gb", "h200-sxm-141gb", "a100-sxm-80gb", "b200-sxm-180gb"} <= slugs
    assert AcceleratorType.objects.count() >= 5
    others = AcceleratorType.objects.exclude(vendor="NVIDIA")
    assert others.exists()
    for accel in others:
        assert accel.bf16_tflops > 0 and accel.tdp_w > 0
    h100 = AcceleratorType.objects.get(slug="h100-sxm5-80gb")
    assert (h100.tdp_w, h100.bf16_tflops, h100.fp8_tflops, h100.hbm_gib) == (700, 989.5, 1979, 80)
    assert h100.hbm_tbps == pytest.approx(3.35)
    a100 = AcceleratorType.objects.get(slug="a100-sxm-80gb")
    assert (a100.tdp_w, a100.bf16_tflops, a100.fp8_tflops) == (400, 312, None)
    h200 = AcceleratorType.objects.get(slug="h200-sxm-141gb")
    assert (h200.hbm_gib, h200.hbm_tbps, h200.bf16_tflops) == (141, 4.8, 989.5)
    b200 = AcceleratorType.objects.get(slug="b200-sxm-180gb")
    assert b200.bf16_tflops == 2250 and b200.tdp_w == 1000
    for accel in AcceleratorType.objects.all():
        assert accel.source.startswith("https://"), accel
        assert accel.idle_w < accel.tdp_w
        assert errors_of(accel) == {}, accel


def test_catalogue_load_is_an_idempotent_upsert(db) -> None:
    before = AcceleratorType.objects.count()
    AcceleratorType.objects.filter(slug="h100-sxm5-80gb").update(tdp_w=701)
    assert load_catalogue() == before
    assert AcceleratorType.objects.count() == before
    assert AcceleratorType.objects.get(slug="h100-sxm5-80gb").tdp_w == 700


def test_catalogue_idle_above_tdp(db) -> None:
    accel = AcceleratorType.objects.get(slug="a100-sxm-80gb")
    accel.idle_w = 401
    assert "exceeds the TDP of 400 W" in errors_of(accel)["idle_w"][0]
    violates_constraint(
        lambda: AcceleratorType.objects.filter(pk=accel.pk).update(idle_w=401))


@pytest.mark.parametrize("field", ["bf16_tflops", "hbm_gib", "hbm_tbps", "fp8_tflops",
                                   "scaleup_gbps"])
def test_catalogue_negative_figures(db, field: str) -> None:
    accel = AcceleratorType.objects.get(slug="h100-sxm5-80gb")
    setattr(accel, field, -1)
    assert field in errors_of(accel)


@pytest.mark.parametrize("field", ["bf16_tflops", "hbm_gib", "hbm_tbps", "scaleup_gbps"])
def test_catalogue_constraints_in_the_database(db, field: str) -> None:
    violates_constraint(
        lambda: AcceleratorType.objects.filter(slug="h100-sxm5-80gb").update(**{field: -1}))


def test_card_uuid_is_unique(tiny_cluster) -> None:
    Card.objects.filter(pk=tiny_cluster["cards"][7].pk).delete()
    violates_constraint(lambda: Card.objects.create(
        supernode=tiny_cluster["supernode"], server=tiny_cluster["server"],
        accelerator=tiny_cluster["h100"], index=7, slot=7, serial="U-1",
        uuid=uuid.UUID(int=1)))
