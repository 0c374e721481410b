"""``manage.py build_facility <cluster>``: size a cluster's facility with a progress bar.

Bad input ends the command with one readable line and a non-zero exit code; nothing
is written then.
"""
from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from twin.facility.builder import FacilityError, build_facility
from twin.facility.designs import DESIGNS

__all__ = ["Command"]


class Command(BaseCommand):
    help = ("Build a cluster's facility (site, 2N power chain, CDUs, CRAHs, chillers, "
            "cooling towers or dry coolers), sized from its racks' nameplate draw, in one "
            "transaction.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("cluster", help="Cluster name or id.")
        parser.add_argument("--keep", action="store_true",
                            help="Refuse if the cluster already has a facility (default: "
                                 "replace it).")
        parser.add_argument("--design", choices=sorted(DESIGNS), default=None,
                            help="The plant's design (twin/facility/designs.py; default: "
                                 "the cluster's preset's, else standard).")
        parser.add_argument("--no-progress", action="store_true",
                            help="No progress bar (for logs).")

    def handle(self, *args: Any, **options: Any) -> None:
        from twin.hardware.models import Cluster

        name = options["cluster"]
        cluster = Cluster.objects.filter(name=name).first()
        if cluster is None and name.isdigit():
            cluster = Cluster.objects.filter(pk=int(name)).first()
        if cluster is None:
            known = ", ".join(Cluster.objects.order_by("name").values_list("name", flat=True)[:10])
            raise CommandError(f"No cluster {name!r}; known: {known or 'none (build one)'}.")
        bar = tqdm(total=1000, file=sys.stderr, unit="‰", leave=False,
                   disable=options["no_progress"],
                   bar_format="{l_bar}{bar}| {elapsed}<{remaining} {postfix}")

        def progress(fraction: float, message: str) -> None:
            bar.update(max(0, round(fraction * 1000) - bar.n))
            bar.set_postfix_str(message, refresh=False)

        try:
            result = build_facility(cluster, replace=not options["keep"],
                                    design=options["design"], progress=progress)
        except FacilityError as exc:
            raise CommandError(exc.message) from exc
        finally:
            bar.close()
        elements = ", ".join(f"{n:,} {kind}" for kind, n in sorted(result["elements"].items()))
        classes = ", ".join(f"{n:,} {c}" for c, n in result["rack_classes"].items() if n)
        rows = [("site", f"{result['name']} (id {result['site_id']})"),
                ("design", result["design"]),
                ("racks", f"{result['racks']:,} ({classes})"),
                ("elements", elements),
                ("IT load", f"{result['it_kw']:,.1f} kW nameplate"),
                ("contract", f"{result['contract_kw']:,.0f} kW"),
                ("time", f"{result['seconds']:.2f} s")]
        width = max(len(k) for k, _ in rows)
        for key, value in rows:
            self.stdout.write(f"{key:<{width}}  {value}")
