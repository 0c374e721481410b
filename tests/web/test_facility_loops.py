"""The facility panel's live part in the browser (issue 24 item 6): each CDU loop of the
demo cluster with its flow, supply and return temperatures, heat and load, from the
cluster view's snapshot (``facility.cdus[]``), a measured reading marked as such; and the
plant's last hour (PUE, IT and facility power, CDU supply) as uPlot charts from
``GET /api/facility/history/``. Real server, worker, agent and Chromium."""
from __future__ import annotations

import datetime as dt
import time

import pytest
from playwright.sync_api import Page, expect

from tests.conftest import wait_until
from tests.web.conftest import DashboardData, http_json
from tests.web.test_dashboard import (  # noqa: F401 (the dashboard fixture)
    api_from_page,
    assert_no_problems,
    dashboard,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _cdus(page: Page, data: DashboardData) -> list[str]:
    site = api_from_page(page, f"/api/facility/sites/?cluster={data.cluster}")
    plant = api_from_page(page, f"/api/facility/sites/{site['results'][0]['id']}/plant/")
    return [e["key"] for e in plant["cooling"] if e["kind"] == "cdu"]


def _reload(page: Page) -> None:
    """Reload the page (a new subscription, a new panel): the requests the old page had
    in flight are aborted by the navigation, the only problems it may leave."""
    page.reload()
    page.wait_for_function("() => window.twin && window.twin.ready === true", timeout=30_000)
    problems = page.problems  # type: ignore[attr-defined]
    problems[:] = [p for p in problems if "net::ERR_ABORTED" not in p]


def test_each_cdu_loop_shows_its_flow_and_temperatures_measured_or_modelled(
        simulated_agent: str, dashboard: Page, dashboard_data: DashboardData) -> None:  # noqa: F811
    page, data = dashboard, dashboard_data
    keys = _cdus(page, data)
    assert keys
    # a native reading for the first CDU: it wins over the model and is marked "•"
    status, body = http_json(
        f"{data.base}/api/telemetry/clusters/{data.cluster}/facility/", token=data.agent_token,
        scheme="Bearer", body={"readings": [{"element": keys[0], "supply_c": 31.4,
                                              "return_c": 41.6, "ts": time.time()}]})
    assert status in (200, 202), body
    # the next snapshot (a reload subscribes again) carries the plant's CDUs
    wait_until(lambda: http_json(
        f"{data.base}/api/telemetry/clusters/{data.cluster}/", token=data.api_token)[0] == 200,
        10, "the live state")
    loops = page.get_by_test_id("facility-loops")

    def shown() -> bool:
        _reload(page)
        try:
            expect(loops.locator(f"tr[data-cdu='{keys[0]}'] td").nth(1)).to_contain_text(
                "•", timeout=8_000)
            return True
        except AssertionError:
            return False

    wait_until(shown, 60, "the CDU loops with the measured supply")
    expect(loops).to_be_visible()
    rows = loops.locator("tbody tr")
    expect(rows).to_have_count(len(keys))
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.cdu)") == keys
    first = loops.locator(f"tr[data-cdu='{keys[0]}'] td").all_inner_texts()
    assert first[1] == "31.4 •" and first[2] == "41.6 •" and first[3] == "10.2"
    # the other loops: the model's figures, plausible and unmarked
    for key in keys[1:]:
        cells = loops.locator(f"tr[data-cdu='{key}'] td").all_inner_texts()
        supply, ret, flow, heat = (float(cells[i]) for i in (1, 2, 4, 5))
        assert 5.0 < supply < ret < 80.0 and flow > 0 and heat > 0, cells
        assert "•" not in "".join(cells)
    assert_no_problems(page)


def test_the_plant_history_is_drawn_as_uplot_series_over_the_last_hour(
        dashboard: Page, dashboard_data: DashboardData) -> None:  # noqa: F811
    from twin.facility.models import PlantMinute

    page, data = dashboard, dashboard_data
    now = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
    PlantMinute.objects.create(cluster_id=data.cluster, minute=now - dt.timedelta(hours=3),
                               samples=60, pue=1.5, it_w=1e6, facility_w=1.5e6)  # too old
    for i in range(12):
        PlantMinute.objects.create(
            cluster_id=data.cluster, minute=now - dt.timedelta(minutes=12 - i), samples=60,
            pue=1.05 + 0.001 * i, it_w=2.0e6 + 1e4 * i, facility_w=2.1e6 + 1e4 * i,
            cdus=[{"key": "cdu-a", "load_fraction": 0.5, "load_fraction_max": 0.6,
                   "supply_c": 30.0 + 0.1 * i, "supply_c_max": 31.0}])
    _reload(page)
    for name, series in (("power", "2"), ("pue", "1"), ("supply", "1")):
        box = page.get_by_test_id(f"facility-history-{name}")
        expect(box).to_have_attribute("data-points", "12", timeout=20_000)
        expect(box).to_have_attribute("data-series", series)
        expect(box.locator("canvas")).to_have_count(1)
    expect(page.get_by_test_id("facility-history-power")).to_contain_text("facility")
    expect(page.get_by_test_id("facility-history-pue")).to_contain_text("PUE")
    assert_no_problems(page)


def test_no_plant_minute_yet_says_so(dashboard: Page) -> None:  # noqa: F811
    expect(dashboard.get_by_test_id("facility-history-empty")).to_be_visible(timeout=20_000)
    expect(dashboard.get_by_test_id("facility-loops")).to_be_hidden()
    assert_no_problems(dashboard)
