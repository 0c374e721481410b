"""Routers of the API: one per app, one root page for all of them.

Each app's ``api/urls.py`` registers its viewsets on its own :class:`TwinRouter`.
``twin.core.api.urls.api_urlpatterns`` puts every app's URLs into the one ``api``
namespace and adds :func:`api_root_urls`: the page at ``/api/`` that links every
app's endpoints and the core ones (token, schema, docs), as a single
``DefaultRouter`` would.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from django.urls import URLPattern, path
from rest_framework.routers import DefaultRouter
from rest_framework.urlpatterns import format_suffix_patterns

__all__ = ["TwinRouter", "api_root_urls"]


class TwinRouter(DefaultRouter):
    """An app's router: DRF's default one, without a root page of its own."""

    include_root_view = False


def api_root_urls(routers: Iterable[DefaultRouter],
                  extra_links: Mapping[str, str]) -> list[URLPattern]:
    """The API root page (``api-root``): every router's list endpoints, then ``extra_links``.

    A prefix registered by two routers (a viewset adding an action to another
    app's ``clusters/``) is listed once, where it was first registered.
    """
    root: dict[str, str] = {}
    for router in routers:
        for prefix, _viewset, basename in router.registry:
            root.setdefault(prefix, router.routes[0].name.format(basename=basename))
    root.update(extra_links)
    view = DefaultRouter.APIRootView.as_view(api_root_dict=root)
    return format_suffix_patterns([path("", view, name=DefaultRouter.root_view_name)])
