"""``simulation.snapshot``: the frozen live state round-trips through JSON exactly, stays
compact at 65,536 cards, and a bad field is named."""
from __future__ import annotations

import json

import numpy as np
import pytest

from simulation.snapshot import (
    CardReadings,
    LiveSnapshot,
    PendingJob,
    PlantReadings,
    RackPower,
    RunningJob,
    pack_ids,
    unpack_ids,
)
from simulation.topology import TopologyError


def snapshot(n: int = 16, cap: bool = False) -> LiveSnapshot:
    rng = np.random.default_rng(0)
    ids = np.concatenate([np.arange(100, 100 + n // 2), np.arange(5000, 5000 + n - n // 2)])
    power = rng.uniform(80, 700, n).astype(np.float32)
    power[3] = np.nan  # never reported
    temp = rng.uniform(30, 85, n).astype(np.float32)
    util = rng.uniform(0, 1, n).astype(np.float32)
    return LiveSnapshot(
        taken_at=1_764_800_000.25, cluster_id=7, cluster_name="demo", has_live_state=True,
        cards_down={"failed": (101, 102), "stale": (5000,)}, servers_down={"down": (3,)},
        links_down={"down": (9, 10, 11), "degraded": (40,)},
        facility_down={"failed": ("cooling:cdu-1",), "degraded": ("power:feed-b",)},
        devices_down={"failed": (900,)},
        running=(RunningJob(1, "train", "team-a", 5, (100, 104), (1000, 500),
                            1_764_790_000.0, 1_764_810_000.0, 0.5),
                 RunningJob(2, "infer", "team-b", 0, (105,), (250,), None, None, None)),
        queue=(PendingJob(3, "big", "team-a", 9, 64, 1000, True, 3600.0, 1_764_799_000.0),),
        readings=CardReadings(ids, power, temp, util,
                              rng.uniform(300, 700, n).astype(np.float32) if cap else None),
        racks=RackPower((1, 2), (31_000.5, None), (40_000.0, 40_000.0)), seq=42, note="",
        plant=PlantReadings((1, 2), (32.5, None), (44.0, None), (61.25, None),
                            ({"key": "cdu-0", "supply_c": 32.0, "return_c": 44.5,
                              "flow_kg_s": 3.5, "heat_w": 61_000.0},), 1.07))


def test_the_plant_caps_and_elements_down_are_kept_and_summarised() -> None:
    """What a fork freezes beyond cards and jobs: facility elements and devices down,
    the binding caps, the plant's temperatures — in the JSON and the summary."""
    snap = snapshot(cap=True)
    d = json.loads(json.dumps(snap.to_dict()))
    assert d["facility_down"] == {"degraded": ["power:feed-b"], "failed": ["cooling:cdu-1"]}
    assert d["plant"]["supply_c"] == [32.5, None] and d["plant"]["cdus"][0]["key"] == "cdu-0"
    summary = snap.summary()
    assert summary["facility_down"] == {"degraded": 1, "failed": 1}
    assert summary["caps"] == 16 and summary["plant"] is True
    assert summary["devices_down"] == {"failed": 1}
    # the first shape (a bare list of keys) reads as failed
    d["facility_down"] = ["cooling:cdu-1"]
    assert LiveSnapshot.from_dict(d).facility_down == {"failed": ("cooling:cdu-1",)}
    d["plant"]["return_c"] = [1.0]
    with pytest.raises(TopologyError) as exc:
        LiveSnapshot.from_dict(d)
    assert exc.value.field == "snapshot.plant.return_c"


@pytest.mark.parametrize("cap", [False, True])
def test_round_trip_through_json_is_exact(cap: bool) -> None:
    snap = snapshot(cap=cap)
    again = LiveSnapshot.from_dict(json.loads(json.dumps(snap.to_dict())))
    assert again == snap
    assert again.digest() == snap.digest()
    assert again.readings is not None and snap.readings is not None
    assert np.isnan(again.readings.power_w[3])  # NaN survives: "no reading"
    assert again.readings.reporting == 15
    assert again.running[0].remaining_s(snap.taken_at) == pytest.approx(9_999.75)
    assert again.running[1].remaining_s(snap.taken_at) is None


def test_a_changed_reading_changes_the_digest() -> None:
    a = snapshot()
    b_dict = a.to_dict()
    assert a.readings is not None
    power = a.readings.power_w.copy()
    power[0] += 1
    b = LiveSnapshot.from_dict({**b_dict, "readings": CardReadings(
        a.readings.card_ids, power, a.readings.temp_c, a.readings.util).to_dict()})
    assert b != a and b.digest() != a.digest()


def test_ids_pack_into_runs() -> None:
    ids = [3, 4, 5, 9, 10, 2]
    assert pack_ids(ids) == [[3, 3], [9, 2], [2, 1]]
    assert unpack_ids(pack_ids(ids)).tolist() == ids
    assert pack_ids([]) == [] and unpack_ids([]).tolist() == []


def test_65536_cards_stay_compact() -> None:
    """A 65,536-card cluster in layout order: the card ids are one run, three float32
    metrics in base64 are 4/3 × 4 bytes a card each — about 1 MB in all."""
    n = 65_536
    ids = np.arange(1, n + 1)
    vals = np.linspace(100, 700, n, dtype=np.float32)
    snap = LiveSnapshot(0.0, 1, "big", True, readings=CardReadings(ids, vals, vals, vals))
    blob = json.dumps(snap.to_dict())
    assert snap.to_dict()["readings"]["card_ids"] == [[1, n]]
    assert len(blob) < 3 * 4 * n * 4 / 3 + 10_000
    assert LiveSnapshot.from_dict(json.loads(blob)) == snap


def test_inventory_only_snapshot() -> None:
    snap = LiveSnapshot(1.0, 2, "cold", False, cards_down={"failed": (4,)},
                        note="no live state")
    d = snap.to_dict()
    assert d["readings"] is None and d["racks"] is None
    assert LiveSnapshot.from_dict(d) == snap
    assert snap.summary()["reporting"] == 0 and snap.summary()["cards_down"] == {"failed": 1}


@pytest.mark.parametrize(("mutate", "field"), [
    (lambda d: d.update(version=99), "snapshot.version"),
    (lambda d: d.pop("taken_at"), "snapshot.taken_at"),
    (lambda d: d["cards_down"].update(failed=[[1, 0]]), "snapshot.cards_down.failed[0]"),
    (lambda d: d["readings"]["power_w"].update(b64="AAAA"), "snapshot.readings.power_w"),
    (lambda d: d["running"][0].update(share_milli=[1000, 1000, 1000]),
     "snapshot.running[0].share_milli"),
    (lambda d: d["running"][0].update(cards=[5]), "snapshot.running[0].cards[0]"),
    (lambda d: d["racks"].update(draw_w=[1.0]), "snapshot.racks.draw_w"),
])
def test_bad_input_names_the_field(mutate, field: str) -> None:
    data = json.loads(json.dumps(snapshot().to_dict()))
    mutate(data)
    with pytest.raises(TopologyError) as err:
        LiveSnapshot.from_dict(data)
    assert err.value.field == field
