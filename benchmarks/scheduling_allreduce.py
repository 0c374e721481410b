"""The articles' "topology-aware scheduling cuts AllReduce time by 25 %", measured on the twin.

A cluster of 8-card NVLink servers with one 400 Gb/s NIC per card on rails
(:func:`simulation.scheduling.default_allreduce`; 4 supernodes of 64 servers = 2,048
cards), a synthetic workload (:func:`simulation.scheduling.synthetic_workload`: Poisson
arrivals, log-normal durations of mean 1 h) whose size mix adds multi-server gang jobs
of 16, 32 and 64 cards to the Alibaba-shaped mix, in full mode (jobs arrive, run and
leave) at an offered load ``ρ = arrival rate × mean cards × mean duration / cards``.

For each policy: the mean time of one 1 GiB AllReduce over the jobs wider than a
server (the same jobs under every policy: in full mode all of them run), priced on the
placement each got. Printed: first-fit, random, best-fit and topology-aware means and
the cut ``1 − topology / other``; the figure depends on the mix and the load (per row).
Single-server jobs are left out: every policy puts a job of ≤ 8 cards on one server,
where its AllReduce runs over NVLink whatever the policy.

Usage: ``python benchmarks/scheduling_allreduce.py [--jobs N] [--json out.json]``.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulation.scheduling import (  # noqa: E402
    ALIBABA_DEFAULT_MIX,
    AllReducePrice,
    Nodes,
    default_allreduce,
    simulate,
    synthetic_workload,
    torus_allreduce,
)

POLICIES = ("fifo-first-fit", "random", "best-fit", "topology-aware")
MIXES = {
    # share of jobs that span servers (16/32/64 cards, equally likely); the rest is the
    # Alibaba-shaped mix (CPU-only, shared, 1/2/4/8 cards)
    "4 % multi-server": 0.04,
    "15 % multi-server": 0.15,
}
LOADS = (0.5, 0.8, 0.95)


def mix_with(multi: float) -> dict[str, object]:
    """The default mix with ``multi`` of the jobs spanning servers."""
    m = dict(ALIBABA_DEFAULT_MIX)
    keep = 1.0 - multi
    whole = {int(k): float(v) * keep for k, v in dict(m["whole"]).items()}  # type: ignore[call-overload]
    for k in (16, 32, 64):
        whole[k] = multi / 3
    m["whole"] = whole
    m["cpu_only"] = float(m["cpu_only"]) * keep  # type: ignore[arg-type]
    m["shared"] = float(m["shared"]) * keep  # type: ignore[arg-type]
    return m


def run(nodes: Nodes, n_jobs: int, multi: float, load: float, seed: int,
        policies: Sequence[str] = POLICIES,
        price: AllReducePrice | None = None) -> dict[str, dict[str, float]]:
    """Mean AllReduce of the multi-server jobs per policy (and their count)."""
    mix = mix_with(multi)
    probe = synthetic_workload(20_000, seed=seed + 99, mix=mix)
    mean_cards = float(np.where(probe.num_gpu > 0, probe.gpu_demand, 0).mean())
    mean_duration = 3600.0
    gap = mean_cards * mean_duration / (load * nodes.total_gpus)
    work = synthetic_workload(n_jobs, seed=seed, mix=mix, mean_interarrival_s=gap,
                              mean_duration_s=mean_duration)
    price = price or default_allreduce(size_bytes=float(1 << 30))
    out: dict[str, dict[str, float]] = {}
    for policy in policies:
        times: list[float] = []

        def record(ns: Nodes, pl: Sequence[tuple[int, int, int]], sink: list[float] = times
                   ) -> float:
            t = price(ns, pl)
            if len({n for n, _, _ in pl}) > 1 or sum(1 for _, c, _ in pl if c >= 0) > 8:
                sink.append(t)
            return t

        r = simulate(nodes, work, policy, mode="full", seed=seed, allreduce=record)
        wide = int((work.num_gpu > nodes.max_gpus).sum())
        out[policy] = {"mean_s": float(np.mean(times)) if times else float("nan"),
                       "jobs": float(len(times)), "wide_jobs": float(wide),
                       "completed": float(r.jobs["completed"])}
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json")
    args = ap.parse_args()
    nodes = Nodes.uniform(256, 8, servers_per_supernode=64)
    print(f"{len(nodes)} servers x 8 cards in 4 supernodes, rails; {args.jobs} jobs per run; "
          "mean 1 GiB AllReduce of the jobs wider than a server")
    print(f"{'mix':18s} {'load':>5s} {'jobs':>5s} {'first-fit ms':>13s} {'random ms':>10s} "
          f"{'best-fit ms':>12s} {'topology ms':>12s} {'cut vs ff':>10s} {'vs random':>10s} "
          f"{'vs best-fit':>12s}")
    rows = []
    for name, multi in MIXES.items():
        for load in LOADS:
            res = run(nodes, args.jobs, multi, load, args.seed)
            ff, rnd, bf, ta = (res[p]["mean_s"] for p in POLICIES)
            cut_ff, cut_rnd, cut_bf = 1 - ta / ff, 1 - ta / rnd, 1 - ta / bf
            jobs = int(res["topology-aware"]["jobs"])
            assert all(res[p]["jobs"] == res[p]["wide_jobs"] for p in POLICIES), res
            print(f"{name:18s} {load:5.2f} {jobs:5d} {ff * 1e3:13.2f} {rnd * 1e3:10.2f} "
                  f"{bf * 1e3:12.2f} {ta * 1e3:12.2f} {cut_ff:10.1%} {cut_rnd:10.1%} "
                  f"{cut_bf:12.1%}")
            rows.append({"mix": name, "load": load, "jobs": jobs, "first_fit_s": ff,
                         "random_s": rnd, "best_fit_s": bf, "topology_s": ta,
                         "cut_vs_first_fit": cut_ff, "cut_vs_random": cut_rnd,
                         "cut_vs_best_fit": cut_bf})
    print("torus supernodes (8x8x8 cards each, 400 Gb/s links; an 8-card server = one line)")
    torus = torus_allreduce((8, 8, 8), float(1 << 30))
    for load in LOADS:
        res = run(nodes, args.jobs, MIXES["15 % multi-server"], load, args.seed, price=torus)
        ff, rnd, bf, ta = (res[p]["mean_s"] for p in POLICIES)
        cut_ff, cut_rnd, cut_bf = 1 - ta / ff, 1 - ta / rnd, 1 - ta / bf
        jobs = int(res["topology-aware"]["jobs"])
        print(f"{'15 % (torus)':18s} {load:5.2f} {jobs:5d} {ff * 1e3:13.2f} {rnd * 1e3:10.2f} "
              f"{bf * 1e3:12.2f} {ta * 1e3:12.2f} {cut_ff:10.1%} {cut_rnd:10.1%} "
              f"{cut_bf:12.1%}")
        rows.append({"mix": "15 % multi-server", "fabric": "torus", "load": load, "jobs": jobs,
                     "first_fit_s": ff, "random_s": rnd, "best_fit_s": bf, "topology_s": ta,
                     "cut_vs_first_fit": cut_ff, "cut_vs_random": cut_rnd,
                     "cut_vs_best_fit": cut_bf})
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
