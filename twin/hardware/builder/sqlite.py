"""SQLite: ``executemany`` in chunks; ids above ``max(id)`` under the write lock."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from django.db import connection, models

from twin.hardware.builder.columns import Block, uuid_hex
from twin.hardware.builder.writer import Writer, fill_defaults, model_fields, table_models

__all__ = ["SqliteWriter"]


class SqliteWriter(Writer):
    """``executemany`` in chunks inside the IMMEDIATE transaction."""

    def reserve(self, table: str, count: int) -> int:
        model = table_models()[table]
        db_table = model._meta.db_table
        with connection.cursor() as cur:
            cur.execute(f'SELECT COALESCE(MAX(id), 0) FROM "{db_table}"')
            top = cur.fetchone()[0]
            cur.execute("SELECT seq FROM sqlite_sequence WHERE name = %s", [db_table])
            row = cur.fetchone()
        return int(max(top, row[0] if row else 0)) + 1

    def _column(self, field: models.Field, value: Any, n: int) -> list[Any]:
        if isinstance(value, np.ndarray):
            if value.dtype.kind == "S":
                if field.get_internal_type() == "UUIDField":
                    return [v.decode() for v in uuid_hex(value).tolist()]
                return [v.decode() for v in value.tolist()]
            return value.tolist()
        value = field.get_db_prep_save(value, connection)
        return [value] * n

    def write(self, table: str, blocks: Iterator[Block]) -> int:
        model = table_models()[table]
        fields = model_fields(model)
        cols = ", ".join(connection.ops.quote_name(f.column) for f in fields)
        sql = (f"INSERT INTO {connection.ops.quote_name(model._meta.db_table)} ({cols}) "
               f"VALUES ({', '.join(['%s'] * len(fields))})")
        written = 0
        with connection.cursor() as cur:
            for block in blocks:
                values = fill_defaults(model, block.values)
                columns = [self._column(f, values[f.column], block.n) for f in fields]
                cur.executemany(sql, list(zip(*columns, strict=True)))
                written += block.n
                self.progress(block.n, table)
        return written
