"""Sane bounds on every physical figure (issue 11, item 6).

A rack budget of 10^15 W was accepted. Each figure now has a range (wide enough
for wafer-scale parts, see ``twin.hardware.constants``), refused with a 400 on
the field and the unit in the message through the API, with the same message
from ``full_clean()`` (the admin), by a named CheckConstraint when validation
is bypassed, and shown in the schema. The migration that added the constraints
brings figures stored earlier into range instead of failing (or losing rows).
"""
from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from drf_spectacular.generators import SchemaGenerator

from tests.api.test_bad_input import assert_400_on, url
from twin.hardware import constants as C
from twin.hardware.models import AcceleratorType, Link, NetworkDevice, Rack, Server, SuperNode

# (API basename, tiny_cluster key, field, a value over the bound, the bound as said)
OVER = [
    ("rack", "rack", "power_budget_w", 10**15, "At most 1,000,000 W."),
    ("rack", "rack", "pue", 3.5, "A PUE above 3.0"),
    ("server", "server", "overhead_w", 50_001, "At most 50,000 W."),
    ("server", "server", "cards_per_server", 65, "At most 64 cards."),
    ("server", "server", "nic_count", 65, "At most 64 NICs."),
    ("server", "server", "nic_gbps", 100_001, "At most 100,000 Gb/s."),
    ("networkdevice", "leaf", "power_w", 100_001, "At most 100,000 W."),
    ("networkdevice", "leaf", "port_gbps", 100_001, "At most 100,000 Gb/s."),
    ("networkdevice", "leaf", "ports", 4_097, "At most 4,096 ports."),
    ("networkdevice", "leaf", "latency_ns", 1e6 + 1, "At most 1,000,000 ns."),
    ("link", "link", "bandwidth_gbps", 1e5 + 1, "At most 100,000 Gb/s."),
    ("link", "link", "latency_ns", 1e7 + 1, "At most 10,000,000 ns."),
    ("supernode", "supernode", "card_count", 65_537, "At most 65,536 cards."),
    ("supernode", "supernode", "link_gbps", 1e5 + 1, "At most 100,000 Gb/s."),
    ("supernode", "supernode", "link_latency_ns", 1e7 + 1, "At most 10,000,000 ns."),
    ("supernode", "supernode", "switch_latency_ns", 1e6 + 1, "At most 1,000,000 ns."),
    ("acceleratortype", "h100", "tdp_w", 50_001, "At most 50,000 W."),
    ("acceleratortype", "h100", "bf16_tflops", 1e6 + 1, "At most 1,000,000 TFLOP/s."),
    ("acceleratortype", "h100", "fp8_tflops", 1e6 + 1, "At most 1,000,000 TFLOP/s."),
    ("acceleratortype", "h100", "hbm_gib", 1e5 + 1, "At most 100,000 GiB."),
    ("acceleratortype", "h100", "hbm_tbps", 1e5 + 1, "At most 100,000 TB/s."),
    ("acceleratortype", "h100", "scaleup_links", 1_025, "At most 1,024 links."),
    ("acceleratortype", "h100", "scaleup_gbps", 1e6 + 1, "At most 1,000,000 GB/s."),
]


def obj_of(world: dict[str, Any], key: str) -> Any:
    return world["links"][0] if key == "link" else world[key]


def test_the_issue_repro_a_rack_budget_of_10_15_w_is_400(admin_client_api, tiny_cluster):
    rack = tiny_cluster["rack"]
    errors = assert_400_on(admin_client_api, "patch", url("rack", rack.pk),
                           {"power_budget_w": 10**15}, "power_budget_w")
    assert errors["power_budget_w"] == ["At most 1,000,000 W."]
    body = {"cluster": tiny_cluster["cluster"].pk, "name": "huge", "row": 5, "slot": 5,
            "power_budget_w": 10**15}
    assert_400_on(admin_client_api, "post", url("rack"), body, "power_budget_w", "1,000,000 W")
    # The bound itself is accepted.
    response = admin_client_api.patch(url("rack", rack.pk), {"power_budget_w": 1_000_000},
                                      format="json")
    assert response.status_code == 200, response.content


@pytest.mark.parametrize(("basename", "key", "field", "value", "said"), OVER,
                         ids=[f"{b}.{f}" for b, _, f, *_ in OVER])
def test_a_figure_over_its_bound_is_400_on_the_field(admin_client_api, tiny_cluster, basename,
                                                     key, field, value, said):
    obj = obj_of(tiny_cluster, key)
    assert_400_on(admin_client_api, "patch", url(basename, obj.pk), {field: value}, field, said)


@pytest.mark.parametrize(("basename", "key", "field", "value", "said"), OVER,
                         ids=[f"{b}.{f}" for b, _, f, *_ in OVER])
def test_full_clean_says_the_same_with_the_value(tiny_cluster, basename, key, field, value,
                                                 said):
    """What the admin shows: the bound with its unit and the value that was given."""
    obj = obj_of(tiny_cluster, key)
    setattr(obj, field, value)
    with pytest.raises(ValidationError) as refused:
        obj.full_clean()
    message = refused.value.message_dict[field][0]
    assert said.removesuffix(".") in message and "got" in message


@pytest.mark.parametrize(("model", "key", "field", "value"), [
    (Rack, "rack", "power_budget_w", 2**31 - 1), (Rack, "rack", "pue", 3.5),
    (Server, "server", "overhead_w", 10**9), (NetworkDevice, "leaf", "power_w", 10**9),
    (Link, "link", "bandwidth_gbps", 1e12), (Link, "link", "latency_ns", 1e12),
    (SuperNode, "supernode", "link_gbps", 1e12), (SuperNode, "supernode", "card_count", 10**6),
    (AcceleratorType, "h100", "tdp_w", 10**9), (AcceleratorType, "h100", "fp32_tflops", 1e9),
    (AcceleratorType, "h100", "fp32_tflops", -1.0),
])
def test_the_database_refuses_a_figure_out_of_bounds_when_validation_is_bypassed(
        tiny_cluster, model, key, field, value):
    obj = obj_of(tiny_cluster, key)
    with pytest.raises(IntegrityError) as refused, transaction.atomic():
        model.objects.filter(pk=obj.pk).update(**{field: value})
    assert "bounded" in str(refused.value) or connection.vendor == "sqlite"


def test_the_schema_shows_the_bounds(db):
    schema = SchemaGenerator().get_schema(request=None, public=True)["components"]["schemas"]
    budget = schema["Rack"]["properties"]["power_budget_w"]
    assert (budget["minimum"], budget["maximum"]) == (1, C.MAX_RACK_BUDGET_W)
    assert schema["Link"]["properties"]["latency_ns"]["maximum"] == C.MAX_LINK_LATENCY_NS
    assert schema["Rack"]["properties"]["pue"]["maximum"] == C.MAX_PUE


def test_a_build_with_a_rack_budget_over_the_bound_is_400(admin_client_api, db):
    response = admin_client_api.post("/api/builds/", {"preset": "seed-512",
                                                      "rack_budget_w": 10**15}, format="json")
    assert response.status_code == 400, response.content
    assert "1,000,000 W" in response.json()["rack_budget_w"][0]


def test_the_presets_fit_the_bounds():
    """Every preset builds rows the constraints accept (builds bypass validation)."""
    from twin.hardware.presets import PRESETS

    for preset in PRESETS.values():
        sn, net = preset.supernode, preset.network
        assert preset.rack_budget_w <= C.MAX_RACK_BUDGET_W and 1 <= preset.pue <= C.MAX_PUE
        assert sn.cards <= C.MAX_SUPERNODE_CARDS and sn.cards_per_server <= C.MAX_CARDS_PER_SERVER
        assert sn.server_overhead_w <= C.MAX_SERVER_OVERHEAD_W
        assert max(sn.scale_up_gbps, sn.pcie_gbps, net.link_gbps) <= C.MAX_LINK_GBPS
        for device in (sn.nic, sn.pcie_switch, net.leaf, net.spine, net.core):
            if device is not None:
                assert device.ports <= C.MAX_DEVICE_PORTS
                assert device.power_w <= C.MAX_DEVICE_POWER_W
                assert device.latency_ns <= C.MAX_DEVICE_LATENCY_NS


@pytest.mark.django_db(transaction=True)
def test_the_migration_brings_stored_figures_into_bounds_and_keeps_the_rows():
    """A rack stored with an absurd budget before the bounds existed (2^31 − 1 W: what
    PostgreSQL's integer column holds; SQLite took 10^15): migrating keeps the rack,
    with its budget at the bound (the constraint could not be added over it)."""
    before = [("hardware", "0003_clusterbuild_job")]
    after = [("hardware", "0005_physical_bounds_constraints")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    try:
        old = executor.loader.project_state(before).apps
        cluster = old.get_model("hardware", "Cluster").objects.create(name="old")
        rack = old.get_model("hardware", "Rack").objects.create(
            cluster=cluster, name="r", row=0, slot=0, power_budget_w=2**31 - 1, pue=7.5)
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(after)
        stored = executor.loader.project_state(after).apps.get_model(
            "hardware", "Rack").objects.get(pk=rack.pk)
        assert (stored.power_budget_w, stored.pue) == (C.MAX_RACK_BUDGET_W, C.MAX_PUE)
    finally:
        # Back to the newest state of every app (not only to ``after``): later
        # migrations, and the apps that depend on them, must be there for the next test.
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
