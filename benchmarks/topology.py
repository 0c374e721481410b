"""Benchmark: every topology metric on the million-card cluster.

    .venv/bin/python benchmarks/topology.py            # everything, incl. networkx baseline
    .venv/bin/python benchmarks/topology.py --skip-networkx
    .venv/bin/python benchmarks/topology.py --json out.json

Builds the seeds' full-scale cluster (2,048 supernodes × 8×8×8 torus =
1,048,576 cards, 131,072 PCIe switches, 262,144 NICs, a 3-tier radix-128
fat tree) and times, in one process: the build, the exact hop histogram /
average / diameter, the exact latency distribution, the bisection, a route
(by hops and by latency), a failure impact (1,000 random links + 8 random
switches), the seeds' latency requirements and an AllReduce curve. It
prints the wall time and the peak RSS of that process against the targets
(≤ 10 s, ≤ 4 GiB).

Baselines, timed in the same run on the same graph:

* one single-source BFS with scipy.sparse.csgraph — the practical floor for
  any method that has to look at the whole graph at least once;
* plain networkx BFS (``single_source_shortest_path_length``) from a few
  card sources, in a child process (the networkx graph alone needs several
  GiB, which must not count against our peak), extrapolated to the 1,048,576
  sources an all-pairs computation over cards needs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from scipy.sparse import csgraph  # noqa: E402

from simulation.collectives import collective_curve  # noqa: E402
from simulation.topology import (  # noqa: E402
    bisection,
    check_latency,
    cluster,
    failure_impact,
    hop_distances,
    hop_stats,
    latency_stats,
    million_cluster_spec,
    route,
    torus,
)

T = TypeVar("T")
TARGET_S = 10.0
TARGET_GIB = 4.0


def peak_rss_gib(who: int = resource.RUSAGE_SELF) -> float:
    """Peak resident set size (Linux reports KiB)."""
    return resource.getrusage(who).ru_maxrss / 2**20


def timed(log: dict[str, float], name: str, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    log[name] = time.perf_counter() - t0
    print(f"  {name:<28} {log[name]:7.3f} s", flush=True)
    return out


def networkx_child(sources: int) -> None:
    """Build the same graph in networkx and time BFS from a few cards."""
    import networkx as nx

    topo = cluster(million_cluster_spec())
    t0 = time.perf_counter()
    g = nx.Graph()
    g.add_nodes_from(range(topo.n_nodes))
    g.add_edges_from(zip(topo.link_u.tolist(), topo.link_v.tolist(), strict=True))
    build = time.perf_counter() - t0
    del topo
    times = []
    step = 1_048_576 // sources
    for i in range(sources):
        t0 = time.perf_counter()
        lengths = nx.single_source_shortest_path_length(g, i * step)
        times.append(time.perf_counter() - t0)
        assert len(lengths) == g.number_of_nodes()
    print(json.dumps({"build_s": build, "bfs_s": times, "peak_rss_gib": peak_rss_gib()}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-networkx", action="store_true", help="skip the networkx baseline")
    parser.add_argument("--nx-sources", type=int, default=3, help="networkx BFS sources to time")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    parser.add_argument("--networkx-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.networkx_child:
        networkx_child(args.networkx_child)
        return 0

    print(f"topology benchmark — million-card cluster, {os.cpu_count()} CPU(s)")
    log: dict[str, float] = {}
    start = time.perf_counter()
    topo = timed(log, "build", cluster, million_cluster_spec())
    n = topo.n_endpoints
    hops = timed(log, "hop histogram (exact)", hop_stats, topo)
    lat = timed(log, "latency (exact)", latency_stats, topo, hops=hops)
    bis = timed(log, "bisection", bisection, topo)
    r_hops = timed(log, "route by hops", route, topo, 0, n - 1)
    r_lat = timed(log, "route by latency", route, topo, 0, n - 1, by="latency")
    fail = timed(
        log,
        "failure impact",
        failure_impact,
        topo,
        random_links=1000,
        random_switches=8,
        samples=6,
        seed=1,
    )
    reqs = timed(log, "latency requirements", check_latency, topo, lat)
    coll = timed(
        log,
        "allreduce curve (5 sizes)",
        collective_curve,
        topo,
        {"op": "allreduce", "sizes": [1 << 10, 1 << 15, 1 << 20, 1 << 25, 1 << 30]},
    )
    total = time.perf_counter() - start
    peak = peak_rss_gib()

    # practical floor: one compiled BFS over the whole graph
    adj = topo.adjacency()
    t0 = time.perf_counter()
    csgraph.breadth_first_order(adj, 0, directed=True, return_predecessors=False)
    floor = time.perf_counter() - t0
    t0 = time.perf_counter()
    hop_distances(topo, 0)
    floor_depth = time.perf_counter() - t0

    # spot check of the symmetry claim: BFS from random cards must see the
    # same hop histogram as the class representative (not timed)
    rng = np.random.default_rng(7)
    rep = np.bincount(hop_distances(topo, 0)[:n].clip(0))
    spot = [int(c) for c in rng.choice(n, size=3, replace=False)]
    same = all(np.array_equal(np.bincount(hop_distances(topo, c)[:n].clip(0)), rep) for c in spot)
    fabric = hop_stats(torus([8, 8, 8]))
    ff = fabric.average_fraction()

    frac = hops.average_fraction()
    print()
    print(
        f"cards {n:,}  nodes {topo.n_nodes:,}  links {topo.n_links:,}  "
        f"arrays {topo.nbytes() / 2**20:.0f} MiB"
    )
    print(
        f"avg hops {hops.average:.6f} (= {frac.numerator}/{frac.denominator}, {hops.method})  "
        f"diameter {hops.diameter}"
    )
    print(
        f"  inside a supernode {hops.intra_group.average:.4f} hops (max "
        f"{hops.intra_group.maximum:.0f}), across {hops.inter_group.average:.4f} "
        f"(max {hops.inter_group.maximum:.0f})"
        if hops.intra_group and hops.inter_group
        else ""
    )
    print(
        f"symmetry spot check (BFS from cards {spot}): {'same histogram' if same else 'MISMATCH'}"
    )
    print(
        f"one supernode's 8×8×8 torus alone: avg {fabric.average:.6f} "
        f"(= {ff.numerator}/{ff.denominator}), diameter {fabric.diameter}; in the cluster "
        f"graph a same-server pair may also go card→PCIe switch→card (2 hops)"
    )
    print(f"latency ns: avg {lat.average_ns:.1f}  p99 {lat.p99_ns:.1f}  max {lat.max_ns:.1f}")
    print(f"bisection {bis.links:,} links = {bis.gbps / 1e6:.1f} Pb/s ({bis.source})")
    print(
        f"route 0→{n - 1}: {r_hops.hops} hops / {r_hops.latency_ns:.0f} ns; "
        f"lowest latency {r_lat.latency_ns:.0f} ns"
    )
    print(
        f"failure: {fail.removed_links} links down, connected={fail.connected}, "
        f"avg {fail.average_before:.4f} → {fail.average_after:.4f} "
        f"(±{fail.sample.stderr if fail.sample else 0:.1e} s.e.), "
        f"pairs longer ≈ {fail.pairs_longer:,}"
    )
    for r in reqs:
        print(
            f"requirement {r.name}: worst {r.worst_ns:.0f} ns vs {r.limit_ns:.0f} → "
            f"{'PASS' if r.passed else 'FAIL'} ({r.share_within:.1%} of pairs within)"
        )
    best = coll.best[-1]
    print(
        f"allreduce 1 GiB over {coll.ranks:,} ranks: {best.algorithm}, "
        f"{best.time_s * 1e3:.2f} ms, busbw {best.busbw_gbps:.0f} Gb/s"
    )
    print()
    ok_t, ok_m = total <= TARGET_S, peak <= TARGET_GIB
    print(f"WALL TIME {total:.2f} s (target ≤ {TARGET_S:.0f} s: {'ok' if ok_t else 'MISSED'})")
    print(f"PEAK RSS  {peak:.2f} GiB (target ≤ {TARGET_GIB:.0f} GiB: {'ok' if ok_m else 'MISSED'})")
    metrics_s = log["hop histogram (exact)"]
    print(
        f"single scipy BFS (floor): {floor:.3f} s; with depths: {floor_depth:.3f} s; "
        f"exact hop metrics = {metrics_s / floor:.1f}× one BFS; all-pairs by scipy BFS "
        f"would take ≈ {floor * n / 3600:.1f} h"
    )
    figures: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "cards": n,
        "nodes": topo.n_nodes,
        "links": topo.n_links,
        "array_mib": topo.nbytes() / 2**20,
        "steps_s": log,
        "total_s": total,
        "peak_rss_gib": peak,
        "avg_hops": hops.average,
        "avg_hops_exact": f"{frac.numerator}/{frac.denominator}",
        "diameter": hops.diameter,
        "latency_ns": {"avg": lat.average_ns, "p99": lat.p99_ns, "max": lat.max_ns},
        "bisection_links": bis.links,
        "bisection_gbps": bis.gbps,
        "scipy_bfs_s": floor,
        "scipy_bfs_with_depth_s": floor_depth,
        "symmetry_spot_check": same,
    }
    del topo, adj

    if not args.skip_networkx:
        print(f"networkx baseline (child process, {args.nx_sources} sources)…", flush=True)
        out = subprocess.run(
            [sys.executable, __file__, "--networkx-child", str(args.nx_sources)],
            check=True,
            capture_output=True,
            text=True,
        )
        child = json.loads(out.stdout.strip().splitlines()[-1])
        per = sum(child["bfs_s"]) / len(child["bfs_s"])
        all_pairs = per * n
        print(
            f"networkx: graph build {child['build_s']:.1f} s, peak RSS "
            f"{child['peak_rss_gib']:.2f} GiB, one BFS {per:.2f} s (× {n:,} sources ≈ "
            f"{all_pairs / 86400:.1f} days)"
        )
        print(
            f"ratio networkx all-pairs / our exact hop metrics ≈ {all_pairs / metrics_s:,.0f}×; "
            f"one networkx BFS / one scipy BFS ≈ {per / floor:.0f}×"
        )
        figures["networkx"] = {
            **child,
            "bfs_mean_s": per,
            "all_pairs_extrapolated_s": all_pairs,
            "ratio_vs_ours": all_pairs / metrics_s,
            "bfs_ratio_vs_scipy": per / floor,
        }
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0 if (ok_t and ok_m and same) else 1


if __name__ == "__main__":
    raise SystemExit(main())
