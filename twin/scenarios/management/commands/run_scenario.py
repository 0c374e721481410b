"""``manage.py run_scenario KIND --params '{...}' [--cluster NAME]``: run one scenario here.

The same code path as the API and the Celery task (validate with the kind's
``prepare``, record a ``ScenarioRun``, reuse a cached result unless
``--refresh``, :func:`twin.scenarios.runner.execute`), but in this process,
with a progress bar on stderr and the result printed as a table (or as JSON
with ``--json``). Bad input ends with one readable line naming the field and
a non-zero exit code; nothing is recorded then.

Examples::

    python manage.py run_scenario topology --params '{"family": "torus", "dims": [8, 8, 8]}'
    python manage.py run_scenario collective --cluster demo \\
        --params '{"op": "allreduce", "sizes": [1048576, 1073741824]}'
    python manage.py run_scenario training --json --params '{"model": "gpt3-175b", \
        "accelerator": "a100-sxm-80gb", "cards": 64, "tp": 8, "pp": 8, "global_batch": 64}'
    python manage.py run_scenario training_search --cluster dgx-h100-superpod \
        --params '{"model": "llama3-70b", "cards": 256, "global_batch": 1024}'
    python manage.py run_scenario scheduling --cluster demo --fork \
        --params '{"from_live": true, "mode": "full", "policies": "easy-backfill"}'
    python manage.py run_scenario --list

``--fork`` freezes the cluster's live state into the run's input (stored with
the run; a cluster without live telemetry forks its inventory and the output
says so); ``--fork-from RUN`` reuses the state stored with an earlier run.

``--json`` prints the run's result as the kind returns it (a training step's
``step_time_s``, ``mfu``, ``breakdown`` …; a search's ``configs_evaluated``,
``rejected``, ``best`` …); the table is the kind's ``rows``.
"""
from __future__ import annotations

import json
import os
import socket
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from twin.core.choices import JobStatusChoices
from twin.scenarios.kinds import REGISTRY, ScenarioInputError, get_kind

__all__ = ["Command", "format_table"]


def format_table(rows: list[tuple[str, str]]) -> str:
    """Two aligned columns with a rule under the header."""
    rows = [("quantity", "value"), *rows]
    width = max(len(label) for label, _ in rows)
    lines = [f"{label:<{width}}  {value}" for label, value in rows]
    lines.insert(1, f"{'-' * width}  {'-' * max(len(v) for _, v in rows)}")
    return "\n".join(lines)


class Command(BaseCommand):
    help = (f"Run a scenario ({', '.join(REGISTRY)}) in this process and print its result. "
            "--list shows the kinds.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("kind", nargs="?", help=f"One of: {', '.join(sorted(REGISTRY))}.")
        parser.add_argument("--params", default="{}", help="Parameters as a JSON object.")
        parser.add_argument("--cluster", help="Cluster name (or id) to run on.")
        parser.add_argument("--refresh", action="store_true",
                            help="Recompute even if an identical run has a result.")
        parser.add_argument("--fork", action="store_true",
                            help="Freeze the cluster's live state now into the run's input.")
        parser.add_argument("--fork-from", type=int, metavar="RUN",
                            help="Reuse the live state stored with scenario run RUN.")
        parser.add_argument("--json", action="store_true", help="Print the result as JSON.")
        parser.add_argument("--no-progress", action="store_true", help="No progress bar.")
        parser.add_argument("--list", action="store_true", help="List the kinds and exit.")

    def handle(self, *args: Any, **options: Any) -> None:
        from twin.scenarios.runner import execute, submit

        if options["list"]:
            width = max(len(name) for name in REGISTRY)
            for name in sorted(REGISTRY):
                kind = REGISTRY[name]
                self.stdout.write(f"{name:<{width}} {kind.label}: {kind.description}")
            return
        try:
            kind = get_kind(options["kind"])
        except ScenarioInputError as exc:
            raise CommandError(exc.line()) from exc
        try:
            params = json.loads(options["params"])
        except json.JSONDecodeError as exc:
            raise CommandError(f"--params: not valid JSON ({exc.msg} at character "
                               f"{exc.pos}); quote it like --params '{{\"family\": "
                               f"\"ring\", \"nodes\": 8}}'") from exc
        cluster = self._cluster(options["cluster"])
        fork = self._fork(options["fork"], options["fork_from"])
        try:
            run = submit(kind.name, params, cluster, None, refresh=options["refresh"],
                         enqueue=False, fork=fork)
        except ScenarioInputError as exc:
            raise CommandError(exc.line()) from exc
        if run.status == JobStatusChoices.QUEUED:
            bar = tqdm(total=1000, file=sys.stderr, unit="‰", leave=False,
                       disable=options["no_progress"],
                       bar_format="{l_bar}{bar}| {elapsed}<{remaining} {postfix}")

            def echo(fraction: float, message: str) -> None:
                bar.update(max(0, round(fraction * 1000) - bar.n))
                bar.set_postfix_str(message, refresh=False)

            worker = f"run_scenario@{socket.gethostname()}:{os.getpid()}"
            try:
                finished = execute(run.pk, worker=worker, echo=echo)
            finally:
                bar.close()
            assert finished is not None
            run = finished
        if run.status != JobStatusChoices.SUCCEEDED:
            where = f"{run.error_field}: " if run.error_field else ""
            raise CommandError(f"run #{run.pk} {run.status}: {where}{run.error or run.message}")
        if options["json"]:
            self.stdout.write(json.dumps(run.result, indent=2, ensure_ascii=False))
            return
        note = f" (cached result of run #{run.cached_from_id})" if run.cached_from_id else ""
        self.stdout.write(f"{kind.label} — run #{run.pk}{note}, {run.message}")
        forked = (run.inputs or {}).get("fork")
        if forked:
            self.stdout.write(forked["note"] or (
                f"forked from the live state: {forked['reporting']:,} cards reporting, "
                f"{sum(forked['cards_down'].values()):,} down or degraded, "
                f"{forked['running']:,} jobs running, {forked['queued']:,} queued"))
        self.stdout.write(format_table(kind.rows(run.result or {})))

    def _fork(self, now: bool, run_id: int | None) -> Any:
        if run_id is None:
            return now
        if now:
            raise CommandError("--fork-from: give either --fork (freeze now) or --fork-from "
                               "RUN (an earlier run's snapshot), not both")
        from twin.scenarios.models import ScenarioRun

        run = ScenarioRun.objects.filter(pk=run_id).first()
        if run is None:
            raise CommandError(f"--fork-from: no scenario run #{run_id}")
        return run

    def _cluster(self, value: str | None) -> Any:
        if not value:
            return None
        from twin.hardware.models import Cluster

        found = Cluster.objects.filter(name=value).first()
        if found is None and value.isdigit():
            found = Cluster.objects.filter(pk=int(value)).first()
        if found is None:
            names = list(Cluster.objects.order_by("name").values_list("name", flat=True)[:10])
            known = f"; known: {', '.join(names)}" if names else "; there are no clusters yet"
            raise CommandError(f"--cluster: no cluster named {value!r}{known}")
        return found
