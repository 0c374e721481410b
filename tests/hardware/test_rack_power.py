"""One rack-power rule on every write path (``twin.hardware.models.racks``).

A rack's draw is defined once and computed by ``Rack.objects.draw_by_rack()``
(one grouped pass) or ``with_power()`` (per rack); every figure shown agrees.
Every write that adds draw — a card, a server's overhead or move, a device, and
raising an accelerator type's TDP, which adds to every rack holding its cards —
is refused when it takes a rack over its budget, naming the racks, or saved on
an explicit ``allow_over_budget`` that lists them; API and admin alike, with the
racks locked while the check runs.
"""
from __future__ import annotations

from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from twin.hardware.models import (
    AcceleratorType,
    Card,
    Cluster,
    NetworkDevice,
    Rack,
    Server,
    SuperNode,
)
from twin.hardware.models.budget import OverBudget, Overload

from .test_admin import form_data, url

postgres_only = pytest.mark.skipif(connection.vendor != "postgresql",
                                   reason="SELECT … FOR UPDATE is a no-op on SQLite")

HOT_W = 37_000  # r-hot: 4 servers × (3,650 W + 8 cards × 700 W)
RAISED_TDP = 1_075  # 32 cards × 375 W more: r-hot to 49,000 W
R0_W = 7_485  # the tiny cluster's r0 (see tests/api/test_summary.py)


def api(name: str, pk: int | None = None) -> str:
    return reverse(f"api:{name}-detail", args=[pk]) if pk else reverse(f"api:{name}-list")


def draw(rack: Rack) -> int:
    return Rack.objects.with_power().get(pk=rack.pk).power_w


def fill(rack: Rack, servers: int, cards: int, accelerator: AcceleratorType,
         supernode: SuperNode, overhead_w: int) -> None:
    """``servers`` servers of ``cards`` cards each into ``rack``."""
    first = Card.objects.filter(supernode=supernode).count()
    for s in range(servers):
        server = Server.objects.create(rack=rack, supernode=supernode, name=f"{rack.name}-s{s}",
                                       position=s, overhead_w=overhead_w)
        for i in range(cards):
            n = first + s * cards + i
            Card.objects.create(supernode=supernode, server=server, accelerator=accelerator,
                                index=n, slot=i, serial=f"P-{rack.name}-{s}-{i}")


@pytest.fixture
def hot(tiny_cluster: dict[str, Any]) -> dict[str, Any]:
    """A 700 W accelerator type of its own, in three racks of the tiny cluster:
    r-hot at 37 kW of 40 kW (32 cards), r-warm at 9,250 W (8 cards), and r-over,
    already over its 1 kW budget with none of them."""
    cluster = tiny_cluster["cluster"]
    h100 = tiny_cluster["h100"]
    acc = AcceleratorType.objects.create(
        slug="test-700", name="Test 700", vendor="Acme", bf16_tflops=h100.bf16_tflops,
        hbm_gib=h100.hbm_gib, hbm_tbps=h100.hbm_tbps, tdp_w=700, idle_w=100,
        scaleup_links=h100.scaleup_links, scaleup_gbps=h100.scaleup_gbps,
        source="https://example.com/test-700")
    sn = SuperNode.objects.create(cluster=cluster, name="sn-p", index=1, fabric="full_mesh",
                                  card_count=64, dim_x=1, dim_y=1, dim_z=1, link_gbps=400,
                                  link_latency_ns=150)
    racks = {name: Rack.objects.create(cluster=cluster, supernode=sn, name=name, row=5,
                                       slot=slot)
             for slot, name in enumerate(("r-hot", "r-warm", "r-over"))}
    fill(racks["r-hot"], 4, 8, acc, sn, overhead_w=3_650)
    fill(racks["r-warm"], 1, 8, acc, sn, overhead_w=3_650)
    Server.objects.create(rack=racks["r-over"], name="r-over-s0", overhead_w=1_800)
    Rack.objects.filter(pk=racks["r-over"].pk).update(power_budget_w=1_000)
    assert draw(racks["r-hot"]) == HOT_W
    return {**tiny_cluster, "acc": acc, "sn_p": sn, **racks}


@pytest.fixture
def browser(admin_user, tiny_cluster: dict[str, Any]) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


def notes(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


# --- one figure -------------------------------------------------------------------------------
@pytest.fixture
def seed(db) -> Cluster:
    """The builder's seed-512 preset with two supernodes (1,024 cards, 28 racks)."""
    from twin.hardware.builder import build_cluster

    return Cluster.objects.get(pk=build_cluster("seed-512", name="power-seed",
                                                supernodes=2)["cluster_id"])


def test_one_draw_figure_everywhere_on_a_built_preset(seed: Cluster, reader_client) -> None:
    """draw_by_rack() equals the definition summed row by row, and every figure
    shown — the rack list (with_power), the floor, the rack geometry and the
    cluster summary — is that figure."""
    racks = Rack.objects.filter(cluster=seed)
    rows = {row.rack_id: row for row in racks.draw_by_rack().rows()}

    # The definition, one row at a time.
    by_hand: dict[int, int] = dict.fromkeys(racks.values_list("pk", flat=True), 0)
    cards_w: dict[int, int] = dict.fromkeys(by_hand, 0)
    for rack_id, tdp in Card.objects.filter(server__rack__cluster=seed).values_list(
            "server__rack_id", "accelerator__tdp_w"):
        by_hand[rack_id] += tdp
        cards_w[rack_id] += tdp
    for rack_id, w in Server.objects.filter(rack__cluster=seed).values_list("rack_id",
                                                                          "overhead_w"):
        by_hand[rack_id] += w
    for rack_id, w in NetworkDevice.objects.filter(rack__cluster=seed).values_list("rack_id",
                                                                                "power_w"):
        by_hand[rack_id] += w
    assert {pk: row.w for pk, row in rows.items()} == {pk: w for pk, w in by_hand.items() if w}
    assert {pk: row.cards_w for pk, row in rows.items()} == \
        {pk: w for pk, w in cards_w.items() if by_hand[pk]}
    assert racks.draw_by_rack(static_only=True).watts() == \
        {pk: by_hand[pk] - cards_w[pk] for pk in rows if by_hand[pk] - cards_w[pk]}

    with_power = dict(racks.with_power().values_list("pk", "power_w"))
    assert with_power == by_hand

    floor = reader_client.get(reverse("api:cluster-floor", args=[seed.pk])).json()["racks"]
    assert dict(zip(floor["id"], floor["power_w"], strict=True)) == by_hand
    assert sum(floor["cards"]) == 1_024 == sum(row.cards for row in rows.values())

    summary = reader_client.get(reverse("api:cluster-summary", args=[seed.pk])).json()
    assert summary["power"]["it_w"] == sum(by_hand.values())
    # a built preset has a plant: facility = IT × the PUE the plant computes from its
    # parts at this draw (the racks' stored PUE only without a plant)
    assert summary["power"]["pue_source"] == "plant"
    assert summary["power"]["facility_w"] == pytest.approx(
        sum(by_hand.values()) * summary["power"]["pue"], rel=1e-4)

    busiest = max(by_hand, key=by_hand.__getitem__)
    geometry = reader_client.get(reverse("api:rack-geometry", args=[busiest])).json()
    assert geometry["power_w"] == by_hand[busiest]
    assert geometry["static_w"] == by_hand[busiest] - cards_w[busiest]
    assert Rack.objects.get(pk=busiest).draw_w() == by_hand[busiest]


def test_over_budget_filter_and_totals_name_the_worst_first(hot: dict[str, Any]) -> None:
    Rack.objects.filter(pk=hot["r-warm"].pk).update(power_budget_w=9_000)
    cluster = Rack.objects.filter(cluster=hot["cluster"])
    assert set(cluster.over_budget().values_list("name", flat=True)) == {"r-over", "r-warm"}
    over = cluster.draw_by_rack().totals().over
    assert over == OverBudget(2, (Overload(hot["r-over"].pk, "r-over", "tiny", 1_800, 1_000),
                                  Overload(hot["r-warm"].pk, "r-warm", "tiny", 9_250, 9_000)))
    assert over.describe() == ("2 racks over budget: r-over (1,800 W of 1,000 W), "
                               "r-warm (9,250 W of 9,000 W)")


# --- raising a TDP: the API -------------------------------------------------------------------
def test_raising_a_tdp_that_overloads_a_rack_is_refused_naming_it(admin_client_api,
                                                                 hot: dict[str, Any]) -> None:
    acc = hot["acc"]
    response = admin_client_api.patch(api("acceleratortype", acc.pk), {"tdp_w": RAISED_TDP},
                                      format="json")
    assert response.status_code == 409, response.content
    message = response.json()["tdp_w"][0]
    assert "would put 1 rack over budget: r-hot (49,000 W of 40,000 W)" in message
    assert "r-warm" not in message and "r-over" not in message  # r-over gains nothing
    assert "allow over budget" in message
    acc.refresh_from_db()
    assert acc.tdp_w == 700
    assert draw(hot["r-hot"]) == HOT_W

    # The last watt that fits: 3,000 W of headroom over 32 cards is 93 W each.
    ok = admin_client_api.patch(api("acceleratortype", acc.pk), {"tdp_w": 793}, format="json")
    assert ok.status_code == 200, ok.content
    assert ok.json()["racks_over_budget"] is None
    assert draw(hot["r-hot"]) == 39_976
    again = admin_client_api.patch(api("acceleratortype", acc.pk), {"tdp_w": 794},
                                   format="json")
    assert again.status_code == 409
    assert "r-hot (40,008 W of 40,000 W)" in again.json()["tdp_w"][0]


def test_lowering_a_tdp_is_never_refused(admin_client_api, hot: dict[str, Any]) -> None:
    Rack.objects.filter(pk=hot["r-hot"].pk).update(power_budget_w=30_000)  # already over
    response = admin_client_api.patch(api("acceleratortype", hot["acc"].pk), {"tdp_w": 650},
                                      format="json")
    assert response.status_code == 200, response.content
    assert draw(hot["r-hot"]) == HOT_W - 32 * 50


def test_allow_over_budget_saves_the_tdp_and_lists_the_racks(admin_client_api,
                                                            hot: dict[str, Any]) -> None:
    acc = hot["acc"]
    response = admin_client_api.patch(api("acceleratortype", acc.pk),
                                      {"tdp_w": RAISED_TDP, "allow_over_budget": True},
                                      format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["tdp_w"] == RAISED_TDP and body["allow_over_budget"] is True
    assert body["racks_over_budget"] == {"count": 1, "racks": [
        {"id": hot["r-hot"].pk, "name": "r-hot", "cluster": "tiny", "draw_w": 49_000,
         "budget_w": 40_000}]}
    acc.refresh_from_db()
    assert acc.tdp_w == RAISED_TDP
    assert draw(hot["r-hot"]) == 49_000
    read = admin_client_api.get(api("acceleratortype", acc.pk)).json()
    assert read["racks_over_budget"] is None and read["allow_over_budget"] is False


def test_many_overloaded_racks_are_counted_and_the_worst_named(admin_client_api,
                                                              hot: dict[str, Any]) -> None:
    """Six more racks at their budget with one such card each: 7 over, 5 named."""
    for n in range(6):
        rack = Rack.objects.create(cluster=hot["cluster"], name=f"r-full{n}", row=6, slot=n,
                                   power_budget_w=5_000 + 700 + n)
        fill(rack, 1, 1, hot["acc"], hot["sn_p"], overhead_w=5_000 + n)
    response = admin_client_api.patch(api("acceleratortype", hot["acc"].pk),
                                      {"tdp_w": RAISED_TDP}, format="json")
    assert response.status_code == 409
    message = response.json()["tdp_w"][0]
    assert "would put 7 racks over budget: r-hot (49,000 W of 40,000 W), " in message
    assert message.count("W of") == 5 and "and 2 more" in message


# --- raising a TDP: the admin -----------------------------------------------------------------
def test_admin_refuses_a_tdp_rise_on_the_field_then_allows_it(browser: Client,
                                                             hot: dict[str, Any]) -> None:
    acc = hot["acc"]
    change = url("acceleratortype", "change", acc.pk)
    data = form_data(browser.get(change))
    data["tdp_w"] = RAISED_TDP
    response = browser.post(change, data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "would put 1 rack over budget: r-hot (49,000 W of 40,000 W)" in errors["tdp_w"][0]
    acc.refresh_from_db()
    assert acc.tdp_w == 700

    data["allow_over_budget"] = "on"
    response = browser.post(change, data)
    assert response.status_code == 302
    assert any("Saved over budget: 1 rack over budget: r-hot (49,000 W of 40,000 W)" in m
               for m in notes(response))
    acc.refresh_from_db()
    assert acc.tdp_w == RAISED_TDP


# --- the other write paths, refused or allowed ------------------------------------------------
@pytest.mark.parametrize(("name", "body", "field", "rack", "after"), [
    ("server", {"overhead_w": 40_000}, "overhead_w", "rack", R0_W - 1_800 + 40_000),
    ("networkdevice", {"power_w": 40_001}, "power_w", "net_rack", 40_001),
    ("rack", {"power_budget_w": 7_000}, "power_budget_w", "rack", R0_W),
])
def test_every_write_that_adds_draw_may_be_allowed(admin_client_api, tiny_cluster, name, body,
                                                   field, rack, after) -> None:
    obj = {"server": tiny_cluster["server"], "networkdevice": tiny_cluster["leaf"],
           "rack": tiny_cluster["rack"]}[name]
    refused = admin_client_api.patch(api(name, obj.pk), body, format="json")
    assert refused.status_code == 409 and field in refused.json(), refused.content
    allowed = admin_client_api.patch(api(name, obj.pk), {**body, "allow_over_budget": True},
                                     format="json")
    assert allowed.status_code == 200, allowed.content
    listed = allowed.json()["racks_over_budget"]
    assert listed["count"] == 1 and listed["racks"][0]["id"] == tiny_cluster[rack].pk
    assert listed["racks"][0]["draw_w"] == after == draw(tiny_cluster[rack])


def test_a_card_changed_to_a_hotter_type_may_be_allowed(admin_client_api, tiny_cluster) -> None:
    rack = tiny_cluster["rack"]
    Rack.objects.filter(pk=rack.pk).update(power_budget_w=R0_W)
    card = tiny_cluster["cards"][0]
    b200 = AcceleratorType.objects.get(slug="b200-sxm-180gb")  # 1,000 W instead of 700 W
    refused = admin_client_api.patch(api("card", card.pk), {"accelerator": b200.pk},
                                     format="json")
    assert refused.status_code == 409 and "over its 7,485 W budget" in \
        refused.json()["server"][0]
    allowed = admin_client_api.patch(api("card", card.pk),
                                     {"accelerator": b200.pk, "allow_over_budget": True},
                                     format="json")
    assert allowed.status_code == 200, allowed.content
    assert allowed.json()["racks_over_budget"]["racks"][0]["draw_w"] == R0_W + 300
    assert draw(rack) == R0_W + 300


def test_a_moved_server_takes_its_devices_and_may_be_allowed(admin_client_api,
                                                            tiny_cluster) -> None:
    server, r0 = tiny_cluster["server"], tiny_cluster["rack"]
    small = Rack.objects.create(cluster=tiny_cluster["cluster"], name="small", row=3, slot=0,
                                power_budget_w=5_000)
    refused = admin_client_api.patch(api("server", server.pk), {"rack": small.pk},
                                     format="json")
    assert refused.status_code == 409
    assert "would draw 7,485 W, over its 5,000 W budget" in refused.json()["rack"][0]
    assert draw(r0) == R0_W and draw(small) == 0

    allowed = admin_client_api.patch(api("server", server.pk),
                                     {"rack": small.pk, "allow_over_budget": True},
                                     format="json")
    assert allowed.status_code == 200, allowed.content
    assert allowed.json()["racks_over_budget"]["racks"][0] == {
        "id": small.pk, "name": "small", "cluster": "tiny", "draw_w": R0_W, "budget_w": 5_000}
    # Its PCIe switch and NIC went along: the new rack draws what was checked.
    assert set(NetworkDevice.objects.filter(server=server).values_list("rack_id", flat=True)) \
        == {small.pk}
    assert draw(small) == R0_W and draw(r0) == 0


def test_edits_that_add_no_draw_pass_in_an_over_budget_rack(admin_client_api, browser,
                                                           tiny_cluster) -> None:
    """Renaming an over-budget rack, or saving its server's page unchanged (the inline
    cards' formset adds them all up), adds nothing: accepted."""
    rack, server = tiny_cluster["rack"], tiny_cluster["server"]
    Rack.objects.filter(pk=rack.pk).update(power_budget_w=7_000)
    renamed = admin_client_api.patch(api("rack", rack.pk), {"name": "r0-hot"}, format="json")
    assert renamed.status_code == 200, renamed.content
    response = browser.post(url("server", "change", server.pk),
                            form_data(browser.get(url("server", "change", server.pk))))
    assert response.status_code == 302, response.context and \
        response.context["inline_admin_formsets"][0].formset.non_form_errors()


def test_admin_checkbox_covers_the_inline_rows(browser, tiny_cluster) -> None:
    server, rack = tiny_cluster["server"], tiny_cluster["rack"]
    Card.objects.filter(slot=7).delete()
    Rack.objects.filter(pk=rack.pk).update(power_budget_w=R0_W - 700)
    data = form_data(browser.get(url("server", "change", server.pk)))
    start = int(data["cards-TOTAL_FORMS"])
    data.update({f"cards-{start}-slot": 7, f"cards-{start}-index": 7,
                 f"cards-{start}-status": "ok", f"cards-{start}-serial": "INLINE-7",
                 f"cards-{start}-accelerator": tiny_cluster["h100"].pk,
                 f"cards-{start}-supernode": tiny_cluster["supernode"].pk,
                 "cards-TOTAL_FORMS": start + 1, "overhead_w": 1_900})
    refused = browser.post(url("server", "change", server.pk), data)
    assert refused.status_code == 200
    assert not Card.objects.filter(serial="INLINE-7").exists()

    data["allow_over_budget"] = "on"
    saved = browser.post(url("server", "change", server.pk), data)
    assert saved.status_code == 302
    assert any(f"r0 ({R0_W + 100:,} W of {R0_W - 700:,} W)" in m for m in notes(saved))
    assert Card.objects.filter(serial="INLINE-7").exists() and draw(rack) == R0_W + 100


# --- the lock ---------------------------------------------------------------------------------
def _rack_locks(captured: CaptureQueriesContext) -> list[str]:
    table = Rack._meta.db_table
    return [q["sql"] for q in captured.captured_queries
            if "FOR UPDATE" in q["sql"] and f'FROM "{table}"' in q["sql"]]


@postgres_only
def test_an_admin_save_locks_the_rack_row(browser, tiny_cluster) -> None:
    server, rack = tiny_cluster["server"], tiny_cluster["rack"]
    data = form_data(browser.get(url("server", "change", server.pk)))
    data["overhead_w"] = 1_900
    with CaptureQueriesContext(connection) as captured:
        assert browser.post(url("server", "change", server.pk), data).status_code == 302
    locks = _rack_locks(captured)
    assert locks and all(str(rack.pk) in sql for sql in locks), locks


@postgres_only
def test_an_api_write_locks_the_rack_row(admin_client_api, tiny_cluster) -> None:
    leaf, net = tiny_cluster["leaf"], tiny_cluster["net_rack"]
    with CaptureQueriesContext(connection) as captured:
        response = admin_client_api.patch(api("networkdevice", leaf.pk), {"power_w": 1_600},
                                          format="json")
    assert response.status_code == 200
    locks = _rack_locks(captured)
    assert locks and all(str(net.pk) in sql for sql in locks), locks


@postgres_only
def test_a_tdp_rise_locks_every_rack_first(admin_client_api, hot: dict[str, Any]) -> None:
    with CaptureQueriesContext(connection) as captured:
        response = admin_client_api.patch(api("acceleratortype", hot["acc"].pk),
                                          {"tdp_w": 701}, format="json")
    assert response.status_code == 200
    sqls = [q["sql"] for q in captured.captured_queries]
    lock = next(i for i, sql in enumerate(sqls) if sql in _rack_locks(captured))
    assert "WHERE" not in sqls[lock].split("FOR UPDATE")[0]  # all of them
    assert lock < next(i for i, sql in enumerate(sqls) if sql.startswith("UPDATE"))
