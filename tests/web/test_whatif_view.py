"""The what-if comparison view in the browser: a job runs on the demo cluster, a what-if
fails its server, and the view draws a Gantt bar per job per case and both cases'
series overlaid (PUE too when the run has the facility part), and colours the floor by
each rack's peak kW difference (and back) — each checked against what the API returned.

The whole product runs (uvicorn with the built frontend, the Celery worker and beat).
"""
from __future__ import annotations

import json

import pytest
from playwright.sync_api import Page, expect

from tests.web.conftest import DashboardData, http_json
from tests.web.test_dashboard import (  # noqa: F401
    api_from_page,
    assert_no_problems,
    dashboard,
    fill_field,
    twin,
    wait_twin,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_what_if_draws_the_gantt_and_the_overlaid_series(
        dashboard: Page, dashboard_data: DashboardData) -> None:  # noqa: F811
    from django.contrib.auth.models import Permission, User

    User.objects.get(username=dashboard_data.username).user_permissions.add(
        Permission.objects.get(codename="add_job", content_type__app_label="jobs"))
    status, job = http_json(f"{dashboard_data.base}/api/jobs/", token=dashboard_data.api_token,
                            body={"cluster": dashboard_data.cluster, "name": "llama-ft",
                                  "tenant": "team-a", "cards": 16})
    assert status == 201 and job["state"] == "running", job
    _, card = http_json(f"{dashboard_data.base}/api/cards/{min(job['cards_held'])}/",
                        token=dashboard_data.api_token)

    page = dashboard
    page.get_by_test_id("scenario-kind").select_option("whatif")
    fill_field(page, "events", json.dumps(
        [{"at_s": 0, "kind": "fail_server", "target": card["server"]}]))
    fill_field(page, "horizon_h", "6")
    fill_field(page, "failure_rate", "0")
    page.get_by_test_id("scenario-submit").click()
    expect(page.get_by_test_id("scenario-status")).to_have_text("succeeded", timeout=90_000)
    run_id = int(page.locator("[data-testid=scenario-runs] li[data-testid=scenario-run]"
                              "[data-status=succeeded]").first.get_attribute("data-run-id")
                 or "0")
    result = api_from_page(page, f"/api/scenarios/{run_id}/")["result"]

    # the Gantt: a lane per job of the table (up to 20), a bar per case that started
    rows = result["jobs"]["rows"][:20]
    ours = next(r for r in rows if r["job"] == job["id"])
    assert ours["restarts"] >= 1  # its server failed
    gantt = page.get_by_test_id("whatif-gantt")
    expect(gantt).to_have_attribute("data-rows", str(len(rows)))
    bars = gantt.locator("[data-testid=whatif-gantt-bar]")
    started = sum((r["baseline_start_s"] is not None) + (r["start_s"] is not None) for r in rows)
    expect(bars).to_have_count(started)
    mine = gantt.locator(f"[data-testid=whatif-gantt-bar][data-job='{job['id']}']")
    expect(mine).to_have_count(2)
    expect(mine.and_(page.locator("[data-case=perturbed]"))).to_have_attribute(
        "data-restarts", str(ours["restarts"]))

    # the series: both cases on the union of their sample times
    for key in ("utilisation", "power_kw", "availability", "waiting_jobs", "queued_cards"):
        times = set(result["baseline"]["series"]["t_s"]) | set(result["perturbed"]["series"]["t_s"])
        chart = page.get_by_test_id(f"whatif-chart-{key}")
        expect(chart).to_have_attribute("data-points", str(len(times)))
        expect(chart.locator("canvas")).to_have_count(1)
    # PUE when the run carries the facility part (the cluster has a plant), else no chart
    facility = result.get("facility")
    pue = page.get_by_test_id("whatif-chart-pue")
    if facility:
        times = (set(facility["baseline"]["series"]["t_s"])
                 | set(facility["perturbed"]["series"]["t_s"]))
        expect(pue).to_have_attribute("data-points", str(len(times)))
    else:
        expect(pue).to_have_count(0)

    # the floor by the difference: grey where nothing changed, blue below, red above
    diff = dict(zip(result["racks"]["ids"], result["racks"]["peak_kw_difference"], strict=True))
    page.get_by_test_id("whatif-floor").click()
    expect(page.get_by_test_id("legend")).to_have_attribute("data-metric", "difference")
    same = [k for k, d in diff.items() if d == 0][:5]
    wait_twin(page, "arg.every(k => t.colourOf(k) === '#6e7681')", same)
    moved = max(diff, key=lambda k: abs(diff[k]))
    assert diff[moved] != 0  # down from the fork: its rack never reaches its baseline peak
    rgb = twin(page, "t.colourOf(arg)", moved)
    red, blue = int(rgb[1:3], 16), int(rgb[5:7], 16)
    assert (blue > red) if diff[moved] < 0 else (red > blue), (rgb, diff[moved])
    page.get_by_test_id("whatif-floor").click()  # back to the live colours
    expect(page.get_by_test_id("legend")).not_to_have_attribute("data-metric", "difference")
    assert_no_problems(page)
