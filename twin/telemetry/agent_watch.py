"""Agents silent after a rotation of their token: an alert that names them.

A rotation (``rotate-token``, the admin action) keeps the replaced token working
for a grace period (``TelemetryAgent.set_new_token``). An agent that was not
given its new token in time is answered 401 from then on and stops reporting;
its cards then show "not reporting" and the cluster's silence alerts say *that*
telemetry stopped, not *why*. This check says why, once per agent:

    open  when the agent is active, its token was rotated, it has sent nothing for
          ``TWIN_AGENT_SILENT_S`` seconds, and it was still reporting at the
          rotation (or has since knocked with its replaced token:
          ``old_token_refused_at``);
    close when it reports again (it was given the new token), or is deactivated.

One cluster-level alert (rule ``agent_rotated_silent``, critical, subject
``agent:<id>``) per agent, opened and closed under the database's one-open-alert
constraint, so two beats never open it twice. Run on beat
(``twin.telemetry.watch_agents``, every 10 s).
"""
from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from twin.telemetry.choices import AlertRuleChoices, SeverityChoices, SubjectLevelChoices

__all__ = ["check_agents", "silent_after_rotation"]


def _clock(value: dt.datetime | None) -> str:
    return value.strftime("%H:%M:%S UTC") if value else "never"


def silent_after_rotation(agent: Any, now: dt.datetime, silent_s: float) -> bool:
    """Whether ``agent`` (a ``TelemetryAgent``) went silent because of a rotation."""
    rotated = agent.token_rotated_at
    if not agent.is_active or rotated is None:
        return False
    horizon = dt.timedelta(seconds=silent_s)
    if agent.last_seen is not None and agent.last_seen >= now - horizon:
        return False  # it reports
    knocked = agent.old_token_refused_at is not None and agent.old_token_refused_at >= rotated
    alive_at_rotation = agent.last_seen is not None and agent.last_seen >= rotated - horizon
    return knocked or alive_at_rotation


def _message(agent: Any) -> str:
    text = (f"Agent {agent.name!r} has sent nothing since {_clock(agent.last_seen)}: its token "
            f"was rotated at {_clock(agent.token_rotated_at)} and the old one stopped working "
            f"at {_clock(agent.previous_token_expires)}")
    if agent.old_token_refused_at and agent.old_token_refused_at >= agent.token_rotated_at:
        text += f"; it still sends the old token (last at {_clock(agent.old_token_refused_at)})"
    return (text + ". Give it the new token (its token file) or rotate again.")[:300]


def check_agents(now: dt.datetime | None = None) -> dict[str, int]:
    """Open and close the rotation alerts of every agent; returns the counts."""
    from twin.telemetry.models import Alert, TelemetryAgent

    now = now or timezone.now()
    silent_s = float(settings.TWIN_AGENT_SILENT_S)
    rule = AlertRuleChoices.AGENT_ROTATED_SILENT
    open_alerts = {a.subject: a for a in Alert.objects.filter(rule=rule, ended__isnull=True)}
    opened = closed = 0
    seen: set[str] = set()
    for agent in TelemetryAgent.objects.filter(token_rotated_at__isnull=False):
        subject = f"agent:{agent.pk}"
        if not silent_after_rotation(agent, now, silent_s):
            continue
        seen.add(subject)
        if subject in open_alerts:
            continue
        try:
            with transaction.atomic():
                alert = Alert.objects.create(
                    cluster_id=agent.cluster_id, rule=rule, severity=SeverityChoices.CRITICAL,
                    level=SubjectLevelChoices.CLUSTER, subject=subject,
                    message=_message(agent), started=now)
            opened += 1
            _publish("opened", alert)
        except IntegrityError:
            pass  # another beat opened it meanwhile
    for subject, alert in open_alerts.items():
        if subject not in seen and Alert.objects.filter(
                pk=alert.pk, ended__isnull=True).update(ended=now):
            closed += 1
            alert.ended = now
            _publish("closed", alert)
    return {"opened": opened, "closed": closed}


def _publish(event: str, alert: Any) -> None:
    """The dashboard's alert list hears of it as of any other alert."""
    from twin.telemetry import bridge
    from twin.telemetry.state import ALERT_EVENT, group_name

    bridge.group_send(group_name(alert.cluster_id), {
        "type": ALERT_EVENT, "cluster": alert.cluster_id, "event": event,
        "alert": alert.as_event()})
