"""``manage.py`` without its configuration (issue 22, item 9): one readable line
saying what to set and a non-zero exit, never a 30-line traceback."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.parametrize("command", [
    ["check"],
    ["migrate", "--noinput"],
    ["telemetry_agent", "--cluster", "demo"],
])
def test_a_command_without_the_secret_key_says_what_to_set_in_one_line(command, tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("TWIN_SECRET_KEY", "SECRET_KEY", "TWIN_DEBUG",
                        "TWIN_ALLOW_INSECURE_KEY", "DJANGO_SETTINGS_MODULE")}
    env["TWIN_VAR_DIR"] = str(tmp_path)
    result = subprocess.run([sys.executable, "manage.py", *command], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert lines[0].startswith("error: TWIN_SECRET_KEY is not set")
    assert "export" in lines[0]
