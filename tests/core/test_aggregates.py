"""The cached aggregates (twin.core.aggregates): served from Redis, and never stale
after a committed write, whatever path wrote (API, ``QuerySet.update()``, another
process)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from twin.core import aggregates
from twin.hardware.choices import CardStatusChoices
from twin.hardware.models import Card
from twin.telemetry.models import Alert


def summary(client, cluster) -> tuple[dict, list[str]]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(reverse("api:cluster-summary", args=[cluster.pk]))
    assert response.status_code == 200, response.content
    return response.json(), [q["sql"] for q in queries.captured_queries]


def card_queries(sqls: list[str]) -> list[str]:
    table = Card._meta.db_table
    return [sql for sql in sqls if table in sql]


@pytest.mark.parametrize("sql, domains", [
    ('INSERT INTO "hardware_card" ("serial") VALUES (%s)', {"inventory"}),
    ('UPDATE "hardware_rack" SET "pue" = 1.2 WHERE id IN (SELECT 1 FROM "telemetry_alert")',
     {"inventory"}),
    ('DELETE FROM "telemetry_alert" WHERE "card_id" IN (SELECT id FROM "hardware_card")',
     {"alerts"}),
    ("update hardware_link set status = 'down'", {"inventory"}),
    ('SELECT * FROM "hardware_card" FOR UPDATE', set()),
    ('TRUNCATE "hardware_card", "telemetry_alert"', {"inventory", "alerts"}),
    ('WITH x AS (SELECT 1) UPDATE "hardware_card" SET status = %s', {"inventory"}),
    ('INSERT INTO "telemetry_cardhealth" ("card_id") VALUES (%s)', set()),
])
def test_which_domains_a_statement_writes(db, sql, domains):
    assert aggregates.domains_written(sql) == domains


def test_summary_is_served_from_the_cache(reader_client, tiny_cluster):
    first, sqls = summary(reader_client, tiny_cluster["cluster"])
    assert card_queries(sqls), "the first read computes the summary"
    second, sqls = summary(reader_client, tiny_cluster["cluster"])
    assert second == first
    assert card_queries(sqls) == [], "the second read must not aggregate the cards again"


def test_an_api_write_invalidates_the_summary(reader_client, admin_client_api, tiny_cluster):
    cluster, card = tiny_cluster["cluster"], tiny_cluster["cards"][0]
    before, _ = summary(reader_client, cluster)
    assert before["counts"]["cards_by_status"]["failed"] == 0
    response = admin_client_api.patch(reverse("api:card-detail", args=[card.pk]),
                                      {"status": "failed"}, format="json")
    assert response.status_code == 200, response.content
    after, sqls = summary(reader_client, cluster)
    assert card_queries(sqls), "a write must make the next read recompute"
    assert after["counts"]["cards_by_status"]["failed"] == 1


def test_a_bulk_update_invalidates_the_summary(reader_client, tiny_cluster):
    """``QuerySet.update()`` sends no signal (self-healing marks cards failed this way)."""
    cluster = tiny_cluster["cluster"]
    summary(reader_client, cluster)
    Card.objects.filter(supernode__cluster=cluster).update(
        status=CardStatusChoices.MAINTENANCE)
    after, _ = summary(reader_client, cluster)
    assert after["counts"]["cards_by_status"]["maintenance"] == 8


@pytest.mark.django_db(transaction=True)
def test_commit_bumps_and_rollback_does_not(tiny_cluster):
    """A committed write replaces the version after its commit; a rolled-back
    one leaves nothing to bump on commit."""
    card = tiny_cluster["cards"][0]
    with transaction.atomic():
        Card.objects.filter(pk=card.pk).update(status=CardStatusChoices.DEGRADED)
        inside = aggregates.version("inventory")
    assert aggregates.version("inventory") != inside, "the commit must bump again"

    settled = aggregates.version("inventory")
    with pytest.raises(RuntimeError), transaction.atomic():
        with transaction.atomic():
            Card.objects.filter(pk=card.pk).update(status=CardStatusChoices.OK)
        during = aggregates.version("inventory")
        raise RuntimeError("roll back")
    assert during != settled  # the statement itself bumped …
    assert aggregates.version("inventory") == during  # … the rollback queued nothing


@pytest.mark.django_db(transaction=True)
def test_a_write_in_another_process_invalidates_the_summary(reader_client, tiny_cluster):
    """A Celery worker or a management command writes in a process of its own."""
    cluster = tiny_cluster["cluster"]
    before, _ = summary(reader_client, cluster)
    assert before["counts"]["cards_by_status"]["failed"] == 0
    db = settings.DATABASES["default"]
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "twin.settings_test"}
    if db["ENGINE"].endswith("sqlite3"):
        env["TWIN_SQLITE_PATH"] = str(db["NAME"])
    else:
        env["DATABASE_URL"] = (f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:"
                               f"{db['PORT'] or 5432}/{db['NAME']}")
    code = ("import django; django.setup(); from twin.hardware.models import Card; "
            f"Card.objects.filter(supernode__cluster_id={cluster.pk}).update(status='failed')")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)
    after, _ = summary(reader_client, cluster)
    assert after["counts"]["cards_by_status"]["failed"] == 8


def test_open_alert_counts_follow_alert_writes(reader_client, tiny_cluster):
    cluster, card = tiny_cluster["cluster"], tiny_cluster["cards"][0]
    url = reverse("telemetry:cluster", args=[cluster.pk])
    assert reader_client.get(url).json()["open_alerts"]["critical"] == 0
    Alert.objects.create(cluster=cluster, card=card, rule=Alert._meta.get_field("rule")
                         .choices[0][0], severity="critical", level="card",
                         subject=f"card:{card.pk}", message="hot", started=timezone.now())
    assert reader_client.get(url).json()["open_alerts"]["critical"] == 1


def test_redis_away_computes_from_the_database(reader_client, tiny_cluster, settings):
    """Correctness first: no cache, same answer."""
    expected, _ = summary(reader_client, tiny_cluster["cluster"])
    settings.CACHES = {**settings.CACHES, "aggregates": {
        **settings.CACHES["aggregates"], "LOCATION": "redis://127.0.0.1:9/0"}}
    got, sqls = summary(reader_client, tiny_cluster["cluster"])
    assert got == expected
    assert card_queries(sqls)


def test_a_card_page_is_cached_and_a_write_invalidates_it(reader_client, admin_client_api,
                                                           tiny_cluster):
    cluster, card = tiny_cluster["cluster"], tiny_cluster["cards"][0]
    url = reverse("api:card-list") + f"?cluster={cluster.pk}&limit=100"

    def statuses() -> tuple[dict[int, str], list[str]]:
        with CaptureQueriesContext(connection) as queries:
            response = reader_client.get(url)
        assert response.status_code == 200, response.content
        return ({row["id"]: row["status"] for row in response.json()["results"]},
                card_queries([q["sql"] for q in queries.captured_queries]))

    first, sqls = statuses()
    assert sqls and first[card.pk] == "ok"
    again, sqls = statuses()
    assert again == first and sqls == [], "the second read of the page comes from the cache"
    response = admin_client_api.patch(reverse("api:card-detail", args=[card.pk]),
                                      {"status": "degraded"}, format="json")
    assert response.status_code == 200, response.content
    after, sqls = statuses()
    assert sqls and after[card.pk] == "degraded"


def test_a_cached_page_is_never_served_to_another_user(reader_client, admin_client_api,
                                                       tiny_cluster):
    """The key holds the user: a page computed for one user is not another's."""
    url = reverse("api:card-list") + f"?cluster={tiny_cluster['cluster'].pk}&limit=3"
    reader_client.get(url)
    with CaptureQueriesContext(connection) as queries:
        response = admin_client_api.get(url)
    assert response.status_code == 200
    assert card_queries([q["sql"] for q in queries.captured_queries])


def test_the_alert_list_follows_alert_writes(reader_client, tiny_cluster):
    cluster, card = tiny_cluster["cluster"], tiny_cluster["cards"][0]
    url = reverse("telemetry:alert-list") + f"?cluster={cluster.pk}&active=true"
    assert reader_client.get(url).json()["count"] == 0
    alert = Alert.objects.create(
        cluster=cluster, card=card, rule=Alert._meta.get_field("rule").choices[0][0],
        severity="warning", level="card", subject=f"card:{card.pk}", message="warm",
        started=timezone.now())
    assert reader_client.get(url).json()["count"] == 1
    Alert.objects.filter(pk=alert.pk).update(ended=timezone.now())
    assert reader_client.get(url).json()["count"] == 0
