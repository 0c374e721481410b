"""Live capping's thermal ceiling on an air-cooled rack (real tick, Redis, database):
the air reaching the cards (the CRAH's supply + unremoved heat + half the rack's own
air rise, ``simulation.facility.air``) and R junction-to-air set each card's cap."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.telemetry.test_state import put
from twin.facility import capping_live
from twin.telemetry import processing, state
from twin.telemetry.config import conf, redis_client

pytestmark = pytest.mark.usefixtures("plant_namespace")


@pytest.fixture(autouse=True)
def recheck_always(settings: Any) -> None:
    settings.FACILITY_LIVE_RECHECK_S = 0.0


def _air_r0(world: dict[str, Any], crah_kw: float) -> None:
    """Make r0 an air rack on the CRAH, the CRAH ``crah_kw`` per unit (behind the rating
    rule's back: ``update`` stamps ``last_updated`` itself, the live plant reloads), and
    r0's budget its draw at TDP + 100 W: its fans are sized for that (12 K at the
    budget), and its own budget does not bind at 690 W a card."""
    from django.utils import timezone

    from twin.facility.models import CoolingElement, RackFacility
    from twin.hardware.models import Rack

    lay = state.layout(world["cluster"].pk)
    k = lay.groups["rack"].names.index("r0")
    rack = Rack.objects.get(pk=world["rack"].pk)
    rack.power_budget_w = 8 * 700.0 + float(lay.groups["rack"].static_w[k]) + 100.0
    rack.save()

    RackFacility.objects.filter(pk=world["r0_place"].pk).update(
        rack_class="air", liquid_fraction=0.0, cooling_element=world["crah"],
        air_element=None, last_updated=timezone.now())
    CoolingElement.objects.filter(pk=world["crah"].pk).update(
        capacity_kw=crah_kw, last_updated=timezone.now())


def _caps(world: dict[str, Any], ticks: int) -> tuple[np.ndarray, dict[str, Any]]:
    from twin.facility.models import CappingPolicy

    cid = world["cluster"].pk
    CappingPolicy.objects.create(cluster_id=cid, mode="apply")
    ids = [c.pk for c in world["cards"]]
    for _ in range(ticks):
        put(cid, {"power_w": [690.0] * 8}, cards=ids)
        assert processing.tick(cid, force=True)
    caps = capping_live.read_caps(redis_client(), conf().prefix, cid)
    lay = state.layout(cid)
    racks = state.plant_racks(cid, lay.version)
    assert caps is not None and racks is not None
    k = lay.groups["rack"].names.index("r0")
    return caps["caps_w"].astype(float), {"air_c": float(racks["air_c"][k]),
                                          "supply_c": float(racks["supply_c"][k])}


def test_hot_air_caps_an_air_racks_cards_at_the_air_ceiling(
        plant_world: dict[str, Any]) -> None:
    """The CRAH nearly gone (0.1 kW a unit): the air racks' inlet rises by the
    unremoved share of the 12 K design rise, plus half r0's own rise (≈ 6 K near its
    budget): over 39.5 °C at the cards, so (85 − T_air) / 0.065 K/W is below 690 W and
    binds every card."""
    from twin.facility.models import CapEvent

    _air_r0(plant_world, crah_kw=0.1)
    caps, r0 = _caps(plant_world, ticks=3)
    # the CRAH's supply air is 25 °C; the cards see it + the unremoved heat's rise + half
    # the rack's own rise
    assert r0["supply_c"] == pytest.approx(25.0)
    assert r0["air_c"] > 39.5
    ceiling = (85.0 - r0["air_c"]) / 0.065
    assert ceiling < 690.0
    np.testing.assert_allclose(caps, ceiling, rtol=2e-3)  # float32 published air_c
    event = CapEvent.objects.filter(cluster=plant_world["cluster"]).order_by("id").first()
    assert event is not None and "thermal" in event.binding
    assert event.summary["by"]["thermal"] == 8


def test_cool_air_leaves_an_air_rack_uncapped(plant_world: dict[str, Any]) -> None:
    """With its CRAH at capacity the same rack's cards see 25 °C + half the rack's
    rise (< 6 K): a ceiling above their TDP (700 W), nothing binds."""
    _air_r0(plant_world, crah_kw=30.0)
    caps, r0 = _caps(plant_world, ticks=2)
    assert 25.0 < r0["air_c"] < 32.0
    assert (85.0 - r0["air_c"]) / 0.065 > 700.0
    assert np.all(caps >= 690.0)
