"""The facility panel in the browser (issue 24 item 6): on the demo cluster (its facility
built with the cluster) a Sankey of power from the feeds through each stage to the IT load
and heat rejection, the losses per stage and each CDU's load and headroom, all as
``GET /api/facility/sites/<id>/plant/`` answers."""
from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.web.conftest import DashboardData
from tests.web.test_dashboard import (  # noqa: F401 (the dashboard fixture)
    api_from_page,
    assert_no_problems,
    dashboard,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_facility_panel_draws_the_power_sankey_and_the_cdus(
        dashboard: Page, dashboard_data: DashboardData):  # noqa: F811
    page = dashboard
    panel = page.get_by_test_id("facility-panel")
    expect(panel).to_be_visible()
    sankey = page.get_by_test_id("facility-sankey")
    expect(sankey).to_be_visible(timeout=30_000)
    site = api_from_page(page, f"/api/facility/sites/?cluster={dashboard_data.cluster}")
    plant = api_from_page(page, f"/api/facility/sites/{site['results'][0]['id']}/plant/")
    feeds = sum(e["input_kw"] for e in plant["power"] if e["kind"] == "feed")
    feed_node = sankey.locator("rect[data-node=feed]")
    assert float(feed_node.get_attribute("data-kw") or 0) == pytest.approx(feeds, abs=1e-3)
    # conservation on the page: what reaches heat rejection is what the feeds draw
    into_heat = sankey.locator("path[data-to=heat]").evaluate_all(
        "ps => ps.reduce((s, p) => s + Number(p.dataset.kw), 0)")
    assert into_heat == pytest.approx(feeds, rel=1e-6)
    assert sankey.locator("path.loss").count() >= 1
    kinds = [k for k in ("feed", "transformer", "ups", "pdu", "busway", "power_shelf")
             if any(e["kind"] == k for e in plant["power"])]
    expect(page.locator("[data-testid=facility-losses] tbody tr")).to_have_count(len(kinds))
    cdus = [e for e in plant["cooling"] if e["kind"] == "cdu"]
    rows = page.locator("[data-testid=facility-cdus] tbody tr")
    expect(rows).to_have_count(len(cdus))
    expect(rows.first).to_contain_text(cdus[0]["key"])
    assert_no_problems(page)
