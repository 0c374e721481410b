"""Settings for the test suite: the real settings with a throwaway secret.

Everything else (database, Redis) comes from the environment exactly as in
production, so the same suite runs on SQLite + embedded Redis or on
PostgreSQL + a real Redis.
"""
import os

os.environ.setdefault("TWIN_SECRET_KEY", "test-only-secret-key-not-for-deployment")
# Many tests (and their uvicorn servers) log in from 127.0.0.1 within a minute; the
# throttle's own tests set a low rate and their own addresses.
os.environ.setdefault("TWIN_LOGIN_RATE", "10000/min")

from twin.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Tests render admin and browsable-API pages without running collectstatic first:
# the manifest storage would refuse every ``{% static %}`` it has no entry for.
STORAGES = {
    **STORAGES,  # noqa: F405
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
