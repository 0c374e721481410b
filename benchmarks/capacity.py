"""Benchmark: a capacity plan over ≥ 1,000 candidate designs in ≤ 10 s.

    PYTHONPATH=. .venv/bin/python benchmarks/capacity.py
    PYTHONPATH=. .venv/bin/python benchmarks/capacity.py --naive-sample 6 --json out.json

Prices 3 accelerators (H100, B200, GB200 NVL72) × 4 card counts × 15 rack power
classes (20–160 kW) × 2 scale-out switches × 3 optics = 1,080 designs of a
Llama 3 70B run of 1.5 T tokens on a 30 MW site with :func:`simulation.capacity.plan`:
one training-model search per distinct (accelerator, cards) — 12 — then every design
at once in numpy. Prints the wall time against the 10 s target.

Baselines, measured in the same run:

* **naive**: a per-candidate loop that prices each design on its own — the
  training search for its (accelerator, cards) and the design arithmetic
  (:func:`simulation.capacity.evaluate_one`), no cache — timed on a random sample
  of ``--naive-sample`` designs and extrapolated to all of them;
* **loop over designs with the shared cache**: :func:`evaluate_one` for every
  design, with the step times already known (the arithmetic only, unvectorised),
  against the vectorised evaluator on the same cached step times.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from simulation.capacity import (  # noqa: E402
    CandidateSpace,
    PriceTable,
    Site,
    Timer,
    Workload,
    evaluate,
    evaluate_one,
    plan,
)

CATALOGUE = Path(__file__).parents[1] / "twin/hardware/fixtures/catalogue.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--naive-sample", type=int, default=6)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    figures = {r["fields"]["slug"]: r["fields"] for r in json.loads(CATALOGUE.read_text())}
    site = Site(power_kw=30_000, cooling_kw=30_000, floor_racks=400, pue=1.1)
    space = CandidateSpace(
        accelerators=("h100-sxm5-80gb", "b200-sxm-180gb", "gb200-186gb"),
        rack_kw=tuple(float(k) for k in range(20, 161, 10)),
        cards=(1152, 2304, 4608, 9216),
        switches=("ib-ndr-64", "eth-51t-128"), optics=("transceiver", "aoc", "dac"))
    workload = Workload(model="llama3-70b", tokens=1.5e12, global_batch=1152)
    prices = PriceTable()

    cpu0, t0 = time.process_time(), time.perf_counter()
    result = plan(site, space, workload, prices, figures)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    out = result.to_dict()
    print(f"designs: {result.count:,} ({out['fitting']:,} fit; refused {out['refused']}); "
          f"training searches: {out['searches']}")
    print(f"plan wall time: {wall:.2f} s ({cpu:.2f} s CPU) — target ≤ 10 s: "
          f"{'met' if wall <= 10 and result.count >= 1000 else 'MISSED'}")

    # naive: each design priced alone, its own search, no cache
    rng = random.Random(0)
    sample = rng.sample(range(result.count), args.naive_sample)
    t0 = time.perf_counter()
    for i in sample:
        index = tuple(int(v) for v in result.grid[i])
        evaluate_one(site, space, workload, prices, figures, Timer(figures, workload), index)
    naive_per = (time.perf_counter() - t0) / len(sample)
    naive_total = naive_per * result.count
    print(f"naive per-candidate loop: {naive_per:.2f} s per design → {naive_total:,.0f} s for "
          f"all (extrapolated from {len(sample)}); ratio naive / plan: {naive_total / wall:,.0f}×")

    # the arithmetic alone: vectorised against a loop, both on the cached step times
    timer = Timer(figures, workload)
    for (a, cards), fig in result.figures.items():  # keyed (accelerator index, cards)
        timer.cache[(space.accelerators[a], cards)] = fig
    t0 = time.perf_counter()
    again = evaluate(site, space, workload, prices, figures, timer)
    vec = time.perf_counter() - t0
    t0 = time.perf_counter()
    for index in again.grid:
        evaluate_one(site, space, workload, prices, figures, timer,
                     tuple(int(v) for v in index))
    loop = time.perf_counter() - t0
    print(f"design arithmetic on cached step times: vectorised {vec * 1e3:.1f} ms, "
          f"per-design loop {loop * 1e3:.0f} ms, ratio {loop / vec:.1f}×")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "designs": result.count, "fitting": out["fitting"], "searches": out["searches"],
            "wall_s": wall, "cpu_s": cpu, "naive_s_per_design": naive_per,
            "naive_total_s": naive_total, "vectorised_s": vec, "loop_s": loop}, indent=2))


if __name__ == "__main__":
    main()
