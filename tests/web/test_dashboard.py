"""The 3D dashboard in a real browser, against the whole product running.

Headless Chromium (Debian's, driven by Playwright) logs in to a real uvicorn
serving the built frontend; a real Celery worker and Celery beat process the
telemetry, and either the simulated agent (``manage.py telemetry_agent``)
streams the demo cluster — ``seed-512`` × 8 supernodes = 4,096 cards — or the
test posts hand-written batches through the same ingestion endpoint with an
agent token, so the values are known (``tests.web.conftest``). Nothing between
the agent and the pixels is simulated.

The tests read the page only through the contract the frontend promises
(``docs/architecture.md``, "Frontend"): ``data-testid`` attributes and
the ``window.twin`` test hook (``ready``, ``open``, ``keys``, ``colourOf``,
``valueOf``, ``screenOf``, ``frames``, ``route``, ``highlighted``), and compare
what the page shows with what the API answers at the same moment.

Screenshots go to ``test-artifacts/`` (overview, supernode, side panel,
scenario chart); with ``TWIN_UPDATE_SCREENSHOT=1`` the overview also replaces
``docs/screenshot.png``, the README's picture (the only place that writes it).
"""
from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.conftest import ARTIFACTS, ROOT
from tests.web.conftest import (
    DashboardData,
    RestartableServer,
    TelemetryProbe,
    chromium_page,
    image_stats,
    log_in,
)
from twin.telemetry.metrics import METRIC_KEYS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HEX_COLOUR = re.compile(r"^#[0-9a-f]{6}$")
# One reading of every metric, inside every health rule's limits, each value exact
# in float32 and at the frames' rounding (so page, frame and API agree exactly).
READING: dict[str, float] = {
    "gpu_util": 91.5, "flops_util": 62.25, "tensor_active": 55.75, "gr_engine_active": 88.5,
    "dram_active": 47.25, "power_w": 512.5, "gpu_temp_c": 61.5, "mem_temp_c": 66.25,
    "hbm_used_gib": 60.5, "hbm_free_gib": 19.5, "sm_clock_mhz": 1755, "mem_clock_mhz": 2619,
    "xid_errors": 0, "ecc_errors": 0, "nvlink_gbps": 412.75, "pcie_tx_gbps": 12.5,
    "pcie_rx_gbps": 11.25, "pcie_replay": 3, "allreduce_latency_us": 850.5,
    "p2p_gbps": 380.25, "cpu_util": 35.5, "storage_gbps": 4.75, "checkpoint_write_s": 9.5,
    "link_latency_ns": 160.5, "rdma_latency_us": 1.5, "energy_kj": 123456.5,
}
# Network failures the browser itself reports while the server is down.
CONNECTION_ERROR = re.compile(r"net::ERR_|WebSocket connection to .* failed")


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

@pytest.fixture
def dashboard(dashboard_data: DashboardData, allow_sync_db_in_event_loop) -> Iterator[Page]:
    """The dashboard after a real login, its scene built and first frame drawn."""
    with chromium_page() as page:
        log_in(page, dashboard_data.base, dashboard_data.username, dashboard_data.password)
        try:
            page.wait_for_function("() => window.twin && window.twin.ready === true",
                                   timeout=30_000)
        except PlaywrightTimeout:
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "dashboard-not-ready.png"))
            hook = page.evaluate("() => window.twin ? JSON.stringify(window.twin) : null")
            pytest.fail(f"window.twin.ready never became true (twin: {hook}; problems: "
                        f"{page.problems})", pytrace=False)  # type: ignore[attr-defined]
        yield page


def twin(page: Page, body: str, arg: Any = None) -> Any:
    """Evaluate ``body`` (an expression over ``t`` = ``window.twin`` and ``arg``)."""
    return page.evaluate(f"async ([arg]) => {{ const t = window.twin; return {body}; }}",
                         [arg])


def wait_twin(page: Page, body: str, arg: Any = None, timeout: float = 20_000) -> None:
    """Wait until ``body`` (over ``t`` = ``window.twin`` and ``arg``) is truthy."""
    page.wait_for_function(f"([arg]) => {{ const t = window.twin; return {body}; }}",
                           arg=[arg], timeout=timeout)


def open_view(page: Page, kind: str, object_id: int, metric: str) -> None:
    """Switch view through the hook (as the UI does), pick the metric in the UI."""
    twin(page, "t.open(arg[0], arg[1])", [kind, object_id])
    wait_twin(page, "t.view.kind === arg[0] && t.view.id === arg[1]", [kind, object_id])
    page.get_by_test_id("metric-select").select_option(metric)
    wait_twin(page, "t.view.metric === arg", metric)


def api_from_page(page: Page, path: str) -> Any:
    """GET ``path`` with the page's own session (what the page itself can read)."""
    return page.evaluate(
        """async (path) => {
            const r = await fetch(path, {headers: {Accept: "application/json"}});
            if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
            return r.json();
        }""", path)


def canvas_stats(page: Page, selector: str, shot: str) -> dict[str, Any]:
    """Screenshot one canvas into test-artifacts/ and describe its pixels."""
    ARTIFACTS.mkdir(exist_ok=True)
    png = page.locator(selector).first.screenshot(path=str(ARTIFACTS / shot))
    return image_stats(page, png)


def assert_not_blank(stats: dict[str, Any], *, min_colours: int, min_foreground: float) -> None:
    """A screenshot of the canvas's box also shows the HTML laid over it (legend,
    hints: ~5 % of the scene's area); the scene thresholds sit well above that (a
    drawn floor or torus covers 25–45 % in well over a thousand colours)."""
    assert stats["distinct"] >= min_colours, stats
    assert stats["foreground"] >= min_foreground, stats


def assert_no_problems(page: Page) -> None:
    assert page.problems == []  # type: ignore[attr-defined]


def torus_hops(a: dict[str, Any], b: dict[str, Any], dims: tuple[int, int, int]) -> int:
    """Manhattan distance on the torus: each axis the shorter way round."""
    total = 0
    for axis, n in zip("xyz", dims, strict=True):
        d = abs(a[axis] - b[axis])
        total += min(d, n - d)
    return total


def card_at(cards: list[dict[str, Any]], x: int, y: int, z: int) -> dict[str, Any]:
    return next(c for c in cards if (c["x"], c["y"], c["z"]) == (x, y, z))


def topmost_card(page: Page) -> tuple[int, dict[str, float]]:
    """The drawn card highest on the screen (leftmost on a tie): on the silhouette
    of the torus block, so nothing in front of it hides its centre."""
    found = twin(page, """(() => {
        const box = document.querySelector("[data-testid=scene] canvas").getBoundingClientRect();
        let best = null;
        for (const key of t.keys()) {
            const p = t.screenOf(key);
            if (!p || p.x < box.left + 2 || p.x > box.right - 2 || p.y < box.top + 2
                || p.y > box.bottom - 2) continue;
            if (!best || p.y < best[1].y - 0.5 || (Math.abs(p.y - best[1].y) <= 0.5
                                                  && p.x < best[1].x)) best = [key, p];
        }
        return best;
    })()""")
    assert found is not None, "no card of the view is on the screen"
    return int(found[0]), found[1]


# --------------------------------------------------------------------------
# tests
# --------------------------------------------------------------------------

def test_the_dashboard_loads_live_and_draws_the_cluster(simulated_agent: str,
                                                        dashboard: Page,
                                                        dashboard_data: DashboardData):
    page, data = dashboard, dashboard_data
    view = twin(page, "t.view")
    assert view["kind"] == "cluster"
    assert twin(page, "t.firstFrameMs") > 0
    floor = api_from_page(page, f"/api/clusters/{data.cluster}/floor/")
    assert floor["counts"]["cards"] == 4096
    # Every rack that holds cards is drawn, and nothing that is not a rack of the cluster.
    card_racks = {rack for rack, n in zip(floor["racks"]["id"], floor["racks"]["cards"],
                                          strict=True) if n}
    keys = set(twin(page, "t.keys()"))
    assert card_racks <= keys <= set(floor["racks"]["id"]), (len(card_racks), len(keys))
    # Live: frames arrive, every card reports, racks carry values and colours.
    expect(page.get_by_test_id("status-connection")).to_have_attribute("data-state", "live")
    frames = twin(page, "t.frames")
    wait_twin(page, "t.frames >= arg + 2", frames)
    expect(page.get_by_test_id("status-reporting")).to_have_attribute("data-count", "4096")
    age = float(page.get_by_test_id("status-frame-age").get_attribute("data-age-ms") or "nan")
    assert 0 <= age < 5000, age
    rack = min(card_racks)
    wait_twin(page, "t.valueOf(arg) !== null", rack)
    # A rack's power is its cards' readings plus nameplate overheads: well past 0.
    assert twin(page, "t.valueOf(arg)", rack) > 1000
    colours = twin(page, "[...t.keys()].map(k => t.colourOf(k))")
    assert all(HEX_COLOUR.match(c or "") for c in colours), colours[:5]
    expect(page.get_by_test_id("legend")).not_to_be_empty()

    stats = canvas_stats(page, "[data-testid=scene] canvas", "dashboard-overview.png")
    assert_not_blank(stats, min_colours=256, min_foreground=0.15)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard-overview-page.png"))
    if os.environ.get("TWIN_UPDATE_SCREENSHOT") == "1":  # the README's picture
        shutil.copyfile(ARTIFACTS / "dashboard-overview-page.png",
                        ROOT / "docs" / "screenshot.png")

    # A click on a supernode's ground tile (between its racks) selects the supernode.
    box = page.locator("[data-testid=scene] canvas").bounding_box()
    tile = page.evaluate("""([x0, y0, w, h]) => {
        for (let y = y0 + 8; y < y0 + h; y += 8)
          for (let x = x0 + 8; x < x0 + w; x += 8) {
            const hit = window.twin.pickAt(x, y);
            if (hit && hit.kind === "supernode") return {x, y, id: hit.id};
          }
        return null; }""", [box["x"], box["y"], box["width"], box["height"]])
    assert tile is not None and tile["id"] in data.supernodes, tile
    page.mouse.click(tile["x"], tile["y"])
    expect(page.get_by_test_id("panel-kind")).to_have_text(re.compile("supernode", re.I))
    name = floor["supernodes"]["name"][floor["supernodes"]["id"].index(tile["id"])]
    expect(page.get_by_test_id("panel-title")).to_contain_text(name)

    # Drill down: a supernode's 512 cards at their torus coordinates, live.
    open_view(page, "supernode", data.supernodes[0], "gpu_util")
    assert set(twin(page, "t.keys()")) == {c["id"] for c in data.cards}
    frames = twin(page, "t.frames")
    wait_twin(page, "t.frames > arg && t.keys().every(k => t.valueOf(k) !== null)", frames)
    utils = twin(page, "t.keys().map(k => t.valueOf(k))")
    assert all(0 <= u <= 100 for u in utils)
    stats = canvas_stats(page, "[data-testid=scene] canvas", "dashboard-supernode.png")
    assert_not_blank(stats, min_colours=256, min_foreground=0.15)

    # A rack: its power bar follows the cards' live readings (+ servers and devices).
    geometry = api_from_page(page, f"/api/racks/{rack}/geometry/")
    nameplate = geometry["power_w"]
    open_view(page, "rack", rack, "power_w")
    frames = twin(page, "t.frames")
    wait_twin(page, "t.frames > arg && t.keys().every(k => t.valueOf(k) !== null)", frames)
    shown, readings = page.evaluate(
        "() => [window.twin.rackDraw(), window.twin.keys().map(k => window.twin.valueOf(k))]")
    assert len(readings) == sum(len(s["cards"]) for s in geometry["servers"]) > 0
    assert shown == round(geometry["static_w"] + sum(readings))
    assert shown != nameplate  # live, not the cards' TDP
    assert_no_problems(page)


def test_card_colours_follow_the_telemetry_sent_for_them(dashboard: Page,
                                                         dashboard_data: DashboardData,
                                                         telemetry_probe: TelemetryProbe):
    page, data = dashboard, dashboard_data
    open_view(page, "supernode", data.supernodes[0], "power_w")
    a, b, c = (data.cards[i]["id"] for i in (0, 100, 300))

    telemetry_probe.send({a: {"power_w": 80.0}, b: {"power_w": 1500.0},
                          c: {"power_w": 80.0}})
    wait_twin(page, "t.valueOf(arg[0]) === 80 && t.valueOf(arg[1]) === 1500 "
                    "&& t.valueOf(arg[2]) === 80", [a, b, c])
    low, high, also_low = (twin(page, "t.colourOf(arg)", card) for card in (a, b, c))
    assert HEX_COLOUR.match(low) and HEX_COLOUR.match(high), (low, high)
    assert low == also_low  # the colour is a function of the value…
    assert low != high  # …that tells 80 W from 1,500 W

    frames = twin(page, "t.frames")
    telemetry_probe.send({a: {"power_w": 1500.0}})
    wait_twin(page, "t.valueOf(arg) === 1500", a)
    assert twin(page, "t.frames") > frames
    assert twin(page, "t.colourOf(arg)", a) == high
    assert twin(page, "t.colourOf(arg)", c) == low  # untouched cards keep theirs
    assert twin(page, "t.lastColourUpdateMs") >= 0
    assert_no_problems(page)


def test_clicking_a_card_shows_the_values_the_api_returns(dashboard: Page,
                                                          dashboard_data: DashboardData,
                                                          telemetry_probe: TelemetryProbe):
    assert set(READING) == set(METRIC_KEYS)
    page, data = dashboard, dashboard_data
    open_view(page, "supernode", data.supernodes[0], "power_w")
    card_id, point = topmost_card(page)
    card = next(c for c in data.cards if c["id"] == card_id)
    telemetry_probe.send({card_id: READING})
    wait_twin(page, "t.valueOf(arg[0]) === arg[1]", [card_id, READING["power_w"]])

    page.mouse.click(point["x"], point["y"])
    expect(page.get_by_test_id("panel-kind")).to_have_text("card")
    expect(page.get_by_test_id("panel-title")).to_contain_text(card["serial"])
    expect(page.get_by_test_id("panel-value-power_w")).to_have_attribute(
        "data-value", re.compile(r"^512\.50*$"))
    shown = dict(page.eval_on_selector_all(
        "[data-testid=side-panel] [data-testid^=panel-value-]",
        "els => els.map(e => [e.dataset.testid.slice('panel-value-'.length), "
        "e.getAttribute('data-value')])"))
    api = api_from_page(page, f"/api/telemetry/cards/{card_id}/")
    assert api["serial"] == card["serial"]
    assert api["metrics"] == pytest.approx(READING)  # nothing moved: no agent feeds it
    assert {"power_w", "gpu_util", "gpu_temp_c"} <= set(shown), shown
    for key, value in shown.items():
        assert key in api["metrics"], key
        assert value not in (None, ""), key
        assert float(value) == api["metrics"][key], (key, value, api["metrics"][key])
    # One entry per link of the card (its six torus neighbours and its PCIe switch).
    links = api_from_page(page, f"/api/links/?card={card_id}")
    links = links["results"] if isinstance(links, dict) else links
    expected = len(links)
    assert expected == 7, links
    expect(page.locator("[data-testid=panel-neighbours] li")).to_have_count(expected)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard-side-panel.png"))

    page.get_by_test_id("panel-close").click()
    expect(page.get_by_test_id("panel-title")).to_be_hidden()
    assert_no_problems(page)


def test_a_route_highlights_the_torus_hops(dashboard: Page, dashboard_data: DashboardData):
    page, data = dashboard, dashboard_data
    open_view(page, "supernode", data.supernodes[0], "power_w")
    # Same x, so different servers (a server holds one x-row of eight cards): no
    # shortcut through a PCIe switch, the torus path is the shortest. y wraps 7 → 0.
    src, dst = card_at(data.cards, 3, 7, 1), card_at(data.cards, 3, 0, 3)
    assert src["server"] != dst["server"]
    hops = torus_hops(src, dst, (8, 8, 8))
    assert hops == 3  # 1 (y, the wrap-around way) + 2 (z)

    page.get_by_test_id("route-src").fill(str(src["id"]))
    page.get_by_test_id("route-dst").fill(dst["serial"])
    page.get_by_test_id("route-go").click()
    result = page.get_by_test_id("route-result")
    expect(result).to_have_attribute("data-hops", str(hops))
    expect(result).to_contain_text(f"{hops} hops")
    expect(page.get_by_test_id("route-error")).to_be_hidden()
    wait_twin(page, "t.route !== null && t.highlighted() === arg", hops)
    route = twin(page, "t.route")
    assert route["cards"][0] == src["id"] and route["cards"][-1] == dst["id"]
    assert len(route["cards"]) == hops + 1
    # Each highlighted hop is the scale-up link between consecutive cards.
    pairs = zip(route["cards"], route["cards"][1:], strict=False)
    assert route["links"] == [data.links[frozenset(p)] for p in pairs]
    by_id = {c["id"]: c for c in data.cards}
    steps = [torus_hops(by_id[p], by_id[q], (8, 8, 8))
             for p, q in zip(route["cards"], route["cards"][1:], strict=False)]
    assert steps == [1] * hops
    api = api_from_page(page, f"/api/clusters/{data.cluster}/route/?src={src['id']}"
                              f"&dst={dst['id']}")
    assert api["hops"] == hops and api["cards"] == route["cards"]
    assert_no_problems(page)


def fill_field(page: Page, name: str, value: str) -> None:
    """Set a generated form field, whatever control the form built for it."""
    field = page.get_by_test_id(f"scenario-field-{name}")
    tag = field.evaluate("e => e.tagName")
    if tag == "SELECT":
        field.select_option(value)
    else:
        field.fill(value)


def test_a_scenario_started_from_the_panel_completes_and_draws_its_chart(
        dashboard: Page, dashboard_data: DashboardData):
    page = dashboard
    panel = page.get_by_test_id("scenarios-panel")
    expect(panel).to_be_visible()
    page.get_by_test_id("scenario-kind").select_option("collective")
    fill_field(page, "op", "allreduce")
    # Bad input first: more ranks than the cluster has cards. The server refuses it
    # on the field (the form cannot know the cluster's size) and queues nothing.
    fill_field(page, "ranks", "100000")
    page.get_by_test_id("scenario-submit").click()
    expect(page.get_by_test_id("scenario-errors")).to_contain_text(
        "100,000 ranks but the topology has only 4,096 cards")
    assert api_from_page(page, "/api/scenarios/")["results"] == []
    problems = page.problems  # type: ignore[attr-defined]
    # The only trace in the browser is Chromium's own log of the 400 answer.
    assert problems and all(" 400" in p for p in problems), problems
    problems.clear()

    fill_field(page, "ranks", "512")  # one supernode: the run takes about a second
    page.get_by_test_id("scenario-submit").click()

    expect(page.get_by_test_id("scenario-status")).to_have_text("succeeded", timeout=60_000)
    expect(page.get_by_test_id("scenario-errors")).to_be_hidden()
    run_item = page.locator("[data-testid=scenario-runs] li[data-testid=scenario-run]"
                            "[data-status=succeeded]").first
    expect(run_item).to_be_visible()
    run_id = int(run_item.get_attribute("data-run-id") or "0")
    run = api_from_page(page, f"/api/scenarios/{run_id}/")
    assert run["status"] == "succeeded" and run["kind"] == "collective"
    assert run["params"]["op"] == "allreduce" and run["params"]["ranks"] == 512
    sizes = run["result"]["sizes"]
    rows = page.locator("[data-testid=scenario-result-table] tr:has(td)")
    assert rows.count() >= len(sizes) > 0
    progress = page.get_by_test_id("scenario-progress")
    assert float(progress.get_attribute("value") or 0) == float(
        progress.get_attribute("max") or 1)
    chart = "[data-testid=scenario-chart] canvas"
    expect(page.locator(chart).first).to_be_visible()
    stats = canvas_stats(page, chart, "dashboard-scenario-chart.png")
    assert_not_blank(stats, min_colours=64, min_foreground=0.05)
    assert_no_problems(page)


def test_a_resilience_run_draws_its_panel(dashboard: Page, dashboard_data: DashboardData):
    """A small resilience run on the demo cluster (its own storage tiers): the ETTR curve
    with Young/Daly marks, the failure timeline and the interruptions by cause."""
    page = dashboard
    expect(page.get_by_test_id("scenarios-panel")).to_be_visible()
    page.get_by_test_id("scenario-kind").select_option("resilience")
    fill_field(page, "days", "5")
    page.get_by_test_id("scenario-submit").click()
    expect(page.get_by_test_id("scenario-status")).to_have_text("succeeded", timeout=90_000)
    run_item = page.locator("[data-testid=scenario-runs] li[data-testid=scenario-run]"
                            "[data-status=succeeded]").first
    run = api_from_page(page, f"/api/scenarios/{run_item.get_attribute('data-run-id')}/")
    result = run["result"]
    assert run["kind"] == "resilience" and "demo" in result["storage_source"]["pfs"]
    ettr = page.get_by_test_id("resilience-ettr")
    expect(ettr.locator("canvas").first).to_be_visible()
    assert int(ettr.get_attribute("data-points") or 0) == len(result["ettr_curve"])
    assert {"Young", "Daly"} <= set((ettr.get_attribute("data-marks") or "").split(","))
    stats = canvas_stats(page, "[data-testid=resilience-ettr] canvas", "resilience-ettr.png")
    assert_not_blank(stats, min_colours=16, min_foreground=0.01)
    causes = page.locator("[data-testid=resilience-causes] tbody tr")
    total = result["interruptions"]["total"]
    expect(causes).to_have_count(len(result["interruptions"]["by_cause"]) + 1)
    expect(causes.last).to_contain_text(str(total))
    if total:
        timeline = page.get_by_test_id("resilience-timeline")
        expect(timeline.locator("canvas").first).to_be_visible()
        assert int(timeline.get_attribute("data-events") or 0) == len(result["timeline"])
    assert_no_problems(page)


def test_after_a_server_restart_the_page_reconnects(simulated_agent: str, dashboard: Page,
                                                   server_back_up: RestartableServer):
    page = dashboard
    state = page.get_by_test_id("status-connection")
    expect(state).to_have_attribute("data-state", "live")
    wait_twin(page, "t.frames >= 2")

    down_at = time.monotonic()
    server_back_up.stop()
    expect(state).to_have_attribute("data-state", re.compile("^(reconnecting|offline)$"))
    frames_down = twin(page, "t.frames")
    # A fixed wait on purpose: what is tested is that nothing arrives in it.
    time.sleep(1.5)
    assert twin(page, "t.frames") == frames_down  # nothing can arrive while it is down
    server_back_up.start()
    expect(state).to_have_attribute("data-state", "live", timeout=30_000)
    up_at = time.monotonic()
    wait_twin(page, "t.frames >= arg + 2", frames_down)
    age = float(page.get_by_test_id("status-frame-age").get_attribute("data-age-ms") or "nan")
    assert 0 <= age < 5000, age

    problems = page.problems  # type: ignore[attr-defined]
    outside = [p for p in problems if not down_at <= p.at <= up_at]
    unexpected = [p for p in problems if down_at <= p.at <= up_at
                  and not CONNECTION_ERROR.search(p)]
    assert outside == [] and unexpected == [], (outside, unexpected)


def test_an_alert_opened_by_telemetry_appears_live_and_selects_its_card(
        dashboard: Page, dashboard_data: DashboardData, telemetry_probe: TelemetryProbe):
    page, data = dashboard, dashboard_data
    expect(page.get_by_test_id("alerts-list")).to_be_attached()
    card = data.cards[42]
    item = page.locator(f"[data-testid=alerts-list] li[data-testid=alert-item]"
                        f"[data-card='{card['id']}']")
    expect(item).to_have_count(0)

    # XID 79 (fallen off the bus): the xid rule opens a critical alert at once.
    telemetry_probe.send({card["id"]: {**READING, "xid_errors": 79}})
    expect(item).to_have_count(1)
    alerts = api_from_page(page, f"/api/telemetry/alerts/?cluster={data.cluster}&active=true")
    alerts = alerts["results"] if isinstance(alerts, dict) else alerts
    xid = [a for a in alerts if a["card"] == card["id"] and a["rule"] == "xid"]
    assert len(xid) == 1, alerts
    assert item.get_attribute("data-alert-id") == str(xid[0]["id"])

    item.click()
    expect(page.get_by_test_id("panel-kind")).to_have_text("card")
    expect(page.get_by_test_id("panel-title")).to_contain_text(card["serial"])
    expect(page.locator("[data-testid=panel-alerts] li")).not_to_have_count(0)
    expect(page.get_by_test_id("panel-value-xid_errors")).to_have_attribute("data-value", "79")
    wait_twin(page, "t.keys().includes(arg)", card["id"])  # flew to its supernode
    assert_no_problems(page)


def test_alerts_of_one_rack_are_one_line_with_a_count(
        dashboard: Page, dashboard_data: DashboardData, telemetry_probe: TelemetryProbe):
    """Issue 15: cards of one rack raising the same alert are one line "× n" that
    expands to its alerts (each still flies to its card), not n lines."""
    page, data = dashboard, dashboard_data
    server = data.cards[80]["server"]
    same = [c for c in data.cards if c["server"] == server][:6]
    assert len(same) >= 4
    expect(page.get_by_test_id("alerts-list")).to_be_attached()
    telemetry_probe.send({c["id"]: {**READING, "xid_errors": 79} for c in same})
    group = page.locator("[data-testid=alerts-list] > li[data-testid=alert-group][data-rule=xid]")
    expect(group).to_have_count(1)
    expect(group).to_have_attribute("data-count", str(len(same)))
    expect(group.get_by_test_id("alert-group-count")).to_have_text(f"× {len(same)}")
    single = page.locator("[data-testid=alerts-list] > li[data-testid=alert-item][data-rule=xid]")
    expect(single).to_have_count(0)
    # The server groups them the same way: the list the page loads agrees.
    groups = api_from_page(page, f"/api/telemetry/alerts/groups/?cluster={data.cluster}"
                                 f"&active=true&rule=xid")["results"]
    assert [(g["scope"], g["count"]) for g in groups] == [("rack", len(same))]
    assert group.get_attribute("data-rack") == str(groups[0]["rack"])

    group.get_by_test_id("alert-group-toggle").click()
    members = group.locator("[data-testid=alert-group-members] li[data-testid=alert-item]")
    expect(members).to_have_count(len(same))
    card = same[0]
    group.locator(f"li[data-testid=alert-item][data-card='{card['id']}']").click()
    expect(page.get_by_test_id("panel-kind")).to_have_text("card")
    expect(page.get_by_test_id("panel-title")).to_contain_text(card["serial"])
    # A reload (the page's ↻) shows the same one line.
    page.get_by_role("button", name="Reload alerts").click()
    expect(group).to_have_attribute("data-count", str(len(same)))
    assert_no_problems(page)
