"""docs/capacity.md's worked example, by hand: two catalogue generations side by side.

Llama 3 70B for 1.5 T tokens on 4,608 cards of H100 SXM5 (8-GPU HGX servers, 40 kW racks)
and of GB200 NVL72 (whole 72-card racks, 132 kW class), a 30 MW site at PUE 1.1, the
default price table (``simulation/capacity/prices.py``, each figure's source there and in
docs/capacity.md). Every count, watt and dollar below is computed here from those literals;
only the hours to train and the card draw while training come from the training model
(``simulation.training.search``: its fastest layout), and the test reads them from the plan
and re-does the arithmetic. The figures quoted in the docs are asserted at the end (to
2 %), so the page stays true when the training model moves.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulation.capacity import (
    CandidateSpace,
    PriceTable,
    Site,
    Workload,
    compare_generations,
    plan,
)

CATALOGUE = {row["fields"]["slug"]: row["fields"] for row in json.loads(
    (Path(__file__).parents[3] / "twin/hardware/fixtures/catalogue.json").read_text())}
TOKENS = 1.5e12
PUE = 1.1
HOURS_PER_YEAR = 8760.0
# the default price table's figures (prices.py), written out
ENERGY, IT_YEARS, FACILITY_PER_KW, FACILITY_YEARS, MAINTENANCE = 0.081, 5, 10_000, 20, 0.05
SWITCH_PRICE, SWITCH_W, OPTIC_PRICE, OPTIC_W = 30_000, 1_700, 1_000, 10

# a non-blocking 3-tier fat tree of radix 64 for 4,608 ports (Al-Fares et al. 2008):
# 4,608 > 64²/2 = 2,048, so 3 tiers; 4,608 / 32 = 144 leaves, 144 aggregation, 72 cores
SWITCHES = 144 + 144 + 72
LINKS = 4608 + 144 * 64  # hosts + leaf-up + aggregation-up links
OPTICS = 2 * LINKS  # two transceivers per link
NETWORK_W = SWITCHES * SWITCH_W + OPTICS * OPTIC_W  # 888,480 W

GENERATIONS = {
    # slug: (servers, server nameplate W, racks, price per card, overhead W per server)
    # H100: 8 × 700 W + 4,400 W = 10 kW per server, 4 per 40 kW rack → 576 servers, 144 racks
    "h100-sxm5-80gb": (576, 8 * 700 + 4_400, 144, 31_250.0, 4_400),
    # GB200 NVL72: 4,608 / 72 = 64 racks of 18 trays (4 × 1,200 W + 1,850 W = 6,650 W;
    # 18 trays 119.7 kW ≤ 132 kW), 1,152 trays; $3M per rack = $41,666.67 per card
    "gb200-186gb": (1152, 4 * 1_200 + 1_850, 64, 3_000_000 / 72, 1_850),
}
DOCUMENTED = {  # docs/capacity.md "The seeds' unit compute cost −70 %, as a question"
    "h100-sxm5-80gb": {"days": 3.17, "cost_per_mtok": 0.311, "j_per_token": 1.26},
    "gb200-186gb": {"days": 1.25, "cost_per_mtok": 0.156, "j_per_token": 0.65},
}
DOCUMENTED_CHANGE = -50.0


@pytest.fixture(scope="module")
def comparison():  # type: ignore[no-untyped-def]
    site = Site(power_kw=30_000, cooling_kw=30_000, floor_racks=400, pue=PUE)
    space = CandidateSpace(tuple(GENERATIONS), (40.0, 132.0), (4608,), ("ib-ndr-64",),
                           ("transceiver",))
    p = plan(site, space, Workload(model="llama3-70b", tokens=TOKENS), PriceTable(), CATALOGUE)
    return compare_generations(p, "h100-sxm5-80gb", "gb200-186gb")


def hand(slug: str, hours: float, card_w: float) -> dict[str, float]:
    servers, server_w, racks, per_card, overhead = GENERATIONS[slug]
    it_kw = (servers * server_w + NETWORK_W) / 1000
    capex_it = 4608 * per_card + SWITCHES * SWITCH_PRICE + OPTICS * OPTIC_PRICE
    capex_facility = it_kw * FACILITY_PER_KW
    training_kw = (4608 * card_w + servers * overhead + NETWORK_W) / 1000
    opex = training_kw * PUE * HOURS_PER_YEAR * ENERGY + MAINTENANCE * capex_it
    yearly = capex_it / IT_YEARS + capex_facility / FACILITY_YEARS + opex
    cost_of_run = yearly * hours / HOURS_PER_YEAR
    return {"servers": servers, "racks": racks, "it_kw": it_kw, "capex_it": capex_it,
            "capex_facility": capex_facility, "training_kw": training_kw,
            "opex_per_year": opex, "cost_per_mtok": cost_of_run / TOKENS * 1e6,
            "energy_j_per_token": training_kw * 1000 * PUE * hours * 3600 / TOKENS}


@pytest.mark.parametrize(("role", "slug"), [("older", "h100-sxm5-80gb"),
                                            ("newer", "gb200-186gb")])
def test_each_generation_costs_what_the_price_table_says_by_hand(comparison, role, slug) -> None:  # type: ignore[no-untyped-def]
    d = comparison[f"{role}_design"]
    assert d["accelerator"] == slug and d["cards"] == 4608
    assert (d["switches"], d["links"], d["optics"]) == (SWITCHES, LINKS, OPTICS)
    # the card draw while training: back from the plan's training draw (training model)
    servers, _, _, _, overhead = GENERATIONS[slug]
    card_w = (d["training_kw"] * 1000 - servers * overhead - NETWORK_W) / 4608
    assert 0 < card_w <= float(CATALOGUE[slug]["tdp_w"])
    want = hand(slug, d["hours_to_train"], card_w)
    assert (d["servers"], d["racks"]) == (want["servers"], want["racks"])
    for key in ("it_kw", "capex_it", "capex_facility", "opex_per_year", "cost_per_mtok",
                "energy_j_per_token"):
        assert d[key] == pytest.approx(want[key], rel=1e-9), key
    # the literals: H100 IT capex $182,448,000, GB200 $230,448,000; IT 6,648.48 / 8,549.28 kW
    assert d["capex_it"] == {"h100-sxm5-80gb": 182_448_000,
                             "gb200-186gb": 230_448_000}[slug]
    assert d["it_kw"] == pytest.approx({"h100-sxm5-80gb": 6_648.48,
                                        "gb200-186gb": 8_549.28}[slug])


def test_the_documented_comparison_is_what_the_twin_answers(comparison) -> None:  # type: ignore[no-untyped-def]
    for role in ("older", "newer"):
        d = comparison[f"{role}_design"]
        doc = DOCUMENTED[d["accelerator"]]
        assert d["days_to_train"] == pytest.approx(doc["days"], rel=0.02)
        assert d["cost_per_mtok"] == pytest.approx(doc["cost_per_mtok"], rel=0.02)
        assert d["energy_j_per_token"] == pytest.approx(doc["j_per_token"], rel=0.02)
    older, newer = comparison["older_design"], comparison["newer_design"]
    change = (newer["cost_per_mtok"] - older["cost_per_mtok"]) / older["cost_per_mtok"] * 100
    assert comparison["change_percent"] == pytest.approx(change)
    assert comparison["change_percent"] == pytest.approx(DOCUMENTED_CHANGE, abs=2.0)
    assert comparison["claim_percent"] == -70.0  # the seeds' claim: not what the twin finds
