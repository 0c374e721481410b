"""A failed card's remediation, seen in the browser: pushed live into the self-healing
panel, applied from it by an operator.

The whole product runs (uvicorn with the built frontend, the Celery worker and beat).
The test places a job on the demo cluster and hands a failure of one of its cards to
self-healing (``twin.jobs.healing.handle_failure``, as the telemetry tick does); the
proposal reaches the page over the cluster's websocket without a reload. The viewer
may not apply it (the row says why); given ``jobs.change_remediation`` it may, and the
row turns to applied.
"""
from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.web.conftest import DashboardData
from tests.web.test_dashboard import dashboard  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_remediation_is_pushed_live_and_applied_from_the_panel(
        dashboard: Page, dashboard_data: DashboardData) -> None:  # noqa: F811
    from django.contrib.auth.models import Permission, User

    from twin.jobs import healing
    from twin.jobs.models import Allocation, Job
    from twin.jobs.scheduler import submit

    job = Job(cluster_id=dashboard_data.cluster, name="heal-me", tenant="team-a", cards=4)
    job.full_clean()
    submit(job)
    card = Allocation.objects.filter(job=job).order_by("card_id").first().card_id
    page = dashboard
    panel = page.get_by_test_id("remediations-panel")
    expect(panel).to_contain_text("Self-healing")

    rem = healing.handle_failure(card, "xid79", 990_001, detail="XID 79")
    row = panel.locator(f"[data-remediation-id='{rem.pk}']")
    expect(row).to_have_attribute("data-state", "proposed")  # pushed, no reload
    expect(row).to_contain_text("heal-me")
    expect(row).to_contain_text("XID 79")

    row.get_by_test_id("remediation-apply").click()
    expect(row).to_contain_text("permission")  # a viewer may not (403)
    User.objects.get(username=dashboard_data.username).user_permissions.add(
        Permission.objects.get(codename="change_remediation", content_type__app_label="jobs"))
    row.get_by_test_id("remediation-apply").click()
    expect(row).to_have_attribute("data-state", "applied")
    assert not Allocation.objects.filter(card_id=card).exists()
