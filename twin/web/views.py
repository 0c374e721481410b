"""Pages Django renders itself: the dashboard shell, login and logout.

The dashboard's data comes from the REST API (the browser fetches it with the
session cookie); Django only renders the shell, the user and the hashed asset
tags from Vite's manifest, plus the constants the browser code takes from the
server (``twin.web.config``). If the frontend was not built, the page says which
command to run instead of failing with a bare 500.
"""
from __future__ import annotations

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache

from twin.core.throttling import throttle_logins
from twin.web.config import dashboard_config
from twin.web.vite import DEFAULT_ENTRY, FrontendNotBuilt, entry_assets

__all__ = ["LoginView", "LogoutView", "dashboard"]


@never_cache
def dashboard(request: HttpRequest) -> HttpResponse:
    """The dashboard shell; needs a login unless ``TWIN_PUBLIC_READ`` opens reads."""
    if not settings.TWIN_PUBLIC_READ and not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    try:
        assets = entry_assets(DEFAULT_ENTRY)
    except FrontendNotBuilt as exc:
        return render(
            request,
            "web/frontend_missing.html",
            {"message": exc.message, "hint": exc.hint},
            status=503,
        )
    return render(
        request,
        "web/dashboard.html",
        {"assets": assets, "api_root": reverse("api:api-root"), "config": dashboard_config()},
    )


@method_decorator(throttle_logins, name="dispatch")
class LoginView(auth_views.LoginView):
    """Django's login; attempts share the API token's rate limit (429 past it)."""

    template_name = "registration/login.html"
    redirect_authenticated_user = True


class LogoutView(auth_views.LogoutView):
    """POST-only (Django ≥ 5): the dashboard's header posts a form with its CSRF token."""
