"""Benchmark: the best-configuration search for a 530B model on ~5,000 A100s.

    .venv/bin/python benchmarks/training.py
    .venv/bin/python benchmarks/training.py --loop-sample 300 --json out.json

Times :func:`simulation.training.search` for Megatron 530B (105 layers,
h = 20,480) on 5,128 A100 80 GB cards (8-card NVLink servers, one 400G NIC per
card), global batch 2,520 — Calculon's reference search (122 s, ~67
configurations/s on 2 cores) — and prints configurations per second and the
wall time against the targets (≥ 10,000 configurations/s, ≤ 10 s).

Baseline, measured in the same run on the same model: a straightforward
per-configuration Python loop that calls :func:`simulation.training.evaluate`
once per configuration (the same step model, one configuration at a time,
sharing the same precomputed collective tables) over a random sample of the
search's own configurations; its rate is extrapolated to the whole search.

Second search (skip with ``--no-domains``): Llama 3 405B on 576 GB200 (global batch
1,152) with ``limits.nvlink_domain`` [8, 72] — every configuration priced both as NVL8
islands and as one NVL72 domain — against the same loop on its own configurations.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from simulation.training import MODELS, evaluate, search, system_for_accelerator  # noqa: E402
from simulation.training.comm import CommModel  # noqa: E402
from simulation.training.fidelity import ACCELERATORS  # noqa: E402
from simulation.training.search import enumerate_configs, execution_at  # noqa: E402
from simulation.training.system import with_scale_up_domain  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cards", type=int, default=5128)
    ap.add_argument("--global-batch", type=int, default=2520)
    ap.add_argument("--loop-sample", type=int, default=200)
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--no-domains", action="store_true",
                    help="skip the GB200 search over NVLink-domain sizes")
    args = ap.parse_args()
    model = MODELS["megatron-530b"]
    system = system_for_accelerator(ACCELERATORS["a100-sxm-80gb"], args.cards)

    t0 = time.perf_counter()
    res = search(model, system, args.cards, args.global_batch)
    wall = time.perf_counter() - t0
    rate = res.configs_evaluated / wall

    batch, _, _ = enumerate_configs(model, system, args.cards, args.global_batch, {})
    comm = CommModel(system)
    rng = np.random.default_rng(0)
    sample = rng.choice(len(batch), min(args.loop_sample, len(batch)), replace=False)
    evaluate(model, system, execution_at(batch, int(sample[0])), comm=comm)  # warm tables
    t1 = time.perf_counter()
    for i in sample:
        evaluate(model, system, execution_at(batch, int(i)), comm=comm)
    loop_rate = len(sample) / (time.perf_counter() - t1)

    best = res.best[0]
    figures = {
        "configs_enumerated": res.configs_enumerated,
        "configs_evaluated": res.configs_evaluated,
        "wall_s": wall,
        "configs_per_s": rate,
        "loop_configs_per_s": loop_rate,
        "loop_wall_s_extrapolated": res.configs_evaluated / loop_rate,
        "ratio": rate / loop_rate,
        "rejected": res.rejected,
        "best": {"execution": best["execution"], "step_time_s": best["step_time_s"],
                 "mfu": best["mfu"]},
    }
    print(f"530B on {args.cards} A100, global batch {args.global_batch}")
    print(f"  enumerated {res.configs_enumerated:,}, priced {res.configs_evaluated:,}, "
          f"fitting {res.fitting:,}")
    print(f"  search wall {wall:.2f} s (target ≤ 10 s), {rate:,.0f} configs/s "
          f"(target ≥ 10,000)")
    print(f"  per-configuration loop: {loop_rate:,.0f} configs/s "
          f"(whole search ≈ {figures['loop_wall_s_extrapolated']:,.0f} s)")
    print(f"  ratio vectorised / loop: {figures['ratio']:,.0f}×")
    ex = best["execution"]
    print(f"  best: tp {ex['tp']} pp {ex['pp']} dp {ex['dp']} mb {ex['micro_batch']} "
          f"vpp {ex['vpp']} {ex['recompute']} zero {ex['zero']} {ex['precision']}: "
          f"{best['step_time_s']:.2f} s/step, MFU {best['mfu']:.1%}")
    if not args.no_domains:
        figures["nvlink_domain"] = domain_search(args.loop_sample)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(figures, fh, indent=1)


def domain_search(loop_sample: int) -> dict[str, float]:
    """Llama 3 405B on 576 GB200 with ``limits.nvlink_domain`` [8, 72]: rate and ratio."""
    catalogue = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "twin", "hardware", "fixtures", "catalogue.json")
    with open(catalogue) as fh:
        gb200 = next(r["fields"] for r in json.load(fh)
                     if r["fields"].get("slug") == "gb200-186gb")
    model, cards, gb = MODELS["llama3-405b"], 576, 1152
    system = system_for_accelerator(gb200, cards)
    limits = {"nvlink_domain": [8, 72]}
    t0 = time.perf_counter()
    res = search(model, system, cards, gb, limits=limits)
    wall = time.perf_counter() - t0
    rate = res.configs_evaluated / wall
    batch, _, _ = enumerate_configs(model, system, cards, gb, limits)
    rng = np.random.default_rng(0)
    sample = rng.choice(len(batch), min(loop_sample, len(batch)), replace=False)
    comms = {d: CommModel(with_scale_up_domain(system, d, "nvlink_domain")) for d in (0, 8)}
    for i in sample[:2]:  # warm both domains' tables
        ex = execution_at(batch, int(i))
        evaluate(model, system, ex, comm=comms[ex.nvlink_domain])
    t1 = time.perf_counter()
    for i in sample:
        ex = execution_at(batch, int(i))
        evaluate(model, system, ex, comm=comms[ex.nvlink_domain])
    loop_rate = len(sample) / (time.perf_counter() - t1)
    best = res.best[0]
    ex = best["execution"]
    print(f"405B on {cards} GB200, global batch {gb}, limits.nvlink_domain [8, 72]")
    print(f"  enumerated {res.configs_enumerated:,}, priced {res.configs_evaluated:,}, "
          f"fitting {res.fitting:,}")
    print(f"  search wall {wall:.2f} s, {rate:,.0f} configs/s (target ≥ 100,000)")
    print(f"  per-configuration loop: {loop_rate:,.0f} configs/s; ratio {rate / loop_rate:,.0f}×")
    print(f"  best: tp {ex['tp']} pp {ex['pp']} dp {ex['dp']} NVLink domain "
          f"{ex['nvlink_domain'] or system.scale_up_domain}: {best['step_time_s']:.2f} s/step")
    return {"configs_evaluated": res.configs_evaluated, "wall_s": wall, "configs_per_s": rate,
            "loop_configs_per_s": loop_rate, "ratio": rate / loop_rate}


if __name__ == "__main__":
    main()
