"""``manage.py build_cluster``: the table it prints, and one-line errors with exit 1."""
from __future__ import annotations

import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from tests.conftest import ROOT, _worker_env
from twin.hardware.models import Card, Cluster, Rack
from twin.hardware.presets import PRESETS


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("build_cluster", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def manage(*args: str) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it, against the test database."""
    return subprocess.run(
        [sys.executable, "manage.py", "build_cluster", *args], cwd=ROOT,
        env=_worker_env(dict(connection.settings_dict)), capture_output=True, text=True,
        timeout=120,
    )


def test_builds_and_prints_table(db):
    out, _ = run("--preset", "seed-512", "--name", "cli", "--no-progress")
    assert "racks per supernode  13" in out
    assert "512" in out and "39,000 W of 40,000 W budget" in out
    cluster = Cluster.objects.get(name="cli")
    assert Card.objects.filter(supernode__cluster=cluster).count() == 512
    assert Rack.objects.filter(cluster=cluster).over_budget().count() == 0


def test_supernodes_and_budget_options(db):
    out, _ = run("--preset", "seed-512", "--supernodes", "2", "--rack-budget-w", "24000",
                 "--name", "two", "--no-progress")
    # 7,800 W servers: 3 per 24 kW rack → 22 racks per supernode
    assert "racks per supernode  22" in out
    assert Card.objects.filter(supernode__cluster__name="two").count() == 1024


def test_duplicate_name_needs_replace(db):
    run("--preset", "seed-512", "--no-progress")
    with pytest.raises(CommandError, match="--replace"):
        run("--preset", "seed-512", "--no-progress")
    first = Cluster.objects.get(name="seed-512").pk
    run("--preset", "seed-512", "--replace", "--no-progress")
    assert Cluster.objects.get(name="seed-512").pk != first


def test_list_shows_every_preset(db):
    out, _ = run("--list")
    for name in ("seed-512", "dgx-h100-superpod", "million", "demo", "gb200-nvl72"):
        assert name in out
    assert "1,048,576 cards" in out


def test_missing_preset_is_an_error(db):
    with pytest.raises(CommandError, match="--preset"):
        run()


@pytest.mark.django_db(transaction=True)
def test_bad_input_exits_non_zero_with_one_line():
    before = Cluster.objects.count()
    unknown = manage("--preset", "seed-1024")
    assert unknown.returncode == 1
    assert unknown.stderr.strip().splitlines() == [
        f"CommandError: Unknown preset 'seed-1024'; choose one of: {', '.join(sorted(PRESETS))}."]
    assert "demo, dgx-h100-superpod, gb200-nvl72, million, seed-512" in unknown.stderr
    tight = manage("--preset", "seed-512", "--rack-budget-w", "5000")
    assert tight.returncode == 1
    lines = tight.stderr.strip().splitlines()
    assert len(lines) == 1 and "at most 4 cards per server would fit" in lines[0]
    assert Cluster.objects.count() == before


@pytest.mark.django_db(transaction=True)
def test_progress_bar_goes_to_stderr():
    done = manage("--preset", "seed-512", "--name", "bar")
    assert done.returncode == 0, done.stderr
    assert "racks per supernode  13" in done.stdout
    assert "%" in done.stderr or "‰" in done.stderr
    assert Cluster.objects.filter(name="bar").exists()
