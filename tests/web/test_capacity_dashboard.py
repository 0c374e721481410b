"""The capacity kind in the dashboard: its Pareto front drawn, a bad price refused on its field.

A real browser against the whole product running (the demo's fixtures): the
scenarios panel's capacity form takes the site, candidates and workload as JSON;
a negative energy price is refused on ``prices`` with nothing queued; the run then
succeeds and the panel's chart draws the front of cost per million tokens against
days to train (the kind's ``chart`` hint), one point per design of the front.
"""
from __future__ import annotations

import json

import pytest
from playwright.sync_api import Page, expect

from tests.web.conftest import DashboardData
from tests.web.test_dashboard import (  # noqa: F401 - the dashboard fixture
    api_from_page,
    assert_no_problems,
    assert_not_blank,
    canvas_stats,
    dashboard,
    fill_field,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SITE = {"power_kw": 30_000, "cooling_kw": 30_000, "floor_racks": 400}
CANDIDATES = {"accelerators": ["h100-sxm5-80gb", "gb200-186gb"], "rack_kw": [40, 132],
              "cards": [576, 1152]}
WORKLOAD = {"model": "llama3-8b", "tokens": 1e11, "global_batch": 576}


def test_a_capacity_plan_draws_its_pareto_front(
        dashboard: Page, dashboard_data: DashboardData):  # noqa: F811 - the imported fixture
    page = dashboard
    expect(page.get_by_test_id("scenarios-panel")).to_be_visible()
    page.get_by_test_id("scenario-kind").select_option("capacity")
    fill_field(page, "site", json.dumps(SITE))
    fill_field(page, "candidates", json.dumps(CANDIDATES))
    fill_field(page, "workload", json.dumps(WORKLOAD))
    fill_field(page, "prices", json.dumps({"energy_per_kwh": -0.1}))
    page.get_by_test_id("scenario-submit").click()
    expect(page.get_by_test_id("scenario-field-error-prices")).to_contain_text(
        "a finite number ≥ 0, got -0.1")
    assert api_from_page(page, "/api/scenarios/")["results"] == []
    problems = page.problems  # type: ignore[attr-defined]
    assert problems and all(" 400" in p for p in problems), problems
    problems.clear()

    fill_field(page, "prices", json.dumps({"energy_per_kwh": 0.1}))
    page.get_by_test_id("scenario-submit").click()
    expect(page.get_by_test_id("scenario-status")).to_have_text("succeeded", timeout=90_000)
    detail = page.get_by_test_id("scenario-run-detail")
    run = api_from_page(page, f"/api/scenarios/{detail.get_attribute('data-run-id')}/")
    assert run["kind"] == "capacity" and run["status"] == "succeeded"
    front = run["result"]["pareto"]
    assert front and run["result"]["prices"]["energy_per_kwh"] == 0.1
    chart = "[data-testid=scenario-chart] canvas"
    expect(page.locator(chart).first).to_be_visible()
    stats = canvas_stats(page, chart, "capacity-pareto.png")
    assert_not_blank(stats, min_colours=16, min_foreground=0.01)
    assert_no_problems(page)
