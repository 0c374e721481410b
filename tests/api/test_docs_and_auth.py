"""OpenAPI schema, offline docs, the API root, and token authentication."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.test import override_settings
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

ENDPOINTS = ["accelerators", "clusters", "supernodes", "racks", "servers", "cards", "devices",
             "links", "builds", "presets"]


def test_schema_generates_without_warnings(tmp_path: Path, db):
    """The same check as ``manage.py spectacular --validate --fail-on-warn``."""
    out = tmp_path / "schema.yml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    schema = yaml.safe_load(out.read_text())
    paths = set(schema["paths"])
    for name in ENDPOINTS:
        assert f"/api/{name}/" in paths
    assert "/api/clusters/{id}/summary/" in paths
    assert "/api/token/" in paths
    assert {"tokenAuth", "cookieAuth"} <= set(schema["components"]["securitySchemes"])


def test_schema_served(anon_client: APIClient, db):
    response = anon_client.get(reverse("api:schema"), HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    # Read-only computed fields are documented as such.
    rack = schema["components"]["schemas"]["Rack"]["properties"]
    assert all(rack[f].get("readOnly") for f in ("power_w", "utilization", "facility_w",
                                                  "headroom_w"))
    link = schema["components"]["schemas"]["Link"]["properties"]
    assert link["a_kind"]["readOnly"] and link["b_kind"]["readOnly"]


def _asset_urls(html: str) -> list[str]:
    return re.findall(r'(?:src|href)="([^"]+)"', html) + re.findall(r"url\(([^)]+)\)", html)


@pytest.mark.parametrize("name", ["docs", "redoc"])
def test_docs_pages_use_no_cdn(anon_client: APIClient, db, name: str):
    """Every asset of Swagger UI and ReDoc is a local /static/ file that exists."""
    response = anon_client.get(reverse(f"api:{name}"))
    assert response.status_code == 200
    html = response.content.decode()
    urls = _asset_urls(html)
    assert urls, "no assets found: the page changed shape"
    for url in urls:
        assert url.startswith("/static/"), url
        assert finders.find(url.removeprefix("/static/")), f"{url} is not a static file"
    assert not re.search(r"https?://|//cdn|jsdelivr|unpkg|googleapis|gstatic", html), \
        re.findall(r"https?://\S+", html)
    assert "/api/schema/" in html


def test_api_root_lists_every_endpoint(reader_client: APIClient, db):
    response = reader_client.get("/api/")
    assert response.status_code == 200
    body = response.json()
    for name in ENDPOINTS + ["schema", "docs", "redoc", "token"]:
        assert name in body, name
    assert body["cards"].endswith("/api/cards/")
    assert body["docs"].endswith("/api/docs/")


def test_api_root_needs_login_unless_public(anon_client: APIClient, db):
    assert anon_client.get("/api/").status_code == 401
    with override_settings(TWIN_PUBLIC_READ=True):
        assert anon_client.get("/api/").status_code == 200


def test_token_endpoint_and_token_auth(anon_client: APIClient, admin_user):
    response = anon_client.post(reverse("api:token"),
                                {"username": "admin", "password": "admin-pass-123"},
                                format="json")
    assert response.status_code == 200
    token = response.json()["token"]
    assert Token.objects.get(user=admin_user).key == token
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get(reverse("api:cluster-list")).status_code == 200
    created = client.post(reverse("api:cluster-list"), {"name": "by-token"}, format="json")
    assert created.status_code == 201


def test_token_endpoint_refuses_bad_password(anon_client: APIClient, admin_user):
    response = anon_client.post(reverse("api:token"),
                                {"username": "admin", "password": "wrong"}, format="json")
    # Refused credentials, not a malformed request: 401 (it was DRF's 400).
    assert response.status_code == 401 and response["WWW-Authenticate"] == "Token"
    malformed = anon_client.post(reverse("api:token"), {"username": "admin"}, format="json")
    assert malformed.status_code == 400 and "password" in malformed.json()
    assert not Token.objects.filter(user=admin_user).exists()


def test_bad_token_is_401(db):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert client.get(reverse("api:cluster-list")).status_code == 401


def test_session_writes_need_csrf(staff_user, db):
    """Session auth (the browser) must carry the CSRF token on writes; tokens need not."""
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(staff_user)
    response = client.post(reverse("api:cluster-list"), {"name": "csrf"}, format="json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]


def test_single_permission_grants_only_its_write(db, reader):
    """A user holding only ``hardware.add_cluster`` may create clusters, not delete them."""
    from django.contrib.auth.models import Permission

    reader.user_permissions.add(Permission.objects.get(codename="add_cluster"))
    client = APIClient()
    client.force_authenticate(reader)
    created = client.post(reverse("api:cluster-list"), {"name": "mine"}, format="json")
    assert created.status_code == 201
    deleted = client.delete(reverse("api:cluster-detail", args=[created.json()["id"]]))
    assert deleted.status_code == 403


@pytest.mark.parametrize("name", ENDPOINTS)
def test_browsable_api_pages_render(admin_client_api: APIClient, wide_cluster, name: str):
    """HTML list pages render, and foreign keys are ID inputs, not a <select> of every row
    (which at a million cards would list 131,072 servers per page view)."""
    response = admin_client_api.get(f"/api/{name}/", HTTP_ACCEPT="text/html")
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" in html
    assert f'<option value="{wide_cluster["server"].pk}"' not in html
    assert f'<option value="{wide_cluster["rack"].pk}"' not in html
