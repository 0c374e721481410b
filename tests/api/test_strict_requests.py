"""The API is exactly as strict as its schema (twin/core/api/strict.py, exceptions.py).

Each test here failed before: the request was answered 200/201 although the schema
forbids it (an unknown parameter, a value out of range or of the wrong format or
JSON type), or answered 400 although the request was well formed and only
conflicted with what is stored (409).
"""
from __future__ import annotations

from typing import Any

import pytest

from twin.core.api.strict import operations
from twin.core.rfc3339 import parse_rfc3339


def _errors(response: Any, status: int = 400) -> dict[str, Any]:
    assert response.status_code == status, response.content
    return response.json()


@pytest.mark.parametrize("url", ["/api/clusters/", "/api/racks/", "/api/cards/",
                                 "/api/links/", "/api/scenarios/", "/api/telemetry/alerts/",
                                 "/api/jobs/allocations/"])
def test_a_limit_above_the_documented_maximum_is_400_not_capped(admin_client_api: Any,
                                                                tiny_cluster: Any,
                                                                url: str) -> None:
    assert "limit" in _errors(admin_client_api.get(url, {"limit": 1001}))
    for bad in ("0", "", "ten", "5.5"):
        assert "limit" in _errors(admin_client_api.get(url, {"limit": bad}))
    assert admin_client_api.get(url, {"limit": 1000}).status_code == 200


def test_an_unknown_query_parameter_is_400_naming_it(admin_client_api: Any,
                                                     tiny_cluster: Any) -> None:
    errors = _errors(admin_client_api.get("/api/racks/", {"clustr": 1}))
    assert list(errors) == ["clustr"]
    assert "cluster" in errors["clustr"][0]  # the message lists what the endpoint takes
    assert "bogus" in _errors(admin_client_api.get(
        f"/api/clusters/{tiny_cluster['cluster'].pk}/", {"bogus": "1"}))
    # DRF's renderer switch is always allowed.
    assert admin_client_api.get("/api/racks/", {"format": "json"}).status_code == 200


@pytest.mark.parametrize(("url", "name", "bad"), [
    ("/api/cards/", "uuid", ""), ("/api/cards/", "uuid", "not-a-uuid"),
    ("/api/racks/", "over_budget", "maybe"), ("/api/racks/", "over_budget", ""),
    ("/api/racks/", "over_budget", "1"), ("/api/racks/", "cooling", "steam"),
    ("/api/telemetry/alerts/", "started_before", ""),
    ("/api/telemetry/alerts/", "active", "yes"),
    ("/api/telemetry/history/", "since", "2024-01-01"),
    ("/api/telemetry/history/", "since", "2024-01-01 00:00:00"),
    ("/api/telemetry/history/", "until", "2024-01-01T00:00:00"),  # no offset
    ("/api/scenarios/", "created_after", "yesterday"),
    ("/api/cards/", "status", "melted"), ("/api/racks/", "row", "1.0"),
])
def test_an_invalid_query_value_is_400_naming_the_parameter(admin_client_api: Any,
                                                            tiny_cluster: Any, url: str,
                                                            name: str, bad: str) -> None:
    """Each of these was ignored (the list came back unfiltered) or coerced."""
    assert list(_errors(admin_client_api.get(url, {name: bad}))) == [name]


def test_anonymous_requests_get_their_401_first_and_public_reads_are_checked(
        anon_client: Any, db: Any, settings: Any) -> None:
    assert anon_client.get("/api/racks/", {"limit": 1001}).status_code == 401
    settings.TWIN_PUBLIC_READ = True
    assert "limit" in _errors(anon_client.get("/api/racks/", {"limit": 1001}))
    assert anon_client.get("/api/racks/", {"limit": 10}).status_code == 200


def test_a_single_valued_parameter_given_twice_is_400(admin_client_api: Any,
                                                      tiny_cluster: Any) -> None:
    response = admin_client_api.get("/api/racks/?over_budget=true&over_budget=false")
    assert list(_errors(response)) == ["over_budget"]
    # An array parameter repeats.
    assert admin_client_api.get("/api/cards/?status=ok&status=failed").status_code == 200


@pytest.mark.parametrize("value", ["2024-01-01T00:00:00Z", "2024-01-01t00:00:00z",
                                   "2024-01-01T00:00:00.5+23:59",
                                   "0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00"])
def test_any_rfc3339_date_time_is_taken(admin_client_api: Any, db: Any, value: str) -> None:
    """Lower-case separators, offsets to ±23:59, and moments just outside Python's
    range (clamped: they compare the same with every stored time) are all RFC 3339."""
    assert admin_client_api.get("/api/telemetry/history/", {"since": value}).status_code == 200
    assert parse_rfc3339(value) is not None


def test_rfc3339_parsing() -> None:
    import datetime as dt

    assert parse_rfc3339("2024-02-10T20:40:25+22:13") == dt.datetime(
        2024, 2, 9, 22, 27, 25, tzinfo=dt.UTC)
    for bad in ("2024-01-01", "2024-13-01T00:00:00Z", "2024-01-01T00:00:00+24:00",
                "2024-01-01 00:00:00Z", "2024-01-01T00:00Z", "2024-01-01T00:00:00Z\n"):
        assert parse_rfc3339(bad) is None, bad


@pytest.mark.parametrize(("body", "field"), [
    ({"name": "new", "preset": 0}, "preset"),  # was saved as "0"
    ({"name": 5}, "name"),
    ({"name": "new", "description": None}, "description"),
    ({"name": "new", "description": ["a"]}, "description"),
])
def test_a_body_value_of_the_wrong_json_type_is_400(admin_client_api: Any, db: Any,
                                                    body: dict[str, Any], field: str) -> None:
    from twin.hardware.models import Cluster

    errors = _errors(admin_client_api.post("/api/clusters/", body, format="json"))
    assert list(errors) == [field]
    assert not Cluster.objects.filter(name="new").exists()


def test_a_body_that_is_not_an_object_is_400(admin_client_api: Any, db: Any) -> None:
    response = admin_client_api.generic("POST", "/api/clusters/", "[1, 2]",
                                        content_type="application/json")
    assert "non_field_errors" in _errors(response)


def test_a_rack_at_a_taken_position_is_409_per_field(admin_client_api: Any,
                                                     tiny_cluster: Any) -> None:
    """A conflict with the stored data, not bad input: 409 with the fields at fault."""
    rack = tiny_cluster["rack"]
    body = {"cluster": tiny_cluster["cluster"].pk, "supernode": rack.supernode_id,
            "name": "r-new", "row": rack.row, "slot": rack.slot}
    errors = _errors(admin_client_api.post("/api/racks/", body, format="json"), 409)
    assert errors["detail"] and errors["non_field_errors"]
    body = {**body, "slot": 77, "name": rack.name}
    assert "name" in _errors(admin_client_api.post("/api/racks/", body, format="json"), 409) \
        or "non_field_errors" in _errors(admin_client_api.post("/api/racks/", body,
                                                               format="json"), 409)


def test_a_reference_to_no_row_is_409_and_bad_input_with_it_stays_400(
        admin_client_api: Any, tiny_cluster: Any) -> None:
    body = {"cluster": 987654321, "name": "agent-x"}
    errors = _errors(admin_client_api.post("/api/telemetry/agents/", body, format="json"), 409)
    assert "cluster" in errors
    body = {"cluster": 987654321, "name": "agent-x", "is_active": "yes"}
    assert "is_active" in _errors(admin_client_api.post("/api/telemetry/agents/", body,
                                                        format="json"))


def test_conflicts_are_documented_on_every_operation_with_a_body(db: Any) -> None:
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            if "requestBody" in op:
                assert "409" in op["responses"], f"{method} {path}"
    assert "Conflict" in schema["components"]["responses"]


def test_scenario_kinds_are_an_enum_and_params_an_object(admin_client_api: Any,
                                                        db: Any) -> None:
    from drf_spectacular.generators import SchemaGenerator

    from twin.scenarios.kinds import REGISTRY

    schemas = SchemaGenerator().get_schema(request=None, public=True)["components"]["schemas"]
    request = schemas["ScenarioRequestRequest"]["properties"]
    enum = schemas[request["kind"]["allOf"][0]["$ref"].rsplit("/", 1)[1]]["enum"]
    assert sorted(enum) == sorted(REGISTRY)
    assert request["params"]["type"] == "object" and not request["params"].get("nullable")
    response = admin_client_api.post("/api/scenarios/", {"kind": "topology", "params": None},
                                     format="json")
    assert "params" in _errors(response)
    response = admin_client_api.post("/api/scenarios/", {"kind": "0"}, format="json")
    assert "unknown kind '0'" in _errors(response)["kind"][0]


#: Every query the dashboard sends (frontend/src: api/client.ts and the panels), with
#: values of the kind it fills in: none may be refused by the stricter checks.
FRONTEND_QUERIES = [
    "/api/clusters/?limit=1000",
    "/api/racks/?cluster={cluster}&ordering=row,slot&limit=1000",
    "/api/racks/?supernode={supernode}&ordering=row,slot&limit=1000",
    "/api/jobs/?cluster={cluster}&state=running&state=queued&limit=200",
    "/api/links/?card={card}&limit=200",
    "/api/telemetry/alerts/?rack={rack}&active=true&limit=50",
    "/api/telemetry/alerts/?cluster={cluster}&active=true&limit=1000",
    "/api/telemetry/alerts/groups/?cluster={cluster}&active=true&limit=1000",
    "/api/jobs/remediations/?cluster={cluster}&limit=50",
    "/api/scenarios/?cluster={cluster}&ordering=-id&limit=20",
    "/api/telemetry/cards/{card}/?history=gpu_util&n=60",
    "/api/clusters/{cluster}/route/?src={card}&dst={card2}&by=hops",
]


@pytest.mark.parametrize("query", FRONTEND_QUERIES)
def test_what_the_dashboard_sends_is_accepted(admin_client_api: Any, tiny_cluster: Any,
                                              query: str) -> None:
    from tests.telemetry.conftest import flush_namespace

    flush_namespace()
    cards = tiny_cluster["cards"]
    url = query.format(cluster=tiny_cluster["cluster"].pk, rack=tiny_cluster["rack"].pk,
                       supernode=cards[0].supernode_id, card=cards[0].pk, card2=cards[1].pk)
    response = admin_client_api.get(url)
    assert response.status_code == 200, (url, response.content)


def test_the_operation_index_prefers_literal_paths(db: Any) -> None:
    index = operations()
    assert set(index.find("/api/jobs/allocations/", "GET").query) >= {"job", "card"}
    assert index.find("/api/jobs/7/", "GET") is not None
    assert index.find("/api/no-such/", "GET") is None
