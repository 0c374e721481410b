"""Cursor pagination of cards and links, and query counts that do not grow with a page."""
from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from twin.hardware.models import Card, Link

from .conftest import add_supernodes


def walk(client, url: str, params: dict) -> tuple[list[int], list[str]]:
    """Follow ``next`` links to the end; returns the ids seen and the SQL run."""
    ids: list[int] = []
    sql: list[str] = []
    response = client.get(url, params)
    while True:
        assert response.status_code == 200, response.content
        body = response.json()
        assert "count" not in body
        ids += [row["id"] for row in body["results"]]
        if not body["next"]:
            return ids, sql
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(body["next"])
        sql += [q["sql"] for q in ctx.captured_queries]


def test_cursor_walks_every_card_once(reader_client, wide_cluster):
    ids, sql = walk(reader_client, reverse("api:card-list"), {"limit": 7})
    expected = sorted(c.pk for c in wide_cluster["all_cards"])
    assert len(ids) == len(set(ids)) == 40
    assert ids == expected  # in id order, no duplicates, none missing
    assert not any("COUNT(" in q.upper() for q in sql)


def test_cursor_walk_with_a_cluster_filter(reader_client, wide_cluster):
    url = reverse("api:card-list")
    ids, _ = walk(reader_client, url, {"limit": 6, "cluster": wide_cluster["cluster"].pk,
                                       "status": "ok"})
    assert ids == sorted(c.pk for c in wide_cluster["all_cards"])


def test_cursor_is_stable_while_rows_change(reader_client, wide_cluster):
    """Rows deleted behind the cursor or added after it neither shift nor repeat a page
    (a page-number list would skip rows here)."""
    url = reverse("api:card-list")
    first = reader_client.get(url, {"limit": 10}).json()
    Card.objects.filter(pk__in=[r["id"] for r in first["results"][:3]]).delete()
    added = add_supernodes(wide_cluster, 5, 1)
    rest, _ = walk(reader_client, first["next"], {})
    seen = [r["id"] for r in first["results"]] + rest
    assert len(seen) == len(set(seen)) == 48
    assert seen[-8:] == [c.pk for c in added]


def test_cursor_walks_links(reader_client, tiny_cluster):
    ids, _ = walk(reader_client, reverse("api:link-list"), {"limit": 1})
    assert ids == sorted(link.pk for link in Link.objects.all())


def test_page_size_is_capped(reader_client, wide_cluster):
    body = reader_client.get(reverse("api:card-list"), {"limit": 10**9}).json()
    assert len(body["results"]) == 40  # the cap (1,000) is above 40: all, in one page


def test_cards_page_query_count(admin_client_api, wide_cluster,
                                django_assert_max_num_queries):
    """One query for the token, one for the page: no COUNT, no N+1 over 5
    supernodes and servers (``select_related``)."""
    with django_assert_max_num_queries(2):
        response = admin_client_api.get(reverse("api:card-list"), {"limit": 100})
    assert len(response.json()["results"]) == 40


def test_links_page_query_count(admin_client_api, tiny_cluster,
                                django_assert_max_num_queries):
    with django_assert_max_num_queries(2):
        response = admin_client_api.get(reverse("api:link-list"))
    assert len(response.json()["results"]) == 4


def test_card_filter_by_cluster_sql_is_index_friendly(reader_client, wide_cluster):
    """``?cluster=`` is a join on the supernode key, ordered by the card key with a
    LIMIT — no COUNT, no subquery per row. On PostgreSQL with 1,048,576 cards this
    plans as a walk of the card primary key with a memoized supernode lookup
    (0.5 ms); see ``CardViewSet``."""
    with CaptureQueriesContext(connection) as ctx:
        reader_client.get(reverse("api:card-list"),
                          {"cluster": wide_cluster["cluster"].pk, "limit": 100})
    (page,) = [q["sql"] for q in ctx.captured_queries if "hardware_card" in q["sql"]]
    upper = page.upper()
    assert "COUNT(" not in upper
    assert '"HARDWARE_SUPERNODE"."CLUSTER_ID" = ' in upper
    assert upper.count("SELECT") == 1
    assert 'ORDER BY "HARDWARE_CARD"."ID" ASC LIMIT 101' in upper


def test_page_number_lists_for_the_rest(reader_client, wide_cluster):
    body = reader_client.get(reverse("api:rack-list"), {"limit": 2}).json()
    assert body["count"] == 6 and len(body["results"]) == 2 and body["next"]
