"""The NVLink-domain size: per run (``Execution.nvlink_domain``) and as a search dimension."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from simulation.training import (
    MODELS,
    Execution,
    TrainingInputError,
    evaluate,
    search,
    system_for_accelerator,
)
from simulation.training.comm import CommModel, group_split
from simulation.training.search import enumerate_configs

CATALOGUE = json.loads((Path(__file__).parents[3] / "twin/hardware/fixtures/catalogue.json")
                       .read_text())
GB200 = next(r["fields"] for r in CATALOGUE if r["fields"].get("slug") == "gb200-186gb")


def gb200(cards: int = 576):  # type: ignore[no-untyped-def]
    return system_for_accelerator(GB200, cards)


def test_gb200_is_one_nvl72_domain_by_default() -> None:
    assert gb200().scale_up_domain == 72


def test_tp_inside_both_domains_costs_the_same_wider_tp_crosses_the_network() -> None:
    """TP 8 sits in an NVL8 island and in NVL72 alike; TP 16 spans two NVL8 islands:
    priced as k = 8 per domain × n = 2 domains (group_split), slower than inside NVL72."""
    system, m = gb200(), MODELS["llama3-405b"]
    base = Execution(tp=8, pp=8, dp=9, global_batch=72, overlap_dp=False)
    in72 = evaluate(m, system, base).to_dict()
    in8 = evaluate(m, system, dataclasses.replace(base, nvlink_domain=8)).to_dict()
    assert in8["exposed_comm"]["tp"] == pytest.approx(in72["exposed_comm"]["tp"], rel=1e-12)
    # DP over 9 replicas stride 8: inside one NVL72 domain, across 9 NVL8 islands
    assert group_split(np.array([9]), np.array([8]), 72)[0].tolist() == [9]
    assert group_split(np.array([9]), np.array([8]), 8)[1].tolist() == [9]
    assert in8["exposed_comm"]["dp"] > in72["exposed_comm"]["dp"]
    wide = dataclasses.replace(base, tp=16, dp=1, global_batch=64, pp=4)
    t72 = evaluate(m, system, wide).to_dict()["exposed_comm"]["tp"]
    t8 = evaluate(m, system, dataclasses.replace(wide, nvlink_domain=8)).to_dict()
    assert t8["exposed_comm"]["tp"] > t72
    comm = CommModel(system)
    k, n = group_split(np.array([16]), np.array([1]), 8)
    assert (int(k[0]), int(n[0])) == (8, 2)
    assert comm.time("allreduce", k, n, np.array([2.0**26]))[0] > comm.time(
        "allreduce", np.array([16]), np.array([1]), np.array([2.0**26]))[0]


def test_domain_must_fit_the_servers_and_a_torus_keeps_its_own() -> None:
    m = MODELS["llama3-8b"]
    with pytest.raises(TrainingInputError) as err:
        evaluate(m, gb200(), Execution(tp=8, global_batch=8, nvlink_domain=12))
    assert err.value.field == "nvlink_domain"
    torus = system_for_accelerator(GB200, 512, scale_up_domain=512, scale_up_topology="torus",
                                   scale_up_dims=(8, 8, 8))
    with pytest.raises(TrainingInputError) as err:
        search(m, torus, 512, 512, limits={"nvlink_domain": [512, 8]})
    assert err.value.field == "limits.nvlink_domain[1]"


def test_search_prices_every_domain_and_its_best_re_evaluates() -> None:
    """[8, 72] doubles the space (the same tp list: up to the widest domain); each row's
    domain reaches the Execution (72, the system's, as 0) and evaluate agrees."""
    system, m = gb200(144), MODELS["llama3-70b"]
    limits = {"tp": [4, 8, 16], "pp": [4, 8], "micro_batch": [1], "vpp": [1],
              "zero": [1], "recompute": ["selective"]}
    one, _, _ = enumerate_configs(m, system, 144, 288, limits)
    both, _, _ = enumerate_configs(m, system, 144, 288, {**limits, "nvlink_domain": [8, 72]})
    assert len(both) == 2 * len(one)
    assert sorted(set(both.domain.tolist())) == [0, 8]
    res = search(m, system, 144, 288, limits={**limits, "nvlink_domain": [8, 72]}, top=40)
    domains = {r["execution"]["nvlink_domain"] for r in res.best}
    assert domains == {0, 8}
    for row in res.best[:3] + [r for r in res.best if r["execution"]["nvlink_domain"] == 8][:2]:
        again = evaluate(m, system, Execution(**row["execution"])).to_dict()
        assert again["step_time_s"] == pytest.approx(row["step_time_s"], rel=1e-12)
    # NVL72 never loses to NVL8 islands for the same layout (its groups only gain NVLink)
    best72 = min(r["step_time_s"] for r in res.best if r["execution"]["nvlink_domain"] == 0)
    best8 = min(r["step_time_s"] for r in res.best if r["execution"]["nvlink_domain"] == 8)
    assert best72 <= best8
