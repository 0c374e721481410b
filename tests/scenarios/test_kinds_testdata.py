"""The dashboard's scenario-kinds test data must be what the server answers.

The form and result models of the dashboard (frontend/src/panels/scenarioform.ts,
scenarioresult.ts) are unit-tested on a copy of ``GET /api/scenarios/kinds/``:
``frontend/src/panels/testdata/kinds.json``. A kind or field added, renamed or
re-described on the server without that copy following would leave the vitest
suite green on a form the server no longer serves; this test fails instead.
To rewrite the copy from the server::

    TWIN_UPDATE_TESTDATA=1 pytest tests/scenarios/test_kinds_testdata.py
"""
from __future__ import annotations

import json
import os

from tests.conftest import ROOT

URL = "/api/scenarios/kinds/"
TESTDATA = ROOT / "frontend" / "src" / "panels" / "testdata" / "kinds.json"


def test_frontend_kinds_testdata_matches_the_api(reader_client, db):
    response = reader_client.get(URL)
    assert response.status_code == 200, response.content
    served = response.json()
    if os.environ.get("TWIN_UPDATE_TESTDATA") == "1":
        TESTDATA.write_text(json.dumps(served, indent=2, ensure_ascii=False) + "\n")
    copy = json.loads(TESTDATA.read_text())
    assert copy == served, (
        f"{TESTDATA.relative_to(ROOT)} is not what {URL} answers; rewrite it with "
        "TWIN_UPDATE_TESTDATA=1 pytest tests/scenarios/test_kinds_testdata.py"
    )
