"""A token rotation does not silently lock the agent out (issue 22, item 4).

The replaced token keeps working for a grace period shown in the API and the
admin; after it, the 401 says which rotation replaced it; an agent that went
silent after a rotation gets an alert naming it; and the agent command takes up a
rotated token by itself (re-read from its token file, or — the demo's agent, which
owns its row — re-keyed through the database).
"""
from __future__ import annotations

import datetime as dt
import io
import threading

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from tests.telemetry.conftest import wait_for
from twin.telemetry import agent_watch
from twin.telemetry.api import ingest_views
from twin.telemetry.models import Alert, TelemetryAgent


def whoami(client, token: str):
    return client.get("/api/telemetry/whoami/", HTTP_AUTHORIZATION=f"Bearer {token}")


@pytest.mark.django_db
def test_the_replaced_token_works_for_the_grace_period_then_says_why(
        client, admin_user, admin_client_api, tiny_cluster):
    agent, old = TelemetryAgent.issue(tiny_cluster["cluster"], "node-agent")
    url = f"/api/telemetry/agents/{agent.pk}/rotate-token/"
    refused = admin_client_api.post(url, {"grace_s": -1}, format="json")
    assert refused.status_code == 400 and "grace_s" in refused.json()

    before = timezone.now()
    answer = admin_client_api.post(url, {"grace_s": 120}, format="json")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    new = body["token"]
    assert new and new != old
    assert body["previous_token_hint"] == old[:12] and body["token_hint"] == new[:12]
    expires = dt.datetime.fromisoformat(body["previous_token_expires"])
    assert before + dt.timedelta(seconds=119) <= expires <= timezone.now() + dt.timedelta(
        seconds=121)
    # Both tokens work during the grace period: the agent can be moved over without a gap.
    assert whoami(client, old).status_code == 200
    assert whoami(client, new).status_code == 200
    # The API shows both; the admin too.
    listed = admin_client_api.get(f"/api/telemetry/agents/{agent.pk}/").json()
    assert listed["previous_token_hint"] == old[:12] and listed["token"] is None
    client.force_login(admin_user)
    page = client.get(f"/admin/telemetry/telemetryagent/{agent.pk}/change/")
    assert old[:12].encode() in page.content and b"Previous token expires" in page.content

    # The grace period ends: the old token is refused, saying which rotation replaced it.
    TelemetryAgent.objects.filter(pk=agent.pk).update(
        previous_token_expires=timezone.now() - dt.timedelta(seconds=1))
    ingest_views._cache.clear()
    late = whoami(client, old)
    assert late.status_code == 401
    assert "node-agent" in late.json()["detail"] and "replaced at" in late.json()["detail"]
    assert whoami(client, new).status_code == 200
    agent.refresh_from_db()
    assert agent.old_token_refused_at is not None


@pytest.mark.django_db
def test_an_agent_silent_after_a_rotation_gets_an_alert_naming_it(tiny_cluster):
    now = timezone.now()
    agent, _ = TelemetryAgent.issue(tiny_cluster["cluster"], "rack-7-agent")
    agent.set_new_token(grace_s=5)
    agent.save()
    TelemetryAgent.objects.filter(pk=agent.pk).update(
        last_seen=now - dt.timedelta(seconds=5), token_rotated_at=now - dt.timedelta(seconds=10),
        previous_token_expires=now - dt.timedelta(seconds=5))
    # Still within TWIN_AGENT_SILENT_S of its last batch: nothing yet.
    assert agent_watch.check_agents(now) == {"opened": 0, "closed": 0}
    later = now + dt.timedelta(seconds=60)
    assert agent_watch.check_agents(later) == {"opened": 1, "closed": 0}
    alert = Alert.objects.get(rule="agent_rotated_silent", ended__isnull=True)
    assert "'rack-7-agent'" in alert.message and "rotated" in alert.message
    assert alert.cluster_id == tiny_cluster["cluster"].pk and alert.subject == f"agent:{agent.pk}"
    assert agent_watch.check_agents(later) == {"opened": 0, "closed": 0}  # once, not per beat

    # It reports again (given the new token): the alert closes.
    TelemetryAgent.objects.filter(pk=agent.pk).update(last_seen=later)
    assert agent_watch.check_agents(later + dt.timedelta(seconds=1)) == {"opened": 0,
                                                                        "closed": 1}
    # An agent that was already silent long before the rotation is not blamed on it…
    other, _ = TelemetryAgent.issue(tiny_cluster["cluster"], "long-dead")
    TelemetryAgent.objects.filter(pk=other.pk).update(
        last_seen=now - dt.timedelta(hours=1), token_rotated_at=now)
    assert agent_watch.check_agents(later)["opened"] == 0
    # … unless it then knocks with its replaced token.
    TelemetryAgent.objects.filter(pk=other.pk).update(old_token_refused_at=later)
    assert agent_watch.check_agents(later)["opened"] == 1


def _rotate_once_live(agent_name: str, write_to=None) -> tuple[threading.Thread, dict]:
    """A thread that rotates ``agent_name``'s token (no grace) once it has posted, and
    counts its batches at that moment."""
    seen: dict = {}

    def rotate() -> None:
        try:
            wait_for(lambda: TelemetryAgent.objects.filter(name=agent_name, batches__gt=1)
                     .exists() or None, what="the agent's first batches")
            agent = TelemetryAgent.objects.get(name=agent_name)
            token = agent.set_new_token(grace_s=0)
            agent.save(update_fields=list(TelemetryAgent.TOKEN_FIELDS))
            seen["batches"] = agent.batches
            if write_to is not None:
                write_to.write_text(token + "\n")
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            seen["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=rotate, daemon=True)
    thread.start()
    return thread, seen


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_agent_takes_up_a_rotated_token_from_its_file(celery_worker, telemetry_server,
                                                          tiny_cluster, tmp_path):
    agent, token = TelemetryAgent.issue(tiny_cluster["cluster"], "filed")
    token_file = tmp_path / "agent-token"
    token_file.write_text(token + "\n")
    thread, seen = _rotate_once_live("filed", write_to=token_file)
    out = io.StringIO()
    call_command("telemetry_agent", "--cluster", "tiny", "--url", telemetry_server,
                 "--token-file", str(token_file), "--hz", "4", "--duration", "6",
                 "--fault-rate", "0", stdout=out, stderr=out)
    thread.join(10)
    assert "error" not in seen, seen
    agent.refresh_from_db()
    assert agent.batches > seen["batches"] + 4, out.getvalue()  # it went on after the rotation


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_demo_agent_follows_a_rotation_by_itself(celery_worker, telemetry_server,
                                                     tiny_cluster):
    thread, seen = _rotate_once_live("sim-tiny")
    out = io.StringIO()
    call_command("telemetry_agent", "--cluster", "tiny", "--url", telemetry_server,
                 "--hz", "4", "--duration", "6", "--fault-rate", "0", stdout=out, stderr=out)
    thread.join(10)
    assert "error" not in seen, seen
    agent = TelemetryAgent.objects.get(name="sim-tiny")
    assert agent.batches > seen["batches"] + 4, out.getvalue()
    assert out.getvalue().count("token (re)issued") == 2  # at start, and after the rotation
