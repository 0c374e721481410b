"""Benchmark: fork a 65,536-card live twin (``twin.scenarios.snapshot.freeze``).

Usage (SQLite + embedded Redis, or PostgreSQL + Redis from the environment)::

    .venv/bin/python benchmarks/fork.py                   # 65,536 cards
    .venv/bin/python benchmarks/fork.py --cards 8192 --repeat 3
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/twin_bench \\
    REDIS_URL=redis://127.0.0.1:6379/0 .venv/bin/python benchmarks/fork.py

Phases, in this process:

1. **Setup** (not timed): ``seed-512`` × ``cards / 512`` supernodes (built once as
   ``fork-bench-<cards>`` and reused), covered as ``benchmarks/self_healing.py``
   covers it: nine 56-card running jobs per supernode (whole servers, an hour
   long, started 25 min ago), plus one queued job per supernode, one failed card
   and one card in maintenance per supernode and one down scale-up link per
   supernode — all written in bulk. Then one round of telemetry: every card's
   26 metrics from ``twin.telemetry.simulator`` as one columnar batch, through
   the write path the workers run (``enqueue`` → ``drain`` → ``tick``), into a
   private Redis key prefix.
2. **Fork**: ``freeze(cluster)`` (the database's unavailable cards, servers and
   links, running jobs with their allocations and the queue; the live state's
   latest power, temperature and utilisation of every card, health and rack
   draw), then its JSON form (``to_dict`` + ``json.dumps``: what a run stores).
   ``--repeat`` times; the median and the worst are reported.
3. **Baseline, same run**: the naive fork — one ORM object per card (with its
   server), one ``card_state`` Redis read per card (the read API's one-card
   call), one ORM object per allocation — over ``--naive-cards`` cards (default
   4,096: at ~3 ms a card the whole cluster would take minutes; 0 reads all),
   scaled to the cluster linearly (it is one loop over cards).

Target: ≤ 5 s for 65,536 cards (issue 25, item 1). Exit status 0 only when the
worst fork meets it.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.settings")
os.environ.setdefault("TWIN_ALLOW_INSECURE_KEY", "1")

TARGET_S = 5.0
JOB_SERVERS = 7
JOBS_PER_SUPERNODE = 9


def ensure_cluster(cards: int) -> int:
    """The benchmark's seed-512 cluster of ``cards`` cards (reused across runs)."""
    from benchmarks.seedcluster import ensure_cluster as ensure_named

    return int(ensure_named(f"fork-bench-{cards}", cards).pk)


def cover(cluster_id: int) -> None:
    """Running and queued jobs, failed and maintenance cards, down links (bulk)."""
    from django.db import transaction
    from django.utils import timezone

    from twin.hardware.models import Card, Link, Server
    from twin.jobs.models import Allocation, Job

    with transaction.atomic():
        Allocation.objects.filter(job__cluster_id=cluster_id).delete()
        Job.objects.filter(cluster_id=cluster_id).delete()
        Card.objects.filter(supernode__cluster_id=cluster_id).update(status="ok")
        Link.objects.filter(cluster_id=cluster_id).update(status="up")
        started = timezone.now() - dt.timedelta(seconds=1500)
        servers: dict[int, list[int]] = {}
        for sid, sn in (Server.objects.filter(rack__cluster_id=cluster_id)
                        .order_by("supernode__index", "id").values_list("id", "supernode_id")):
            servers.setdefault(sn, []).append(sid)
        cards: dict[int, list[int]] = {}
        for cid, sid in (Card.objects.filter(supernode__cluster_id=cluster_id)
                         .order_by("server_id", "slot").values_list("id", "server_id")):
            cards.setdefault(sid, []).append(cid)
        jobs, plan, failed, maint = [], [], [], []
        for sn, sids in servers.items():
            for j in range(JOBS_PER_SUPERNODE):
                held = [c for s in sids[j * JOB_SERVERS:(j + 1) * JOB_SERVERS] for c in cards[s]]
                jobs.append(Job(cluster_id=cluster_id, name=f"sn{sn}-job{j}", tenant="bench",
                                cards=len(held), state="running", started=started,
                                duration_s=3600, policy="topology-aware"))
                plan.append(held)
            jobs.append(Job(cluster_id=cluster_id, name=f"sn{sn}-wait", tenant="bench",
                            cards=64, state="queued", duration_s=7200, priority=1))
            plan.append([])
            failed.append(cards[sids[-1]][0])
            maint.append(cards[sids[-1]][1])
        jobs = Job.objects.bulk_create(jobs, batch_size=2000)
        Allocation.objects.bulk_create(
            [Allocation(job=job, card_id=c, share_milli=1000, vf_index=0)
             for job, held in zip(jobs, plan, strict=True) for c in held], batch_size=5000)
        Card.objects.filter(pk__in=failed).update(status="failed")
        Card.objects.filter(pk__in=maint).update(status="maintenance")
        down = [Link.objects.filter(a_card_id=c, kind="scale_up").values_list("id", flat=True)
                .first() for c in failed]
        Link.objects.filter(pk__in=[d for d in down if d]).update(status="down")
    print(f"  {len(jobs):,} jobs ({len(servers):,} queued), "
          f"{Allocation.objects.filter(job__cluster_id=cluster_id).count():,} allocations, "
          f"{len(failed):,} failed + {len(maint):,} maintenance cards", flush=True)


def feed(cluster_id: int) -> int:
    """One round of every card's metrics through the workers' write path."""
    import numpy as np
    from django.conf import settings

    from twin.telemetry import processing, state
    from twin.telemetry.enqueue import drainers, enqueue
    from twin.telemetry.ingest import Batch
    from twin.telemetry.metrics import METRICS
    from twin.telemetry.simulator import Simulator

    settings.TELEMETRY_AUTO_DRAIN = False
    lay = state.layout(cluster_id)
    sim = Simulator(lay.tdp_w, lay.idle_w, lay.hbm_gib, lay.server_ids, fault_rate=0)
    values, _ = sim.step(1.0)
    values = np.where(np.isfinite(values), values, 0).astype(np.float32)
    batch = Batch(cluster_id=cluster_id, version=lay.version, ts=time.time(),
                  metric_idx=np.array([m.index for m in METRICS], np.uint8),
                  values=values[[m.index for m in METRICS]],
                  ordinals=np.arange(lay.n, dtype=np.int32))
    assert enqueue(batch, agent_id=None, seq=None).status == "queued"
    for slot in range(drainers()):
        processing.drain(slot)
    processing.tick(cluster_id, force=True)
    return int(lay.n)


def naive_fork(cluster_id: int, limit: int | None) -> tuple[float, int]:
    """The baseline: an ORM object and a ``card_state`` read per card, an ORM object
    per allocation. Returns (seconds, cards read)."""
    from twin.hardware.models import Card
    from twin.jobs.models import Allocation
    from twin.telemetry import state

    t = time.perf_counter()
    cards = Card.objects.filter(supernode__cluster_id=cluster_id).select_related(
        "server").order_by("id")
    if limit:
        cards = cards[:limit]
    out: dict[int, Any] = {}
    for card in cards:
        out[card.pk] = (card.status, card.server.name, state.card_state(cluster_id, card.pk))
    jobs: dict[int, list[int]] = {}
    allocations = Allocation.objects.filter(job__cluster_id=cluster_id,
                                            job__state="running").select_related("job", "card")
    if limit:
        allocations = allocations.filter(card_id__in=list(out))
    for a in allocations:
        jobs.setdefault(a.job.pk, []).append(a.card.pk)
    return time.perf_counter() - t, len(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cards", type=int, default=65_536)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--naive-cards", type=int, default=4096,
                        help="cards the naive fork reads (0: all), scaled linearly")
    args = parser.parse_args()
    from benchmarks.seedcluster import isolate, setup

    isolate("fork")
    setup()
    from django.conf import settings

    from twin.hardware.models import Cluster
    from twin.scenarios.snapshot import freeze
    from twin.telemetry import state

    cluster_id = ensure_cluster(args.cards)
    cover(cluster_id)
    db = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
    try:
        n = feed(cluster_id)
        cluster = Cluster.objects.get(pk=cluster_id)
        print(f"fork benchmark: {n:,} cards, {db}, Redis {settings.REDIS_URL}, "
              f"{os.cpu_count()} CPUs", flush=True)
        times, freezes, blobs = [], [], []
        snap = None
        for _ in range(args.repeat):
            t = time.perf_counter()
            snap = freeze(cluster)
            t_freeze = time.perf_counter() - t
            blob = json.dumps(snap.to_dict(), separators=(",", ":"))
            times.append(time.perf_counter() - t)
            freezes.append(t_freeze)
            blobs.append(len(blob))
        assert snap is not None and snap.has_live_state
        assert snap.readings is not None and snap.readings.reporting == n
        summary = snap.summary()
        print(f"  snapshot: {summary['running']:,} running, {summary['queued']:,} queued, "
              f"cards down {summary['cards_down']}, links down {summary['links_down']}, "
              f"{summary['reporting']:,} cards reporting, JSON {blobs[-1] / 1e6:.2f} MB")
        naive_s, read = naive_fork(cluster_id, args.naive_cards or None)
        scaled = naive_s * n / read
        med, worst = statistics.median(times), max(times)
        print(f"  fork (freeze + JSON): median {med:.3f} s, worst {worst:.3f} s "
              f"(freeze alone median {statistics.median(freezes):.3f} s) over {args.repeat}")
        print(f"  naive fork (ORM object + card_state per card): {naive_s:.2f} s for "
              f"{read:,} cards" + (f", {scaled:.1f} s scaled to {n:,}" if read != n else ""))
        print(f"  ratio naive / ours: {scaled / med:.0f}×")
        ok = worst <= TARGET_S
        print(f"  target ≤ {TARGET_S:.0f} s: {'met' if ok else 'MISSED'}")
        return 0 if ok else 1
    finally:
        r = state.redis_client()
        prefix = os.environ["TWIN_TELEMETRY_PREFIX"]
        batch = list(r.scan_iter(match=f"{prefix}:*", count=1000))
        for i in range(0, len(batch), 500):
            r.unlink(*batch[i:i + 500])


if __name__ == "__main__":
    sys.exit(main())
