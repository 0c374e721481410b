"""Rack packing against its closed forms: ⌊(B − o)/w⌋ per rack, ⌈n / per⌉ racks."""
from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulation.power import (
    DEFAULT_RACK_BUDGET_W,
    RackBudgetError,
    ServerDraw,
    max_cards_per_server,
    pack,
    pack_servers,
    racks_needed,
    servers_per_rack,
)

H100_W = 700
SEED_SERVER = ServerDraw(cards=8, card_w=H100_W, overhead_w=1_800, devices_w=2 * 50 + 2 * 150)


def test_server_draw_is_cards_times_tdp_plus_overhead_plus_devices():
    assert SEED_SERVER.total_w == 8 * 700 + 1_800 + 400 == 7_800
    assert SEED_SERVER.fixed_w == 2_200


@pytest.mark.parametrize(
    ("server_w", "budget", "overhead", "slots", "expected"),
    [
        (7_800, 40_000, 0, None, 40_000 // 7_800),          # 5
        (7_800, 39_000, 0, None, 5),                        # exactly full
        (7_800, 38_999, 0, None, 4),
        (10_200, 40_000, 0, None, 3),                       # DGX H100: not NVIDIA's 4
        (10_200, 40_000, 0, 4, 3),
        (7_800, 40_000, 1_000, None, (40_000 - 1_000) // 7_800),
        (2_000, 40_000, 0, 16, 16),                         # slots bind before power
        (7_800, 7_799, 0, None, 0),
    ],
)
def test_servers_per_rack_is_floor_of_budget_over_draw(server_w, budget, overhead, slots,
                                                       expected):
    assert servers_per_rack(server_w, budget, rack_overhead_w=overhead,
                            max_per_rack=slots) == expected


@pytest.mark.parametrize(("items", "per_rack", "racks"),
                         [(0, 5, 0), (1, 5, 1), (5, 5, 1), (6, 5, 2), (64, 5, 13), (65, 5, 13),
                          (66, 5, 14), (131_072, 5, 26_215)])
def test_racks_needed_is_ceiling(items, per_rack, racks):
    assert racks_needed(items, per_rack) == racks == math.ceil(items / per_rack)


def test_seed_512_supernode_cannot_sit_in_one_40kw_rack():
    """The seeds' error: 512 × 700 W ≈ 358 kW of cards alone vs a 40 kW rack."""
    cards_w = 512 * H100_W
    assert cards_w == 358_400
    assert cards_w > 8 * DEFAULT_RACK_BUDGET_W          # more than eight racks' worth
    lower_bound = math.ceil(cards_w / DEFAULT_RACK_BUDGET_W)   # 9 racks, cards only
    plan = pack_servers(512 // 8, SEED_SERVER)
    assert plan.per_rack == 5 and plan.limited_by == "power"
    assert plan.racks == math.ceil(64 / 5) == 13 >= lower_bound
    assert plan.fullest_rack_w == 5 * 7_800 == 39_000 <= DEFAULT_RACK_BUDGET_W
    assert plan.last_rack_items == 64 - 12 * 5 == 4
    assert plan.rack_draw_w(12) == 4 * 7_800
    assert plan.total_w == 64 * 7_800
    assert [plan.rack_of(i) for i in (0, 4, 5, 63)] == [0, 0, 1, 12]


def test_million_cards_need_2048_times_13_racks():
    per_supernode = pack_servers(64, SEED_SERVER)
    assert 2_048 * per_supernode.racks == 26_624


def test_rack_overhead_counts_once_per_rack():
    plan = pack_servers(64, SEED_SERVER, 40_000, rack_overhead_w=2_000)
    assert plan.per_rack == (40_000 - 2_000) // 7_800 == 4
    assert plan.racks == 16
    assert plan.fullest_rack_w == 2_000 + 4 * 7_800
    assert plan.total_w == 64 * 7_800 + 16 * 2_000


def test_slots_limit_is_reported():
    plan = pack(10_240, 2_200, 40_000, max_per_rack=16, what="switch")
    assert (plan.per_rack, plan.racks, plan.limited_by) == (16, 640, "slots")
    assert plan.fullest_rack_w == 16 * 2_200


def test_server_over_budget_says_how_many_cards_would_fit():
    with pytest.raises(RackBudgetError) as err:
        pack_servers(64, SEED_SERVER, 5_000)
    e = err.value
    assert e.max_cards == (5_000 - 2_200) // 700 == 4
    assert e.min_budget_w == 7_800
    assert e.item_w == 7_800
    assert "One server draws 7,800 W" in e.message
    assert "at most 4 cards per server would fit" in e.message
    assert "at least 7,800 W" in e.message
    assert str(e) == e.message


def test_server_whose_overhead_alone_exceeds_budget():
    with pytest.raises(RackBudgetError) as err:
        pack_servers(1, SEED_SERVER, 2_000)
    assert err.value.max_cards is None
    assert "even a server without cards does not fit" in err.value.message
    assert max_cards_per_server(SEED_SERVER, 2_000) is None


def test_budget_must_be_positive():
    with pytest.raises(RackBudgetError, match="must be positive"):
        pack_servers(1, SEED_SERVER, 0)
    with pytest.raises(RackBudgetError, match="must be positive"):
        servers_per_rack(100, -5)


def test_device_over_budget_names_minimum_budget():
    with pytest.raises(RackBudgetError) as err:
        pack(4, 2_200, 2_000, what="switch")
    assert "One switch draws 2,200 W" in err.value.message
    assert err.value.min_budget_w == 2_200


def test_negative_inputs_are_refused():
    with pytest.raises(ValueError):
        ServerDraw(cards=-1, card_w=700, overhead_w=0)
    with pytest.raises(ValueError):
        pack(-1, 100)
    with pytest.raises(ValueError):
        racks_needed(3, 0)


@given(items=st.integers(0, 5_000), item_w=st.integers(1, 50_000),
       budget=st.integers(1, 200_000), overhead=st.integers(0, 10_000),
       slots=st.one_of(st.none(), st.integers(1, 64)))
def test_packing_never_exceeds_budget_and_uses_fewest_racks(items, item_w, budget, overhead,
                                                            slots):
    try:
        plan = pack(items, item_w, budget, rack_overhead_w=overhead, max_per_rack=slots)
    except RackBudgetError as exc:
        assert item_w + overhead > budget
        assert exc.min_budget_w == item_w + overhead
        return
    per = plan.per_rack
    assert per == min((budget - overhead) // item_w, slots or 10**9)
    assert plan.racks == -(-items // per)
    assert all(plan.rack_draw_w(r) <= budget for r in range(plan.racks))
    assert sum(plan.items_in_rack(r) for r in range(plan.racks)) == items
    # one rack fewer cannot hold them: nobody packs tighter than in-order filling
    assert (plan.racks - 1) * per < items or items == 0
    assert plan.fullest_rack_w == (overhead + min(items, per) * item_w if items else 0)
