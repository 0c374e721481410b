"""The facility API: every endpoint passes the shared suite (tests/api/base.py: reads,
writes, permission matrix, no write on refusal, filters, ETags, the deletion rule)."""
from __future__ import annotations

import itertools
from typing import Any

from tests.api.base import APIViewTests
from twin.facility.models import CoolingElement, PowerElement, RackFacility, Site

_names = itertools.count()


def _world(tiny: dict[str, Any]) -> dict[str, Any]:
    """``plant_world`` from the tiny cluster (the shared suite passes ``tiny_cluster``)."""
    if "site" not in tiny:
        from tests.facility.conftest import plant_world

        tiny.update(plant_world.__wrapped__(tiny))  # type: ignore[attr-defined]
    return tiny


class TestSiteAPI(APIViewTests):
    basename = "facility-site"
    model = Site

    def existing(self, world: dict[str, Any]) -> Site:
        return _world(world)["site"]

    def create_data(self, world: dict[str, Any]) -> dict[str, Any]:
        from twin.hardware.models import Cluster

        cluster = Cluster.objects.create(name=f"site-api-{next(_names)}")
        return {"cluster": cluster.pk, "name": f"hall-{cluster.pk}", "location": "Oslo",
                "dry_bulb_c": 28.0, "wet_bulb_c": 18.0, "contract_kw": 2500.0,
                "weather": [[0, 20.0, 15.0], [3600, 25.0, 17.0]]}

    def update_data(self, world: dict[str, Any]) -> dict[str, Any]:
        return {"wet_bulb_c": 26.5, "location": "Singapore"}

    def filter_cases(self, world: dict[str, Any]) -> list[tuple[dict[str, Any], set[int]]]:
        site = _world(world)["site"]
        return [({"cluster": world["cluster"].pk}, {site.pk}), ({"q": "nowhere"}, set())]

    def delete_query(self, world: dict[str, Any]) -> str:
        return "cascade=true"


class TestPowerElementAPI(APIViewTests):
    basename = "facility-power"
    model = PowerElement

    def existing(self, world: dict[str, Any]) -> PowerElement:
        return _world(world)["pdu"]

    def create_data(self, world: dict[str, Any]) -> dict[str, Any]:
        w = _world(world)
        return {"site": w["site"].pk, "key": f"pdu-x{next(_names)}", "kind": "pdu",
                "parent": w["ups"].pk, "rating_kw": 50.0, "units": 2, "redundancy": "2N",
                "efficiency": [[0.25, 0.99], [1.0, 0.995]]}

    def update_data(self, world: dict[str, Any]) -> dict[str, Any]:
        return {"rating_kw": 90.0, "name": "row 0"}

    def filter_cases(self, world: dict[str, Any]) -> list[tuple[dict[str, Any], set[int]]]:
        w = _world(world)
        return [({"kind": "pdu"}, {w["pdu"].pk}), ({"kind": ["feed", "ups"]},
                                                    {w["feed"].pk, w["ups"].pk}),
                ({"parent": w["feed"].pk}, {w["ups"].pk}),
                ({"cluster": w["cluster"].pk, "q": "pdu"}, {w["pdu"].pk})]

    def delete_query(self, world: dict[str, Any]) -> str:
        return "cascade=true"


class TestCoolingElementAPI(APIViewTests):
    basename = "facility-cooling"
    model = CoolingElement

    def existing(self, world: dict[str, Any]) -> CoolingElement:
        return _world(world)["cdu"]

    def create_data(self, world: dict[str, Any]) -> dict[str, Any]:
        w = _world(world)
        return {"site": w["site"].pk, "key": f"cdu-x{next(_names)}", "kind": "cdu",
                "parent": w["loop"].pk, "capacity_kw": 80.0, "units": 3,
                "redundancy": "N+1", "design_flow_kg_s": 3.8, "approach_c": 3.0,
                "supply_setpoint_c": 33.0, "pump_kw": 1.5, "volume_l": 120.0}

    def update_data(self, world: dict[str, Any]) -> dict[str, Any]:
        return {"capacity_kw": 120.0, "approach_c": 2.5}

    def filter_cases(self, world: dict[str, Any]) -> list[tuple[dict[str, Any], set[int]]]:
        w = _world(world)
        return [({"kind": "cdu"}, {w["cdu"].pk}), ({"redundancy": "N+1", "kind": "crah"},
                                                    {w["crah"].pk}),
                ({"site": w["site"].pk, "parent": w["cdu"].pk}, {w["tcs"].pk})]

    def delete_query(self, world: dict[str, Any]) -> str:
        return "cascade=true"


class TestRackFacilityAPI(APIViewTests):
    basename = "facility-rack"
    model = RackFacility

    def existing(self, world: dict[str, Any]) -> RackFacility:
        return _world(world)["r0_place"]

    def create_data(self, world: dict[str, Any]) -> dict[str, Any]:
        from twin.hardware.models import Rack

        w = _world(world)
        n = next(_names)
        rack = Rack.objects.create(cluster=w["cluster"], name=f"extra{n}", row=5, slot=n)
        return {"rack": rack.pk, "site": w["site"].pk, "rack_class": "liquid",
                "liquid_fraction": 0.75, "power_element": w["pdu"].pk,
                "cooling_element": w["tcs"].pk, "air_element": w["crah"].pk}

    def update_data(self, world: dict[str, Any]) -> dict[str, Any]:
        return {"liquid_fraction": 0.85}

    def filter_cases(self, world: dict[str, Any]) -> list[tuple[dict[str, Any], set[int]]]:
        w = _world(world)
        return [({"rack_class": "air"}, {w["net_place"].pk}),
                ({"cooling_element": w["tcs"].pk}, {w["r0_place"].pk}),
                ({"cluster": w["cluster"].pk}, {w["r0_place"].pk, w["net_place"].pk})]


def test_each_cdu_lists_the_racks_on_its_loop(plant_world: dict[str, Any],
                                              staff_client: Any) -> None:
    """The floor's CDU markers: r0 is cooled through tcs-0, a loop below cdu-0, so it
    belongs to cdu-0; the air rack (a CRAH) to no CDU."""
    site = plant_world["site"]
    got = staff_client.get(f"/api/facility/sites/{site.pk}/cdus/")
    assert got.status_code == 200, got.content
    assert got.json() == {"site": site.pk, "id": [plant_world["cdu"].pk], "key": ["cdu-0"],
                          "racks": [[plant_world["rack"].pk]]}
