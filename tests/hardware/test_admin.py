"""The hardware admin: every page renders, filters are the API's, actions and the
power budget work, and the big lists stay bounded.

Pages are iterated from ``admin.site._registry``, so a model registered later
is covered without touching this file.
"""
from __future__ import annotations

import re
from typing import Any

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.utils import flatten_fieldsets
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.db import connection
from django.http import QueryDict
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils.http import urlencode

from twin.core.admin.base import TwinModelAdmin
from twin.core.admin.pagination import LargeTablePaginator
from twin.hardware.models import (
    ApiToken,
    Card,
    Cluster,
    ClusterBuild,
    ClusterGrant,
    Link,
    NetworkDevice,
    Rack,
    Server,
    SuperNode,
)

HARDWARE_ADMINS = sorted(
    ((model._meta.model_name, model_admin) for model, model_admin in admin.site._registry.items()
     if model._meta.app_label == "hardware"),
    key=lambda item: item[0],
)
ADMIN_IDS = [name for name, _ in HARDWARE_ADMINS]
BIG_MODELS = {"card", "server", "rack", "networkdevice", "supernode", "cluster"}


def url(model_name: str, view: str, *args: Any) -> str:
    return reverse(f"admin:hardware_{model_name}_{view}", args=args)


@pytest.fixture(params=["admin_user", "staff_user"])
def user_client(request: pytest.FixtureRequest, tiny_cluster: dict[str, Any]) -> Client:
    """A browser logged in as the superuser, then as a staff operator."""
    client = Client()
    client.force_login(request.getfixturevalue(request.param))
    return client


@pytest.fixture
def client(admin_user, tiny_cluster: dict[str, Any]) -> Client:
    """The superuser's browser (pytest-django's ``client``, logged in, with data)."""
    c = Client()
    c.force_login(admin_user)
    return c


@pytest.fixture
def build(tiny_cluster: dict[str, Any], admin_user) -> ClusterBuild:
    # a row for the grants' pages (a superuser's grant restricts nothing)
    ClusterGrant.objects.create(user=admin_user, cluster=tiny_cluster["cluster"])
    # and rows for the tokens' pages: one per user (a user who is not a superuser sees
    # their own tokens only)
    for user in User.objects.all():
        _token(user, tiny_cluster["cluster"])
    return ClusterBuild.objects.create(preset="seed-512", name="tiny", status="succeeded",
                                       cluster=tiny_cluster["cluster"], created_by=admin_user,
                                       progress=1.0)


def _token(user: Any, cluster: Cluster) -> ApiToken:
    token = ApiToken(user=user, name=f"{user.username} wall", limited=True)
    token.new_key()
    token.save()
    token.clusters.set([cluster])
    return token


def form_data(response: Any) -> dict[str, Any]:
    """What a browser would post back from an admin add/change page, unchanged."""
    data: dict[str, Any] = {}

    def add(form: Any) -> None:
        for name in form.fields:
            value = form[name].value()
            if value is None or value is False:
                continue
            data[form.add_prefix(name)] = "on" if value is True else value

    add(response.context["adminform"].form)
    for inline in response.context["inline_admin_formsets"]:
        formset = inline.formset
        add(formset.management_form)
        for form in formset.forms:
            add(form)
    return data


def text(response: Any) -> str:
    """The page as text, no-break spaces (used between a number and its unit) as spaces."""
    return response.content.decode().replace("\u00a0", " ")


def messages_of(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


# --- coverage ------------------------------------------------------------------
def test_every_hardware_model_has_an_admin_on_the_shared_base() -> None:
    registered = {name for name, _ in HARDWARE_ADMINS}
    models = {m._meta.model_name for m in apps.get_app_config("hardware").get_models()}
    assert models <= registered
    for _, model_admin in HARDWARE_ADMINS:
        assert isinstance(model_admin, TwinModelAdmin)
        assert model_admin.filterset_class is not None, model_admin
        assert model_admin.show_full_result_count is False
        assert model_admin.paginator is LargeTablePaginator
        assert not model_admin.date_hierarchy


@pytest.mark.parametrize(("model_name", "model_admin"), HARDWARE_ADMINS, ids=ADMIN_IDS)
def test_foreign_keys_to_big_tables_use_raw_id_or_autocomplete(model_name, model_admin, rf,
                                                               admin_user) -> None:
    """A <select> of every server or card would not render at a million cards."""
    request = rf.get("/")
    request.user = admin_user
    owners = [model_admin, *model_admin.get_inline_instances(request)]
    checked = 0
    for owner in owners:
        editable = set(flatten_fieldsets(owner.get_fieldsets(request))) - set(
            owner.get_readonly_fields(request))
        for field in owner.model._meta.get_fields():
            if not (field.many_to_one and field.related_model._meta.model_name in BIG_MODELS):
                continue
            if field.name not in editable:
                continue  # read-only, or the inline's own parent key
            widgets = set(owner.raw_id_fields) | set(owner.autocomplete_fields)
            assert field.name in widgets, f"{owner.__class__.__name__}.{field.name}"
            checked += 1
    # (an API token refers to clusters through a many-to-many: autocomplete)
    assert checked or model_name in {"acceleratortype", "apitoken", "cluster", "clusterbuild"}


# --- every page renders -------------------------------------------------------------
@pytest.mark.parametrize(("model_name", "model_admin"), HARDWARE_ADMINS, ids=ADMIN_IDS)
def test_changelist_renders(user_client: Client, build, model_name, model_admin) -> None:
    response = user_client.get(url(model_name, "changelist"))
    assert response.status_code == 200
    assert len(response.context["cl"].result_list) >= 1


@pytest.mark.parametrize(("model_name", "model_admin"), HARDWARE_ADMINS, ids=ADMIN_IDS)
def test_add_form_renders(user_client: Client, model_name, model_admin, rf) -> None:
    response = user_client.get(url(model_name, "add"))
    request = rf.get("/")
    request.user = response.wsgi_request.user
    if model_admin.has_add_permission(request):
        assert response.status_code == 200
        assert "adminform" in response.context
    else:
        assert response.status_code == 403  # builds come from the builder, not the admin


@pytest.mark.parametrize(("model_name", "model_admin"), HARDWARE_ADMINS, ids=ADMIN_IDS)
def test_change_form_renders(user_client: Client, build, model_name, model_admin) -> None:
    for obj in model_admin.model._default_manager.all()[:3]:
        response = user_client.get(url(model_name, "change", obj.pk))
        assert response.status_code == 200, obj
        assert response.context["original"] == obj


@pytest.mark.parametrize(("model_name", "model_admin"), HARDWARE_ADMINS, ids=ADMIN_IDS)
def test_search_renders(user_client: Client, build, model_name, model_admin) -> None:
    response = user_client.get(url(model_name, "changelist"), {"q": "tiny"})
    assert response.status_code == 200
    assert 'id="searchbar"' in text(response)


@pytest.mark.parametrize(
    ("model_name", "term", "expected"),
    [
        ("card", "TINY-0003", ["TINY-0003"]),
        ("rack", "net", ["net0"]),
        ("server", "node0", ["sn0-s0"]),
        ("networkdevice", "nic", ["sn0-s0-nic0"]),
        ("cluster", "tin", ["tiny"]),
        ("acceleratortype", "H100", ["NVIDIA H100 SXM5 80GB"]),
    ],
)
def test_search_finds_through_the_filterset(client: Client, model_name, term, expected) -> None:
    response = client.get(url(model_name, "changelist"), {"q": term})
    names = [getattr(o, "serial", None) or o.name for o in
             response.context["cl"].result_list]
    assert names == expected


def test_link_search_matches_either_end_exactly(client: Client, tiny_cluster) -> None:
    response = client.get(url("link", "changelist"), {"q": "TINY-0000"})
    assert {link.pk for link in response.context["cl"].result_list} == {
        tiny_cluster["links"][0].pk, tiny_cluster["links"][1].pk}
    response = client.get(url("link", "changelist"), {"q": "leaf0"})
    assert [link.pk for link in response.context["cl"].result_list] == [
        tiny_cluster["links"][3].pk]


# --- one filterset for the API and the admin --------------------------------------
def _sample_value(model_admin: TwinModelAdmin, name: str) -> str | None:
    """A value for filter ``name`` that matches something in the tiny cluster."""
    import django_filters as df

    flt = model_admin.filterset_class.base_filters[name]
    model = model_admin.model
    if isinstance(flt, df.BooleanFilter):
        return "true"
    if isinstance(flt, df.ChoiceFilter | df.MultipleChoiceFilter) and not isinstance(
            flt, df.ModelChoiceFilter | df.ModelMultipleChoiceFilter):
        value = model._default_manager.values_list(flt.field_name, flat=True).first()
        return str(value) if value is not None else str(flt.extra["choices"][0][0])
    if flt.method is not None:
        target = {"card": Card, "device": NetworkDevice}.get(name)
        return str(target.objects.values_list("pk", flat=True).first()) if target else None
    value = model._default_manager.exclude(**{f"{flt.field_name}__isnull": True}).values_list(
        flt.field_name, flat=True).first()
    return None if value is None else str(value)


FILTERS = [
    (model_name, model_admin, name)
    for model_name, model_admin in HARDWARE_ADMINS
    for name in model_admin.filterset_class.base_filters if name != "q"
]


@pytest.mark.parametrize(("model_name", "model_admin", "name"), FILTERS,
                         ids=[f"{m}-{n}" for m, _, n in FILTERS])
def test_every_filterset_filter_works_in_the_admin(client: Client, build, model_name,
                                                   model_admin, name) -> None:
    """Each filter gives the admin the same rows as the filterset (the API) does."""
    value = _sample_value(model_admin, name)
    assert value is not None, f"no sample value for {model_name}.{name}"
    response = client.get(url(model_name, "changelist"), {name: value})
    assert response.status_code == 200, response.get("Location")
    changelist = response.context["cl"]
    assert changelist.has_active_filters
    filterset = model_admin.filterset_class(
        data=QueryDict(urlencode({name: value})),
        queryset=model_admin.get_queryset(response.wsgi_request))
    assert filterset.is_valid(), filterset.errors
    assert {o.pk for o in changelist.result_list} == set(filterset.qs.values_list("pk", flat=True))


@pytest.mark.parametrize(("model_name", "model_admin"), HARDWARE_ADMINS, ids=ADMIN_IDS)
def test_every_sidebar_filter_link_renders(client: Client, build, model_name,
                                           model_admin) -> None:
    changelist = client.get(url(model_name, "changelist")).context["cl"]
    visited = 0
    for spec in changelist.filter_specs:
        for choice in spec.choices(changelist):
            response = client.get(url(model_name, "changelist") + choice["query_string"])
            assert response.status_code == 200, (spec.title, choice)
            visited += 1
    assert visited or not model_admin.filterset_sidebar


def test_filters_from_the_api_work_in_the_admin(client: Client, tiny_cluster) -> None:
    cards = tiny_cluster["cards"]
    Card.objects.filter(pk__in=[cards[2].pk, cards[5].pk]).update(status="failed")
    response = client.get(url("card", "changelist"), {"status": "failed"})
    assert response.status_code == 200
    assert [c.serial for c in response.context["cl"].result_list] == ["TINY-0002", "TINY-0005"]
    # Several values, as the API's MultipleChoiceFilter takes them.
    Card.objects.filter(pk=cards[6].pk).update(status="maintenance")
    response = client.get(url("card", "changelist") + "?status=failed&status=maintenance")
    assert len(response.context["cl"].result_list) == 3

    # Over budget is an SQL annotation filter; make one rack too small behind clean()'s back.
    Rack.objects.filter(pk=tiny_cluster["net_rack"].pk).update(power_budget_w=1000)
    response = client.get(url("rack", "changelist"), {"over_budget": "true"})
    assert response.status_code == 200
    assert [r.name for r in response.context["cl"].result_list] == ["net0"]
    response = client.get(url("rack", "changelist"), {"over_budget": "false"})
    assert [r.name for r in response.context["cl"].result_list] == ["r0"]


@pytest.mark.parametrize(("api", "model_name", "query"), [
    ("cards", "card", "status=failed"),
    ("cards", "card", "status=failed&status=maintenance"),
    ("cards", "card", "accelerator=h100-sxm5-80gb&rack={rack}"),
    ("racks", "rack", "over_budget=true"),
    ("racks", "rack", "over_budget=false&cooling=liquid"),
    ("links", "link", "kind=pcie&status=up"),
    ("links", "link", "q=TINY-0000"),
    ("devices", "networkdevice", "kind=leaf&kind=smart_nic"),
    ("servers", "server", "cluster={cluster}&q=node"),
])
def test_same_query_string_same_rows_in_api_and_admin(client: Client, admin_client_api,
                                                       tiny_cluster, api: str,
                                                       model_name: str, query: str) -> None:
    """The literal URL parameters of the API, pasted after /admin/…/, give the same rows."""
    cards = tiny_cluster["cards"]
    Card.objects.filter(pk__in=[cards[2].pk, cards[5].pk]).update(status="failed")
    Card.objects.filter(pk=cards[6].pk).update(status="maintenance")
    Rack.objects.filter(pk=tiny_cluster["net_rack"].pk).update(power_budget_w=1000)
    query = query.format(rack=tiny_cluster["rack"].pk, cluster=tiny_cluster["cluster"].pk)

    api_response = admin_client_api.get(f"/api/{api}/?{query}")
    assert api_response.status_code == 200, api_response.content
    api_ids = {row["id"] for row in api_response.json()["results"]}
    admin_response = client.get(f"{url(model_name, 'changelist')}?{query}")
    assert admin_response.status_code == 200, admin_response.get("Location")
    admin_ids = {obj.pk for obj in admin_response.context["cl"].result_list}
    assert admin_ids == api_ids
    assert admin_ids  # every case above matches something


def test_invalid_filter_value_says_why(client: Client) -> None:
    response = client.get(url("card", "changelist"), {"status": "melted"}, follow=True)
    assert response.redirect_chain and response.redirect_chain[-1][0].endswith("?e=1")
    assert any("melted" in m for m in messages_of(response))


def test_unknown_parameter_is_still_refused(client: Client) -> None:
    """Only the filterset's parameters bypass Django's lookup check."""
    response = client.get(url("card", "changelist"), {"no_such_field": "1"})
    assert response.status_code == 302 and response["Location"].endswith("?e=1")


# --- columns --------------------------------------------------------------------------
def test_rack_list_shows_power_from_sql_and_sorts_by_it(client: Client) -> None:
    response = client.get(url("rack", "changelist"), {"o": "7"})  # 7th column: draw
    body = text(response)
    assert "7,485 W" in body and "40,000 W" in body and "32,515 W" in body
    assert "18.7 %" in body
    racks = list(response.context["cl"].result_list)
    assert [r.name for r in racks] == ["net0", "r0"]
    assert racks[1].power_w == 7485 and racks[1].headroom_w == 32515
    response = client.get(url("rack", "changelist"), {"o": "-7"})
    assert [r.name for r in response.context["cl"].result_list] == ["r0", "net0"]


def test_card_counts_are_annotated(client: Client) -> None:
    for model_name in ("cluster", "supernode", "server"):
        response = client.get(url(model_name, "changelist"))
        obj = response.context["cl"].result_list[0]
        count = getattr(obj, "cards_n", None) or getattr(obj, "installed_n", None)
        assert count == 8, model_name


def test_status_is_a_badge_in_its_choice_colour(client: Client, tiny_cluster) -> None:
    Card.objects.filter(pk=tiny_cluster["cards"][0].pk).update(status="failed")
    body = text(client.get(url("card", "changelist")))
    assert re.search(r'background:#c62828;[^>]*>Failed<', body)
    assert re.search(r'background:#2e7d32;[^>]*>OK<', body)


def test_link_list_shows_both_ends_and_kind(client: Client) -> None:
    body = text(client.get(url("link", "changelist")))
    assert "TINY-0000 (card)" in body and "sn0-s0-pcie0 (PCIe switch)" in body
    assert "leaf0 (Leaf switch)" in body and ">RoCE<" in body


def test_change_forms_show_computed_fields(client: Client, tiny_cluster) -> None:
    body = text(client.get(url("rack", "change", tiny_cluster["rack"].pk)))
    assert "7,485 W" in body and "32,515 W" in body and "7,859 W" in body  # × 1.05
    body = text(client.get(url("server", "change", tiny_cluster["server"].pk)))
    assert "7,485 W" in body  # overhead + 8 × 700 + PCIe switch + NIC
    link = tiny_cluster["links"][1]
    body = text(client.get(url("link", "change", link.pk)))
    assert "Accelerator card" in body and "PCIe switch" in body
    assert "PCIe, Scale-up fabric" in body
    body = text(client.get(url("cluster", "change", tiny_cluster["cluster"].pk)))
    assert "8,985 W" in body  # 7,485 + leaf 1,500


# --- bulk actions -----------------------------------------------------------------------
def _action(client: Client, model_name: str, action: str, pks: list[int], **extra: Any):
    return client.post(url(model_name, "changelist"),
                       {"action": action, ACTION_CHECKBOX_NAME: pks, **extra}, follow=True)


@pytest.mark.parametrize("status", ["failed", "maintenance", "ok", "degraded"])
def test_mark_cards(client: Client, tiny_cluster, status: str) -> None:
    Card.objects.update(status="degraded" if status == "ok" else "ok")
    pks = [c.pk for c in tiny_cluster["cards"][:3]]
    response = _action(client, "card", f"mark_{status}", pks)
    assert response.status_code == 200
    assert set(Card.objects.filter(status=status).values_list("pk", flat=True)) == set(pks)
    assert any(m.startswith("Marked 3 cards") for m in messages_of(response))


@pytest.mark.parametrize("status", ["down", "up"])
def test_mark_links(client: Client, tiny_cluster, status: str) -> None:
    Link.objects.update(status="up" if status == "down" else "down")
    pks = [link.pk for link in tiny_cluster["links"][:2]]
    _action(client, "link", f"mark_{status}", pks)
    assert set(Link.objects.filter(status=status).values_list("pk", flat=True)) == set(pks)


def test_mark_all_filtered_cards_across_pages(client: Client, tiny_cluster) -> None:
    Card.objects.filter(pk=tiny_cluster["cards"][1].pk).update(status="degraded")
    response = client.post(url("card", "changelist") + "?status=degraded",
                           {"action": "mark_failed", "select_across": "1",
                            ACTION_CHECKBOX_NAME: [tiny_cluster["cards"][1].pk]}, follow=True)
    assert response.status_code == 200
    assert list(Card.objects.filter(status="failed").values_list("serial", flat=True)) == [
        "TINY-0001"]


def test_set_rack_budget_asks_then_applies_or_refuses(client: Client, tiny_cluster) -> None:
    racks = [tiny_cluster["rack"].pk, tiny_cluster["net_rack"].pk]
    page = _action(client, "rack", "set_rack_budget", racks)
    assert page.status_code == 200
    assert page.templates[0].name == "admin/hardware/rack/set_budget.html"
    assert "7,485" in text(page)

    bad = _action(client, "rack", "set_rack_budget", racks, apply="1", power_budget_w="0")
    assert bad.templates[0].name == "admin/hardware/rack/set_budget.html"
    assert bad.context["form"].errors["power_budget_w"]
    assert set(Rack.objects.values_list("power_budget_w", flat=True)) == {40_000}

    done = _action(client, "rack", "set_rack_budget", racks, apply="1", power_budget_w="5000")
    assert done.status_code == 200
    budgets = dict(Rack.objects.values_list("name", "power_budget_w"))
    assert budgets == {"r0": 40_000, "net0": 5_000}
    notes = messages_of(done)
    assert any("Set the power budget of 1 racks to 5,000 W" in m for m in notes)
    assert any("Refused for 1 racks" in m and "r0 (7,485 W)" in m and "7,485 W" in m
               for m in notes)


def test_bulk_delete_is_bounded(client: Client, tiny_cluster, monkeypatch) -> None:
    import twin.core.admin.base as base

    monkeypatch.setattr(base, "BULK_DELETE_LIMIT", 2)
    pks = [link.pk for link in tiny_cluster["links"]]
    response = _action(client, "link", "delete_selected", pks)
    assert any("Refused: deleting more than 2" in m for m in messages_of(response))
    assert Link.objects.count() == 4
    response = _action(client, "link", "delete_selected", pks[:2])
    assert response.templates[0].name.startswith("admin/") and \
        "delete_selected_confirmation" in response.templates[0].name


# --- the power budget on the forms ---------------------------------------------------------
def _fill_rack(rack: Rack, headroom: int = 0) -> None:
    Rack.objects.filter(pk=rack.pk).update(power_budget_w=rack.draw_w() + headroom)


def test_card_over_budget_is_refused_on_its_server_field(client: Client, tiny_cluster) -> None:
    _fill_rack(tiny_cluster["rack"])
    Server.objects.filter(pk=tiny_cluster["server"].pk).update(cards_per_server=9)
    data = {"serial": "NEW-1", "uuid": "00000000-0000-0000-0000-0000000000aa", "status": "ok",
            "accelerator": tiny_cluster["h100"].pk, "supernode": tiny_cluster["supernode"].pk,
            "index": 7, "server": tiny_cluster["server"].pk, "slot": 8}
    response = client.post(url("card", "add"), data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "over its" in errors["server"][0] and "budget" in errors["server"][0]
    assert "over its" in text(response)
    assert not Card.objects.filter(serial="NEW-1").exists()


def test_moving_a_card_to_a_full_rack_is_refused(client: Client, tiny_cluster) -> None:
    other_rack = Rack.objects.create(cluster=tiny_cluster["cluster"], name="r1", row=0, slot=1,
                                     power_budget_w=2000)
    other = Server.objects.create(rack=other_rack, supernode=tiny_cluster["supernode"],
                                  name="sn0-s1", overhead_w=1800)
    card = tiny_cluster["cards"][7]
    page = client.get(url("card", "change", card.pk))
    data = form_data(page)
    data["server"] = other.pk
    response = client.post(url("card", "change", card.pk), data)
    assert response.status_code == 200
    assert "over its 2,000 W budget" in response.context["adminform"].form.errors["server"][0]
    card.refresh_from_db()
    assert card.server_id == tiny_cluster["server"].pk


def test_server_over_budget_is_refused_on_rack_or_overhead(client: Client, tiny_cluster) -> None:
    rack, server = tiny_cluster["rack"], tiny_cluster["server"]
    data = {"rack": rack.pk, "supernode": tiny_cluster["supernode"].pk, "name": "huge",
            "position": 3, "hostname": "", "cards_per_server": 8, "overhead_w": 33_000,
            "nic_count": 2, "nic_gbps": 400,
            "cards-TOTAL_FORMS": 0, "cards-INITIAL_FORMS": 0,
            "devices-TOTAL_FORMS": 0, "devices-INITIAL_FORMS": 0}
    response = client.post(url("server", "add"), data)
    assert response.status_code == 200
    assert "over its 40,000 W budget" in response.context["adminform"].form.errors["rack"][0]
    assert not Server.objects.filter(name="huge").exists()

    page = client.get(url("server", "change", server.pk))
    data = form_data(page)
    data["overhead_w"] = 40_000
    response = client.post(url("server", "change", server.pk), data)
    assert response.status_code == 200
    assert "overhead_w" in response.context["adminform"].form.errors
    server.refresh_from_db()
    assert server.overhead_w == 1800

    small = Rack.objects.create(cluster=tiny_cluster["cluster"], name="small", row=3, slot=0,
                                power_budget_w=5_000)
    data = form_data(client.get(url("server", "change", server.pk)))
    data["rack"] = small.pk
    response = client.post(url("server", "change", server.pk), data)
    assert response.status_code == 200
    assert "would draw 7,485 W, over its 5,000 W budget" in \
        response.context["adminform"].form.errors["rack"][0]
    server.refresh_from_db()
    assert server.rack_id == rack.pk


def test_device_over_budget_is_refused(client: Client, tiny_cluster) -> None:
    net = tiny_cluster["net_rack"]
    _fill_rack(net, headroom=100)
    data = {"cluster": tiny_cluster["cluster"].pk, "kind": "spine", "name": "spine0",
            "rack": net.pk, "ports": 64, "port_gbps": 400, "latency_ns": 300, "power_w": 1500}
    response = client.post(url("networkdevice", "add"), data)
    assert response.status_code == 200
    assert "headroom: 100 W" in response.context["adminform"].form.errors["rack"][0]
    assert not NetworkDevice.objects.filter(name="spine0").exists()

    leaf = tiny_cluster["leaf"]
    data = form_data(client.get(url("networkdevice", "change", leaf.pk)))
    data["power_w"] = 1601
    response = client.post(url("networkdevice", "change", leaf.pk), data)
    assert "power_w" in response.context["adminform"].form.errors
    data["power_w"] = 1600
    response = client.post(url("networkdevice", "change", leaf.pk), data)
    assert response.status_code == 302
    leaf.refresh_from_db()
    assert leaf.power_w == 1600


def test_lowering_a_rack_budget_below_its_draw_is_refused(client: Client, tiny_cluster) -> None:
    rack = tiny_cluster["rack"]
    data = form_data(client.get(url("rack", "change", rack.pk)))
    data["power_budget_w"] = 7000
    response = client.post(url("rack", "change", rack.pk), data)
    assert response.status_code == 200
    assert "already draws 7,485 W" in \
        response.context["adminform"].form.errors["power_budget_w"][0]
    rack.refresh_from_db()
    assert rack.power_budget_w == 40_000


def _add_inline_cards(data: dict[str, Any], tiny_cluster, slots: list[int]) -> None:
    start = int(data["cards-TOTAL_FORMS"])
    for n, slot in enumerate(slots):
        prefix = f"cards-{start + n}"
        data.update({f"{prefix}-slot": slot, f"{prefix}-index": slot, f"{prefix}-status": "ok",
                     f"{prefix}-serial": f"INLINE-{slot}",
                     f"{prefix}-accelerator": tiny_cluster["h100"].pk,
                     f"{prefix}-supernode": tiny_cluster["supernode"].pk})
    data["cards-TOTAL_FORMS"] = start + len(slots)


def test_inline_cards_that_together_break_the_budget_are_refused(client: Client,
                                                                 tiny_cluster) -> None:
    """Each new card fits alone; the two together do not."""
    server, rack = tiny_cluster["server"], tiny_cluster["rack"]
    Card.objects.filter(slot__in=[6, 7]).delete()  # frees two slots and 1,400 W
    _fill_rack(rack, headroom=1000)
    data = form_data(client.get(url("server", "change", server.pk)))
    _add_inline_cards(data, tiny_cluster, [6, 7])
    response = client.post(url("server", "change", server.pk), data)
    assert response.status_code == 200
    formset = response.context["inline_admin_formsets"][0].formset
    assert "Together these cards take rack r0 to" in str(formset.non_form_errors())
    assert "over its" in text(response)
    assert not Card.objects.filter(serial__startswith="INLINE").exists()

    data = form_data(client.get(url("server", "change", server.pk)))
    _add_inline_cards(data, tiny_cluster, [6])
    response = client.post(url("server", "change", server.pk), data)
    assert response.status_code == 302, response.context and \
        response.context["inline_admin_formsets"][0].formset.errors
    assert Card.objects.filter(serial="INLINE-6", server=server).exists()


def test_inline_card_error_on_hidden_server_field_shows_on_the_row(client: Client,
                                                                  tiny_cluster) -> None:
    server, rack = tiny_cluster["server"], tiny_cluster["rack"]
    Card.objects.filter(slot=7).delete()
    _fill_rack(rack, headroom=100)
    data = form_data(client.get(url("server", "change", server.pk)))
    _add_inline_cards(data, tiny_cluster, [7])
    response = client.post(url("server", "change", server.pk), data)
    assert response.status_code == 200
    formset = response.context["inline_admin_formsets"][0].formset
    new_form = formset.forms[-1]
    assert "over its" in str(new_form.non_field_errors())
    assert "over its" in text(response)


def test_inline_servers_in_a_rack_are_budgeted_together(client: Client, tiny_cluster) -> None:
    rack = tiny_cluster["rack"]
    data = form_data(client.get(url("rack", "change", rack.pk)))
    start = int(data["servers-TOTAL_FORMS"])
    for n in range(2):
        prefix = f"servers-{start + n}"
        data.update({f"{prefix}-name": f"extra{n}", f"{prefix}-position": 5 + n,
                     f"{prefix}-cards_per_server": 8, f"{prefix}-overhead_w": 18_000,
                     f"{prefix}-nic_count": 2, f"{prefix}-nic_gbps": 400})
    data["servers-TOTAL_FORMS"] = start + 2
    response = client.post(url("rack", "change", rack.pk), data)
    assert response.status_code == 200
    errors = str(response.context["inline_admin_formsets"][0].formset.non_form_errors())
    assert "Together these servers take rack r0 to 43,485 W" in errors
    assert not Server.objects.filter(name__startswith="extra").exists()


def test_valid_edit_saves(client: Client, tiny_cluster) -> None:
    rack = tiny_cluster["rack"]
    data = form_data(client.get(url("rack", "change", rack.pk)))
    data["power_budget_w"] = 30_000
    response = client.post(url("rack", "change", rack.pk), data)
    assert response.status_code == 302
    rack.refresh_from_db()
    assert rack.power_budget_w == 30_000


def test_link_form_shows_incompatible_ends_per_field(client: Client, tiny_cluster) -> None:
    data = {"cluster": tiny_cluster["cluster"].pk, "kind": "roce", "status": "up",
            "a_card": tiny_cluster["cards"][2].pk, "b_device": tiny_cluster["leaf"].pk,
            "bandwidth_gbps": 400, "latency_ns": 500}
    response = client.post(url("link", "add"), data)
    assert response.status_code == 200
    assert "A card cannot be linked to a leaf" in \
        response.context["adminform"].form.errors["b_device"][0]
    assert Link.objects.count() == 4


# --- scale ----------------------------------------------------------------------------------
def _unbounded_counts(queries: list[dict[str, str]]) -> list[str]:
    return [q["sql"] for q in queries
            if "COUNT(" in q["sql"].upper() and "LIMIT" not in q["sql"].upper()]


@pytest.mark.parametrize("model_name", ["card", "link"])
def test_big_changelists_run_bounded_queries_and_no_full_count(
        client: Client, model_name: str, django_assert_max_num_queries) -> None:
    with CaptureQueriesContext(connection) as captured, django_assert_max_num_queries(12):
        response = client.get(url(model_name, "changelist"))
    assert response.status_code == 200
    assert _unbounded_counts(captured.captured_queries) == []
    table = (Card if model_name == "card" else Link)._meta.db_table
    selects = [q["sql"] for q in captured.captured_queries if f'FROM "{table}"' in q["sql"]]
    assert selects, "the list itself was not read"


def _grow(tiny: dict[str, Any]) -> None:
    """A second supernode like the first: one more of every row the lists show."""
    cluster, h100 = tiny["cluster"], tiny["h100"]
    sn = SuperNode.objects.create(cluster=cluster, name="sn1", index=1, fabric="torus3d",
                                  card_count=8, dim_x=2, dim_y=2, dim_z=2, link_gbps=400,
                                  link_latency_ns=150)
    rack = Rack.objects.create(cluster=cluster, supernode=sn, name="r1", row=0, slot=1)
    server = Server.objects.create(rack=rack, supernode=sn, name="sn1-s0", hostname="node1")
    cards = [Card.objects.create(supernode=sn, server=server, accelerator=h100, index=i,
                                 slot=i, serial=f"MORE-{i}") for i in range(8)]
    nic = NetworkDevice.objects.create(cluster=cluster, rack=rack, server=server,
                                       kind="smart_nic", name="sn1-s0-nic0", ports=1,
                                       port_gbps=400, power_w=25)
    for a, b in zip(cards, cards[1:], strict=False):
        Link.objects.create(cluster=cluster, a_card=a, b_card=b, kind="scale_up",
                            bandwidth_gbps=400, latency_ns=150)
    Link.objects.create(cluster=cluster, a_device=nic, b_device=tiny["leaf"], kind="roce",
                        bandwidth_gbps=400, latency_ns=500)
    other = Cluster.objects.create(name="other")
    ClusterBuild.objects.create(preset="seed-512", name="other", cluster=other)
    ClusterGrant.objects.create(user=ClusterGrant.objects.first().user, cluster=other)
    _token(ClusterGrant.objects.first().user, other)


@pytest.mark.parametrize(("model_name", "model_admin"), HARDWARE_ADMINS, ids=ADMIN_IDS)
def test_changelist_queries_do_not_grow_with_rows(client: Client, tiny_cluster, build,
                                                  model_name, model_admin) -> None:
    """No N+1 on any list: one more of everything costs no more queries."""
    def count() -> tuple[int, int]:
        with CaptureQueriesContext(connection) as captured:
            response = client.get(url(model_name, "changelist"))
        return len(captured.captured_queries), len(response.context["cl"].result_list)

    before, rows_before = count()
    _grow(tiny_cluster)
    after, rows_after = count()
    assert rows_after > rows_before or model_name == "acceleratortype"
    assert after == before


def test_past_the_exact_limit_the_count_is_estimated(client: Client, monkeypatch) -> None:
    monkeypatch.setattr(LargeTablePaginator, "exact_count_limit", 3)
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url("card", "changelist"))
    changelist = response.context["cl"]
    assert changelist.paginator.estimated
    assert changelist.result_count >= 4
    assert "about" in text(response)
    assert _unbounded_counts(captured.captured_queries) == []
    assert len(changelist.result_list) == 8

    # Filtered: exact where counting is cheap (SQLite), the planner's estimate on PostgreSQL.
    response = client.get(url("card", "changelist"), {"status": "ok"})
    changelist = response.context["cl"]
    assert len(changelist.result_list) == 8
    if connection.vendor == "postgresql":
        assert changelist.paginator.estimated
    else:
        assert changelist.result_count == 8

    # A page past an estimate is served empty rather than an error.
    monkeypatch.setattr(TwinModelAdmin, "list_per_page", 2)
    response = client.get(url("card", "changelist"), {"p": "9"})
    assert response.status_code == 200


def test_autocomplete_uses_the_filterset_search(client: Client, tiny_cluster) -> None:
    response = client.get(reverse("admin:autocomplete"), {
        "app_label": "hardware", "model_name": "server", "field_name": "rack", "term": "net"})
    assert response.status_code == 200
    assert [r["text"] for r in response.json()["results"]] == ["tiny / net0"]


def test_cluster_with_many_supernodes_drops_the_inline(client: Client, tiny_cluster,
                                                      monkeypatch) -> None:
    import twin.hardware.admin.clusters as clusters

    cluster = tiny_cluster["cluster"]
    response = client.get(url("cluster", "change", cluster.pk))
    assert len(response.context["inline_admin_formsets"]) == 1
    monkeypatch.setattr(clusters, "INLINE_SUPERNODES_MAX", 0)
    response = client.get(url("cluster", "change", cluster.pk))
    assert response.context["inline_admin_formsets"] == []
    assert f"?cluster={cluster.pk}" in text(response)


def test_staff_without_permissions_sees_nothing(tiny_cluster, django_user_model) -> None:
    user = django_user_model.objects.create_user("nobody", password="x", is_staff=True)
    c = Client()
    c.force_login(user)
    assert c.get(url("card", "changelist")).status_code == 403
    assert c.post(url("card", "changelist"), {"action": "mark_failed",
                                              ACTION_CHECKBOX_NAME: [1]}).status_code == 403
    assert not Card.objects.filter(status="failed").exists()
