"""The plant in the live tick: measured rack power in, coolant, CDU and feed figures and
PUE out, in the websocket frame — through the real ingest queue, tick and Redis."""
from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from tests.telemetry.test_state import put
from twin.telemetry import processing, state

pytestmark = pytest.mark.usefixtures("plant_namespace")


def _draws(cid: int) -> dict[str, float]:
    roll = state.rollup(cid, "rack", "power_w")
    return dict(zip(roll["names"], np.nan_to_num(roll["draw_w"]).tolist(), strict=True))


def test_a_tick_steps_the_plant_with_the_racks_measured_power(plant_world: dict[str, Any]
                                                              ) -> None:
    cid = plant_world["cluster"].pk
    ids = [c.pk for c in plant_world["cards"]]
    put(cid, {"power_w": [600.0] * 8}, cards=ids)
    processing.tick(cid, force=True)
    s = state.plant_summary(cid)
    assert s is not None
    lay = state.layout(cid)
    racks = lay.groups["rack"]
    static = dict(zip(racks.names, racks.static_w.tolist(), strict=True))
    r0_w = 8 * 600.0 + static["r0"]
    # IT power is what the racks measured: r0's cards + its static draw; net0 (switches,
    # no card: not in the telemetry layout) its nameplate draw
    net0 = plant_world["net_rack"]
    from twin.hardware.models import Rack

    net_w = Rack.objects.filter(pk=net0.pk).draw_by_rack().rows()[0].w
    assert net_w > 0 and "net0" not in static
    assert s["it_w"] == pytest.approx(r0_w + net_w, rel=1e-4)
    assert _draws(cid)["r0"] == pytest.approx(r0_w, rel=1e-6)
    # PUE from losses, pumps and fans: above 1
    assert s["facility_w"] > s["it_w"] and s["pue"] == pytest.approx(
        s["facility_w"] / s["it_w"], rel=1e-3)
    # first tick starts from the steady state: the CDU takes r0's liquid share (0.8)
    (cdu,) = s["cdus"]
    assert cdu["key"] == "cdu-0" and cdu["heat_w"] == pytest.approx(0.8 * r0_w, rel=1e-3)
    # coolant rise across r0 = Q / (m c_p) (PG25)
    per_rack = state.plant_racks(cid, lay.version)
    assert per_rack is not None
    k = racks.names.index("r0")
    rise = float(per_rack["return_c"][k] - per_rack["supply_c"][k])
    assert rise == pytest.approx(0.8 * r0_w / (float(per_rack["flow_kg_s"][k]) * 3940.0),
                                 rel=1e-3)
    assert [f["key"] for f in s["feeds"]] == ["feed-0"] and s["feeds"][0]["headroom_w"] > 0

    # A load step: the rack's coolant warms with its first-order lag, not at once.
    before = float(per_rack["return_c"][k])
    time.sleep(1.1)
    put(cid, {"power_w": [700.0] * 8}, cards=ids)
    processing.tick(cid, force=True)
    after = state.plant_racks(cid, lay.version)
    assert after is not None
    hot_w = 8 * 700.0 + static["r0"]
    steady = float(per_rack["supply_c"][k]) + 0.8 * hot_w / (
        float(per_rack["flow_kg_s"][k]) * 3940.0)
    assert before < float(after["return_c"][k]) < steady


def test_the_cluster_frame_carries_a_facility_section(plant_world: dict[str, Any]) -> None:
    from twin.live import frames
    from twin.live.protocol import SubscriptionKey

    cid = plant_world["cluster"].pk
    put(cid, {"power_w": [500.0] * 8}, cards=[c.pk for c in plant_world["cards"]])
    processing.tick(cid, force=True)
    built = frames.build(cid, SubscriptionKey("cluster", None, "power_w"))
    plant = built.extra["facility"]
    assert plant["pue"] > 1.0 and plant["cdus"][0]["key"] == "cdu-0"
    # per rack in the frame's rack order: r0 liquid (coolant ~ its CDU supply), net0 air
    names = built.extra["names"]
    assert len(plant["rack_supply_c"]) == len(names)
    assert plant["rack_card_c"][names.index("r0")] > plant["rack_supply_c"][names.index("r0")]


def test_every_cluster_frame_carries_the_cdu_loops_of_its_tick(
        plant_world: dict[str, Any]) -> None:
    """Not only the snapshot: each tick's frame has the CDU loops' figures (columns in the
    snapshot's ``facility.cdus`` order), so the panel's loops move with the plant."""
    import json

    from twin.live import frames
    from twin.live.protocol import SubscriptionKey

    cid = plant_world["cluster"].pk
    cards = [c.pk for c in plant_world["cards"]]
    key = SubscriptionKey("cluster", None, "power_w")
    put(cid, {"power_w": [200.0] * 8}, cards=cards)
    processing.tick(cid, force=True)
    first = json.loads(frames.build(cid, key).frame_text)
    (cdu,) = state.plant_summary(cid)["cdus"]  # type: ignore[index]
    loops = first["facility"]["cdu_loops"]
    assert first["type"] == "frame" and "cdus" not in first["facility"]
    assert loops["supply_c"] == [round(cdu["supply_c"], 2)]
    assert loops["return_c"] == [round(cdu["return_c"], 2)]
    assert loops["flow_kg_s"] == [pytest.approx(cdu["flow_kg_s"], abs=1e-3)]
    assert loops["heat_w"] == [round(cdu["heat_w"])]
    assert loops["load_fraction"] == [round(cdu["load_fraction"], 4)]
    assert first["facility"]["cdu_measured"] == {} and first["facility"]["pue"] > 1.0
    # the next tick under more load: the frame (not a new snapshot) carries the new heat
    time.sleep(0.2)
    put(cid, {"power_w": [700.0] * 8}, cards=cards)
    processing.tick(cid, force=True)
    second = json.loads(frames.build(cid, key).frame_text)
    assert second["seq"] > first["seq"]
    assert second["facility"]["cdu_loops"]["heat_w"][0] > loops["heat_w"][0]
    assert second["facility"]["cdu_loops"]["return_c"][0] > loops["return_c"][0]


def test_a_cluster_without_a_facility_ticks_as_before(tiny_cluster: dict[str, Any]) -> None:
    cid = tiny_cluster["cluster"].pk
    put(cid, {"power_w": [500.0] * 8}, cards=[c.pk for c in tiny_cluster["cards"]])
    assert processing.tick(cid, force=True)
    assert state.plant_summary(cid) is None
    from twin.live import frames
    from twin.live.protocol import SubscriptionKey

    assert "facility" not in frames.build(cid, SubscriptionKey("cluster", None,
                                                               "power_w")).extra


def test_an_agent_reads_its_cards_coolant_and_the_simulator_heats_from_it(
        plant_world: dict[str, Any]) -> None:
    from django.test import Client

    from twin.telemetry.models import TelemetryAgent
    from twin.telemetry.simulator import INLET_C, Simulator

    cid = plant_world["cluster"].pk
    _, token = TelemetryAgent.issue(plant_world["cluster"], "sim")
    agent = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    url = f"/api/telemetry/clusters/{cid}/coolant/"
    before = agent.get(url)
    assert before.status_code == 200 and before.json()["inlet_c"] is None  # no tick yet
    put(cid, {"power_w": [650.0] * 8}, cards=[c.pk for c in plant_world["cards"]])
    processing.tick(cid, force=True)
    body = agent.get(url).json()
    lay = state.layout(cid)
    racks = state.plant_racks(cid, lay.version)
    assert racks is not None and body["layout"] == lay.version
    k = lay.groups["rack"].names.index("r0")
    # every card of r0 gets r0's coolant supply (the CDU's, after the supply pipe)
    assert body["inlet_c"] == [pytest.approx(float(racks["supply_c"][k]), abs=0.01)] * 8
    assert Client().get(url).status_code == 401  # an agent token or a login
    # The simulator heats each card from the inlet it is given, not a constant 30 °C.
    sim = Simulator(np.full(8, 700.0), np.full(8, 70.0), np.full(8, 80.0), np.zeros(8),
                    fault_rate=0.0)
    assert sim.inlet_c.tolist() == [INLET_C] * 8
    sim.inlet_c = np.array(body["inlet_c"], dtype=float) + 10.0
    for _ in range(200):  # 200 s: ten thermal time constants
        sim.step(1.0)
    util = sim.util
    r_th = (75.0 - INLET_C) / 700.0
    power = 70.0 + 630.0 * util / 100.0
    np.testing.assert_allclose(sim.temp, sim.inlet_c + r_th * power, atol=3.0)


def test_metrics_expose_pue_cdus_and_feed_headroom(plant_world: dict[str, Any]) -> None:
    from tests.telemetry.test_monitoring import scrape

    cid = plant_world["cluster"].pk
    put(cid, {"power_w": [600.0] * 8}, cards=[c.pk for c in plant_world["cards"]])
    processing.tick(cid, force=True)
    s = state.plant_summary(cid)
    assert s is not None
    got = scrape()
    c = str(cid)
    assert got[("twin_facility_pue", (("cluster", c),))] == pytest.approx(s["pue"])
    assert got[("twin_facility_power_watts", (("cluster", c), ("part", "it")))] == \
        pytest.approx(s["it_w"])
    cdu = s["cdus"][0]
    assert got[("twin_facility_cdu_load_ratio", (("cdu", "cdu-0"), ("cluster", c)))] == \
        pytest.approx(cdu["load_fraction"])
    assert got[("twin_facility_cdu_temperature_celsius",
                (("cdu", "cdu-0"), ("cluster", c), ("side", "supply")))] == \
        pytest.approx(cdu["supply_c"])
    assert got[("twin_facility_feed_headroom_watts", (("cluster", c), ("feed", "feed-0")))] == \
        pytest.approx(s["feeds"][0]["headroom_w"])


def test_the_plant_rules_open_and_close_alerts_on_a_cdu_and_a_feed(
        plant_world: dict[str, Any], settings: Any) -> None:
    from twin.facility.models import CoolingElement, PowerElement
    from twin.telemetry.models import Alert

    settings.TELEMETRY_THRESHOLDS = {k: {"min_s": 0.0, "clear_s": 0.0}
                                     for k in ("cdu_load", "feed_headroom")}
    settings.FACILITY_LIVE_RECHECK_S = 0.0  # every tick looks for facility edits
    from django.utils import timezone
    cid = plant_world["cluster"].pk
    cards = [c.pk for c in plant_world["cards"]]
    put(cid, {"power_w": [600.0] * 8}, cards=cards)
    processing.tick(cid, force=True)
    assert not Alert.objects.filter(cluster_id=cid, level="facility").exists()
    # Behind the rating rule's back (a plant planned too small; update() skips the
    # rule, so it stamps last_updated itself): the CDU and the feed now carry more
    # than 90 % of what they are planned for, and the next tick's plant knows it.
    CoolingElement.objects.filter(pk=plant_world["cdu"].pk).update(
        capacity_kw=5.0, last_updated=timezone.now())
    PowerElement.objects.filter(pk=plant_world["feed"].pk).update(
        rating_kw=7.0, last_updated=timezone.now())
    processing.tick(cid, force=True)
    s = state.plant_summary(cid)
    assert s is not None and s["cdus"][0]["load_fraction"] > 0.9
    assert s["feeds"][0]["load_fraction"] > 0.9
    opened = {a.subject: a for a in Alert.objects.filter(cluster_id=cid, level="facility",
                                                         ended__isnull=True)}
    assert set(opened) == {"cdu:cdu-0", "feed:feed-0"}
    assert opened["cdu:cdu-0"].rule == "cdu_load" and opened["cdu:cdu-0"].severity == "warning"
    assert opened["feed:feed-0"].value == pytest.approx(s["feeds"][0]["load_fraction"])
    # Back to its planned size: the alerts close.
    CoolingElement.objects.filter(pk=plant_world["cdu"].pk).update(
        capacity_kw=100.0, last_updated=timezone.now())
    PowerElement.objects.filter(pk=plant_world["feed"].pk).update(
        rating_kw=400.0, last_updated=timezone.now())
    processing.tick(cid, force=True)
    assert not Alert.objects.filter(cluster_id=cid, level="facility",
                                    ended__isnull=True).exists()
    assert Alert.objects.filter(cluster_id=cid, level="facility").count() == 2


def test_a_sharded_round_steps_the_plant_with_what_a_whole_tick_gives(
        db: Any, settings: Any) -> None:
    from twin.hardware.builder import build_cluster
    from twin.telemetry import keys

    cid = build_cluster("seed-512", name="plant-shards", supernodes=3)["cluster_id"]
    lay = state.layout(cid)
    power = np.random.default_rng(1).uniform(300, 700, lay.n)
    settings.TELEMETRY_TICK_SHARD_CARDS = 512  # three shards of one supernode
    put(cid, {"power_w": power})
    state.redis_client().delete(keys.tick_gate(cid))
    assert processing.tick(cid, force=True)
    assert state.redis_client().hget(keys.tick_stats(cid), "shards") == b"3"  # a round ran
    sharded = state.plant_summary(cid)
    assert sharded is not None
    settings.TELEMETRY_TICK_SHARD_CARDS = 0  # the whole cluster in one tick
    assert processing.tick(cid, force=True)
    whole = state.plant_summary(cid)
    assert whole is not None and whole["ts"] > sharded["ts"]
    assert sharded["it_w"] == pytest.approx(whole["it_w"], rel=1e-5)
    assert sharded["it_w"] > power.sum()  # + every rack's static draw and network racks
    assert [c["key"] for c in sharded["cdus"]] == [c["key"] for c in whole["cdus"]]


def test_the_floor_colours_by_each_rack_coolant_supply(plant_world: dict[str, Any]) -> None:
    """The cluster view's ``coolant_supply_c`` is the plant's per-rack supply, in the
    frame's rack order, every frame (not only the snapshot); null before a plant tick."""
    from twin.live import frames
    from twin.live.protocol import SubscriptionKey

    cid = plant_world["cluster"].pk
    key = SubscriptionKey("cluster", None, "coolant_supply_c")
    assert "coolant_supply_c" in frames.view_metrics()["cluster"]
    assert "coolant_supply_c" not in frames.view_metrics()["rack"]
    put(cid, {"power_w": [500.0] * 8}, cards=[c.pk for c in plant_world["cards"]])
    processing.tick(cid, force=True)
    built = frames.build(cid, key)
    lay = state.layout(cid)
    racks = state.plant_racks(cid, lay.version)
    assert racks is not None
    assert built.head["values"] == pytest.approx(np.round(racks["supply_c"], 1).tolist())
    assert built.extra["unit"] == "°C" and built.extra["keys"] == lay.groups["rack"].ids.tolist()
    assert built.seq == state.rollup(cid, "rack", "power_w")["seq"]
    hello = frames.hello_message(cid, 2.0)
    assert [m["key"] for m in hello["plant_metrics"]] == ["coolant_supply_c", "cap_share"]


def test_without_a_plant_the_coolant_view_is_null(tiny_cluster: dict[str, Any]) -> None:
    from twin.live import frames
    from twin.live.protocol import SubscriptionKey

    cid = tiny_cluster["cluster"].pk
    put(cid, {"power_w": [500.0] * 8}, cards=[c.pk for c in tiny_cluster["cards"]])
    processing.tick(cid, force=True)
    built = frames.build(cid, SubscriptionKey("cluster", None, "coolant_supply_c"))
    assert built.head["values"] and set(built.head["values"]) == {None}
