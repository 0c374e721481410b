"""Fixtures of the API tests: a wider cluster for pagination and query counts."""
from __future__ import annotations

import uuid

import pytest
from rest_framework.test import APIClient


def add_supernodes(world: dict, first: int, count: int) -> list:
    """Add ``count`` 8-card supernodes to the tiny cluster, each with its own rack
    and server (cards written with ``bulk_create``); returns the new cards."""
    from twin.hardware.models import Card, Rack, Server, SuperNode

    cluster, h100 = world["cluster"], world["h100"]
    cards = []
    for n in range(first, first + count):
        sn = SuperNode.objects.create(cluster=cluster, name=f"sn{n}", index=n, fabric="torus3d",
                                      card_count=8, dim_x=2, dim_y=2, dim_z=2, link_gbps=400,
                                      link_latency_ns=150)
        rack = Rack.objects.create(cluster=cluster, supernode=sn, name=f"r{n}", row=0, slot=n)
        server = Server.objects.create(rack=rack, supernode=sn, name=f"sn{n}-s0",
                                       hostname=f"node{n}")
        cards += Card.objects.bulk_create(
            Card(supernode=sn, server=server, accelerator=h100, index=i, slot=i, x=i % 2,
                 y=(i // 2) % 2, z=i // 4, serial=f"WIDE-{n}-{i}", uuid=uuid.uuid4())
            for i in range(8)
        )
    return cards


@pytest.fixture
def wide_cluster(db, tiny_cluster):
    """Four more supernodes: 40 cards across 5 supernodes, 5 servers and 5 racks,
    so an N+1 query per supernode or server would show in a query count."""
    return {**tiny_cluster,
            "all_cards": list(tiny_cluster["cards"]) + add_supernodes(tiny_cluster, 1, 4)}


@pytest.fixture
def staff_client(staff_user) -> APIClient:
    """Session-authenticated (``force_login``) staff with every hardware permission."""
    client = APIClient()
    client.force_login(staff_user)
    return client
