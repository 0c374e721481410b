"""The floor shows the plant (issues 24 item 6, 25 items 1/3), in the browser on the whole
product: colouring the racks by their coolant supply (the live plant's per-rack values,
streamed by the cluster view), a right-click on a CDU marker opening the what-if form
with that CDU's trip at 0 s, and "Fork now" starting a forked what-if run and showing
its result.

The demo cluster's facility is built with it (one site, CDUs over its racks); the
simulated agent streams its cards so the plant ticks.
"""
from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Page, expect

from tests.web.conftest import DashboardData
from tests.web.test_dashboard import (  # noqa: F401 (the dashboard fixture)
    api_from_page,
    assert_no_problems,
    dashboard,
    twin,
    wait_twin,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_colouring_the_floor_by_coolant_changes_the_rack_colours(
        simulated_agent: str, dashboard: Page, dashboard_data: DashboardData) -> None:  # noqa: F811
    page, data = dashboard, dashboard_data
    floor = api_from_page(page, f"/api/clusters/{data.cluster}/floor/")
    racks = [r for r, n in zip(floor["racks"]["id"], floor["racks"]["cards"], strict=True) if n]
    wait_twin(page, "arg.every(k => t.valueOf(k) !== null)", racks, timeout=30_000)
    by_power = twin(page, "arg.map(k => t.colourOf(k))", racks)

    select = page.get_by_test_id("metric-select")
    plant = select.locator("optgroup[label=Plant] option")
    expect(plant).to_have_count(3)
    assert plant.evaluate_all("os => os.map(o => o.value)") == [
        "coolant_supply_c", "gpu_temp_c", "cap_share"]
    select.select_option("coolant_supply_c")
    wait_twin(page, "t.view.metric === 'coolant_supply_c'")
    expect(page.get_by_test_id("legend")).to_have_attribute("data-metric", "coolant_supply_c")
    expect(page.get_by_test_id("legend")).to_contain_text("Coolant supply")
    expect(page.get_by_test_id("legend")).to_contain_text("°C")
    wait_twin(page, "arg.every(k => t.valueOf(k) !== null)", racks, timeout=30_000)
    by_coolant = twin(page, "arg.map(k => t.colourOf(k))", racks)
    changed = sum(a != b for a, b in zip(by_power, by_coolant, strict=True))
    assert changed > 0, (by_power[:4], by_coolant[:4])

    # The value a rack shows is the plant's coolant supply, as its panel reads it.
    rack = racks[0]
    shown = twin(page, "t.valueOf(arg)", rack)
    body = api_from_page(page, f"/api/telemetry/clusters/{data.cluster}/racks/{rack}/plant/")
    assert body["supply_c"] is not None and 10.0 < shown < 60.0
    assert shown == pytest.approx(body["supply_c"], abs=1.0)   # a tick may pass in between

    # The rack's side panel shows its coolant, card temperature and cap.
    twin(page, "t.select('rack', arg)", rack)
    section = page.get_by_test_id("panel-rack-plant")
    expect(section).to_contain_text("Coolant supply")
    expect(section).to_contain_text("Hottest card (reading)")
    expect(section).to_contain_text("Power cap")
    assert_no_problems(page)


def test_right_clicking_a_cdu_marker_prefills_its_trip(
        dashboard: Page, dashboard_data: DashboardData) -> None:  # noqa: F811
    page, data = dashboard, dashboard_data
    wait_twin(page, "t.markersReady === true")
    site = api_from_page(page, f"/api/facility/sites/?cluster={data.cluster}")["results"][0]
    cdus = api_from_page(page, f"/api/facility/sites/{site['id']}/cdus/")
    switches = api_from_page(page, f"/api/clusters/{data.cluster}/switches/")
    markers = twin(page, "t.markers()")
    drawn_cdus = [m["key"] for m in markers if m["kind"] == "cdu"]
    assert drawn_cdus and set(drawn_cdus) <= set(cdus["key"])
    assert {m["id"] for m in markers if m["kind"] == "switch"} == set(switches["id"])

    found = twin(page, """(() => {
        for (const m of t.markers()) {
            if (m.kind !== "cdu") continue;
            const p = t.markerScreenOf(m);
            if (p) return [m.key, p];
        }
        return null;
    })()""")
    assert found is not None, "no CDU marker is on the screen"
    key, point = found
    page.mouse.click(point["x"], point["y"], button="right")
    menu = page.get_by_test_id("context-menu")
    expect(menu.get_by_test_id("context-menu-item")).to_have_text(["What if this fails?"])
    menu.get_by_test_id("context-menu-item").click()
    expect(page.get_by_test_id("scenario-kind")).to_have_value("whatif")
    events = page.get_by_test_id("scenario-field-events").input_value()
    assert json.loads(events) == [{"at_s": 0, "kind": "cdu_trip", "target": key}]
    assert_no_problems(page)


def test_fork_now_starts_a_forked_what_if_and_opens_its_result(
        dashboard: Page, dashboard_data: DashboardData) -> None:  # noqa: F811
    page, data = dashboard, dashboard_data
    button = page.get_by_test_id("fork-now")
    expect(button).to_have_text("Fork now")
    button.click()
    expect(button).to_have_attribute("data-run-id", re.compile(r"^\d+$"))
    run_id = int(button.get_attribute("data-run-id") or "0")
    # the scenarios panel opens the run, follows it and shows its result
    detail = page.get_by_test_id("scenario-run-detail")
    expect(detail).to_have_attribute("data-run-id", str(run_id))
    expect(page.get_by_test_id("scenario-status")).to_have_text("succeeded", timeout=180_000)
    expect(button).to_have_attribute("data-status", "succeeded", timeout=30_000)
    expect(button).to_have_text("Fork now")
    expect(button).to_be_enabled()
    expect(page.get_by_test_id("fork-status")).to_have_text(f"Fork #{run_id}: succeeded")
    expect(page.get_by_test_id("scenario-result-table")).to_be_visible()
    run = api_from_page(page, f"/api/scenarios/{run_id}/")
    assert run["kind"] == "whatif" and run["cluster"] == data.cluster
    assert run["params"]["events"] == []
    assert "fork" in run["result"]          # the live state it forked, stored with the run
    assert_no_problems(page)
