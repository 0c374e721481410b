"""The capacity kind through the command, the API and the worker."""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.scenarios.conftest import SCENARIOS, wait_for
from twin.scenarios.kinds import get_kind
from twin.scenarios.models import ScenarioRun

PARAMS = {
    "site": {"power_kw": 20_000, "cooling_kw": 20_000, "floor_racks": 200, "pue": 1.1},
    "candidates": {"accelerators": ["h100-sxm5-80gb", "gb200-186gb"], "rack_kw": [40, 132],
                   "cards": [1152]},
    "workload": {"model": "llama3-70b", "tokens": 1e12},
    "compare": "h100-sxm5-80gb,gb200-186gb",
}


def run(*args: str, **options: object) -> str:
    out = StringIO()
    call_command("run_scenario", *args, stdout=out, no_progress=True, **options)
    return out.getvalue()


def test_the_command_prices_designs_and_compares_generations(db):
    result = json.loads(run("capacity", params=json.dumps(PARAMS), json=True))
    assert result["candidates"] == 4 and result["fitting"] == 3
    assert result["refused"]["rack"] == 1  # an NVL72 rack in a 40 kW class
    for design in result["best"]:
        assert design["fits"] and design["cost_per_mtok"] > 0
        assert design["energy_j_per_token"] > 0 and design["capex"] > 0
    costs = [d["cost_per_mtok"] for d in result["best"]]
    assert costs == sorted(costs)
    days = [d["days_to_train"] for d in result["pareto"]]
    assert days == sorted(days)
    comparison = result["comparison"]
    old, new = comparison["older_design"], comparison["newer_design"]
    assert comparison["change_percent"] == pytest.approx(
        (new["cost_per_mtok"] / old["cost_per_mtok"] - 1) * 100)
    table = run("capacity", params=json.dumps(PARAMS))
    assert "3 of 4 fit the site" in table and "generations" in table


def test_nothing_fits_is_a_result_that_says_why(db):
    params = {**PARAMS, "site": {"power_kw": 500, "cooling_kw": 500, "floor_racks": 4}}
    inputs = get_kind("capacity").prepare(params, None)
    result = get_kind("capacity").run(inputs, lambda *_: None)
    assert result["fitting"] == 0 and result["pareto"] == []
    assert result["nothing_fits"].startswith("No design fits")
    assert "site's 500 kW" in result["nothing_fits"]
    assert result["comparison"]["change_percent"] is None


def test_the_command_refuses_bad_input_in_one_line(db):
    bad = {**PARAMS, "prices": {"energy_per_kwh": -0.1}}
    with pytest.raises(CommandError, match=r"params\.prices\.energy_per_kwh: a finite number"):
        run("capacity", params=json.dumps(bad))


@pytest.mark.parametrize(("change", "field"), [
    ({"prices": {"energy_per_kwh": -0.1}}, "params.prices.energy_per_kwh"),
    ({"prices": {"energy_per_kwh": "cheap"}}, "params.prices.energy_per_kwh"),
    ({"prices": {"depreciation_years": 0}}, "params.prices.depreciation_years"),
    ({"prices": {"optics": {"aoc": {"price": -1}}}}, "params.prices.optics.aoc.price"),
    ({"site": {"power_kw": -1, "cooling_kw": 1, "floor_racks": 1}}, "params.site.power_kw"),
    ({"site": None}, "params.site"),
    ({"candidates": {"accelerators": ["nope"]}}, "params.candidates.accelerators[0]"),
    ({"candidates": {"accelerators": ["h100-sxm5-80gb"], "switches": ["x"]}},
     "params.candidates.switches[0]"),
    ({"candidates": {"accelerators": ["h100-sxm5-80gb"], "cards": [0]}},
     "params.candidates.cards[0]"),
    ({"workload": {"model": "gpt-9", "tokens": 1e9}}, "params.workload.model"),
    ({"workload": {"model": "llama3-8b", "tokens": -1}}, "params.workload.tokens"),
    ({"compare": "h100-sxm5-80gb,b200-sxm-180gb"}, "params.compare"),
    ({"family": "torus"}, "params.family"),
])
def test_bad_input_is_a_400_naming_the_field(admin_client_api, db, published, change, field):
    before = ScenarioRun.objects.count()
    response = admin_client_api.post(SCENARIOS, {"kind": "capacity",
                                                 "params": {**PARAMS, **change}}, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
    assert ScenarioRun.objects.count() == before and published == []


def test_writes_need_authentication(anon_client, db):
    response = anon_client.post(SCENARIOS, {"kind": "capacity", "params": PARAMS},
                                format="json")
    assert response.status_code in (401, 403)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_runs_end_to_end_in_the_worker(celery_worker, admin_client_api):
    response = admin_client_api.post(SCENARIOS, {"kind": "capacity", "params": PARAMS},
                                     format="json")
    assert response.status_code == 202, response.content
    run_id = response.json()["id"]

    def finished() -> dict | None:
        body = admin_client_api.get(f"{SCENARIOS}{run_id}/").json()
        return body if body["status"] in ("succeeded", "failed", "cancelled") else None

    body = wait_for(finished, timeout=120)
    assert body["status"] == "succeeded", body["error"]
    assert body["worker"].startswith(celery_worker)
    result = body["result"]
    chart = get_kind("capacity").chart
    assert chart is not None and result[chart["series"]]
    assert all(row[chart["x"]] > 0 and row[chart["y"]] > 0 for row in result[chart["series"]])
    assert result["comparison"]["newer"] == "gb200-186gb"


def test_capacity_runs_on_its_documented_defaults(db):
    """No params at all: the default site (10 MW, liquid cooled), the two default
    generations at the default racks and cards, Llama 3 70B on 1.5 T tokens
    (``DEFAULT_*`` in the kind, docs/capacity.md "Defaults")."""
    from twin.scenarios.kinds.capacity import DEFAULT_SITE

    result = json.loads(run("capacity", json=True))
    assert result["site"] == {**DEFAULT_SITE, "power_kw": 10_000.0, "cooling_kw": 10_000.0}
    assert result["workload"]["model"] == "llama3-70b"
    # 2 accelerators × 2 rack classes × 3 card counts
    assert result["candidates"] == 12 and result["fitting"] > 0
    assert all(d["facility_kw"] <= 10_000 for d in result["best"])
    # a site given is validated as given: null is not "use the default"
    inputs = get_kind("capacity").prepare({"workload": {"model": "llama3-8b", "tokens": 1e11}},
                                          None)
    assert inputs["site"]["power_kw"] == 10_000 and inputs["workload"]["model"] == "llama3-8b"
