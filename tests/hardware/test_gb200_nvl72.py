"""The gb200-nvl72 preset: racks of 72 GPUs in one NVLink domain under a 132 kW budget.

The plan is checked without the database (counts, rack packing, the budget rule and
its refusal of a rack that cannot be split); a two-rack build is checked row by row
(cards per rack and per supernode, every GPU linked to the other 71, rack power
within the declared budget, liquid cooling); the API lists the preset with what the
facility model reads (budget, cooling, liquid share).
"""
from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.db.models import Count, F, Q
from django.urls import reverse

from twin.hardware.builder import build_cluster
from twin.hardware.builder.plan import BuildError, plan_build
from twin.hardware.choices import CoolingChoices, LinkKindChoices
from twin.hardware.models import AcceleratorType, Card, Cluster, Link, Rack, Server
from twin.hardware.presets import DEMO, GB200_NVL72, PRESETS


def test_the_plan_puts_one_nvl72_domain_in_each_rack_within_its_budget() -> None:
    plan = GB200_NVL72.plan(supernodes=4)
    sn = GB200_NVL72.supernode
    assert (sn.cards, sn.cards_per_server, sn.servers) == (72, 4, 18)
    assert plan.racks_per_supernode == 1 and plan.compute.per_rack == 18
    summary = plan.summary()
    assert summary["cards_per_rack"] == 72 == summary["nvlink_domain_cards"]
    assert summary["rack_budget_w"] == GB200_NVL72.rack_budget_w == 132_000
    # a compute tray: 4 GPUs at the catalogue's 1,200 W, 4 × 25 W NICs, 1,750 W besides
    assert plan.server_w == 4 * 1_200 + 4 * 25 + 1_750
    # 18 trays: NVIDIA's ~120 kW per rack, inside the 120–132 kW the rack class allows
    assert 120_000 * 0.99 <= plan.compute.fullest_rack_w <= 132_000
    assert plan.max_rack_w <= plan.rack_budget_w
    assert (summary["cooling"], summary["liquid_share"]) == (CoolingChoices.LIQUID, 0.85)
    # the seed's racks, for comparison: 40 kW holds five 8-GPU servers
    assert DEMO.plan().summary()["cards_per_rack"] == 40 and DEMO.rack_budget_w == 40_000
    # NVLink scale-up: a link between every two GPUs of the rack
    assert sn.scale_up_links == 72 * 71 // 2


def test_an_nvl72_rack_is_not_split_over_smaller_budgets() -> None:
    with pytest.raises(BuildError) as refused:
        plan_build("gb200-nvl72", supernodes=1, rack_budget_w=40_000)
    assert refused.value.field == "rack_budget_w"
    assert "cannot be split" in refused.value.message
    assert "at least 119,700 W" in refused.value.message
    # the budget it declares, and anything above one rack's draw, plans
    assert plan_build("gb200-nvl72", supernodes=1, rack_budget_w=119_700).racks_per_supernode == 1


@pytest.mark.django_db
def test_a_two_rack_build_holds_72_cards_per_rack_and_domain_within_budget() -> None:
    result = build_cluster("gb200-nvl72", name="nvl72-test", supernodes=2)
    cluster = Cluster.objects.get(pk=result["cluster_id"])
    gb200 = AcceleratorType.objects.get(slug="gb200-186gb")
    cards = Card.objects.filter(supernode__cluster=cluster)
    assert cards.count() == 144 and set(cards.values_list("accelerator", flat=True)) == {gb200.pk}
    per_rack = (Server.objects.filter(supernode__cluster=cluster).values("rack")
                .annotate(servers=Count("id", distinct=True), cards=Count("cards")))
    assert sorted((r["servers"], r["cards"]) for r in per_rack) == [(18, 72), (18, 72)]
    per_sn = cards.values("supernode").annotate(n=Count("id"))
    assert [r["n"] for r in per_sn] == [72, 72]
    # every GPU has an NVLink to each of the 71 others of its rack, none outside it
    scale_up = Link.objects.filter(cluster=cluster, kind=LinkKindChoices.SCALE_UP)
    assert scale_up.count() == 2 * 72 * 71 // 2
    assert not scale_up.exclude(a_card__supernode=F("b_card__supernode")).exists()
    first = cards.order_by("supernode__index", "index").first()
    assert scale_up.filter(Q(a_card=first) | Q(b_card=first)).count() == 71
    # racks: the budget the preset declares, liquid cooled, every one inside it
    compute = Rack.objects.with_power().filter(cluster=cluster, supernode__isnull=False)
    assert compute.count() == 2
    for rack in compute:
        assert rack.power_budget_w == 132_000 and rack.cooling == CoolingChoices.LIQUID
        assert 118_000 <= rack.power_w <= rack.power_budget_w
    for rack in Rack.objects.with_power().filter(cluster=cluster):
        assert rack.power_w <= rack.power_budget_w


@pytest.mark.django_db
def test_the_api_and_the_command_list_the_preset(reader_client) -> None:
    response = reader_client.get(reverse("api:preset-list"))
    assert response.status_code == 200
    (row,) = [p for p in response.json() if p["name"] == "gb200-nvl72"]
    assert row["defaults"]["rack_budget_w"] == 132_000
    plan = row["plan"]
    assert (plan["cards_per_rack"], plan["nvlink_domain_cards"]) == (72, 72)
    assert (plan["cooling"], plan["liquid_share"], plan["pue"]) == ("liquid", 0.85, 1.05)
    assert plan["max_rack_w"] <= plan["rack_budget_w"]
    out = StringIO()
    call_command("build_cluster", "--list", stdout=out)
    (line,) = [x for x in out.getvalue().splitlines() if x.startswith("gb200-nvl72")]
    assert "72 per supernode, 1 racks per supernode" in line
    assert "gb200-nvl72" in PRESETS


@pytest.mark.django_db
def test_a_build_request_below_one_rack_is_refused_on_its_field(admin_client_api) -> None:
    response = admin_client_api.post(reverse("api:clusterbuild-list"),
                                     {"preset": "gb200-nvl72", "supernodes": 1,
                                      "rack_budget_w": 40_000}, format="json")
    assert response.status_code == 400
    assert "cannot be split" in str(response.json()["rack_budget_w"])
    assert not Cluster.objects.exists()
