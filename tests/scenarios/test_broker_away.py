"""The task queue away: starting a scenario run or a build answers 503 with
``Retry-After`` before anything is written — never 202 "queued" for a job whose
task cannot be sent (issue 11, item 1)."""
from __future__ import annotations

import time

import pytest

from tests.faults.away import broker_away
from tests.scenarios.conftest import post
from twin.hardware.models import ClusterBuild
from twin.scenarios.models import ScenarioRun

pytestmark = pytest.mark.django_db

TORUS = {"kind": "topology", "params": {"family": "torus", "dims": [4, 4, 4]}}


def assert_unavailable(response, started: float) -> None:
    assert time.monotonic() - started < 1.5, "the broker check must be quick"
    assert response.status_code == 503, response.content
    assert int(response["Retry-After"]) >= 1
    assert "not reachable" in response.json()["detail"]


def test_a_scenario_run_is_refused_with_503_and_nothing_is_created(
        admin_client_api, published, django_capture_on_commit_callbacks):
    with broker_away():
        started = time.monotonic()
        response, callbacks = post(admin_client_api, TORUS, django_capture_on_commit_callbacks)
        assert_unavailable(response, started)
    assert ScenarioRun.objects.count() == 0 and callbacks == [] and published == []
    # The broker back: the same request is accepted.
    response, callbacks = post(admin_client_api, TORUS, django_capture_on_commit_callbacks)
    assert response.status_code == 202 and len(callbacks) == 1


def test_a_cached_result_needs_no_broker(admin_client_api, admin_user,
                                        django_capture_on_commit_callbacks):
    from twin.scenarios.runner import execute, submit

    execute(submit("topology", TORUS["params"], None, admin_user).pk)
    with broker_away():
        response, callbacks = post(admin_client_api, TORUS, django_capture_on_commit_callbacks)
    assert response.status_code == 201 and response.json()["cached"] is True
    assert callbacks == []


def test_a_build_is_refused_with_503_and_nothing_is_created(
        admin_client_api, django_capture_on_commit_callbacks):
    body = {"preset": "seed-512", "supernodes": 1, "name": "lab"}
    with broker_away(), django_capture_on_commit_callbacks(execute=False) as callbacks:
        started = time.monotonic()
        response = admin_client_api.post("/api/builds/", body, format="json")
        assert_unavailable(response, started)
    assert ClusterBuild.objects.count() == 0 and callbacks == []
