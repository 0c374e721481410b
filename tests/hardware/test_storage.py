"""Storage in the hardware model (issue 14): servers' host memory and local NVMe, and the
parallel file system's appliances as rack devices that draw power like any other.

The figures are refused out of their bounds (API 400 on the field, ``full_clean``, and a
named CheckConstraint when validation is bypassed); a server's NVMe is consistent
(capacity and bandwidth, or none); only appliances carry file-system figures; a preset
build writes them and rack power counts the appliances.
"""
from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Sum

from tests.api.test_bad_input import assert_400_on, url
from twin.hardware import constants as C
from twin.hardware.builder import build_cluster
from twin.hardware.models import NetworkDevice, Rack, Server
from twin.hardware.presets import AI400X2_PFS, DGX_H100_NVME, PRESETS, SEED_NVME


def appliance(cluster, rack, name="pfs0", **figures):
    return NetworkDevice(cluster=cluster, rack=rack, kind="storage", name=name,
                         model="DDN AI400X2", ports=8, port_gbps=200, power_w=2_400,
                         **({"capacity_tb": 500.0, "read_gb_per_s": 90.0,
                             "write_gb_per_s": 65.0} | figures))


# -- the figures --------------------------------------------------------------------------
def test_a_server_defaults_to_a_dgx_h100s_storage(tiny_cluster):
    """DGX H100: 2 TB DDR5, 8 × 3.84 TB U.2 NVMe (NVIDIA BasePOD RA, core components),
    Samsung PM1733-class drives at 6.4 GB/s read, 3.8 GB/s write each."""
    server = Server.objects.get(pk=tiny_cluster["server"].pk)
    assert server.memory_gib == 2048
    assert server.nvme_tb == pytest.approx(8 * 3.84)
    assert (server.nvme_read_gb_per_s, server.nvme_write_gb_per_s) == (
        pytest.approx(8 * 6.4), pytest.approx(8 * 3.8))
    assert (DGX_H100_NVME.tb, DGX_H100_NVME.read_gb_per_s) == (server.nvme_tb,
                                                               server.nvme_read_gb_per_s)


@pytest.mark.parametrize(("field", "value", "said"), [
    ("memory_gib", C.MAX_SERVER_MEMORY_GIB + 1, "65,536 GiB"),
    ("nvme_tb", C.MAX_NVME_TB + 1, "10,000 TB"),
    ("nvme_read_gb_per_s", C.MAX_NVME_GB_PER_S + 1, "1,000 GB/s"),
    ("nvme_write_gb_per_s", -1, "At least 0"),
])
def test_a_server_storage_figure_out_of_bounds_is_400(admin_client_api, tiny_cluster, field,
                                                      value, said):
    server = tiny_cluster["server"]
    assert_400_on(admin_client_api, "patch", url("server", server.pk), {field: value}, field,
                  said)


def test_nvme_capacity_and_bandwidth_go_together(admin_client_api, tiny_cluster):
    server = tiny_cluster["server"]
    assert_400_on(admin_client_api, "patch", url("server", server.pk),
                  {"nvme_write_gb_per_s": 0}, "nvme_write_gb_per_s", "bandwidth")
    assert_400_on(admin_client_api, "patch", url("server", server.pk),
                  {"nvme_tb": 0}, "nvme_tb", "without capacity")
    none = {"nvme_tb": 0, "nvme_read_gb_per_s": 0, "nvme_write_gb_per_s": 0}
    response = admin_client_api.patch(url("server", server.pk), none, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["nvme_tb"] == 0 and response.json()["memory_gib"] == 2048


@pytest.mark.parametrize("change", [
    {"memory_gib": C.MAX_SERVER_MEMORY_GIB + 1}, {"nvme_tb": -1.0},
    {"nvme_read_gb_per_s": 0.0}, {"nvme_tb": 0.0},
])
def test_the_database_refuses_inconsistent_server_storage(tiny_cluster, change):
    with pytest.raises(IntegrityError), transaction.atomic():
        Server.objects.filter(pk=tiny_cluster["server"].pk).update(**change)


def test_an_appliance_needs_its_figures_and_only_it_has_them(tiny_cluster):
    cluster, net = tiny_cluster["cluster"], tiny_cluster["net_rack"]
    missing = appliance(cluster, net, capacity_tb=None, read_gb_per_s=0)
    with pytest.raises(ValidationError) as refused:
        missing.full_clean()
    assert {"capacity_tb", "read_gb_per_s"} <= set(refused.value.message_dict)
    leaf = tiny_cluster["leaf"]
    leaf.capacity_tb = 10.0
    with pytest.raises(ValidationError) as refused:
        leaf.full_clean()
    assert "Only file-system appliances" in refused.value.message_dict["capacity_tb"][0]
    inside = appliance(cluster, tiny_cluster["rack"], server=tiny_cluster["server"])
    with pytest.raises(ValidationError) as refused:
        inside.full_clean()
    assert "not in a server" in refused.value.message_dict["server"][0]
    appliance(cluster, net).full_clean()


def test_the_database_refuses_file_system_figures_on_a_switch(tiny_cluster):
    with pytest.raises(IntegrityError), transaction.atomic():
        NetworkDevice.objects.filter(pk=tiny_cluster["leaf"].pk).update(capacity_tb=1.0)
    with pytest.raises(IntegrityError), transaction.atomic():
        NetworkDevice.objects.create(cluster=tiny_cluster["cluster"], kind="storage",
                                     name="bare", ports=8, port_gbps=200, power_w=100)


def test_an_appliance_through_the_api(admin_client_api, tiny_cluster):
    body = {"cluster": tiny_cluster["cluster"].pk, "rack": tiny_cluster["net_rack"].pk,
            "kind": "storage", "name": "pfs0", "model": "DDN AI400X2", "ports": 8,
            "port_gbps": 200, "power_w": 2_400}
    assert_400_on(admin_client_api, "post", url("networkdevice"), body, "write_gb_per_s",
                  "appliance needs")
    assert_400_on(admin_client_api, "post", url("networkdevice"),
                  body | {"capacity_tb": 500, "read_gb_per_s": 90,
                          "write_gb_per_s": C.MAX_STORAGE_GB_PER_S + 1},
                  "write_gb_per_s", "10,000 GB/s")
    created = admin_client_api.post(url("networkdevice"), body | {
        "capacity_tb": 500, "read_gb_per_s": 90, "write_gb_per_s": 65}, format="json")
    assert created.status_code == 201, created.content
    assert (created.json()["tier"], created.json()["capacity_tb"]) == ("storage", 500.0)


# -- power ----------------------------------------------------------------------------------
def test_rack_power_counts_an_appliance(tiny_cluster):
    net = tiny_cluster["net_rack"]
    before = net.draw_w()
    appliance(tiny_cluster["cluster"], net).save()
    assert net.draw_w() == before + 2_400
    assert Rack.objects.filter(pk=net.pk).with_power().get().power_w == before + 2_400


def test_an_appliance_over_the_rack_budget_is_refused(admin_client_api, tiny_cluster):
    net = tiny_cluster["net_rack"]
    Rack.objects.filter(pk=net.pk).update(power_budget_w=net.draw_w() + 2_000)
    body = {"cluster": tiny_cluster["cluster"].pk, "rack": net.pk, "kind": "storage",
            "name": "pfs0", "ports": 8, "port_gbps": 200, "power_w": 2_400,
            "capacity_tb": 500, "read_gb_per_s": 90, "write_gb_per_s": 65}
    assert_400_on(admin_client_api, "post", url("networkdevice"), body, "rack", "over its",
                  status=409)


# -- presets and the builder ------------------------------------------------------------------
def test_the_presets_storage_fits_the_bounds_and_the_seeds():
    """The seeds: 32 TB local NVMe of 15.36 TB drives, a file system of 100–200 GB/s."""
    assert SEED_NVME.tb == pytest.approx(2 * 15.36) and 30 <= SEED_NVME.tb <= 32
    for preset in PRESETS.values():
        sn, pfs = preset.supernode, preset.pfs
        assert sn.memory_gib <= C.MAX_SERVER_MEMORY_GIB and sn.nvme is not None
        assert sn.nvme.tb <= C.MAX_NVME_TB
        assert max(sn.nvme.read_gb_per_s, sn.nvme.write_gb_per_s) <= C.MAX_NVME_GB_PER_S
        assert pfs is not None and pfs.capacity_tb <= C.MAX_STORAGE_TB
        assert max(pfs.read_gb_per_s, pfs.write_gb_per_s) <= C.MAX_STORAGE_GB_PER_S
    agg = PRESETS["seed-512"].pfs.aggregate
    assert 100 <= agg["write_gb_per_s"] <= agg["read_gb_per_s"] <= 200


def test_a_preset_build_writes_the_storage(db):
    built = build_cluster("seed-512")
    cid = built["cluster_id"]
    servers = Server.objects.filter(rack__cluster_id=cid)
    assert set(servers.values_list("memory_gib", "nvme_tb", "nvme_read_gb_per_s",
                                   "nvme_write_gb_per_s")) == {
        (2048, SEED_NVME.tb, SEED_NVME.read_gb_per_s, SEED_NVME.write_gb_per_s)}
    pfs = NetworkDevice.objects.filter(cluster_id=cid, kind="storage")
    assert pfs.count() == AI400X2_PFS.appliances == 2
    assert pfs.aggregate(r=Sum("read_gb_per_s"), w=Sum("write_gb_per_s"),
                         c=Sum("capacity_tb")) == {"r": 180.0, "w": 130.0, "c": 1000.0}
    # in a storage rack of their own, not a supernode's and not the switches'
    racks = set(pfs.values_list("rack__name", flat=True))
    assert racks == {"stor0000"}
    assert not NetworkDevice.objects.filter(rack__name="stor0000", cluster_id=cid).exclude(
        kind="storage").exists()
    # no switch has file-system figures; every appliance is valid under clean()
    assert not NetworkDevice.objects.filter(cluster_id=cid, capacity_tb__isnull=False).exclude(
        kind="storage").exists()
    for device in pfs:
        device.full_clean()
    # rack power counts them, the plan's IT power agrees with the database's draw
    stor = Rack.objects.get(cluster_id=cid, name="stor0000")
    assert stor.draw_w() == 2 * 2_400
    total = sum(Rack.objects.filter(cluster_id=cid).draw_by_rack().watts().values())
    assert total == built["it_power_w"]
    assert built["storage"]["pfs_write_gb_per_s"] == 130.0
