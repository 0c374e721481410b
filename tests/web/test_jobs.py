"""A job submitted over the API, seen in the browser: in the jobs table, its cards coloured.

The whole product runs (uvicorn with the built frontend, the Celery worker and beat):
the test submits a job with the viewer's token (given ``jobs.add_job``) to the demo
cluster, refreshes the jobs panel, colours the supernode view by job and checks that
exactly the job's cards carry a job colour (the others stay "free" grey), then
clicks the row to highlight the job.
"""
from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.web.conftest import DashboardData, http_json
from tests.web.test_dashboard import dashboard, open_view, twin, wait_twin  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FREE = "#5a616d"  # colour.ts NO_DATA_RGB: a card no job holds


def test_a_submitted_job_appears_in_the_table_and_its_cards_are_coloured(
        dashboard: Page, dashboard_data: DashboardData) -> None:  # noqa: F811
    from django.contrib.auth.models import Permission, User

    User.objects.get(username=dashboard_data.username).user_permissions.add(
        Permission.objects.get(codename="add_job", content_type__app_label="jobs"))
    status, job = http_json(f"{dashboard_data.base}/api/jobs/", token=dashboard_data.api_token,
                            body={"cluster": dashboard_data.cluster, "name": "llama-ft",
                                  "tenant": "team-a", "cards": 16})
    assert status == 201 and job["state"] == "running", job
    held = set(job["cards_held"])
    assert len(held) == 16 and job["placement"]["supernodes"] == 1
    _, card = http_json(f"{dashboard_data.base}/api/cards/{min(held)}/",
                        token=dashboard_data.api_token)

    page = dashboard
    panel = page.get_by_test_id("jobs-panel")
    panel.get_by_role("button", name="Refresh").click()
    row = page.locator(f"[data-testid=jobs-table] tr[data-job='{job['id']}']")
    expect(row).to_contain_text("llama-ft")
    expect(row).to_contain_text("running")
    expect(row).to_contain_text("ms")  # the predicted AllReduce

    open_view(page, "supernode", card["supernode"], "job")
    wait_twin(page, "t.colourOf(arg) !== null && t.colourOf(arg) !== '#5a616d'", min(held))
    colours = twin(page, "Object.fromEntries(t.keys().map(k => [k, t.colourOf(k)]))")
    job_colours = {colours[str(k)] for k in held}
    assert len(job_colours) == 1 and FREE not in job_colours, job_colours
    others = {c for k, c in colours.items() if int(k) not in held}
    assert others == {FREE}, others

    row.click()
    expect(row).to_have_class("selected")
    wait_twin(page, "t.colourOf(arg[0]) === arg[1]", [min(held), job_colours.pop()])
