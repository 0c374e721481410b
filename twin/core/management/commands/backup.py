"""``manage.py backup DIR``: the database (pg_dump, or SQLite's backup API) and the
Redis state that holds accepted writes, into a new directory (``twin.core.backup``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from twin.core.backup import BackupError, backup

__all__ = ["Command"]


class Command(BaseCommand):
    help = "Back up the database and the Redis state that matters into a new directory."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("directory", type=Path, help="a new (or empty) directory")
        parser.add_argument("--no-redis", action="store_true",
                            help="the database only (Redis is away, or kept otherwise)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            manifest = backup(options["directory"], with_redis=not options["no_redis"])
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        rows = sum(manifest["tables"].values())
        keys = manifest["redis_keys"]
        self.stdout.write(f"backed up {rows:,} rows in {len(manifest['tables'])} tables"
                          + (f" and {keys:,} Redis keys" if keys is not None else "")
                          + f" to {options['directory']}")
