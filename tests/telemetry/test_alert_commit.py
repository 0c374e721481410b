"""The tick decides its alerts before its event and writes their rows after it
(issue 22, item 2): the event never waits on PostgreSQL's commit, an alert opened
in a tick is in the database when the tick ends, and a commit that fails is retried
by the next tick, with its own times, without breaking the tick or losing a
transition."""
from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest
from django.db import OperationalError

from tests.telemetry.test_state import put
from twin.telemetry import bridge, keys, processing, state
from twin.telemetry.alerts import rules
from twin.telemetry.models import Alert, CardHealth
from twin.telemetry.processing import tickparts
from twin.telemetry.state import ALERT_EVENT, TICK_EVENT


@pytest.fixture
def world(tiny_cluster, settings, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The tiny cluster with undamped rules (open and close at once), a clock the
    test moves, and every message sent to the cluster's group recorded — a tick
    event with the number of alert rows in the database when it went out."""
    settings.TELEMETRY_THRESHOLDS = {r.key: {"min_s": 0.0, "clear_s": 0.0} for r in rules()}
    now = [time.time() - 60.0]
    monkeypatch.setattr(tickparts, "clock", lambda: now[0])
    cid = tiny_cluster["cluster"].pk
    sent: list[tuple[str, Any]] = []
    real = bridge.group_send

    def record(group: str, message: dict[str, Any]) -> bool:
        if message["type"] == TICK_EVENT:
            sent.append((TICK_EVENT, Alert.objects.filter(cluster_id=cid).count()))
        elif message["type"] == ALERT_EVENT:
            sent.append((message["event"], message["alert"]["id"]))
        return real(group, message)

    monkeypatch.setattr(bridge, "group_send", record)
    return {"cid": cid, "cards": [c.pk for c in tiny_cluster["cards"]], "now": now,
            "sent": sent}


def _tick(w: dict[str, Any], at: float, xid: float) -> int:
    """Card 0 reports XID ``xid`` (the others nothing wrong) at ``at`` s; one tick."""
    w["now"][0] = now = w["now"][0] + at
    put(w["cid"], {"xid_errors": [xid] + [0.0] * 7, "gpu_temp_c": [60.0] * 8}, ts=now,
        cards=w["cards"])
    w["sent"].clear()
    seq = processing.tick(w["cid"], force=True)
    assert seq
    return seq


@pytest.fixture
def db_down(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """While ``down[0]``, inserting alert rows fails as a lost connection does."""
    down = [True]
    real = Alert.objects.bulk_create

    def bulk_create(objs: Any, *args: Any, **kwargs: Any) -> Any:
        if down[0]:
            raise OperationalError("server closed the connection unexpectedly")
        return real(objs, *args, **kwargs)

    monkeypatch.setattr(Alert.objects, "bulk_create", bulk_create)
    yield down


def _pending(cid: int) -> list[Any]:
    lay = state.layout(cid)
    raw = state.redis_client().get(keys.alerts(cid, lay.version))
    return list(msgpack.unpackb(raw, strict_map_key=False).get("~ops", []))


def test_the_tick_event_goes_out_before_the_alert_rows_are_written(world):
    _tick(world, 1.0, 0.0)
    _tick(world, 1.0, 79.0)
    alert = Alert.objects.get(rule="xid")  # in the database when the tick ends
    assert alert.card_id == world["cards"][0] and alert.ended is None
    # The event went out with no row written yet; the alert's own event after it.
    assert world["sent"] == [(TICK_EVENT, 0), ("opened", alert.pk)]
    assert _pending(world["cid"]) == []


def test_a_failed_alert_commit_breaks_nothing_and_is_written_by_a_later_tick(world, db_down):
    cid = world["cid"]
    _tick(world, 1.0, 0.0)
    _tick(world, 1.0, 79.0)  # opens: the commit fails
    opened_at = world["now"][0]
    assert not Alert.objects.exists()
    assert world["sent"] == [(TICK_EVENT, 0)]  # the tick's event, no alert event
    # The live health says it, and the stages after the commit still ran.
    assert state.health(cid)[0] == state.HEALTH_CODES["critical"]
    assert CardHealth.objects.get(card_id=world["cards"][0]).status == "critical"
    assert [op[0] for op in _pending(cid)] == ["opened"]

    _tick(world, 2.0, 0.0)  # clears: fails again, both writes kept in order
    closed_at = world["now"][0]
    _tick(world, 3.0, 79.0)  # opens again: fails again
    reopened_at = world["now"][0]
    assert not Alert.objects.exists()
    assert [op[0] for op in _pending(cid)] == ["opened", "closed", "opened"]

    db_down[0] = False
    _tick(world, 1.0, 79.0)  # the database is back: every transition, with its times
    rows = list(Alert.objects.filter(rule="xid").order_by("started"))
    assert [(a.started, a.ended) for a in rows] == [
        (_at(opened_at), _at(closed_at)), (_at(reopened_at), None)]
    first, second = rows
    assert world["sent"] == [(TICK_EVENT, 0), ("opened", first.pk), ("closed", first.pk),
                             ("opened", second.pk)]
    assert _pending(cid) == []
    _tick(world, 1.0, 0.0)  # the state holds the written row's id: it closes that one
    second.refresh_from_db()
    assert second.ended == _at(world["now"][0])
    assert Alert.objects.filter(ended__isnull=True).count() == 0


def test_an_alert_already_open_in_the_database_is_adopted_not_duplicated(world):
    """An insert that meets an open row of the same subject (the unique constraint:
    its state was lost after an earlier commit) takes that row instead of failing."""
    cid, card = world["cid"], world["cards"][0]
    _tick(world, 1.0, 0.0)  # a damping state without the alert
    before = Alert.objects.create(
        cluster_id=cid, rule="xid", severity="critical", level="card", value=79.0,
        threshold=0.0, message="card: XID 79", subject=f"card:{card}", card_id=card,
        started=_at(world["now"][0]))
    _tick(world, 1.0, 79.0)
    assert list(Alert.objects.filter(rule="xid").values_list("pk", flat=True)) == [before.pk]
    assert world["sent"] == [(TICK_EVENT, 1), ("opened", before.pk)]
    assert _pending(cid) == []
    _tick(world, 1.0, 0.0)
    before.refresh_from_db()
    assert before.ended == _at(world["now"][0])


def _at(ts: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(ts, tz=dt.UTC)
