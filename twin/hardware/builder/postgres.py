"""PostgreSQL: binary COPY of numpy blocks and set-wise foreign-key checks.

Each block is packed into one numpy structured array whose bytes *are* the
COPY rows (``pack_binary``); ids come from sequences advanced under an
``ALTER SEQUENCE`` lock (``PostgresWriter.reserve``).
"""
from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from django.db import IntegrityError, connection, models, transaction

from twin.hardware.builder.columns import Block
from twin.hardware.builder.writer import Writer, fill_defaults, model_fields, table_models

__all__ = ["PG_HEADER", "PG_TRAILER", "PostgresWriter", "check_foreign_keys", "pack_binary",
           "pg_kind"]

PG_EPOCH = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


def pg_kind(db_type: str) -> str:
    t = db_type.lower()
    if t in ("bigint", "bigserial"):
        return "i8"
    if t in ("integer", "serial"):
        return "i4"
    if t == "smallint":
        return "i2"
    if t == "double precision":
        return "f8"
    if t == "real":
        return "f4"
    if t.startswith("timestamp"):
        return "ts"
    if t == "uuid":
        return "uuid"
    if t == "boolean":
        return "bool"
    if t == "jsonb":
        return "jsonb"
    if t.startswith("varchar") or t == "text" or t.startswith("char"):
        return "text"
    raise RuntimeError(f"no binary COPY encoder for column type {db_type!r}")


def _text_array(value: Any) -> np.ndarray | bytes:
    if isinstance(value, np.ndarray):
        return value
    return str(value).encode()


def pack_binary(kinds: list[tuple[str, str]], block: Block) -> bytes:
    """One block as PostgreSQL binary COPY rows (no header/trailer).

    Each row is ``int16 field count`` then per field ``int32 length`` and the
    big-endian value (length −1 and no bytes for NULL). Fixed-width text makes
    every row of a block the same layout, so a numpy structured array holds
    the block and ``tobytes()`` is the wire format.
    """
    n, values = block.n, block.values
    fields: list[tuple[str, str]] = [("nf", ">i2")]
    assign: list[tuple[str, int, Any]] = []
    for i, (column, kind) in enumerate(kinds):
        value = values[column]
        if value is None:
            fields.append((f"l{i}", ">i4"))
            assign.append((f"l{i}", -1, None))
            continue
        if kind == "ts":
            value = np.int64((value - PG_EPOCH) // dt.timedelta(microseconds=1))
            dtype, size = ">i8", 8
        elif kind == "uuid":
            if isinstance(value, uuid.UUID):
                value = value.bytes
            dtype, size = "S16", 16
        elif kind == "bool":
            dtype, size = "u1", 1
        elif kind == "jsonb":
            value = b"\x01" + json.dumps(value).encode()
            dtype, size = f"S{len(value)}", len(value)
        elif kind == "text":
            value = _text_array(value)
            size = value.dtype.itemsize if isinstance(value, np.ndarray) else len(value)
            dtype = f"S{size}"
        else:
            dtype, size = f">{kind}", int(kind[1])
        fields.append((f"l{i}", ">i4"))
        fields.append((f"v{i}", dtype))
        assign.append((f"l{i}", size, None))
        assign.append((f"v{i}", 0, value))
    rows = np.empty(n, dtype=np.dtype(fields))
    rows["nf"] = len(kinds)
    for name, length, value in assign:
        rows[name] = length if name[0] == "l" else value
    return rows.tobytes()


PG_HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"
PG_TRAILER = b"\xff\xff"


class PostgresWriter(Writer):
    """``COPY … FROM STDIN (FORMAT BINARY)``, one statement per table.

    Foreign keys: PostgreSQL checks each one row by row (an RI trigger runs
    a ``SELECT … FOR KEY SHARE`` per row and key): ~20 M checks, ~5 µs each,
    for a million-card cluster, more than the COPY itself. Where the role may
    (a superuser, or PostgreSQL ≥ 15 with ``GRANT SET ON PARAMETER
    session_replication_role``), the writer turns those triggers off for the
    COPY with ``SET LOCAL session_replication_role = replica`` and checks
    every foreign key of the new rows *set-wise* instead (one anti-join per
    table, ``finish``) in the same transaction, having locked the rows
    outside the build that they point at (the accelerator type) ``FOR KEY
    SHARE`` as the triggers would. A violation raises and rolls everything
    back. Unique and check constraints are indexes and CHECKs, enforced
    either way. Without the privilege the triggers run as usual.
    """

    def __init__(self, progress: Callable[[int, str], None],
                 set_based_fk: bool = True) -> None:
        super().__init__(progress)
        self.set_based_fk = set_based_fk
        self.fk_mode = "triggers"

    def start(self) -> None:
        if not self.set_based_fk:
            return
        from django.db import DatabaseError

        try:
            with transaction.atomic(), connection.cursor() as cur:
                cur.execute("SET LOCAL session_replication_role = replica")
        except DatabaseError:
            self.fk_mode = "triggers"   # not allowed: the RI triggers check each row
        else:
            self.fk_mode = "set-based"

    def finish(self, ranges: dict[str, tuple[int, int]]) -> None:
        if self.fk_mode != "set-based":
            return
        from twin.hardware.models import Cluster

        written = {table_models()[t] for t in ranges} | {Cluster}
        with connection.cursor() as cur:
            cur.execute("SET LOCAL session_replication_role = origin")
            cur.execute("SET LOCAL work_mem = '256MB'")
            for table, (first, count) in ranges.items():
                if count:
                    check_foreign_keys(table_models()[table], first, first + count - 1,
                                       lock_outside=written)

    def reserve(self, table: str, count: int) -> int:
        """First id of ``count`` consecutive ids no one else will get.

        ``ALTER SEQUENCE`` takes a lock that blocks other sessions' ``nextval``
        until this transaction ends, so reading ``last_value`` and moving it
        on with ``setval`` cannot race; ids of a rolled-back build are skipped,
        as sequences always do.
        """
        model = table_models()[table]
        db_table = model._meta.db_table
        with connection.cursor() as cur:
            cur.execute("SELECT pg_get_serial_sequence(%s, %s)", [db_table, "id"])
            seq = cur.fetchone()[0]
            cur.execute(f"ALTER SEQUENCE {seq} INCREMENT BY 1")
            cur.execute(f"SELECT last_value, is_called FROM {seq}")
            last, called = cur.fetchone()
            first = last + 1 if called else last
            if count:
                cur.execute("SELECT setval(%s, %s, true)", [seq, first + count - 1])
        return int(first)

    def write(self, table: str, blocks: Iterator[Block]) -> int:
        model = table_models()[table]
        fields = model_fields(model)
        kinds = [(f.column, pg_kind(f.db_type(connection))) for f in fields]
        cols = ", ".join(connection.ops.quote_name(f.column) for f in fields)
        sql = f"COPY {connection.ops.quote_name(model._meta.db_table)} ({cols}) " \
              f"FROM STDIN (FORMAT BINARY)"
        written = 0
        with connection.cursor() as cur:
            raw = cur.cursor
            with raw.copy(sql) as copy:
                copy.write(PG_HEADER)
                for block in blocks:
                    data = pack_binary(kinds, Block(table, block.n,
                                                    fill_defaults(model, block.values)))
                    copy.write(data)
                    written += block.n
                    self.progress(block.n, table)
                copy.write(PG_TRAILER)
        return written


def check_foreign_keys(model: type[models.Model], lo: int, hi: int, *,
                       lock_outside: set[type[models.Model]] | None = None) -> None:
    """Check every foreign key of ``model`` rows ``lo``–``hi`` in one query.

    One pass with a LEFT JOIN per key counts values that point nowhere;
    any such row raises ``IntegrityError``. With ``lock_outside`` (the
    models written by this transaction), referenced rows of *other* tables
    are first locked ``FOR KEY SHARE``, as PostgreSQL's RI triggers do, so
    no one can delete them before this transaction commits.
    """
    q = connection.ops.quote_name
    table = q(model._meta.db_table)
    fks = [f for f in model_fields(model) if isinstance(f, models.ForeignKey)]
    if not fks:
        return
    joins, counts = [], []
    with connection.cursor() as cur:
        for i, f in enumerate(fks):
            ref = q(f.related_model._meta.db_table)
            col, key = q(f.column), q(f.target_field.column)
            if lock_outside is not None and f.related_model not in lock_outside:
                cur.execute(f"SELECT 1 FROM {ref} WHERE {key} IN (SELECT DISTINCT {col} "
                            f"FROM {table} WHERE id BETWEEN %s AND %s) FOR KEY SHARE",
                            [lo, hi])
            joins.append(f"LEFT JOIN {ref} r{i} ON r{i}.{key} = t.{col}")
            counts.append(f"count(*) FILTER (WHERE t.{col} IS NOT NULL AND r{i}.{key} IS NULL)")
        cur.execute(f"SELECT {', '.join(counts)} FROM {table} t {' '.join(joins)} "
                    f"WHERE t.id BETWEEN %s AND %s", [lo, hi])
        missing = cur.fetchone()
    bad = [f"{f.name}: {n:,}" for f, n in zip(fks, missing, strict=True) if n]
    if bad:
        raise IntegrityError(f"{model.__name__} rows {lo}–{hi} point at missing rows "
                             f"({', '.join(bad)})")

