"""Constants the dashboard's browser code needs, taken from the Python that owns them.

The dashboard page carries them as a JSON script (``#twin-config``, rendered by
:func:`twin.web.views.dashboard`), so the TypeScript reads the server's values
instead of keeping copies that drift: a rack budget changed in
``twin.hardware.constants`` or a metric added to the sparkline history reaches
the browser with the next page load. ``frontend/src/config.ts`` reads it;
``frontend/src/testdata/config.json`` is what the unit tests use, and
``tests/web/test_config.py`` fails when it no longer matches this.
"""
from __future__ import annotations

from typing import Any

from twin.core.choices import JobStatusChoices
from twin.hardware.constants import DEFAULT_RACK_BUDGET_W
from twin.live.protocol import CLOSE_NOT_FOUND, CLOSE_UNAUTHENTICATED, CLOSE_UNAVAILABLE
from twin.telemetry.metrics import HISTORY_METRICS

__all__ = ["dashboard_config"]


def dashboard_config() -> dict[str, Any]:
    """The ``#twin-config`` JSON of the dashboard page (keys are the TypeScript's names)."""
    return {
        # Budget of a rack created without one (W): the default of the power bars.
        "rack_budget_default_w": DEFAULT_RACK_BUDGET_W,
        # ws/clusters/<id>/ close codes: after the first two reconnecting cannot
        # help; "unavailable" (Redis or the database away) is retried with backoff.
        "close_codes": {
            "unauthenticated": CLOSE_UNAUTHENTICATED,
            "not_found": CLOSE_NOT_FOUND,
            "unavailable": CLOSE_UNAVAILABLE,
        },
        # Metrics with a per-card history (the card panel's sparkline).
        "history_metrics": list(HISTORY_METRICS),
        # Scenario run states that never change again (stop following the run).
        "scenario_final_statuses": [s for s in JobStatusChoices.values()
                                    if s in JobStatusChoices.FINAL],
    }
