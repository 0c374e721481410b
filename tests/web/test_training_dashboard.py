"""The training kinds in the dashboard, in a real browser against the whole product running.

A search started from the scenarios panel on the demo cluster's own hardware
(seed-512 supernodes: H100s in an 8×8×8 torus, two 400G RoCE NICs per server)
shows its Pareto scatter and its best configurations; "open this
configuration" fills the training form with that execution and runs it, and
the step's breakdown and memory bars appear. Bad input is refused on its field
first, with nothing queued.
"""
from __future__ import annotations

import json

import pytest
from playwright.sync_api import Page, expect

from tests.web.conftest import DashboardData
from tests.web.test_dashboard import (  # noqa: F401 - the dashboard fixture
    api_from_page,
    assert_no_problems,
    dashboard,
    fill_field,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LIMITS = {"tp": [1, 2, 4], "pp": [2], "zero": [0, 1], "micro_batch": [1, 2]}
"""Two pipeline stages, so the opened configuration has per-stage clocks to show."""


def test_a_search_shows_its_best_configurations_and_opens_one(
        dashboard: Page, dashboard_data: DashboardData):  # noqa: F811 - the imported fixture
    page = dashboard
    expect(page.get_by_test_id("scenarios-panel")).to_be_visible()
    page.get_by_test_id("scenario-kind").select_option("training_search")
    fill_field(page, "model", "llama3-8b")
    fill_field(page, "global_batch", "16")
    fill_field(page, "top", "3")
    fill_field(page, "limits", json.dumps(LIMITS))
    # More cards than the cluster holds: refused on the field, nothing queued.
    fill_field(page, "cards", "100000")
    page.get_by_test_id("scenario-submit").click()
    expect(page.get_by_test_id("scenario-field-error-cards")).to_contain_text(
        "100,000 cards but cluster 'demo' has only 4,096")
    assert api_from_page(page, "/api/scenarios/")["results"] == []
    problems = page.problems  # type: ignore[attr-defined]
    assert problems and all(" 400" in p for p in problems), problems
    problems.clear()

    fill_field(page, "cards", "8")
    page.get_by_test_id("scenario-submit").click()
    expect(page.get_by_test_id("scenario-status")).to_have_text("succeeded", timeout=60_000)
    detail = page.get_by_test_id("scenario-run-detail")
    search_id = int(detail.get_attribute("data-run-id") or "0")
    search = api_from_page(page, f"/api/scenarios/{search_id}/")
    assert search["kind"] == "training_search" and search["status"] == "succeeded"
    best = search["result"]["best"]
    assert 1 <= len(best) <= 3
    rows = page.get_by_test_id("training-best-row")
    expect(rows).to_have_count(len(best))
    expect(page.locator("[data-testid=training-pareto] canvas").first).to_be_visible()
    expect(page.get_by_test_id("training-breakdown")).to_be_visible()
    expect(page.get_by_test_id("training-rejected")).to_be_visible()

    # "open this configuration": the best one, as a training run
    rows.first.get_by_test_id("training-open").click()
    expect(page.get_by_test_id("scenario-kind")).to_have_value("training")
    expect(detail).not_to_have_attribute("data-run-id", str(search_id))
    expect(page.get_by_test_id("scenario-status")).to_have_text("succeeded", timeout=60_000)
    step_id = int(detail.get_attribute("data-run-id") or "0")
    step = api_from_page(page, f"/api/scenarios/{step_id}/")
    assert step["kind"] == "training" and step["status"] == "succeeded"
    chosen = best[0]["execution"]
    for key in ("tp", "pp", "dp", "micro_batch", "zero", "recompute", "precision"):
        assert step["result"]["execution"][key] == chosen[key], key
    assert step["result"]["step_time_s"] == pytest.approx(best[0]["step_time_s"], rel=1e-6)
    expect(page.get_by_test_id("scenario-field-tp")).to_have_value(str(chosen["tp"]))
    expect(page.get_by_test_id("training-breakdown")).to_be_visible()
    expect(page.get_by_test_id("training-memory")).to_be_visible()
    # the step by class of op, and the same layout in BF16 and FP8 (the H100s have both)
    ops_bar = page.get_by_test_id("training-ops")
    expect(ops_bar).to_be_visible()
    expect(ops_bar.locator("[data-part=gemm]")).to_have_count(1)
    assert float(ops_bar.get_attribute("data-total") or "0") == pytest.approx(
        step["result"]["step_time_s"], rel=1e-6)
    assert set(step["result"]["precisions"]) == {"bf16", "fp8"}
    expect(page.get_by_test_id("training-precisions")).to_contain_text("× BF16")
    expect(page.get_by_test_id("training-precision-fp8")).to_be_visible()
    # per-stage clocks (DVFS): the energy each plan saves, one bar per stage
    dvfs = step["result"]["dvfs"]
    assert dvfs["stages"] == 2
    saved = 100 * dvfs["one_percent"]["card_energy_saved_fraction"]
    expect(page.get_by_test_id("training-dvfs-one_percent-saved")).to_contain_text(
        f"cards' energy −{saved:.3g} %")
    expect(page.get_by_test_id("training-dvfs-no_slowdown").locator(".tw-clock")).to_have_count(2)
    assert_no_problems(page)
