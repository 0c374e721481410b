"""Filter backend: each app's filtersets, with a browsable form that scales.

The filtersets themselves live in each app's ``filtersets.py`` (one per model,
shared with the admin). Only the HTML form is changed here: django-filter
renders a foreign-key filter as a ``<select>`` of *every* row, which on a
million-card cluster means 131,072 server options per page view. The API's
form shows those filters as plain ID inputs instead; filtering is unchanged.
"""
from __future__ import annotations

from typing import Any

from django import forms
from django_filters.rest_framework import DjangoFilterBackend

__all__ = ["TwinFilterBackend"]


class TwinFilterBackend(DjangoFilterBackend):
    def to_html(self, request: Any, queryset: Any, view: Any) -> str | None:
        filterset = self.get_filterset(request, queryset, view)
        if filterset is None:
            return None
        for field in filterset.form.fields.values():
            if isinstance(field, forms.ModelChoiceField):  # includes the multiple variant
                field.widget = forms.TextInput()
        from django.template import loader

        template = loader.get_template(self.template)
        return template.render({"filter": filterset}, request)
