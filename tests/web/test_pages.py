"""The pages Django renders: dashboard shell, login/logout, and the built assets.

The asset tests run against ``collectstatic`` output with the production
storage, so they prove what a deployment serves: hashed URLs from Vite's
manifest, re-hashed by the manifest storage, served by whitenoise.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command

from tests.web.conftest import PRODUCTION_STORAGES

ENTRY = "src/main.ts"


def test_dashboard_redirects_anonymous_users_to_login(client, settings):
    settings.TWIN_PUBLIC_READ = False
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/"


def test_public_read_opens_the_dashboard(client, settings, production_static):
    settings.TWIN_PUBLIC_READ = True
    response = client.get("/")
    assert response.status_code == 200
    assert b'id="cluster-picker"' in response.content
    # Nobody is logged in: the header offers a login, not a logout.
    assert b'href="/login/"' in response.content
    assert b"Log out" not in response.content


def test_dashboard_emits_hashed_assets_from_the_vite_manifest(
    client, admin_user, production_static: Path, vite_manifest
):
    client.force_login(admin_user)
    response = client.get("/")
    assert response.status_code == 200
    html = response.content.decode()

    entry = vite_manifest[ENTRY]
    collected = json.loads((production_static / "staticfiles.json").read_text())["paths"]
    script_url = settings.STATIC_URL + collected[entry["file"]]
    # Vite's content hash *and* the manifest storage's hash: cacheable forever.
    assert re.fullmatch(r"/static/assets/main-[\w-]+\.[0-9a-f]{12}\.js", script_url)
    assert f'<script type="module" src="{script_url}"></script>' in html
    for css in entry["css"]:
        assert f'<link rel="stylesheet" href="{settings.STATIC_URL}{collected[css]}">' in html
    # The shell the TypeScript fills, and the links it promises.
    assert 'data-api-root="/api/"' in html
    assert 'href="/admin/"' in html
    assert 'href="/api/docs/"' in html
    assert admin_user.username in html
    assert 'action="/logout/"' in html
    assert "csrfmiddlewaretoken" in html


def test_built_asset_is_served_by_whitenoise(client, admin_user, production_static: Path,
                                             vite_manifest):
    client.force_login(admin_user)
    html = client.get("/").content.decode()
    script_url = re.search(r'<script type="module" src="([^"]+)"', html).group(1)

    response = client.get(script_url)
    assert response.status_code == 200
    assert response["Content-Type"].startswith(("text/javascript", "application/javascript"))
    assert "immutable" in response["Cache-Control"]
    body = b"".join(response.streaming_content)
    built = Path(settings.FRONTEND_DIST, vite_manifest[ENTRY]["file"]).read_bytes()
    # The manifest storage only rewrites the source map reference.
    assert body.split(b"//# sourceMappingURL")[0] == built.split(b"//# sourceMappingURL")[0]

    compressed = client.get(script_url, HTTP_ACCEPT_ENCODING="gzip")
    assert compressed.status_code == 200
    assert compressed["Content-Encoding"] == "gzip"


def test_preloads_are_the_chunks_the_entry_imports(client, admin_user,
                                                   production_static: Path):
    """A modulepreload must name the URL the entry's ``import`` resolves to, or
    the browser downloads the chunk (three.js, 575 kB) twice."""
    client.force_login(admin_user)
    html = client.get("/").content.decode()
    script_url = re.search(r'<script type="module" src="([^"]+)"', html).group(1)
    preloads = re.findall(r'<link rel="modulepreload" href="([^"]+)">', html)
    assert any("/three-" in url for url in preloads), preloads
    script = b"".join(client.get(script_url).streaming_content).decode()
    for url in preloads:
        name = url.rsplit("/", 1)[1]
        assert f"./{name}" in script, f"{name} is preloaded but the entry imports another name"
        response = client.get(url)
        assert response.status_code == 200
        assert "immutable" in response["Cache-Control"]  # Vite's hash: cached for ever


def test_missing_frontend_build_says_what_to_run(client, admin_user, settings, tmp_path):
    settings.VITE_MANIFEST = tmp_path / "dist" / ".vite" / "manifest.json"
    client.force_login(admin_user)
    response = client.get("/")
    assert response.status_code == 503
    assert b"npm run build" in response.content
    assert str(settings.VITE_MANIFEST).encode() in response.content


def test_uncollected_assets_say_to_run_collectstatic(client, admin_user, settings, tmp_path,
                                                     vite_manifest):
    # A manifest storage whose STATIC_ROOT has not been collected into.
    empty = tmp_path / "static"
    empty.mkdir()
    (empty / "staticfiles.json").write_text(json.dumps({"paths": {}, "version": "1.1"}))
    settings.STATIC_ROOT = empty
    settings.STORAGES = PRODUCTION_STORAGES
    client.force_login(admin_user)
    response = client.get("/")
    assert response.status_code == 503
    assert b"collectstatic" in response.content


def test_login_page_renders_a_plain_form(client):
    response = client.get("/login/?next=/")
    assert response.status_code == 200
    html = response.content.decode()
    assert '<form method="post" action="/login/">' in html
    assert 'name="username"' in html and 'name="password"' in html
    assert 'name="next" value="/"' in html
    assert 'href="/admin/"' in html and 'href="/api/docs/"' in html


def test_login_with_good_credentials_goes_to_the_dashboard(admin_user):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    page = client.get("/login/")
    token = page.cookies["csrftoken"].value
    response = client.post("/login/", {"username": "admin", "password": "admin-pass-123",
                                       "next": "/", "csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert response["Location"] == "/"
    assert client.session["_auth_user_id"] == str(admin_user.pk)


def test_login_with_a_wrong_password_is_refused_with_a_message(client, admin_user):
    response = client.post("/login/", {"username": "admin", "password": "wrong"})
    assert response.status_code == 200
    assert b"Please enter a correct username and password" in response.content
    assert "_auth_user_id" not in client.session


def test_logged_in_user_skips_the_login_page(client, admin_user):
    client.force_login(admin_user)
    response = client.get("/login/")
    assert response.status_code == 302
    assert response["Location"] == "/"


def test_logout_needs_post_and_ends_the_session(client, admin_user):
    client.force_login(admin_user)
    assert client.get("/logout/").status_code == 405
    response = client.post("/logout/")
    assert response.status_code == 302
    assert response["Location"] == "/login/"
    assert "_auth_user_id" not in client.session
    assert client.get("/").status_code == 302


@pytest.mark.django_db
def test_ensure_admin_keeps_one_password_across_runs(tmp_path, capsys):
    password_file = tmp_path / "var" / "admin-password"
    call_command("ensure_admin", "--username", "boss", "--password-file", str(password_file))
    first = capsys.readouterr().out
    password = password_file.read_text().strip()
    assert len(password) >= 12
    assert password_file.stat().st_mode & 0o777 == 0o600
    assert f"password: {password}" in first

    user = User.objects.get(username="boss")
    assert user.is_superuser and user.is_staff and user.check_password(password)

    # Someone changes the password in the admin; the demo's rerun restores the printed one.
    user.set_password("changed-elsewhere")
    user.save()
    call_command("ensure_admin", "--username", "boss", "--password-file", str(password_file))
    second = capsys.readouterr().out
    assert password_file.read_text().strip() == password
    assert User.objects.get(username="boss").check_password(password)
    token_lines = [line for line in (first + second).splitlines() if line.startswith("token:")]
    assert len(token_lines) == 2 and token_lines[0] == token_lines[1]
    assert User.objects.filter(username="boss").count() == 1


@pytest.mark.django_db
def test_ensure_admin_refuses_an_empty_username(tmp_path):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--username"):
        call_command("ensure_admin", "--username", " ", "--password-file",
                     str(tmp_path / "pw"))
    assert not User.objects.exists()
    assert not (tmp_path / "pw").exists()
