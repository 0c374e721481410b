"""The dashboard in a real browser: headless Chromium (Debian's, driven by
Playwright) against a real uvicorn server on the test database.

A user logs in through the form, the dashboard loads without console errors,
fetches the clusters and the summary from the API with the session cookie, and
shows the numbers the database holds. A screenshot goes to test-artifacts/ (the
README's picture is taken by ``test_dashboard.py``).
"""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from playwright.sync_api import Page, expect

from tests.conftest import ARTIFACTS
from tests.web.conftest import chromium_page, log_in
from twin.hardware.api.summary import cluster_summary
from twin.hardware.models import Cluster

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "browser-pass-123"


@pytest.fixture
def demo_data(transactional_db, tiny_cluster) -> dict:
    """Two clusters committed where the server sees them: the demo's (built by the
    real builder, 8 × 512 cards) and the hand-built tiny one. Created before
    Playwright starts its event loop."""
    call_command("build_cluster", preset="seed-512", supernodes=8, name="demo",
                 no_progress=True, stdout=open("/dev/null", "w"))  # noqa: SIM115
    demo = Cluster.objects.get(name="demo")
    user = User.objects.create_user("viewer", "viewer@example.com", PASSWORD)
    return {"demo": demo, "tiny": tiny_cluster["cluster"], "user": user,
            "demo_summary": cluster_summary(demo),
            "tiny_summary": cluster_summary(tiny_cluster["cluster"])}


@pytest.fixture
def page(demo_data, uvicorn_server: str, allow_sync_db_in_event_loop) -> Iterator[Page]:
    """A Chromium page (``tests.web.conftest.chromium_page``); the data is committed
    first, so no ORM call runs while Playwright's event loop is active."""
    with chromium_page() as page:
        yield page


def test_dashboard_after_login_shows_the_cluster_from_the_api(page: Page, uvicorn_server: str,
                                                              demo_data):
    demo = demo_data["demo_summary"]
    log_in(page, uvicorn_server, "viewer", PASSWORD)

    # The first cluster by name is picked: "demo" (4,096 cards).
    expect(page.get_by_test_id("cluster-name")).to_have_text("demo")
    expect(page.get_by_test_id("card-count")).to_have_text(f"{demo['counts']['cards']:,}")
    assert demo["counts"]["cards"] == 8 * 512
    expect(page.get_by_test_id("rack-count")).to_have_text(f"{demo['counts']['racks']:,}")
    expect(page.get_by_test_id("link-count")).to_have_text(f"{demo['counts']['links']:,}")
    expect(page.get_by_test_id("over-budget")).to_have_text(
        "Every rack is inside its power budget.")
    # One box per rack on the 3D floor (read through the frontend's test hook).
    page.wait_for_function("() => window.twin && window.twin.ready === true")
    assert page.evaluate("window.twin.keys().length") == demo["counts"]["racks"]
    # The picker lists both clusters.
    options = page.locator("#cluster-picker option")
    expect(options).to_have_text(["demo", "tiny"])

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)

    # Switching cluster fetches its summary and keeps the choice in the URL.
    tiny = demo_data["tiny_summary"]
    page.select_option("#cluster-picker", label="tiny")
    expect(page.get_by_test_id("cluster-name")).to_have_text("tiny")
    expect(page.get_by_test_id("card-count")).to_have_text(str(tiny["counts"]["cards"]))
    expect(page).to_have_url(f"{uvicorn_server}/?cluster={demo_data['tiny'].pk}")
    page.reload()
    expect(page.get_by_test_id("card-count")).to_have_text("8")

    assert page.problems == []  # type: ignore[attr-defined]


def test_wrong_password_stays_on_the_login_page(page: Page, uvicorn_server: str, demo_data):
    page.goto(f"{uvicorn_server}/login/")
    page.fill("input[name=username]", "viewer")
    page.fill("input[name=password]", "not-the-password")
    page.click("button[type=submit]")
    expect(page.locator(".errors")).to_contain_text("correct username and password")
    expect(page).to_have_url(f"{uvicorn_server}/login/")


def test_logout_from_the_header_ends_the_session(page: Page, uvicorn_server: str, demo_data):
    log_in(page, uvicorn_server, "viewer", PASSWORD)
    expect(page.get_by_test_id("cluster-name")).to_have_text("demo")
    page.click(".logout button")
    expect(page).to_have_url(f"{uvicorn_server}/login/")
    # The API now refuses the same browser.
    response = page.request.get(f"{uvicorn_server}/api/clusters/")
    assert response.status in (401, 403)
    assert page.problems == []  # type: ignore[attr-defined]
