"""Telemetry's rack draw is hardware's: live card power + the rack's static draw, the
part of ``twin.hardware.models.racks``' draw that is not the cards' TDP."""
from __future__ import annotations

from django.db.models import Sum

from tests.api.conftest import add_supernodes
from twin.hardware.models import Card, Rack
from twin.telemetry import state


def test_static_draw_of_every_rack_is_its_nameplate_draw_without_the_cards(tiny_cluster):
    add_supernodes(tiny_cluster, 1, 2)
    cid = tiny_cluster["cluster"].pk
    racks = state.layout(cid).groups["rack"]
    nameplate = dict(Rack.objects.filter(cluster_id=cid).with_power()
                     .values_list("pk", "power_w"))
    tdp = dict(Card.objects.filter(server__rack__cluster_id=cid).order_by()
               .values_list("server__rack_id").annotate(w=Sum("accelerator__tdp_w")))
    static = dict(zip(racks.ids.tolist(), racks.static_w.tolist(), strict=True))
    assert static == {pk: float(nameplate[pk] - tdp[pk]) for pk in static}
    assert static[tiny_cluster["rack"].pk] == 1_885.0  # 1,800 W server + 60 W + 25 W
    assert len(static) == 3
