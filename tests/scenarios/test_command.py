"""``manage.py run_scenario``: same path as the task, a table, one-line errors."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from tests.conftest import ROOT
from twin.scenarios.models import ScenarioRun


def run(*args: str, **options: object) -> str:
    out = StringIO()
    call_command("run_scenario", *args, stdout=out, no_progress=True, **options)
    return out.getvalue()


def test_prints_the_result_as_a_table_and_records_the_run(db):
    out = run("topology", params='{"family": "torus", "dims": [8, 8, 8]}')
    lines = out.splitlines()
    assert lines[1].split() == ["quantity", "value"] and set(lines[2]) <= {"-", " "}
    assert "avg_hops" in out and "(= 3072/511)" in out
    assert any(line.startswith("diameter_hops") and line.endswith("12") for line in lines)
    assert "requirement supernode_200ns" in out
    recorded = ScenarioRun.objects.get()
    assert recorded.status == "succeeded" and recorded.worker.startswith("run_scenario@")
    # the second time the cached result is printed, without computing
    again = run("topology", params='{"family": "torus", "dims": [8, 8, 8]}')
    assert f"cached result of run #{recorded.pk}" in again
    assert ScenarioRun.objects.filter(cached_from=recorded).count() == 1


def test_runs_on_a_cluster_by_name_and_prints_json(tiny_cluster):
    out = run("route", params='{"src": "TINY-0000", "dst": "TINY-0007"}', cluster="tiny",
              json=True)
    result = json.loads(out)
    assert result["hops"] == 2 and result["cards"]["dst"]["serial"] == "TINY-0007"
    table = run("collective", params='{"op": "allreduce", "sizes": [4096]}', cluster="tiny")
    assert "allreduce over 8 ranks" in table and "4,096 B" in table


def test_dgx_allreduce_prints_busbw_like_nccl_tests(db):
    """The DGX H100 SuperPOD preset, 8 ranks (one DGX), 1 GiB AllReduce: busbw in GB/s
    as nccl-tests prints it, and Gb/s; NVLS best near NVIDIA's ~480 GB/s, the ring near
    the 365–370 GB/s of NCCL_ALGO=RING (sources in docs/simulation.md)."""
    call_command("build_cluster", preset="dgx-h100-superpod", supernodes=1, no_progress=True,
                 stdout=StringIO())
    params = {"op": "allreduce", "ranks": 8, "sizes": [1073741824]}
    out = run("collective", params=json.dumps(params), cluster="dgx-h100-superpod")
    row = next(line for line in out.splitlines() if line.startswith("1,073,741,824 B"))
    words = row.split()
    assert words[2] == "nvls", row
    busbw_GBps = float(words[words.index("busbw") + 1].replace(",", ""))
    busbw_gbps = float(words[words.index("busbw") + 3].strip("(").replace(",", ""))
    assert words[words.index("busbw") + 2] == "GB/s"
    assert busbw_gbps == pytest.approx(8 * busbw_GBps, rel=1e-3)
    assert busbw_GBps == pytest.approx(480, rel=0.15)
    assert "scale-up 0.84 (nvlink), scale-out 0.98 (infiniband)" in out
    ring = run("collective", params=json.dumps({**params, "algorithm": "ring"}),
               cluster="dgx-h100-superpod", json=True)
    assert json.loads(ring)["best"][0]["busbw_GBps"] == pytest.approx(367.5, rel=0.15)


def test_lists_the_kinds(db):
    out = run(list=True)
    assert [line.split()[0] for line in out.splitlines()] == [
        "capacity", "collective", "facility", "failure", "resilience", "route", "scheduling",
        "topology", "training", "training_search", "whatif"]


@pytest.mark.parametrize(("args", "options", "text"), [
    (("weather",), {}, "kind: unknown kind 'weather'"),
    (("topology",), {"params": "{dims: 8}"}, "--params: not valid JSON"),
    (("topology",), {"params": '{"family": "torus", "dims": [8, 1]}'},
     "params.dims[1]: every dimension must be ≥ 2, got 1"),
    (("collective",), {"params": '{"family": "ring", "nodes": 8, "op": "allreduce", '
                                 '"sizes": [-1]}'}, "params.sizes[0]: must be > 0 bytes"),
    (("topology",), {"cluster": "nowhere"}, "--cluster: no cluster named 'nowhere'"),
])
def test_bad_input_is_one_readable_line(db, args, options, text):
    with pytest.raises(CommandError) as caught:
        run(*args, **options)
    message = str(caught.value)
    assert text in message and "\n" not in message
    assert not ScenarioRun.objects.exists()


def test_bad_input_exits_non_zero_from_the_shell(db):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "twin.settings_test",
           "REDIS_URL": settings.REDIS_URL}
    proc = subprocess.run(
        [sys.executable, "manage.py", "run_scenario", "topology", "--params",
         '{"family": "ring", "nodes": 1}'], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=60)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [
        "CommandError: params.nodes: must be ≥ 2, got 1"]
