"""Alerts out: firing and resolved alerts pushed to Alertmanagers and webhooks.

Receivers come from the environment (settings): ``TWIN_ALERTMANAGER_URLS``
(Alertmanager base URLs; alerts go to ``<url>/api/v2/alerts``, its v2 API) and
``TWIN_ALERT_WEBHOOK_URLS`` (any URL taking a POST of JSON in Alertmanager's own
webhook shape, version 4, so tools written for Alertmanager's webhooks read it).

Who sends: the Celery task ``twin.telemetry.notify_alerts`` (``tasks``), queued
by a tick that opened or closed alerts (``FollowUps.notify``) and run by beat
every ``TWIN_ALERTS_BEAT_S`` as a safety net; a failed delivery raises
:class:`DeliveryFailed`, which the task retries with exponential backoff (and the
beat picks up whatever is still undelivered after that).

No duplicates: what each receiver was told is kept in the database
(``AlertDelivery``: alert, receiver, state, ``sent_at``). A run sends each
receiver the alerts whose *current* state it has not yet acknowledged with a
2xx — firing for an open alert, resolved for one that ended within
``TWIN_ALERTS_LOOKBACK_S`` — and records them once it answered; a per-receiver
Redis lock keeps two runs from sending the same batch at once. A webhook hears
each state of an alert once. An Alertmanager is different by design: it
resolves a firing alert by itself at its ``endsAt``, so firing alerts carry
``endsAt = now + 4 × TWIN_ALERTS_RESEND_S`` and are re-sent every
``TWIN_ALERTS_RESEND_S`` while open (what Prometheus does; Alertmanager
deduplicates them by their labels and notifies once). Delivery is at least once:
should the database fail between a receiver's 2xx and the record, that batch
is sent again.

An alert as sent (Alertmanager's fields)::

    {"labels": {"alertname": "gpu_temp", "severity": "warning", "cluster": "demo",
                "cluster_id": "1", "level": "card", "subject": "card:123", "card": "123",
                "rack": "r0", "supernode": "sn0", "source": "supercluster-twin"},
     "annotations": {"summary": "card 123: GPU temperature 88 °C (threshold 85 °C)",
                     "description": "GPU temperature high", "value": "88",
                     "threshold": "85", "twin_alert_id": "41"},
     "startsAt": "…", "endsAt": "…",
     "generatorURL": "<TWIN_ALERTS_EXTERNAL_URL>/?cluster=1&view=card&id=123"}
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Exists, F, OuterRef, QuerySet
from django.utils import timezone

from twin.telemetry import keys
from twin.telemetry.choices import AlertRuleChoices
from twin.telemetry.choices import AlertStateChoices as State
from twin.telemetry.config import redis_client

__all__ = ["BATCH", "DeliveryFailed", "Receiver", "alert_payload", "configured", "deliver",
           "generator_url", "pending", "post", "receivers", "request_delivery"]

log = logging.getLogger(__name__)

BATCH = 500
"""Alerts per request."""
MAX_PER_RUN = 5000
"""Alerts per receiver and state in one run (the next run sends the rest)."""
NO_END = "0001-01-01T00:00:00Z"
"""Alertmanager's webhook spelling of "no end yet"."""


class DeliveryFailed(Exception):
    """A receiver could not be reached or did not answer 2xx: worth retrying."""


@dataclass(frozen=True)
class Receiver:
    kind: str  # "alertmanager" or "webhook"
    url: str

    @property
    def name(self) -> str:
        """Stable identity in ``AlertDelivery.receiver``: a changed URL is a new receiver."""
        return f"{self.kind}:{hashlib.sha256(self.url.encode()).hexdigest()[:24]}"

    @property
    def endpoint(self) -> str:
        if self.kind == "alertmanager" and not self.url.rstrip("/").endswith("/api/v2/alerts"):
            return self.url.rstrip("/") + "/api/v2/alerts"
        return self.url

    @property
    def refreshes(self) -> bool:
        """Whether firing alerts are re-sent while open (Alertmanager's protocol)."""
        return self.kind == "alertmanager"


def receivers() -> list[Receiver]:
    return ([Receiver("alertmanager", u) for u in settings.TWIN_ALERTMANAGER_URLS]
            + [Receiver("webhook", u) for u in settings.TWIN_ALERT_WEBHOOK_URLS])


def configured() -> bool:
    return bool(settings.TWIN_ALERTMANAGER_URLS or settings.TWIN_ALERT_WEBHOOK_URLS)


def request_delivery(queue: Callable[[], Any]) -> bool:
    """Queue a delivery run (``queue()``) unless none is configured or one was queued
    in the last second (a burst of ticks with transitions makes one run)."""
    if not configured():
        return False
    if not redis_client().set(keys.notify_queued(), 1, nx=True, px=1000):
        return False
    queue()
    return True


# --------------------------------------------------------------------------
# payloads
# --------------------------------------------------------------------------

def _iso(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def generator_url(alert: Any) -> str:
    """The dashboard at the alert's card or rack (``?cluster=&view=&id=``)."""
    base = settings.TWIN_ALERTS_EXTERNAL_URL.rstrip("/")
    if alert.card_id:
        return f"{base}/?cluster={alert.cluster_id}&view=card&id={alert.card_id}"
    if alert.rack_id:
        return f"{base}/?cluster={alert.cluster_id}&view=rack&id={alert.rack_id}"
    return f"{base}/?cluster={alert.cluster_id}"


def alert_payload(alert: Any, state: str, *, ends_firing: dt.datetime | None) -> dict[str, Any]:
    """One alert in Alertmanager's shape (see the module). ``ends_firing`` is the
    ``endsAt`` of a firing alert (None: "no end yet")."""
    labels = {"alertname": alert.rule, "severity": alert.severity,
              "cluster": alert.cluster.name, "cluster_id": str(alert.cluster_id),
              "level": alert.level, "subject": alert.subject, "source": "supercluster-twin"}
    if alert.card_id:
        labels["card"] = str(alert.card_id)
    if alert.rack_id:
        labels["rack"] = alert.rack.name
    if alert.supernode_id:
        labels["supernode"] = alert.supernode.name
    if state == State.RESOLVED:
        ends = _iso(alert.ended)
    else:
        ends = _iso(ends_firing) if ends_firing else NO_END
    return {
        "status": state, "labels": labels,
        "annotations": {"summary": alert.message,
                        "description": AlertRuleChoices.label(alert.rule),
                        "value": _number(alert.value), "threshold": _number(alert.threshold),
                        "twin_alert_id": str(alert.pk)},
        "startsAt": _iso(alert.started), "endsAt": ends,
        "generatorURL": generator_url(alert),
        "fingerprint": hashlib.sha256(json.dumps(labels, sort_keys=True).encode())
        .hexdigest()[:16],
    }


def _body(receiver: Receiver, alerts: list[dict[str, Any]]) -> bytes:
    if receiver.kind == "alertmanager":  # the v2 API: a list of postable alerts
        body: Any = [{k: a[k] for k in ("labels", "annotations", "startsAt", "endsAt",
                                        "generatorURL")} for a in alerts]
    else:  # Alertmanager's webhook payload, version 4
        firing = any(a["status"] == State.FIRING for a in alerts)
        body = {"version": "4", "receiver": "supercluster-twin",
                "status": State.FIRING if firing else State.RESOLVED,
                "groupKey": "supercluster-twin", "truncatedAlerts": 0,
                "groupLabels": {}, "commonLabels": {"source": "supercluster-twin"},
                "commonAnnotations": {},
                "externalURL": settings.TWIN_ALERTS_EXTERNAL_URL, "alerts": alerts}
    return json.dumps(body).encode()


def post(receiver: Receiver, body: bytes) -> None:
    """POST ``body`` (JSON); :class:`DeliveryFailed` unless the answer is 2xx."""
    request = urllib.request.Request(receiver.endpoint, data=body, method="POST", headers={
        "Content-Type": "application/json", "User-Agent": "supercluster-twin"})
    try:
        with urllib.request.urlopen(request, timeout=settings.TWIN_ALERTS_TIMEOUT_S) as resp:
            resp.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:200].decode(errors="replace")
        raise DeliveryFailed(f"{receiver.endpoint}: HTTP {exc.code} {detail}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise DeliveryFailed(f"{receiver.endpoint}: {exc}") from None


# --------------------------------------------------------------------------
# delivery
# --------------------------------------------------------------------------

def _due(receiver: Receiver, state: str, now: dt.datetime) -> QuerySet:
    from twin.telemetry.models import Alert, AlertDelivery

    sent = AlertDelivery.objects.filter(alert=OuterRef("pk"), receiver=receiver.name,
                                        state=state, sent_at__isnull=False)
    if state == State.FIRING:
        alerts = Alert.objects.filter(ended__isnull=True)
        if receiver.refreshes:
            resend = dt.timedelta(seconds=settings.TWIN_ALERTS_RESEND_S)
            sent = sent.filter(sent_at__gt=now - resend)
    else:
        lookback = dt.timedelta(seconds=settings.TWIN_ALERTS_LOOKBACK_S)
        alerts = Alert.objects.filter(ended__isnull=False, ended__gte=now - lookback)
    return (alerts.filter(~Exists(sent)).select_related("cluster", "rack", "supernode")
            .order_by("started", "pk"))


def _record(receiver: Receiver, state: str, ids: list[int], now: dt.datetime,
            error: str | None) -> None:
    from twin.telemetry.models import AlertDelivery

    AlertDelivery.objects.bulk_create(
        [AlertDelivery(alert_id=i, receiver=receiver.name, state=state) for i in ids],
        ignore_conflicts=True, batch_size=1000)
    rows = AlertDelivery.objects.filter(alert_id__in=ids, receiver=receiver.name, state=state)
    if error is None:
        rows.update(sent_at=now, attempts=0, last_error="")
    else:
        rows.update(attempts=F("attempts") + 1, last_error=error[:300])


def _chunks(query: QuerySet) -> Iterator[list[Any]]:
    rows = list(query[:MAX_PER_RUN])
    for i in range(0, len(rows), BATCH):
        yield rows[i:i + BATCH]


def deliver(now: dt.datetime | None = None) -> dict[str, int]:
    """Send every receiver what it has not been told (see the module); returns the
    alerts sent per receiver. Raises :class:`DeliveryFailed` after trying them
    all when any failed (the task then retries with backoff)."""
    now = now or timezone.now()
    r = redis_client()
    sent: dict[str, int] = {}
    failures: list[str] = []
    for receiver in receivers():
        lock = keys.notify_lock(receiver.name)
        if not r.set(lock, 1, nx=True, px=120_000):
            continue  # another run is sending to it; it (or the beat) finishes the job
        try:
            sent[receiver.name] = _deliver_one(receiver, now, failures)
        finally:
            r.delete(lock)
    if failures:
        raise DeliveryFailed("; ".join(failures))
    return sent


def _deliver_one(receiver: Receiver, now: dt.datetime, failures: list[str]) -> int:
    count = 0
    ends = now + dt.timedelta(seconds=4 * settings.TWIN_ALERTS_RESEND_S)
    # Resolved first: an alert that fired and ended while the receiver was away is
    # one resolved message, and a reopened subject's new firing comes after it.
    for state in (State.RESOLVED, State.FIRING):
        for chunk in _chunks(_due(receiver, state, now)):
            payloads = [alert_payload(a, state, ends_firing=ends if receiver.refreshes
                                      else None) for a in chunk]
            ids = [a.pk for a in chunk]
            try:
                post(receiver, _body(receiver, payloads))
            except DeliveryFailed as exc:
                log.warning("alerts not delivered: %s", exc)
                _record(receiver, state, ids, now, str(exc))
                failures.append(str(exc))
                return count
            _record(receiver, state, ids, now, None)
            count += len(ids)
    return count


def pending(receiver: Receiver) -> int:
    """Alerts whose current state ``receiver`` has not acknowledged (for the admin/tests)."""
    now = timezone.now()
    return sum(_due(receiver, s, now).count() for s in (State.RESOLVED, State.FIRING))

