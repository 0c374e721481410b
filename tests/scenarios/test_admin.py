"""The admin shows runs read-only and cancels queued ones."""
from __future__ import annotations

from django.test import Client

from twin.scenarios.models import ScenarioRun
from twin.scenarios.runner import execute, submit


def test_admin_lists_shows_and_cancels_runs(admin_user, db):
    done = submit("topology", {"family": "ring", "nodes": 8}, None, admin_user, enqueue=False)
    execute(done.pk)
    queued = submit("topology", {"family": "ring", "nodes": 10}, None, admin_user,
                    enqueue=False)
    client = Client()
    client.force_login(admin_user)
    listing = client.get("/admin/scenarios/scenariorun/")
    assert listing.status_code == 200
    assert b"Succeeded" in listing.content and b"Queued" in listing.content
    page = client.get(f"/admin/scenarios/scenariorun/{done.pk}/change/")
    assert page.status_code == 200
    assert b"16/7" in page.content  # the result, shown as JSON
    assert b'name="_save"' not in page.content  # read-only
    assert client.get("/admin/scenarios/scenariorun/add/").status_code == 403
    response = client.post("/admin/scenarios/scenariorun/", {
        "action": "cancel_runs", "_selected_action": [done.pk, queued.pk]}, follow=True)
    assert response.status_code == 200 and b"Cancelled 1 run(s)." in response.content
    assert ScenarioRun.objects.get(pk=queued.pk).status == "cancelled"
    assert ScenarioRun.objects.get(pk=done.pk).status == "succeeded"


def test_admin_shows_a_split_runs_parts_and_cancels_them_with_it(admin_user, db):
    from twin.scenarios.models import ScenarioPart

    run = submit("scheduling", {"policies": "fgd,best-fit", "jobs": 2000, "servers": 128},
                 None, admin_user, enqueue=False)
    sent: list[int] = []
    execute(run.pk, worker="here@host", enqueue_part=sent.append)
    client = Client()
    client.force_login(admin_user)
    page = client.get(f"/admin/scenarios/scenariorun/{run.pk}/change/")
    assert page.status_code == 200 and len(sent) == 2
    assert page.content.count(b"&quot;policies&quot;: [") >= 2  # each part's share
    response = client.post("/admin/scenarios/scenariorun/", {
        "action": "cancel_runs", "_selected_action": [run.pk]}, follow=True)
    assert b"Cancelled 1 run(s)." in response.content
    assert set(ScenarioPart.objects.filter(run=run).values_list("status", flat=True)) == {
        "cancelled"}
