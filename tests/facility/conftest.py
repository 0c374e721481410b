"""Fixtures of the facility tests: a small plant built by hand on the tiny cluster.

``plant_world`` (on ``tiny_cluster``: rack r0 with 8 H100s, a network rack net0):
a 2N feed → a 2N UPS → a 2N PDU feeding both racks; a cooling tower (N+1) → a
facility water loop → a CDU (N+1) → a technology-cooling loop for r0 (liquid, 0.8),
and a CRAH (N+1) on the loop taking r0's air share and all of net0 (an air rack).

``plant_namespace`` (the live plant's tests use it through ``pytestmark``): the
session's telemetry key namespace in Redis emptied before and after the test, the
per-process caches with it (the telemetry ones and the compiled live plants), and
the ingest queue drained by the test itself (``TELEMETRY_AUTO_DRAIN`` off: no Celery
message leaves it). It yields the reset, for a test that runs twice from empty.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from rest_framework.test import APIClient

from tests.telemetry.conftest import flush_namespace


@pytest.fixture
def plant_namespace(settings: Any) -> Iterator[Callable[[], None]]:
    """An empty telemetry namespace and no cached live plant (nor capping weights),
    before and after the test."""
    from twin.facility import capping_live, live

    def reset() -> None:
        flush_namespace()
        live._cache.clear()
        capping_live._policies.clear()  # (a rolled-back test bumps no version)
        capping_live._weight_cache.clear()

    settings.TELEMETRY_AUTO_DRAIN = False
    reset()
    yield reset
    reset()


@pytest.fixture
def plant_world(tiny_cluster: dict[str, Any]) -> dict[str, Any]:
    from twin.facility.models import CoolingElement, PowerElement, RackFacility, Site
    from twin.facility.sizing import curve

    cluster = tiny_cluster["cluster"]
    site = Site.objects.create(cluster=cluster, name="tiny-site", location="test hall",
                               contract_kw=500.0)
    two_n = {"units": 2, "redundancy": "2N"}
    feed = PowerElement.objects.create(site=site, key="feed-0", kind="feed", rating_kw=400.0,
                                       **two_n)
    ups = PowerElement.objects.create(site=site, key="ups-0", kind="ups", parent=feed,
                                      rating_kw=200.0, efficiency=curve("ups"), **two_n)
    pdu = PowerElement.objects.create(site=site, key="pdu-r0", kind="pdu", parent=ups,
                                      rating_kw=100.0, efficiency=curve("pdu"), **two_n)
    tower = CoolingElement.objects.create(site=site, key="ct-0", kind="cooling_tower",
                                          capacity_kw=300.0, units=2, redundancy="N+1",
                                          approach_c=4.0, fan_kw=3.0)
    loop = CoolingElement.objects.create(site=site, key="fwl-0", kind="facility_loop",
                                         parent=tower, capacity_kw=300.0,
                                         design_flow_kg_s=7.0, pump_kw=2.0, volume_l=800.0)
    cdu = CoolingElement.objects.create(site=site, key="cdu-0", kind="cdu", parent=loop,
                                        capacity_kw=100.0, units=2, redundancy="N+1",
                                        design_flow_kg_s=2.4, approach_c=3.0, pump_kw=1.0)
    tcs = CoolingElement.objects.create(site=site, key="tcs-0", kind="tcs_loop", parent=cdu,
                                        capacity_kw=100.0, design_flow_kg_s=2.4, volume_l=50.0)
    crah = CoolingElement.objects.create(site=site, key="crah-0", kind="crah", parent=loop,
                                         capacity_kw=30.0, units=2, redundancy="N+1",
                                         fan_kw=0.5)
    rack, net = tiny_cluster["rack"], tiny_cluster["net_rack"]
    r0 = RackFacility.objects.create(rack=rack, site=site, rack_class="liquid",
                                     liquid_fraction=0.8, power_element=pdu,
                                     cooling_element=tcs, air_element=crah)
    n0 = RackFacility.objects.create(rack=net, site=site, rack_class="air", liquid_fraction=0.0,
                                     power_element=pdu, cooling_element=crah)
    return {**tiny_cluster, "site": site, "feed": feed, "ups": ups, "pdu": pdu,
            "tower": tower, "loop": loop, "cdu": cdu, "tcs": tcs, "crah": crah,
            "r0_place": r0, "net_place": n0}


@pytest.fixture
def staff_client(db: Any) -> APIClient:
    """Session-authenticated staff holding every facility and hardware permission."""
    user = User.objects.create_user("plant-operator", "plant@example.com", "plant-pass-123",
                                    is_staff=True)
    user.user_permissions.set(Permission.objects.filter(
        content_type__app_label__in=("facility", "hardware")))
    client = APIClient()
    client.force_login(User.objects.get(pk=user.pk))
    return client
