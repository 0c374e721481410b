"""The training kinds over the API and the command: per-field 400s, the cluster's own hardware.

Bad input is refused in ``prepare`` — in the request, before a row is written
or a task sent — on the dotted field under ``params`` that the library
(``TrainingInputError.field``) or the twin (cards, cluster, accelerator) blames.
"""
from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.scenarios.conftest import post
from twin.scenarios.models import ScenarioRun
from twin.scenarios.runner import execute, submit

A100 = {"model": "gpt3-175b", "accelerator": "a100-sxm-80gb", "cards": 64, "global_batch": 64}
CONTRACT = {**A100, "tp": 8, "pp": 8, "micro_batch": 1, "recompute": "selective",
            "sequence_parallel": True, "precision": "bf16"}
STEP_KEYS = {"step_time_s", "mfu", "tokens_per_s", "memory_gib_per_card", "energy_j_per_step",
             "breakdown"}
SEARCH_KEYS = {"configs_evaluated", "configs_per_s", "rejected", "best"}
SMALL_SEARCH = {"model": "llama3-8b", "accelerator": "a100-sxm-80gb", "cards": 8,
                "global_batch": 16, "top": 3, "limits": {"tp": [1, 2, 4, 8], "zero": [0, 1],
                                                         "micro_batch": [1, 2]}}

BAD = [
    # (kind, params, on the tiny cluster?, field, words in the reason)
    ("training", {**A100, "cards": 8, "global_batch": 8}, False, "params.model",
     "cannot fit however it is split: gpt3-175b needs at least"),
    ("training_search", {**A100, "cards": 8, "global_batch": 8}, False, "params.model",
     "GiB per card on 8 cards"),
    ("training", {**A100, "tp": 64}, False, "params.tp", "does not divide the 96 heads"),
    ("training", {**A100, "precision": "fp6"}, False, "params.precision", "unknown 'fp6'"),
    ("training", {**A100, "accelerator": "h100-sxm5-80gb", "precision": "fp4"}, False,
     "params.precision", "no fp4 peak (choose from fp32, bf16, fp16, fp8)"),
    ("training", {**A100, "accelerator": "h100-sxm5-80gb", "precision": "fp8",
                  "fp8_recipe": "mx"}, False, "params.fp8_recipe",
     "choose from delayed, current, block"),
    ("training", {**A100, "fp8_recipe": "tensorwise"}, False, "params.fp8_recipe",
     "unknown 'tensorwise' (choose from delayed, current, block, mx)"),
    ("training", {**A100, "precision": "fp8"}, False, "params.precision", "no fp8 peak"),
    ("training", {**A100, "model": "gpt-5"}, False, "params.model", "unknown model 'gpt-5'"),
    ("training", {**A100, "model": {"layers": 2, "heads": 4, "seq_len": 16, "vocab": 100}},
     False, "params.model.hidden", "required"),
    ("training", {**A100, "model": {"layers": 2, "hidden": 64, "heads": 5, "seq_len": 16,
                                    "vocab": 100}}, False, "params.model.heads",
     "must divide hidden"),
    ("training", {**A100, "accelerator": "tpu-v9"}, False, "params.accelerator",
     "unknown accelerator 'tpu-v9'"),
    ("training", {"model": "llama3-8b", "global_batch": 8}, False, "params.accelerator",
     "give an accelerator"),
    ("training", {"model": "llama3-8b", "accelerator": "a100-sxm-80gb", "global_batch": 8},
     False, "params.cards", "required with an accelerator"),
    ("training", {"model": "llama3-8b", "cards": 16, "global_batch": 16}, True, "params.cards",
     "16 cards but cluster 'tiny' has only 8"),
    ("training", {"model": "llama3-8b", "cluster": "nowhere", "global_batch": 8}, False,
     "params.cluster", "no cluster named 'nowhere'"),
    ("training", {**A100, "micro_batch": 3}, False, "params.global_batch",
     "multiple of dp × micro_batch"),
    ("training", {**A100, "dp": 0}, False, "params.dp", "≥ 1"),
    ("training", {**A100, "family": "ring"}, False, "params.family", "unknown field"),
    ("training", {**A100, "global_batch": None}, False, "params.global_batch", "got None"),
    ("training_search", {**A100, "objective": "speed"}, False, "params.objective",
     "unknown objective 'speed'"),
    ("training_search", {**A100, "limits": {"tps": [1]}}, False, "params.limits.tps",
     "unknown limit"),
    ("training_search", {**A100, "limits": {"precision": ["bf16", "fp6"]}}, False,
     "params.limits.precision[1]", "got 'fp6'"),
    ("training_search", {**A100, "limits": {"fp8_recipe": ["delayed", "tensorwise"]}}, False,
     "params.limits.fp8_recipe[1]", "got 'tensorwise'"),
    ("training_search", {**A100, "limits": {"precision": ["fp8"]}}, False,
     "params.limits.precision", "offers none of fp8"),
    ("training_search", {**A100, "top": 1000}, False, "params.top", "≤ 100, got 1000"),
    ("training", {**A100, "nvlink_domain": 12}, False, "params.nvlink_domain",
     "12 is neither a multiple nor a divisor of the 8 cards per server (allowed: a divisor "
     "of 8 or a multiple of it)"),
    ("training", {**A100, "nvlink_domain": -8}, False, "params.nvlink_domain",
     "≥ 0 and ≤ 65536, got -8"),
    ("training_search", {**A100, "limits": {"nvlink_domain": [8, 12]}}, False,
     "params.limits.nvlink_domain[1]", "neither a multiple nor a divisor of the 8 cards"),
    ("training_search", {**A100, "limits": {"nvlink_domain": [0]}}, False,
     "params.limits.nvlink_domain[0]", "an integer ≥ 1 and ≤ 65536, got 0"),
]


@pytest.mark.parametrize(("kind", "params", "on_cluster", "field", "text"), BAD,
                         ids=[f"{k}-{f}-{i}" for i, (k, _, _, f, _) in enumerate(BAD)])
def test_bad_input_is_400_on_the_field_and_queues_nothing(
        admin_client_api, tiny_cluster, published, django_capture_on_commit_callbacks,
        kind, params, on_cluster, field, text):
    body = {"kind": kind, "params": params}
    if on_cluster:
        body["cluster"] = tiny_cluster["cluster"].pk
    response, callbacks = post(admin_client_api, body, django_capture_on_commit_callbacks)
    assert response.status_code == 400, response.content
    errors = response.json()
    assert field in errors, errors
    assert text in errors[field][0], errors
    assert not ScenarioRun.objects.exists() and callbacks == [] and published == []


def test_a_valid_training_run_is_queued_with_its_system(admin_client_api, published,
                                                        django_capture_on_commit_callbacks):
    response, callbacks = post(admin_client_api, {"kind": "training", "params": CONTRACT},
                               django_capture_on_commit_callbacks)
    assert response.status_code == 202, response.content
    inputs = response.json()["inputs"]
    assert inputs["accelerator"] == "a100-sxm-80gb"
    assert (inputs["system"]["cards"], inputs["system"]["hbm_gib"]) == (64, 80)
    assert inputs["system"]["peak_tflops"]["bf16"] == 312
    assert (inputs["execution"]["tp"], inputs["execution"]["pp"], inputs["execution"]["dp"]) \
        == (8, 8, 1)
    assert inputs["model"]["layers"] == 96 and len(callbacks) == 1


# ------------------------------------------------------ the cluster's own hardware
def test_dgx_superpod_trains_on_its_nvlink_servers_and_ndr_rails(dgx_cluster, admin_user):
    """The DGX H100 SuperPOD preset: TP inside one DGX (8 GPUs on NVLink), one 400G
    InfiniBand NIC per GPU, the H100's catalogue peaks; the step runs on it."""
    params = {"model": "gpt3-175b", "cards": 256, "tp": 8, "pp": 8, "global_batch": 256,
              "sequence_parallel": True, "recompute": "selective"}
    run = submit("training", params, dgx_cluster, admin_user, enqueue=False)
    system = run.inputs["system"]
    assert system["accelerator"] == "h100-sxm5-80gb" and system["peak_tflops"]["fp8"] == 1979
    assert (system["cards"], system["cards_per_server"], system["scale_up_domain"]) == \
        (256, 8, 8)
    assert (system["scale_up_topology"], system["scale_up_technology"]) == ("switch", "nvlink")
    assert system["scale_up_gbps"] == pytest.approx(3600)
    assert (system["scale_out_gbps"], system["scale_out_technology"]) == \
        (pytest.approx(400), "infiniband")
    assert system["server_static_w"] == pytest.approx(4400)
    assert run.inputs["cluster"] == {"id": dgx_cluster.pk, "name": "scen-dgx"}
    done = execute(run.pk)
    assert done is not None and done.status == "succeeded", done.error
    assert STEP_KEYS <= set(done.result) and done.result["fits"] is True
    assert 0 < done.result["mfu"] < 1 and done.result["breakdown"]["forward"] > 0
    # the execution's dp is derived: 256 / (8 · 8)
    assert done.result["execution"]["dp"] == 4


def test_seed_torus_is_one_512_card_scale_up_domain(seed_cluster, admin_user):
    run = submit("training", {"model": "llama3-8b", "cards": 512, "global_batch": 512},
                 seed_cluster, admin_user, enqueue=False)
    system = run.inputs["system"]
    assert (system["scale_up_topology"], system["scale_up_dims"], system["scale_up_domain"]) \
        == ("torus", [8, 8, 8], 512)
    assert (system["scale_out_gbps"], system["scale_out_technology"]) == \
        (pytest.approx(100), "roce")
    assert system["pue"] == pytest.approx(1.05)


def test_seed_torus_keeps_its_domain_in_a_search(admin_client_api, seed_cluster, published,
                                                 django_capture_on_commit_callbacks):
    """A torus's domain is its shape: another NVLink domain size is refused on the field."""
    body = {"kind": "training_search", "cluster": seed_cluster.pk,
            "params": {"model": "llama3-8b", "cards": 512, "global_batch": 512,
                       "limits": {"nvlink_domain": [512, 8]}}}
    response, callbacks = post(admin_client_api, body, django_capture_on_commit_callbacks)
    assert response.status_code == 400, response.content
    assert "torus of 512 cards: only 512" in response.json()["params.limits.nvlink_domain[1]"][0]
    assert callbacks == []


def test_cluster_by_name_in_params_is_the_runs_cluster(tiny_cluster, admin_user):
    by_name = submit("training", {"model": "llama3-8b", "cluster": "tiny", "global_batch": 8},
                     None, admin_user, enqueue=False)
    as_run = submit("training", {"model": "llama3-8b", "global_batch": 8},
                    tiny_cluster["cluster"], admin_user, enqueue=False)
    assert by_name.inputs == as_run.inputs and by_name.params_hash == as_run.params_hash
    assert by_name.inputs["system"]["cards"] == 8


# ------------------------------------------------------------------ the command
def command(*args: str, **options: object) -> str:
    out = StringIO()
    call_command("run_scenario", *args, stdout=out, no_progress=True, **options)
    return out.getvalue()


def test_command_prints_the_contract_keys_of_a_step(db):
    result = json.loads(command("training", params=json.dumps(CONTRACT), json=True))
    assert STEP_KEYS <= set(result)
    assert set(result["breakdown"]) >= {"forward", "backward", "tp_comm", "pp_bubble"}
    assert sum(result["breakdown"].values()) == pytest.approx(result["step_time_s"], rel=0.05)
    table = command("training", params=json.dumps(CONTRACT))
    assert "gpt3-175b" in table and "64 × a100-sxm-80gb on a hypothetical system" in table
    assert "step time" in table and "GiB of 80 GiB HBM" in table
    # the per-stage clocks of the 8 stages, and the energy each plan saves
    plan = result["dvfs"]["one_percent"]
    assert result["dvfs"]["stages"] == 8 and len(plan["clocks"]) == 8
    assert 0 < plan["card_energy_saved_fraction"] < 1 and plan["slowdown"] <= 0.0100001
    assert "per-stage clocks, no slowdown" in table
    shown = re.search(r"per-stage clocks, ≤ 1 % slowdown +cards' energy −([0-9.]+) %", table)
    assert shown and float(shown[1]) == pytest.approx(100 * plan["card_energy_saved_fraction"],
                                                      rel=1e-3)


def test_command_prints_the_contract_keys_of_a_search(db):
    result = json.loads(command("training_search", params=json.dumps(SMALL_SEARCH), json=True))
    assert SEARCH_KEYS <= set(result)
    assert result["configs_evaluated"] > 0 and result["configs_per_s"] > 0
    assert 1 <= len(result["best"]) <= 3
    times = [entry["step_time_s"] for entry in result["best"]]
    assert times == sorted(times)
    for entry in result["best"]:
        assert STEP_KEYS <= set(entry) and entry["fits"] is True
        assert {"tp", "pp", "dp", "micro_batch", "precision"} <= set(entry["execution"])
    table = command("training_search", params=json.dumps(SMALL_SEARCH))
    assert "evaluated" in table and "#1" in table


def test_command_runs_on_a_cluster_by_name(dgx_cluster):
    params = {"model": "llama3-8b", "cards": 8, "global_batch": 8, "tp": 8}
    result = json.loads(command("training", params=json.dumps(params), cluster="scen-dgx",
                                json=True))
    assert result["system"]["scale_up_domain"] == 8 and result["cluster"]["name"] == "scen-dgx"


@pytest.mark.parametrize(("params", "text"), [
    ({**A100, "tp": 64}, "params.tp: tp (64) does not divide the 96 heads"),
    ({**A100, "precision": "fp6"}, "params.precision: unknown 'fp6'"),
])
def test_command_bad_input_is_one_readable_line(db, params, text):
    with pytest.raises(CommandError) as caught:
        command("training", params=json.dumps(params))
    assert text in str(caught.value) and "\n" not in str(caught.value)
    assert not ScenarioRun.objects.exists()
