"""Template tags of ``TwinModelAdmin``'s changelist (``admin/core/change_list.html``).

Django's admin picks its ``search_form.html`` and ``pagination.html`` per app
label, so an override would have to be copied into every app. These tags render
Django's own context with our templates instead, for any app whose admin derives
from ``TwinModelAdmin``.
"""
from __future__ import annotations

from typing import Any

from django import template
from django.contrib.admin.templatetags.admin_list import pagination, search_form

__all__ = ["twin_pagination", "twin_search_form"]

register = template.Library()


@register.inclusion_tag("admin/core/pagination.html")
def twin_pagination(cl: Any) -> dict[str, Any]:
    """Django's pagination, counting "about N" rows when the paginator estimated them."""
    return pagination(cl)


@register.inclusion_tag("admin/core/search_form.html")
def twin_search_form(cl: Any) -> dict[str, Any]:
    """Django's search form, with the count shown only for a filtered or searched list."""
    return search_form(cl)
