"""``manage.py build_cluster``: build a preset cluster with a progress bar.

Bad input ends the command with one readable line and a non-zero exit code
(the ``BuildError`` message); nothing is written then.
"""
from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from twin.hardware.builder import BuildError, build_cluster, check_build
from twin.hardware.presets import PRESETS

__all__ = ["Command"]


class Command(BaseCommand):
    help = ("Build a cluster from a preset (racks, supernodes, servers, cards, network "
            "devices, links) in one transaction. --list shows the presets.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--preset", help=f"One of: {', '.join(PRESETS)}.")
        parser.add_argument("--supernodes", type=int,
                            help="Supernodes (scalable units) to build; default per preset.")
        parser.add_argument("--name", help="Cluster name; default: the preset's.")
        parser.add_argument("--rack-budget-w", type=int, dest="rack_budget_w",
                            help="Rack power budget in watts (default 40000).")
        parser.add_argument("--replace", action="store_true",
                            help="Delete a cluster of the same name first (same transaction).")
        parser.add_argument("--list", action="store_true", help="List the presets and exit.")
        parser.add_argument("--no-progress", action="store_true",
                            help="No progress bar (for logs).")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["list"]:
            self._list()
            return
        if not options["preset"]:
            raise CommandError(f"Give --preset NAME (one of: {', '.join(PRESETS)}), or --list.")
        kwargs = {"name": options["name"], "supernodes": options["supernodes"],
                  "rack_budget_w": options["rack_budget_w"], "replace": options["replace"]}
        try:
            check_build(options["preset"], **kwargs)
        except BuildError as exc:
            raise CommandError(exc.message) from exc
        bar = tqdm(total=1000, file=sys.stderr, unit="‰", leave=False,
                   disable=options["no_progress"],
                   bar_format="{l_bar}{bar}| {elapsed}<{remaining} {postfix}")

        def progress(fraction: float, message: str) -> None:
            bar.update(max(0, round(fraction * 1000) - bar.n))
            bar.set_postfix_str(message, refresh=False)

        try:
            result = build_cluster(options["preset"], progress=progress, **kwargs)
        except BuildError as exc:
            raise CommandError(exc.message) from exc
        finally:
            bar.close()
        self._table(result)

    def _table(self, r: dict[str, Any]) -> None:
        rows = [
            ("cluster", f"{r['name']} (id {r['cluster_id']}, preset {r['preset']})"),
            ("supernodes", f"{r['supernodes']:,}"),
            ("cards", f"{r['cards']:,}"),
            ("servers", f"{r['servers']:,} ({r['servers_per_rack']} per rack, "
                        f"{r['server_w']:,} W each)"),
            ("racks", f"{r['racks']:,} = {r['supernodes']:,} × {r['racks_per_supernode']} per "
                      f"supernode + {r['network_racks']:,} network + "
                      f"{r.get('storage_racks', 0):,} storage"),
            ("racks per supernode", f"{r['racks_per_supernode']}"),
            ("network devices", f"{r['devices']:,} ({r['switches']:,} switches)"),
            ("links", f"{r['links']:,}"),
            ("storage", _storage_line(r.get("storage") or {})),
            ("IT power", f"{r['it_power_w'] / 1e3:,.1f} kW"),
            ("facility power", f"{r['facility_power_w'] / 1e3:,.1f} kW (IT × PUE "
                               f"{r.get('pue', 0):.3f}, {_PUE_SOURCE[r.get('pue_source', '')]})"),
            ("fullest rack", f"{r['max_rack_w']:,} W of {r['rack_budget_w']:,} W budget"),
            ("time", f"{r['seconds']:.2f} s"),
        ]
        width = max(len(k) for k, _ in rows)
        for key, value in rows:
            self.stdout.write(f"{key:<{width}}  {value}")

    def _list(self) -> None:
        for preset in PRESETS.values():
            plan = preset.plan()
            self.stdout.write(
                f"{preset.name:<18} {plan.cards:>9,} cards, {plan.supernodes:,} × "
                f"{preset.supernode.cards} per supernode, {plan.racks_per_supernode} racks per "
                f"supernode  — {preset.description}")


def _storage_line(s: dict[str, Any]) -> str:
    """Host memory and NVMe per server, and the parallel file system's aggregate."""
    line = (f"{s.get('memory_gib_per_server', 0):,} GiB memory and "
            f"{s.get('nvme_tb_per_server', 0):g} TB NVMe per server")
    if s.get("pfs_appliances"):
        line += (f"; file system {s['pfs_appliances']} × {s['pfs_model']}: "
                 f"{s['pfs_read_gb_per_s']:g} GB/s read, {s['pfs_write_gb_per_s']:g} GB/s "
                 f"write, {s['pfs_capacity_tb']:g} TB")
    return line


_PUE_SOURCE = {"plant": "computed by the plant model", "nameplate": "the racks' nameplate PUE",
               "": "the racks' nameplate PUE"}
