"""The plant in sharded tick rounds: the plant's rules and live capping run in the
round's merge and give what a whole-cluster tick gives (real tick, Redis, database)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tests.telemetry.test_state import put
from twin.facility import capping_live
from twin.telemetry import keys, processing, state
from twin.telemetry.config import conf

pytestmark = pytest.mark.usefixtures("plant_namespace")


@pytest.fixture
def two_supernodes(db: Any) -> dict[str, Any]:
    """A built seed-512 cluster of 2 supernodes (1,024 cards) with its facility."""
    from twin.hardware.builder import build_cluster

    cid = build_cluster("seed-512", name="plant-rounds", supernodes=2)["cluster_id"]
    return {"cluster_id": cid}


def _tick(cid: int) -> None:
    state.redis_client().delete(keys.tick_gate(cid))
    assert processing.tick(cid, force=True)


def _run(cid: int, shard_cards: int, settings: Any, ticks: int = 8) -> dict[str, Any]:
    """Capping on (apply), rack 0 given a budget its cards overrun, the ``cdu_load``
    rule's threshold under every CDU's load: ``ticks`` ticks where each card draws
    min(700 W, its served cap). What the caps, the rack's draw and the alerts came to."""
    from twin.facility.models import CapEvent, CappingPolicy, CoolingElement
    from twin.hardware.models import Rack
    from twin.telemetry.models import Alert

    settings.TELEMETRY_TICK_SHARD_CARDS = shard_cards
    # every CDU's load is over a 1 % threshold (planning one small would also starve
    # its exchanger, and the thermal ceiling would bind every card)
    settings.TELEMETRY_THRESHOLDS = {"cdu_load": {"threshold": 0.01, "clear": 0.005,
                                                  "min_s": 0.0, "clear_s": 0.0},
                                     # and every liquid rack's coolant supply over 20 °C
                                     "coolant_supply": {"threshold": 20.0, "clear": 19.0,
                                                        "min_s": 0.0, "clear_s": 0.0}}
    lay = state.layout(cid)
    racks = lay.groups["rack"]
    card_room = 0.6 * 700.0 * int(racks.cards[0])  # rack 0's cards may draw 420 W each
    rack = Rack.objects.get(pk=int(racks.ids[0]))
    rack.power_budget_w = card_room + float(racks.static_w[0])
    rack.save()  # (a save: the layout's version moves)
    lay = state.layout(cid)
    assert float(lay.groups["rack"].budget_w[0]) == pytest.approx(
        card_room + float(racks.static_w[0]))
    CappingPolicy.objects.create(cluster_id=cid, mode="apply")
    r = state.redis_client()
    rack0 = lay.groups["rack"].of_card == 0
    draw0 = []
    for _ in range(ticks):
        caps = capping_live.read_caps(r, conf().prefix, cid)
        cap = caps["caps_w"].astype(float) if caps else np.full(lay.n, np.inf)
        drawn = np.minimum(700.0, cap)
        put(cid, {"power_w": drawn})
        _tick(cid)
        draw0.append(float(drawn[rack0].sum()))
    shards = r.hget(keys.tick_stats(cid), "shards")
    caps = capping_live.read_caps(r, conf().prefix, cid)
    assert caps is not None
    return {"sharded": shards is not None, "card_room": card_room, "draw0": draw0,
            "caps": caps["caps_w"].astype(float), "rack0": rack0,
            "events": list(CapEvent.objects.filter(cluster_id=cid).order_by("id")),
            "alerts": set(Alert.objects.filter(cluster_id=cid, ended__isnull=True,
                                               level__in=("facility", "rack"))
                          .values_list("rule", "subject")),
            "cdus": CoolingElement.objects.filter(site__cluster_id=cid, kind="cdu").count()}


@pytest.mark.parametrize("shard_cards", [512, 0], ids=["sharded", "whole"])
def test_a_rack_over_budget_is_capped_and_the_plant_rules_fire(
        two_supernodes: dict[str, Any], settings: Any, shard_cards: int) -> None:
    """Sharded (two rounds' shards of one supernode each) as in a whole tick: the
    over-budget rack's cards are capped to its budget within a few ticks and stay
    there, the other racks (within budget) are not, the audit row says a rack bound,
    every CDU has its ``cdu_load`` alert open and every rack its ``coolant_supply``
    one (thresholds lowered under the load), each opened once."""
    got = _run(two_supernodes["cluster_id"], shard_cards, settings)
    assert got["sharded"] is (shard_cards > 0)
    room = got["card_room"]
    assert got["draw0"][0] > room * 1.5                   # demand overran the budget
    assert max(got["draw0"][3:]) <= room * 1.0001          # capped within 3 ticks
    assert got["draw0"][-1] >= 0.98 * room                 # to the budget, not below
    caps, rack0 = got["caps"], got["rack0"]
    assert caps[rack0].sum() <= room * 1.0001
    assert np.all(caps[~rack0] >= 700.0)                   # nothing else binds
    rack_rows = [e for e in got["events"] if "rack" in e.binding]
    assert rack_rows and rack_rows[0].cards_capped == int(rack0.sum())
    cdu_alerts = {s for rule, s in got["alerts"] if rule == "cdu_load"}
    assert len(cdu_alerts) == got["cdus"] > 0
    # the rack-level plant rule on the racks of both shards (supernodes), once each
    lay = state.layout(two_supernodes["cluster_id"])
    racks = lay.groups["rack"]
    coolant = {s for rule, s in got["alerts"] if rule == "coolant_supply"}
    assert coolant == {f"rack:{int(i)}" for i in racks.ids}
    from twin.telemetry.models import Alert

    assert Alert.objects.filter(cluster_id=two_supernodes["cluster_id"],
                                rule="coolant_supply").count() == len(racks.ids)


def test_sharded_and_whole_ticks_agree_on_caps_and_alerts(
        two_supernodes: dict[str, Any], settings: Any,
        plant_namespace: Callable[[], None]) -> None:
    """The same load, run sharded and then (state cleared) whole: the same caps per card
    and the same open plant alerts."""
    from twin.facility.models import CapEvent, CappingPolicy
    from twin.telemetry.models import Alert

    cid = two_supernodes["cluster_id"]
    sharded = _run(cid, 512, settings, ticks=6)
    plant_namespace()
    Alert.objects.filter(cluster_id=cid).delete()
    CapEvent.objects.filter(cluster_id=cid).delete()
    CappingPolicy.objects.filter(cluster_id=cid).delete()
    whole = _run(cid, 0, settings, ticks=6)
    assert sharded["sharded"] and not whole["sharded"]
    np.testing.assert_allclose(sharded["caps"], whole["caps"], rtol=1e-5)
    assert sharded["draw0"] == pytest.approx(whole["draw0"], rel=1e-5)
    assert sharded["alerts"] == whole["alerts"]
