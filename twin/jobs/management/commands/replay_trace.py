"""``manage.py replay_trace``: replay a cluster trace under one or more placement policies.

Reads a trace with the streamed readers of :mod:`simulation.scheduling` and runs
:func:`simulation.scheduling.simulate` once per ``--policy`` (arrival-only by
default: the FGD paper's experiment, arrivals continuing to ``--target-load`` ×
the cluster's GPUs). Prints per policy the GPU allocation rate when arrivals
stop, the curve of it against arrived GPU demand (a share of capacity), the
unallocated GPUs, the job counts and the wall time — as a table, or as JSON with
``--json``. A bad file or argument ends with one readable line (line and field
of the first bad row) and a non-zero exit code.

Examples::

    python manage.py replay_trace --format alibaba-gpu-2023 \\
        --nodes openb_node_list_gpu_node.csv --pods openb_pod_list_default.csv \\
        --policy fgd --policy best-fit --policy random --json
    python manage.py replay_trace --format helios --trace cluster_log.csv --servers 128
    python manage.py replay_trace --format synthetic --jobs 8000 --servers 1500
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from simulation.scheduling import (
    MODES,
    POLICIES,
    Nodes,
    SchedulingInputError,
    TraceError,
    Workload,
    read_alibaba_nodes,
    read_alibaba_pods,
    read_helios,
    read_philly,
    simulate,
    synthetic_workload,
)

__all__ = ["FORMATS", "Command"]

FORMATS = ("alibaba-gpu-2023", "helios", "philly", "synthetic")


def _open(path: str | None, option: str) -> IO[str]:
    if not path:
        raise CommandError(f"{option} is required for this --format")
    try:
        return Path(path).open(encoding="utf-8", newline="")
    except OSError as exc:
        raise CommandError(f"{option} {path}: {exc.strerror or exc}") from None


class Command(BaseCommand):
    help = "Replay a cluster trace (Alibaba GPU v2023, Helios, Philly, synthetic) per policy."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", required=True, choices=FORMATS)
        parser.add_argument("--nodes", help="Alibaba node list CSV (sn,cpu_milli,...).")
        parser.add_argument("--pods", help="Alibaba pod list CSV (name,cpu_milli,...).")
        parser.add_argument("--trace", help="Helios cluster_log.csv or Philly cluster_job_log.")
        parser.add_argument("--policy", action="append", default=None,
                            help=f"Repeatable; one of {', '.join(POLICIES)} (default fgd).")
        parser.add_argument("--mode", default="arrival-only", choices=MODES)
        parser.add_argument("--target-load", type=float, default=1.3,
                            help="Arrival-only: stop when arrived GPU demand is this × capacity.")
        parser.add_argument("--servers", type=int, default=64,
                            help="Cluster for helios/philly/synthetic: servers (8 GPUs each).")
        parser.add_argument("--gpus-per-server", type=int, default=8)
        parser.add_argument("--jobs", type=int, default=2000, help="Synthetic: number of jobs.")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--max-errors", type=int, default=20,
                            help="Stop reading a file after this many bad rows.")
        parser.add_argument("--json", action="store_true", help="Print JSON.")

    def _load(self, o: dict[str, Any]) -> tuple[Nodes, Workload]:
        fmt = o["format"]
        if o["servers"] < 1 or o["gpus_per_server"] < 1:
            raise CommandError("--servers and --gpus-per-server must be at least 1")
        if o["max_errors"] < 1:
            raise CommandError("--max-errors must be at least 1")
        uniform = Nodes.uniform(o["servers"], o["gpus_per_server"])
        try:
            if fmt == "alibaba-gpu-2023":
                with _open(o["nodes"], "--nodes") as fh:
                    nodes = read_alibaba_nodes(fh, max_errors=o["max_errors"])
                with _open(o["pods"], "--pods") as fh:
                    return nodes, read_alibaba_pods(fh, max_errors=o["max_errors"])
            if fmt == "helios":
                with _open(o["trace"], "--trace") as fh:
                    return uniform, read_helios(fh, max_errors=o["max_errors"],
                                                gpus_per_node=o["gpus_per_server"])
            if fmt == "philly":
                with _open(o["trace"], "--trace") as fh:
                    return uniform, read_philly(fh, max_errors=o["max_errors"])
            if o["jobs"] < 1:
                raise CommandError("--jobs must be at least 1")
            return uniform, synthetic_workload(o["jobs"], o["seed"])
        except TraceError as exc:
            which = "--trace " if fmt in ("helios", "philly") else ""
            raise CommandError(f"{which}{exc}") from None
        except UnicodeDecodeError:
            raise CommandError("the file is not UTF-8 text") from None

    def handle(self, *args: Any, **o: Any) -> None:
        policies = o["policy"] or ["fgd"]
        unknown = [p for p in policies if p not in POLICIES]
        if unknown:
            raise CommandError(f"--policy {unknown[0]!r} is not one of {', '.join(POLICIES)}")
        nodes, work = self._load(o)
        if len(work) == 0:
            raise CommandError("the trace has no jobs")
        results = []
        for policy in policies:
            try:
                r = simulate(nodes, work, policy, mode=o["mode"], seed=o["seed"],
                             target_load=o["target_load"] if o["mode"] == "arrival-only" else None)
            except SchedulingInputError as exc:
                raise CommandError(f"--{exc.field.replace('_', '-')}: {exc.reason}") from None
            d = r.to_dict()
            results.append({k: d[k] for k in (
                "policy", "gpu_allocation_rate", "curve", "unallocated_gpus", "jobs", "wall_s",
                "fragmentation", "utilisation")})
        payload = {"format": o["format"], "mode": o["mode"], "nodes": len(nodes),
                   "gpus": nodes.total_gpus, "trace_jobs": len(work), "results": results}
        if o["json"]:
            self.stdout.write(json.dumps(payload))
            return
        self.stdout.write(f"{len(nodes)} nodes, {nodes.total_gpus} GPUs, {len(work)} jobs "
                          f"({o['mode']})")
        width = max(len(p) for p in policies)
        self.stdout.write(f"{'policy':<{width}}  alloc rate  unallocated GPUs  placed/arrived  "
                          "wall s")
        for res in results:
            self.stdout.write(
                f"{res['policy']:<{width}}  {res['gpu_allocation_rate']:>10.4f}  "
                f"{res['unallocated_gpus']:>16.1f}  "
                f"{res['jobs']['placed']:>6}/{res['jobs']['arrived']:<7}  {res['wall_s']:.2f}")
