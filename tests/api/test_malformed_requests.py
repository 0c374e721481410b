"""Malformed requests that were a 500 or an HTML page (issue 11, items 5 and 6).

Integer filters past the database's range (``?cluster=99999999999999999999999``
overflowed the driver), bodies nested 100,000 levels deep (``RecursionError``),
any method but GET on ``/api/presets/`` (an ``AssertionError`` in the
permission check), and a body over the upload limit (Django's HTML 400): each
is now a 4xx with a JSON body naming what is wrong, and nothing is written.
"""
from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse
from drf_spectacular.generators import SchemaGenerator

from tests.api.test_bad_input import snapshot
from twin.scenarios.models import ScenarioRun

HUGE = "99999999999999999999999"
INT64_MAX = 2**63 - 1


def json_400(response: Any, field: str) -> list[str]:
    assert response.status_code == 400, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert field in body, body
    assert all(isinstance(m, str) and m for m in body[field]), body
    return body[field]


# --- integer filters --------------------------------------------------------------------

@pytest.mark.parametrize(("path", "param"), [
    ("/api/cards/", "cluster"), ("/api/cards/", "rack"), ("/api/cards/", "index"),
    ("/api/cards/", "x"), ("/api/cards/", "supernode"), ("/api/servers/", "cluster"),
    ("/api/links/", "card"), ("/api/links/", "device"), ("/api/racks/", "row"),
    ("/api/supernodes/", "index"), ("/api/telemetry/history/", "object_id"),
])
@pytest.mark.parametrize("value", [HUGE, "-" + HUGE, str(2**63)])
def test_an_integer_filter_past_the_database_range_is_400_on_it(admin_client_api, tiny_cluster,
                                                                 path, param, value):
    json_400(admin_client_api.get(path, {param: value}), param)


@pytest.mark.parametrize(("path", "param"), [
    ("/api/cards/", "cluster"), ("/api/links/", "card"), ("/api/cards/", "index"),
])
def test_an_integer_filter_with_a_fraction_is_400_not_rounded(admin_client_api, tiny_cluster,
                                                              path, param):
    """``?cluster=1.5`` listed cluster 1's cards (the decimal was truncated)."""
    assert "whole number" in json_400(admin_client_api.get(path, {param: "1.5"}), param)[0]


def test_integer_filters_inside_the_range_still_filter(admin_client_api, tiny_cluster):
    cluster, cards = tiny_cluster["cluster"], tiny_cluster["cards"]
    listed = admin_client_api.get("/api/cards/", {"cluster": cluster.pk}).json()["results"]
    assert len(listed) == len(cards)
    response = admin_client_api.get("/api/cards/", {"cluster": INT64_MAX})
    assert response.status_code == 200, response.content
    # ids start at 1 and are integers, as the schema says ("5.0" was taken as 5)
    for value in (0, -(2**63), f"{cluster.pk}.0"):
        response = admin_client_api.get("/api/cards/", {"cluster": value})
        assert response.status_code == 400, response.content
        assert list(response.json()) == ["cluster"]
    assert admin_client_api.get("/api/links/", {"card": INT64_MAX}).json()["results"] == []
    link_ids = {link["id"] for link in admin_client_api.get(
        "/api/links/", {"card": cards[0].pk}).json()["results"]}
    assert link_ids and all(cards[0].pk in (link.a_card_id, link.b_card_id)
                            for link in tiny_cluster["links"] if link.pk in link_ids)


def test_the_schema_says_integer_filters_are_bounded_integers(anon_client, db):
    schema = SchemaGenerator().get_schema(request=None, public=True)
    params = {p["name"]: p["schema"]
              for p in schema["paths"]["/api/links/"]["get"]["parameters"]}
    assert params["card"] == {"type": "integer", "minimum": 1, "maximum": INT64_MAX}


# --- nesting -----------------------------------------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("url", ["/api/scenarios/", "/api/racks/", "/api/builds/",
                                 "/api/token/"])
def test_json_nested_100000_levels_is_400_nesting_too_deep(admin_client_api, tiny_cluster, url):
    before, runs = snapshot(), ScenarioRun.objects.count()
    response = admin_client_api.generic("POST", url, DEEP, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    assert "nesting too deep" in response.json()["detail"]
    assert snapshot() == before and ScenarioRun.objects.count() == runs


def test_a_deep_value_inside_a_scenario_request_is_400_too(admin_client_api, tiny_cluster):
    cluster, deep = tiny_cluster["cluster"].pk, "[" * 70 + "]" * 70
    body = f'{{"kind": "topology", "cluster": {cluster}, "params": {{"x": {deep}}}}}'
    response = admin_client_api.generic("POST", "/api/scenarios/", body,
                                        content_type="application/json")
    assert response.status_code == 400 and "nesting too deep" in response.json()["detail"]
    assert not ScenarioRun.objects.exists()


def test_brackets_inside_strings_do_not_count_as_nesting(admin_client_api, tiny_cluster):
    name = "[" * 90 + "{" * 9
    response = admin_client_api.patch(f"/api/racks/{tiny_cluster['rack'].pk}/",
                                      {"name": name}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["name"] == name


# --- read-only endpoints -----------------------------------------------------------------

@pytest.mark.parametrize("method", ["post", "put", "patch", "delete"])
@pytest.mark.parametrize("who", ["admin", "anonymous"])
def test_any_method_but_get_on_presets_is_405_json(admin_client_api, anon_client, method, who):
    client = admin_client_api if who == "admin" else anon_client
    response = getattr(client, method)("/api/presets/", {"preset": "x"}, format="json")
    assert response.status_code == 405, response.content
    assert response["Content-Type"].startswith("application/json")
    assert method.upper() in response.json()["detail"]
    assert "POST" not in response["Allow"] and "GET" in response["Allow"]
    assert admin_client_api.get("/api/presets/").status_code == 200


def _api_operations() -> list[tuple[str, str]]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return [(path, method) for path, item in schema["paths"].items() for method in item
            if path not in ("/api/schema/",)]


def test_no_endpoint_answers_500_or_html_to_any_method(admin_client_api, tiny_cluster):
    """Every path of the schema, with every method (documented or not) and an empty or a
    malformed JSON body: never a 500, and always JSON."""
    paths = sorted({path for path, _ in _api_operations()})
    ids = {"{id}": str(tiny_cluster["rack"].pk), "{cluster_id}": str(tiny_cluster["cluster"].pk),
           "{card_id}": str(tiny_cluster["cards"][0].pk)}
    for body in ("{}", "{broken", '{"id": ' + HUGE + "}"):
        for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
            if method == "DELETE" and body != "{broken":
                continue  # deleting is the other tests' business; once is enough here
            for path in paths:
                url = path
                for key, value in ids.items():
                    url = url.replace(key, value)
                response = admin_client_api.generic(method, url, body,
                                                    content_type="application/json")
                assert response.status_code < 500, (method, url, body, response.content[:300])
                if response.status_code != 204 and url not in ("/api/docs/", "/api/redoc/"):
                    assert response["Content-Type"].startswith("application/json"), (
                        method, url, response["Content-Type"])


# --- bodies over the upload limit ----------------------------------------------------------

@pytest.mark.parametrize(("method", "url"), [
    ("POST", "/api/racks/"), ("PATCH", "/api/racks/{rack}/"), ("POST", "/api/scenarios/"),
    ("POST", "/api/token/"), ("POST", "/api/presets/"),
])
def test_a_9_mib_body_is_413_json(admin_client_api, tiny_cluster, settings, method, url):
    url = url.replace("{rack}", str(tiny_cluster["rack"].pk))
    body = b'{"name": "' + b"x" * (9 * 1024 * 1024) + b'"}'
    before = snapshot()
    response = admin_client_api.generic(method, url, body, content_type="application/json")
    if url == "/api/presets/":  # read-only: the method is refused before the body is read
        assert response.status_code == 405
        return
    assert response.status_code == 413, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["limit"] == settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    assert f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,}" in body["detail"]
    assert snapshot() == before


def test_a_body_over_the_limit_outside_the_api_keeps_djangos_page(admin_client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = admin_client.generic("POST", reverse("admin:hardware_rack_add"), "x" * 2000,
                                    content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400
    assert not response["Content-Type"].startswith("application/json")


def test_the_limit_follows_the_setting(admin_client_api, tiny_cluster, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048
    response = admin_client_api.post("/api/clusters/", {"name": "x" * 3000}, format="json")
    assert response.status_code == 413 and response.json()["limit"] == 2048
