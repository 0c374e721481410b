"""Fixtures for the pages Django serves: collected static files and a real server.

``collected_static`` runs ``collectstatic`` once per session into a private
directory with the *production* storage (whitenoise's compressed manifest), so
the tests see the same hashed URLs a deployment serves, without touching the
project's ``staticfiles/``.

``uvicorn_server`` starts ``uvicorn twin.asgi:application`` as a subprocess on a
free port, pointed at the test database (as the Celery worker fixture is), so a
browser can drive the real stack. Tests using it need ``transactional_db`` (or
committed data) for the server to see their rows.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import override_settings

from tests.conftest import (
    _worker_env,
    asgi_server,
    wait_for_other_sessions_to_close,
)

PRODUCTION_STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}


def require_frontend_build() -> Path:
    """The Vite manifest, or a failure that says how to build it."""
    manifest = Path(settings.VITE_MANIFEST)
    if not manifest.exists():
        pytest.fail(
            f"{manifest} is missing: build the frontend first (cd frontend && npm ci && "
            "npm run build; bash scripts/test does it)",
            pytrace=False,
        )
    return manifest


@pytest.fixture(scope="session")
def vite_manifest() -> dict[str, dict]:
    return json.loads(require_frontend_build().read_text())


@pytest.fixture(scope="session")
def collected_static(tmp_path_factory: pytest.TempPathFactory, vite_manifest) -> Path:
    root = tmp_path_factory.mktemp("static")
    with override_settings(STATIC_ROOT=root, STORAGES=PRODUCTION_STORAGES):
        call_command("collectstatic", interactive=False, verbosity=0)
    return root


@pytest.fixture
def production_static(settings, collected_static: Path) -> Path:
    """Serve and resolve static files as a deployment does (manifest + whitenoise)."""
    settings.STATIC_ROOT = collected_static
    settings.STORAGES = PRODUCTION_STORAGES
    return collected_static


@pytest.fixture(scope="session")
def uvicorn_server(django_db_setup, django_db_blocker, collected_static: Path) -> Iterator[str]:
    """Base URL of a real ``uvicorn twin.asgi:application`` on the test database."""
    from django.db import connection

    with django_db_blocker.unblock():
        db_settings = dict(connection.settings_dict)
    env = _worker_env(db_settings)
    env["TWIN_STATIC_ROOT"] = str(collected_static)
    env.pop("TWIN_PUBLIC_READ", None)
    try:
        with asgi_server(env, "uvicorn.log", "/login/", log_level="info") as base:
            yield base
    finally:
        with django_db_blocker.unblock():
            wait_for_other_sessions_to_close(connection)


@pytest.fixture
def allow_sync_db_in_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Playwright's sync API keeps an event loop in this thread; Django would then
    refuse ORM calls as "async unsafe". The test itself is synchronous, so allow it,
    for the tests that ask for this fixture only."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


__all__ = [
    "PRODUCTION_STORAGES",
    "allow_sync_db_in_event_loop",
    "collected_static",
    "production_static",
    "require_frontend_build",
    "uvicorn_server",
    "vite_manifest",
]

