""""What if this fails?" from a right-click on a rack of the floor: the menu opens the
scenario form as a what-if with that rack's failure at 0 s, one click on Run runs it
and the comparison table shows; Escape closes the menu, and the browser's own menu
stays suppressed only over the 3D view.

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
    open_view,
    topmost_card,
    twin,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def a_rack_on_screen(page: Page) -> tuple[int, dict[str, float]]:
    """A rack of the floor and where a click hits it."""
    found = twin(page, """(() => {
        for (const key of t.keys()) {
            const p = t.screenOf(key);
            if (p) return [key, p];
        }
        return null;
    })()""")
    assert found is not None, "no rack of the floor is on the screen"
    return int(found[0]), found[1]


def test_right_clicking_a_rack_runs_what_if_it_fails(
        dashboard: Page, dashboard_data: DashboardData) -> None:  # noqa: F811
    page = dashboard
    assert twin(page, "t.view.kind") == "cluster"
    rack, point = a_rack_on_screen(page)
    assert twin(page, f"t.pickAt({point['x']}, {point['y']})") == {"kind": "rack", "id": rack}
    menu = page.get_by_test_id("context-menu")

    # Escape closes the menu without touching the form
    page.mouse.click(point["x"], point["y"], button="right")
    expect(menu).to_be_visible()
    page.keyboard.press("Escape")
    expect(menu).to_be_hidden()
    # so does a click elsewhere
    page.mouse.click(point["x"], point["y"], button="right")
    expect(menu).to_be_visible()
    page.get_by_test_id("scenarios-panel").click(position={"x": 5, "y": 5})
    expect(menu).to_be_hidden()
    # the browser's own menu is suppressed on the canvas only
    prevented = page.evaluate("""(() => {
        const fire = (el) => !el.dispatchEvent(new MouseEvent("contextmenu",
            {bubbles: true, cancelable: true}));
        return [fire(document.querySelector("[data-testid=scene] canvas")),
                fire(document.querySelector("[data-testid=scenarios-panel]"))];
    })()""")
    assert prevented == [True, False]

    page.mouse.click(point["x"], point["y"], button="right")
    expect(menu.get_by_test_id("context-menu-item")).to_have_text(["What if this fails?"])
    menu.get_by_test_id("context-menu-item").click()
    expect(menu).to_be_hidden()
    expect(page.get_by_test_id("scenario-kind")).to_have_value("whatif")
    events = page.get_by_test_id("scenario-field-events").input_value()
    assert json.loads(events) == [{"at_s": 0, "kind": "fail_rack", "target": rack}]
    # the other fields at their defaults (the kind's 24 h horizon)
    expect(page.get_by_test_id("scenario-field-horizon_h")).to_have_value("24")

    page.get_by_test_id("scenario-submit").click()
    expect(page.get_by_test_id("scenario-status")).to_have_text("succeeded", timeout=120_000)
    expect(page.get_by_test_id("scenario-result-table").locator("thead th")).to_have_text(
        ["quantity", "baseline", "what if", "difference"])
    run_id = int(page.locator("[data-testid=scenario-runs] li[data-testid=scenario-run]"
                              "[data-status=succeeded]").first.get_attribute("data-run-id")
                 or "0")
    run = api_from_page(page, f"/api/scenarios/{run_id}/")
    assert run["kind"] == "whatif"
    assert run["cluster"] == dashboard_data.cluster
    assert run["params"]["events"] == [{"at_s": 0, "kind": "fail_rack", "target": rack}]
    applied = run["result"]["perturbed"]["applied"]
    assert [(a["kind"], a["target"]) for a in applied] == [("fail_rack", rack)]
    assert_no_problems(page)


def test_right_clicking_a_card_prefills_its_failure(
        dashboard: Page, dashboard_data: DashboardData) -> None:  # noqa: F811
    page, data = dashboard, dashboard_data
    open_view(page, "supernode", data.supernodes[0], "power_w")
    card, point = topmost_card(page)
    page.mouse.click(point["x"], point["y"], button="right")
    page.get_by_test_id("context-menu").get_by_test_id("context-menu-item").click()
    expect(page.get_by_test_id("scenario-kind")).to_have_value("whatif")
    events = page.get_by_test_id("scenario-field-events").input_value()
    assert json.loads(events) == [{"at_s": 0, "kind": "fail_card", "target": card}]
    assert_no_problems(page)
