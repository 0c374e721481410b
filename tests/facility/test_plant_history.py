"""The plant's minute history: live ticks (real Redis and database) write one
``PlantMinute`` per cluster and minute with the telemetry minute, read back through
``GET /api/facility/history/`` (strict query, per-cluster access, bounded pages)."""
from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.telemetry.test_state import put
from twin.facility import history, live
from twin.telemetry import keys, processing, state
from twin.telemetry.config import conf, redis_client
from twin.telemetry.processing import tickparts

pytestmark = pytest.mark.usefixtures("plant_namespace")


def _minute_of_ticks(world: dict[str, Any], monkeypatch: Any, start: float,
                     loads: list[float]) -> list[dict[str, Any]]:
    """One tick every 6 s from ``start`` at each card load, then one in the next minute
    (which writes the finished one); the plant summary after each of the first."""
    cid = world["cluster"].pk
    ids = [c.pk for c in world["cards"]]
    seen = []
    # (the gate closed: the drain that applies each batch does not tick on its own)
    redis_client().set(keys.tick_gate(cid), 1, px=600_000)
    for k, w in enumerate(loads):
        now = start + 6.0 * k
        monkeypatch.setattr(tickparts, "clock", lambda now=now: now)
        put(cid, {"power_w": [w] * 8}, ts=now, cards=ids)
        assert processing.tick(cid, force=True)
        s = state.plant_summary(cid)
        assert s is not None and s["ts"] == now
        seen.append(s)
    nxt = (start // 60 + 1) * 60 + 1.0
    monkeypatch.setattr(tickparts, "clock", lambda: nxt)
    put(cid, {"power_w": [loads[-1]] * 8}, ts=nxt, cards=ids)
    assert processing.tick(cid, force=True)
    return seen


def test_a_minute_of_ticks_is_one_plant_row(plant_world: dict[str, Any],
                                            monkeypatch: Any) -> None:
    from twin.facility.models import PlantMinute
    from twin.telemetry.models import TelemetryMinute

    cid = plant_world["cluster"].pk
    start = (tickparts.clock() // 60 - 5) * 60 + 2.0  # a whole minute in the recent past
    seen = _minute_of_ticks(plant_world, monkeypatch, start, [300.0, 500.0, 700.0, 600.0])
    minute = dt.datetime.fromtimestamp(start // 60 * 60, tz=dt.UTC)
    # written with the telemetry minute
    assert TelemetryMinute.objects.filter(cluster_id=cid, minute=minute).exists()
    row = PlantMinute.objects.get(cluster_id=cid, minute=minute)
    assert row.samples == 4
    it = [s["it_w"] for s in seen]
    fac = [s["facility_w"] for s in seen]
    # PUE over the minute is the energy ratio, not the mean of the ticks' PUEs
    assert row.pue == pytest.approx(sum(fac) / sum(it), rel=1e-4)
    assert row.it_w == pytest.approx(sum(it) / 4, rel=1e-5)
    assert row.facility_w == pytest.approx(sum(fac) / 4, rel=1e-5)
    (cdu,) = row.cdus
    loads = [s["cdus"][0]["load_fraction"] for s in seen]
    sup = [s["cdus"][0]["supply_c"] for s in seen]
    assert cdu["key"] == "cdu-0"
    assert cdu["load_fraction"] == pytest.approx(sum(loads) / 4, rel=1e-3)
    assert cdu["load_fraction_max"] == pytest.approx(max(loads), rel=1e-3)
    assert cdu["supply_c"] == pytest.approx(sum(sup) / 4, abs=2e-3)
    assert cdu["supply_c_max"] == pytest.approx(max(sup), abs=2e-3)
    headroom = min(s["feeds"][0]["headroom_w"] for s in seen)
    assert row.feed_headroom_w == pytest.approx(headroom, abs=0.1)
    assert row.feeds[0]["key"] == "feed-0"
    assert row.feeds[0]["headroom_w"] == pytest.approx(headroom, abs=0.1)
    # every rated element: its least headroom and peak load over the minute
    rated = {e["key"]: e for e in row.rated}
    assert set(rated) == {"feed-0", "ups-0", "pdu-r0", "ct-0", "cdu-0", "crah-0"}
    for key in ("pdu-r0", "ct-0"):
        ticks = [next(e for e in live.rated_rows(s["rated"]) if e["key"] == key)
                 for s in seen]
        assert rated[key]["headroom_w"] == pytest.approx(min(e["headroom_w"] for e in ticks),
                                                         abs=0.1)
        assert rated[key]["load_fraction_max"] == pytest.approx(
            max(e["load_fraction"] for e in ticks), rel=1e-3)
    assert rated["pdu-r0"]["chain"] == "power" and rated["ct-0"]["kind"] == "cooling_tower"
    assert row.caps_binding is None and row.cards_capped is None  # capping off
    # the next minute's accumulator is there, this one's is gone; written once
    r = redis_client()
    assert not r.exists(history.minute_key(conf().prefix, cid, int(start // 60)))
    assert r.exists(history.minute_key(conf().prefix, cid, int(start // 60) + 1))
    assert not history.persist_minute(r, conf().prefix, cid, int(start // 60))
    assert PlantMinute.objects.filter(cluster_id=cid).count() == 1
    # kept as long as the telemetry minutes
    from twin.telemetry import retention

    assert retention.cleanup()["plant_minutes"] == 0
    PlantMinute.objects.filter(pk=row.pk).update(minute=row.minute - dt.timedelta(days=8))
    assert retention.cleanup()["plant_minutes"] == 1


def test_caps_binding_is_counted(plant_world: dict[str, Any], monkeypatch: Any) -> None:
    """With capping on and r0's cards over its budget, the minute counts the rack's
    limit binding and the cards capped."""
    from twin.facility.models import CappingPolicy, PlantMinute
    from twin.hardware.models import Rack

    cid = plant_world["cluster"].pk
    rack = Rack.objects.get(pk=plant_world["rack"].pk)
    lay = state.layout(cid)
    k = lay.groups["rack"].names.index("r0")
    rack.power_budget_w = 3000.0 + float(lay.groups["rack"].static_w[k])
    rack.save()
    CappingPolicy.objects.create(cluster_id=cid, mode="propose")
    start = (tickparts.clock() // 60 - 5) * 60 + 2.0
    _minute_of_ticks(plant_world, monkeypatch, start, [600.0, 600.0])
    row = PlantMinute.objects.get(cluster_id=cid)
    assert row.caps_binding == 1 and row.cards_capped == 8


def test_the_history_endpoint(plant_world: dict[str, Any], monkeypatch: Any,
                              other_cluster: Any) -> None:
    from twin.facility.models import PlantMinute
    from twin.hardware.models import ClusterGrant

    cid = plant_world["cluster"].pk
    base = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    PlantMinute.objects.bulk_create(
        [PlantMinute(cluster_id=cid, minute=base + dt.timedelta(minutes=m), samples=12,
                     pue=1.1, it_w=1e4, facility_w=1.1e4) for m in range(5)]
        + [PlantMinute(cluster_id=other_cluster.pk, minute=base, samples=12, pue=1.3)])
    user = User.objects.create_user("plant-viewer", "v@example.com", "pw-view-123")
    c = Client()
    c.force_login(user)
    got = c.get(f"/api/facility/history/?cluster={cid}&since=2026-01-01T00:02:00Z")
    assert got.status_code == 200, got.content
    rows = got.json()["results"]
    assert [r["minute"] for r in rows] == [
        f"2026-01-01T00:0{m}:00Z" for m in (2, 3, 4)]
    assert rows[0]["pue"] == 1.1 and rows[0]["samples"] == 12
    assert set(rows[0]) >= {"cdus", "feeds", "feed_headroom_w", "caps_binding"}
    until = c.get(f"/api/facility/history/?cluster={cid}&until=2026-01-01T00:01:00Z").json()
    assert len(until["results"]) == 1
    # strict: the cluster is required, unknown parameters and bad values are 400s
    missing = c.get("/api/facility/history/")
    assert missing.status_code == 400 and "cluster" in missing.json()
    bad = c.get(f"/api/facility/history/?cluster={cid}&since=yesterday&level=rack")
    assert bad.status_code == 400 and set(bad.json()) == {"since", "level"}
    assert c.get(f"/api/facility/history/?cluster={cid}&limit=1501").status_code == 400
    assert len(c.get(f"/api/facility/history/?cluster={cid}&limit=2").json()["results"]) == 2
    # per-cluster access: a user granted only the other cluster sees none of these
    ClusterGrant.objects.create(user=user, cluster=other_cluster, level="see")
    c.force_login(User.objects.get(pk=user.pk))
    assert c.get(f"/api/facility/history/?cluster={cid}").json()["results"] == []
    theirs = c.get(f"/api/facility/history/?cluster={other_cluster.pk}").json()["results"]
    assert [r["pue"] for r in theirs] == [1.3]
    # no login: 401/403
    assert Client().get(f"/api/facility/history/?cluster={cid}").status_code in (401, 403)


@pytest.fixture
def other_cluster(db: Any) -> Any:
    from twin.hardware.models import Cluster

    return Cluster.objects.create(name="elsewhere")
