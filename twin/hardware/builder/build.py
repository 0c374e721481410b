"""``build_cluster``: plan, reserve ids, generate and write, in one transaction."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from twin.hardware.builder.delete import delete_cluster
from twin.hardware.builder.plan import BuildError, resolve
from twin.hardware.builder.postgres import PostgresWriter
from twin.hardware.builder.rows import Generator, IdBases
from twin.hardware.builder.sqlite import SqliteWriter
from twin.hardware.builder.writer import Writer
from twin.hardware.signals import cluster_built

__all__ = ["Progress", "build_cluster"]

Progress = Callable[[float, str], None]


def build_cluster(
    preset: str,
    *,
    name: str | None = None,
    supernodes: int | None = None,
    rack_budget_w: int | None = None,
    replace: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Build ``preset`` into the database in one transaction; see the package doc
    (``twin.hardware.builder``).

    ``progress(fraction, message)`` is called per chunk. Returns the summary
    (counts, power, racks per supernode, seconds). Raises ``BuildError``.
    """
    from twin.hardware.models import Cluster

    started = time.perf_counter()
    report = progress or (lambda fraction, message: None)
    plan, cluster_name, accelerator_id = resolve(preset, name, supernodes, rack_budget_w,
                                                 replace)
    total = plan.rows
    done = 0

    def advance(rows: int, table: str) -> None:
        nonlocal done
        done += rows
        report(min(0.95, 0.95 * done / total), f"{table}s: {done:,} of {total:,} rows")

    postgres = connection.vendor == "postgresql"
    writer: Writer = (
        PostgresWriter(advance, getattr(settings, "TWIN_BUILDER_SET_BASED_FK", True))
        if postgres else SqliteWriter(advance))
    report(0.0, f"planning {plan.cards:,} cards in {plan.racks:,} racks")
    with transaction.atomic():
        if replace:
            old = (Cluster.objects.select_for_update().filter(name=cluster_name)
                   .values_list("pk", flat=True).first())
            if old is not None:
                report(0.0, f"deleting the old cluster {cluster_name!r}")
                delete_cluster(old)
        try:
            with transaction.atomic():
                cluster = Cluster.objects.create(
                    name=cluster_name, preset=plan.preset.name,
                    description=plan.preset.description)
        except IntegrityError as exc:
            raise BuildError("name", f"A cluster named {cluster_name!r} was created "
                                     f"meanwhile; pass --replace to rebuild it.") from exc
        ids = IdBases(**{table: writer.reserve(table, count)
                         for table, count in (("supernode", plan.supernodes),
                                              ("rack", plan.racks),
                                              ("server", plan.servers),
                                              ("card", plan.cards),
                                              ("device", plan.devices),
                                              ("link", plan.links))})
        gen = Generator(plan, cluster.pk, cluster_name, accelerator_id, ids,
                        timezone.now())
        writer.start()
        ranges: dict[str, tuple[int, int]] = {}
        for table, blocks, count in gen.tables():
            written = writer.write(table, blocks())
            if written != count:  # the plan and the generator must agree
                raise RuntimeError(f"wrote {written} {table} rows, planned {count}")
            ranges[table] = (getattr(ids, table), count)
        report(0.96, "checking constraints")
        writer.finish(ranges)
        if postgres and writer.fk_mode == "triggers":
            # Run the queued row-by-row checks now, inside the build (its error,
            # its progress), then give the caller's transaction back its
            # deferred constraints (Django declares them INITIALLY DEFERRED).
            with connection.cursor() as cur:
                cur.execute("SET CONSTRAINTS ALL IMMEDIATE")
                cur.execute("SET CONSTRAINTS ALL DEFERRED")
        # Apps above hardware add their rows (the facility's plant) in this transaction.
        cluster_built.send(sender=Cluster, cluster=cluster,
                           progress=lambda f, m: report(0.97 + 0.02 * f, m))
        report(0.99, "committing")
    if postgres:
        # A bulk load leaves the planner with no statistics until autovacuum
        # comes round (minutes): the dashboard's floor query took 5.9 s instead
        # of 1.4 s on a fresh million-card cluster. ANALYZE samples a fixed
        # number of rows per table, so this costs about a second at any size.
        report(0.995, "updating planner statistics")
        from twin.hardware.models import Card, Link, NetworkDevice, Rack, Server, SuperNode

        with connection.cursor() as cur:
            for model in (SuperNode, Rack, Server, Card, NetworkDevice, Link):
                cur.execute(f"ANALYZE {connection.ops.quote_name(model._meta.db_table)}")
    seconds = time.perf_counter() - started
    report(1.0, f"built {cluster_name!r} in {seconds:.1f} s")
    summary = plan.summary()
    # The plant the facility app built (if any) computes the PUE from its parts; the
    # preset's per-rack PUE is only the fallback (``pue_source``).
    from twin.hardware.signals import plant_pue

    computed = next((v for _, v in plant_pue.send(Cluster, cluster_id=cluster.pk)
                     if isinstance(v, float)), None)
    if computed is not None:
        summary = {**summary, "pue": round(computed, 4),
                   "facility_power_w": round(summary["it_power_w"] * computed)}
    summary["pue_source"] = "plant" if computed is not None else "nameplate"
    return {
        "cluster_id": cluster.pk,
        "name": cluster_name,
        **summary,
        "seconds": round(seconds, 3),
        "rows": total + 1,
        "fk_checks": writer.fk_mode,
    }
