"""``manage.py restore DIR``: a backup of ``manage.py backup`` into an empty database
(and the settings' Redis), all or nothing (``twin.core.backup``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from twin.core.backup import BackupError, restore

__all__ = ["Command"]


class Command(BaseCommand):
    help = "Restore a backup into an empty database and the Redis of the settings."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("directory", type=Path, help="a directory manage.py backup wrote")
        parser.add_argument("--no-redis", action="store_true",
                            help="the database only")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            manifest = restore(options["directory"], with_redis=not options["no_redis"])
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        rows = sum(manifest["tables"].values())
        self.stdout.write(f"restored {rows:,} rows in {len(manifest['tables'])} tables"
                          + ("" if options["no_redis"] or manifest["redis_keys"] is None
                             else f" and {manifest['redis_keys']:,} Redis keys")
                          + f" from {options['directory']} (taken {manifest['created']})")
