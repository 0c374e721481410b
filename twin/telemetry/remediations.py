"""What telemetry does when self-healing decides (``twin.jobs.healing.on_decided``).

On ``applied`` the failure's alert (the remediation's episode) is closed as
remediated, in the same transaction that moved the jobs; on every decision the
remediation is published on commit to the cluster's Channels group as
``remediation.event`` (the shape is in ``twin.telemetry.state``), next to the
alert events, and so reaches every browser following the cluster. Connected in
``signals`` (the app's ``ready``), so ``twin.jobs`` never imports telemetry.
"""
from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Concat, Left
from django.utils import timezone

from twin.telemetry import bridge
from twin.telemetry.state import ALERT_EVENT, REMEDIATION_EVENT, group_name

__all__ = ["on_remediation"]


def on_remediation(rem: Any, event: str) -> None:
    """Close the episode's alert when applied; publish the decision once committed."""
    from twin.telemetry.models import Alert

    closed: list[int] = []
    if event == "applied":
        alerts = Alert.objects.filter(pk=rem.episode, cluster_id=rem.cluster_id,
                                      card_id=rem.card_id, ended__isnull=True)
        closed = list(alerts.values_list("pk", flat=True))
        alerts.update(ended=timezone.now(), message=Left(
            Concat(F("message"), Value(f" — remediated ({rem.pk})")), 300))
    payload = {"type": REMEDIATION_EVENT, "cluster": rem.cluster_id, "event": event,
               "remediation": rem.as_event()}

    def publish() -> None:
        group = group_name(rem.cluster_id)
        bridge.group_send(group, payload)
        for alert in Alert.objects.filter(pk__in=closed).select_related("acknowledged_by"):
            bridge.group_send(group, {"type": ALERT_EVENT, "cluster": rem.cluster_id,
                                      "event": "closed", "alert": alert.as_event()})

    transaction.on_commit(publish)
