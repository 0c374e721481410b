"""A what-if run from the dashboard's scenario panel on the demo cluster: the events
typed as JSON, the run forks the live twin, and the result shows as a comparison
table (baseline, what if, difference).

The whole product runs (uvicorn with the built frontend, the Celery worker and beat).
"""
from __future__ import annotations

import json

import pytest
from playwright.sync_api import Page, expect

from tests.web.conftest import DashboardData
from tests.web.test_dashboard import (  # noqa: F401
    api_from_page,
    assert_no_problems,
    dashboard,
    fill_field,
    twin,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_what_if_from_the_panel_compares_with_doing_nothing(
        dashboard: Page, dashboard_data: DashboardData) -> None:  # noqa: F811
    page = dashboard
    assert twin(page, "t.view.kind") == "cluster"
    server = dashboard_data.cards[0]["server"]
    page.get_by_test_id("scenario-kind").select_option("whatif")
    fill_field(page, "events", json.dumps(
        [{"at_s": 600, "kind": "drain_server", "target": server}]))
    fill_field(page, "horizon_h", "6")
    fill_field(page, "failure_rate", "0")  # no random failures: the baseline is all up
    page.get_by_test_id("scenario-submit").click()
    expect(page.get_by_test_id("scenario-status")).to_have_text("succeeded", timeout=90_000)
    run_id = int(page.locator("[data-testid=scenario-runs] li[data-testid=scenario-run]"
                              "[data-status=succeeded]").first.get_attribute("data-run-id")
                 or "0")
    run = api_from_page(page, f"/api/scenarios/{run_id}/")
    assert run["kind"] == "whatif" and run["snapshot"]["taken_at"]  # it forked
    applied = run["result"]["perturbed"]["applied"][0]
    assert applied["kind"] == "drain_server" and applied["cards"] > 0
    # the result table by its id: the comparison view's uPlot legends are tables too
    table = page.get_by_test_id("scenario-result-table")
    expect(table.locator("thead th")).to_have_text(["quantity", "baseline", "what if",
                                                    "difference"])
    availability = table.locator("tbody tr", has_text="availability")
    expect(availability.locator("td").nth(1)).to_have_text("1")
    b = run["result"]["baseline"]["totals"]["availability"]
    p = run["result"]["perturbed"]["totals"]["availability"]
    assert p < b == 1.0
    assert_no_problems(page)
