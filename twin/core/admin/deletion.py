"""The deletion rule (``twin.core.deletion``) in the admin.

Django's confirmation page lists every related row it would delete, found by
loading them all (a million cards for a cluster: the page never renders). For a
model with :class:`~twin.core.deletion.GuardedDeletion` the page lists instead
what is inside, counted per kind exactly as the API's 409 does, and confirming
it is the explicit cascade: the rows go through ``delete_with_contents`` (a
cluster's set-based delete). A model whose cascade needs its name confirmed (a
cluster) asks for it on the page; the bulk action refuses such objects when
they are not empty (delete them one at a time). Rows that only use an object
(cards of an accelerator type) show as protected: nothing is deleted.
"""
from __future__ import annotations

import copy
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.db import models, transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.urls import reverse

from twin.core.deletion import DeletionBlocked, GuardedDeletion, content_models

__all__ = ["GuardedDeletionAdminMixin"]


def _confirmation(obj: models.Model) -> str | None:
    """The value a cascade of ``obj`` must be confirmed with, if it needs one now."""
    field = getattr(obj, "deletion_confirm_field", None)
    if not isinstance(obj, GuardedDeletion) or not field or not obj.deletion_blocked_by():
        return None
    return str(getattr(obj, field))


class GuardedDeletionAdminMixin(admin.ModelAdmin):
    """Confirmation pages and deletes that follow the deletion rule."""

    delete_confirmation_template = "admin/core/delete_confirmation.html"

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, ...]:
        if not issubclass(self.model, GuardedDeletion):
            return super().get_deleted_objects(objs, request)
        from twin.core.admin.base import admin_link

        listed: list[Any] = []
        totals: dict[str, int] = {str(self.model._meta.verbose_name_plural): 0}
        perms_needed: set[str] = set()
        protected: list[str] = []
        bulk = isinstance(objs, models.QuerySet)  # the action; the delete view passes [obj]
        for obj in objs:
            counts = obj.deletion_blocked_by()
            totals[str(self.model._meta.verbose_name_plural)] += 1
            inside = ", ".join(f"{label.replace('_', ' ')}: {n:,}" for label, n in counts.items())
            if counts and not obj.deletion_cascades:
                protected.append(f"{obj} is in use ({inside}). {obj.deletion_refusal_hint()}")
                continue
            if counts and bulk and obj.deletion_confirm_field:
                protected.append(f"{obj} is not empty ({inside}): delete it from its own page, "
                                 f"confirming its {obj.deletion_confirm_field}.")
                continue
            listed.append(admin_link(obj))
            if counts:
                listed.append([f"{label.replace('_', ' ')}: {n:,}" for label, n in counts.items()])
            kinds = content_models(obj)
            for label, n in counts.items():
                totals[label.replace("_", " ")] = totals.get(label.replace("_", " "), 0) + n
                opts = kinds[label]._meta
                if not request.user.has_perm(f"{opts.app_label}.delete_{opts.model_name}"):
                    perms_needed.add(str(opts.verbose_name_plural))
        return listed, totals, perms_needed, protected

    def delete_view(self, request: HttpRequest, object_id: str,
                    extra_context: dict[str, Any] | None = None) -> HttpResponse:
        obj = self.get_object(request, unquote(object_id))
        expected = _confirmation(obj) if obj is not None else None
        extra = {**(extra_context or {})}
        if expected is not None:
            field = obj._meta.get_field(obj.deletion_confirm_field)  # type: ignore[union-attr]
            extra["confirm_field"] = field.verbose_name
            if request.method == "POST" and request.POST.get("confirm", "").strip() != expected:
                # Show the page again with the reason; nothing is deleted.
                extra["confirm_error"] = (
                    f"Type the {field.verbose_name} of the {obj._meta.verbose_name} "  # type: ignore[union-attr]
                    f"to delete it with everything in it.")
                request = copy.copy(request)
                request.method = "GET"
                request.POST = QueryDict()  # type: ignore[assignment]
        return super().delete_view(request, object_id, extra)

    def _delete_contents(self, request: HttpRequest, obj: GuardedDeletion) -> bool:
        try:
            with transaction.atomic():
                obj.delete_with_contents()
        except DeletionBlocked as exc:
            self.message_user(request, f"{obj} was not deleted: {exc.message}", messages.ERROR)
            request._twin_deletion_blocked = True  # type: ignore[attr-defined]
            return False
        return True

    def delete_model(self, request: HttpRequest, obj: models.Model) -> None:
        if isinstance(obj, GuardedDeletion):
            self._delete_contents(request, obj)
        else:
            super().delete_model(request, obj)

    def response_delete(self, request: HttpRequest, obj_display: str,
                        obj_id: Any) -> HttpResponse:
        if getattr(request, "_twin_deletion_blocked", False):
            opts = self.model._meta
            return HttpResponseRedirect(
                reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj_id]))
        return super().response_delete(request, obj_display, obj_id)

    def delete_queryset(self, request: HttpRequest, queryset: models.QuerySet) -> None:
        if not issubclass(self.model, GuardedDeletion):
            super().delete_queryset(request, queryset)
            return
        with transaction.atomic():
            for obj in queryset:
                expected = _confirmation(obj)
                if expected is not None:
                    self.message_user(
                        request, f"{obj} was not deleted: it is not empty, and a "
                                 f"{obj._meta.verbose_name} is deleted with what it holds only "
                                 f"from its own page, confirming its name.", messages.ERROR)
                    continue
                self._delete_contents(request, obj)
