"""Backup and restore of the whole twin: the database with the database's own tools,
and the Redis state that holds accepted writes.

A backup is a directory (``manage.py backup DIR``, ``manage.py restore DIR``):

* ``database.pgdump`` — PostgreSQL: ``pg_dump --format=custom`` (one consistent
  snapshot: pg_dump reads in one repeatable-read transaction, so a backup taken
  while the twin runs is whole); restored by ``pg_restore --single-transaction``
  into an *empty* database (``createdb`` one), all or nothing.
  ``database.sqlite3`` — SQLite: the online backup API's copy (also one snapshot).
* ``redis.msgpack`` — the Redis keys that hold what the database does not yet:
  every key under ``TELEMETRY_REDIS_PREFIX`` (the ingest stream of accepted,
  not yet applied batches; the minutes accumulated but not yet written; the
  agents' sequence numbers, so a resent batch is still known as a duplicate; the
  alert rules' damping state; the live state, which ticks would rebuild within
  seconds anyway) and the Celery queues (queued scenario runs, builds, drains;
  with kombu's unacked messages). Each as Redis' own ``DUMP`` with its TTL,
  restored with ``RESTORE … REPLACE``. Not kept: the channel layer's groups (the
  browsers reconnect), the cached aggregates (rebuilt; every domain is bumped
  after a restore), the login throttle.
* ``manifest.json`` — when, from which engine, the applied migrations, the rows
  of every table and the Redis keys; a restore checks the migrations and
  compares the counts before it says it is done.

The database is dumped first, Redis read after it: an accepted batch that a
worker applied in between is in both, never in neither (the worker deletes a
stream entry only after applying it).
"""
from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import redis
from django.conf import settings
from django.db import connection

__all__ = ["BackupError", "backup", "redis_patterns", "restore", "table_counts"]

MANIFEST = "manifest.json"
REDIS_FILE = "redis.msgpack"
PG_FILE = "database.pgdump"
SQLITE_FILE = "database.sqlite3"
FORMAT = 1


class BackupError(Exception):
    """A backup or restore that cannot go on; the message says what to do."""


def redis_patterns() -> list[str]:
    """The key patterns a backup keeps (see the module doc)."""
    prefix = settings.TELEMETRY_REDIS_PREFIX
    queues = {settings.CELERY_TASK_DEFAULT_QUEUE, settings.TWIN_TELEMETRY_QUEUE}
    patterns = [f"{prefix}:*", "unacked", "unacked_index"]
    for queue in sorted(queues):
        # kombu's list per queue, and its priority lists (queue + "\x06\x16" + n)
        patterns += [queue, f"{queue}\x06\x16*"]
    return patterns


def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=5,
                                socket_timeout=60)


def _redis_keys(client: redis.Redis) -> Iterator[bytes]:
    seen: set[bytes] = set()
    for pattern in redis_patterns():
        keys = ([pattern.encode()] if "*" not in pattern
                else client.scan_iter(match=pattern, count=1000))
        for key in keys:
            if key not in seen:
                seen.add(key)
                yield key


def table_counts() -> dict[str, int]:
    """Rows of every table of the database (Django's and ours)."""
    counts = {}
    with connection.cursor() as cursor:
        for table in sorted(connection.introspection.table_names(cursor)):
            cursor.execute(f"SELECT count(*) FROM {connection.ops.quote_name(table)}")
            counts[table] = int(cursor.fetchone()[0])
    return counts


def _migrations() -> list[list[str]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT app, name FROM django_migrations ORDER BY app, name")
        return [[app, name] for app, name in cursor.fetchall()]


def _pg_env() -> dict[str, str]:
    db = settings.DATABASES["default"]
    env = dict(os.environ)
    for var, key in (("PGHOST", "HOST"), ("PGPORT", "PORT"), ("PGUSER", "USER"),
                     ("PGPASSWORD", "PASSWORD"), ("PGDATABASE", "NAME")):
        if db.get(key):
            env[var] = str(db[key])
    return env


def _tool(name: str) -> str:
    path = shutil.which(name)
    if not path:
        raise BackupError(f"{name} is not installed: install PostgreSQL's client tools "
                          f"(apt-get install postgresql-client) matching the server")
    return path


def _run(argv: list[str], env: dict[str, str]) -> None:
    result = subprocess.run(argv, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise BackupError(f"{Path(argv[0]).name} failed: {last}")


def backup(directory: Path, *, with_redis: bool = True) -> dict[str, Any]:
    """Write a backup into ``directory`` (new or empty); returns the manifest."""
    directory = Path(directory)
    if directory.exists() and any(directory.iterdir()):
        raise BackupError(f"{directory} is not empty: give a new directory for the backup")
    directory.mkdir(parents=True, exist_ok=True)
    vendor = connection.vendor
    if vendor == "postgresql":
        _run([_tool("pg_dump"), "--format=custom", "--no-owner", "--no-privileges",
              "--file", str(directory / PG_FILE)], _pg_env())
    elif vendor == "sqlite":
        source = sqlite3.connect(str(settings.DATABASES["default"]["NAME"]))
        target = sqlite3.connect(str(directory / SQLITE_FILE))
        try:
            source.backup(target)
        finally:
            target.close()
            source.close()
    else:
        raise BackupError(f"no backup for a {vendor} database (PostgreSQL or SQLite)")
    manifest: dict[str, Any] = {
        "format": FORMAT, "created": dt.datetime.now(dt.UTC).isoformat(),
        "engine": vendor, "migrations": _migrations(), "tables": table_counts(),
        "redis_keys": None,
    }
    if with_redis:
        client = _redis()
        n = 0
        with open(directory / REDIS_FILE, "wb") as out:
            for key in _redis_keys(client):
                with client.pipeline(transaction=False) as pipe:
                    pipe.pttl(key)
                    pipe.dump(key)
                    ttl, dumped = pipe.execute()
                if dumped is None:  # expired or deleted meanwhile
                    continue
                out.write(msgpack.packb([key, max(int(ttl), 0), dumped]))
                n += 1
        manifest["redis_keys"] = n
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2))
    return manifest


def _read_manifest(directory: Path) -> dict[str, Any]:
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise BackupError(f"{directory} holds no backup ({MANIFEST} is missing)")
    manifest: dict[str, Any] = json.loads(path.read_text())
    if manifest.get("format") != FORMAT:
        raise BackupError(f"{path}: backup format {manifest.get('format')!r}, this twin "
                          f"reads format {FORMAT}")
    return manifest


def restore(directory: Path, *, with_redis: bool = True) -> dict[str, Any]:
    """Restore the backup in ``directory`` into the (empty) database and Redis of the
    settings; returns the manifest. Raises :class:`BackupError` before writing
    anything when the database is not empty or the engines differ."""
    from twin.core import aggregates

    directory = Path(directory)
    manifest = _read_manifest(directory)
    vendor = connection.vendor
    if manifest["engine"] != vendor:
        raise BackupError(f"the backup is of a {manifest['engine']} database, the settings "
                          f"point at {vendor}: restore into the same kind")
    with connection.cursor() as cursor:
        existing = connection.introspection.table_names(cursor)
    if existing:
        name = settings.DATABASES["default"]["NAME"]
        raise BackupError(f"database {name} is not empty ({len(existing)} tables): restore "
                          f"into a new, empty database (createdb, or a new SQLite path)")
    if vendor == "postgresql":
        _run([_tool("pg_restore"), "--no-owner", "--no-privileges", "--exit-on-error",
              "--single-transaction", "--dbname", settings.DATABASES["default"]["NAME"],
              str(directory / PG_FILE)], _pg_env())
    else:
        connection.close()
        source = sqlite3.connect(str(directory / SQLITE_FILE))
        target = sqlite3.connect(str(settings.DATABASES["default"]["NAME"]))
        try:
            source.backup(target)
        finally:
            target.close()
            source.close()
    connection.close()
    counts = table_counts()
    if counts != manifest["tables"]:
        wrong = sorted(t for t in set(counts) | set(manifest["tables"])
                       if counts.get(t) != manifest["tables"].get(t))
        raise BackupError(f"restored rows differ from the backup's in {', '.join(wrong[:5])}")
    if with_redis and manifest.get("redis_keys") is not None:
        client = _redis()
        with open(directory / REDIS_FILE, "rb") as dump, client.pipeline(
                transaction=False) as pipe:
            for i, (key, ttl, dumped) in enumerate(msgpack.Unpacker(dump, raw=True)):
                pipe.restore(key, ttl, dumped, replace=True)
                if i % 500 == 499:
                    pipe.execute()
            pipe.execute()
    for domain in aggregates.DOMAINS:  # what is cached was computed from other rows
        aggregates.bump(domain)
    return manifest
