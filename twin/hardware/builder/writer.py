"""What every writer shares: the table → model map, columns and their defaults.

A writer reserves an id range per table and writes a table's blocks; the
PostgreSQL one (``postgres.py``) streams binary COPY, the SQLite one
(``sqlite.py``) runs ``executemany``. ``build_cluster`` only sees ``Writer``.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from django.db import models

from twin.hardware.builder.columns import Block, Values

__all__ = ["Writer", "fill_defaults", "model_fields", "table_models"]


def table_models() -> dict[str, type[models.Model]]:
    """The model written to each table name of a build (the generator's names)."""
    from twin.hardware.models import Card, Link, NetworkDevice, Rack, Server, SuperNode

    return {"supernode": SuperNode, "rack": Rack, "server": Server, "card": Card,
            "device": NetworkDevice, "link": Link}


def model_fields(model: type[models.Model]) -> list[models.Field]:
    """The columns a writer fills, in table order."""
    return list(model._meta.concrete_fields)


def fill_defaults(model: type[models.Model], values: Values) -> Values:
    """Columns the generator does not set (e.g. added later) take their default."""
    out = dict(values)
    for f in model_fields(model):
        if f.column not in out and f.attname not in out:
            if f.has_default():
                out[f.column] = f.get_default()
            elif f.null:
                out[f.column] = None
            else:
                raise RuntimeError(f"builder sets no value for {model.__name__}.{f.name}")
        elif f.column not in out:
            out[f.column] = out.pop(f.attname)
    return out


class Writer:
    """Writes blocks of one table at a time."""

    fk_mode = "triggers"
    """How foreign keys get checked: ``"triggers"`` (the database, row by row
    at commit) or ``"set-based"`` (``check_foreign_keys``, PostgreSQL)."""

    def __init__(self, progress: Callable[[int, str], None]) -> None:
        self.progress = progress

    def start(self) -> None:
        """Called once inside the transaction, before the first table."""

    def finish(self, ranges: dict[str, tuple[int, int]]) -> None:
        """Called after the last table with each table's (first id, count)."""

    def reserve(self, table: str, count: int) -> int:
        raise NotImplementedError

    def write(self, table: str, blocks: Iterator[Block]) -> int:
        raise NotImplementedError
