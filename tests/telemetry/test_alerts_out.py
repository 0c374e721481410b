"""Alerts out (``twin.telemetry.notify``): firing and resolved alerts reach a webhook
once each, a receiver that was down gets them when it is back (the Celery task
retries with backoff), and a real Alertmanager (Debian's ``prometheus-alertmanager``)
shows them active and then resolved."""
from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import sys
import threading
import urllib.request
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.conftest import ARTIFACTS, ROOT, _worker_env
from tests.telemetry.conftest import PREFIX, batches_url, wait_for
from twin.core.localnet import free_port, stop_process, use_queue, wait_celery, wait_http
from twin.telemetry import notify
from twin.telemetry.models import Alert, AlertDelivery

ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")


class Receiver:
    """A webhook receiver on a fixed port that can be down (nothing listens), up,
    or answering an error status; it keeps every body it accepted."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}/hook"
        self.bodies: list[Any] = []
        self.status = 200
        self.server: ThreadingHTTPServer | None = None

    def up(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if receiver.status < 300:
                    receiver.bodies.append(json.loads(body))
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def down(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def alerts(self) -> list[tuple[str, str]]:
        """(status, subject) of every alert received, in order."""
        return [(a["status"], a["labels"]["subject"]) for b in self.bodies for a in b["alerts"]]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    rec = Receiver(free_port())
    try:
        yield rec
    finally:
        rec.down()


def open_alert(world: dict, card: int = 0, rule: str = "gpu_temp") -> Alert:
    c = world["cards"][card]
    return Alert.objects.create(
        cluster=world["cluster"], rule=rule, severity="warning", level="card",
        subject=f"card:{c.pk}", card=c, rack=world["rack"], supernode=world["supernode"],
        value=88.0, threshold=85.0, message=f"card {c.pk}: GPU temperature 88 °C",
        started=dt.datetime.now(dt.UTC))


@pytest.mark.django_db
def test_each_state_reaches_a_webhook_once(agent, receiver, settings):
    settings.TWIN_ALERT_WEBHOOK_URLS = [receiver.url]
    receiver.up()
    alert = open_alert(agent)
    subject = alert.subject
    assert notify.deliver() == {notify.receivers()[0].name: 1}
    assert notify.deliver() == {notify.receivers()[0].name: 0}  # nothing new: nothing sent
    assert receiver.alerts() == [("firing", subject)]
    body = receiver.bodies[0]
    assert body["version"] == "4" and body["status"] == "firing"
    sent = body["alerts"][0]
    assert sent["labels"] == {
        "alertname": "gpu_temp", "severity": "warning", "cluster": "tiny",
        "cluster_id": str(agent["cluster"].pk), "level": "card", "subject": subject,
        "card": str(alert.card_id), "rack": "r0", "supernode": "sn0",
        "source": "supercluster-twin"}
    assert sent["annotations"]["summary"] == alert.message
    assert sent["annotations"]["value"] == "88" and sent["endsAt"] == notify.NO_END
    assert sent["generatorURL"].endswith(
        f"/?cluster={agent['cluster'].pk}&view=card&id={alert.card_id}")
    Alert.objects.filter(pk=alert.pk).update(ended=dt.datetime.now(dt.UTC))
    notify.deliver()
    notify.deliver()
    assert receiver.alerts() == [("firing", subject), ("resolved", subject)]
    assert receiver.bodies[1]["alerts"][0]["endsAt"] != notify.NO_END


@pytest.mark.django_db
def test_a_receiver_that_was_down_gets_what_it_missed(agent, receiver, settings):
    settings.TWIN_ALERT_WEBHOOK_URLS = [receiver.url]
    first, second = open_alert(agent, 0), open_alert(agent, 1)
    with pytest.raises(notify.DeliveryFailed, match="refused"):
        notify.deliver()  # nothing listens
    row = AlertDelivery.objects.get(alert=first, state="firing")
    assert row.sent_at is None and row.attempts == 1 and "refused" in row.last_error
    receiver.up()
    receiver.status = 503
    with pytest.raises(notify.DeliveryFailed, match="HTTP 503"):
        notify.deliver()
    assert AlertDelivery.objects.get(alert=first, state="firing").attempts == 2
    # The first alert ended while the receiver was away; the second is still open.
    Alert.objects.filter(pk=first.pk).update(ended=dt.datetime.now(dt.UTC))
    receiver.status = 200
    notify.deliver()
    assert sorted(receiver.alerts()) == sorted([("resolved", first.subject),
                                                ("firing", second.subject)])
    notify.deliver()
    assert len(receiver.alerts()) == 2


@pytest.mark.django_db
def test_nothing_is_sent_without_receivers_and_old_resolutions_stay_home(agent, receiver,
                                                                          settings):
    settings.TWIN_ALERT_WEBHOOK_URLS = []
    assert notify.deliver() == {} and not notify.configured()
    old = open_alert(agent)
    Alert.objects.filter(pk=old.pk).update(
        started=dt.datetime.now(dt.UTC) - dt.timedelta(days=3),
        ended=dt.datetime.now(dt.UTC) - dt.timedelta(days=2))
    settings.TWIN_ALERT_WEBHOOK_URLS = [receiver.url]
    receiver.up()
    notify.deliver()
    assert receiver.bodies == []  # ended before TWIN_ALERTS_LOOKBACK_S


# --- through a real Celery worker: a tick opens an alert, the task retries until
#     the receiver is up ------------------------------------------------------------

@pytest.fixture
def notify_worker(django_db_setup, django_db_blocker, receiver, settings) -> Iterator[str]:
    """A worker of its own (its environment names the webhook), on its own queues."""
    from django.db import connection

    from twin.celery import app

    queue = f"twin-notify-{uuid.uuid4().hex[:8]}"
    previous = app.conf.task_default_queue
    use_queue(app, queue)
    with django_db_blocker.unblock():
        db_settings = dict(connection.settings_dict)
    env = _worker_env(db_settings)
    env.update(TWIN_CELERY_QUEUE=queue, TWIN_TELEMETRY_PREFIX=PREFIX,
               TWIN_ALERT_WEBHOOK_URLS=receiver.url)
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / "notify-worker.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "twin", "worker", "-Q",
         f"{queue},{queue}-telemetry", "-P", "solo", "-l", "info", "--without-gossip",
         "--without-mingle", "-n", f"{queue}@%h"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    settings.TELEMETRY_AUTO_DRAIN = True
    settings.TWIN_ALERT_WEBHOOK_URLS = [receiver.url]
    try:
        wait_celery(app, queue, proc, log.name)
        yield queue
    finally:
        stop_process(proc)
        log.close()
        use_queue(app, previous)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_an_xid_alert_reaches_the_webhook_after_it_comes_back(agent, receiver, notify_worker):
    cid, card = agent["cluster"].pk, agent["cards"][3]
    doc = {"seq": 1, "cards": [{"card": card.pk, "xid_errors": 79, "gpu_temp_c": 60}]}
    response = agent["client"].post(batches_url(cid), json.dumps(doc),
                                    content_type="application/json")
    assert response.status_code == 202
    alert = wait_for(lambda: Alert.objects.filter(cluster_id=cid, rule="xid").first(),
                     what="the tick to open the XID alert")
    # The tick queued the delivery; nothing listens yet, so it fails and is retried.
    wait_for(lambda: AlertDelivery.objects.filter(alert=alert, attempts__gte=1).exists(),
             timeout=30, what="a failed first delivery")
    receiver.up()
    wait_for(lambda: receiver.alerts() or None, timeout=60,
             what="the retried delivery (backoff 2, 4, 8 … s)")
    assert receiver.alerts() == [("firing", f"card:{card.pk}")]
    row = wait_for(lambda: AlertDelivery.objects.filter(alert=alert, state="firing",
                                                         sent_at__isnull=False).first(),
                   what="the delivery's record")
    assert row.attempts == 0 and row.last_error == ""


# --- a real Alertmanager ---------------------------------------------------------------

@pytest.fixture
def alertmanager(tmp_path) -> Iterator[str]:
    if ALERTMANAGER is None:
        pytest.skip("the prometheus-alertmanager binary is not installed "
                    "(apt-get install prometheus-alertmanager)")
    config = tmp_path / "alertmanager.yml"
    config.write_text("route:\n  receiver: nowhere\nreceivers:\n  - name: nowhere\n")
    port = free_port()
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / "alertmanager.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [ALERTMANAGER, f"--config.file={config}", f"--storage.path={tmp_path / 'am'}",
         f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
        stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/-/ready", proc)
        yield base
    finally:
        stop_process(proc)
        log.close()


def active_in(alertmanager: str) -> dict[str, dict]:
    with urllib.request.urlopen(f"{alertmanager}/api/v2/alerts?active=true", timeout=5) as r:
        return {a["labels"]["subject"]: a for a in json.loads(r.read())}


@pytest.mark.django_db
def test_a_real_alertmanager_shows_the_alert_firing_then_resolved(agent, alertmanager,
                                                                  settings):
    settings.TWIN_ALERTMANAGER_URLS = [alertmanager]
    alert = open_alert(agent, 2, rule="ecc")
    notify.deliver()
    shown = wait_for(lambda: active_in(alertmanager).get(alert.subject),
                     what="Alertmanager to list the alert")
    assert shown["labels"]["alertname"] == "ecc" and shown["status"]["state"] == "active"
    assert shown["annotations"]["summary"] == alert.message
    sent_at = AlertDelivery.objects.get(alert=alert, state="firing").sent_at
    notify.deliver()  # within TWIN_ALERTS_RESEND_S: not re-sent
    assert AlertDelivery.objects.get(alert=alert, state="firing").sent_at == sent_at
    later = sent_at + dt.timedelta(seconds=settings.TWIN_ALERTS_RESEND_S + 1)
    notify.deliver(now=later)  # refreshed, so Alertmanager does not let it expire
    assert AlertDelivery.objects.get(alert=alert, state="firing").sent_at == later
    Alert.objects.filter(pk=alert.pk).update(ended=dt.datetime.now(dt.UTC))
    notify.deliver()
    wait_for(lambda: alert.subject not in active_in(alertmanager),
             what="Alertmanager to resolve the alert")
