"""``manage.py telemetry_agent`` against a real uvicorn server and a real worker."""
from __future__ import annotations

import io

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from tests.telemetry.conftest import wait_for
from twin.telemetry import state
from twin.telemetry.models import TelemetryAgent

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def run_agent(base: str, *args: str) -> str:
    out = io.StringIO()
    call_command("telemetry_agent", "--cluster", "tiny", "--url", base, *args, stdout=out,
                 stderr=out)
    return out.getvalue()


def test_the_agent_streams_correlated_readings_through_http(celery_worker, telemetry_server,
                                                            tiny_cluster):
    cid = tiny_cluster["cluster"].pk
    # Until the twin has taken 4 batches (not a fixed time: a loaded machine sends fewer
    # in a given time); --duration only bounds a hang.
    output = run_agent(telemetry_server, "--hz", "2", "--batches", "4", "--duration", "120",
                       "--fault-rate", "0")
    assert "0 errors" in output, output
    agent = TelemetryAgent.objects.get(cluster_id=cid, name="sim-tiny")
    assert agent.batches == 4 and agent.gaps == 0 and agent.duplicates == 0
    assert agent.samples == 8 * agent.batches
    values = wait_for(lambda: (v := state.latest_many(cid, ["gpu_util", "power_w",
                                                            "gpu_temp_c", "link_latency_ns"]))
                      and np.isfinite(v["power_w"]).all() and v, what="agent readings")
    # Power follows utilization: idle + (TDP − idle) × util, ± 2 % noise (H100: 70 / 700 W).
    expected = 70 + (700 - 70) * values["gpu_util"] / 100
    np.testing.assert_allclose(values["power_w"], expected, rtol=0.1, atol=15)
    assert (values["gpu_temp_c"] > 25).all() and (values["gpu_temp_c"] < 90).all()
    assert (values["link_latency_ns"] < 200).all()
    rollup = wait_for(lambda: (r := state.rollup(cid, "rack", "power_w"))["seq"] > 0 and r,
                      what="a tick")
    assert rollup["reporting"][0] == 8

    # The DCGM text path, with the token given explicitly (no re-keying).
    _, token = TelemetryAgent.issue(tiny_cluster["cluster"], "exporter")
    output = run_agent(telemetry_server, "--format", "dcgm", "--batches", "2", "--duration",
                       "120", "--token", token, "--quiet")
    assert output == ""
    exporter = TelemetryAgent.objects.get(name="exporter")
    assert exporter.batches == 2 and exporter.samples == 16 and exporter.rejected == 0


def test_the_agent_refuses_a_negative_batch_count(db):
    with pytest.raises(CommandError, match="--batches must be 0"):
        call_command("telemetry_agent", "--cluster", "tiny", "--batches", "-1")


def test_the_agent_refuses_an_unknown_cluster(db):
    with pytest.raises(CommandError, match="no cluster named 'nowhere'"):
        call_command("telemetry_agent", "--cluster", "nowhere")


def test_the_agent_stops_when_its_cluster_is_deleted(celery_worker, telemetry_server,
                                                     tiny_cluster):
    """Issue 11, item 4: the server answers 410 and the agent exits saying so,
    instead of posting into the void. (The agent runs here, in the main thread: it
    installs a SIGTERM handler; the cluster is deleted from another thread.)"""
    import threading

    from django.db import connection, transaction

    cluster = tiny_cluster["cluster"]
    failure: dict[str, BaseException] = {}

    def delete_once_live() -> None:
        try:
            wait_for(lambda: TelemetryAgent.objects.filter(name="sim-tiny", batches__gt=0)
                     .exists() or None, what="the agent's first batch")
            with transaction.atomic():
                cluster.delete_with_contents()
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            failure["error"] = exc
        finally:
            connection.close()

    deleter = threading.Thread(target=delete_once_live, daemon=True)
    deleter.start()
    with pytest.raises(CommandError, match="was deleted"):
        run_agent(telemetry_server, "--hz", "5", "--duration", "60", "--fault-rate", "0",
                  "--quiet")
    deleter.join(timeout=20)
    assert not failure, failure
