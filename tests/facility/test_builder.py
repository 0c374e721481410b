"""The facility builder: a built cluster gets a plant sized from its racks' draw, with
every rating kept, through the hardware build's hook; the command; the rack classes."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from twin.facility.api.views import plant_summary
from twin.facility.builder import FacilityError, build_facility, rack_classes
from twin.facility.choices import RackClassChoices
from twin.facility.models import CoolingElement, PowerElement, RackFacility, Site


@pytest.fixture
def built(db: Any) -> dict[str, Any]:
    """Two seed supernodes built by the hardware builder (which builds the facility)."""
    from twin.hardware.builder import build_cluster

    return build_cluster("seed-512", supernodes=2, name="plant-test")


def test_building_a_cluster_builds_its_facility(built: dict[str, Any]) -> None:
    from twin.hardware.models import Rack

    site = Site.objects.get(cluster_id=built["cluster_id"])
    racks = Rack.objects.filter(cluster_id=built["cluster_id"])
    assert RackFacility.objects.filter(site=site).count() == racks.count() == built["racks"]
    # A PDU pair per row, all 2N; feeds have two lines (2N).
    rows = set(racks.values_list("row", flat=True))
    pdus = PowerElement.objects.filter(site=site, kind="pdu")
    assert pdus.count() == len(rows)
    assert set(pdus.values_list("units", "redundancy")) == {(2, "2N")}
    assert set(PowerElement.objects.filter(site=site, kind="feed")
               .values_list("units", "redundancy")) == {(2, "2N")}
    # CDUs are N+1, each feeding one technology-cooling loop; at most 8 racks per loop.
    cdus = CoolingElement.objects.filter(site=site, kind="cdu")
    assert cdus.exists()
    assert all(r == "N+1" and u >= 2 for u, r in cdus.values_list("units", "redundancy"))
    loops = CoolingElement.objects.filter(site=site, kind="tcs_loop")
    assert loops.count() == cdus.count()
    for loop in loops:
        assert 1 <= RackFacility.objects.filter(cooling_element=loop).count() <= 8


def test_built_plant_keeps_every_rating(built: dict[str, Any]) -> None:
    """Nothing over its usable rating, everything planned at <= 80 % (continuous load)."""
    site = Site.objects.get(cluster_id=built["cluster_id"])
    summary = plant_summary(site)
    assert summary["over_capacity"] == 0
    for element in summary["power"] + summary["cooling"]:
        if element["load_kw"] > 0:
            assert element["utilization"] <= 0.8 + 1e-6, element
    assert summary["it_kw"] == pytest.approx(built["it_power_w"] / 1000.0)
    # The contract covers the feeds' draw (IT + conversion losses) and the plant's power.
    assert summary["contract_kw"] >= summary["feed_kw"] > summary["it_kw"]


def test_rebuilding_replaces_the_facility(built: dict[str, Any]) -> None:
    from twin.hardware.models import Cluster

    cluster = Cluster.objects.get(pk=built["cluster_id"])
    first = Site.objects.get(cluster=cluster).pk
    again = build_facility(cluster)
    assert again["site_id"] != first
    assert Site.objects.filter(cluster=cluster).count() == 1
    with pytest.raises(FacilityError, match="already has a facility"):
        build_facility(cluster, replace=False)


def test_deleting_the_cluster_deletes_its_plant(built: dict[str, Any]) -> None:
    from twin.hardware.builder import delete_cluster

    delete_cluster(built["cluster_id"])
    assert not Site.objects.exists()
    assert not RackFacility.objects.exists()
    assert not PowerElement.objects.exists()


def test_rack_classes_follow_the_hardware() -> None:
    """Air by cooling; NVL72-class by a >= 100 kW budget or 72 cards; else the 40 kW rack."""
    got = rack_classes(np.array(["air", "liquid", "liquid", "liquid"], dtype=object),
                       np.array([30_000, 40_000, 132_000, 40_000]),
                       np.array([8, 48, 72, 72]))
    assert got.tolist() == [RackClassChoices.AIR, RackClassChoices.LIQUID,
                            RackClassChoices.NVL72, RackClassChoices.NVL72]


def test_big_racks_get_the_nvl72_class(db: Any) -> None:
    from twin.hardware.builder import build_cluster

    r = build_cluster("seed-512", supernodes=1, name="big-racks", rack_budget_w=132_000)
    site = Site.objects.get(cluster_id=r["cluster_id"])
    classes = set(RackFacility.objects.filter(site=site).values_list("rack_class", flat=True))
    assert classes == {RackClassChoices.NVL72}
    assert plant_summary(site)["over_capacity"] == 0


def test_command_builds_and_prints(built: dict[str, Any], capsys: Any) -> None:
    call_command("build_facility", "plant-test", "--no-progress")
    out = capsys.readouterr().out
    assert "plant-test" in out and "cdu" in out and "contract" in out
    assert Site.objects.filter(cluster_id=built["cluster_id"]).count() == 1


def test_command_errors_are_one_line(built: dict[str, Any]) -> None:
    with pytest.raises(CommandError, match="No cluster 'nope'") as bad:
        call_command("build_facility", "nope", "--no-progress")
    assert "\n" not in str(bad.value)
    with pytest.raises(CommandError, match="already has a facility"):
        call_command("build_facility", "plant-test", "--keep", "--no-progress")


def test_a_failing_facility_build_leaves_no_cluster(db: Any) -> None:
    """The hook runs inside the build's transaction: both or neither."""
    from twin.hardware.builder import build_cluster
    from twin.hardware.models import Cluster
    from twin.hardware.signals import cluster_built

    def refuse(**kwargs: Any) -> None:
        raise FacilityError("cluster", "no room for a plant")

    cluster_built.connect(refuse, dispatch_uid="test.refuse")
    try:
        with pytest.raises(FacilityError):
            build_cluster("seed-512", supernodes=1, name="no-plant")
    finally:
        cluster_built.disconnect(dispatch_uid="test.refuse")
    assert not Cluster.objects.filter(name="no-plant").exists()
    assert not Site.objects.exists()


def test_an_air_cooled_preset_gets_crahs_and_chillers(db: Any) -> None:
    from twin.hardware.builder import build_cluster

    r = build_cluster("dgx-h100-superpod", name="air-pod")
    site = Site.objects.get(cluster_id=r["cluster_id"])
    assert set(RackFacility.objects.filter(site=site).values_list("rack_class", flat=True)) \
        == {RackClassChoices.AIR}
    kinds = set(CoolingElement.objects.filter(site=site).values_list("kind", flat=True))
    assert kinds == {"crah", "chiller", "cooling_tower"}
    summary = plant_summary(site)
    assert summary["over_capacity"] == 0
    crah_heat = sum(e["load_kw"] for e in summary["cooling"] if e["kind"] == "crah")
    assert crah_heat == pytest.approx(summary["it_kw"])  # all of it by air


def test_a_taken_site_name_does_not_fail_the_build(db: Any) -> None:
    from twin.hardware.builder import build_cluster
    from twin.hardware.models import Cluster

    Site.objects.create(cluster=Cluster.objects.create(name="other"), name="named-like")
    r = build_cluster("seed-512", supernodes=1, name="named-like")
    assert Site.objects.get(cluster_id=r["cluster_id"]).name == f"named-like-{r['cluster_id']}"


def test_the_build_report_gives_the_plant_computed_pue(built: dict[str, Any]) -> None:
    """The report's PUE is the plant model's at the racks' nameplate draw, not the
    preset's stored 1.05 (docs/facility.md: the built plants compute ≈ 1.12-1.13)."""
    from simulation.facility.model import compile_model
    from twin.facility.plant import plant_for_cluster

    plant = plant_for_cluster(built["cluster_id"])
    expected = compile_model(plant).settle(plant.racks.nameplate_w.copy()).pue
    assert built["pue_source"] == "plant"
    assert built["pue"] == pytest.approx(expected, abs=1e-4)
    assert built["facility_power_w"] == pytest.approx(built["it_power_w"] * expected, abs=1.0)
    print(f"built seed plant PUE {expected:.4f}")
