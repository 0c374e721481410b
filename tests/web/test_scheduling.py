"""A scheduling scenario run from the dashboard on the demo cluster: the per-policy
charts, the sortable job table, and the playback of placements on the floor.

The whole product runs (uvicorn with the built frontend, the Celery worker and beat).
The viewer picks two policies in the form's multiple select, runs 300 synthetic jobs
in ``full`` mode, and sees the allocation curves (one series per policy), the job
table (sorted by clicking a header) and the playback: moving the slider to the last
point recolours the floor's racks by their allocated share.
"""
from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.web.conftest import DashboardData
from tests.web.test_dashboard import (  # noqa: F401
    api_from_page,
    assert_no_problems,
    dashboard,
    fill_field,
    twin,
    wait_twin,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_scheduling_run_shows_its_charts_job_table_and_playback(
        dashboard: Page, dashboard_data: DashboardData) -> None:  # noqa: F811
    page = dashboard
    assert twin(page, "t.view.kind") == "cluster"
    page.get_by_test_id("scenario-kind").select_option("scheduling")
    page.get_by_test_id("scenario-field-policies").select_option(["fgd", "random"])
    fill_field(page, "mode", "full")
    fill_field(page, "jobs", "300")
    page.get_by_test_id("scenario-submit").click()
    expect(page.get_by_test_id("scenario-status")).to_have_text("succeeded", timeout=90_000)

    run_id = int(page.locator("[data-testid=scenario-runs] li[data-testid=scenario-run]"
                              "[data-status=succeeded]").first.get_attribute("data-run-id")
                 or "0")
    run = api_from_page(page, f"/api/scenarios/{run_id}/")
    assert sorted(run["params"]["policies"]) == ["fgd", "random"]  # in the list's order
    assert [p["policy"] for p in run["result"]["policies"]] == run["params"]["policies"]

    # the per-policy chart: one series per policy
    chart = page.get_by_test_id("scheduling-chart-arrived")
    expect(chart.locator("canvas")).to_be_visible()
    expect(page.get_by_test_id("scenario-chart")).to_have_attribute("data-series", "2")

    # the job table: both policies' rows, sorted by a click on a header
    table = page.get_by_test_id("scheduling-jobs")
    rows = table.locator("tbody tr")
    expected = sum(len(p["job_table"]["rows"]) for p in run["result"]["policies"])
    expect(rows).to_have_count(expected)
    assert expected > 0
    table.locator("th[data-key=jct_s]").click()
    expect(table).to_have_attribute("data-sort", "jct_s:desc")
    jcts = [float(t.replace(",", "")) for t in rows.locator("td:nth-child(7)").all_inner_texts()
            if t != "—"]
    assert jcts == sorted(jcts, reverse=True) and jcts

    # the playback: the floor's racks take the policy's allocated share at the slider's point
    playback = page.get_by_test_id("scheduling-playback")
    expect(playback).to_be_visible()
    expect(page.get_by_test_id("legend")).to_have_attribute("data-metric", "playback")
    racks = run["result"]["racks"]["ids"]
    before = twin(page, "arg.map(k => t.colourOf(k))", racks)
    timeline = run["result"]["policies"][0]["rack_timeline"]
    busiest = max(range(len(timeline["t"])), key=lambda k: sum(timeline["allocated"][k]))
    page.get_by_test_id("playback-slider").evaluate(
        "(e, k) => { e.value = String(k); e.dispatchEvent(new Event('input')); }", busiest)
    expect(playback).to_have_attribute("data-frame", str(busiest))
    expect(page.get_by_test_id("playback-label")).to_contain_text("% of the cards allocated")
    wait_twin(page, "arg[0].some((k, i) => t.colourOf(k) !== arg[1][i])", [racks, before])
    assert_no_problems(page)
