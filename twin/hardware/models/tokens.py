"""Named API tokens (``twin.core.tokens``): many per user, each limited to some
clusters or see-only, revocable one by one.

The key itself is never stored: only its SHA-256 and its first 12 characters (the
prefix a list shows, to tell tokens apart). The secret is shown once, in the answer
to the create. The core looks keys up through :func:`resolve_token`, registered in
``HardwareConfig.ready()``; the signals below drop a token from the process's cache
whenever its row or its clusters change, so a revocation is immediate in the process
that made it and reaches the others within ``twin.core.tokens.CACHE_S``.
"""
from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models.signals import m2m_changed, post_delete, post_save
from django.dispatch import receiver
from django.utils import timezone

from twin.core.tokens import KEY_PREFIX, Resolved, TokenAuth, TokenScope, forget, hash_key
from twin.core.validators import printable, printable_constraint

__all__ = ["LAST_USED_EVERY", "PREFIX_LENGTH", "ApiToken", "resolve_token"]

#: Characters of the key kept in the clear ("twk_" and 8 of the secret's).
PREFIX_LENGTH = 12
#: ``last_used`` is written at most this often per token (a write per request would
#: cost more than the lookup it records).
LAST_USED_EVERY = timedelta(seconds=60)


class ApiToken(models.Model):
    """One named key of a user: its user's access ∩ its scope."""

    name = models.CharField(max_length=100, validators=[printable],
                            help_text="What it is for (\"wall screen\", \"ci\").")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="api_tokens")
    prefix = models.CharField(max_length=PREFIX_LENGTH, editable=False,
                              help_text="The key's first characters, to recognise it.")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True, editable=False,
                                     help_text="Within a minute.")
    expires = models.DateTimeField(null=True, blank=True,
                                   help_text="Refused from then on; empty: never expires.")
    limited = models.BooleanField(
        default=False, editable=False,
        help_text="Limited to its clusters (kept when they are deleted: then it sees none).")
    clusters = models.ManyToManyField(
        "hardware.Cluster", blank=True, related_name="api_tokens",
        help_text="Only these of its user's clusters; empty: all of them.")
    see_only = models.BooleanField(
        default=False, help_text="Reads only: no write through the API, no cluster changed.")
    revoked = models.BooleanField(default=False, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["user", "-created"]
        verbose_name = "API token"
        indexes = [models.Index(fields=["user", "revoked"], name="apitoken_user_revoked")]
        constraints = [printable_constraint("name", "apitoken_name_printable")]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    def new_key(self) -> str:
        """Give the token a fresh secret (256 random bits); returns it: the only time it
        is readable."""
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        self.prefix, self.key_hash = key[:PREFIX_LENGTH], hash_key(key)
        return key

    def revoke(self) -> None:
        """Refuse it from now on (the row stays, for the list and the audit)."""
        if not self.revoked:
            self.revoked, self.revoked_at = True, timezone.now()
            self.save(update_fields=["revoked", "revoked_at"])
        forget(self.key_hash)

    def scope(self, cluster_ids: Any = None) -> TokenScope:
        clusters = None
        if self.limited:
            ids = cluster_ids if cluster_ids is not None else \
                self.clusters.values_list("pk", flat=True)
            clusters = frozenset(int(pk) for pk in ids)
        return TokenScope(clusters=clusters, see_only=self.see_only)


def resolve_token(key_hash: str) -> Resolved | None:
    """The resolver of ``twin.core.tokens``: the live token with this hash (two
    queries: the row with its user, its clusters if limited; then cached)."""
    token = ApiToken.objects.select_related("user").filter(key_hash=key_hash,
                                                           revoked=False).first()
    if token is None:
        return None
    now = timezone.now()
    if token.last_used is None or now - token.last_used >= LAST_USED_EVERY:
        ApiToken.objects.filter(pk=token.pk).update(last_used=now)
    return Resolved(user=token.user,
                    auth=TokenAuth(id=token.pk, name=token.name, prefix=token.prefix,
                                   scope=token.scope()),
                    expires=token.expires)


@receiver(post_save, sender=ApiToken, dispatch_uid="twin.hardware.apitoken.saved")
@receiver(post_delete, sender=ApiToken, dispatch_uid="twin.hardware.apitoken.deleted")
def _forget(sender: Any, instance: ApiToken, **kwargs: Any) -> None:
    forget(instance.key_hash)


@receiver(m2m_changed, sender=ApiToken.clusters.through,
          dispatch_uid="twin.hardware.apitoken.clusters")
def _forget_clusters(sender: Any, instance: Any, action: str, **kwargs: Any) -> None:
    if action.startswith("post_") and isinstance(instance, ApiToken):
        forget(instance.key_hash)
