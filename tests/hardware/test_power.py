"""Rack power is an SQL aggregate and the budget is enforced on every write path."""
import pytest
from django.core.exceptions import ValidationError

from twin.hardware.models import Card, Rack, Server


def test_rack_power_is_cards_plus_overheads_plus_devices(tiny_cluster):
    rack = Rack.objects.with_power().get(pk=tiny_cluster["rack"].pk)
    expected = 8 * 700 + 1800 + 60 + 25
    assert rack.power_w == expected
    assert rack.utilization == pytest.approx(expected / 40_000)
    assert rack.facility_w == pytest.approx(expected * 1.05)
    assert rack.draw_w() == expected
    net = Rack.objects.with_power().get(pk=tiny_cluster["net_rack"].pk)
    assert net.power_w == 1500


def test_server_that_overflows_rack_is_refused_on_rack_field(tiny_cluster):
    rack = tiny_cluster["rack"]
    big = Server(rack=rack, supernode=tiny_cluster["supernode"], name="huge",
                 cards_per_server=8, overhead_w=40_000 - rack.draw_w() + 1)
    with pytest.raises(ValidationError) as err:
        big.full_clean()
    assert "rack" in err.value.message_dict
    assert "over its 40,000 W budget" in err.value.message_dict["rack"][0]


def test_card_added_to_full_rack_is_refused(tiny_cluster):
    rack = tiny_cluster["rack"]
    rack.power_budget_w = rack.draw_w()
    rack.save()
    server = tiny_cluster["server"]
    server.cards_per_server = 9
    server.save()
    card = Card(supernode=tiny_cluster["supernode"], server=server,
                accelerator=tiny_cluster["h100"], index=7, slot=8, serial="EXTRA")
    with pytest.raises(ValidationError) as err:
        card.full_clean()
    assert "server" in err.value.message_dict


def test_lowering_budget_below_draw_is_refused(tiny_cluster):
    rack = tiny_cluster["rack"]
    rack.power_budget_w = 1000
    with pytest.raises(ValidationError) as err:
        rack.full_clean()
    assert "power_budget_w" in err.value.message_dict
