"""Benchmark: failure reading → remediation applied, on a 65,536-card cluster.

Usage (SQLite + embedded Redis, or PostgreSQL + Redis from the environment)::

    .venv/bin/python benchmarks/self_healing.py                # 65,536 cards, 5 failures
    .venv/bin/python benchmarks/self_healing.py --trials 10 --json out.json
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/twin_bench \\
    REDIS_URL=redis://127.0.0.1:6379/0 .venv/bin/python benchmarks/self_healing.py

The whole path, with real processes:

    agent ──HTTP POST {"card": …, "xid_errors": 79}──▶ uvicorn (twin.asgi) ──▶ Redis stream
      ──▶ celery worker: drain, apply, tick (alert rules → failures.detect_failures)
      ──▶ heal task (twin.jobs.healing.handle_failure: mark, propose, apply in one
          transaction) ──▶ Remediation row ``applied``

* **Cluster**: ``seed-512`` × 128 supernodes = 65,536 H100 cards (built once into
  ``var/heal-bench.sqlite3`` unless ``DATABASE_URL`` is set, and reused), policy
  ``apply``.
* **Jobs covering it**: in each supernode (64 servers of 8 cards) nine running
  jobs of 56 cards (7 whole servers each, compact and rail-aligned, as the
  topology-aware placement places them), 1,152 jobs and 64,512 allocations;
  one server per supernode is free (the spares). They are written in bulk —
  submitting 1,152 jobs one by one would price each one's AllReduce on the
  65,536-card graph first, which is the scheduler's benchmark, not this one's.
  Each job checkpoints every 10 min and trains a 70 B model (restore priced).
* **Readings**: the agent posts every card each second (a columnar batch, as a
  DCGM-fed agent at 1 Hz; every card fresh, the stale rule quiet), and at each
  trial one failing reading of one card (XID 79) through the real endpoint, which
  it then keeps reporting in its 1 Hz batches. The clock runs from the start of that
  POST until the orchestrator sees the card's ``Remediation`` in state
  ``applied`` in the database (polled every 10 ms), split at the remediation's
  ``detected_at`` (the tick found it) and ``decided_at`` (applied). One failure
  per trial, each on a different supernode; the first (``--warmup``) is not
  counted.

Baselines, same run: the articles' claim (self-healing within 30 s), and a naive
remediation that rescans the cluster — the whole cluster's capacity
(``live_capacity`` without a scope: every server, card and allocation) and every
allocation to find the card's jobs — instead of the failed card's server and
supernode, timed in this process on the same database against the scoped
proposal (``healing.propose``) for the same cards. The naive end-to-end figure is
ours with the scoped proposal swapped for the rescan (both measured here).

Target: ≤ 5 s end to end (the issue). Exit status 0 only when every trial meets it.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from twin.core.localnet import (  # noqa: E402
    free_port,
    stop_process,
    wait_celery,
    wait_http,
    worker_queues,
)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.settings")
os.environ.setdefault("TWIN_ALLOW_INSECURE_KEY", "1")

TARGET_S = 5.0
CLAIM_S = 30.0
JOB_SERVERS = 7
JOBS_PER_SUPERNODE = 9


def ensure_cluster(cards: int) -> int:
    from twin.hardware.builder import build_cluster
    from twin.hardware.models import Card, Cluster

    name = f"heal-bench-{cards}"
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None or Card.objects.filter(supernode__cluster=cluster).count() != cards:
        print(f"building {name}: seed-512 × {cards // 512} supernodes …", flush=True)
        started = time.perf_counter()
        build_cluster("seed-512", name=name, supernodes=cards // 512, replace=True)
        print(f"  built in {time.perf_counter() - started:.1f} s", flush=True)
        cluster = Cluster.objects.get(name=name)
    return int(cluster.pk)


def cover_with_jobs(cluster_id: int) -> None:
    """Nine 56-card jobs per supernode (whole servers), one free server each; healed
    cards from an earlier run are put back."""
    from django.db import transaction
    from django.utils import timezone

    from twin.hardware.models import Card, Cluster, Server
    from twin.jobs.models import Allocation, Job, Remediation

    Cluster.objects.filter(pk=cluster_id).update(self_healing="apply")
    with transaction.atomic():
        Remediation.objects.filter(cluster_id=cluster_id).delete()
        Allocation.objects.filter(job__cluster_id=cluster_id).delete()
        Job.objects.filter(cluster_id=cluster_id).delete()
        Card.objects.filter(supernode__cluster_id=cluster_id).update(status="ok")
        started = timezone.now() - dt.timedelta(seconds=1500)
        servers: dict[int, list[int]] = {}
        for sid, sn in (Server.objects.filter(rack__cluster_id=cluster_id)
                        .order_by("supernode__index", "id").values_list("id", "supernode_id")):
            servers.setdefault(sn, []).append(sid)
        cards: dict[int, list[int]] = {}
        for cid, sid in (Card.objects.filter(supernode__cluster_id=cluster_id)
                         .order_by("server_id", "slot").values_list("id", "server_id")):
            cards.setdefault(sid, []).append(cid)
        jobs, plan = [], []
        for sn, sids in servers.items():
            for j in range(JOBS_PER_SUPERNODE):
                mine = sids[j * JOB_SERVERS:(j + 1) * JOB_SERVERS]
                held = [c for s in mine for c in cards[s]]
                jobs.append(Job(cluster_id=cluster_id, name=f"sn{sn}-job{j}", tenant="bench",
                                cards=len(held), state="running", started=started,
                                policy="topology-aware", checkpoint_interval_s=600,
                                model_params=70e9))
                plan.append(held)
        jobs = Job.objects.bulk_create(jobs, batch_size=2000)
        Allocation.objects.bulk_create(
            [Allocation(job=job, card_id=c, share_milli=1000, vf_index=0)
             for job, held in zip(jobs, plan, strict=True) for c in held], batch_size=5000)
    print(f"  {len(jobs):,} running jobs, "
          f"{Allocation.objects.filter(job__cluster_id=cluster_id).count():,} allocations",
          flush=True)


def naive_propose(card: Any) -> dict[str, Any]:
    """The baseline: the same spare search after a full rescan of the cluster."""
    from simulation.scheduling import Nodes, place
    from twin.jobs.capacity import live_capacity
    from twin.jobs.models import Allocation
    from twin.jobs.scheduler import job_request

    cluster_id = card.supernode.cluster_id
    live = live_capacity(cluster_id)  # every server, card and allocation
    mine = [a for a in Allocation.objects.filter(job__cluster_id=cluster_id)
            .select_related("job") if a.card_id == card.pk]
    keep = [i for i, r in enumerate(live.records) if r["supernode"] == card.supernode_id]
    local = {n: k for k, n in enumerate(keep)}
    records = [live.records[i] for i in keep]
    used = {(local[n], s): m / 1000 for (n, s), m in live.used_milli().items() if n in local}
    out = []
    for a in mine:
        got = place(Nodes.from_records(records), {**job_request(a.job), "num_gpu": 1},
                    "topology-aware", used=used)
        out.append(got)
    return {"jobs": out}


class Agent:
    """The cluster's agent at 1 Hz: every card each second, in one columnar batch; a
    card that failed keeps reporting its XID (as DCGM keeps the last one), so the
    failure stays in the live state whatever the order of batch and tick."""

    def __init__(self, client: Any, cluster_id: int, layout: dict[str, Any]) -> None:
        import threading

        self.client, self.cluster_id, self.layout = client, cluster_id, layout
        self.ordinal = {int(c): i for i, c in enumerate(layout["card_ids"])}
        self.failed: set[int] = set()
        self.seq = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def post(self, doc: dict[str, Any], fmt: str = "msgpack") -> None:
        with self.lock:
            self.seq += 1
            doc["seq"] = self.seq
            answer = self.client.post_batch(self.cluster_id, doc, fmt=fmt)
        assert answer.status == 202, answer.body

    def healthy(self) -> None:
        import numpy as np

        n = len(self.layout["card_ids"])
        xid = np.zeros(n, "<f4")
        xid[[self.ordinal[c] for c in self.failed]] = 79
        cols = {"gpu_util": np.full(n, 90, "<f4"), "power_w": np.full(n, 600, "<f4"),
                "gpu_temp_c": np.full(n, 60, "<f4"), "xid_errors": xid,
                "ecc_errors": np.zeros(n, "<f4"), "link_latency_ns": np.full(n, 160, "<f4")}
        self.post({"ts": time.time(),
                   "cards": {"range": [0, n], "layout": self.layout["layout"]},
                   "columns": {k: v.tobytes() for k, v in cols.items()}})

    def _run(self) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            self.healthy()
            self.stop.wait(max(0.0, 1.0 - (time.monotonic() - started)))


def forget_namespace(prefix: str) -> None:
    """Delete the run's live state (its private key prefix) from Redis."""
    from twin.telemetry import state

    r = state.redis_client()
    batch = list(r.scan_iter(match=f"{prefix}:*", count=1000))
    for i in range(0, len(batch), 500):
        r.unlink(*batch[i:i + 500])


def orchestrate(args: argparse.Namespace) -> int:
    from benchmarks.seedcluster import isolate, setup

    run_id = isolate("heal", services=True)
    setup()
    from django.conf import settings
    from django.db import connection

    from twin.celery import app
    from twin.hardware.models import Card, Cluster
    from twin.jobs import healing
    from twin.jobs.models import Allocation, Remediation
    from twin.telemetry.client import AgentClient
    from twin.telemetry.models import TelemetryAgent

    cluster_id = ensure_cluster(args.cards)
    cover_with_jobs(cluster_id)
    _, token = TelemetryAgent.issue(Cluster.objects.get(pk=cluster_id), f"heal-bench-{run_id}")
    # the failing cards: the first card of a job's fourth server, one supernode per trial
    sns = list(Card.objects.filter(supernode__cluster_id=cluster_id)
               .values_list("supernode_id", flat=True).distinct().order_by("supernode_id"))
    victims = []
    for sn in sns[:args.trials + args.warmup]:
        a = (Allocation.objects.filter(card__supernode_id=sn).select_related("card")
             .order_by("job_id", "card__server_id", "card__slot"))[3 * 8]
        victims.append(a.card_id)
    # the baseline and our proposal, in this process, on the same rows (read-only)
    scoped, naive = [], []
    for cid in victims[args.warmup:]:
        card = Card.objects.select_related("server", "supernode").get(pk=cid)
        t = time.perf_counter()
        proposal = healing.propose(card, "xid79")
        scoped.append(time.perf_counter() - t)
        assert proposal["jobs"][0]["action"] == "spare", proposal
        t = time.perf_counter()
        naive_propose(card)
        naive.append(time.perf_counter() - t)
    connection.close()

    logs = Path(settings.VAR_DIR) / "log"
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    queue = os.environ["TWIN_CELERY_QUEUE"]
    procs: list[subprocess.Popen] = []
    print(f"run {run_id}: {args.cards:,} cards, {connection.vendor}, Redis "
          f"{settings.REDIS_URL}, {args.trials} failures", flush=True)
    e2e: list[float] = []
    split: list[tuple[float, float]] = []  # (POST → detected, detected → applied)
    try:
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "twin.asgi:application", "--host", "127.0.0.1",
             "--port", str(port), "--lifespan", "off", "--log-level", "warning",
             "--no-access-log"], cwd=ROOT, env=env,
            stdout=open(logs / "heal-bench-web.log", "w"), stderr=subprocess.STDOUT))  # noqa: SIM115
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "twin", "worker", "-Q", worker_queues(queue),
             "--concurrency", str(args.concurrency), "-l", "warning", "--without-gossip",
             "--without-mingle", "-n", f"{queue}@%h"], cwd=ROOT, env=env,
            stdout=open(logs / "heal-bench-worker.log", "w"), stderr=subprocess.STDOUT))  # noqa: SIM115
        wait_http(f"{base}/login/", procs[0])
        wait_celery(app, queue, procs[1], str(logs / "heal-bench-worker.log"))
        client = AgentClient(base, token)
        agent = Agent(client, cluster_id, client.layout(cluster_id).body)
        agent.thread.start()
        time.sleep(args.settle)  # every card reported and ticked: the live state is warm
        for k, victim in enumerate(victims):
            time.sleep(args.settle)
            doc = {"cards": [{"card": victim, "metrics": {"xid_errors": 79}}]}
            t0 = time.perf_counter()
            wall0 = time.time()
            agent.failed.add(victim)
            agent.post(doc, fmt="json")
            deadline = t0 + args.timeout
            rem = None
            while time.perf_counter() < deadline:
                rem = Remediation.objects.filter(card_id=victim, state="applied").first()
                if rem is not None:
                    break
                time.sleep(0.01)
            took = time.perf_counter() - t0
            connection.close()
            if k < args.warmup:
                print(f"  warm-up failure: card {victim}: "
                      f"{'applied' if rem else 'not applied'} in {took * 1000:.0f} ms", flush=True)
                continue
            if rem is None:
                print(f"  failure {k - args.warmup + 1}: card {victim}: not applied within "
                      f"{args.timeout} s")
                e2e.append(float("inf"))
                continue
            e2e.append(took)
            detected = rem.detected_at.timestamp() - wall0
            split.append((detected, rem.decided_at.timestamp() - rem.detected_at.timestamp()))
            spare = rem.proposal["jobs"][0]["spare"]
            print(f"  failure {k - args.warmup + 1}: card {victim} → spare {spare['card']} "
                  f"({spare['scope']}, rail-aligned {spare['rail_aligned']}): "
                  f"{took * 1000:.0f} ms (detected after {detected * 1000:.0f} ms, "
                  f"healed in {split[-1][1] * 1000:.0f} ms)", flush=True)
    finally:
        if "agent" in locals():
            agent.stop.set()
            agent.thread.join(5)
        for proc in reversed(procs):
            stop_process(proc)
        forget_namespace(os.environ["TWIN_TELEMETRY_PREFIX"])
    finite = [t for t in e2e if t != float("inf")]
    median = statistics.median(e2e) if e2e else float("inf")
    worst = max(e2e) if e2e else float("inf")
    scoped_med, naive_med = statistics.median(scoped), statistics.median(naive)
    naive_e2e = median - scoped_med + naive_med
    result = {
        "cards": args.cards, "trials": len(e2e), "database": connection.vendor,
        "end_to_end_s": {"median": median, "max": worst, "all": e2e},
        "post_to_detected_s": [a for a, _ in split],
        "detected_to_applied_s": [b for _, b in split],
        "target_s": TARGET_S, "claim_s": CLAIM_S,
        "vs_claim": CLAIM_S / median if median else None,
        "proposal_scoped_s": {"median": scoped_med, "all": scoped},
        "proposal_full_rescan_s": {"median": naive_med, "all": naive},
        "rescan_vs_scoped": naive_med / scoped_med if scoped_med else None,
        "naive_end_to_end_s": naive_e2e,
        "naive_vs_ours": naive_e2e / median if median else None,
    }
    print(f"\nfailure reading → remediation applied, {args.cards:,} cards: median "
          f"{median * 1000:.0f} ms, max {worst * 1000:.0f} ms "
          f"(target ≤ {TARGET_S:g} s; the articles claim {CLAIM_S:g} s: "
          f"{CLAIM_S / median:.1f}× faster)")
    print(f"proposal: scoped to the server/supernode {scoped_med * 1000:.0f} ms, full rescan "
          f"{naive_med * 1000:.0f} ms ({naive_med / scoped_med:.1f}×); naive end to end "
          f"≈ {naive_e2e * 1000:.0f} ms ({naive_e2e / median:.2f}× ours)")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0 if finite and len(finite) == len(e2e) and worst <= TARGET_S else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cards", type=int, default=65_536, help="a multiple of 512")
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1,
                   help="failures healed first and not counted (the worker's first heal "
                        "imports the placement and resilience libraries)")
    p.add_argument("--concurrency", type=int, default=2, help="worker processes")
    p.add_argument("--settle", type=float, default=3.0,
                   help="seconds between failures (and of warm-up before the first)")
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--json", help="write the figures here")
    args = p.parse_args()
    if args.cards % 512:
        raise SystemExit("--cards must be a multiple of 512 (seed-512 supernodes)")
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
