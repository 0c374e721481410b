"""Concurrent writes cannot squeeze a rack over its budget together.

Each check reads the rack's draw and then inserts; without a lock, writers
that start together all see the same headroom and all insert. The API locks
the rack row (``SELECT … FOR UPDATE`` on PostgreSQL; SQLite's ``BEGIN
IMMEDIATE`` serialises writers) before validating, so exactly one wins.
"""
from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.urls import reverse
from rest_framework.test import APIClient

from twin.hardware.models import Card, Rack, Server, SuperNode

WRITERS = 4


def _race(user, bodies: list[dict], url: str) -> list[int]:
    barrier = threading.Barrier(len(bodies))
    codes: list[int] = [0] * len(bodies)

    def write(i: int) -> None:
        client = APIClient()
        client.force_authenticate(user)
        try:
            barrier.wait(timeout=10)
            codes[i] = client.post(url, bodies[i], format="json").status_code
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return codes


@pytest.mark.django_db(transaction=True)
def test_concurrent_cards_cannot_overfill_a_rack(tiny_cluster, admin_user):
    sn = SuperNode.objects.create(cluster=tiny_cluster["cluster"], name="sn1", index=1,
                                  fabric="torus3d", card_count=8, dim_x=2, dim_y=2, dim_z=2,
                                  link_gbps=400, link_latency_ns=150)
    server = Server.objects.create(rack=tiny_cluster["rack"], supernode=sn, name="sn1-s0",
                                   position=1)
    rack = tiny_cluster["rack"]
    draw = rack.draw_w()
    Rack.objects.filter(pk=rack.pk).update(power_budget_w=draw + 700 + 699)  # room for one
    bodies = [{"supernode": sn.pk, "server": server.pk, "accelerator": tiny_cluster["h100"].pk,
               "index": i, "slot": i, "serial": f"RACE-{i}"} for i in range(WRITERS)]
    codes = _race(admin_user, bodies, reverse("api:card-list"))
    assert sorted(codes) == [201] + [409] * (WRITERS - 1), codes
    assert Card.objects.filter(server=server).count() == 1
    assert Rack.objects.with_power().get(pk=rack.pk).power_w == draw + 700


@pytest.mark.django_db(transaction=True)
def test_concurrent_servers_cannot_overfill_a_rack(tiny_cluster, admin_user):
    rack = tiny_cluster["net_rack"]
    draw = rack.draw_w()
    Rack.objects.filter(pk=rack.pk).update(power_budget_w=draw + 1800 + 1000)  # room for one
    bodies = [{"rack": rack.pk, "name": f"race-{i}", "position": i, "overhead_w": 1800}
              for i in range(WRITERS)]
    codes = _race(admin_user, bodies, reverse("api:server-list"))
    assert sorted(codes) == [201] + [409] * (WRITERS - 1), codes
    assert Rack.objects.with_power().get(pk=rack.pk).power_w == draw + 1800
