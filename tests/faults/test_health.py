"""``/healthz/`` and ``manage.py healthcheck`` (what docker-compose's health checks
run): healthy when the process serves and reaches what it needs, 503 / exit 1
saying why when not (issue 11, item 1)."""
from __future__ import annotations

import os
import time
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from tests.conftest import _worker_env, asgi_server
from tests.faults.away import redis_away
from twin.core.localnet import free_port


@pytest.mark.django_db
def test_healthz_is_200_when_all_is_there_and_503_saying_what_is_away(client):
    response = client.get("/healthz/")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "redis": "ok"}
    with redis_away():
        started = time.monotonic()
        response = client.get("/healthz/")
    assert time.monotonic() - started < 1.0
    assert response.status_code == 503 and int(response["Retry-After"]) >= 1
    body = response.json()
    assert body["status"] == "degraded" and body["database"] == "ok"
    assert "ConnectionError" in body["redis"]


def test_healthcheck_web_asks_the_real_server(django_db_setup, django_db_blocker):
    from django.db import connection

    with django_db_blocker.unblock():
        env = _worker_env(dict(connection.settings_dict))
    with asgi_server(env, "healthcheck-uvicorn.log", "/healthz/") as base:
        call_command("healthcheck", "web", "--url", base)
    with pytest.raises(CommandError, match="healthz"):
        call_command("healthcheck", "web", "--url", f"http://127.0.0.1:{free_port()}",
                     "--timeout", "1")


@pytest.mark.worker
def test_healthcheck_worker_pings_the_named_worker(celery_worker):
    call_command("healthcheck", "worker", "--name", celery_worker)
    with pytest.raises(CommandError, match="did not answer"):
        call_command("healthcheck", "worker", "--name", "no-such-worker", "--timeout", "0.5")


def test_healthcheck_beat_reads_the_schedule_file_age(tmp_path):
    schedule = tmp_path / "celerybeat-schedule"
    with pytest.raises(CommandError, match="has not started"):
        call_command("healthcheck", "beat", "--schedule", str(schedule))
    (tmp_path / "celerybeat-schedule.db").write_bytes(b"x")  # dbm may add a suffix
    call_command("healthcheck", "beat", "--schedule", str(schedule))
    old = time.time() - 3600
    os.utime(tmp_path / "celerybeat-schedule.db", (old, old))
    with pytest.raises(CommandError, match="last written"):
        call_command("healthcheck", "beat", "--schedule", str(schedule))


@pytest.mark.django_db
def test_healthcheck_agent_reads_its_last_batch(tiny_cluster):
    from twin.telemetry.models import TelemetryAgent

    cluster = tiny_cluster["cluster"]
    with pytest.raises(CommandError, match="sent nothing"):
        call_command("healthcheck", "agent", "--cluster", cluster.name)
    agent, _ = TelemetryAgent.issue(cluster, f"sim-{cluster.name}")
    TelemetryAgent.objects.filter(pk=agent.pk).update(last_seen=timezone.now())
    call_command("healthcheck", "agent", "--cluster", cluster.name)
    TelemetryAgent.objects.filter(pk=agent.pk).update(
        last_seen=timezone.now() - timedelta(minutes=5))
    with pytest.raises(CommandError, match="last batch"):
        call_command("healthcheck", "agent", "--cluster", cluster.name)
