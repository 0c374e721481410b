"""Login attempts are rate-limited (issue 11, item 8): the API token, ``/login/`` and
``/admin/login/`` share one budget per client address, kept in Redis (so every web
worker counts the same attempts); past it, 429 with ``Retry-After`` and a JSON
reason. With Redis unreachable, logins still work and are still throttled.

Each test uses addresses of its own (the counts live in the real Redis for a
minute), and sets a low rate.
"""
from __future__ import annotations

import uuid

import pytest
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from django.test import Client, override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from twin.core.localnet import free_port
from twin.core.throttling import LoginRateThrottle

pytestmark = pytest.mark.django_db


def new_address() -> str:
    raw = uuid.uuid4().bytes
    return f"10.{raw[0]}.{raw[1]}.{raw[2]}"


def token_attempt(address: str, password: str = "wrong") -> object:
    return APIClient(REMOTE_ADDR=address).post(
        reverse("api:token"), {"username": "admin", "password": password}, format="json")


@override_settings(TWIN_LOGIN_RATE="3/min")
def test_token_endpoint_answers_429_with_retry_after(admin_user) -> None:
    address = new_address()
    for _ in range(3):
        assert token_attempt(address).status_code == 401
    response = token_attempt(address, password="admin-pass-123")  # even the right one
    assert response.status_code == 429
    assert response["Content-Type"] == "application/json"
    retry = int(response["Retry-After"])
    assert 1 <= retry <= 60
    body = response.json()
    assert body["retry_after"] == retry
    assert "Too many login attempts" in body["detail"] and f"{retry} s" in body["detail"]
    # Another address has its own budget.
    assert token_attempt(new_address(), password="admin-pass-123").status_code == 200


@override_settings(TWIN_LOGIN_RATE="3/min")
def test_forms_and_token_share_one_budget(admin_user) -> None:
    address = new_address()
    browser = Client(REMOTE_ADDR=address)
    assert browser.get("/login/").status_code == 200  # showing the form does not count
    assert browser.post("/login/", {"username": "admin", "password": "wrong"}).status_code \
        == 200
    assert browser.post(reverse("admin:login"),
                        {"username": "admin", "password": "wrong"}).status_code == 200
    assert token_attempt(address).status_code == 401
    for url in ("/login/", reverse("admin:login")):
        page = browser.post(url, {"username": "admin", "password": "admin-pass-123"},
                            HTTP_ACCEPT="text/html")
        assert page.status_code == 429, url
        assert int(page["Retry-After"]) >= 1
        assert b"Too many login attempts" in page.content
        assert "_auth_user_id" not in browser.session
    scripted = browser.post("/login/", {"username": "admin", "password": "admin-pass-123"})
    assert scripted.status_code == 429
    assert scripted.json()["retry_after"] >= 1
    assert token_attempt(address, password="admin-pass-123").status_code == 429


@override_settings(TWIN_LOGIN_RATE="2/min")
def test_counts_are_shared_through_redis(admin_user) -> None:
    """A second web process reads the same counts: they are in Redis, not in memory."""
    assert isinstance(caches["throttle"], RedisCache)
    address = new_address()
    token_attempt(address)
    token_attempt(address)
    throttle = LoginRateThrottle()
    key = throttle.cache_format % {"scope": "login", "ident": address}
    assert len(caches["throttle"].get(key)) == 2
    from twin.core import throttling

    throttling._local.clear()  # what another process would start with
    assert token_attempt(address).status_code == 429


def test_logins_work_and_are_throttled_with_redis_away(admin_user) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    caches_setting = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "throttle": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                     "LOCATION": dead,
                     "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2}},
    }
    with override_settings(CACHES=caches_setting, TWIN_LOGIN_RATE="2/min"):  # resets caches
        address = new_address()
        assert token_attempt(address, password="admin-pass-123").status_code == 200
        assert token_attempt(address).status_code == 401
        assert token_attempt(address).status_code == 429
