"""The what-if comparison view shows what the plant did (issue 25): the fixed point of
the plant ↔ jobs composition per case (rounds, converged, residual) and each rack's
time to its thermal limit and trips, soonest in the what if first — each checked against
the result the API returned for a what-if run from the scenarios panel on the demo
cluster's plant, a hot day (+15 °C wet bulb) and one CDU tripped.

The whole product runs (uvicorn with the built frontend, the Celery worker and beat).
"""
from __future__ import annotations

import json
import math

import pytest
from playwright.sync_api import Page, expect

from tests.web.conftest import DashboardData
from tests.web.test_dashboard import (  # noqa: F401 (the dashboard fixture)
    api_from_page,
    assert_no_problems,
    dashboard,
    fill_field,
)
from tests.web.test_facility_whatif import engine_ready_plant

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _expected_order(facility: dict) -> list[tuple[int, float | None, int]]:
    """(rack, what-if time to limit, what-if trips) of every rack limited or tripped in
    either case, soonest in the what if first, then the baseline's, then by id."""
    p, b = facility["perturbed"]["racks"], facility["baseline"]["racks"]
    rows = []
    for i, rack in enumerate(p["ids"]):
        j = b["ids"].index(rack)
        tp, tb = p["time_to_limit_s"][i], b["time_to_limit_s"][j]
        if tp is not None or tb is not None or p["trips"][i] or b["trips"][j]:
            rows.append((math.inf if tp is None else tp, math.inf if tb is None else tb,
                         rack, tp, p["trips"][i]))
    return [(r[2], r[3], r[4]) for r in sorted(rows)]


def test_a_what_if_shows_the_fixed_point_and_each_racks_time_to_limit(
        dashboard: Page, dashboard_data: DashboardData) -> None:  # noqa: F811
    cdu = engine_ready_plant(dashboard_data.cluster)
    page = dashboard
    page.get_by_test_id("scenario-kind").select_option("whatif")
    fill_field(page, "events", json.dumps([
        {"at_s": 0, "kind": "raise_wet_bulb", "value": 15},
        {"at_s": 300, "kind": "cdu_trip", "target": cdu}]))
    fill_field(page, "horizon_h", "2")
    fill_field(page, "failure_rate", "0")
    page.get_by_test_id("scenario-submit").click()
    expect(page.get_by_test_id("scenario-status")).to_have_text("succeeded", timeout=120_000)
    run_id = (page.locator("[data-testid=scenario-runs] li[data-testid=scenario-run]"
                           "[data-status=succeeded]").first.get_attribute("data-run-id"))
    result = api_from_page(page, f"/api/scenarios/{run_id}/")["result"]
    facility = result["facility"]
    assert facility["matched_racks"], facility.get("note")

    # the fixed point, one clause per case, as the result has it
    line = page.get_by_test_id("whatif-fixed-point")
    for key, label in (("baseline", "baseline"), ("perturbed", "what if")):
        fp = facility[key]["fixed_point"]
        rounds = fp["rounds"]
        expect(line).to_contain_text(
            f"{label} {rounds} round{'' if rounds == 1 else 's'}, "
            f"{'converged' if fp['converged'] else 'not converged'}")

    # the racks at their limit, in the order the result gives, the soonest first
    order = _expected_order(facility)
    assert order and order[0][1] is not None, "the hot day and the CDU trip limit a rack"
    listing = page.get_by_test_id("whatif-time-to-limit")
    expect(listing).to_have_attribute("data-racks", str(len(order)))
    items = listing.locator("[data-testid=whatif-rack-limit]")
    expect(items).to_have_count(min(20, len(order)))
    shown = [int(x) for x in items.evaluate_all("els => els.map(e => e.dataset.rack)")]
    assert shown == [r for r, _, _ in order[:20]]
    rack, first, trips = order[0]
    expect(items.first).to_contain_text(f"rack {rack}: ")
    expect(items.first).to_contain_text(" s")
    if trips:
        expect(items.first).to_contain_text(f"{trips} trip")
    assert_no_problems(page)
