"""``GET /api/telemetry/alerts/groups/``: a rack of cards with the same alert is one
group with a count, not one line per card (``twin.telemetry.grouping``)."""
from __future__ import annotations

import datetime as dt

import pytest

from twin.hardware.models import Rack
from twin.telemetry.models import Alert

pytestmark = pytest.mark.django_db

URL = "/api/telemetry/alerts/groups/"


def alert(world, card, rule="util_drop", severity="warning", minutes=0, ended=False):
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=minutes)
    return Alert.objects.create(
        cluster=world["cluster"], rule=rule, severity=severity, level="card",
        subject=f"card:{card.pk}", card=card, rack=card.server.rack,
        supernode=card.supernode, message=f"card {card.pk}: utilization fell to 3 %",
        started=now, ended=now if ended else None)


def test_a_rack_of_cards_dropping_utilisation_is_one_group(tiny_cluster, admin_client_api):
    world = tiny_cluster
    for k, card in enumerate(world["cards"]):
        alert(world, card, minutes=k)
    alert(world, world["cards"][0], rule="xid", severity="critical")
    alert(world, world["cards"][1], ended=True)  # closed: left out by ?active=true
    Alert.objects.create(cluster=world["cluster"], rule="cluster_silent", severity="critical",
                         level="cluster", subject=f"cluster:{world['cluster'].pk}",
                         message="silent", started=dt.datetime.now(dt.UTC))
    response = admin_client_api.get(URL, {"cluster": world["cluster"].pk, "active": "true"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["count"] == 3
    groups = body["results"]
    # Critical first, larger groups first, ties by rule; then the warnings.
    assert [(g["rule"], g["scope"], g["count"]) for g in groups] == [
        ("cluster_silent", "cluster", 1), ("xid", "rack", 1), ("util_drop", "rack", 8)]
    drop = groups[2]
    assert drop["rack"] == world["rack"].pk and drop["rack_name"] == "r0"
    assert drop["cards"] == 8 and drop["oldest"] < drop["newest"]
    newest = Alert.objects.filter(rule="util_drop", ended__isnull=True).order_by("-id").first()
    assert drop["latest_alert"] == newest.pk and drop["message"] == newest.message


def test_by_supernode_and_other_racks_apart(tiny_cluster, admin_client_api):
    world = tiny_cluster
    other = Rack.objects.create(cluster=world["cluster"], supernode=world["supernode"],
                                name="r1", row=0, slot=1)
    for card in world["cards"][:3]:
        alert(world, card)
    moved = alert(world, world["cards"][3])
    Alert.objects.filter(pk=moved.pk).update(rack=other)
    by_rack = admin_client_api.get(URL, {"active": "true"}).json()["results"]
    assert sorted((g["rack_name"], g["count"]) for g in by_rack) == [("r0", 3), ("r1", 1)]
    by_sn = admin_client_api.get(URL, {"active": "true", "by": "supernode"}).json()["results"]
    assert [(g["scope"], g["supernode_name"], g["count"]) for g in by_sn] == [
        ("supernode", "sn0", 4)]


def test_bad_grouping_is_400_on_its_field_and_reads_need_a_login(tiny_cluster,
                                                                  admin_client_api,
                                                                  anon_client):
    response = admin_client_api.get(URL, {"by": "card"})
    assert response.status_code == 400 and "by" in response.json()
    assert anon_client.get(URL).status_code == 401
