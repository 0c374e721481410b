"""Per-cluster access: which clusters a user may see, and which they may change.

The core knows the mechanism, an app the grants. ``twin.hardware`` (which owns
``Cluster``) keeps the grant rows (``ClusterGrant``: user → cluster, ``see`` or
``change``) and registers a *provider* here in its ``AppConfig.ready()``; everything
else — the API bases (``twin.core.api.access``), the admin base, the websocket
consumers, ingestion and ``/metrics`` — asks :func:`access_for` and never names the
grant model, so ``twin.core`` imports no app.

The rules, in one place:

* a superuser sees and changes every cluster;
* a user **without any grant row** sees and changes every cluster (today's behaviour:
  existing deployments and scripts keep working; grants are opt-in per user);
* a user with grant rows sees exactly the clusters granted (``see`` or ``change``)
  and changes only those granted ``change``; what Django's model permissions allow
  (the roles of ``twin.core.roles``) still applies on top;
* rows that belong to no cluster (a scenario run on parameters alone) are shared;
* an anonymous reader (``TWIN_PUBLIC_READ``) sees every cluster and changes none;
* a request made with a named API token (``twin.core.tokens``) has its user's access
  ∩ the token's scope: only the token's clusters if it names some, and no change at
  all if it is see-only — a superuser's token included.

Another tenant's object answers as if it did not exist (404, a websocket close
4404, a 400 "does not exist" for a reference in a body); a cluster one may see but
not change answers 403 to a write.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet

__all__ = ["CHANGE", "EVERYTHING", "SEE", "ClusterAccess", "access_for", "register_provider"]

SEE, CHANGE = "see", "change"


@dataclass(frozen=True)
class ClusterAccess:
    """What one user may do: ``None`` means every cluster."""

    see: frozenset[int] | None
    change: frozenset[int] | None

    @classmethod
    def of(cls, grants: Iterable[tuple[int, str]]) -> ClusterAccess:
        """From ``(cluster_id, level)`` rows; no rows: every cluster."""
        rows = list(grants)
        if not rows:
            return EVERYTHING
        return cls(see=frozenset(c for c, _ in rows),
                   change=frozenset(c for c, level in rows if level == CHANGE))

    @property
    def restricted(self) -> bool:
        """Limited in any way: to some clusters, or (a see-only token) to no change."""
        return self.see is not None or self.change is not None

    def can_see(self, cluster_id: Any) -> bool:
        return cluster_id is None or self.see is None or int(cluster_id) in self.see

    def can_change(self, cluster_id: Any) -> bool:
        return cluster_id is None or self.change is None or int(cluster_id) in self.change

    def allows(self, cluster_id: Any, level: str) -> bool:
        return self.can_change(cluster_id) if level == CHANGE else self.can_see(cluster_id)

    def filter(self, queryset: QuerySet[Any], path: str, level: str = SEE) -> QuerySet[Any]:
        """``queryset`` without the rows of clusters beyond ``level``; ``path`` leads
        from the model to the cluster's id (``"cluster"``, ``"rack__cluster"``, ``"pk"``
        for the clusters themselves). Rows with no cluster stay (they are shared)."""
        ids = self.change if level == CHANGE else self.see
        if ids is None:
            return queryset
        condition = Q(**{f"{path}__in": sorted(ids)})
        if path not in ("pk", "id"):
            condition |= Q(**{f"{path}__isnull": True})
        return queryset.filter(condition)


EVERYTHING = ClusterAccess(see=None, change=None)
_READ_ONLY = ClusterAccess(see=None, change=frozenset())

Provider = Callable[[Any], Iterable[tuple[int, str]]]
_provider: Provider | None = None


def register_provider(provider: Provider) -> None:
    """Called by the app that stores grants: ``provider(user)`` yields the user's
    ``(cluster_id, level)`` rows."""
    global _provider
    _provider = provider


def access_for(user: Any, holder: Any = None) -> ClusterAccess:
    """The user's access: one query for a user who is not a superuser, kept on
    ``holder`` (the request) when given, so a request reads its grants once and the
    next request reads them afresh (a user object may outlive a request).

    A user authenticated with a named token carries the token's scope
    (``twin.core.tokens.SCOPE_ATTRIBUTE``, read here by name: ``tokens`` imports this
    module); the answer is then the user's access ∩ that scope."""
    if user is None or not getattr(user, "is_authenticated", False):
        return _READ_ONLY
    scope = getattr(user, "twin_token_scope", None)
    if getattr(user, "is_superuser", False) or _provider is None:
        return EVERYTHING if scope is None else scope.limit(EVERYTHING)  # type: ignore[no-any-return]
    cached = getattr(holder, "_twin_cluster_access", None)
    if cached is not None and cached[0] == (user.pk, scope):
        return cached[1]  # type: ignore[no-any-return]
    access = ClusterAccess.of(_provider(user))
    if scope is not None:
        access = scope.limit(access)
    if holder is not None:
        holder._twin_cluster_access = ((user.pk, scope), access)
    return access
