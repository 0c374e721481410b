"""Property-based API tests from the OpenAPI schema (schemathesis): the schema tells the truth.

The schema served at ``/api/schema/`` is loaded from the app itself and every
operation in it is called with requests generated from it — valid ones and,
in schemathesis' coverage phase, invalid ones — as an admin
(``Authorization: Token …``) on the test database, where :func:`world` has
built the tiny cluster and one row of everything the API lists (agents, scrape
targets, alerts, health, history, builds, scenario runs). Every answer must be
what the schema says: no 5xx, a documented status code, the documented content
type and headers, a body of the documented shape (nullable where it can be
null, within the documented bounds).

Each example runs in a savepoint that is rolled back, so every request sees
the same world: a ``DELETE`` of the cluster is as deterministic as a ``GET``,
and nothing is excluded. Ids — in the path, in filters, in bodies — are drawn half
the time from the rows that exist (the other half from the whole documented
range), so the successful answers are checked, not only the 404s and 400s.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, transaction
from django.db.models import Model
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token
from schemathesis.specs.openapi.checks import positive_data_acceptance

from tests.telemetry.conftest import flush_namespace

schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", WSGIHandler())

#: Every check schemathesis has (not only server errors and undocumented answers): among
#: them, a request the schema forbids must be refused (negative data) and a request it
#: allows must be accepted (positive data). "Accepted" admits the answers that depend on
#: what is stored, not on the request's shape: 404, 409 (a name taken, an id that names
#: no row) and, for ours, 412 (an ``If-Match`` that is not the row's current ETag: a
#: generated one never is).
#: A request the schema forbids may likewise meet the 412 first (its ``If-Match`` is
#: checked before its body): refused all the same, nothing written.
schema.config.checks.positive_data_acceptance.expected_statuses = [
    *schema.config.checks.positive_data_acceptance.expected_statuses, "412"]
schema.config.checks.negative_data_rejection.expected_statuses = [
    *schema.config.checks.negative_data_rejection.expected_statuses, "412"]


#: Operations whose bodies obey a rule across fields that JSON Schema (OpenAPI 3.0)
#: cannot state, so a schema-valid body may still be refused with a 400 on the field:
#: for these alone ``positive_data_acceptance`` is not run (every other check is, and
#: every other operation runs it). Each names its rule; docs/api.md lists them.
CROSS_FIELD_RULES = {
    "POST /api/supernodes/": "dim_x × dim_y × dim_z = card_count; a 2D torus has dim_z 1",
    "PUT /api/supernodes/{id}/": "dim_x × dim_y × dim_z = card_count",
    "PATCH /api/supernodes/{id}/": "dim_x × dim_y × dim_z = card_count",
    "POST /api/cards/": "index, slot and coordinates within the sizes of the supernode and "
                        "server it names",
    "PUT /api/cards/{id}/": "index, slot and coordinates within the supernode's and "
                            "server's sizes",
    "PATCH /api/cards/{id}/": "index, slot and coordinates within the supernode's and "
                              "server's sizes",
    "POST /api/links/": "each end is exactly one of a card or a device, of compatible kinds",
    "PUT /api/links/{id}/": "each end is exactly one of a card or a device",
    "PATCH /api/links/{id}/": "each end is exactly one of a card or a device",
    "POST /api/devices/": "the figures a device kind needs (a file-system appliance's "
                          "capacity and throughput), and none it does not",
    "PUT /api/devices/{id}/": "the figures a device kind needs, and none it does not",
    "PATCH /api/devices/{id}/": "the figures a device kind needs, and none it does not",
    "POST /api/jobs/": "a fraction of a card (share_milli < 1000) only for a 1-card job",
    "POST /api/jobs/traces/": "the nodes file goes with one trace format; the file parses",
    "POST /api/scenarios/": "params are the kind's (GET /api/scenarios/kinds/), checked "
                            "against the cluster or family",
    "POST /api/builds/": "the preset's plan must fit the racks' power budget",
    "POST /api/tokens/": "expires is in the future (a moment relative to the request)",
    "POST /api/accelerators/": "source: Django's URL validator (host ≤ 253 characters, "
                               "labels ≤ 63) is stricter than format: uri",
    "PUT /api/accelerators/{id}/": "source: Django's URL validator vs format: uri",
    "PATCH /api/accelerators/{id}/": "source: Django's URL validator vs format: uri",
    "POST /api/telemetry/targets/": "timeout_s ≤ interval_s",
    "PUT /api/telemetry/targets/{id}/": "timeout_s ≤ interval_s",
    "PATCH /api/telemetry/targets/{id}/": "timeout_s ≤ interval_s",
    "POST /api/facility/sites/": "the wet bulb is not above the dry bulb; the weather series "
                                 "is (time, dry, wet) points in time order with wet ≤ dry",
    "PUT /api/facility/sites/{id}/": "wet bulb ≤ dry bulb; the weather series' points",
    "PATCH /api/facility/sites/{id}/": "wet bulb ≤ dry bulb; the weather series' points",
    "POST /api/facility/power/": "the parent is a kind that may feed this one, in the same "
                                 "site, with no cycle; units fit the redundancy; every rating "
                                 "above holds the load below",
    "PUT /api/facility/power/{id}/": "the parent's kind and site, no cycle; every rating kept",
    "PATCH /api/facility/power/{id}/": "the parent's kind and site, no cycle; every rating kept",
    "POST /api/facility/cooling/": "the parent is a kind that may take this one's heat, in the "
                                   "same site, with no cycle; the flows a kind needs; every "
                                   "capacity above holds the heat below",
    "PUT /api/facility/cooling/{id}/": "the parent's kind and site, no cycle; the flows a kind "
                                       "needs; every capacity kept",
    "PATCH /api/facility/cooling/{id}/": "the parent's kind and site, no cycle; the flows a "
                                         "kind needs; every capacity kept",
    "POST /api/facility/racks/": "the rack's site; a liquid rack hangs from a CDU or TCS loop, "
                                 "an air rack from a CRAH; every rating kept",
    "PUT /api/facility/racks/{id}/": "the elements' kinds and site for the rack's class; "
                                     "every rating kept",
    "PATCH /api/facility/racks/{id}/": "the elements' kinds and site for the rack's class; "
                                       "every rating kept",
    "POST /api/facility/redfish-sources/": "a username goes with password_env; base_url: "
                                           "Django's URL validator vs format: uri",
    "PUT /api/facility/redfish-sources/{id}/": "a username goes with password_env; base_url",
    "PATCH /api/facility/redfish-sources/{id}/": "a username goes with password_env; "
                                                 "base_url",
    "POST /api/facility/redfish-bindings/": "exactly one element, a CDU or a feed/PDU/busway/"
                                            "power shelf of the source's site; uri under "
                                            "/redfish/v1/",
    "PUT /api/facility/redfish-bindings/{id}/": "exactly one readable element of the "
                                                "source's site; uri under /redfish/v1/",
    "PATCH /api/facility/redfish-bindings/{id}/": "exactly one readable element of the "
                                                  "source's site; uri under /redfish/v1/",
}


def _models() -> dict[str, type[Model]]:
    """The model a path's first segment (after /api/ or /api/telemetry/) names."""
    from twin.hardware.models import (
        AcceleratorType,
        Card,
        Cluster,
        ClusterBuild,
        Link,
        NetworkDevice,
        Rack,
        Server,
        SuperNode,
    )
    from twin.scenarios.models import ScenarioRun
    from twin.telemetry.models import Alert, ScrapeTarget, TelemetryAgent

    return {"accelerators": AcceleratorType, "builds": ClusterBuild, "cards": Card,
            "clusters": Cluster, "devices": NetworkDevice, "links": Link, "racks": Rack,
            "scenarios": ScenarioRun, "servers": Server, "supernodes": SuperNode,
            "agents": TelemetryAgent, "alerts": Alert, "targets": ScrapeTarget}


def _model_of(path: str) -> type[Model] | None:
    parts = path.removeprefix("/api/").removeprefix("telemetry/").split("/")
    return _models().get(parts[0])


#: Query and body fields that hold an id → the path segment of what they name.
REFERENCES = {
    "cluster": "clusters", "supernode": "supernodes", "rack": "racks", "server": "servers",
    "card": "cards", "device": "devices", "accelerator": "accelerators", "agent": "agents",
    "a_card": "cards", "b_card": "cards", "a_device": "devices", "b_device": "devices",
    "src": "cards", "dst": "cards",
}


def _ids(segment: str) -> list[int]:
    model = _models()[segment]
    return list(model.objects.order_by("pk").values_list("pk", flat=True)[:50])


def _is_valid_id(value: Any) -> bool:
    """An id the schema allows (1 … 2**63 - 1), as generated (an int, or its text)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return False
    text = str(value)
    return text.isascii() and text.isdigit() and 1 <= int(text) <= 2**63 - 1


def _with_existing_ids(values: Any, names: list[str], as_text: bool = False) -> Any:
    """A strategy: ``values`` as generated, or with the id fields among ``names`` set
    to ids of rows that exist (each one independently). Only a value that is a valid
    id is replaced: a negative case's deliberately invalid one (0, a string) stays
    invalid, or the request would be a valid one the check expects refused."""
    if not isinstance(values, dict):
        return st.just(values)
    present = [name for name in names if name in values and _is_valid_id(values[name])
               and _ids(REFERENCES[name])]
    if not present:
        return st.just(values)
    choices = {name: st.one_of(st.just(values[name]), st.sampled_from(
        [str(pk) if as_text else pk for pk in _ids(REFERENCES[name])])) for name in present}
    return st.fixed_dictionaries(choices).map(lambda chosen: {**values, **chosen})


@schema.hook("flatmap_path_parameters")
def existing_path_ids(context: Any, path_parameters: dict[str, Any]) -> Any:
    """Half the time, the path's id is one of a row that exists."""
    model = _model_of(context.operation.path) if context.operation else None
    if model is None or not path_parameters or not all(
            _is_valid_id(value) for value in path_parameters.values()):
        return st.just(path_parameters)
    ids = list(model.objects.order_by("pk").values_list("pk", flat=True)[:50])
    if not ids:
        return st.just(path_parameters)
    name = next(iter(path_parameters))
    return st.one_of(st.just(path_parameters),
                     st.sampled_from(ids).map(lambda pk: {**path_parameters, name: pk}))


@schema.hook("flatmap_query")
def existing_query_ids(context: Any, query: dict[str, Any] | None) -> Any:
    """Filters (and a route's ends) name rows that exist half the time."""
    return _with_existing_ids(query, list(REFERENCES), as_text=True)


@schema.hook("flatmap_body")
def existing_body_ids(context: Any, body: Any) -> Any:
    """A body's references name rows that exist half the time, so writes succeed too."""
    return _with_existing_ids(body, list(REFERENCES))


@pytest.fixture(autouse=True)
def connection_kept_open() -> Iterator[None]:
    """The requests run in the test's transaction: Django must not close the database
    connection when one starts or ends (its own test client holds it open too)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture(autouse=True)
def telemetry_namespace() -> Iterator[None]:
    """This session's own Redis key prefix (tests/telemetry/conftest.py), emptied
    around each operation."""
    flush_namespace()
    yield
    flush_namespace()


@pytest.fixture
def world(tiny_cluster: dict[str, Any], admin_user: Any, settings: Any) -> dict[str, Any]:
    """The tiny cluster and one row of everything else the API lists, with the
    nullable fields null where they can be (an alert nobody acknowledged, a build
    and a run with no creator)."""
    from django.utils import timezone

    from twin.hardware.models import ClusterBuild
    from twin.scenarios.kinds import get_kind
    from twin.scenarios.kinds.base import jsonable
    from twin.scenarios.models import ScenarioRun
    from twin.scenarios.runner import params_hash
    from twin.telemetry.metrics import METRIC_KEYS
    from twin.telemetry.models import (
        Alert,
        CardHealth,
        ScrapeTarget,
        TelemetryAgent,
        TelemetryMinute,
    )

    settings.TELEMETRY_AUTO_DRAIN = False
    cluster, cards, rack = tiny_cluster["cluster"], tiny_cluster["cards"], tiny_cluster["rack"]
    now = timezone.now()
    agent, _ = TelemetryAgent.issue(cluster, "agent-0")
    ScrapeTarget.objects.create(cluster=cluster, agent=agent,
                                endpoint="http://node0:9400/metrics")
    Alert.objects.create(cluster=cluster, rule="gpu_temp", severity="warning", level="card",
                         subject=f"card:{cards[0].pk}", card=cards[0], value=88.0,
                         threshold=85.0, message="hot", started=now)
    Alert.objects.create(cluster=cluster, rule="rack_power", severity="critical", level="rack",
                         subject=f"rack:{rack.pk}", rack=rack, message="over budget",
                         started=now - dt.timedelta(hours=1), ended=now,
                         acknowledged_by=admin_user, acknowledged_at=now)
    CardHealth.objects.create(card=cards[0], cluster=cluster, status="warning",
                              reasons="gpu_temp", since=now)
    values = np.full(len(METRIC_KEYS), np.nan, dtype=np.float32)
    values[0] = 1.5
    TelemetryMinute.objects.create(cluster=cluster, level="rack", object_id=rack.pk,
                                   minute=now.replace(second=0, microsecond=0), samples=60,
                                   mean=values.tobytes(), max=values.tobytes(), draw_w=None)
    ClusterBuild.objects.create(preset="seed-512", name="queued-build", params={})
    kind, params = get_kind("topology"), {"family": "torus", "dims": [2, 2, 2]}
    inputs = jsonable(kind.prepare(params, None))
    result = kind.run(inputs, lambda fraction, message: None)
    common = {"kind": "topology", "params": params, "inputs": inputs,
              "params_hash": params_hash("topology", inputs)}
    done = ScenarioRun.objects.create(**common, status="succeeded", progress=1.0,
                                      result=result, started=now, finished=now)
    ScenarioRun.objects.create(**common, status="succeeded", progress=1.0, result=result,
                               cached_from=done, started=now, finished=now)
    ScenarioRun.objects.create(**common, status="queued", created_by=admin_user)
    from twin.jobs.models import Remediation

    Remediation.objects.create(cluster=cluster, card=cards[1], cause="xid79", episode=1,
                               proposal={"jobs": [], "summary": "no job on the card"},
                               detected_at=now)
    from twin.facility.models import CoolingElement, PowerElement, RackFacility, Site

    # A plant with its nullable fields null (no contract, no setpoint, no air CRAH).
    site = Site.objects.create(cluster=cluster, name="tiny-site")
    feed = PowerElement.objects.create(site=site, key="feed-0", kind="feed", rating_kw=100.0)
    pdu = PowerElement.objects.create(site=site, key="pdu-0", kind="pdu", rating_kw=50.0,
                                      parent=PowerElement.objects.create(
                                          site=site, key="ups-0", kind="ups", parent=feed,
                                          rating_kw=80.0, efficiency=[[0.5, 0.96], [1, 0.97]]))
    tower = CoolingElement.objects.create(site=site, key="ct-0", kind="cooling_tower",
                                          capacity_kw=100.0)
    loop = CoolingElement.objects.create(site=site, key="fwl-0", kind="facility_loop",
                                         parent=tower, capacity_kw=100.0, design_flow_kg_s=2.0)
    cdu = CoolingElement.objects.create(site=site, key="cdu-0", kind="cdu", parent=loop,
                                        capacity_kw=50.0, design_flow_kg_s=1.2)
    RackFacility.objects.create(rack=rack, site=site, power_element=pdu, cooling_element=cdu,
                                liquid_fraction=0.8)
    from twin.facility.models import RedfishSource

    source = RedfishSource.objects.create(site=site, name="cdu-bmc",
                                          base_url="http://cdu.example:8000")
    source.bindings.create(cooling_element=cdu, uri="/redfish/v1/ThermalEquipment/CDUs/1")
    return tiny_cluster


@pytest.fixture
def token(admin_user: Any) -> str:
    return Token.objects.create(user=admin_user).key


@schema.parametrize()
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck),
          derandomize=True)
def test_api(case: Any, token: str, world: dict[str, Any]) -> None:
    """Every operation, as an admin: each answer is what the schema documents."""
    excluded = [positive_data_acceptance] if case.operation.label in CROSS_FIELD_RULES else []
    with transaction.atomic():
        case.call_and_validate(headers={"Authorization": f"Token {token}"},
                               excluded_checks=excluded)
        transaction.set_rollback(True)



# --- what the property test found, one regression test each ---------------------------


def _schema() -> dict[str, Any]:
    return schema.raw_schema


@pytest.mark.parametrize(("component", "field"), [
    ("Alert", "acknowledged_by"), ("ClusterBuild", "created_by"),
    ("ScenarioRun", "created_by"), ("ScenarioRun", "duration_s"),
    ("ScenarioRunList", "created_by"), ("ScenarioRunList", "duration_s"),
])
def test_fields_that_can_be_null_are_nullable(component: str, field: str) -> None:
    assert _schema()["components"]["schemas"][component]["properties"][field]["nullable"]


def test_every_operation_documents_its_errors() -> None:
    """401, 403 and 503 everywhere; 400 where there is input; 404 where the path names
    an object; 409/412 and If-Match on a model viewset's writes; bodies in one shape."""
    components = _schema()["components"]
    assert components["schemas"]["Error"]["required"] == ["detail"]
    assert "additionalProperties" in components["schemas"]["ValidationError"]
    for path, operations in _schema()["paths"].items():
        for method, operation in operations.items():
            codes = set(operation["responses"])
            where = f"{method.upper()} {path}"
            assert {"401", "403", "503"} <= codes, where
            if operation.get("parameters") or "requestBody" in operation:
                assert "400" in codes, where
            if "{" in path:
                assert "404" in codes, where
            if "requestBody" in operation:
                assert {"413", "415"} <= codes, where
    clusters = _schema()["paths"]["/api/clusters/{id}/"]
    for method in ("put", "patch", "delete"):
        assert {"409", "412"} <= set(clusters[method]["responses"])
        assert "If-Match" in {p["name"] for p in clusters[method]["parameters"]}
    assert "ETag" in clusters["get"]["responses"]["200"]["headers"]
    assert "409" in _schema()["paths"]["/api/scenarios/{id}/cancel/"]["post"]["responses"]


def test_constraints_and_portable_ranges_are_in_the_schema() -> None:
    schemas = _schema()["components"]["schemas"]
    supernode, rack = schemas["SuperNodeRequest"]["properties"], \
        schemas["RackRequest"]["properties"]
    assert supernode["link_gbps"]["minimum"] == 0 and supernode["link_gbps"]["exclusiveMinimum"]
    assert supernode["card_count"]["minimum"] == 1 and supernode["dim_x"]["minimum"] == 1
    assert rack["pue"]["minimum"] == 1.0 and rack["pue"]["maximum"] <= 1e15
    # The column's range on every database (SQLite's own would be 2**63 - 1) …
    assert supernode["index"]["maximum"] == 2**31 - 1
    # … unless the figure's physical bound is tighter (a rack budget of at most 1 MW).
    assert rack["power_budget_w"] == {**rack["power_budget_w"], "minimum": 1,
                                      "maximum": 1_000_000}
    assert schemas["ScrapeTargetRequest"]["properties"]["timeout_s"]["exclusiveMinimum"]


def test_id_filters_take_any_id_and_declare_their_range(admin_client_api: Any,
                                                        tiny_cluster: dict[str, Any]) -> None:
    """``?cluster=`` is an id from 1: one that names nothing is an empty list (not a 400
    "Select a valid choice"), 0 and out-of-range values are a 400 on the field."""
    parameters = {p["name"]: p["schema"] for p in
                  _schema()["paths"]["/api/racks/"]["get"]["parameters"]}
    assert parameters["cluster"] == {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}
    assert parameters["page"]["minimum"] == 1
    for url in ("/api/racks/", "/api/cards/", "/api/servers/", "/api/telemetry/alerts/"):
        response = admin_client_api.get(url, {"cluster": 987654321})
        assert response.status_code == 200, (url, response.content)
        assert response.json()["results"] == []
        for bad in ("0", "-1", str(2**63), "1.5", "x"):
            response = admin_client_api.get(url, {"cluster": bad})
            assert response.status_code == 400, (url, bad, response.content)
            assert "cluster" in response.json()
    mine = admin_client_api.get("/api/racks/", {"cluster": tiny_cluster["cluster"].pk})
    assert len(mine.json()["results"]) == 2


def test_unmatched_api_urls_are_json_404s(admin_client_api: Any, db: Any) -> None:
    for url in ("/api/racks/1.5/", "/api/telemetry/cards/abc/", "/api/no-such-thing/"):
        response = admin_client_api.get(url)
        assert response.status_code == 404
        assert response["Content-Type"] == "application/json"
        assert "detail" in response.json()


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete", "trace"])
def test_methods_presets_lack_are_405(admin_client_api: Any, db: Any, method: str) -> None:
    response = admin_client_api.generic(method.upper(), "/api/presets/")
    assert response.status_code == 405


def test_a_float_that_would_overflow_is_refused(admin_client_api: Any,
                                                tiny_cluster: dict[str, Any]) -> None:
    """PUE 1.5e308 made the rack's facility draw infinite: every read of it was a 500."""
    rack = tiny_cluster["rack"]
    response = admin_client_api.patch(f"/api/racks/{rack.pk}/", {"pue": 1.5e308},
                                      format="json")
    assert response.status_code == 400 and "pue" in response.json()
    assert admin_client_api.get(f"/api/racks/{rack.pk}/").status_code == 200


@pytest.mark.parametrize(("src", "what", "status"), [
    ("²", "a digit int() cannot read", 404),
    ("TINY\x000", "a NUL, which PostgreSQL text refuses (the schema's pattern says so)", 400),
    (str(2**70), "an id past any column", 404)])
def test_route_ends_that_name_no_card_are_404(admin_client_api: Any,
                                              tiny_cluster: dict[str, Any], src: str,
                                              what: str, status: int) -> None:
    response = admin_client_api.get(
        f"/api/clusters/{tiny_cluster['cluster'].pk}/route/",
        {"src": src, "dst": tiny_cluster["cards"][1].pk})
    # Well formed, names no card (was a 400, a 500 before that): 404 on the field.
    assert response.status_code == status, (what, response.content)
    assert "src" in response.json()


def test_date_time_filters_take_any_rfc3339_offset(admin_client_api: Any, db: Any) -> None:
    """PostgreSQL refuses an offset past ±15:59 in a query; RFC 3339 allows ±23:59."""
    for url, name in (("/api/telemetry/history/", "since"),
                      ("/api/telemetry/alerts/", "started_after"),
                      ("/api/scenarios/", "created_after")):
        response = admin_client_api.get(url, {name: "2024-02-10T20:40:25+22:13"})
        assert response.status_code == 200, (url, response.content)
        # Schema-valid, just before Python's first moment: clamped, not refused (it was 400).
        response = admin_client_api.get(url, {name: "0001-01-01T00:00:00+05:00"})
        assert response.status_code == 200, (url, response.content)
        response = admin_client_api.get(url, {name: "2024-02-10"})  # not a date-time
        assert response.status_code == 400 and name in response.json(), (url, response.content)
