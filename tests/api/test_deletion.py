"""The deletion rule on every hardware endpoint (issue 11, item 4).

A DELETE of anything that holds other rows is a 409 naming what is inside, with
counts per kind, and deletes nothing; ``?cascade=true`` (plus ``?confirm=<name>``
for a cluster, which may be live) deletes it with everything inside. An
accelerator type in use is never deleted with its cards.
"""
from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from twin.hardware.models import (
    AcceleratorType,
    Card,
    Cluster,
    Link,
    NetworkDevice,
    Rack,
    Server,
    SuperNode,
)
from twin.telemetry.models import TelemetryAgent

World = dict[str, Any]


def url(basename: str, pk: int) -> str:
    return reverse(f"api:{basename}-detail", args=[pk])


def counts() -> dict[str, int]:
    return {model.__name__: model.objects.count()
            for model in (Cluster, SuperNode, Rack, Server, Card, NetworkDevice, Link)}


def refused(response: Any, contains: dict[str, int]) -> dict[str, Any]:
    assert response.status_code == 409, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["contains"] == contains
    return body


def test_supernode_with_a_server_and_cards_is_409_and_deletes_nothing(
        admin_client_api, tiny_cluster: World) -> None:
    before = counts()
    body = refused(admin_client_api.delete(url("supernode", tiny_cluster["supernode"].pk)),
                   {"servers": 1, "cards": 8, "network_devices": 2, "links": 4})
    assert "(servers: 1, cards: 8, network devices: 2, links: 4)" in body["detail"]
    assert body["retry_with"] == {"cascade": "true"}
    assert counts() == before


def test_supernode_cascade_deletes_its_servers_cards_and_links(
        admin_client_api, tiny_cluster: World) -> None:
    response = admin_client_api.delete(url("supernode", tiny_cluster["supernode"].pk),
                                       QUERY_STRING="cascade=true")
    assert response.status_code == 204, response.content
    assert not SuperNode.objects.exists()
    assert not Server.objects.exists() and not Card.objects.exists()
    # Its racks stay (without a supernode); the leaf and its link do not belong to it.
    assert Rack.objects.get(pk=tiny_cluster["rack"].pk).supernode_id is None
    assert list(NetworkDevice.objects.values_list("name", flat=True)) == ["leaf0"]
    assert Link.objects.count() == 0


def test_rack_with_servers_names_what_is_inside(admin_client_api, tiny_cluster: World) -> None:
    before = counts()
    refused(admin_client_api.delete(url("rack", tiny_cluster["rack"].pk)),
            {"servers": 1, "cards": 8, "network_devices": 2, "links": 4})
    assert counts() == before
    response = admin_client_api.delete(url("rack", tiny_cluster["rack"].pk),
                                       QUERY_STRING="cascade=true")
    assert response.status_code == 204, response.content
    assert not Rack.objects.filter(pk=tiny_cluster["rack"].pk).exists()
    assert not Card.objects.exists() and not Server.objects.exists()
    assert Rack.objects.filter(pk=tiny_cluster["net_rack"].pk).exists()
    assert SuperNode.objects.filter(pk=tiny_cluster["supernode"].pk).exists()


def test_server_with_cards_is_409_then_cascades(admin_client_api, tiny_cluster: World) -> None:
    server = tiny_cluster["server"]
    refused(admin_client_api.delete(url("server", server.pk)),
            {"cards": 8, "network_devices": 2, "links": 4})
    assert Card.objects.count() == 8
    response = admin_client_api.delete(url("server", server.pk), QUERY_STRING="cascade=true")
    assert response.status_code == 204, response.content
    assert not Card.objects.exists()
    assert Link.objects.count() == 0


def test_device_and_card_with_links(admin_client_api, tiny_cluster: World) -> None:
    nic, card = tiny_cluster["nic"], tiny_cluster["cards"][0]
    refused(admin_client_api.delete(url("networkdevice", nic.pk)), {"links": 2})
    refused(admin_client_api.delete(url("card", card.pk)), {"links": 2})
    assert Link.objects.count() == 4
    assert admin_client_api.delete(url("networkdevice", nic.pk),
                                   QUERY_STRING="cascade=true").status_code == 204
    assert Link.objects.count() == 2
    assert admin_client_api.delete(url("card", card.pk),
                                   QUERY_STRING="cascade=true").status_code == 204
    assert Link.objects.count() == 0
    # A card without links needs nothing.
    assert admin_client_api.delete(url("card", tiny_cluster["cards"][5].pk)).status_code == 204


def test_accelerator_type_in_use_is_never_cascaded(admin_client_api,
                                                   tiny_cluster: World) -> None:
    h100 = tiny_cluster["h100"]
    for query in ("", "cascade=true"):
        body = refused(admin_client_api.delete(url("acceleratortype", h100.pk),
                                               QUERY_STRING=query), {"cards": 8})
        assert "TINY-0000" in body["detail"]
        assert "retry_with" not in body
    assert AcceleratorType.objects.filter(pk=h100.pk).exists()
    assert Card.objects.count() == 8


def test_cluster_needs_cascade_and_its_name(admin_client_api, tiny_cluster: World) -> None:
    cluster = tiny_cluster["cluster"]
    TelemetryAgent.issue(cluster, "dcgm")
    before = counts()
    body = refused(admin_client_api.delete(url("cluster", cluster.pk)),
                   {"supernodes": 1, "racks": 2, "servers": 1, "cards": 8,
                    "network_devices": 3, "links": 4, "telemetry_agents": 1})
    assert body["retry_with"] == {"cascade": "true", "confirm": "tiny"}
    for query in ("cascade=true", "cascade=true&confirm=other", "confirm=tiny"):
        response = admin_client_api.delete(url("cluster", cluster.pk), QUERY_STRING=query)
        if query == "confirm=tiny":
            refused(response, body["contains"])
        else:  # what is stored decides (its name, what it holds): a conflict, not bad input
            assert response.status_code == 409, (query, response.content)
            assert "confirm=tiny" in response.json()["confirm"][0]
    assert counts() == before and TelemetryAgent.objects.count() == 1
    response = admin_client_api.delete(url("cluster", cluster.pk),
                                       QUERY_STRING="cascade=true&confirm=tiny")
    assert response.status_code == 204, response.content
    assert set(counts().values()) == {0}
    assert not TelemetryAgent.objects.exists()


def test_empty_objects_are_deleted_without_ceremony(admin_client_api, db) -> None:
    cluster = Cluster.objects.create(name="empty")
    assert admin_client_api.delete(url("cluster", cluster.pk)).status_code == 204
    assert not Cluster.objects.exists()


@pytest.mark.parametrize("value", ["maybe", "2"])
def test_a_bad_cascade_value_is_400(admin_client_api, tiny_cluster: World, value: str) -> None:
    response = admin_client_api.delete(url("server", tiny_cluster["server"].pk),
                                       QUERY_STRING=f"cascade={value}")
    assert response.status_code == 400
    assert "cascade" in response.json()
    assert Card.objects.count() == 8


def test_cascade_still_needs_the_delete_permission(reader_client, tiny_cluster: World) -> None:
    response = reader_client.delete(url("server", tiny_cluster["server"].pk),
                                    QUERY_STRING="cascade=true")
    assert response.status_code == 403
    assert Card.objects.count() == 8
