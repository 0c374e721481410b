"""``manage.py replay_trace``: per-policy JSON on fixture traces; bad input is one line."""
from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

FIX = Path(__file__).resolve().parents[1] / "simulation" / "scheduling" / "fixtures"


def run(*args: str) -> dict:
    out = StringIO()
    call_command("replay_trace", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_alibaba_three_policies_as_in_the_contract():
    data = run("--format", "alibaba-gpu-2023", "--nodes", str(FIX / "alibaba_nodes.csv"),
               "--pods", str(FIX / "alibaba_pods.csv"),
               "--policy", "fgd", "--policy", "best-fit", "--policy", "random")
    assert data["nodes"] == 12 and data["gpus"] == 2 + 2 + 8 + 8 + 4 + 8 * 3 + 4 + 2 + 1
    assert [r["policy"] for r in data["results"]] == ["fgd", "best-fit", "random"]
    for r in data["results"]:
        assert set(r) >= {"gpu_allocation_rate", "curve", "unallocated_gpus", "jobs", "wall_s"}
        # arrivals continue to >= 130 % of capacity (resampled from the 16 pods)
        assert r["curve"][-1][0] >= 1.3
        assert 0 < r["gpu_allocation_rate"] <= 1
        assert r["unallocated_gpus"] == pytest.approx(data["gpus"] * (1 - r["gpu_allocation_rate"]))
        assert r["jobs"]["arrived"] == r["jobs"]["placed"] + r["jobs"]["failed"]


def test_table_output_without_json():
    out = StringIO()
    call_command("replay_trace", "--format", "synthetic", "--jobs", "200", "--servers", "8",
                 "--policy", "best-fit", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("8 nodes, 64 GPUs, 200 jobs")
    assert lines[2].startswith("best-fit")


@pytest.mark.parametrize("fmt,name,jobs", [
    ("helios", "helios_cluster_log.csv", 5), ("philly", "philly_cluster_job_log.json", 2)])
def test_helios_and_philly(fmt, name, jobs):
    data = run("--format", fmt, "--trace", str(FIX / name), "--servers", "4",
               "--mode", "full", "--policy", "fifo-first-fit", "--policy", "easy-backfill")
    assert data["trace_jobs"] == jobs and data["gpus"] == 32
    for r in data["results"]:
        assert r["jobs"]["arrived"] == jobs and r["jobs"]["completed"] == jobs


def test_bad_pod_file_names_line_and_field(tmp_path):
    pods = tmp_path / "pods.csv"
    rows = (FIX / "alibaba_pods.csv").read_text().splitlines()
    rows[2] = rows[2].replace(",1,460,", ",1,abc,")  # line 3 of the file
    pods.write_text("\n".join(rows) + "\n")
    with pytest.raises(CommandError) as err:
        run("--format", "alibaba-gpu-2023", "--nodes", str(FIX / "alibaba_nodes.csv"),
            "--pods", str(pods))
    msg = str(err.value)
    assert "\n" not in msg and "line 3, gpu_milli" in msg


@pytest.mark.parametrize("args,expect", [
    (["--format", "alibaba-gpu-2023", "--pods", "x.csv"], "--nodes is required"),
    (["--format", "alibaba-gpu-2023", "--nodes", "/nonexistent.csv", "--pods", "x"], "--nodes"),
    (["--format", "synthetic", "--policy", "nope"], "--policy 'nope'"),
    (["--format", "synthetic", "--target-load", "0"], "--target-load"),
    (["--format", "synthetic", "--servers", "0"], "--servers"),
    (["--format", "helios"], "--trace is required"),
])
def test_bad_arguments_are_one_line(args, expect):
    with pytest.raises(CommandError) as err:
        run(*args)
    assert expect in str(err.value) and "\n" not in str(err.value)
