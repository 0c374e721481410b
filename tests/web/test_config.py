"""The constants the browser code takes from the server (``twin.web.config``).

The dashboard page carries them as the JSON script ``#twin-config``; the vitest
suite, which has no page, uses ``frontend/src/testdata/config.json`` instead,
so that copy must stay what the server renders. To rewrite it::

    TWIN_UPDATE_TESTDATA=1 pytest tests/web/test_config.py
"""
from __future__ import annotations

import json
import os
import re

from tests.conftest import ROOT
from twin.core.choices import JobStatusChoices
from twin.hardware.constants import DEFAULT_RACK_BUDGET_W
from twin.live.protocol import CLOSE_NOT_FOUND, CLOSE_UNAUTHENTICATED
from twin.telemetry.metrics import HISTORY_METRICS
from twin.web.config import dashboard_config

TESTDATA = ROOT / "frontend" / "src" / "testdata" / "config.json"


def test_config_holds_the_server_constants():
    config = dashboard_config()
    assert config["rack_budget_default_w"] == DEFAULT_RACK_BUDGET_W
    assert config["close_codes"]["unauthenticated"] == CLOSE_UNAUTHENTICATED
    assert config["close_codes"]["not_found"] == CLOSE_NOT_FOUND
    assert config["history_metrics"] == list(HISTORY_METRICS)
    assert set(config["scenario_final_statuses"]) == JobStatusChoices.FINAL


def test_dashboard_page_carries_the_config(client, admin_user, production_static):
    client.force_login(admin_user)
    html = client.get("/").content.decode()
    match = re.search(r'<script id="twin-config" type="application/json">(.*?)</script>', html)
    assert match, "the dashboard page has no #twin-config script"
    assert json.loads(match.group(1)) == dashboard_config()


def test_frontend_config_testdata_matches_the_server():
    served = dashboard_config()
    if os.environ.get("TWIN_UPDATE_TESTDATA") == "1":
        TESTDATA.write_text(json.dumps(served, indent=2) + "\n")
    assert json.loads(TESTDATA.read_text()) == served, (
        f"{TESTDATA.relative_to(ROOT)} is not what twin.web.config renders; rewrite it with "
        "TWIN_UPDATE_TESTDATA=1 pytest tests/web/test_config.py"
    )
