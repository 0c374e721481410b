"""The capacity planner against closed forms, hand arithmetic and a hand Pareto case."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from simulation.capacity import (
    CandidateSpace,
    CapacityInputError,
    PriceTable,
    Site,
    Workload,
    compare_generations,
    evaluate,
    evaluate_one,
    fat_tree,
    pareto_front,
    plan,
)
from simulation.capacity.timing import StepFigure

CATALOGUE = {row["fields"]["slug"]: row["fields"] for row in json.loads(
    (Path(__file__).parents[3] / "twin/hardware/fixtures/catalogue.json").read_text())}


@pytest.mark.parametrize("k", [8, 16, 64, 128])
def test_full_fat_trees_have_the_published_switch_counts(k):
    # Al-Fares et al. 2008: 2 tiers hold k²/2 hosts on 3k/2 switches; 3 tiers k³/4 on 5k²/4
    assert fat_tree(k * k // 2, k)[:2] == (2, 3 * k // 2)
    assert fat_tree(k ** 3 // 4, k)[:2] == (3, 5 * k * k // 4)
    # every tier below the top carries each host's bandwidth: links = tiers × hosts
    assert fat_tree(k ** 3 // 4, k)[3] == 3 * k ** 3 // 4
    assert fat_tree(k ** 3 // 4 + 1, k)[0] == 0  # beyond 3 tiers: refused


def test_a_partial_two_tier_tree_rounds_leaves_and_spines_up():
    # 100 hosts on radix 16: ⌈100/8⌉ = 13 leaves, ⌈13/2⌉ = 7 spines, 100 + 13·8 links
    assert fat_tree(100, 16) == (2, 20, 13, 204)
    assert fat_tree(10, 16) == (1, 1, 1, 10)


def fixed_timer(hours: dict[str, float], card_w: float = 500.0):
    """A stand-in for the training model's time: fixed hours per card-hour budget."""
    def timer(slug: str, cards: int) -> StepFigure:
        return StepFigure(hours[slug] * 1024 / cards, card_w)
    return timer


FIGS = {"x": {"slug": "x", "tdp_w": 1000.0, "bf16_tflops": 1000.0},
        "y": {"slug": "y", "tdp_w": 500.0, "bf16_tflops": 400.0}}


def hand_prices() -> PriceTable:
    return PriceTable.from_dict({
        "energy_per_kwh": 0.1, "depreciation_years": 4, "facility_per_kw": 1000,
        "facility_years": 10, "maintenance_share": 0.1,
        "systems": {"x": {"cards_per_server": 8, "overhead_w": 2000, "price_per_card": 10000,
                          "servers_per_rack": 4},
                    "y": {"cards_per_server": 8, "overhead_w": 1000, "price_per_card": 4000,
                          "servers_per_rack": 4}},
        "switches": {"s": {"radix": 64, "price": 20000, "power_w": 1000}},
        "optics": {"o": {"ends": 2, "price": 100, "power_w": 10}}})


def test_one_design_costs_what_the_hand_arithmetic_says():
    site = Site(power_kw=1e6, cooling_kw=1e6, floor_racks=1000, pue=1.2)
    space = CandidateSpace(("x",), (40.0,), (1024,), ("s",), ("o",))
    work = Workload(model="llama3-8b", tokens=1e12)
    p = evaluate(site, space, work, hand_prices(), FIGS, fixed_timer({"x": 100.0}))
    d = p.design(0)
    # 1024 cards = 128 servers of 8 × 1 kW + 2 kW = 10 kW: 4 per 40 kW rack → 32 racks
    assert (d["servers"], d["racks"]) == (128, 32)
    # 2 tiers of radix 64: 32 leaves, 16 spines; links 1024 + 32·32 = 2048; 4096 optics
    assert (d["switches"], d["links"], d["optics"]) == (48, 2048, 4096)
    network_w = 48 * 1000 + 4096 * 10
    assert d["it_kw"] == pytest.approx((128 * 10_000 + network_w) / 1000)
    capex_it = 1024 * 10_000 + 48 * 20_000 + 4096 * 100
    assert d["capex"] == pytest.approx(capex_it + d["it_kw"] * 1000)
    training_kw = (1024 * 500 + 128 * 2000 + network_w) / 1000
    opex = training_kw * 1.2 * 8760 * 0.1 + 0.1 * capex_it
    assert d["opex_per_year"] == pytest.approx(opex)
    yearly = capex_it / 4 + d["it_kw"] * 1000 / 10 + opex
    assert d["cost_per_mtok"] == pytest.approx(yearly * 100 / 8760 / 1e12 * 1e6)
    assert d["energy_j_per_token"] == pytest.approx(training_kw * 1000 * 1.2 * 100 * 3600 / 1e12)
    assert d["fits"] and d["why_not"] == []


def test_the_vectorised_plan_equals_the_per_design_loop():
    site = Site(power_kw=30_000, cooling_kw=25_000, floor_racks=300, pue=1.15)
    space = CandidateSpace(("x", "y"), (20.0, 40.0, 15.0), (256, 1000, 4096, 40_000),
                           ("s",), ("o",))
    work = Workload(model="llama3-8b", tokens=1e12)
    timer = fixed_timer({"x": 100.0, "y": 300.0})
    p = evaluate(site, space, work, hand_prices(), FIGS, timer)
    for i, index in enumerate(p.grid):
        one = evaluate_one(site, space, work, hand_prices(), FIGS, timer,
                           tuple(int(v) for v in index))
        d = p.design(i)
        assert one["fits"] == d["fits"]
        for key in ("cards", "racks", "switches", "optics", "it_kw", "capex", "opex_per_year",
                    "cost_per_mtok"):
            assert one[key] == pytest.approx(d[key]), (i, key)
    assert 0 < p.to_dict()["fitting"] < p.count


def test_the_pareto_front_of_a_hand_case():
    # (time, cost): (1, 9) (2, 5) (2, 7) (3, 5) (4, 1) (5, 2) → front 0, 1, 4
    x = np.array([1.0, 2.0, 2.0, 3.0, 4.0, 5.0])
    y = np.array([9.0, 5.0, 7.0, 5.0, 1.0, 2.0])
    assert pareto_front(x, y) == [0, 1, 4]


def test_nothing_fits_says_why():
    site = Site(power_kw=100, cooling_kw=100, floor_racks=2)
    space = CandidateSpace(("x",), (5.0, 40.0), (1024,), ("s",), ("o",))
    p = evaluate(site, space, Workload(model="llama3-8b", tokens=1e9), hand_prices(), FIGS,
                 fixed_timer({"x": 1.0}))
    out = p.to_dict()
    assert out["fitting"] == 0 and out["pareto"] == [] and out["best"] == []
    text = out["nothing_fits"]
    assert text.startswith("No design fits")
    assert "power:" in text and "floor:" in text and "site's 100 kW" in text
    assert "rack: a server draws 10.0 kW > the 5 kW rack class" in p.why(0)
    # the nearest miss first: the 40 kW design fails on power and floor, the 5 kW one on
    # power, floor and its rack class
    nearest, other = out["refused_designs"]
    assert (nearest["rack_kw"], other["rack_kw"]) == (40.0, 5.0)
    assert len(nearest["why_not"]) < len(other["why_not"])
    assert "40 kW racks" in text


def test_bad_prices_name_their_field():
    for bad in (-1, math.nan, math.inf, "cheap", True):
        with pytest.raises(CapacityInputError) as exc:
            PriceTable.from_dict({"energy_per_kwh": bad})
        assert exc.value.field == "prices.energy_per_kwh"
    with pytest.raises(CapacityInputError) as exc:
        PriceTable.from_dict({"switches": {"ib-ndr-64": {"price": -5}}})
    assert exc.value.field == "prices.switches.ib-ndr-64.price"
    with pytest.raises(CapacityInputError) as exc:
        PriceTable.from_dict({"depreciation_years": 0})
    assert exc.value.field == "prices.depreciation_years"


def test_every_default_price_names_its_source_or_says_it_is_an_assumption():
    table = PriceTable().to_dict()
    assert set(table["sources"]) == {"energy_per_kwh", "depreciation_years",
                                     "facility_per_kw", "facility_years", "maintenance_share"}
    for part in ("systems", "switches", "optics"):
        for name, entry in table[part].items():
            assert entry["source"], (part, name)
    assert PriceTable.from_dict(table) == PriceTable()


def test_the_training_model_prices_two_generations_side_by_side():
    site = Site(power_kw=50_000, cooling_kw=50_000, floor_racks=500)
    space = CandidateSpace(("h100-sxm5-80gb", "gb200-186gb"), (40.0, 132.0), (1152,))
    p = plan(site, space, Workload(model="llama3-70b", tokens=1e12), PriceTable(), CATALOGUE)
    # an NVL72 rack (18 trays of 6.65 kW) does not fit a 40 kW rack class
    refused = [p.design(i) for i in range(p.count) if not p.fits[i]]
    assert [(d["accelerator"], d["rack_kw"]) for d in refused] == [("gb200-186gb", 40.0)]
    assert p.to_dict()["searches"] == 2  # one search per (accelerator, cards)
    nvl72 = next(p.design(i) for i in range(p.count) if p.fits[i]
                 and p.design(i)["accelerator"] == "gb200-186gb")
    hgx = p.design(0)
    assert nvl72["scale_up_switches"] == 9 * nvl72["racks"]  # 9 NVLink switch trays a rack
    assert hgx["scale_up_switches"] == 4 * hgx["servers"]  # 4 NVSwitch chips per HGX H100
    answer = compare_generations(p, "h100-sxm5-80gb", "gb200-186gb")
    old, new = answer["older_design"], answer["newer_design"]
    assert answer["change_percent"] == pytest.approx(
        (new["cost_per_mtok"] - old["cost_per_mtok"]) / old["cost_per_mtok"] * 100)
    # the newer generation trains faster on the same cards (the training model)
    assert new["hours_to_train"] < old["hours_to_train"]
    assert new["execution"] is not None and answer["assumptions"]


def test_a_trace_workload_scales_its_gpu_hours_by_the_bf16_peaks():
    site = Site(power_kw=1e5, cooling_kw=1e5, floor_racks=1000)
    space = CandidateSpace(("h100-sxm5-80gb", "b200-sxm-180gb"), (40.0,), (1024,))
    work = Workload.from_dict({"gpu_hours": 1e6, "reference": "h100-sxm5-80gb"})
    p = plan(site, space, work, PriceTable(), CATALOGUE)
    h100, b200 = p.design(0), p.design(1)
    assert h100["hours_to_train"] == pytest.approx(1e6 / 1024)
    ratio = CATALOGUE["h100-sxm5-80gb"]["bf16_tflops"] / CATALOGUE["b200-sxm-180gb"]["bf16_tflops"]
    assert b200["hours_to_train"] == pytest.approx(1e6 * ratio / 1024)
    out = p.to_dict()
    assert out["objective"] == "cost_of_run" and out["searches"] == 2
    assert math.isnan(h100["cost_per_mtok"])  # no tokens: cost of the run instead
    assert out["best"][0]["cost_of_run"] <= out["best"][1]["cost_of_run"]


def test_workload_and_space_errors_name_their_field():
    with pytest.raises(CapacityInputError) as exc:
        Workload.from_dict({"model": "llama3-8b", "tokens": 1e9, "precision": "fp4"})
    assert exc.value.field == "workload.precision"
    with pytest.raises(CapacityInputError) as exc:
        CandidateSpace.from_dict({"accelerators": ["x"], "rack_kw": [40, -1]})
    assert exc.value.field == "candidates.rack_kw[1]"
    with pytest.raises(CapacityInputError) as exc:
        Site.from_dict({"power_kw": 1, "cooling_kw": 1, "floor_racks": 1, "pue": 0.9})
    assert exc.value.field == "site.pue"


def test_a_model_no_layout_can_hold_is_refused_with_the_training_models_reason():
    site = Site(power_kw=1e4, cooling_kw=1e4, floor_racks=100)
    space = CandidateSpace(("h100-sxm5-80gb", "a100-sxm-80gb"), (40.0,), (64,))
    big = plan(site, space, Workload(model="llama3-405b", tokens=1e12, global_batch=64),
               PriceTable(), CATALOGUE)
    assert big.to_dict()["refused"]["training"] == 2
    assert "does not fit HBM" in big.why(0)[0]
    fp8 = plan(site, space, Workload(model="llama3-8b", tokens=1e12, global_batch=64,
                                     precision="fp8"), PriceTable(), CATALOGUE)
    assert fp8.why(1) == ["training: a100-sxm-80gb has no FP8"] and fp8.fits[0]
