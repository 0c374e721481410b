"""Aggregates cached in Redis, invalidated by every committed write to the tables they read.

Why: the cluster summary is about ten SQL aggregates (~25 ms on the demo cluster,
about a second at a million cards) and every dashboard asks for it; with several web
processes a per-process cache would be wrong after a write in another process, so the
cache is Redis (``CACHES["aggregates"]``), shared by all of them.

Correctness first, so invalidation does not depend on remembering it:

* A *domain* names the tables an aggregate reads (:data:`DOMAINS`: ``inventory`` is
  every table of the hardware app, ``alerts`` the alert table). Each domain has a
  version in Redis, a random token. A cached value is stored under the version it
  was computed with; replacing the version orphans every earlier value (it expires
  after ``TWIN_AGGREGATE_TTL_S``, 60 s by default).
* Every database connection of every process (web, Celery workers, management
  commands) runs its SQL through :func:`watch_writes`, a Django execute wrapper
  installed when the connection opens (``twin.core.apps``). A statement that
  INSERTs, UPDATEs, DELETEs or TRUNCATEs a table of a domain bumps that
  domain (:func:`bump`) when it has run, and again when its transaction commits (the second
  bump orphans what a concurrent reader computed from the rows before the
  commit). So ``save()``, ``delete()``, ``QuerySet.update()``,
  ``bulk_create``, raw deletes and raw SQL through Django's cursor are all seen.
  SQL that bypasses Django's cursor (psycopg's COPY, psql by hand) is not: the
  cluster builder's COPY runs in the transaction that also INSERTs the cluster row,
  so its commit bumps; anything else calls :func:`bump` itself.
* The last bump comes after the commit, so a reader that took an earlier version
  computes from the old rows and stores them under that version, which nobody reads
  any more. The one window is between a commit and its bump (one Redis round trip).
* Redis away: a read computes from the database (right, uncached); a bump that
  fails is logged, and the TTL bounds how long a value computed before it may be
  served once Redis is back (without persistence a restarted Redis holds none).
"""
from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from django.apps import apps
from django.conf import settings
from django.core.cache import BaseCache, caches
from django.db.backends.base.base import BaseDatabaseWrapper

from twin.core.perprocess import PerProcess
from twin.core.unavailable import REDIS_ERRORS

__all__ = ["DOMAINS", "CachedListMixin", "bump", "cached", "domains_written", "install",
           "version", "watch_writes"]

log = logging.getLogger(__name__)

T = TypeVar("T")

DOMAINS: dict[str, tuple[str, ...]] = {
    # app labels ("hardware": every model of it) or "app.Model"; "-app.Model" leaves
    # one out (a build request is a job record: no aggregate reads it)
    "inventory": ("hardware", "-hardware.ClusterBuild"),
    "alerts": ("telemetry.Alert", "auth.User"),  # (who acknowledged: a username)
    "capping": ("facility.CappingPolicy",),  # (the live tick's policy lookup)
    # who holds which card at what priority (the live tick's priority capping weights)
    "jobs": ("jobs.Job", "jobs.Allocation"),
    # the plant as rows (the summary's plant PUE); not the per-tick history or audit
    "facility": ("facility.Site", "facility.PowerElement", "facility.CoolingElement",
                 "facility.RackFacility"),
}
"""Domain → the models whose tables it covers."""

_WRITE = re.compile(r"^\s*(INSERT|UPDATE|DELETE|TRUNCATE|WITH|MERGE|REPLACE|COPY|ALTER|DROP)\b",
                    re.IGNORECASE)
_TARGET = re.compile(
    r"^\s*(?:INSERT\s+(?:OR\s+\w+\s+)?INTO|UPDATE|DELETE\s+FROM|REPLACE\s+INTO)\s+"
    r"[`\"\[]?(\w+)[`\"\]]?", re.IGNORECASE)
_tables: dict[str, str] | None = None  # table name (lower case) → domain
_mention: re.Pattern[str] | None = None


def _table_domains() -> tuple[dict[str, str], re.Pattern[str]]:
    """The table → domain map, built once from the app registry (with M2M tables)."""
    global _tables, _mention
    if _tables is None or _mention is None:
        tables: dict[str, str] = {}
        for domain, labels in DOMAINS.items():
            left_out = {apps.get_model(label[1:]) for label in labels if label[0] == "-"}
            for label in labels:
                if label[0] == "-":
                    continue
                models = ([apps.get_model(label)] if "." in label
                          else list(apps.get_app_config(label).get_models()))
                for model in models:
                    if model in left_out:
                        continue
                    tables[model._meta.db_table.lower()] = domain
                    for field in model._meta.local_many_to_many:
                        tables[field.remote_field.through._meta.db_table.lower()] = domain
        _mention = re.compile(r"\b(" + "|".join(map(re.escape, sorted(tables))) + r")\b",
                              re.IGNORECASE)
        _tables = tables
    return _tables, _mention


def domains_written(sql: str) -> set[str]:
    """The domains whose tables ``sql`` writes: its target table for a plain
    INSERT/UPDATE/DELETE, any table it names for other writes (WITH …, TRUNCATE …);
    nothing for a read (``SELECT … FOR UPDATE`` included)."""
    if not _WRITE.match(sql):
        return set()
    tables, mention = _table_domains()
    target = _TARGET.match(sql)
    if target:
        domain = tables.get(target.group(1).lower())
        return {domain} if domain else set()
    return {tables[name.lower()] for name in mention.findall(sql)}


_shared: PerProcess[BaseCache] = PerProcess(lambda config: caches.create_connection("aggregates"))


def _cache() -> BaseCache:
    """The ``aggregates`` cache, one instance per process (and configuration).

    Why not ``caches["aggregates"]``: Django keeps one cache object per request
    context, and Django's Redis backend one connection pool per object, so every
    request opened (and dropped) a Redis connection of its own: a TCP connect, a
    handshake and a client-info exchange, about a quarter of the cluster summary's
    CPU. redis-py's pool is thread-safe, so every request thread shares this one.
    A changed ``CACHES`` setting (tests) makes a new one."""
    return _shared.get(repr(settings.CACHES["aggregates"]))


def _version_key(domain: str) -> str:
    return f"version:{domain}"


class _Bump:
    """An on-commit callback for one domain; equal per domain, so a transaction that
    writes a thousand rows registers one bump."""

    def __init__(self, domain: str) -> None:
        self.domain = domain

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Bump) and other.domain == self.domain

    def __hash__(self) -> int:
        return hash(self.domain)

    def __call__(self) -> None:
        bump(self.domain)


def bump(domain: str) -> None:
    """Replace ``domain``'s version: every value cached under the old one is dead."""
    try:
        _cache().set(_version_key(domain), uuid.uuid4().hex, timeout=None)
    except REDIS_ERRORS as exc:
        log.warning("aggregates: could not bump %s (%s); cached values may be served "
                    "until they expire", domain, exc)


def version(domain: str) -> str:
    """The domain's current version (made if Redis holds none)."""
    return _versions((domain,))[0]


def _versions(domains: tuple[str, ...]) -> list[str]:
    """The current versions of ``domains``, in one round trip when they exist."""
    cache = _cache()
    keys = [_version_key(d) for d in domains]
    found = cache.get_many(keys)
    for key in keys:
        if key not in found:
            cache.add(key, uuid.uuid4().hex, timeout=None)
            found[key] = cache.get(key)
    return [str(found[key]) for key in keys]


def cached(domain: str | tuple[str, ...], key: str, compute: Callable[[], T]) -> T:
    """``compute()``'s value, from Redis if it was computed under the current version
    of ``domain`` (of every domain of a tuple). Redis away: ``compute()`` (uncached)."""
    cache = _cache()
    domains = (domain,) if isinstance(domain, str) else domain
    try:
        versions = ":".join(f"{d}={v}" for d, v in zip(domains, _versions(domains),
                                                       strict=True))
        full_key = f"{versions}:{key}"
        value = cache.get(full_key)
    except REDIS_ERRORS:
        return compute()
    if value is not None:
        return value  # type: ignore[no-any-return]
    value = compute()
    try:
        cache.set(full_key, value)
    except REDIS_ERRORS:
        pass
    return value


class CachedListMixin:
    """A DRF list view whose pages are cached under its ``cache_domains``' versions.

    The key is the user, the host and the full path with its query: a page is only
    ever served to the user it was computed for (whatever that user may see), for
    the same filters and page. Errors (a bad filter: 400) are raised, not cached.
    """

    cache_domains: tuple[str, ...] = ()

    def list(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        from rest_framework.response import Response

        key = (f"list:{type(self).__name__}:{request.user.pk}:{request.scheme}:"
               f"{request.get_host()}:{request.get_full_path()}")
        data = cached(self.cache_domains, key, lambda: _plain(
            super(CachedListMixin, self).list(  # type: ignore[misc]
                request, *args, **kwargs).data))
        return Response(data)


def _plain(data: Any) -> Any:
    """The data as JSON types: DRF's ``Hyperlink`` strings carry their model instance,
    which would be pickled (and unpickled on every hit) with them."""
    from rest_framework.utils.encoders import JSONEncoder

    return json.loads(json.dumps(data, cls=JSONEncoder))


def watch_writes(execute: Callable[..., Any], sql: str, params: Any, many: bool,
                 context: dict[str, Any]) -> Any:
    """Django execute wrapper: run the statement, then bump every domain it wrote at
    once (its own transaction, and a test's, reads the new rows) and again when its
    transaction commits (a reader that computed from the old rows meanwhile stored
    them under the first bump's version)."""
    result = execute(sql, params, many, context)
    if isinstance(sql, str):
        written = domains_written(sql)
        if written:
            connection = context["connection"]
            pending = {func for _, func, _ in connection.run_on_commit}
            for domain in written:
                bump(domain)
                bump_it = _Bump(domain)
                if connection.in_atomic_block and bump_it not in pending:
                    connection.on_commit(bump_it)
    return result


def install(sender: Any = None, connection: BaseDatabaseWrapper | None = None,
            **kwargs: Any) -> None:
    """``connection_created`` receiver: put :func:`watch_writes` on the connection once."""
    if connection is not None and watch_writes not in connection.execute_wrappers:
        connection.execute_wrappers.append(watch_writes)
