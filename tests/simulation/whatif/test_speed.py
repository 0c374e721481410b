"""A training job's pace from the training model (``simulation.whatif.speed``): closed
forms of the step model (clock, batch over cards, same placement), and the engine
pricing a failure's worse placement, a cap and a resize by it."""
from __future__ import annotations

import numpy as np
import pytest

from simulation.snapshot import PendingJob, RunningJob
from simulation.training import MODELS, evaluate
from simulation.training.energy import clock_for_cap
from simulation.whatif import Layout, Shape, StepTimes, run_case, run_whatif
from simulation.whatif.speed import valid_domain
from tests.simulation.whatif.test_engine import T0, row, snap, spec

H100 = {"slug": "h100-sxm5-80gb", "bf16_tflops": 989.5, "fp8_tflops": 1979, "fp32_tflops": 67,
        "tf32_tflops": 494.5, "hbm_gib": 80, "hbm_tbps": 3.35, "tdp_w": 700, "idle_w": 70,
        "scaleup_gbps": 900, "nvlink_domain_cards": 8}
"""The twin's catalogue row (twin/hardware/fixtures/catalogue.json, NVIDIA's datasheet)."""
MODEL, BATCH = "llama3-8b", 64


def h100_layout(servers: int = 4) -> Layout:
    return Layout(tuple(range(100, 100 + servers)), tuple(1 + i // 2 for i in range(servers)),
                  (0,) * servers, tuple(tuple(range(s * 8, s * 8 + 8)) for s in range(servers)),
                  {}, tdp_w=700.0, idle_w=70.0, accelerator=H100)


def train_job(job_id: int, cards: range, left: float) -> RunningJob:
    return RunningJob(job_id, f"t{job_id}", "", 0, tuple(cards), (1000,) * len(cards), T0,
                      T0 + left, None, MODEL, BATCH)


@pytest.fixture(scope="module")
def times() -> StepTimes:
    return StepTimes(H100, 8)


def test_the_same_shape_runs_at_speed_one(times):
    shape = Shape(MODEL, BATCH, 8, 8)
    assert times.slowdown(shape, shape) == 1.0
    # and the step time is the training model's own (evaluate on the layout it chose)
    ex = times.layout(MODEL, BATCH, 8, 8)
    assert ex is not None and ex.cards == 8
    direct = evaluate(MODELS[MODEL], times.system(8, 8), ex).step_time_s
    assert times.step_time(shape) == pytest.approx(direct, rel=1e-9)


def test_halving_the_clock_of_a_compute_bound_step_about_doubles_it(times):
    """The step model scales compute by the clock and leaves HBM-bound and exposed
    communication alone: the ratio lies between 1 and 1/f, near 1/f for a GEMM-bound
    step on one NVLink domain (within 10 %)."""
    full = times.step_time(Shape(MODEL, BATCH, 8, 8, 1.0))
    half = times.step_time(Shape(MODEL, BATCH, 8, 8, 0.5))
    assert full is not None and half is not None
    assert half / full == pytest.approx(2.0, rel=0.1) and half / full <= 2.0


def test_the_same_batch_on_half_the_cards_takes_about_twice_as_long(times):
    """The global batch is the job's: on half the cards each does twice the
    sequences (data parallel over the same per-card layout), so ~2× the step."""
    eight = times.step_time(Shape(MODEL, BATCH, 8, 8))
    four = times.step_time(Shape(MODEL, BATCH, 4, 4))
    assert eight is not None and four is not None
    assert four / eight == pytest.approx(2.0, rel=0.05)


def test_a_smaller_nvlink_domain_is_never_faster_and_the_cache_prices_once(times):
    full = times.step_time(Shape(MODEL, BATCH, 8, 8))
    split = times.step_time(Shape(MODEL, BATCH, 8, 2))
    assert full is not None and split is not None and split >= full
    searches, pricings = times.searches, times.pricings
    assert times.step_time(Shape(MODEL, BATCH, 8, 2, 0.999)) == split  # the 1.0 bucket
    times.step_time(Shape(MODEL, BATCH, 8, 2, 0.6))  # a new clock: priced, not searched
    assert (times.searches, times.pricings) == (searches, pricings + 1)
    # a shape the model cannot run (70B in 8 cards' memory) has none: the engine falls back
    assert times.step_time(Shape("llama3-70b", 64, 8, 8)) is None
    assert valid_domain(5, 8, 8) == 4 and valid_domain(16, 72, 4) == 16


def test_without_events_a_training_job_keeps_its_expected_duration():
    s = snap((train_job(1, range(0, 8), 5000.0),))
    res = run_whatif(s, h100_layout(), spec())
    assert row(res, 1)["baseline_completion_s"] == pytest.approx(5000.0)
    assert res.baseline.jobs["training_model_jobs"] == 1
    assert res.baseline.jobs["speed_fallbacks"] == 0
    assert res.to_dict()["speed"]["searches"] == 1


def test_a_failure_that_scatters_a_training_job_slows_it_by_the_step_model(times):
    """Job 1 (16 cards: servers 100 and 101) and three 4-card jobs on servers 102–104 for
    the whole horizon. Server 100 fails at 1,800 s (a checkpoint instant: nothing lost);
    job 1 restarts first-fit on server 101's 8 cards plus 4 + 4 of two others: its
    NVLink domain is 4, so the rest of its work takes step(16 cards, domain 4) /
    step(16 cards, domain 8) as long."""
    left, at = 10_000.0, 1800.0
    jobs = [train_job(1, range(0, 16), left)] + [
        RunningJob(k, f"r{k}", "", 0, tuple(range(8 * k, 8 * k + 4)), (1000,) * 4,
                   T0, None, None) for k in (2, 3, 4)]
    res = run_whatif(snap(tuple(jobs)), h100_layout(5), spec(restart_s=0.0, events=[
        {"at_s": at, "kind": "fail_server", "target": 100}]))
    slow = times.slowdown(Shape(MODEL, BATCH, 16, 8), Shape(MODEL, BATCH, 16, 4))
    assert slow is not None and slow > 1.0
    r = row(res, 1)
    assert r["lost_card_h"] == 0 and r["restarts"] == 1
    assert r["baseline_completion_s"] == pytest.approx(left)
    assert r["completion_s"] == pytest.approx(at + (left - at) * slow, rel=1e-9)


def test_a_cap_slows_a_training_job_by_its_step_time_at_the_capped_clock(times):
    lay = h100_layout()
    cap, left, at = 400.0, 10_000.0, 1000.0
    res = run_whatif(snap((train_job(1, range(0, 8), left),)), lay, spec(events=[
        {"at_s": at, "kind": "cap_power", "value": cap}]))
    f = float(clock_for_cap(np.array([cap]), lay.tdp_w, lay.idle_w, lay.clock_power)[0])
    slow = times.slowdown(Shape(MODEL, BATCH, 8, 8), Shape(MODEL, BATCH, 8, 8, f))
    assert slow is not None
    assert row(res, 1)["completion_s"] == pytest.approx(at + (left - at) * slow, rel=1e-9)
    # not the generic compute share's c/f + 1 − c
    assert slow != pytest.approx(0.7 / f + 0.3, rel=1e-3)


def test_a_resized_training_job_runs_at_its_new_sizes_step_time(times):
    """Queued job 2 (llama3-8b, batch 64, 8 cards) resized to 16 at 0 s: it runs its
    work at step(16) / step(8) — not the linear old/new bound."""
    s = snap(queue=(PendingJob(2, "q", "", 0, 8, 1000, True, 7200.0, T0 - 60, MODEL, BATCH),))
    res = run_whatif(s, h100_layout(), spec(events=[
        {"at_s": 0.0, "kind": "resize_job", "target": 2, "value": 16}]))
    slow = times.slowdown(Shape(MODEL, BATCH, 8, 8), Shape(MODEL, BATCH, 16, 8))
    assert slow is not None and 0.5 <= slow < 1.0
    assert row(res, 2)["completion_s"] == pytest.approx(7200.0 * slow, rel=1e-9)
    base = run_case(s, h100_layout(), spec(), events=())
    assert base.per_job["completion_s"][0] == pytest.approx(7200.0)


def test_a_shape_the_model_cannot_run_falls_back_to_the_expected_pace():
    """llama3-70b on 8 cards does not fit an H100's 80 GB (the search finds no layout):
    the job keeps its expected duration, counted in ``speed_fallbacks``; resized to 4
    cards it falls back to the linear bound (work × old/new), as a job without a model."""
    job = RunningJob(1, "big", "", 0, tuple(range(8)), (1000,) * 8, T0, T0 + 3600.0, None,
                     "llama3-70b", 64)
    res = run_whatif(snap((job,)), h100_layout(), spec(events=[
        {"at_s": 0.0, "kind": "resize_job", "target": 1, "value": 4}]))
    assert row(res, 1)["baseline_completion_s"] == pytest.approx(3600.0)
    assert row(res, 1)["completion_s"] == pytest.approx(7200.0)
    assert res.baseline.jobs["speed_fallbacks"] == 1


def test_the_op_mix_is_the_step_models_split_and_prices_its_power(times):
    """``StepTimes.op_mix``: the training model's compute / memory / exposed-communication
    seconds of the best layout's step at full clock; through ``op_mix_power`` they give
    back exactly the card power the step model reports (closed form), and the mix is
    cached per shape (priced once)."""
    from dataclasses import replace

    from simulation.training.comm import CommModel
    from simulation.training.core import step_arrays
    from simulation.training.energy import op_mix_power
    from simulation.training.step import MEMORY_RESERVE_GIB, batch_of

    mix = times.op_mix(MODEL, BATCH, 16)
    assert mix is not None
    assert 0 < mix.compute_s and 0 <= mix.memory_s and 0 <= mix.comm_s
    assert mix.compute_s + mix.memory_s + mix.comm_s <= mix.step_s * (1 + 1e-9)
    domain = valid_domain(16, times.domain, times.cards_per_server)
    system = times.system(16, domain)
    ex = times.layout(MODEL, BATCH, 16, domain)
    a = step_arrays(MODELS[MODEL], system, batch_of([replace(ex, clock=1.0)]),
                    CommModel(system), MEMORY_RESERVE_GIB)
    assert mix.step_s == pytest.approx(float(a["step_time_s"][0]), rel=1e-12)
    one = np.ones(1)
    power = op_mix_power(one * mix.compute_s, one * mix.memory_s, one * mix.comm_s,
                         one * mix.step_s, one, system.tdp_w, system.idle_w,
                         system.clock_power, mix.hbm_w, mix.memory_sm, mix.comm_activity)
    assert float(power[0]) == pytest.approx(float(a["card_power_w"][0]), rel=1e-9)
    pricings = times.pricings
    assert times.op_mix(MODEL, BATCH, 16) is mix and times.pricings == pricings
