"""A real sender: Debian's ``prometheus`` scrapes a DCGM exporter and remote-writes to
the twin (a real uvicorn and Celery worker), and the cards' latest state in Redis is
what the exporter served.

Skipped only when the ``prometheus`` binary is not installed (``scripts/test``
installs Debian's package, as it installs chromium for the browser tests).
"""
from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ARTIFACTS
from tests.telemetry.conftest import wait_for
from twin.core.localnet import free_port, stop_process, wait_http
from twin.telemetry import prometheus, state
from twin.telemetry.models import TelemetryAgent

PROMETHEUS = shutil.which("prometheus")
pytestmark = [
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(PROMETHEUS is None, reason="the prometheus binary is not installed "
                                                   "(apt-get install prometheus)"),
]

DATA = Path(__file__).parent / "data"


def expected(metric: str, field: str, scale: float = 1.0) -> list[float | None]:
    """What the exporter serves for each gpu, read from the file with the text parser."""
    samples, _, _ = prometheus.parse_exposition((DATA / "dcgm_node0.prom").read_text())
    out: list[float | None] = [None] * 8
    for s in samples:
        if s.name == field and math.isfinite(s.value) and s.value < 1e15:
            out[int(s.labels["gpu"])] = round(s.value * scale, 3)
    return out


def test_prometheus_scrapes_an_exporter_and_remote_writes_to_the_twin(
        telemetry_server, agent, dcgm_exporter, tmp_path):
    cid = agent["cluster"].pk
    ids = [c.pk for c in agent["cards"]]
    config = tmp_path / "prometheus.yml"
    config.write_text(f"""
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: dcgm
    static_configs:
      - targets: ["{dcgm_exporter}"]
remote_write:
  - url: {telemetry_server}/api/telemetry/clusters/{cid}/write
    authorization:
      credentials: {agent["token"]}
    queue_config:
      batch_send_deadline: 1s
      min_backoff: 100ms
      max_backoff: 1s
""")
    port = free_port()
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / "prometheus.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--log.level=info"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_http(f"http://127.0.0.1:{port}/-/ready", proc)
        power = wait_for(
            lambda: (v := state.latest(cid, "power_w", ids)) is not None
            and np.isfinite(v).sum() >= 6 and v,
            timeout=90, what="Prometheus's remote write to reach the cards (see "
                             "test-artifacts/prometheus.log)")
        got = [None if np.isnan(v) else round(float(v), 3) for v in power]
        assert got == expected("power_w", "DCGM_FI_DEV_POWER_USAGE")
        clocks = state.latest(cid, "sm_clock_mhz", ids)
        assert [round(float(v), 3) for v in clocks] == expected("sm_clock_mhz",
                                                                "DCGM_FI_DEV_SM_CLOCK")
        hbm = [None if np.isnan(v) else round(float(v), 3)
               for v in state.latest(cid, "hbm_used_gib", ids)]
        assert hbm == expected("hbm_used_gib", "DCGM_FI_DEV_FB_USED", 1 / 1024)
        row = wait_for(lambda: (a := TelemetryAgent.objects.get(pk=agent["agent"].pk))
                       .samples >= 8 and a, what="the agent's bookkeeping")
        assert row.last_seen is not None and row.batches >= 1
    finally:
        stop_process(proc)
        log.close()
    # Every request was answered 2xx: Prometheus logs any it had to drop or retry.
    text = (ARTIFACTS / "prometheus.log").read_text()
    assert "non-recoverable error" not in text and "Failed to send batch" not in text, text
