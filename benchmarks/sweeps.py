"""Benchmark: a sweep split across Celery workers, with 1 and then 2 worker processes.

Usage::

    REDIS_URL=redis://127.0.0.1:6379/5 .venv/bin/python benchmarks/sweeps.py

(``DATABASE_URL`` for PostgreSQL; without it a throwaway SQLite file in a
temporary directory.) The script migrates that database, then for each sweep —
a ``training_search`` (Mixtral 8x7B on 8,192 H100s, micro-batches to 32 and up
to 8 virtual stages: 919,104 configurations in 24 (tp, pp) blocks) and a ``scheduling``
replay of 20,000 synthetic jobs on 1,024 8-card servers under six policies — it
measures
the wall time from sending the run to seeing it finished, through the real
path (``runner.submit`` → broker → ``run_scenario`` → parts → merge), with:

1. **whole, 1 worker**: ``TWIN_SCENARIO_SPLIT_PARTS=0``, the run computed by
   one task as before sweeps existed (the baseline);
2. **split, 1 worker**: the same run in parts on one worker process (what
   splitting costs: extra tasks, rows, the merge);
3. **split, 2 workers**: the parts on two worker processes.

Each worker is a real ``celery -A twin worker --concurrency 1`` subprocess on a
queue private to this run; ``--repeat`` runs per case (default 2), the best
kept, each with ``refresh`` so the result cache never answers. It prints each
time and the speed-ups split-2 / split-1 and split-2 / whole-1 next to the
machine's parallel headroom measured in the same run (two equal CPU-bound jobs in
one process, then in two at once: 2.0 on two idle cores, less when other work
holds them), and checks that the three results are equal (timings aside).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.settings")
os.environ.setdefault("TWIN_SECRET_KEY", "benchmark-only-secret-key")

SWEEPS: dict[str, tuple[str, dict[str, Any]]] = {
    "training_search": ("training_search", {
        "model": "mixtral-8x7b", "accelerator": "h100-sxm5-80gb", "cards": 8192,
        "global_batch": 8192, "top": 10,
        "limits": {"micro_batch": [1, 2, 4, 8, 16, 32], "vpp": [1, 2, 4, 8]}}),
    "scheduling": ("scheduling", {
        "policies": "fgd,best-fit,random,gpu-packing,dot-product,gpu-clustering",
        "jobs": 20000, "servers": 1024, "gpus_per_server": 8, "seed": 1}),
}
TIMINGS = ("wall_s", "configs_per_s")


def untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def _burn(rounds: int) -> float:
    """A fixed amount of CPU-bound numpy work (element-wise, so no BLAS threads)."""
    import numpy as np

    a = np.linspace(0.0, 1.0, 1 << 20)
    total = 0.0
    for _ in range(rounds):
        total += float(np.sin(a + total * 1e-12).sum())
    return total


def headroom(rounds: int = 40) -> float:
    """The machine's parallel headroom right now: the time of two equal CPU-bound
    jobs one after the other in one process over their time in two processes at
    once (2.0 on two idle cores; less when other work holds the cores). The
    sweep's speed-up cannot beat it; measured next to it in the same run."""
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(2) as pool:
        list(pool.map(_burn, [1, 1]))  # start both processes first
        start = time.perf_counter()
        list(pool.map(_burn, [rounds]))
        list(pool.map(_burn, [rounds]))
        serial = time.perf_counter() - start
        start = time.perf_counter()
        list(pool.map(_burn, [rounds, rounds]))
        parallel = time.perf_counter() - start
    return serial / parallel


def start_workers(count: int, queue: str, env: dict[str, str], log: Any) -> list[Any]:
    from twin.celery import app
    from twin.core.localnet import wait_celery

    procs = []
    for i in range(count):
        name = f"{queue}-{i}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "twin", "worker", "-Q", queue,
             "--concurrency", "1", "-l", "warning", "--without-gossip", "--without-mingle",
             "-n", f"{name}@%h"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        procs.append(proc)
        wait_celery(app, name, proc, log.name)
    return procs


def timed_run(kind: str, params: dict[str, Any], user: Any) -> tuple[float, Any]:
    from twin.scenarios.models import ScenarioRun
    from twin.scenarios.runner import submit
    from twin.scenarios.tasks import enqueue_run

    start = time.perf_counter()
    run = submit(kind, params, None, user, refresh=True, enqueue=enqueue_run)
    while True:
        row = ScenarioRun.objects.filter(pk=run.pk).values("status", "error").get()
        if row["status"] in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(0.02)
    wall = time.perf_counter() - start
    run.refresh_from_db()
    if run.status != "succeeded":
        raise SystemExit(f"{kind} run #{run.pk} {run.status}: {run.error}")
    return wall, run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--only", choices=sorted(SWEEPS), action="append")
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="twin-sweeps-")
    if not os.environ.get("DATABASE_URL"):
        os.environ["TWIN_SQLITE_PATH"] = str(Path(tmp) / "bench.sqlite3")
    queue = f"twin-bench-sweeps-{uuid.uuid4().hex[:8]}"
    os.environ["TWIN_CELERY_QUEUE"] = queue

    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from twin.celery import app
    from twin.core.localnet import stop_process, use_queue
    from twin.scenarios.models import ScenarioPart

    use_queue(app, queue)
    call_command("migrate", verbosity=0)
    user, _ = get_user_model().objects.get_or_create(username="bench-sweeps")
    env = dict(os.environ)
    log = open(Path(tmp) / "workers.log", "w")  # noqa: SIM115
    print(f"cpus: {os.cpu_count()}  (shared with other work: figures are indicative)")
    print(f"database: {'PostgreSQL' if os.environ.get('DATABASE_URL') else 'SQLite'}; "
          f"worker log: {log.name}")
    cases = (("whole, 1 worker", 1, "0"), ("split, 1 worker", 1, "8"),
             ("split, 2 workers", 2, "8"))
    try:
        for label in args.only or list(SWEEPS):
            kind, params = SWEEPS[label]
            best: dict[str, float] = {}
            results: dict[str, Any] = {}
            for case, workers, parts in cases:
                procs = start_workers(workers, queue, {**env, "TWIN_SCENARIO_SPLIT_PARTS": parts},
                                      log)
                try:
                    for _ in range(args.repeat):
                        wall, run = timed_run(kind, params, user)
                        best[case] = min(best.get(case, wall), wall)
                        results[case] = untimed(run.result)
                        n_parts = ScenarioPart.objects.filter(run=run).count()
                        print(f"  {label:16s} {case:17s} {wall:7.2f} s  "
                              f"({n_parts or 'no'} parts)", flush=True)
                finally:
                    for proc in procs:
                        stop_process(proc)
            room = headroom()
            same = all(r == results["whole, 1 worker"] for r in results.values())
            one, two = best["split, 1 worker"], best["split, 2 workers"]
            print(f"{label}: whole on 1 worker {best['whole, 1 worker']:.2f} s, split on 1 "
                  f"{one:.2f} s, split on 2 {two:.2f} s; speed-up 1 → 2 workers "
                  f"{one / two:.2f}x (vs whole: {best['whole, 1 worker'] / two:.2f}x); "
                  f"the machine's 2-process headroom now {room:.2f}x; results equal: {same}; "
                  f"load average {os.getloadavg()[0]:.1f}")
            if not same:
                raise SystemExit(f"{label}: the split result differs from the whole one")
    finally:
        log.close()


if __name__ == "__main__":
    main()
