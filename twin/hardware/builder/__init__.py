"""Build a cluster from a preset: every row at once, all or nothing, fast.

A million-card cluster is ~1 M cards, ~131 k servers, ~530 k devices and
~5 M links. Saving model instances would take hours, so the builder:

1. plans with ``twin.hardware.presets`` (counts and rack packing by
   ``simulation.power``: no rack exceeds its budget);
2. reserves an id range per table up front (PostgreSQL: the sequence is
   locked with ``ALTER SEQUENCE`` and advanced with ``setval`` in the build's
   transaction; SQLite: the write lock of the IMMEDIATE transaction covers
   ``max(id)``), so every foreign key is array arithmetic;
3. generates each table's rows as numpy column arrays per batch of
   supernodes (torus neighbours by index arithmetic, names as fixed-width
   byte strings), so memory stays bounded;
4. writes them with ``COPY … FROM STDIN (FORMAT BINARY)`` on PostgreSQL —
   each batch packed into one numpy structured array whose bytes *are* the
   COPY rows — and ``executemany`` on SQLite;
5. checks foreign keys set-wise on PostgreSQL where the role may turn the
   row-by-row RI triggers off (see ``PostgresWriter``): one anti-join per
   table instead of ~20 M single-row lookups;
6. does all of it in one transaction: a failure leaves nothing, and
   ``replace`` deletes the old cluster in that same transaction.

``docs/benchmarks.md`` (build_cluster) has the figures: ``million`` in about
a minute, at 1.0–1.2× a raw COPY of the same rows, ~240 MiB peak RSS.

Rows are valid under the models' ``clean()``: link ends follow
``COMPATIBLE_ENDPOINTS``, torus dimensions multiply to the card count, card
(supernode, index) and (server, slot) are unique, serials embed the cluster
id and UUIDs are time-ordered (version 7, ``columns.ordered_uuids``).

The package, by step: ``plan`` (validation and the plan), ``columns`` and
``rows`` (numpy column values and the row generator), ``writer`` (what both
writers share), ``postgres`` (binary COPY, set-wise foreign-key checks),
``sqlite`` (``executemany``), ``delete`` (set-based delete) and ``build``
(``build_cluster``, the transaction that ties them together).
"""
from twin.hardware.builder.build import Progress, build_cluster
from twin.hardware.builder.delete import delete_cluster
from twin.hardware.builder.plan import BuildError, check_build, plan_build
from twin.hardware.builder.postgres import check_foreign_keys
from twin.hardware.builder.rows import Generator, IdBases

__all__ = [
    "BuildError",
    "Generator",
    "IdBases",
    "Progress",
    "build_cluster",
    "check_build",
    "check_foreign_keys",
    "delete_cluster",
    "plan_build",
]
