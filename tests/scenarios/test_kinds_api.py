"""``GET /api/scenarios/kinds/`` and the field descriptions it serves.

The descriptions must say exactly what ``prepare`` accepts, so these tests
run ``prepare`` field by field: every described option is accepted, nothing
undescribed is, the described defaults are the ones applied, and a value just
below a described minimum (above a maximum, outside the choices) is refused on
that field.
"""
from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings
from django.urls import reverse

from simulation.collectives import ALGORITHMS, OPS, CollectiveSpec
from simulation.topology import FailureSpec
from simulation.training import Execution
from twin.scenarios.kinds import (
    FIELD_TYPES,
    REGISTRY,
    TOPOLOGY_KEYS,
    FieldSpec,
    ScenarioInputError,
    get_kind,
)

# the resilience kind reads the accelerator catalogue while it validates
pytestmark = pytest.mark.django_db

URL = "/api/scenarios/kinds/"
FAMILY = {"family": "torus", "dims": [4, 4]}  # 16 cards, small enough to build per call
HARDWARE = {"model": "llama3-8b", "accelerator": "h100-sxm5-80gb", "cards": 8,
            "global_batch": 16}  # the training kinds: no topology, a catalogue accelerator
BASE: dict[str, dict[str, Any]] = {  # what each kind needs besides the topology
    "topology": {}, "route": {"src": 0, "dst": 5}, "failure": {},
    "collective": {"op": "allreduce"}, "resilience": {"cards": 16, "sweep_runs": 1},
    "scheduling": {"jobs": 50, "servers": 4}, "training": HARDWARE, "training_search": HARDWARE,
    "whatif": {},
    "facility": {},  # every option needs a cluster (tests/scenarios/test_facility_kind.py)
    "capacity": {"site": {"power_kw": 1e4, "cooling_kw": 1e4, "floor_racks": 100},
                 "candidates": {"accelerators": ["h100-sxm5-80gb", "gb200-186gb"]},
                 "workload": {"model": "llama3-8b", "tokens": 1e11}},
}
#: Kinds whose inputs come from their own options (or a cluster), never a topology family:
#: resilience prices a job, scheduling places jobs on nodes, training a parallel layout.
NO_TOPOLOGY = {"resilience", "scheduling", "training", "training_search", "whatif", "capacity",
               "facility"}
#: Options whose values name a row (tested with the database in tests/jobs).
NAMES_A_ROW = {("scheduling", "trace")}
SAMPLE = {  # an acceptable value of each field that has no default to try
    "src": 1, "dst": 2, "op": "allgather", "ranks": 16, "reduce_gbps": 100.0,
    "scale_up_efficiency": 0.9, "scale_out_efficiency": 0.95,
    "cards": 16, "params_b": 7.0, "spares": 2, "pfs_gbps": 400.0, "model": "llama3-8b",
    "accelerator": "a100-sxm-80gb", "dp": 8, "global_batch": 16,
    "power_cap_w": 500.0, "limits": {"tp": [1, 2], "precision": ["bf16"]},
    "jobs": 2000, "servers": 64, "gpus_per_server": 8,
    "site": {"power_kw": 1e3, "cooling_kw": 1e3, "floor_racks": 10},
    "candidates": {"accelerators": ["h100-sxm5-80gb", "gb200-186gb"], "cards": [72]},
    "workload": {"gpu_hours": 1e5, "reference": "h100-sxm5-80gb"},
    "prices": {"energy_per_kwh": 0.12}, "compare": "h100-sxm5-80gb,gb200-186gb",
}
KEYS = {"name", "type", "label", "help", "required", "default", "choices", "min", "max",
        "needs_cluster", "advanced"}


def prepare(kind: str, extra: dict[str, Any], cluster: Any = None) -> dict[str, Any]:
    topology = {} if cluster is not None or kind in NO_TOPOLOGY else FAMILY
    return get_kind(kind).prepare({**topology, **BASE[kind], **extra}, cluster)


def refused(kind: str, extra: dict[str, Any]) -> dict[str, list[str]]:
    """The errors of ``prepare`` (the training kinds read the catalogue: tests using
    them need the ``db`` fixture)."""
    with pytest.raises(ScenarioInputError) as exc:
        prepare(kind, extra)
    return exc.value.errors


def family_fields() -> list[tuple[str, FieldSpec]]:
    return [(kind.name, f) for kind in REGISTRY.values() for f in kind.fields
            if not f.needs_cluster]


# --------------------------------------------------------------- endpoint
def accepted_fields() -> list[tuple[str, FieldSpec]]:
    return [(k, f) for k, f in family_fields() if (k, f.name) not in NAMES_A_ROW]


def test_kinds_endpoint_lists_every_kind_with_its_form(reader_client, db):
    response = reader_client.get(URL)
    assert response.status_code == 200, response.content
    body = response.json()
    assert [k["name"] for k in body] == list(REGISTRY) == ["topology", "route", "failure",
                                                           "collective", "resilience",
                                                           "scheduling", "training",
                                                           "training_search", "whatif",
                                                           "capacity", "facility"]
    for kind in body:
        assert set(kind) == {"name", "label", "description", "fields", "chart"}
        assert kind["label"] and kind["description"]
        assert [f["name"] for f in kind["fields"]] == [f.name for f in
                                                       REGISTRY[kind["name"]].fields]
        for field in kind["fields"]:
            assert set(field) == KEYS and field["type"] in FIELD_TYPES and field["label"]
            assert (field["type"] in ("choice", "choice_list")) == \
                (field["choices"] is not None)


def test_the_collective_form_and_chart(reader_client, db):
    kinds = {k["name"]: k for k in reader_client.get(URL).json()}
    fields = {f["name"]: f for f in kinds["collective"]["fields"]}
    assert fields["op"]["type"] == "choice" and fields["op"]["required"] is True
    assert fields["op"]["choices"] == list(OPS)
    assert fields["algorithm"]["choices"] == ["auto", *ALGORITHMS]
    assert fields["algorithm"]["default"] == "auto"
    assert (fields["ranks"]["type"], fields["ranks"]["min"], fields["ranks"]["default"]) == \
        ("integer", 2, None)
    assert fields["sizes"]["type"] == "integer_list"
    assert fields["sizes"]["default"] == list(CollectiveSpec("allreduce").sizes)
    assert {f["name"]: f["type"] for f in kinds["route"]["fields"]} == {
        "src": "card", "dst": "card", "by": "choice"}
    assert kinds["collective"]["chart"] == {
        "series": "sizes", "x": "size_bytes", "y": "busbw_gbps", "log_x": True,
        "x_label": "Message size (bytes)", "y_label": "Bus bandwidth (Gb/s)"}
    assert all(kinds[name]["chart"] is None for name in ("topology", "route", "failure",
                                                         "scheduling", "training",
                                                         "training_search"))


def test_the_chart_names_keys_of_the_real_result():
    kind = get_kind("collective")
    inputs = prepare("collective", {"sizes": [1024, 1 << 20]})
    result = kind.run(inputs, lambda *_: None)
    chart = kind.chart
    assert chart is not None
    rows = result[chart["series"]]
    assert [row[chart["x"]] for row in rows] == [1024, 1 << 20]
    assert all(row[chart["y"]] > 0 for row in rows)


def test_kinds_need_a_login_unless_reads_are_public(anon_client, reader_client, db):
    response = anon_client.get(URL)
    assert response.status_code == 401 and response["WWW-Authenticate"] == "Token"
    with override_settings(TWIN_PUBLIC_READ=True):
        assert anon_client.get(URL).status_code == 200
    assert reader_client.post(URL, {}, format="json").status_code == 403


def test_kinds_are_in_the_openapi_schema(reader_client, db):
    schema = reader_client.get(reverse("api:schema"), HTTP_ACCEPT="application/json").json()
    get = schema["paths"]["/api/scenarios/kinds/"]["get"]
    items = get["responses"]["200"]["content"]["application/json"]["schema"]["items"]
    assert items["$ref"].endswith("/ScenarioKind")
    props = schema["components"]["schemas"]["ScenarioKind"]["properties"]
    assert {"name", "label", "description", "fields", "chart"} <= set(props)
    field = schema["components"]["schemas"]["KindField"]["properties"]
    assert KEYS <= set(field)


# ---------------------------------------------------- fields vs prepare
def test_described_options_are_the_simulation_inputs():
    """The simulation dataclasses' fields are all described (and for collective, only them)."""
    assert {f.name for f in get_kind("collective").fields} == \
        set(CollectiveSpec.__dataclass_fields__)
    assert set(FailureSpec.__dataclass_fields__) <= {f.name for f in
                                                    get_kind("failure").fields}
    assert set(Execution.__dataclass_fields__) <= {f.name for f in get_kind("training").fields}
    for kind in REGISTRY.values():
        assert kind.options == {f.name for f in kind.fields}
        assert not kind.options & TOPOLOGY_KEYS - {"nodes"}  # failure's nodes: a list


@pytest.mark.parametrize(("kind", "field"), accepted_fields(),
                         ids=[f"{k}.{f.name}" for k, f in accepted_fields()])
def test_every_described_option_is_accepted(kind, field, request):
    if field.name == "cluster":  # a cluster of the inventory, by name
        value = request.getfixturevalue("tiny_cluster")["cluster"].name
        prepare(kind, {field.name: value, "accelerator": None})
        return
    value = field.default if field.default is not None else SAMPLE[field.name]
    prepare(kind, {field.name: value})


@pytest.mark.parametrize("kind", list(REGISTRY))
def test_an_undescribed_option_is_refused(kind, db):
    assert set(refused(kind, {"colour": "blue"})) == {"params.colour"}


def test_cluster_only_options_are_accepted_with_a_cluster(tiny_cluster):
    card = tiny_cluster["cards"][3]
    needs = [f.name for f in get_kind("failure").fields if f.needs_cluster]
    assert needs == ["cards", "live"]
    inputs = prepare("failure", {"cards": [card.serial], "live": True}, tiny_cluster["cluster"])
    assert inputs["cards"][0]["id"] == card.pk
    for name in needs:
        errors = refused("failure", {name: True if name == "live" else [card.pk]})
        assert "needs a cluster" in errors[f"params.{name}"][0]


def test_described_defaults_are_the_ones_applied(db):
    assert prepare("topology", {})["options"] == {f.name: f.default
                                                  for f in get_kind("topology").fields}
    assert prepare("route", {})["by"] == get_kind("route").field("by").default
    applied = prepare("failure", {})["failure"]
    for f in get_kind("failure").fields:
        if not f.needs_cluster:
            assert applied[f.name] == f.default, f.name
    applied = prepare("collective", {})["collective"]
    for f in get_kind("collective").fields:
        if not f.required:
            assert applied[f.name] == f.default, f.name
    applied = prepare("training", {})["execution"]
    for f in get_kind("training").fields:
        if f.name in Execution.__dataclass_fields__ and f.default is not None:
            assert applied[f.name] == f.default, f.name
    assert applied["dp"] == 8  # described as empty: cards / (tp · pp)
    applied = prepare("training_search", {})["search"]
    assert (applied["objective"], applied["top"], applied["limits"]) == ("time", 10, None)


def _below(field: FieldSpec) -> Any:
    low = field.min - 1 if field.type in ("integer", "integer_list", "integer_pairs") \
        else field.min - 0.5
    if field.type == "integer_list":
        return [low]
    if field.type == "integer_pairs":
        return [[low, 0]]
    return low


@pytest.mark.parametrize(("kind", "field"), [(k, f) for k, f in family_fields()
                                             if f.min is not None],
                         ids=[f"{k}.{f.name}" for k, f in family_fields() if f.min is not None])
def test_a_value_below_the_minimum_is_refused_on_that_field(kind, field, db):
    errors = refused(kind, {field.name: _below(field)})
    assert list(errors)[0].startswith(f"params.{field.name}"), errors


def test_a_value_above_the_maximum_is_refused_on_that_field():
    bounded = {f.name: f for k, f in family_fields() if f.max is not None}
    training = [("training", name) for name in ("tp", "pp", "ep", "vpp", "zero", "compression",
                                                 "clock", "cuda_max_connections",
                                                 "hybridep_sms", "etp", "nvlink_domain")]
    assert [(k, f.name) for k, f in family_fields() if f.max is not None] == [
        ("topology", "samples"), ("failure", "samples"), ("collective", "sizes"),
        ("collective", "scale_up_efficiency"), ("collective", "scale_out_efficiency"),
        *[("resilience", f.name) for f in get_kind("resilience").fields if f.max is not None],
        ("scheduling", "jobs"), ("scheduling", "target_load"), ("scheduling", "servers"),
        ("scheduling", "gpus_per_server"), *training, ("training_search", "global_batch"),
        ("training_search", "top"), ("capacity", "top")]
    for f in get_kind("resilience").fields:
        if f.max is not None:
            over = int(f.max) + 1 if f.type == "integer" else f.max * 2
            assert set(refused("resilience", {f.name: over})) == {f"params.{f.name}"}, f.name
    for name in ("jobs", "target_load", "servers", "gpus_per_server"):
        limit = get_kind("scheduling").field(name).max
        assert set(refused("scheduling", {name: limit + 1})) == {f"params.{name}"}
    for kind in ("topology", "failure"):
        samples = get_kind(kind).field("samples")
        assert set(refused(kind, {"samples": int(samples.max) + 1})) == {"params.samples"}
        prepare(kind, {"samples": int(samples.max)})
    sizes = bounded["sizes"]
    assert set(refused("collective", {"sizes": [int(sizes.max) + 1]})) == {"params.sizes[0]"}
    prepare("collective", {"sizes": [1024]})
    for name in ("scale_up_efficiency", "scale_out_efficiency"):
        assert set(refused("collective", {name: bounded[name].max + 0.5})) == {f"params.{name}"}
        prepare("collective", {name: bounded[name].max})


def test_a_value_above_a_training_maximum_is_refused_on_that_field(db):
    for kind, name in [("training", n) for n in ("tp", "pp", "ep", "vpp", "zero",
                                                   "compression", "clock", "etp",
                                                   "cuda_max_connections", "hybridep_sms",
                                                   "nvlink_domain")] + \
            [("training_search", "global_batch"), ("training_search", "top"),
             ("capacity", "top")]:
        spec = get_kind(kind).field(name)
        above = spec.max + 1 if spec.type == "integer" else spec.max + 0.5
        assert set(refused(kind, {name: above})) == {f"params.{name}"}, name


@pytest.mark.parametrize(("kind", "field"), [(k, f) for k, f in family_fields()
                                             if f.choices],
                         ids=[f"{k}.{f.name}" for k, f in family_fields() if f.choices])
def test_choices_are_exactly_what_prepare_knows(kind, field, db):
    """Outside the choices: refused on the field. Each choice: accepted, or refused
    only for a reason of this topology (hierarchical needs a cluster), never as unknown."""
    if field.type == "choice_list":  # per element, as a list or a comma-separated string
        for value in (["no-such-choice"], "no-such-choice"):
            assert set(refused(kind, {field.name: value})) == {f"params.{field.name}[0]"}
        prepare(kind, {field.name: list(field.choices or ())})
    else:
        assert set(refused(kind, {field.name: "no-such-choice"})) == {f"params.{field.name}"}
    for choice in field.choices or ():
        try:
            prepare(kind, {field.name: [choice] if field.type == "choice_list" else choice})
        except ScenarioInputError as exc:
            assert "unknown" not in str(exc) and "'hops' or" not in str(exc), (choice, exc)
