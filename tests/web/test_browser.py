"""The dashboard in a real browser: headless Chromium (Debian's, driven by
Playwright) against a real uvicorn server on the test database.

A user logs in through the form, the dashboard loads without console errors,
fetches the clusters and the summary from the API with the session cookie, and
shows the numbers the database holds. A screenshot goes to test-artifacts/ and
to docs/screenshot.png when TWIN_UPDATE_SCREENSHOT=1 (the README shows it).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from playwright.sync_api import ConsoleMessage, Page, expect, sync_playwright

from tests.conftest import ARTIFACTS, ROOT
from twin.api.summary import cluster_summary
from twin.hardware.models import Cluster

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic",
]
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
def page(demo_data, uvicorn_server: str, allow_sync_db_in_event_loop) -> Page:
    """A Chromium page; the data is committed first, so no ORM call runs while
    Playwright's greenlet-based event loop is active (a query from inside it
    would open a second, never-closed connection)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (bash scripts/test does)",
                    pytrace=False)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        page = context.new_page()
        page.set_default_timeout(20_000)
        page.problems = []  # type: ignore[attr-defined]

        def on_console(message: ConsoleMessage) -> None:
            if message.type == "error":
                page.problems.append(f"console: {message.text}")  # type: ignore[attr-defined]

        page.on("console", on_console)
        page.on("pageerror", lambda exc: page.problems.append(f"page error: {exc}"))  # type: ignore[attr-defined]
        page.on("requestfailed", lambda req: page.problems.append(  # type: ignore[attr-defined]
            f"request failed: {req.url} {req.failure}"))
        page.on("response", lambda resp: resp.status >= 400 and page.problems.append(  # type: ignore[attr-defined]
            f"HTTP {resp.status}: {resp.url}"))
        yield page
        context.close()
        browser.close()


def log_in(page: Page, base: str, username: str, password: str) -> None:
    page.goto(f"{base}/")
    expect(page).to_have_url(f"{base}/login/?next=/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    expect(page).to_have_url(f"{base}/")


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
    # One square per rack on the floor map, each with its draw in the tooltip.
    racks = page.locator("[data-testid=rack-floor] .rack")
    expect(racks).to_have_count(demo["counts"]["racks"])
    assert " of 40.0 kW (" in racks.first.get_attribute("title")
    # The picker lists both clusters.
    options = page.locator("#cluster-picker option")
    expect(options).to_have_text(["demo", "tiny"])

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "dashboard.png"
    page.screenshot(path=str(shot), full_page=True)
    if os.environ.get("TWIN_UPDATE_SCREENSHOT") == "1":  # refresh the README's picture
        shutil.copyfile(shot, ROOT / "docs" / "screenshot.png")

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
