"""Dashboard, login, logout, the health probe and the twin's own ``/metrics`` (the API
and admin have their own URL modules)."""
from django.urls import path

from twin.web import health, metrics, views

__all__ = ["app_name", "urlpatterns"]

app_name = "web"

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", views.LogoutView.as_view(), name="logout"),
    path("healthz/", health.healthz, name="healthz"),
    path("metrics", metrics.metrics_view, name="metrics"),
]
