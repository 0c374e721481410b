"""Benchmark: the physical twin's engine — one plant step at a million cards, a 24 h
facility what-if on the demo cluster, caps for a million cards.

Usage (phase 1 needs the database: PostgreSQL, a scratch database)::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/twin_bench \\
        .venv/bin/python benchmarks/thermal.py
    # options: --racks 26215 --racks-per-cdu 96 --steps 20 --loop-steps 2
    #          --demo-racks 107 --baseline-hours 1 --json out.json

In one run, one core (numpy single-threaded for the vectorised path):

1. **Plant step, million-card preset** (issue 24 item 2: ≤ 50 ms added to a 1 s
   tick). The plant of the real ``million`` preset (2,048 × seed-512 = 1,048,576
   cards) as the twin has it: the cluster ``--step-cluster`` (default ``million``)
   in the database of ``DATABASE_URL``, built with its facility by
   ``build_cluster`` if it is not there yet (setup, not timed), read with
   ``plant_for_cluster`` and compiled — racks, CDUs, CRAHs, chillers, towers and
   power chain exactly as the builder sized them. Load: each rack at 70–97.5 % of
   its budget, settled, then a ±10 % change (a real transient). Timed: the
   vectorised step (hydraulics, thermal network, power chain with the mechanical
   load, PUE) — median of ``--steps``. **Baseline, same run**: the same step as a
   plain per-rack Python loop (racks, mixing, each CDU's ε-NTU exchanger, towers,
   the power chain element by element); its result is checked against the
   vectorised one, and the ratio printed.
2. **What-if, 24 h at 1 s on the demo cluster** (item 5: ≤ 10 s). 4,096+ cards in
   107 racks on 4 CDUs; events: a pump trip, a 6-hour hot day (+6 °C), a 10-minute
   CDU trip, a 1-hour 15 % load surge, a lost feed unit, a lost tower cell; capping
   on. Timed: :func:`simulation.facility.whatif.run` (quiescent stretches skipped:
   exactly when nothing moves, and a relaxing plant once its remaining movement is
   under ``quiescent_k``, 10⁻³ K by default). **Baseline, same run**: the same engine
   computing every step (``skip_quiescent=False``) for ``--baseline-hours``, scaled to 24 h.
3. **Caps for a million cards**: :func:`simulation.facility.capping.allocate` over
   1,048,576 cards with rack, PDU/UPS/feed and site limits (uniform policy).
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simulation.facility.capping import CapLimits, allocate, it_limits  # noqa: E402
from simulation.facility.model import FacilityModel, compile_model  # noqa: E402
from simulation.facility.plant import Plant  # noqa: E402
from simulation.facility.power_chain import power_flow  # noqa: E402
from simulation.facility.presets import demo_plant  # noqa: E402
from simulation.facility.thermal import Conditions, ThermalState  # noqa: E402
from simulation.facility.whatif import Event, WhatIfInput, run  # noqa: E402


def loop_step(model: FacilityModel, s: ThermalState, rack_w: list[float], dt: float,
              cond: Conditions) -> tuple[list[float], list[float], float]:
    """The plant step as a plain per-rack Python loop (no numpy in the loop).
    Nothing failed; returns rack returns, CDU supplies and facility power. Per rack and
    per CDU it is the engine's step exactly (checked); the few heat-rejection roots are
    simpler (a chiller's compressor and a condenser's heat on its tower are left out,
    CRAHs share the air evenly): the facility power differs by those, printed."""
    net, chain, p = model.net, model.chain, model.net.params
    cp_t, cp_f = p.tcs_fluid.cp_j_kg_k, p.fws_fluid.cp_j_kg_k
    n_cdu = len(net.cdu_elem)
    rack_cdu = net.rack_cdu.tolist()
    flow_d = net.rack_flow_d.tolist()
    cap = net.rack_cap_j_k.tolist()
    lf = net.rack_liquid.tolist()
    ret0 = s.rack_ret_c.tolist()
    sup_delayed = []
    for c in range(n_cdu):
        delay = net.cdu_pipe_kg[c] / net.cdu_flow_d[c] / dt
        d = min(max(int(round(delay)), 0), s.buf.shape[1] - 1)
        sup_delayed.append(float(s.buf[c, (s.pos - d) % s.buf.shape[1]]))
    gw = [0.0] * n_cdu
    gtw = [0.0] * n_cdu
    ret = [0.0] * len(rack_w)
    air = 0.0
    for r, w in enumerate(rack_w):
        c = rack_cdu[r]
        q = w * lf[r]
        air += w - q
        if c < 0:  # an air rack: no water, its heat all in the air
            ret[r] = p.air_supply_c
            continue
        g = flow_d[r] * cp_t
        x = g * dt / cap[r]
        phi = (1 - math.exp(-x)) / x if x > 1e-12 else 1.0
        t_in = sup_delayed[c]
        ret[r] = ret0[r] + (q + g * (t_in - ret0[r])) * dt / cap[r] * phi
        gw[c] += g
        gtw[c] += g * ret[r]
    n_root = len(net.root_elem)
    q_root = [0.0] * n_root
    g_root = [0.0] * n_root
    sup_out = []
    pumps = 0.0
    for c in range(n_cdu):
        mix = gtw[c] / gw[c]
        ct = net.cdu_flow_d[c] * cp_t
        gain = 1 - math.exp(-ct * dt / net.cdu_tank_j_k[c])
        cret = s.cdu_ret_c[c] + (mix - s.cdu_ret_c[c]) * gain
        cf = net.cdu_fws_flow_d[c] * cp_f
        cmin, cmax = min(ct, cf), max(ct, cf)
        ntu = net.cdu_ua_d[c] / cmin
        cr = cmin / cmax
        if abs(1 - cr) < 1e-9:
            eps = ntu / (1 + ntu)
        else:
            e = math.exp(-ntu * (1 - cr))
            eps = (1 - e) / (1 - cr * e)
        root = int(net.cdu_root[c])
        qh = min(max(eps * cmin * (cret - s.root_sup_c[root]), 0.0),
                 max(ct * (cret - net.cdu_setpoint_c[c]), 0.0))
        sup_out.append(cret - qh / ct)
        q_root[root] += qh
        g_root[root] += cf
        pumps += float(net.cdu_pump_w[c])
    for i in range(len(net.floop_elem)):
        pumps += float(net.floop_pump_w[i])
    # CRAH takes the air share (demo preset: one CRAH on the facility water, within capacity)
    crah_fan = 0.0
    for i in range(len(net.crah_elem)):
        share = air * float(net.air_share_crah[i])
        avail = float(net.crah_cap_w[i])
        crah_fan += float(net.crah_fan_w[i]) * (min(share, avail) / avail) ** 3
        q_root[int(net.crah_root[i])] += min(share, avail)
        g_root[int(net.crah_root[i])] += float(net.crah_flow_d[i]) * cp_f
    fans = crah_fan
    for k in range(n_root):
        if float(net.root_approach_c[k]) <= 0:  # a chiller: no fan (its compressor: below)
            continue
        mix = s.root_sup_c[k] + q_root[k] / g_root[k]
        rret = s.root_ret_c[k] + (mix - s.root_ret_c[k]) * (
            1 - math.exp(-g_root[k] * dt / max(float(net.root_tank_j_k[k]), 1e-9)))
        kk = float(net.root_cap_w[k]) * float(net.root_units[k]) / float(net.root_approach_c[k])
        amb = cond.wet_bulb_c
        need = max(g_root[k] * (rret - net.root_setpoint_c[k]), 0.0)
        at_set = kk * max(net.root_setpoint_c[k] - amb, 0.0)
        fan = need / at_set if need <= at_set else 1.0
        fans += float(net.root_fan_w[k]) * fan ** 3
    # power chain, element by element
    out = [0.0] * chain.n
    parent = chain.rack_parent.tolist()
    for r, w in enumerate(rack_w):
        out[parent[r]] += w
    inp = [0.0] * chain.n
    for d in range(len(chain.levels) - 1, -1, -1):
        for i in chain.levels[d].tolist():
            lfc, efc = chain.curves[int(chain.curve_of[i])]
            installed = float(chain.rating_w[i]) * int(chain.units[i])
            eff = float(np.interp(out[i] / installed, lfc, efc))
            inp[i] = out[i] / eff
            if d > 0:
                out[int(chain.parent[i])] += inp[i]
    facility = sum(inp[i] for i in chain.levels[0].tolist()) + pumps + fans
    return ret, sup_out, facility


def million_plant(name: str) -> tuple[Plant, float]:
    """The plant of the built ``million`` preset (built if missing), and the build time
    (0 when it was there)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "twin.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from twin.facility.plant import plant_for_cluster
    from twin.hardware.builder import build_cluster
    from twin.hardware.models import Cluster

    call_command("migrate", verbosity=0)
    cluster = Cluster.objects.filter(name=name).first()
    build_s = 0.0
    if cluster is None:
        t0 = time.perf_counter()
        cluster = Cluster.objects.get(pk=build_cluster("million", name=name)["cluster_id"])
        build_s = time.perf_counter() - t0
    return plant_for_cluster(cluster), build_s


def bench_step(args: argparse.Namespace) -> dict[str, float]:
    plant, build_s = million_plant(args.step_cluster)
    model = compile_model(plant)
    n_racks = len(plant.racks.ids)
    rng = np.random.default_rng(1)
    rack_w = plant.racks.budget_w * rng.uniform(0.7, 0.975, n_racks)
    cond = Conditions.of(plant)
    state = model.settle(rack_w, cond).thermal
    rack_w = rack_w * rng.uniform(0.9, 1.1, n_racks)   # a load change: a real transient
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        r = model.step(state, rack_w, 1.0, cond)
        times.append(time.perf_counter() - t0)
    vec_ms = statistics.median(times) * 1e3
    loop_times = []
    rw = rack_w.tolist()
    for _ in range(args.loop_steps):
        t0 = time.perf_counter()
        ret, sup, fac = loop_step(model, state, rw, 1.0, cond)
        loop_times.append(time.perf_counter() - t0)
    loop_ms = statistics.median(loop_times) * 1e3
    diff = max(float(np.max(np.abs(np.array(ret) - r.thermal.rack_ret_c))),
               float(np.max(np.abs(np.array(sup) - r.thermal.cdu_sup_c))))
    fac_rel = abs(fac - r.power.facility_w) / r.power.facility_w
    print(f"[step] preset million, cluster {args.step_cluster!r}"
          + (f" (built now: {build_s:.0f} s, not timed)" if build_s else "")
          + f": {n_racks:,} racks, {len(model.net.cdu_elem)} CDUs, {model.chain.n} power "
          f"elements, {len(plant.cooling)} cooling elements")
    print(f"[step] vectorised: {vec_ms:.1f} ms (median of {args.steps}); per-rack Python "
          f"loop: {loop_ms:.0f} ms (median of {args.loop_steps}); ratio {loop_ms / vec_ms:.0f}×")
    print(f"[step] loop vs vectorised: max |ΔT| {diff:.2e} K, facility power rel. diff "
          f"{fac_rel:.1e}; PUE {r.pue:.4f}")
    print(f"[step] target ≤ 50 ms: {'PASS' if vec_ms <= 50 else 'FAIL'}")
    return {"racks": n_racks, "step_ms": vec_ms, "loop_ms": loop_ms,
            "ratio": loop_ms / vec_ms, "max_diff_k": diff, "pue": r.pue}


def bench_whatif(args: argparse.Namespace) -> dict[str, float]:
    plant = demo_plant(args.demo_racks)
    h = 3600.0
    events = (Event(1 * h, "pump_trip", "cdu-1"), Event(6 * h, "hot_day", value=6.0,
                                                        duration_s=6 * h),
              Event(12 * h, "cdu_trip", "cdu-2", duration_s=600.0),
              Event(15 * h, "load_surge", value=1.15, duration_s=h),
              Event(18 * h, "feed_loss", "feed"), Event(20 * h, "cooling_loss", "tower"))
    inp = WhatIfInput(horizon_s=24 * h, dt_s=1.0, events=events, capping=True)
    t0 = time.perf_counter()
    res = run(plant, inp)
    full_s = time.perf_counter() - t0
    base_inp = WhatIfInput(horizon_s=args.baseline_hours * h, dt_s=1.0, events=events,
                           capping=True)
    t0 = time.perf_counter()
    base = run(plant, base_inp, skip_quiescent=False)
    base_s = (time.perf_counter() - t0) * 24 / args.baseline_hours
    first = [x for x in res.racks["time_to_limit_s"] if x is not None]
    print(f"[whatif] demo: {args.demo_racks} racks, 24 h at 1 s = {res.steps:,} steps, "
          f"{res.steps_computed:,} computed (the rest quiescent)")
    print(f"[whatif] run: {full_s:.2f} s; every step computed ({base.steps_computed:,} steps "
          f"over {args.baseline_hours} h, scaled to 24 h): {base_s:.1f} s; ratio "
          f"{base_s / full_s:.1f}×; per computed step {base_s / 86400 * 1e6:.0f} µs")
    print(f"[whatif] first rack at its limit {min(first) - 12 * h if first else float('nan'):.0f}"
          f" s after the CDU trip; mean PUE {res.energy['mean_pue']:.4f}; IT energy lost "
          f"{res.energy['it_lost_kwh']:.1f} kWh")
    print(f"[whatif] target ≤ 10 s: {'PASS' if full_s <= 10 else 'FAIL'}")
    return {"whatif_s": full_s, "every_step_s": base_s, "ratio": base_s / full_s,
            "steps_computed": res.steps_computed}


def bench_caps(args: argparse.Namespace) -> dict[str, float]:
    plant = demo_plant(args.racks, racks_per_cdu=args.racks_per_cdu, racks_per_pdu=8)
    model = compile_model(plant)
    cards = args.racks * 40
    rng = np.random.default_rng(2)
    demand = rng.uniform(500.0, 1100.0, cards)
    card_rack = np.repeat(np.arange(args.racks), 40)
    rack_w = np.bincount(card_rack, weights=demand)
    flow = power_flow(model.chain, rack_w)
    limits = CapLimits(card_rack=card_rack, rack_limit_w=np.full(args.racks, 32e3),
                       chain=model.chain, element_limit_w=it_limits(flow, model.chain, rack_w),
                       site_limit_w=float(rack_w.sum()) * 0.8)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        d = allocate(demand, np.full(cards, 200.0), np.full(cards, 1000.0), limits)
        times.append(time.perf_counter() - t0)
    ms = statistics.median(times) * 1e3
    print(f"[caps] {cards:,} cards: {ms:.0f} ms (median of 3); "
          f"{int((d.binding > 0).sum()):,} cards capped")
    return {"caps_ms": ms, "cards": cards}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--step-cluster", default="million",
                    help="the built million-card cluster whose plant phase 1 steps")
    ap.add_argument("--racks", type=int, default=26215,
                    help="racks of the synthetic plant of the caps phase")
    ap.add_argument("--racks-per-cdu", type=int, default=96)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--loop-steps", type=int, default=2)
    ap.add_argument("--demo-racks", type=int, default=107)
    ap.add_argument("--baseline-hours", type=float, default=1.0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    out = {"step": bench_step(args), "whatif": bench_whatif(args), "caps": bench_caps(args)}
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
