"""Named API tokens in the admin (``twin.core.tokens``): list, create, revoke.

A superuser, or an unrestricted user (no grant rows) holding the change permission
on tokens (the hardware admin role), sees every user's tokens (to revoke a leaked
one); anyone else with the model's permissions sees their own. The secret is shown
once, in the message after the add. A token's owner and scope (clusters, see-only)
are fixed at creation — a different scope is a new token — so a change page edits
only the name and the expiry. Clusters offered are checked against the owner's grants: a token
cannot reach a cluster its user may not see.
"""
from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from twin.core.access import access_for
from twin.core.admin.base import TwinModelAdmin, TwinModelForm
from twin.hardware.filtersets import ApiTokenFilterSet
from twin.hardware.models import ApiToken

__all__ = ["ApiTokenAdmin"]

_SCOPE = ("user", "clusters", "see_only")


class ApiTokenForm(TwinModelForm):
    class Meta:
        model = ApiToken
        fields = ["name", "user", "clusters", "see_only", "expires"]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        user, clusters = cleaned.get("user"), cleaned.get("clusters")
        if user is not None and clusters:
            access = access_for(user)
            unseen = [c.name for c in clusters if not access.can_see(c.pk)]
            if unseen:
                self.add_error("clusters", f"{user} may not see {', '.join(unseen)}: a "
                                           f"token cannot reach beyond its user.")
        return cleaned


@admin.register(ApiToken)
class ApiTokenAdmin(TwinModelAdmin):
    form = ApiTokenForm
    filterset_class = ApiTokenFilterSet
    filterset_sidebar = ("revoked", "see_only")
    search_fields = ApiTokenFilterSet.search_fields
    list_display = ("name", "prefix", "user", "see_only", "limited", "created", "last_used",
                    "expires", "revoked")
    list_select_related = ("user",)
    raw_id_fields = ("user",)
    autocomplete_fields = ("clusters",)
    actions = ["revoke"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApiToken]:
        queryset = super().get_queryset(request)
        user: Any = request.user
        if user.is_superuser or (user.has_perm("hardware.change_apitoken")
                                 and not access_for(user, request).restricted):
            return queryset
        return queryset.filter(user_id=user.pk)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        shown = ("prefix", "limited", "created", "last_used", "revoked", "revoked_at")
        return (*_SCOPE, *shown) if obj is not None else shown

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        if not change:
            obj.limited = bool(form.cleaned_data.get("clusters"))
            secret = obj.new_key()
            self.message_user(request, f"The token's secret, shown this once: {secret} "
                                       f"(send it as Authorization: Token <secret>).",
                              messages.WARNING)
        super().save_model(request, obj, form, change)

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        count = 0
        for token in queryset.filter(revoked=False):
            token.revoke()
            count += 1
        self.message_user(request, f"{count} token(s) revoked.", messages.SUCCESS)
